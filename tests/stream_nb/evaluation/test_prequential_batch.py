"""The vectorised batch path of stream_nb.evaluation (update_arrays, update_many)
against its definition, the per-event update loop: the same state and report,
bit for bit."""

from __future__ import annotations

import json
import math
import random
import warnings
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_nb import PrequentialEvaluator
from stream_nb.evaluation import MIN_BATCH
from stream_nb.evaluation.batch import BatchTables, score_arrays
from stream_nb.evaluation.prequential import _DEFER_EVENTS
from stream_nb.evaluation.scoreboard import Scoreboard
from stream_nb.evaluation.state import scoreboard_to_state
from stream_nb.evaluation.views import RENORMALISE_BELOW

MATRIX = {"a": {"b": 5.0, "c": 0.5}, "b": {"b": 0.25, "z": 3.0}, None: {"a": 2.0}, 7: {"a": 0.1}}


# ---------------------------------------------------------------------- comparison
def assert_identical(got: PrequentialEvaluator, want: PrequentialEvaluator) -> None:
    """``got`` (batch path) holds exactly the statistics of ``want`` (per-event path).

    JSON keeps every float's bits (``repr``) and the int/float distinction, and
    makes numpy's float64 (which the reference's ``dict(zip(labels, row))``
    brings in) a float.
    """
    assert json.dumps(got.to_state()) == json.dumps(want.to_state())
    assert json.dumps(got.report()) == json.dumps(want.report())
    # the majority baseline's current class, which no output shows until the next event
    assert_same_majorities(got._board, want._board)


def assert_same_majorities(got: Scoreboard, want: Scoreboard) -> None:
    assert got.cumulative.majority == want.cumulative.majority, "cumulative"
    assert got.window.majority == want.window.majority, "window"
    assert got.fading.majority == want.fading.majority, "fading"


# ---------------------------------------------------------------------- streams
def random_batch(
    rng: np.random.Generator, b: int, labels: Sequence[Hashable], universe: Sequence[Hashable]
) -> tuple[list[Hashable], np.ndarray, np.ndarray]:
    """``(ys_true, log_proba, best)``: truths from ``universe`` (some of them not in
    ``labels``), with runs, and awkward log-probabilities (-inf, NaN, below the
    floor, slightly above 0)."""
    k = len(labels)
    p = rng.dirichlet(np.full(k, 0.7), size=b)
    with np.errstate(divide="ignore"):
        lp = np.log(p)
    mask = rng.random((b, k))
    lp[mask < 0.02] = -np.inf
    lp[(mask >= 0.02) & (mask < 0.03)] = np.nan
    lp[(mask >= 0.03) & (mask < 0.04)] = -40.0  # below log(1e-15)
    lp[(mask >= 0.04) & (mask < 0.05)] = 1e-17  # rounding above 0: loss 0
    best = np.where(rng.random(b) < 0.6, np.nan_to_num(lp, nan=-np.inf).argmax(1), 0)
    best = np.where(rng.random(b) < 0.2, rng.integers(0, k, b), best)
    ys: list[Hashable] = []
    weights = rng.dirichlet(np.ones(len(universe)))
    for _ in range(b):
        if ys and rng.random() < 0.4:
            ys.append(ys[-1])
        else:
            ys.append(universe[rng.choice(len(universe), p=weights)])
    return ys, lp, best.astype(np.intp)


def reference_update(
    ev: PrequentialEvaluator,
    ys: Sequence[Hashable],
    labels: Sequence[Hashable],
    lp: np.ndarray,
    best: np.ndarray,
) -> None:
    """The definition of update_arrays."""
    for i, y in enumerate(ys):
        ev.update(y, labels[best[i]], dict(zip(labels, lp[i], strict=True)))


