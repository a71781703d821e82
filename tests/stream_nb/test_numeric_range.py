"""The numeric range of every learner (stream_nb.limits): finite statistics, normalised
predictions and one rejection rule for every representable input.

Every exported learner gets hypothesis-generated streams of events whose numbers
span the whole double range (±1.797e308, 5e-324, -0.0, …) and whose weights span
(0, 1.797e308], with and without forgetting. After every step:

- every number of ``to_state`` is finite and the state loads again (a snapshot is
  never poisoned);
- a prediction is a finite, normalised posterior whose most probable class is
  ``predict_one``, or ``{}`` with ``predict_one`` returning ``None``;
- an event is either used or rejected whole, with ``InvalidEventError`` (the
  out-of-range ones with ``reason="out_of_range"``), at prediction and learning
  alike, leaving the model unchanged;
- ``predict_learn_many`` (the numpy kernel for GaussianNB/NaiveBayes batches)
  rejects the same events and agrees with the per-event loop.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from learner_classes import public_learners

import stream_nb
from stream_nb import (
    BernoulliNB,
    ComplementNB,
    ConfigError,
    GaussianNB,
    InvalidEventError,
    Learner,
    MultinomialNB,
    NaiveBayes,
)
from stream_nb.base import _RENORMALISE_BELOW
from stream_nb.limits import MAX_VALUE, MAX_WEIGHT, MIN_WEIGHT

MAX = sys.float_info.max
EXE = str(Path(sys.executable).with_name("stream-nb"))
EXTREMES = [MAX, -MAX, 1e308, -1e200, 1e155, 1e101, MAX_VALUE, -MAX_VALUE, 9.99e99, 1e50]
EXTREMES += [5e-324, -5e-324, 2.2250738585072014e-308, 1e-300, -0.0, 0.0, 10**400, -(2**1100)]


LEARNERS = public_learners()
SEMI_NAIVE = {"AODE", "KDB", "SPODE", "TAN"}
#: What the events of each learner hold: numbers, counts, binary values, categories,
#: or numbers and categories (the default, also for the semi-naive learners).
KIND = {
    "GaussianNB": "numeric",
    "MultinomialNB": "counts",
    "ComplementNB": "counts",
    "BernoulliNB": "numeric",
    "CategoricalNB": "categories",
}


def make(cls: type[Learner], half_life: float | None) -> Learner:
    params: dict[str, Any] = {"half_life": half_life}
    if cls.__name__ in SEMI_NAIVE:
        params["warmup"] = 4  # bins freeze within the stream
    if cls.__name__ == "SPODE":
        params["parent"] = "f0"
    return cls(**params)


# ---------------------------------------------------------------------- strategies
ordinary = st.floats(min_value=-10.0, max_value=10.0)
anything = st.floats(allow_nan=False, allow_infinity=False)
numbers = st.one_of(ordinary, ordinary, anything, st.sampled_from(EXTREMES))
weights = st.one_of(
    st.just(1.0),
    st.floats(min_value=5e-324, max_value=MAX),
    st.sampled_from([MIN_WEIGHT, MAX_WEIGHT, 1e-300, 1e300, MAX, 5e-324, 0.5, 3.0]),
)
labels = st.integers(0, 2)


@st.composite
def events(draw: Any, kind: str) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["f0", "f1", "f2"]), unique=True, max_size=3))
    if kind == "counts":
        return {n: abs(draw(numbers)) for n in names}
    if kind == "categories":
        return {n: draw(st.one_of(numbers, st.sampled_from(["a", "b"]))) for n in names}
    x: dict[str, Any] = {n: draw(st.one_of(numbers, st.none())) for n in names}
    if kind == "mixed" and draw(st.booleans()):
        x["c"] = draw(st.sampled_from(["a", "b", "c"]))
    return x


def stream(kind: str, min_size: int = 1, max_size: int = 30) -> Any:
    return st.lists(st.tuples(events(kind), labels, weights), min_size=min_size, max_size=max_size)


# ---------------------------------------------------------------------- invariants
def non_finite(value: Any, path: str = "state") -> str | None:
    """The path of the first float of a JSON-like tree that is NaN or infinite."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path
    if isinstance(value, Mapping):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = non_finite(item, f"{path}[{key!r}]")
        if found:
            return found
    return None


