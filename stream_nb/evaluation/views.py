"""The evaluator's views (cumulative, window, fading).

Each view keeps its sums and counts; the window's events live in a ring buffer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb._exceptions import ModelStateError
from stream_nb._state import (
    check_at_most,
    check_consistent,
    encode_key,
    read_finite,
    read_label,
    read_list,
)
from stream_nb.evaluation.decision import LOG_LOSS_FLOOR

#: ``log(LOG_LOSS_FLOOR)``: a ``log P(y | x)`` at or below it costs :data:`MAX_LOSS`.
LOG_FLOOR = math.log(LOG_LOSS_FLOOR)

#: The log loss of one event whose label had probability ``LOG_LOSS_FLOOR`` or less.
MAX_LOSS = -LOG_FLOOR


#: Renormalise the fading view's raw statistics when its scale drops below
#: this. Raw values then stay below ~1e100 × (effective weight), and the
#: kappa's products of two raw totals below ~1e206, far from float overflow
#: (1.8e308). With λ = 0.999 that is an O(cells) pass every ~230,000 events.
RENORMALISE_BELOW = 1e-100


class View:
    """Additive statistics of one view of the evaluator, in raw units (true = raw × scale).

    Attributes
    ----------
    n, correct, majority_correct, nochange_correct
        Total weight, and the weight of the model's, the majority classifier's
        and the no-change classifier's hits (integers in the cumulative and
        window views).
    loss, cost
        Sums of the events' log losses and costs, weighted.
    true, pred, tp, confusion
        Weights by true label, by prediction, of correct predictions by label,
        and by cell ``(true, predicted)``; a key leaves the window's dicts when
        its count reaches 0.
    majority
        The most frequent true label counting the last event (ties: the label
        seen first), ``None`` while the view is empty.
    """

    __slots__ = (
        "confusion",
        "correct",
        "cost",
        "loss",
        "majority",
        "majority_correct",
        "n",
        "nochange_correct",
        "pred",
        "tp",
        "true",
    )

    def __init__(self) -> None:
        self.n: float = 0
        self.correct: float = 0
        self.loss = 0.0
        self.cost = 0.0
        self.majority_correct: float = 0
        self.nochange_correct: float = 0
        self.true: dict[Any, float] = {}  # row totals n_{c·}
        self.pred: dict[Any, float] = {}  # column totals n_{·c}
        self.tp: dict[Any, float] = {}  # diagonal, correct predictions only
        self.confusion: dict[tuple[Any, Any], float] = {}
        self.majority: Any = None  # most frequent true label (None: view empty)

    def add(
        self,
        t: Any,
        p: Any,
        w: float,
        correct: bool,
        loss: float,
        cost: float,
        nochange_ok: bool,
        order: Mapping[Any, int],
    ) -> bool:
        """Add one event of raw weight ``w``; returns the majority classifier's hit."""
        self.n += w
        true = self.true
        count = true.get(t, 0) + w
        true[t] = count
        pred = self.pred
        pred[p] = pred.get(p, 0) + w
        confusion = self.confusion
        key = (t, p)
        confusion[key] = confusion.get(key, 0) + w
        if correct:
            self.correct += w
            tp = self.tp
            tp[t] = tp.get(t, 0) + w
        self.loss += w * loss
        self.cost += w * cost
        if nochange_ok:
            self.nochange_correct += w
        # Majority of true labels *including this event* (MOA's order); the
        # argmax can only move to t, ties go to the class seen first.
        m = self.majority
        if m is None or (
            t != m and (count > true[m] or (count == true[m] and order[t] < order[m]))
        ):
            self.majority = m = t
        if m == t:
            self.majority_correct += w
            return True
        return False

    def remove(self, entry: tuple[Any, Any, bool, float, float, bool, bool]) -> None:
        """Subtract one weight-1 event (window only)."""
        t, p, correct, loss, cost, nochange_ok, majority_ok = entry
        self.n -= 1
        _decrement(self.true, t)
        _decrement(self.pred, p)
        _decrement(self.confusion, (t, p))
        if correct:
            self.correct -= 1
            _decrement(self.tp, t)
        self.loss -= loss
        self.cost -= cost
        if nochange_ok:
            self.nochange_correct -= 1
        if majority_ok:
            self.majority_correct -= 1

    def rescale(self, factor: float) -> None:
        self.n *= factor
        self.correct *= factor
        self.loss *= factor
        self.cost *= factor
        self.majority_correct *= factor
        self.nochange_correct *= factor
        for d in (self.true, self.pred, self.tp, self.confusion):
            for k in d:
                d[k] *= factor

    def find_majority(self, order: Mapping[Any, int]) -> None:
        """Recompute the majority from the row totals (O(K))."""
        best: Any = None
        best_key: tuple[float, int] | None = None
        for c, count in self.true.items():
            key = (-count, order[c])
            if best_key is None or key < best_key:
                best, best_key = c, key
        self.majority = best

    def summary(
        self,
        scale: float,
        with_cost: bool,
        with_confusion: bool,
        order: Mapping[Any, int],
        pcode: Mapping[Any, int],
    ) -> dict[str, Any]:
        """The view's metrics; classes and cells in class order (see :meth:`sorted_items`)."""
        n = self.n
        out: dict[str, Any] = {"n": n * scale if scale != 1.0 else n}
        if n <= 0:
            out.update(
                accuracy=None, log_loss=None, kappa=None, kappa_m=None, kappa_t=None,
                macro_f1=None,
            )  # fmt: skip
            if with_cost:
                out["cost"] = None
            if with_confusion:
                out["confusion"] = []
            return out
        correct = self.correct
        out["accuracy"] = correct / n
        out["log_loss"] = self.loss / n
        pred = self.pred
        # kappa = (p0 - pe) / (1 - pe) = (n·correct - S) / (n² - S), S = Σ n_c· n_·c;
        # exact in integers for the cumulative and window views.
        agreement: float = 0
        true_items = self.sorted_items(order, pcode)[0]
        for c, count in true_items:
            other = pred.get(c)
            if other is not None:
                agreement += count * other
        denominator = n * n - agreement
        out["kappa"] = (n * correct - agreement) / denominator if denominator > 0 else None
        majority = self.majority_correct
        out["kappa_m"] = (correct - majority) / (n - majority) if n - majority > 0 else None
        nochange = self.nochange_correct
        out["kappa_t"] = (correct - nochange) / (n - nochange) if n - nochange > 0 else None
        tp = self.tp
        true = self.true
        f1_sum = 0.0
        classes = 0
        for c, count in true_items:
            denominator = count + pred.get(c, 0)
            if denominator > 0:  # 0: a faded weight that underflowed (λ near 1e-100)
                f1_sum += 2 * tp.get(c, 0) / denominator
                classes += 1
        for c, count in pred.items():
            if c not in true and c is not None and count > 0:
                classes += 1  # predicted, never true: F1 = 0
        out["macro_f1"] = f1_sum / classes if classes else None
        if with_cost:
            out["cost"] = self.cost / n
        if with_confusion:
            out["confusion"] = [
                [t, p, w * scale if scale != 1.0 else w]
                for (t, p), w in self.sorted_items(order, pcode)[2]
            ]
        return out

    def sorted_items(
        self, order: Mapping[Any, int], pcode: Mapping[Any, int]
    ) -> tuple[list[tuple[Any, Any]], list[tuple[Any, Any]], list[tuple[Any, Any]]]:
        """``true``, ``pred`` and ``confusion`` items in class order.

        True labels in the order they were first seen as truths, predictions
        in the order they were first emitted, cells by (truth, prediction).
        Both orders depend on the stream only, not on how it was fed (event
        by event or in batches) nor on checkpoints, whereas the dicts' own
        order does (the window deletes and re-inserts keys): so every sum
        over classes and every output is the same, bit for bit, either way.
        """
        last = len(order) + len(pcode)  # (only a malformed state has other labels)
        true = sorted(self.true.items(), key=lambda item: order.get(item[0], last))
        pred = sorted(self.pred.items(), key=lambda item: pcode.get(item[0], last))
        confusion = sorted(
            self.confusion.items(),
            key=lambda item: (order.get(item[0][0], last), pcode.get(item[0][1], last)),
        )
        return true, pred, confusion

    # ------------------------------------------------------------------ state
    def to_state(self, order: Mapping[Any, int], pcode: Mapping[Any, int]) -> dict[str, Any]:
        true, pred, confusion = self.sorted_items(order, pcode)
        return {
            "n": self.n,
            "correct": self.correct,
            "loss": self.loss,
            "cost": self.cost,
            "majority_correct": self.majority_correct,
            "nochange_correct": self.nochange_correct,
            "true": [[encode_key(c), w] for c, w in true],
            "pred": [[encode_key(c), w] for c, w in pred],
            "confusion": [[encode_key(t), encode_key(p), w] for (t, p), w in confusion],
        }

    @classmethod
    def from_state(cls, state: Any, order: Mapping[Any, int], where: str) -> View:
        """A view from :meth:`to_state`, checked: weights finite and ≥ 0 (integers stay
        integers), labels distinct, ``n = Σ true = Σ pred = Σ confusion``,
        ``correct = Σ`` diagonal, every hit count ≤ ``n``."""
        if not isinstance(state, Mapping):
            raise ModelStateError(f"{where}: must be a JSON object, got {state!r:.80}")
        view = cls()
        view.n = _weight(state["n"], f"{where}.n")
        view.correct = _weight(state["correct"], f"{where}.correct")
        view.majority_correct = _weight(state["majority_correct"], f"{where}.majority_correct")
        view.nochange_correct = _weight(state["nochange_correct"], f"{where}.nochange_correct")
        view.loss = read_finite(state["loss"], f"{where}.loss")
        view.cost = read_finite(state["cost"], f"{where}.cost")
        view.true = _weights_by_label(state["true"], f"{where}.true", False)
        view.pred = _weights_by_label(state["pred"], f"{where}.pred", True)
        for i, item in enumerate(read_list(state["confusion"], f"{where}.confusion")):
            at = f"{where}.confusion[{i}]"
            t, p, w = read_list(item, at, 3)
            key = (state_label(t, f"{at}[0]", False), state_label(p, f"{at}[1]", True))
            if key in view.confusion:
                raise ModelStateError(f"{at}: cell {key!r} listed twice")
            view.confusion[key] = _weight(w, f"{at}[2]")
            if key[0] == key[1]:
                view.tp[key[0]] = view.confusion[key]
        for c in view.true:
            if c not in order:
                raise ModelStateError(f"{where}.true: label {c!r} missing from the class order")
        n = view.n
        for name, table in (
            ("true", view.true),
            ("pred", view.pred),
            ("confusion", view.confusion),
        ):
            check_consistent(n, table.values(), f"{where}.n", f"{where}.{name}")
        check_consistent(view.correct, view.tp.values(), f"{where}.correct", "the diagonal")
        for name, hits in (
            ("correct", view.correct),
            ("majority_correct", view.majority_correct),
            ("nochange_correct", view.nochange_correct),
        ):
            check_at_most(hits, n, f"{where}.{name}", f"{where}.n")
        view.find_majority(order)
        return view