def as_dicts(
    ys: Sequence[Hashable], labels: Sequence[Hashable], lp: np.ndarray, best: np.ndarray
) -> tuple[list[Hashable], list[Hashable | None], list[dict[Hashable, float]]]:
    """The same batch in update_many's form, with some predictions None and some
    probabilities left out."""
    preds: list[Hashable | None] = [labels[j] for j in best.tolist()]
    dicts = [dict(zip(labels, row, strict=True)) for row in lp.tolist()]
    for i in range(0, len(ys), 7):
        preds[i] = None
    for i in range(3, len(ys), 11):
        dicts[i].pop(ys[i], None)
    return list(ys), preds, dicts


# ---------------------------------------------------------------------- equivalence
@pytest.mark.parametrize(
    ("window", "lam", "matrix"),
    [
        (1, 0.999, None),
        (7, 0.5, MATRIX),  # λ = 0.5 renormalises every 332 events, inside batches
        (100, 0.9, None),  # window < batch
        (1000, 0.999, MATRIX),  # window > batch (the engine's defaults)
        (5000, 1.0, None),  # λ = 1: fading = cumulative
        (64, 1e-3, MATRIX),  # renormalised every 34 events: many runs per batch
        (64, 0.05, None),  # every 77 events
        (64, 1e-20, None),  # λ < 7.5e-4 (runs shorter than MIN_BATCH): the per-event path
    ],
)
@pytest.mark.parametrize("method", ["update_arrays", "update_many"])
def test_batch_path_equals_update_loop(window: int, lam: float, matrix: Any, method: str) -> None:
    rng = np.random.default_rng(window)
    # the model's classes grow; truths include labels it does not know
    known: list[Hashable] = ["a", "b"]
    universe: list[Hashable] = ["a", "b", "z"]
    batched = PrequentialEvaluator(window=window, fading_factor=lam, loss_matrix=matrix)
    one = PrequentialEvaluator(window=window, fading_factor=lam, loss_matrix=matrix)
    for step, b in enumerate([40, 512, 600, 5, 31, 32, 700, 1, 333, 0, 512, 90]):
        if step == 2:
            known.append("c")
            universe.append("c")
        if step == 5:
            known.insert(0, 7)  # a new class, first column
            universe.append(7)
        if step == 8:
            universe.append("new")  # first seen in the middle of a batch
        ys, lp, best = random_batch(rng, b, known, universe)
        if method == "update_arrays":
            batched.update_arrays(ys, known, lp, best)
            reference_update(one, ys, known, lp, best)
        else:
            t, p, d = as_dicts(ys, known, lp, best)
            batched.update_many(t, p, d)
            for event in zip(t, p, d, strict=True):
                one.update(*event)
        assert_identical(batched, one)
    assert batched.n == one.n == 2856


@pytest.mark.parametrize("window", [1, 6, 100, 1000])
@pytest.mark.parametrize("lam", [1.0, 0.999, 0.5])
def test_one_and_two_classes(window: int, lam: float) -> None:
    """The majority baseline with K ≤ 2 runs on the difference of the two class
    totals: one class, then two (the engine's usual case), then a third."""
    rng = np.random.default_rng(window)
    batched = PrequentialEvaluator(window=window, fading_factor=lam)
    one = PrequentialEvaluator(window=window, fading_factor=lam)
    stream: list[tuple[list[Hashable], list[Hashable]]] = [
        (["a"], ["a"]),
        (["a", "b"], ["a"]),  # "b" predicted, never true yet
        (["a", "b"], ["b", "a"]),
        (["b", "a"], ["a", "b"]),  # a column order that differs from the codes
        (["a", "b"], ["a", "b", "c"]),  # "c" comes in: the generic path
    ]
    for labels, universe in stream:
        for b in (40, 600, 33):
            ys, lp, best = random_batch(rng, b, labels, universe)
            batched.update_arrays(ys, labels, lp, best)
            reference_update(one, ys, labels, lp, best)
            assert_identical(batched, one)