def check_state(model: Learner) -> dict[str, Any]:
    state = model.to_state()
    bad = non_finite(state)
    assert bad is None, f"{model!r} stores a non-finite number at {bad}"
    copy = Learner.from_state(orjson.loads(orjson.dumps(state)))  # never a poisoned snapshot
    assert copy.to_state()["stats"] is not None
    return state


def check_prediction(model: Learner, x: Mapping[str, Any]) -> str | None:
    """Check the answers of every predict method on ``x``; the rejection reason, if any."""
    try:
        lp = model.predict_log_proba_one(x)
    except InvalidEventError as exc:
        for predict in (model.predict_one, model.predict_proba_one):
            with pytest.raises(InvalidEventError) as again:
                predict(x)
            assert again.value.reason == exc.reason
        return exc.reason
    best = model.predict_one(x)
    proba = model.predict_proba_one(x)
    if not lp:
        assert best is None and proba == {}, f"{model!r}: {{}} but predict_one gave {best!r}"
        return None
    assert all(math.isfinite(v) and v <= 1e-12 for v in lp.values()), f"{model!r}: {lp}"
    total = math.fsum(math.exp(v) for v in lp.values())
    assert abs(total - 1.0) <= 1e-9, f"{model!r} on {x}: probabilities sum to {total}: {lp}"
    assert best in lp and lp[best] == max(lp.values()), f"{model!r}: {best!r} vs {lp}"
    assert proba.keys() == lp.keys()
    return None


def renormalises(model: Learner, w: float) -> bool:
    """Whether learning weight ``w`` makes the model fold its decay into the statistics
    (then a rejected event has still decayed it, see ``Learner.learn_one``)."""
    gamma = model._gamma
    return gamma is not None and model._scale * gamma**w < _RENORMALISE_BELOW


def run_stream(model: Learner, stream_: list[tuple[dict[str, Any], int, float]]) -> None:
    for x, y, w in stream_:
        check_prediction(model, x)
        before = model.to_state()
        folds_decay = renormalises(model, w)
        try:
            model.learn_one(x, y, w)
        except InvalidEventError:
            if not folds_decay:
                assert model.to_state() == before, f"{model!r}: a rejected event changed it"
            continue
        check_state(model)


CASES = [
    pytest.param(cls, half_life, id=f"{cls.__name__}-{half_life}")
    for cls in LEARNERS
    for half_life in (None, 3.0, 0.05)
]


@pytest.mark.parametrize(("cls", "half_life"), CASES)
@settings(max_examples=40)
@given(data=st.data())
def test_any_finite_input_keeps_statistics_finite_and_predictions_normalised(
    cls: type[Learner], half_life: float | None, data: Any
) -> None:
    model = make(cls, half_life)
    run_stream(model, data.draw(stream(KIND.get(cls.__name__, "mixed"))))


@pytest.mark.parametrize("cls", [pytest.param(c, id=c.__name__) for c in LEARNERS])
@settings(max_examples=15)
@given(data=st.data())
def test_merges_of_large_models_stay_finite(cls: type[Learner], data: Any) -> None:
    """Two models each learned at the edge of the range (the same first events, so the
    semi-naive bins agree) merge, again and again, into finite statistics."""
    kind = KIND.get(cls.__name__, "mixed")
    a, b = make(cls, None), make(cls, None)
    if cls.__name__ in SEMI_NAIVE:  # bins fixed up front: shards merge only with equal bins
        edges = {f: [-1e300, -1.0, 0.0, 1.0, 1e300] for f in ("f0", "f1", "f2")}
        a, b = (type(a)(**{**a.get_params(), "bin_edges": edges}) for _ in range(2))
    edge = [({"f0": MAX_VALUE, "f1": -MAX_VALUE}, 0, MAX_WEIGHT), ({"f0": 1.0}, 1, MAX_WEIGHT)]
    if kind == "counts":
        edge = [({"f0": MAX_VALUE, "f1": MAX_VALUE}, 0, MAX_WEIGHT), ({"f0": 1.0}, 1, 1.0)]
    for model in (a, b):
        for x, y, w in edge * 3:
            model.learn_one(x, y, w)
        run_stream(model, data.draw(stream(kind, max_size=10)))
    for _ in range(3):
        a.merge(b)
        check_state(a)
        for x, _, _ in edge:
            check_prediction(a, x)


