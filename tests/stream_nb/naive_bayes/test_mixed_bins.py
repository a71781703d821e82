"""NaiveBayes with binned numbers (``numeric="bins"``, ``schema`` ``"bins"``, ``bin_edges``).

References: scikit-learn's CategoricalNB on the same bins (iris, 5 equal-width
bins), stream-nb's CategoricalNB fed the bin indices ``pd.cut`` would give
(every prequential step), and a model given the frozen cut points up front
(the warm-up and its replay).
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracles import assert_close
from sklearn.datasets import load_iris
from sklearn.naive_bayes import CategoricalNB as SkCategoricalNB
from sklearn.preprocessing import KBinsDiscretizer

from stream_nb import (
    CategoricalNB,
    ConfigError,
    IncompatibleModelError,
    InvalidEventError,
    Learner,
    NaiveBayes,
)
from stream_nb.checks import CHECKS, check_learner, suitable_events
from stream_nb.checks.engine import run_engine
from stream_nb.datasets import agrawal
from stream_nb.naive_bayes._numeric_bins import binned_column
from stream_nb.seminaive.discretise import equal_frequency_edges, equal_width_edges

Event = tuple[dict[str, Any], Hashable, float]
NAMES = ["f0", "f1", "f2", "f3"]


def iris_events() -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]:
    X, y = load_iris(return_X_y=True)
    return X, y, [{f: float(v) for f, v in zip(NAMES, row, strict=True)} for row in X]


def binned(x: Mapping[str, Any], edges: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """``x`` with each feature of ``edges`` replaced by its bin (``pd.cut``'s codes)."""
    return {
        f: bisect_right(edges[f], v) if f in edges and v is not None else v for f, v in x.items()
    }


def numeric_stream(seed: int, n: int, weighted: bool = True) -> list[Event]:
    rng = random.Random(seed)
    events = []
    for _ in range(n):
        y = rng.choice(["a", "b", 7])
        centre = {"a": 0.0, "b": 1.5, 7: -2.0}[y]
        x: dict[str, Any] = {
            "u": rng.gauss(centre, 1.0),
            "v": rng.randint(0, 9) if rng.random() < 0.9 else None,
            "w": rng.expovariate(1.0 + (y == "b")),
            "colour": rng.choice(["red", "green", "blue"]),
        }
        events.append((x, y, rng.choice([1.0, 0.5, 2.0]) if weighted else 1.0))
    return events


# ------------------------------------------------------------------ references
def test_iris_five_equal_width_bins_equal_scikit_learns_categorical_nb() -> None:
    X, y, xs = iris_events()
    kbins = KBinsDiscretizer(n_bins=5, encode="ordinal", strategy="uniform").fit(X)
    edges = {f: [float(e) for e in kbins.bin_edges_[j][1:-1]] for j, f in enumerate(NAMES)}
    linspace = {
        f: [float(e) for e in np.linspace(X[:, j].min(), X[:, j].max(), 6)[1:-1]]
        for j, f in enumerate(NAMES)
    }
    assert edges == linspace
    model = NaiveBayes(numeric="bins", bin_edges=edges)
    for x, label in zip(xs, y, strict=True):
        model.learn_one(x, int(label))
    sk = SkCategoricalNB(alpha=1.0).fit(kbins.transform(X).astype(int), y)
    want = sk.predict_proba(kbins.transform(X).astype(int))
    worst = 0.0
    for x, row in zip(xs, want, strict=True):
        got = model.predict_proba_one(x)
        worst = max(worst, *(abs(got[int(c)] - p) for c, p in zip(sk.classes_, row, strict=True)))
    assert worst <= 1e-9
    assert model.kinds() == dict.fromkeys(NAMES, "bins")


@pytest.mark.parametrize("alpha", [1.0, 0])
@pytest.mark.parametrize("half_life", [None, 50.0])
def test_every_step_equals_categorical_nb_on_cut_values(
    half_life: float | None, alpha: float
) -> None:
    # alpha=0: the bins' zero counts follow the maximum-likelihood rule with the rest
    events = numeric_stream(3, 400)
    edges = {"u": [-1.0, 0.0, 1.0, 2.5], "w": [0.2, 0.7, 1.5], "v": [2.5, 6.5]}
    model = NaiveBayes(alpha=alpha, numeric="bins", bin_edges=edges, half_life=half_life)
    reference = CategoricalNB(alpha=alpha, half_life=half_life)
    for x, y, w in events:
        probe = {**x, "u": x["u"] * 1.3}
        for p in (x, probe, {"u": 9.0}):
            assert_close(
                model.predict_log_proba_one(p),
                reference.predict_log_proba_one(binned(p, edges)),
                1e-12,
            )
        model.learn_one(x, y, w)
        reference.learn_one(binned(x, edges), y, w)
    assert model.kinds() == {"colour": "categorical", "u": "bins", "v": "bins", "w": "bins"}


def test_schema_bins_one_feature_others_gaussian() -> None:
    # "u" binned through the schema (cut points from its warm-up), "w" stays Gaussian:
    # once frozen, equal to NaiveBayes given u's bins as categories
    events = numeric_stream(4, 300, weighted=False)
    model = NaiveBayes(schema={"u": "bins"}, warmup=40, n_bins=4)
    for x, y, w in events[:40]:
        model.learn_one(x, y, w)
    edges = equal_frequency_edges([x["u"] for x, _, _ in events[:40]], 4)
    assert model.bins.edges("u") == edges
    reference = NaiveBayes(schema={"u": "categorical"})
    for x, y, w in events[:40]:
        reference.learn_one(binned(x, {"u": edges}), y, w)
    for x, y, w in events[40:]:
        assert_close(
            model.predict_log_proba_one(x),
            reference.predict_log_proba_one(binned(x, {"u": edges})),
            1e-12,
        )
        model.learn_one(x, y, w)
        reference.learn_one(binned(x, {"u": edges}), y, w)
    assert model.kinds()["w"] == "gaussian" and model.kinds()["u"] == "bins"


# ------------------------------------------------------------------ the warm-up
@pytest.mark.parametrize("strategy", ["frequency", "width"])
def test_warm_up_is_gaussian_then_exactly_the_model_given_the_edges(strategy: str) -> None:
    events = numeric_stream(5, 260, weighted=False)
    warm = NaiveBayes(numeric="bins", warmup=60, n_bins=5, strategy=strategy)
    gaussian = NaiveBayes()
    for x, y, w in events[:59]:  # before the cut points freeze: the Gaussian model
        assert warm.predict_log_proba_one(x) == gaussian.predict_log_proba_one(x)
        warm.learn_one(x, y, w)
        gaussian.learn_one(x, y, w)
    assert warm.kinds()["u"] == "bins" and not warm.bins.frozen("u")
    warm.learn_one(*events[59][:2])  # the 60th value freezes u's and w's cut points
    place = equal_width_edges if strategy == "width" else equal_frequency_edges
    for f in ("u", "w"):
        assert warm.bins.edges(f) == place([x[f] for x, _, _ in events[:60]], 5)
    assert not warm.bins.frozen("v")  # (some of v's values were missing)
    edges = {f: warm.bins.edges(f) for f in ("u", "w")}
    given = NaiveBayes(numeric="bins", warmup=60, n_bins=5, strategy=strategy, bin_edges=edges)
    for x, y, w in events[:60]:
        given.learn_one(x, y, w)
    for x, y, w in events[60:]:
        assert_close(warm.predict_log_proba_one(x), given.predict_log_proba_one(x), 1e-12)
        warm.learn_one(x, y, w)
        given.learn_one(x, y, w)
    assert warm.bins.frozen("v") and warm.bins.edges("v") == given.bins.edges("v")
    mine, theirs = warm.to_state()["stats"], given.to_state()["stats"]
    assert mine["counts"] == theirs["counts"] and mine["gaussian"] == theirs["gaussian"]


def test_weighted_warm_up_replays_the_raw_weights() -> None:
    events = numeric_stream(6, 200, weighted=True)
    model = NaiveBayes(numeric="bins", warmup=50, n_bins=3)
    for x, y, w in events:
        model.learn_one(x, y, w)
    edges = {f: model.bins.edges(f) for f in ("u", "v", "w")}
    reference = CategoricalNB()
    for x, y, w in events:
        reference.learn_one(binned(x, edges), y, w)
    for x, _, _ in events[:50]:
        assert_close(
            model.predict_log_proba_one(x), reference.predict_log_proba_one(binned(x, edges)), 1e-12
        )


# ------------------------------------------------------------------ state, merge, batches
def test_state_round_trip_during_and_after_the_warm_up() -> None:
    events = numeric_stream(7, 160)
    model = NaiveBayes(numeric="bins", warmup=50, n_bins=4, half_life=80.0)
    for i, (x, y, w) in enumerate(events):
        model.learn_one(x, y, w)
        if i in (20, 49, 70, 120):
            copy = Learner.from_state(orjson.loads(orjson.dumps(model.to_state())))
            assert isinstance(copy, NaiveBayes)
            for x2, y2, w2 in events[i + 1 : i + 40]:
                assert copy.predict_log_proba_one(x2) == model.predict_log_proba_one(x2)
                copy.learn_one(x2, y2, w2)
                model.learn_one(x2, y2, w2)
            assert copy.to_state() == model.to_state()
            model = copy


def test_merge_while_warming_equals_learning_both_streams() -> None:
    events = numeric_stream(8, 300, weighted=False)
    first, second = events[:30], events[30:80]
    params: dict[str, Any] = {"numeric": "bins", "warmup": 60, "n_bins": 4}
    a, b, union = NaiveBayes(**params), NaiveBayes(**params), NaiveBayes(**params)
    for x, y, w in first:
        a.learn_one(x, y, w)
    for x, y, w in second:
        b.learn_one(x, y, w)
    for x, y, w in first + second:
        union.learn_one(x, y, w)
    assert not b.bins.frozen("u")  # (50 values: both still warming up)
    a.merge(b)
    for f in ("u", "w"):
        assert a.bins.edges(f) == union.bins.edges(f)
    for x, _, _ in events[80:]:
        assert_close(a.predict_log_proba_one(x), union.predict_log_proba_one(x), 1e-9)


def test_merge_binned_with_warming_and_refusals() -> None:
    events = numeric_stream(9, 200, weighted=False)
    edges = {"u": [0.0, 1.0]}
    fixed = NaiveBayes(schema={"u": "bins"}, bin_edges=edges, warmup=500)
    warming = NaiveBayes(schema={"u": "bins"}, warmup=500)
    union = NaiveBayes(schema={"u": "bins"}, bin_edges=edges, warmup=500)
    with pytest.raises(IncompatibleModelError, match="bin_edges"):
        fixed.merge(warming)  # (other parameters)
    other_fixed = NaiveBayes(schema={"u": "bins"}, bin_edges={"u": [0.5]}, warmup=500)
    with pytest.raises(IncompatibleModelError, match="bin_edges"):
        fixed.merge(other_fixed)
    for x, y, w in events:
        fixed.learn_one(x, y, w)
        union.learn_one(x, y, w)
    assert fixed.to_state() == union.to_state()


def test_a_tracked_delta_bins_like_its_model() -> None:
    # model sync: the delta takes the model's cut points and never freezes its own; merged
    # into a copy of the model as it was, it gives the model that learned everything
    events = numeric_stream(12, 240, weighted=False)
    model = NaiveBayes(numeric="bins", warmup=40, n_bins=3)
    for x, y, w in events[:30]:  # u and w still warming up
        model.learn_one(x, y, w)
    base = Learner.from_state(model.to_state())
    model.track_delta()
    delta = model._delta
    assert isinstance(delta, NaiveBayes)
    for x, y, w in events[30:200]:
        model.learn_one(x, y, w)
    assert model.bins.frozen("u") and not delta.bins.frozen("u")
    base.merge(delta)
    assert isinstance(base, NaiveBayes) and base.bins.edges("u") == model.bins.edges("u")
    for x, _, _ in events[200:]:
        assert_close(base.predict_log_proba_one(x), model.predict_log_proba_one(x), 1e-9)


def test_frozen_on_one_side_only_bins_the_other_sides_records() -> None:
    events = numeric_stream(10, 200, weighted=False)
    params: dict[str, Any] = {"numeric": "bins", "warmup": 40, "n_bins": 3}
    early, late = NaiveBayes(**params), NaiveBayes(**params)
    for x, y, w in events[:60]:  # froze
        early.learn_one(x, y, w)
    late.defer_binning()  # never freezes on its own (as a sync worker)
    for x, y, w in events[60:100]:
        late.learn_one(x, y, w)
    assert early.bins.frozen("u") and not late.bins.frozen("u")
    edges = {f: early.bins.edges(f) for f in ("u", "v", "w")}
    reference = CategoricalNB()
    for x, y, w in events[:100]:
        reference.learn_one(binned(x, edges), y, w)
    merged = Learner.from_state(early.to_state())
    merged.merge(late)
    for x, _, _ in events[100:150]:
        assert_close(
            merged.predict_log_proba_one(x), reference.predict_log_proba_one(binned(x, edges)), 1e-9
        )
    late.merge(early)  # the other way round: late freezes with early's cut points
    for x, _, _ in events[100:150]:
        assert_close(late.predict_log_proba_one(x), merged.predict_log_proba_one(x), 1e-9)


def test_batches_take_the_kernel_once_the_bins_froze() -> None:
    events = numeric_stream(11, 900, weighted=False)
    fast, slow = NaiveBayes(numeric="bins", warmup=50), NaiveBayes(numeric="bins", warmup=50)
    xs = [dict(x) for x, _, _ in events]
    ys = [y for _, y, _ in events]
    ones = [1.0] * len(xs)
    names = tuple(xs[0])

    def columns(lo: int, hi: int) -> list[list[Any]]:
        return [[x[f] for x in xs[lo:hi]] for f in names]

    for model in (fast, slow):
        for x, y in zip(xs[:20], ys[:20], strict=True):
            model.learn_one(x, y)
    # warming up: the values are recorded one by one (the engine builds no columns)
    assert not fast.columns_supported and fast.bins.records
    assert fast.predict_learn_columns(names, columns(20, 120), ys[20:120]) is None
    got = fast.predict_learn_many(xs[20:120], ys[20:120], ones[20:120])
    assert got == Learner.predict_learn_many(slow, xs[20:120], ys[20:120], ones[20:120])
    assert fast.to_state() == slow.to_state()
    # frozen: the column kernel, with the bins as categorical values
    assert fast.columns_supported and not fast.bins.records
    out = fast.predict_learn_columns(names, columns(120, 500), ys[120:500])
    assert out is not None
    want = Learner.predict_learn_many(slow, xs[120:500], ys[120:500], ones[120:500])
    labels, log_proba, best = out
    for row, pred, lp, want_pred in zip(log_proba.tolist(), best, *want[:2], strict=True):
        assert_close(dict(zip(labels, row, strict=True)), lp, 1e-9)
        assert labels[pred] == want_pred
    assert fast.to_state() == slow.to_state()  # unit weights: the counts to the bit
    # a value the per-event path rejects (not a number, out of range): not this batch
    for bad in ("7", True, math.inf, 1e100, 10**101):
        batch = zip(names, columns(500, 600), strict=True)
        odd = [[bad, *col[1:]] if f == "u" else col for f, col in batch]
        assert fast.predict_learn_columns(names, odd, ys[500:600]) is None
    assert fast.to_state() == slow.to_state()


def test_binned_column_is_bisect_right_of_check_number() -> None:
    rng = random.Random(4)
    edges = [*sorted(rng.uniform(-5, 5) for _ in range(4)), 7.0]
    column: list[Any] = [
        rng.choice([None, 7, 7.0, -5, 2**60, rng.uniform(-8, 8)]) for _ in range(400)
    ]
    want = [None if v is None else bisect_right(edges, float(v)) for v in column]
    assert binned_column(edges, column) == want
    assert binned_column(edges, [1.0, "x"]) is None
    assert binned_column(edges, [1.0, False]) is None
    assert binned_column(edges, [1.0, math.nan]) is None
    assert binned_column(edges, [1.0, 10**400]) is None


# ------------------------------------------------------------------ parameters and errors
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"numeric": "kde"}, "numeric must be 'gaussian' or 'bins', got 'kde'"),
        ({"n_bins": 1}, "n_bins must be an integer >= 2"),
        ({"warmup": 0}, "warmup must be an integer >= 1"),
        ({"strategy": "kmeans"}, "strategy must be 'frequency' or 'width'"),
        ({"bin_edges": {"a": [2.0, 1.0]}}, "strictly increasing"),
        ({"bin_edges": {"a": [1.0]}, "schema": {"a": "numeric"}}, "drop one of the two"),
        ({"schema": {"a": "binned"}}, "'bins', got 'binned'"),
    ],
)
def test_invalid_parameters(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        NaiveBayes(**kwargs)


def test_a_non_number_for_a_binned_feature_is_rejected_and_changes_nothing() -> None:
    model = NaiveBayes(bin_edges={"a": [0.0]})
    model.learn_one({"a": 1.0, "c": "x"}, "p")
    before = model.to_state()
    for bad, reason in (("high", "non_numeric"), (math.nan, "non_finite")):
        with pytest.raises(InvalidEventError) as info:
            model.learn_one({"a": bad, "c": "y"}, "q")
        assert info.value.reason == reason
        assert model.to_state() == before
    with pytest.raises(InvalidEventError, match=r"fixed .a. as numeric \(Gaussian or binned\)"):
        model.predict_one({"a": "high"})


@pytest.mark.parametrize(
    "params",
    [
        {"numeric": "bins", "warmup": 70},
        {"numeric": "bins", "warmup": 70, "strategy": "width", "half_life": 20.0},
        {"numeric": "bins", "warmup": 70, "half_life": 0.2},  # renormalises: records rescale
    ],
)
def test_binned_naive_bayes_passes_the_generic_checks(params: dict[str, Any]) -> None:
    # warmup 70 of 120 events: the whole stream freezes its cut points, its halves (merge
    # checks) do not (two models that froze their own cannot merge, as AODE's)
    exempt = {
        "weight_repetition": (
            "the event whose weight reaches warmup enters the cut points' sample with all "
            "of its weight (w=2: twice), where the first of two copies freezes them alone"
        )
    }
    if "half_life" in params:  # (as for every learner with forgetting, see test_checks)
        exempt.update({c: "forgetting" for c in ("merge_union", "chunked_learning")})
    events = suitable_events(NaiveBayes, 120, seed=11)
    done = check_learner(lambda: NaiveBayes(**params), events, exempt=exempt)
    assert len(done) == len(CHECKS) - len(exempt)


@pytest.mark.parametrize(
    "params",
    [
        {"numeric": "bins", "warmup": 200},
        {"numeric": "bins", "warmup": 120, "strategy": "width", "half_life": 400.0},
        {"schema": {"salary": "bins", "age": "bins"}, "bin_edges": {"age": [30, 45, 60]}},
    ],
)
def test_the_engines_column_path_equals_its_general_path(params: dict[str, Any]) -> None:
    # warming up: one event at a time (columns_supported is False); frozen: the kernel
    rng = random.Random(3)
    lines = []
    for x, y in agrawal(3, 2500, nominal=True):
        event = {**x, "y": y}
        if rng.random() < 0.1:
            event["w"] = rng.choice([0.5, 2.0])
        lines.append(orjson.dumps(event))

    class _Counting(NaiveBayes):  # (a leading underscore: not registered)
        taken = 0

        def predict_learn_columns(self, *args: Any) -> Any:
            out = super().predict_learn_columns(*args)
            self.taken += out is not None
            return out

    fast_model, slow_model = _Counting(**params), _Counting(**params)
    fast = run_engine(fast_model, lines, column_path=True, batch_size=200)
    slow = run_engine(slow_model, lines, column_path=False, batch_size=200)
    assert fast == slow  # the records byte for byte, the model, the evaluation, the outcomes
    assert fast.state["stats"]["bins"]["records"] == []
    assert fast_model.taken >= 8 and slow_model.taken == 0


_values = st.one_of(st.none(), st.integers(-50, 50), st.floats(-100.0, 100.0, allow_nan=False))


@given(
    st.lists(
        st.tuples(
            st.fixed_dictionaries({"p": _values, "q": _values}),
            st.sampled_from(["x", "y"]),
            st.sampled_from([1.0, 0.5, 3.0]),
        ),
        min_size=1,
        max_size=30,
    ),
    st.lists(st.floats(-60.0, 60.0, allow_nan=False), min_size=1, max_size=4, unique=True),
    st.fixed_dictionaries({"p": _values, "q": _values}),
)
def test_property_binned_equals_categorical_nb_on_cut_values(
    events: list[Event], cuts: list[float], probe: dict[str, Any]
) -> None:
    edges = {"p": sorted(cuts), "q": [0.0]}
    model = NaiveBayes(bin_edges=edges)
    reference = CategoricalNB()
    for x, y, w in events:
        model.learn_one(x, y, w)
        reference.learn_one(binned(x, edges), y, w)
    assert_close(
        model.predict_log_proba_one(probe), reference.predict_log_proba_one(binned(probe, edges))
    )