def test_renormalisation_crossings_inside_and_between_batches() -> None:
    """λ = 0.5: the scale crosses RENORMALISE_BELOW every 332 events. Batches
    of 331, 332, 333 and 1000 events cross it before, at and after their end
    and several times inside."""
    lam = 0.5
    run = int(math.log(RENORMALISE_BELOW) / math.log(lam))
    assert lam**run >= RENORMALISE_BELOW > lam ** (run + 1)
    rng = np.random.default_rng(5)
    batched = PrequentialEvaluator(window=50, fading_factor=lam)
    one = PrequentialEvaluator(window=50, fading_factor=lam)
    for b in [run - 1, run, run + 1, 1, run - 2, 1000, 3 * run, 2, run]:
        ys, lp, best = random_batch(rng, b, ["x", "y", "w"], ["x", "y", "w"])
        batched.update_arrays(ys, ["x", "y", "w"], lp, best)
        reference_update(one, ys, ["x", "y", "w"], lp, best)
        assert_identical(batched, one)
        # raw statistics never exceed ~1e100 × their true value
        state = batched.to_state()
        assert state["fading_scale"] >= RENORMALISE_BELOW
        assert state["fading"]["n"] * state["fading_scale"] == pytest.approx(2.0, rel=1e-9)


def score_one_by_one(
    board: Scoreboard, ys: Sequence[Hashable], labels: Sequence[Hashable], lp: np.ndarray, best: Any
) -> None:
    """The definition of score_arrays: Scoreboard.add per event, with update's log loss."""
    for i, y in enumerate(ys):
        board.add(y, labels[best[i]], -float(lp[i, labels.index(y)]))


def test_fading_majority_follows_the_per_event_rule_after_a_rounding_tie() -> None:
    """A renormalisation can round two class totals to a tie whose first-seen
    class is not the carried majority (the per-event rule does not re-check
    it). Then an event that ties them as well makes its class the majority
    when it was seen before the carried one, not the argmax of the totals:
    the batch path replays the rule there. No stream short enough for a test
    reaches that state, so two scoreboards are set up in it directly (λ = 1),
    and the batch path (score_arrays) is compared with the per-event one
    (Scoreboard.add)."""
    labels = ["x", "y", "z"]

    def tied(top: float = 5.0) -> Scoreboard:
        board = Scoreboard(window_size=5, fading_factor=1.0)
        for y in labels:
            board.add(y, y, 0.0)
        board.fading.true.update(x=top, y=top - 1.0, z=top)  # x and z tie; the majority is z
        board.fading.majority = "z"
        return board

    batched, one = tied(), tied()
    ys: list[Hashable] = ["y"] + ["x", "z", "y", "y"] * 20  # y reaches the tie first
    lp = np.log(np.full((len(ys), 3), 1 / 3))
    best = np.zeros(len(ys), np.intp)
    score_arrays(batched, BatchTables(), ys, labels, lp, best)
    score_one_by_one(one, ys, labels, lp, best)
    assert scoreboard_to_state(batched) == scoreboard_to_state(one)
    assert_same_majorities(batched, one)
    quiet, loop = tied(100.0), tied(100.0)  # no event breaks the tie: z stays the majority
    zeros = np.zeros((40, 1))
    score_arrays(quiet, BatchTables(), ["w"] * 40, ["w"], zeros, np.zeros(40, np.intp))
    score_one_by_one(loop, ["w"] * 40, ["w"], zeros, np.zeros(40, np.intp))
    assert quiet.fading.majority == loop.fading.majority == "z"
    assert scoreboard_to_state(quiet) == scoreboard_to_state(loop)
    assert_same_majorities(quiet, loop)


def test_interleaved_single_and_batch_updates_and_state_round_trips() -> None:
    rng = np.random.default_rng(11)
    pick = random.Random(11)
    labels: list[Hashable] = [0, "0", 2.5, "x"]
    universe: list[Hashable] = [0, "0", 2.5, "x", True, "unseen"]
    batched = PrequentialEvaluator(window=60, fading_factor=0.9, loss_matrix={0: {"0": 3.0}})
    one = PrequentialEvaluator(window=60, fading_factor=0.9, loss_matrix={0: {"0": 3.0}})
    for step in range(40):
        b = pick.choice([1, 2, 17, 31, 32, 33, 64, 150, 400])
        ys, lp, best = random_batch(rng, b, labels, universe)
        how = pick.choice(["update", "update_many", "update_arrays"])
        if how == "update":
            reference_update(batched, ys, labels, lp, best)
        elif how == "update_many":
            batched.update_many(*as_dicts(ys, labels, lp, best))
        else:
            batched.update_arrays(ys, labels, lp, best)
        if how == "update_many":
            for event in zip(*as_dicts(ys, labels, lp, best), strict=True):
                one.update(*event)
        else:
            reference_update(one, ys, labels, lp, best)
        assert_identical(batched, one)
        if step % 5 == 4:  # restore mid-stream and continue from the copy
            batched = PrequentialEvaluator.from_state(json.loads(json.dumps(batched.to_state())))
            assert_identical(batched, one)