def _decrement(d: dict[Any, Any], key: Any) -> None:
    left = d[key] - 1
    if left:
        d[key] = left
    else:
        del d[key]


def state_label(value: Any, where: str, allow_none: bool = True) -> Any:
    """A label of a state (``None``: no prediction), integers exact."""
    if value is None and allow_none:
        return None
    return read_label(value, where)


def _weights_by_label(items: Any, where: str, allow_none: bool) -> dict[Any, Any]:
    """A state's ``[[label, weight], ...]`` as a dict, labels distinct."""
    table: dict[Any, Any] = {}
    for i, item in enumerate(read_list(items, where)):
        c, w = read_list(item, f"{where}[{i}]", 2)
        c = state_label(c, f"{where}[{i}][0]", allow_none)
        if c in table:
            raise ModelStateError(f"{where}[{i}]: label {c!r} listed twice")
        table[c] = _weight(w, f"{where}[{i}][1]")
    return table


def _weight(value: Any, where: str) -> float:
    """A weight of a state: finite and ≥ 0; integers stay integers (exact counts)."""
    if value.__class__ is int and 0 <= value < 1 << 63:
        return value
    number = read_finite(value, where)
    if number < 0.0:
        raise ModelStateError(f"{where}: must be finite and ≥ 0, got {value!r}")
    weight: float = value  # as given: an integer weight stays exact
    return weight