# ---------------------------------------------------------------------- the rule
@pytest.mark.parametrize("cls", [GaussianNB, NaiveBayes])
@pytest.mark.parametrize("value", [1e101, -1e200, MAX, 10**400, 2**1100])
def test_a_value_beyond_max_value_is_out_of_range_at_learn_and_predict(
    cls: type[Learner], value: float
) -> None:
    model = make(cls, None)
    model.learn_one({"a": 1.0, "b": 2.0}, 0)
    model.learn_one({"a": 2.0, "b": 0.0}, 1)
    state = model.to_state()
    for x in ({"a": value, "b": 1.0}, {"a": 1.0, "b": 1.0, "new": value}):
        with pytest.raises(InvalidEventError, match=r"beyond \|x\| <= 1e\+100") as exc:
            model.predict_log_proba_one(x)
        assert exc.value.reason == "out_of_range"
        with pytest.raises(InvalidEventError) as exc:
            model.learn_one(x, 0)
        assert exc.value.reason == "out_of_range"
    assert model.to_state() == state
    model.learn_one({"a": MAX_VALUE, "b": -MAX_VALUE}, 0)  # the bound itself is accepted
    check_prediction(model, {"a": -MAX_VALUE, "b": MAX_VALUE})
    check_state(model)


@pytest.mark.parametrize("cls", [MultinomialNB, ComplementNB])
def test_a_count_beyond_max_value_is_out_of_range(cls: type[Learner]) -> None:
    model = make(cls, None)
    model.learn_one({"the": 3, "cat": 1}, "a")
    model.learn_one({"the": 1, "dog": 2}, "b")
    state = model.to_state()
    for count in (1e101, MAX, 10**400):
        with pytest.raises(InvalidEventError, match="token 'cat' has count") as exc:
            model.predict_log_proba_one({"the": 1, "cat": count})
        assert exc.value.reason == "out_of_range"
        with pytest.raises(InvalidEventError) as exc:
            model.learn_one({"the": 1, "cat": count}, "a")
        assert exc.value.reason == "out_of_range"
    assert model.to_state() == state
    many = {f"t{i}": MAX_VALUE for i in range(20)}  # each within the range, their sum not
    model.learn_one(many, "a", MAX_WEIGHT)
    check_prediction(model, many)
    check_state(model)


def test_values_only_compared_have_no_bound() -> None:
    """Categories, BernoulliNB values and semi-naive numbers take every finite float;
    an int beyond the double range cannot be binned and is out of range."""
    for model in (make(c, None) for c in LEARNERS if KIND.get(c.__name__) != "counts"):
        if isinstance(model, (GaussianNB, NaiveBayes)):
            continue
        other: list[Any] = [0, 1] if isinstance(model, BernoulliNB) else ["a", "b"]
        for i, v in enumerate([MAX, -MAX, 5e-324, 1.0, 2.0, MAX, 3.0, -MAX] * 2):
            model.learn_one({"f0": v, "f1": other[i % 2]}, i % 2)
        check_prediction(model, {"f0": 1e300})
        check_state(model)
        if type(model).__name__ in SEMI_NAIVE:
            with pytest.raises(InvalidEventError) as exc:
                model.learn_one({"f0": 10**400}, 0)
            assert exc.value.reason == "out_of_range"
            with pytest.raises(InvalidEventError):
                model.predict_one({"f0": -(10**400)})


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_weights_beyond_the_bounds_are_out_of_range(cls: type[Learner]) -> None:
    model = make(cls, 10.0)
    x = {"f0": 1.0} if KIND.get(cls.__name__) != "categories" else {"f0": "a"}
    model.learn_one(x, 0, MIN_WEIGHT)
    model.learn_one(x, 1, MAX_WEIGHT)
    state = model.to_state()
    for w in (5e-324, 1e-51, 1.0000001e50, MAX):
        with pytest.raises(InvalidEventError, match=r"sample weight w=.* outside") as exc:
            model.learn_one(x, 0, w)
        assert exc.value.reason == "out_of_range"
    assert model.to_state() == state  # rejected before the model decays