def test_many_classes_run_the_per_event_path() -> None:
    rng = np.random.default_rng(2)
    labels: list[Hashable] = list(range(80))
    ys, lp, best = random_batch(rng, 600, labels, [*labels, "other"])
    batched = PrequentialEvaluator(window=100, fading_factor=0.99)
    one = PrequentialEvaluator(window=100, fading_factor=0.99)
    batched.update_arrays(ys[:300], labels, lp[:300], best[:300])
    batched.update_many(*as_dicts(ys[300:], labels, lp[300:], best[300:]))
    reference_update(one, ys[:300], labels, lp[:300], best[:300])
    for event in zip(*as_dicts(ys[300:], labels, lp[300:], best[300:]), strict=True):
        one.update(*event)
    assert_identical(batched, one)


def test_small_update_many_batches_are_update_bit_for_bit() -> None:
    """Below MIN_BATCH events update_many is the per-event path itself."""
    rng = np.random.default_rng(3)
    batched = PrequentialEvaluator(window=7, fading_factor=0.5, loss_matrix=MATRIX)
    one = PrequentialEvaluator(window=7, fading_factor=0.5, loss_matrix=MATRIX)
    for _ in range(100):
        ys, lp, best = random_batch(rng, MIN_BATCH - 1, ["a", "b"], ["a", "b", "c"])
        t, p, d = as_dicts(ys, ["a", "b"], lp, best)
        batched.update_many(t, p, d)
        for event in zip(t, p, d, strict=True):
            one.update(*event)
    # repr keeps the float bits and the int/float distinction that == would blur
    assert repr(batched.to_state()) == repr(one.to_state())


@pytest.mark.parametrize("third", ["c", "a"], ids=["three-classes", "two-classes"])
def test_window_majority_ties_and_classes_leaving(third: str) -> None:
    """Exact ties in the window (alternating classes, even window) go to the
    class seen first; classes leave the window and come back within a batch."""
    ys: list[Hashable] = (["b", "a"] * 40 + [third] * 30 + ["a", "b"] * 40) * 3
    labels = ["a", "b", "c"]
    lp = np.log(np.full((len(ys), 3), 1 / 3))
    best = np.arange(len(ys)) % 3
    for window in (1, 2, 4, 10, 64):
        batched = PrequentialEvaluator(window=window, fading_factor=1.0)
        one = PrequentialEvaluator(window=window, fading_factor=1.0)
        batched.update_arrays(ys, labels, lp, best)
        reference_update(one, ys, labels, lp, best)
        assert_identical(batched, one)


def test_window_float_sums_are_re_added_exactly() -> None:
    """Large losses pass through a small window, then it holds only tiny ones:
    the running sum would keep the large terms' rounding errors (~1e-13 here,
    relative ~1e-11), but it is re-added exactly every `window` evictions."""
    rng = np.random.default_rng(8)
    ev = PrequentialEvaluator(window=7)
    labels = ["a", "b"]
    for _ in range(30):
        lp = np.log(rng.uniform(1e-14, 1.0, size=(100, 2)))
        ev.update_arrays(["a"] * 100, labels, lp, np.zeros(100, np.intp))
    tiny = np.log(np.full((50, 2), 1 - 1e-4))
    ev.update_arrays(["a"] * 50, labels, tiny, np.zeros(50, np.intp))
    want = math.fsum([-math.log(1 - 1e-4)] * 7) / 7
    assert ev.report()["window"]["log_loss"] == pytest.approx(want, rel=1e-14, abs=0)