#: Entry fields of the window (:class:`Ring`), in the state's ``window_entries`` order:
#: true label code, predicted label code, correct, log loss, cost, no-change hit,
#: majority hit.
_RING_DTYPES = (np.intp, np.intp, np.bool_, np.float64, np.float64, np.bool_, np.bool_)


class Ring:
    """The window's events as seven parallel numpy arrays, live in ``[start, end)``.

    ``true`` and ``pred`` hold label codes (indices into the scoreboard's
    ``true_labels`` / ``pred_labels``). The live events are always one contiguous
    slice, which the batch path reads and writes with array operations; the
    per-event path reads and writes single items through memoryviews (plain
    Python scalars, ~20 ns an item). When an append would run past the end,
    the live slice moves to the front or, if it fills more than half the
    arrays, the arrays double: O(1) amortised per event, memory at most about
    ``2 × (window + batch)`` events.
    """

    __slots__ = ("arrays", "capacity", "end", "start", "views")

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self.arrays: tuple[np.ndarray, ...] = tuple(np.zeros(capacity, d) for d in _RING_DTYPES)
        # (Any: typeshed's memoryview.__setitem__ takes ints only)
        self.views: tuple[Any, ...] = tuple(a.data for a in self.arrays)
        self.start = 0
        self.end = 0

    def __len__(self) -> int:
        return self.end - self.start

    def reserve(self, n: int) -> None:
        """Make room for ``n`` more events after ``end`` (may move the live slice)."""
        capacity = self.capacity
        if self.end + n <= capacity:
            return
        start, end = self.start, self.end
        live = end - start
        if 2 * (live + n) <= capacity:
            for a in self.arrays:
                a[:live] = a[start:end]  # numpy copies overlapping slices correctly
        else:
            self.capacity = 2 * (live + n)
            grown = tuple(np.zeros(self.capacity, d) for d in _RING_DTYPES)
            for new, old in zip(grown, self.arrays, strict=True):
                new[:live] = old[start:end]
            self.arrays = grown
            self.views = tuple(a.data for a in grown)
        self.start, self.end = 0, live

    def entries(self, tlabels: Sequence[Any], plabels: Sequence[Any]) -> list[list[Any]]:
        """The live events as the state's ``[t, p, correct, loss, cost, nochange, majority]``."""
        start, end = self.start, self.end
        t, p, correct, loss, cost, nochange, majority = (a[start:end].tolist() for a in self.arrays)
        return [
            [encode_key(tlabels[a]), encode_key(plabels[b]), c, d, e, f, g]
            for a, b, c, d, e, f, g in zip(
                t, p, correct, loss, cost, nochange, majority, strict=True
            )
        ]


def counts_of(view: View) -> tuple[Any, ...]:
    """The view's counts and hit counts (not its float sums), to compare two views."""
    return (
        view.n, view.correct, view.majority_correct, view.nochange_correct,
        view.true, view.pred, view.tp, view.confusion,
    )  # fmt: skip


def add_entry(view: View, entry: tuple[Any, Any, bool, float, float, bool, bool]) -> None:
    """Add a stored window entry back, keeping its recorded majority hit."""
    t, p, correct, _loss, _cost_value, nochange_ok, majority_ok = entry
    view.n += 1
    view.true[t] = view.true.get(t, 0) + 1
    view.pred[p] = view.pred.get(p, 0) + 1
    view.confusion[(t, p)] = view.confusion.get((t, p), 0) + 1
    if correct:
        view.correct += 1
        view.tp[t] = view.tp.get(t, 0) + 1
    if nochange_ok:
        view.nochange_correct += 1
    if majority_ok:
        view.majority_correct += 1