# ---------------------------------------------------------------------- issue reproductions
def test_issue_reproduction_one_large_value_no_longer_bricks_the_model() -> None:
    """NaiveBayes learned 1e200 and predicted {0: nan} for ever; now 1e200 is rejected,
    and the model goes on predicting and learning normally."""
    model = NaiveBayes()
    model.learn_one({"a": 1.0}, 0)
    model.learn_one({"a": 2.0}, 1)
    with pytest.raises(InvalidEventError) as exc:
        model.learn_one({"a": 1e200}, 0)
    assert exc.value.reason == "out_of_range"
    lp = model.predict_log_proba_one({"a": 1.5})
    assert set(lp) == {0, 1} and all(math.isfinite(v) for v in lp.values())
    model.learn_one({"a": 1.2}, 0)
    assert model.predict_one({"a": 1.1}) == 0
    check_state(model)


def test_issue_reproduction_extreme_value_at_predict_time() -> None:
    """1e160 on a healthy model gave predict_log_proba_one {} while predict_one gave a class."""
    model = GaussianNB()
    model.learn_one({"a": 1.0}, 0)
    model.learn_one({"a": 2.0}, 1)
    for predict in (model.predict_log_proba_one, model.predict_one, model.predict_proba_one):
        with pytest.raises(InvalidEventError) as exc:
            predict({"a": 1e160})
        assert exc.value.reason == "out_of_range"
    # within the range, far from every mean: a finite, normalised answer that predict_one
    # shares (where x − μ no longer tells the means apart, a tie: the first class)
    for value in (1e99, -MAX_VALUE, 1e20, 1e6, -1e6):
        check_prediction(model, {"a": value})
    assert model.predict_one({"a": 1e6}) == 1 and model.predict_one({"a": -1e6}) == 0


def test_huge_scores_of_equal_classes_stay_normalised() -> None:
    """Scores near -1e109 used to lose the log-sum (every class got log-probability 0)."""
    model = GaussianNB()
    for i, y in enumerate([0, 1, 2] * 3):
        model.learn_one({"a": float(i % 3), "b": 1e40 * (i % 2)}, y)
    lp = model.predict_log_proba_one({"a": 1e100, "b": 0.0})
    assert math.fsum(math.exp(v) for v in lp.values()) == pytest.approx(1.0, abs=1e-12)
    check_prediction(model, {"a": 1e100, "b": 0.0})


def test_a_class_decayed_to_zero_weight_has_probability_zero() -> None:
    """With forgetting a class unseen for long decays to weight 0 (underflow); GaussianNB's
    log(N_y / N) then crashed every prediction (math domain error)."""
    model = GaussianNB(half_life=1.0)
    model.learn_one({"a": 0.0}, "old")
    for i in range(3000):
        model.learn_one({"a": float(i % 5)}, "new")
    assert 0.0 in model.gaussian.class_weight  # the old class's weight underflowed
    assert model.predict_log_proba_one({"a": 1.0}) == {"new": 0.0}
    assert model.predict_one({"a": 1.0}) == "new"
    check_state(model)
    sparse = GaussianNB(half_life=0.05)  # every event wipes the previous ones out
    for i in range(40):
        sparse.learn_one({"a": float(i)}, i % 3)
        check_prediction(sparse, {"a": 1.0})
        check_state(sparse)