def test_log_loss_edge_values_without_warnings() -> None:
    labels = ["a", "b"]
    lp = np.array([[0.0, -np.inf], [np.nan, -1.0], [1e-12, -40.0], [-np.inf, -np.inf]] * 10)
    ys = ["a", "a", "b", "b"] * 10
    best = np.zeros(40, np.intp)
    batched = PrequentialEvaluator()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batched.update_arrays(ys, labels, lp, best)
    floor = -math.log(1e-15)
    per_block = 0.0 + floor + floor + floor  # -inf, NaN and below-floor all cost the floor
    assert batched.report()["cumulative"]["log_loss"] == pytest.approx(per_block / 4, rel=1e-15)


# ---------------------------------------------------------------------- validation
def _state_repr(ev: PrequentialEvaluator) -> str:
    return repr(ev.to_state())


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((["a"] * 40, ["a", "b"], np.zeros((40, 3)), np.zeros(40, int)), ValueError, r"shape"),
        ((["a"] * 40, ["a", "b"], np.zeros((39, 2)), np.zeros(40, int)), ValueError, r"\(40, 2\)"),
        ((["a"] * 40, ["a", "b"], np.zeros((40, 2)), np.zeros(39, int)), ValueError, r"best"),
        ((["a"] * 40, ["a", "b"], np.zeros((40, 2)), np.zeros(40)), ValueError, r"integer"),
        ((["a"] * 40, ["a", "b"], np.zeros((40, 2)), np.full(40, 2)), ValueError, r"< 2"),
        ((["a"] * 40, ["a", "b"], np.zeros((40, 2)), np.full(40, -1)), ValueError, r"from -1"),
        (([*["a"] * 39, ["x"]], ["a", "b"], np.zeros((40, 2)), np.zeros(40, int)), TypeError, None),
        ((["new"] * 40, ["a", ["b"]], np.zeros((40, 2)), np.zeros(40, int)), TypeError, None),
        ((["a"] * 3, ["a", ["b"]], np.zeros((3, 2)), np.zeros(3, int)), TypeError, None),
    ],
)
def test_update_arrays_checks_before_changing_anything(
    args: tuple[Any, ...], error: type[Exception], match: str | None
) -> None:
    ev = PrequentialEvaluator(window=5)
    ev.update_arrays(["a", "b"] * 20, ["a", "b"], np.log(np.full((40, 2), 0.5)), np.ones(40, int))
    before = _state_repr(ev)
    with pytest.raises(error, match=match):
        ev.update_arrays(*args)
    assert _state_repr(ev) == before
    ev.update_arrays([], ["a"], np.zeros((0, 1)), np.zeros(0, int))  # an empty batch is fine
    assert _state_repr(ev) == before


def test_update_many_checks_a_large_batch_before_changing_anything() -> None:
    ev = PrequentialEvaluator(window=5)
    ev.update_many(["a"] * 40, ["a"] * 40, [{"a": 0.0}] * 40)
    before = _state_repr(ev)
    with pytest.raises(TypeError, match="unhashable"):
        ev.update_many(["new"] * 40, [*["a"] * 39, ["b"]], [{}] * 40)
    with pytest.raises(TypeError, match="unhashable"):
        ev.update_many([*["new"] * 39, {"b"}], ["a"] * 40, [{}] * 40)
    with pytest.raises(ValueError, match="as many predictions"):
        ev.update_many(["a"] * 40, ["a"] * 39, [{}] * 40)
    assert _state_repr(ev) == before


