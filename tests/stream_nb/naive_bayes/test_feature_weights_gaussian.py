"""``feature_weights`` of GaussianNB and NaiveBayes, against a brute force.

``score(y) = log P(y) + Σ_f w_f log P(x_f | y)``, where a term is a feature's
Gaussian log-density, its categorical term, or the categorical term of its bin
(NaiveBayes). The references compute each term from the raw events on their own
(:func:`~tests.stream_nb.naive_bayes.oracles.gaussian_terms` one feature at a
time, :func:`~tests.stream_nb.naive_bayes.test_alpha_zero.categorical_terms`,
the zero-probability rule of :func:`~tests.stream_nb.naive_bayes.test_alpha_zero.resolve`),
multiply each by its weight and leave out the features of weight 0. Every
prequential step of random streams, to ``1e-12``. The column kernel weighs the
Gaussian, categorical and binned terms too (against the per-event loop as every
kernel test, to 1e-9).
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import orjson
import pytest

from stream_nb import (
    Engine,
    GaussianNB,
    IncompatibleModelError,
    Learner,
    NaiveBayes,
    PrequentialEvaluator,
    WeightedNB,
)
from stream_nb._exceptions import ConfigError
from stream_nb.connectors.memory import ListSource, MemorySink
from stream_nb.datasets import agrawal
from stream_nb.naive_bayes import _vectorised as vectorised
from stream_nb.naive_bayes._vectorised import gaussian_predict_learn_columns
from tests.stream_nb.naive_bayes.kernel_checks import against_the_loop, close
from tests.stream_nb.naive_bayes.oracles import (
    Event,
    class_weights,
    decayed_weights,
    gaussian_terms,
    log_prior,
)
from tests.stream_nb.naive_bayes.test_alpha_zero import (
    _column_kernel,
    assert_close,
    categorical_terms,
    prequential,
    resolve,
)

pytestmark = pytest.mark.filterwarnings("error")

NUMERIC = ("n1", "n2", "n3")
CATEGORICAL = ("c1", "c2")
EDGES = {"b1": [-0.5, 0.5, 1.5]}
Weights = dict[Hashable, float]


@pytest.fixture(autouse=True)
def _numpy_raises() -> Iterator[None]:
    with np.errstate(all="raise"):
        yield


def random_weights(seed: int, features: Sequence[str]) -> Weights:
    """A weight for most features: 0 for some, others in (0, 4); at least one 0 and one > 1."""
    rng = random.Random(seed)
    out: Weights = {f: rng.choice([0.0, rng.uniform(0.05, 4.0)]) for f in features[2:]}
    out[features[0]] = 0.0
    out[features[1]] = rng.uniform(1.5, 4.0)
    del out[features[-1]]  # (left out: weight 1)
    return out


def mixed_events(
    seed: int, n: int, *, numeric_only: bool = False, constant: int = 25
) -> list[Event]:
    """Numbers depending on the class (``n3`` constant over the first ``constant`` events),
    missing values, small categorical alphabets (zero counts), binned numbers, weights, a
    late class.

    Tests with forgetting or ``var_smoothing_mode="global"`` use ``constant=0``: forgetting
    leaves a rounding of a constant's variance, not 0, and the global ε (1e-9 of the largest
    variance) on a class variance of 0 turns Welford's rounding into 1e-8 of the score.
    """
    rng = random.Random(seed)
    events: list[Event] = []
    for i in range(n):
        y: Hashable = "late" if i > n * 0.6 and rng.random() < 0.3 else rng.randrange(2)
        k = 2.0 if y == "late" else float(y)
        x: dict[str, Any] = {
            "n1": rng.gauss(k, 1.0),
            "n2": rng.gauss(3.0 * k, 0.5 + k),
            "n3": 5.0 if i < constant else rng.choice([4, 5, 6]),
        }
        if not numeric_only:
            x["c1"] = rng.choice(["u", "v"] if y == 0 else ["v", "w"])
            x["c2"] = rng.choice("pqr")
            x["b1"] = rng.gauss(k - 0.5, 0.7)
        for f in x:
            if rng.random() < 0.08:
                x[f] = None
        events.append((x, y, rng.choice([1.0, 1.0, 0.5, 2.0, 0.25])))
    return events


def probe(x: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """The event, sometimes with a category never learned, a feature never learned or a
    missing number."""
    out = dict(x)
    r = rng.random()
    if r < 0.2 and "c1" in out:
        out["c1"] = "never"
    elif r < 0.4:
        out["new"] = 1.5
    elif r < 0.5:
        out["n2"] = None
    return out


def reference(
    events: Sequence[Event],
    x: Mapping[str, Any],
    *,
    weights: Mapping[Hashable, float],
    half_life: float | None = None,
    alpha: float = 0.0,
    mode: str = "feature",
    edges: Mapping[str, list[float]] | None = None,
) -> dict[Hashable, float]:
    """The log posterior of NaiveBayes (GaussianNB: ``alpha=0``, numbers only) with
    ``feature_weights=weights``, brute force."""
    edges = edges or {}
    decayed = decayed_weights(events, half_life)
    n_y = class_weights(events, decayed)
    prior = log_prior(n_y, sum(decayed), alpha)
    classes = list(prior)
    numeric = {f for ev in events for f, v in ev[0].items() if isinstance(v, (int, float))}
    numeric -= set(edges)
    terms: dict[Hashable, list[float]] = {y: [prior[y]] for y in classes}
    for f in sorted(numeric):
        if f not in x or x[f] is None or weights.get(f, 1.0) == 0.0:
            continue
        one = gaussian_terms(events, decayed, {f: x[f]}, classes, numeric=numeric, mode=mode)
        for y in classes:
            terms[y].append(weights.get(f, 1.0) * one[y])

    def discrete(ex: Mapping[str, Any]) -> dict[str, Any]:
        out = {f: v for f, v in ex.items() if f not in numeric and f not in edges}
        out.update({f: bisect_right(edges[f], ex[f]) for f in edges if ex.get(f) is not None})
        return out

    cut = [(discrete(ex), y, w) for ex, y, w in events]
    found = categorical_terms(cut, decayed, discrete(x), classes, alpha, weights)
    for y in classes:
        terms[y] += found[y]
    return resolve(terms)


# ------------------------------------------------------------------ brute force
@pytest.mark.parametrize("half_life", [None, 40.0])
@pytest.mark.parametrize("mode", ["feature", "global"])
@pytest.mark.parametrize("seed", [0, 1])
def test_gaussian_scores_match_brute_force(seed: int, mode: str, half_life: float | None) -> None:
    weights = random_weights(seed, NUMERIC)
    constant = 25 if half_life is None and mode == "feature" else 0
    events = mixed_events(seed, 160, numeric_only=True, constant=constant)
    model = GaussianNB(var_smoothing_mode=mode, half_life=half_life, feature_weights=weights)

    def want(ev: Sequence[Event], x: Mapping[str, Any]) -> dict[Hashable, float]:
        return reference(ev, x, weights=weights, half_life=half_life, mode=mode)

    prequential(model, events, want, probe)


@pytest.mark.parametrize("bins", [False, True])
@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("mode", ["feature", "global"])
@pytest.mark.parametrize("seed", [0, 1])
def test_naive_bayes_scores_match_brute_force(
    seed: int, mode: str, alpha: float, bins: bool
) -> None:
    features = ("c1", "n1", "b1", "n2", "c2", "n3")
    weights = random_weights(seed + 10, features)
    events = mixed_events(seed, 160, constant=25 if mode == "feature" else 0)
    edges = EDGES if bins else None
    model = NaiveBayes(
        alpha=alpha, var_smoothing_mode=mode, bin_edges=edges, feature_weights=weights
    )

    def want(ev: Sequence[Event], x: Mapping[str, Any]) -> dict[Hashable, float]:
        return reference(ev, x, weights=weights, alpha=alpha, mode=mode, edges=edges)

    dropped = prequential(model, events, want, probe)
    if alpha == 0:
        assert dropped > 0  # (the zero-probability rule was at work)


def test_naive_bayes_with_forgetting_matches_brute_force() -> None:
    weights = {"n1": 0.0, "c1": 2.0, "n2": 0.5}
    events = mixed_events(3, 160, constant=0)

    def want(ev: Sequence[Event], x: Mapping[str, Any]) -> dict[Hashable, float]:
        return reference(ev, x, weights=weights, alpha=0.5, half_life=40.0)

    prequential(NaiveBayes(alpha=0.5, half_life=40.0, feature_weights=weights), events, want, probe)


def test_binned_features_weigh_once_their_cut_points_freeze() -> None:
    # cut points from the first 40 events: from then on the model is the one given them
    weights = {"b1": 2.5, "n1": 0.0}
    events = mixed_events(4, 200)
    warming = NaiveBayes(schema={"b1": "bins"}, warmup=40, n_bins=4, feature_weights=weights)
    for x, y, w in events[:60]:
        warming.learn_one(x, y, w)
    edges = {"b1": warming.bins.edges("b1")}
    fixed = NaiveBayes(bin_edges=edges, n_bins=4, feature_weights=weights)
    for x, y, w in events[:60]:
        fixed.learn_one(x, y, w)
    for x, _, _ in events[60:]:
        assert warming.predict_log_proba_one(x) == fixed.predict_log_proba_one(x)
        want = reference(events[:60], x, weights=weights, alpha=1.0, edges=edges)
        assert_close(fixed.predict_log_proba_one(x), want)


def test_weight_zero_removes_a_number_but_keeps_learning_it() -> None:
    model = GaussianNB(feature_weights={"noise": 0})
    plain = GaussianNB()
    rng = random.Random(0)
    for i in range(50):
        x = {"signal": float(i % 2) + rng.random(), "noise": rng.gauss(0, 1)}
        model.learn_one(x, i % 2)
        plain.learn_one(x, i % 2)
    assert model.gaussian.to_state() == plain.gaussian.to_state()  # still learned
    x = {"signal": 1.2, "noise": 40.0}
    want = plain.predict_log_proba_one({"signal": 1.2})
    assert model.predict_log_proba_one(x) == pytest.approx(want, rel=1e-12, abs=1e-15)
    assert model.predict_log_proba_one(x) != plain.predict_log_proba_one(x)


def test_naive_bayes_weight_zero_is_not_a_zero_probability_term() -> None:
    model = NaiveBayes(alpha=0, feature_weights={"id": 0})
    plain = NaiveBayes(alpha=0)
    for x, y in [
        ({"id": "1", "t": 1.0}, "a"),
        ({"id": "2", "t": 2.0}, "b"),
        ({"id": "3", "t": 1.5}, "a"),
        ({"id": "4", "t": 2.5}, "b"),
    ]:
        model.learn_one(x, y)
        plain.learn_one(x, y)
    x = {"id": "2", "t": 1.2}
    assert plain.predict_log_proba_one(x).keys() == {"b"}  # id 2: never with "a"
    got, want = model.predict_log_proba_one(x), plain.predict_log_proba_one({"t": 1.2})
    assert got.keys() == want.keys() == {"a", "b"}
    assert got == pytest.approx(want, rel=1e-12, abs=1e-15)


# ------------------------------------------------------------------ weights of 1
def _learn_all(model: Learner, events: Sequence[Event]) -> list[Any]:
    """Predict then learn every event, per event and in batches: every answer."""
    out: list[Any] = []
    for x, y, w in events[:100]:
        out.append(model.predict_log_proba_one(x))
        model.learn_one(x, y, w)
    rest = events[100:]
    for start in range(0, len(rest), 100):
        batch = rest[start : start + 100]
        out.append(
            model.predict_learn_many(
                [e[0] for e in batch], [e[1] for e in batch], [1.0] * len(batch)
            )
        )
    return out


@pytest.mark.parametrize(
    ("make", "features", "numeric_only"),
    [
        (GaussianNB, NUMERIC, True),
        (lambda **k: GaussianNB(var_smoothing_mode="global", **k), NUMERIC, True),
        (NaiveBayes, (*NUMERIC, *CATEGORICAL), False),
        (lambda **k: NaiveBayes(alpha=0, **k), (*NUMERIC, *CATEGORICAL), False),
    ],
)
def test_weights_of_one_give_the_unweighted_model_to_the_bit(
    make: Callable[..., Learner], features: Sequence[str], numeric_only: bool
) -> None:
    # dense events (every value present): the batches take the column kernel
    events = [
        ({f: v for f, v in x.items() if f != "b1"}, y, w)
        for x, y, w in mixed_events(5, 700, numeric_only=numeric_only)
        if None not in x.values()
    ]
    plain = make()
    ones = make(feature_weights=dict.fromkeys(features, 1.0))
    assert _learn_all(ones, events) == _learn_all(plain, events)
    assert ones.to_state()["stats"] == plain.to_state()["stats"]


# ------------------------------------------------------------------ state, merge, batches
@pytest.mark.parametrize(
    ("make", "numeric_only"),
    [
        (GaussianNB, True),
        (lambda **k: NaiveBayes(alpha=0.5, **k), False),
        (lambda **k: NaiveBayes(alpha=0.5, bin_edges=EDGES, **k), False),
    ],
)
def test_state_merge_and_batch_paths(make: Callable[..., Learner], numeric_only: bool) -> None:
    weights = {"n1": 0.0, "n2": 2.0, "c1": 0.5, "b1": 3.0, 7: 0.25}
    events = mixed_events(6, 600, numeric_only=numeric_only)
    model = make(feature_weights=weights)
    for x, y, w in events[:150]:
        model.learn_one(x, y, w)
    state = orjson.loads(orjson.dumps(model.to_state()))
    copy = Learner.from_state(state)
    assert copy.get_params()["feature_weights"] == weights
    assert copy.get_params() == model.get_params()
    rng = random.Random(0)
    for x, _, _ in events[150:200]:
        x_probe = probe(x, rng)
        assert copy.predict_log_proba_one(x_probe) == model.predict_log_proba_one(x_probe)
    other = make(feature_weights=weights)
    for x, y, w in events[150:300]:
        other.learn_one(x, y, w)
    copy.merge(other)
    both = make(feature_weights=weights)
    for x, y, w in events[:300]:
        both.learn_one(x, y, w)
    for x, _, _ in events[300:350]:
        x_probe = probe(x, rng)
        assert_close(copy.predict_log_proba_one(x_probe), both.predict_log_proba_one(x_probe))
    with pytest.raises(IncompatibleModelError, match=r"parameters differ: \['feature_weights'\]"):
        copy.merge(make(feature_weights={"n1": 1.0}))
    with pytest.raises(IncompatibleModelError, match="feature_weights"):
        copy.merge(make())
    # batches with missing values (these events have some) take the per-event path: to the byte
    fast, slow = make(feature_weights=weights), make(feature_weights=weights)
    for start in range(0, len(events), 100):
        batch = events[start : start + 100]
        xs, ys, ws = [e[0] for e in batch], [e[1] for e in batch], [e[2] for e in batch]
        assert fast.predict_learn_many(xs, ys, ws) == Learner.predict_learn_many(slow, xs, ys, ws)
    assert fast.to_state() == slow.to_state()


def _dense_events(seed: int, n: int, numeric_only: bool, drop: tuple[str, ...] = ()) -> list[Event]:
    """Events with every value present (``b1`` and ``drop`` left out): batches the column
    kernel takes."""
    return [
        ({f: v for f, v in x.items() if f != "b1" and f not in drop}, y, w)
        for x, y, w in mixed_events(seed, n, numeric_only=numeric_only, constant=0)
        if None not in x.values()
    ]


@pytest.mark.parametrize(
    ("make", "numeric_only", "drop"),
    [
        (lambda: GaussianNB(feature_weights={"n1": 0, "n2": 2.5, "n3": 0.4}), True, ()),
        (
            lambda: GaussianNB(var_smoothing_mode="global", feature_weights={"n1": 3, "n3": 0}),
            True,
            (),
        ),
        (lambda: NaiveBayes(feature_weights={"n1": 0, "n2": 2.5, "c1": 1.0}), False, ()),
        (lambda: NaiveBayes(feature_weights={"n1": 0.5, "c1": 2.0, "c2": 0}), False, ()),
        # (c1 has values of one class only: with alpha=0 every batch would go to the loop)
        (lambda: NaiveBayes(alpha=0, feature_weights={"n3": 0, "n1": 1.5}), False, ("c1",)),
        (lambda: NaiveBayes(alpha=0, feature_weights={"c2": 3.0, "n1": 0}), False, ("c1",)),
        # c1 of weight 0 is no zero-probability term: the kernel keeps the batches
        (lambda: NaiveBayes(alpha=0, feature_weights={"c1": 0, "c2": 0.5}), False, ()),
    ],
)
def test_the_column_kernel_weighs_every_term_as_the_per_event_loop(
    make: Callable[[], Learner], numeric_only: bool, drop: tuple[str, ...]
) -> None:
    events = _dense_events(9, 3000, numeric_only, drop)
    assert against_the_loop(make, events, 9, _column_kernel, warm=100) >= 3


def _columns(xs: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, ...], list[list[Any]]]:
    names = tuple(xs[0])
    return names, [[x[f] for x in xs] for f in names]


def _engine_run(lines: list[bytes], learner: Learner, *, column_path: bool) -> tuple[Any, ...]:
    sink = MemorySink()
    evaluator = PrequentialEvaluator(window=50)
    engine = Engine(
        learner,
        ListSource(lines),
        sink,
        dead_letters=MemorySink(),
        evaluator=evaluator,
        batch_size=150,
        column_path=column_path,
    )
    summary = engine.run()
    return sink.values(), learner.to_state(), evaluator.report(), summary.outcomes


@pytest.mark.parametrize(
    ("make", "numeric_only", "kernel"),
    [
        (lambda: GaussianNB(feature_weights={"n1": 0, "n2": 2.5}), True, True),
        (lambda: NaiveBayes(feature_weights={"n1": 0, "n2": 2.5}), False, True),
        (lambda: NaiveBayes(feature_weights={"n1": 0, "c1": 2.5, "n3": 0.5}), False, True),
        # (c1 has values of one class only: with alpha=0 its batches go to the loop)
        (lambda: NaiveBayes(alpha=0, feature_weights={"c2": 0, "n2": 3.0}), False, False),
        (lambda: NaiveBayes(alpha=0, feature_weights={"c1": 0, "n2": 3.0}), False, True),
    ],
)
def test_engine_column_path_equals_the_general_path(
    make: Callable[[], Learner],
    numeric_only: bool,
    kernel: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        out = gaussian_predict_learn_columns(*args, **kwargs)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(vectorised, "gaussian_predict_learn_columns", counting)
    lines = [
        orjson.dumps({**x, "y": y, "w": w})
        for x, y, w in mixed_events(8, 900, numeric_only=numeric_only)
        if None not in x.values()
    ]
    fast = _engine_run(lines, make(), column_path=True)
    slow = _engine_run(lines, make(), column_path=False)
    assert fast == slow  # records byte for byte, model, evaluation, outcomes
    assert len(fast[0]) == len(lines)
    assert any(taken) is kernel


# ------------------------------------------------------------------ parameters
@pytest.mark.parametrize("cls", [GaussianNB, NaiveBayes])
def test_invalid_weights_are_refused(cls: Callable[..., Learner]) -> None:
    with pytest.raises(ConfigError, match=r"feature_weights\['a'\] must be non-negative"):
        cls(feature_weights={"a": -1})
    with pytest.raises(ConfigError, match=r"feature_weights must be a mapping"):
        cls(feature_weights=[("a", 1)])
    assert cls(feature_weights={}).get_params()["feature_weights"] is None


@pytest.mark.parametrize("cls", [GaussianNB, NaiveBayes])
def test_a_state_saved_before_feature_weights_still_loads(cls: Callable[..., Learner]) -> None:
    model = cls()
    model.learn_one({"a": 1.5}, "x")
    model.learn_one({"a": 2.5}, "y")
    state = model.to_state()
    del state["params"]["feature_weights"]  # (states written before the parameter existed)
    assert Learner.from_state(state).to_state() == model.to_state()


def test_weighted_nb_learns_its_weights_and_takes_no_fixed_ones() -> None:
    with pytest.raises(TypeError, match="feature_weights"):
        WeightedNB(feature_weights={"a": 0})  # type: ignore[call-arg]
    model = WeightedNB()
    model.learn_one({"a": 1.0, "b": "u"}, 0)
    assert "feature_weights" not in model.get_params()
    assert Learner.from_state(model.to_state()).to_state() == model.to_state()
    assert math.isfinite(model.predict_log_proba_one({"a": 1.0, "b": "u"})[0])


# ------------------------------------------------------------------ model sync
@pytest.mark.parametrize(
    ("make", "nominal"),
    [
        (lambda: GaussianNB(feature_weights={"salary": 0, "age": 2.5, "loan": 0.5}), False),
        (lambda: NaiveBayes(feature_weights={"salary": 0, "age": 2.5}), True),
    ],
)
def test_the_weighted_kernel_records_the_delta_learn_one_would(
    make: Callable[[], Learner], nominal: bool
) -> None:
    rng = random.Random(5)
    events = [(x, y, rng.choice([1.0, 0.5, 3.0])) for x, y in agrawal(5, 1500, nominal=nominal)]
    fast, slow = make(), make()
    for x, y, w in events[:60]:
        fast.learn_one(x, y, w)
        slow.learn_one(x, y, w)
    base = Learner.from_state(fast.to_state())  # the model as it was when tracking began
    fast.track_delta()
    slow.track_delta()
    used = 0
    for start in range(60, len(events), 240):
        batch = events[start : start + 240]
        xs, ys, ws = [dict(e[0]) for e in batch], [e[1] for e in batch], [e[2] for e in batch]
        if _column_kernel(fast, xs, ys, ws) is None:
            Learner.predict_learn_many(fast, xs, ys, ws)
        else:
            used += 1
        Learner.predict_learn_many(slow, xs, ys, ws)
    assert used >= 4
    (fast_delta, fast_weight), (slow_delta, slow_weight) = fast.cut_delta(), slow.cut_delta()
    assert fast_delta.get_params()["feature_weights"] == fast.get_params()["feature_weights"]
    assert fast_weight == pytest.approx(slow_weight, rel=1e-12)
    close(normal_state(fast_delta), normal_state(slow_delta), tol=1e-12)
    base.apply_delta(fast_delta, fast_weight)
    close(normal_state(base), normal_state(fast), tol=1e-12)


def normal_state(model: Learner) -> Any:
    """The state with every ``[key, value]`` pair list as a dict (as test_kernel_delta's:
    a delta merged from a batch meets features by name, not in the order learning met
    them)."""

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if not isinstance(value, list):
            return value
        if value and all(
            isinstance(p, list) and len(p) == 2 and not isinstance(p[0], (list, dict))
            for p in value
        ):
            keys = [orjson.dumps(p[0]) for p in value]
            if len(set(keys)) == len(keys):
                return {k: walk(p[1]) for k, p in zip(keys, value, strict=True)}
        return [walk(v) for v in value]

    return walk(model.to_state())