# ---------------------------------------------------------------------- paths agree
def per_event(
    model: Learner, xs: list[dict[str, Any]], ys: list[Any], ws: list[float]
) -> tuple[list[Any], list[Any], set[int], list[float]]:
    """The per-event loop: log-posteriors, decisions, rejected events, and the size of
    each event's scores (``max(1, max |joint log-likelihood|)``)."""
    lps: list[Any] = []
    preds: list[Any] = []
    errors = set()
    sizes = []
    for i, (x, y, w) in enumerate(zip(xs, ys, ws, strict=True)):
        try:
            lp = model.predict_log_proba_one(x)
        except InvalidEventError:
            errors.add(i)
            lps.append(None)
            preds.append(None)
            sizes.append(1.0)
            continue
        lps.append(lp)
        preds.append(model.predict_one(x))
        sizes.append(max([1.0, *map(abs, model._joint_log_likelihood(x).values())]))
        try:
            model.learn_one(x, y, w)
        except InvalidEventError:
            errors.add(i)
    return lps, preds, errors, sizes


BATCH_CASES = [
    pytest.param(cls, id=cls.__name__)
    for cls in (GaussianNB, NaiveBayes, MultinomialNB, BernoulliNB, ComplementNB)
]


@pytest.mark.parametrize("cls", BATCH_CASES)
@settings(max_examples=30)
@given(data=st.data())
def test_predict_learn_many_agrees_with_the_per_event_path(cls: type[Learner], data: Any) -> None:
    """Dense numeric batches of 80 events (the numpy kernel for the Gaussian learners)
    with a few extreme values: the same events rejected, the same log-posteriors to
    1e-9 of the size of the scores (scores of 1e18 are rounded to 128: posteriors that
    depend on less are rounding noise in both paths), the same decisions but for ties
    within that rounding."""
    kind = KIND.get(cls.__name__, "mixed")
    warm = [({"f0": float(i % 7), "f1": float(i % 3)}, i % 2, 1.0) for i in range(20)]
    if kind == "counts":
        warm = [({"f0": i % 7, "f1": i % 3}, i % 2, 1.0) for i in range(20)]
    rows = data.draw(st.lists(st.tuples(ordinary, ordinary, labels), min_size=80, max_size=80))
    xs = [{"f0": a, "f1": b} for a, b, _ in rows]
    # a few extreme values (none: the kernel's own path)
    for i, f, v in data.draw(
        st.lists(st.tuples(st.integers(0, 79), st.sampled_from(["f0", "f1"]), numbers), max_size=3)
    ):
        xs[i][f] = v
    if kind == "counts":
        xs = [{f: abs(v) for f, v in x.items()} for x in xs]
    ys: list[Hashable | None] = [y % 2 for _, _, y in rows]
    ws = [1.0] * len(rows)
    one, many = make(cls, None), make(cls, None)
    for model in (one, many):
        for x, y, w in warm:
            model.learn_one(x, y, w)
    lps, preds, errors, sizes = per_event(one, xs, ys, ws)
    got_lps, got_preds, got_errors = many.predict_learn_many(xs, ys, ws)
    assert set(got_errors) == errors
    assert all(isinstance(e, InvalidEventError) for e in got_errors.values())
    for i, (lp, got) in enumerate(zip(lps, got_lps, strict=True)):
        if lp is None:
            assert got is None
            continue
        assert got is not None and got.keys() == lp.keys(), i
        tolerance = 1e-9 * sizes[i]
        for c in lp:
            assert abs(got[c] - lp[c]) <= tolerance, (i, c, got, lp, sizes[i])
        assert got_preds[i] == preds[i] or abs(got[got_preds[i]] - lp[preds[i]]) <= tolerance
    assert many.n_learned == one.n_learned
    check_state(many)