# ---------------------------------------------------------------------- state
#: Written by the evaluator before the batch path (commit f5ad152, a deque of
#: window entries): window=3, λ=0.5, 5 events, loss matrix {"a": {"b": 2.0}}.
OLD_STATE = """{"format": "stream-nb/prequential", "version": 1, "window_size": 3,
"fading_factor": 0.5, "loss_matrix": [["a", [["b", 2.0]]]], "classes": ["a", "b", 2],
"last_label": ["b"], "cumulative": {"n": 5, "correct": 2, "loss": 70.19191343545762,
"cost": 4.0, "majority_correct": 3, "nochange_correct": 1, "true": [["a", 1], ["b", 3], [2, 1]],
"pred": [["a", 2], [null, 1], ["b", 2]], "confusion": [["a", "a", 1], ["b", "a", 1],
["b", null, 1], [2, "b", 1], ["b", "b", 1]]}, "window": {"n": 3, "correct": 1,
"loss": 69.21108418244589, "cost": 2.0, "majority_correct": 2, "nochange_correct": 1,
"true": [["b", 2], [2, 1]], "pred": [[null, 1], ["b", 2]], "confusion": [["b", null, 1],
[2, "b", 1], ["b", "b", 1]]}, "window_entries": [["b", null, false, 34.538776394910684, 1.0,
true, true], [2, "b", false, 34.538776394910684, 1.0, false, false], ["b", "b", true,
0.13353139262452263, 0.0, false, true]], "window_evictions": 2, "fading": {"n": 62.0,
"correct": 34.0, "loss": 836.5515909089845, "cost": 32.0, "majority_correct": 62.0,
"nochange_correct": 8.0, "true": [["a", 2.0], ["b", 44.0], [2, 16.0]], "pred": [["a", 6.0],
[null, 8.0], ["b", 48.0]], "confusion": [["a", "a", 2.0], ["b", "a", 4.0], ["b", null, 8.0],
[2, "b", 16.0], ["b", "b", 32.0]]}, "fading_scale": 0.03125}"""

OLD_EVENTS: list[tuple[Hashable, Hashable | None, dict[Hashable, float]]] = [
    ("a", "a", {"a": math.log(0.75), "b": math.log(0.25)}),
    ("b", "a", {"a": math.log(0.5), "b": math.log(0.5)}),
    ("b", None, {}),
    (2, "b", {"b": 0.0}),
    ("b", "b", {"a": math.log(0.125), "b": math.log(0.875)}),
]


def test_snapshot_of_the_previous_version_loads_and_continues() -> None:
    old = PrequentialEvaluator.from_state(json.loads(OLD_STATE))
    fresh = PrequentialEvaluator(window=3, fading_factor=0.5, loss_matrix={"a": {"b": 2.0}})
    for event in OLD_EVENTS:
        fresh.update(*event)
    state, written = old.to_state(), json.loads(OLD_STATE)
    assert state == fresh.to_state()
    # the same format and values; the lists now come in class order
    for name in ("cumulative", "window", "fading"):
        for key in ("true", "pred", "confusion"):
            assert sorted(map(repr, state[name][key])) == sorted(map(repr, written[name][key]))
            state[name][key] = written[name][key]
    assert state == written
    assert old.report() == fresh.report()
    rng = np.random.default_rng(9)
    ys, lp, best = random_batch(rng, 200, ["a", "b"], ["a", "b", 2])
    old.update_arrays(ys, ["a", "b"], lp, best)
    reference_update(fresh, ys, ["a", "b"], lp, best)
    assert_identical(old, fresh)


def test_window_ring_stays_bounded() -> None:
    """Batches scored as update_arrays scores them, on a scoreboard of their own."""
    rng = np.random.default_rng(4)
    board, tables = Scoreboard(window_size=100), BatchTables()
    for b in [1, 700, 3, 512, 512, 40, 1000, 2] * 5:
        ys, lp, best = random_batch(rng, b, ["a", "b"], ["a", "b"])
        score_arrays(board, tables, ys, ["a", "b"], lp, best)
        assert len(board.ring) == min(board.cumulative.n, 100)
        assert len(board.ring.arrays[0]) <= 2 * (100 + 1000)


# ---------------------------------------------------------------------- properties
classes = st.sampled_from(["a", "b", "c", 1, 2])
batches = st.lists(
    st.tuples(
        st.lists(classes, min_size=0, max_size=80),  # truths
        st.integers(0, 2**32 - 1),  # seed of the batch's log-probabilities
        st.sampled_from(["update_arrays", "update_many", "update"]),
    ),
    max_size=6,
)