# ---------------------------------------------------------------------- the daemon
def test_daemon_dead_letters_an_extreme_value_and_restarts_from_its_snapshot(
    tmp_path: Path,
) -> None:
    """`stream-nb run` on a file with a 1e200 line among good ones: that line is
    dead-lettered with reason out_of_range, the events after it are predicted as by a
    model that never saw it, and a restart from the snapshot works."""
    lines = []
    for i in range(400):
        lines.append({"salary": 1000.0 + 10 * (i % 17), "age": float(20 + i % 30), "y": i % 2})
    lines[150] = {"salary": 1e200, "age": 30.0, "y": 1}
    lines[151] = {"salary": 1.7976931348623157e308, "age": 31.0}  # unlabelled: predict only
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    out, dead, ck = tmp_path / "out.jsonl", tmp_path / "dead.jsonl", tmp_path / "ck"

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [EXE, "run", "--source", str(src), "--sink",
             str(out), "--dead-letters", str(dead), "--checkpoint-dir", str(ck),
             "--model", "NaiveBayes", "--batch-size", "64", *extra],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    done = run()
    assert done.returncode == 0, done.stderr
    letters = [orjson.loads(line) for line in dead.read_bytes().splitlines()]
    assert [d["reason"] for d in letters] == ["out_of_range", "out_of_range"]
    assert [orjson.loads(d["payload"])["salary"] for d in letters] == [1e200, MAX]
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(records) == 398
    assert all(r["y_pred"] is not None and r["log_proba"] for r in records[1:])
    # the same predictions as a model that never saw the two lines
    reference = NaiveBayes()
    clean = [line for i, line in enumerate(lines) if i not in (150, 151)]
    for record, line in zip(records, clean, strict=True):
        x = {k: v for k, v in line.items() if k != "y"}
        assert record["y_pred"] == reference.predict_one(x)
        reference.learn_one(x, line["y"])
    # restart: the snapshot loads and the daemon carries on with more input
    with src.open("ab") as f:
        f.write(orjson.dumps({"salary": 1100.0, "age": 25.0, "y": 1}) + b"\n")
        f.write(orjson.dumps({"salary": 1e101, "age": 25.0, "y": 1}) + b"\n")
    again = run()
    assert again.returncode == 0, again.stderr
    assert len(out.read_bytes().splitlines()) == 399
    assert [orjson.loads(line)["reason"] for line in dead.read_bytes().splitlines()][-1] == (
        "out_of_range"
    )


# ---------------------------------------------------------------------- parameters
@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_half_life_is_validated_against_the_computable_range(cls: type[Learner]) -> None:
    """half_life=0.001 used to pass and then fail every prediction; 2**1100 raised
    OverflowError. Both now raise ConfigError naming the range and why."""
    for half_life, why in [
        (0.001, r"below 0\.02 one event decays every earlier one"),
        (0.0199, r"below 0\.02"),
        (2**1100, r"beyond 1e\+12 the decay .* too close to 1"),
        (1e13, r"beyond 1e\+12"),
    ]:
        with pytest.raises(ConfigError, match=r"half_life must be in \[0\.02, 1e\+12\]") as exc:
            make(cls, half_life)
        assert exc.match(why)
    for half_life in (0.02, 1e12, 2**39, 500):
        model = make(cls, half_life)
        assert model.half_life == half_life and 0.0 < model._gamma < 1.0  # forgetting happens


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"alpha": 1e-101}, r"alpha must be in \[1e-100, 1e\+10\].*got 1e-101"),
        ({"alpha": 1e11}, r"alpha must be in \[1e-100, 1e\+10\]"),
        ({"alpha": 10**400}, r"alpha must be in"),
    ],
)
def test_alpha_is_bounded(params: dict[str, Any], match: str) -> None:
    for cls in (MultinomialNB, BernoulliNB, ComplementNB, NaiveBayes, stream_nb.CategoricalNB):
        with pytest.raises(ConfigError, match=match):
            cls(**params)


def test_var_smoothing_is_bounded() -> None:
    for cls in (GaussianNB, NaiveBayes):
        with pytest.raises(ConfigError, match=r"var_smoothing must be at most 1e\+10"):
            cls(var_smoothing=1e11)
        cls(var_smoothing=1e10).learn_one({"a": MAX_VALUE}, 0)