@given(batches, st.integers(1, 50), st.sampled_from([0.5, 0.9, 1.0, 1e-30]))
def test_property_batches_equal_update(
    stream: list[tuple[list[Hashable], int, str]], window: int, lam: float
) -> None:
    labels: list[Hashable] = ["a", "b", 1]  # "c" and 2 are never predicted
    matrix = {"a": {"b": 2.0}, 1: {"c": 0.5}}
    batched = PrequentialEvaluator(window=window, fading_factor=lam, loss_matrix=matrix)
    one = PrequentialEvaluator(window=window, fading_factor=lam, loss_matrix=matrix)
    for ys, seed, how in stream:
        rng = np.random.default_rng(seed)
        lp = np.log(rng.dirichlet(np.ones(3), size=len(ys)))
        best = rng.integers(0, 3, len(ys))
        if how == "update_arrays":
            batched.update_arrays(ys, labels, lp, best)
        elif how == "update_many":
            batched.update_many(*as_dicts(ys, labels, lp, best))
        else:
            reference_update(batched, ys, labels, lp, best)
        if how == "update_many":
            for event in zip(*as_dicts(ys, labels, lp, best), strict=True):
                one.update(*event)
        else:
            reference_update(one, ys, labels, lp, best)
    assert_identical(batched, one)


events = st.lists(
    st.tuples(
        classes,
        st.one_of(st.none(), classes),
        st.dictionaries(classes, st.floats(-50, 0), max_size=5),
    ),
    max_size=150,
)


@given(events, st.integers(0, 150), st.integers(1, 40), st.sampled_from([0.5, 0.9, 1.0]))
def test_property_update_many_equals_update(
    stream: list[tuple[Hashable, Hashable | None, dict[Hashable, float]]],
    cut: int,
    window: int,
    lam: float,
) -> None:
    """Arbitrary dicts (labels left out, log P = 0 or -50), None predictions,
    the stream cut in two batches at any point."""
    matrix = {"a": {"b": 2.0}, None: {1: 0.5}}
    batched = PrequentialEvaluator(window=window, fading_factor=lam, loss_matrix=matrix)
    one = PrequentialEvaluator(window=window, fading_factor=lam, loss_matrix=matrix)
    for part in (stream[:cut], stream[cut:]):
        batched.update_many([e[0] for e in part], [e[1] for e in part], [e[2] for e in part])
    for event in stream:
        one.update(*event)
    assert_identical(batched, one)


def test_queued_batches_are_scored_before_every_read() -> None:
    """update_arrays queues batches (up to _DEFER_EVENTS events, same labels) and
    scores them together; every public read or update scores them first."""
    rng = np.random.default_rng(11)
    ev, one = PrequentialEvaluator(window=300), PrequentialEvaluator(window=300)
    labels = ["a", "b"]
    for size in [700, 700, 64, 5, 3000, 900]:
        ys, lp, best = random_batch(rng, size, labels, labels)
        ev.update_arrays(ys, labels, lp, best)
        assert ev._pending_events < _DEFER_EVENTS
        for y, row, j in zip(ys, lp, best, strict=True):
            one.update(y, labels[int(j)], dict(zip(labels, row, strict=True)))
    assert ev._pending  # something is still queued, yet every read sees it
    assert ev.n == one.n and ev.n_correct == one.n_correct
    assert ev.report() == one.report() and ev.to_state() == one.to_state()
    # other labels flush the queue first; update and update_many see the queued events
    ys, lp, best = random_batch(rng, 100, ["a", "b", "c"], ["a", "b", "c"])
    ev.update_arrays(ys, ["a", "b", "c"], lp, best)
    for y, row, j in zip(ys, lp, best, strict=True):
        one.update(y, ["a", "b", "c"][int(j)], dict(zip(["a", "b", "c"], row, strict=True)))
    ev.update("a", "b", {"a": -0.5})
    one.update("a", "b", {"a": -0.5})
    assert_identical(ev, one)