def test_a_state_written_with_a_lower_renormalisation_threshold_loads_renormalised() -> None:
    """Snapshots written while the threshold was 1e-150 may hold a scale below 1e-30: the
    statistics are renormalised on load (the same model, within the new raw range)."""
    model = GaussianNB(half_life=50.0)
    for i in range(40):
        model.learn_one({"a": float(i % 7), "b": float(i % 3)}, i % 2)
    state = model.to_state()
    factor = 1e-100 / state["scale"]
    state["scale"] = 1e-100  # the same true statistics in raw units 1e100 times larger
    g = state["stats"]
    g["classes"] = [[y, w / factor] for y, w in g["classes"]]
    g["total_weight"] /= factor
    for table in ("n", "m2"):
        g[table] = [[v / factor for v in row] for row in g[table]]
    g["global"][0] = [v / factor for v in g["global"][0]]
    g["global"][2] = [v / factor for v in g["global"][2]]
    loaded = Learner.from_state(state)
    assert loaded._scale == 1.0
    x = {"a": 2.5, "b": 1.0}
    for c, v in model.predict_log_proba_one(x).items():
        assert loaded.predict_log_proba_one(x)[c] == pytest.approx(v, rel=1e-12, abs=1e-12)


# ---------------------------------------------------------------------- the engine's two paths
def _engine_run(lines: list[bytes], make: Any, *, columns: bool) -> tuple[Any, ...]:
    from stream_nb import Engine
    from stream_nb.connectors.memory import ListSource, MemorySink

    learner = make()
    taken = [0]
    kernel = learner.predict_learn_columns

    def counting(*args: Any) -> Any:
        out = kernel(*args)
        taken[0] += out is not None
        return out

    learner.predict_learn_columns = counting  # type: ignore[method-assign]
    sink, dead = MemorySink(), MemorySink()
    engine = Engine(
        learner, ListSource(lines), sink, dead_letters=dead, batch_size=100, column_path=columns
    )
    summary = engine.run()
    letters = [(d["reason"], d["position"]) for d in map(orjson.loads, dead.values())]
    return sink.values(), learner.to_state(), letters, summary.rejected, taken[0]


@pytest.mark.parametrize("make", [GaussianNB, NaiveBayes], ids=["GaussianNB", "NaiveBayes"])
def test_engine_column_and_per_event_paths_agree_on_extreme_values(make: Any) -> None:
    """Batches holding out-of-range values or weights (rejected by the learner) and
    in-range extremes: the column path and the per-event path write the same prediction
    records byte for byte, the same dead letters and the same model."""
    rng = random.Random(3)
    lines = []
    for i in range(2000):
        event: dict[str, Any] = {"a": rng.gauss(0, 1), "b": rng.uniform(-5, 5), "y": i % 3}
        batch = i // 100  # (the engine's batches; the others are clean)
        if batch in (3, 9) and i % 7 == 0:
            event["a"] = rng.choice([1e200, -MAX, 1e101, 10**120])  # out of range
        elif batch in (5, 9) and i % 11 == 0:
            event["b"] = rng.choice([1e99, -1e60, 5e-324])  # extreme, within range
        elif batch in (12, 13) and i % 13 == 0:
            event["w"] = rng.choice([1e60, 1e-60])  # a weight out of range
        lines.append(json.dumps(event).encode())  # (json: an int beyond 64 bits)
    fast = _engine_run(lines, make, columns=True)
    slow = _engine_run(lines, make, columns=False)
    assert fast[0] == slow[0]  # every prediction record, byte for byte
    assert fast[1] == slow[1]  # the model
    assert fast[2] == slow[2]  # the dead letters
    assert {reason for reason, _ in fast[2]} == {"out_of_range"}
    assert fast[3] == slow[3] and fast[3]["out_of_range"] == len(fast[2])
    assert fast[4] >= 3 and slow[4] == 0  # the column path ran on the clean batches
    check_state(make().from_state(fast[1]))
