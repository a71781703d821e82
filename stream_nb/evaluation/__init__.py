"""Prequential (test-then-train) evaluation: cumulative, sliding-window and fading.

Every labelled event is scored with the prediction made *before* the model
learned it (Dawid's prequential principle). :class:`PrequentialEvaluator`
keeps three views of the same sequence of ``(truth, prediction, log P)``:

``cumulative``
    every event since the start, weight 1 each;
``window``
    the last ``window`` events (a deque; the oldest is subtracted when a new
    one enters);
``fading``
    every event, the ``k``-th most recent one weighted ``λ^k``: Gama,
    Sebastião & Rodrigues (2013), "On evaluating stream learning algorithms",
    *Machine Learning* 90(3):317-346, fading sums ``S_i = loss_i + λ S_{i-1}``
    and ``N_i = 1 + λ N_{i-1}``; a metric is the ratio ``S_i / N_i``.

Metrics of each view (``n`` is the view's total weight)
-------------------------------------------------------
``accuracy``
    ``Σ [ŷ = y] / n``.
``log_loss``
    ``Σ -log max(P(y | x), LOG_LOSS_FLOOR) / n`` in nats; a label the model
    never saw (absent from ``log_proba``) or given probability 0 costs
    ``-log(LOG_LOSS_FLOOR) ≈ 34.54``.
``kappa``
    Cohen's kappa ``(p0 - pe) / (1 - pe)`` with ``p0`` the accuracy and
    ``pe = Σ_c n_{c·} n_{·c} / n²`` the agreement expected by chance from the
    confusion matrix's row (truth) and column (prediction) totals.
``kappa_m``
    ``(p0 - pm) / (1 - pm)``, ``pm`` the accuracy of the majority-class
    classifier (Bifet, Read, Žliobaitė, Pfahringer & Holmes, "Pitfalls in
    benchmarking data stream classification and how to avoid them", ECML PKDD
    2013; Bifet, de Francisci Morales, Read, Holmes & Pfahringer, "Efficient
    online evaluation of big data stream classifiers", KDD 2015).
``kappa_t``
    ``(p0 - pt) / (1 - pt)``, ``pt`` the accuracy of the no-change classifier
    that predicts the previous event's label (Žliobaitė, Bifet, Read,
    Pfahringer & Holmes, "Evaluation methods and decision theory for
    classification of streaming data with temporal dependence", *Machine
    Learning* 98(3):455-482, 2015).
``macro_f1``
    Mean over classes of ``F1_c = 2 TP_c / (2 TP_c + FP_c + FN_c)``, the
    classes being those that occur in the view as a truth or as a prediction
    (scikit-learn's ``f1_score(average="macro")`` default). Each such class has
    a positive denominator, so no 0/0 arises; a class that was predicted but
    never true, or true but never predicted, has ``F1_c = 0``. This is not
    MOA's "F1 Score", which is the harmonic mean of macro precision and macro
    recall.
``cost``
    (only with a loss matrix) ``Σ λ(ŷ, y) / n``, the mean misclassification
    cost.
``confusion``
    ``[[truth, prediction, weight], ...]``, JSON-able whatever the label types.

The baselines follow MOA's ``BasicClassificationPerformanceEvaluator``
(``WindowClassificationPerformanceEvaluator`` for the window): the
majority-class classifier predicts the most frequent *true* label of the view
counting the current event (MOA adds the event to its class counts before it
asks for the majority), ties going to the class seen first in the stream; its
hit indicator is fixed when the event is added and then summed, windowed or
faded like the accuracy. The no-change classifier predicts the label of the
previous labelled event of the stream (also across the window's edge); it has
no prediction, so it is wrong, for the very first event.

Undefined values
----------------
A metric whose denominator is 0 is ``None`` (JSON ``null``), never NaN or
±inf: every metric when ``n = 0``; ``kappa`` when ``pe = 1`` (every truth and
every prediction is the same single class); ``kappa_m`` when ``pm = 1`` (the
view holds one class only, so the majority classifier is always right);
``kappa_t`` when ``pt = 1`` (the label never changed). scikit-learn returns
NaN for the first case and MOA NaN or ±inf for all three.

A ``y_pred`` of ``None`` means "no prediction" (the model had learned nothing):
it is never correct, appears as ``None`` in the confusion matrix and is not a
class for the macro F1 (it counts as a false negative of the true class).
``None`` is therefore not supported as a label.

Cost
----
:meth:`~PrequentialEvaluator.update` costs O(1) amortised per view (dict
increments; the window rescans its class counts, O(K), only when the evicted
event's label was the majority class; fading statistics use raw units × a
global scale like the learners, see :mod:`stream_nb.base`, so no decay loop
runs per event). The window keeps its events in numpy arrays (one contiguous
slice) so that :meth:`~PrequentialEvaluator.update_arrays` and
:meth:`~PrequentialEvaluator.update_many` score a batch of ``B`` events with a
few dozen array operations on ``B`` (× ``K``) elements, under 0.3 µs per
event for ``B = 512`` and two classes instead of ~2-5 µs, with the same result
bit for bit: the majority baseline's hits come from prefix sums of class
counts, the window's evictions are a slice of those arrays, and every float
sum is added in the per-event order. :meth:`report` costs O(K log K)
plus O(cells log cells) for the confusion matrix (classes and cells are
sorted into the order the stream first showed them, which does not depend on
how the stream was fed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb._exceptions import ConfigError, ModelStateError
from stream_nb._state import (
    check_at_most,
    check_consistent,
    decode_key,
    encode_key,
    read_finite,
    read_label,
    read_list,
    read_n_learned,
)

__all__ = ["LOG_LOSS_FLOOR", "PrequentialEvaluator", "bayes_risk_decision"]

#: Probability floor of the log loss: ``P(y | x)`` below it (including a label
#: the model never saw, probability 0) counts as ``LOG_LOSS_FLOOR``, so one
#: event costs at most ``-log(1e-15) ≈ 34.54`` nats instead of +inf. 1e-15 is
#: the clipping constant of river's ``metrics.CrossEntropy`` and of
#: scikit-learn's ``log_loss`` (``eps=1e-15`` up to version 1.2; later versions
#: clip at float64's machine epsilon, 2.2e-16, which changes only terms below
#: 1e-15).
LOG_LOSS_FLOOR = 1e-15
_LOG_FLOOR = math.log(LOG_LOSS_FLOOR)
_MAX_LOSS = -_LOG_FLOOR

#: Renormalise the fading view's raw statistics when its scale drops below
#: this. Raw values then stay below ~1e100 × (effective weight), and the
#: kappa's products of two raw totals below ~1e206, far from float overflow
#: (1.8e308). With λ = 0.999 that is an O(cells) pass every ~230,000 events.
_RENORMALISE_BELOW = 1e-100

#: From this many events on, :meth:`PrequentialEvaluator.update_many` and
#: :meth:`PrequentialEvaluator.update_arrays` take the vectorised path. Below
#: it numpy's fixed cost (a few dozen array operations, ~60 µs a batch) is not
#: paid back: measured with two classes, the vectorised path beats the
#: per-event one (~3 µs an event) from about 20 events on.
MIN_BATCH = 32

#: Above this many distinct true labels (or twice as many distinct
#: predictions, ``None`` included) batches run the per-event path, so the
#: vectorised path's events × classes matrices stay small.
_MAX_BATCH_CLASSES = 64
#: update_arrays scores queued batches together once this many events wait: one
#: vectorised pass costs a few dozen numpy calls whatever its length (~0.19 µs per
#: event in batches of 1024, ~0.14 in 2048, 1.3 % fewer instructions per event in
#: 8192 than in 2048; without ``tune_malloc`` arrays this long are mmap'ed afresh
#: and page-fault). Reading or changing the evaluator (n, report, to_state,
#: update, update_many) scores them first.
_DEFER_EVENTS = 8192

STATE_FORMAT = "stream-nb/prequential"
STATE_VERSION = 1

#: ``loss_matrix[predicted][true] -> cost``. Keys are typed ``Any`` because
#: ``Mapping`` is invariant in its key: ``dict[str, ...]`` would not be a
#: ``Mapping[Hashable, ...]`` for mypy.
LossMatrix = Mapping[Any, Mapping[Any, float]]


def _check_loss_matrix(
    loss_matrix: Any,
) -> dict[Hashable, dict[Hashable, float]] | None:
    """Validate ``loss_matrix[predicted][true] -> finite cost`` and copy it."""
    if loss_matrix is None:
        return None
    if not isinstance(loss_matrix, Mapping):
        raise ConfigError(
            "loss_matrix must be a mapping predicted label -> {true label: cost}, "
            f"got {type(loss_matrix).__name__}"
        )
    out: dict[Hashable, dict[Hashable, float]] = {}
    for predicted, row in loss_matrix.items():
        if not isinstance(row, Mapping):
            raise ConfigError(
                f"loss_matrix[{predicted!r}] must be a mapping true label -> cost, got {row!r}"
            )
        clean: dict[Hashable, float] = {}
        for true, cost in row.items():
            if (
                isinstance(cost, bool)
                or not isinstance(cost, (int, float))
                or not math.isfinite(cost)
            ):
                raise ConfigError(
                    f"loss_matrix[{predicted!r}][{true!r}] must be a finite number, got "
                    f"{cost!r}; leave the entry out to use the 0-1 default"
                )
            clean[true] = float(cost)
        out[predicted] = clean
    return out


def _cost(loss_matrix: LossMatrix, i: Any, j: Any) -> float:
    """``λ(i, j)``; an entry missing from the matrix defaults to the 0-1 loss."""
    row = loss_matrix.get(i)
    if row is not None:
        cost = row.get(j)
        if cost is not None:
            return cost
    return 0.0 if i == j else 1.0


def bayes_risk_decision(
    log_proba: Mapping[Any, float],
    loss_matrix: LossMatrix,
) -> Hashable | None:
    """The decision of least expected cost: ``argmin_i Σ_j λ(i, j) P(j | x)``.

    Parameters
    ----------
    log_proba
        ``log P(j | x)`` by class, as returned by ``predict_log_proba_one``.
    loss_matrix
        ``loss_matrix[i][j]`` is the cost of deciding ``i`` when the truth is
        ``j``. Entries left out default to the 0-1 loss (0 on the diagonal, 1
        elsewhere), so ``{}`` gives the most probable class. Rows for labels
        absent from ``log_proba`` are candidate decisions too (for instance
        an ``"abstain"`` action with a fixed cost).

    Returns
    -------
    Hashable or None
        The decision; ties go to the first candidate (classes in
        ``log_proba`` order, then the extra rows). ``None`` when
        ``log_proba`` is empty (nothing learned yet).

    Examples
    --------
    A missed fraud costs 10, a false alarm 1: with ``P(fraud) = 0.2`` the
    expected costs are 0.8 for "fraud" and 2.0 for "ok".

    >>> lp = {"ok": math.log(0.8), "fraud": math.log(0.2)}
    >>> bayes_risk_decision(lp, {"ok": {"fraud": 10.0}, "fraud": {"ok": 1.0}})
    'fraud'
    >>> bayes_risk_decision(lp, {})
    'ok'
    """
    if not log_proba:
        return None
    proba = [(j, math.exp(v)) for j, v in log_proba.items()]
    candidates = list(log_proba)
    candidates.extend(i for i in loss_matrix if i not in log_proba)
    best: Hashable | None = None
    best_risk = math.inf
    for i in candidates:
        risk = 0.0
        for j, p in proba:
            risk += _cost(loss_matrix, i, j) * p
        if risk < best_risk:
            best, best_risk = i, risk
    return best


class _View:
    """Additive statistics of one view, in raw units (true = raw × scale)."""

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
    def from_state(cls, state: Any, order: Mapping[Any, int], where: str) -> _View:
        """A view from :meth:`to_state`, checked: weights finite and ≥ 0 (integers stay
        integers), labels distinct, ``n = Σ true = Σ pred = Σ confusion``,
        ``correct = Σ`` diagonal, every hit count ≤ ``n``."""
        if not isinstance(state, Mapping):
            raise ModelStateError(f"{where}: must be a JSON object, got {state!r:.80}")
        view = cls()
        for name in ("n", "correct", "majority_correct", "nochange_correct"):
            setattr(view, name, _weight(state[name], f"{where}.{name}"))
        view.loss = read_finite(state["loss"], f"{where}.loss")
        view.cost = read_finite(state["cost"], f"{where}.cost")
        for name, allow_none in (("true", False), ("pred", True)):
            table: dict[Any, Any] = {}
            for i, item in enumerate(read_list(state[name], f"{where}.{name}")):
                c, w = read_list(item, f"{where}.{name}[{i}]", 2)
                c = _label(c, f"{where}.{name}[{i}][0]", allow_none)
                if c in table:
                    raise ModelStateError(f"{where}.{name}[{i}]: label {c!r} listed twice")
                table[c] = _weight(w, f"{where}.{name}[{i}][1]")
            setattr(view, name, table)
        for i, item in enumerate(read_list(state["confusion"], f"{where}.confusion")):
            at = f"{where}.confusion[{i}]"
            t, p, w = read_list(item, at, 3)
            key = (_label(t, f"{at}[0]", False), _label(p, f"{at}[1]", True))
            if key in view.confusion:
                raise ModelStateError(f"{at}: cell {key!r} listed twice")
            view.confusion[key] = _weight(w, f"{at}[2]")
            if key[0] == key[1]:
                view.tp[key[0]] = view.confusion[key]
        for c in view.true:
            if c not in order:
                raise ModelStateError(f"{where}.true: label {c!r} missing from the class order")
        n = view.n
        for name in ("true", "pred", "confusion"):
            check_consistent(n, getattr(view, name).values(), f"{where}.n", f"{where}.{name}")
        check_consistent(view.correct, view.tp.values(), f"{where}.correct", "the diagonal")
        for name in ("correct", "majority_correct", "nochange_correct"):
            check_at_most(getattr(view, name), n, f"{where}.{name}", f"{where}.n")
        view.find_majority(order)
        return view


def _decrement(d: dict[Any, Any], key: Any) -> None:
    left = d[key] - 1
    if left:
        d[key] = left
    else:
        del d[key]


def _label(value: Any, where: str, allow_none: bool = True) -> Any:
    """A label of a state (``None``: no prediction), integers exact."""
    if value is None and allow_none:
        return None
    return read_label(value, where)


def _weight(value: Any, where: str) -> float:
    """A weight of a state: finite and ≥ 0; integers stay integers (exact counts)."""
    if value.__class__ is int and 0 <= value < 1 << 63:
        return value
    number = read_finite(value, where)
    if number < 0.0:
        raise ModelStateError(f"{where}: must be finite and ≥ 0, got {value!r}")
    return value


#: Entry fields of the window (``_Ring``), in the state's ``window_entries`` order:
#: true label code, predicted label code, correct, log loss, cost, no-change hit,
#: majority hit.
_RING_DTYPES = (np.intp, np.intp, np.bool_, np.float64, np.float64, np.bool_, np.bool_)


class _Ring:
    """The window's events as seven parallel numpy arrays, live in ``[start, end)``.

    ``true`` and ``pred`` hold label codes (indices into the evaluator's
    ``_tlabels`` / ``_plabels``). The live events are always one contiguous
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


def _vector(counts: Mapping[Any, float], order: Mapping[Any, int], k: int, dtype: Any) -> Any:
    """A view's class totals as an array indexed by class code."""
    out = np.zeros(k, dtype)
    for c, w in counts.items():
        out[order[c]] = w
    return out


def _add_counts(d: dict[Any, Any], key: Callable[[int], Any], delta: Any) -> None:
    """``d[key(j)] += delta[j]`` for the nonzero entries, dropping counts that reach 0."""
    if len(delta) <= 16:
        pairs: Any = enumerate(delta.tolist())
    else:
        nonzero = np.flatnonzero(delta)
        pairs = zip(nonzero.tolist(), delta[nonzero].tolist(), strict=True)
    for j, w in pairs:
        if w:
            k = key(j)
            left = d.get(k, 0) + w
            if left:
                d[k] = left
            else:
                del d[k]


def _losses(log_p_true: Any) -> Any:
    """Per-event log loss from ``log P(y | x)`` (NaN: label absent), as in ``update``:
    the floor's loss below it (or NaN), 0.0 from 0 up, else ``-log P``."""
    # (comparisons with NaN raise no floating-point warning)
    return np.where(
        log_p_true >= 0.0, 0.0, np.where(log_p_true > _LOG_FLOOR, -log_p_true, _MAX_LOSS)
    )


def _class_prefix(tc: Any, k: int) -> Any:
    """Prefix sums of a batch's class counts, for :func:`_majorities`: with at most
    two classes, of ``[class 1] - [class 0]``; else of the one-hot counts (B × K)."""
    if k <= 2:
        return np.cumsum(2 * tc - 1)
    counts = np.zeros((len(tc), k), np.int64)
    counts[np.arange(len(tc)), tc] = 1
    return np.cumsum(counts, axis=0, out=counts)


def _majorities(
    prefix: Any, k: int, totals: Mapping[Any, float], order: Mapping[Any, int], gone: Any
) -> Any:
    """The majority class's code after each event of a batch.

    The argmax, first (lowest code) on ties, of the class ``totals`` at the
    batch start plus the batch's events up to ``i`` (``prefix``, from
    :func:`_class_prefix`), minus the window's evicted events ``gone`` up to
    ``i - (len(prefix) - len(gone))`` (the window's event ``i`` enters as the
    evicted event of that index leaves). With at most two classes: whether
    ``c_1 > c_0``, on the difference of the totals.
    """
    b = len(prefix)
    if k <= 2:
        lead: Any = 0
        for c, count in totals.items():
            lead += count if order[c] else -count
        lead = prefix + lead
        if len(gone):
            lead[b - len(gone) :] -= np.cumsum(2 * gone - 1)
        return (lead > 0).view(np.int8)
    counts = prefix + _vector(totals, order, k, np.int64)
    if len(gone):
        left = np.zeros((len(gone), k), np.int64)
        left[np.arange(len(gone)), gone] = 1
        np.cumsum(left, axis=0, out=left)
        counts[b - len(gone) :] -= left
    return counts.argmax(axis=1)


#: Bin numbers of _fading_run's bincount: 6 sums, ≤ 2 K predictions, ≤ 2 K² cells.
_BINS = np.arange(6 + 2 * _MAX_BATCH_CLASSES * (1 + _MAX_BATCH_CLASSES))


def _running_sum(value: float, terms: Any) -> float:
    """``((value + terms[0]) + terms[1]) + ...``: the per-event order of additions."""
    return float(np.cumsum(np.concatenate(([value], terms)))[-1])


def _interleaved_sum(value: float, plain: Any, removed: Any, added: Any) -> float:
    """``value + plain[0] + ... - removed[0] + added[0] - removed[1] + added[1] ...``,
    added in that order (``x - y`` is ``x + (-y)`` in IEEE arithmetic)."""
    terms = np.empty(1 + len(plain) + 2 * len(removed))
    terms[0] = value
    terms[1 : 1 + len(plain)] = plain
    pairs = terms[1 + len(plain) :].reshape(-1, 2)
    np.negative(removed, out=pairs[:, 0])
    pairs[:, 1] = added
    return float(np.cumsum(terms)[-1])


def _replay_majority(
    totals: list[float], majority: int, tc: list[int], w: list[float]
) -> tuple[list[bool], int]:
    """The per-event majority rule of :meth:`_View.add` on codes, event by event."""
    hits = []
    for t, weight in zip(tc, w, strict=True):
        count = totals[t] + weight
        totals[t] = count
        if t != majority and (
            count > totals[majority] or (count == totals[majority] and t < majority)
        ):
            majority = t
        hits.append(majority == t)
    return hits, majority


def _lookup(table: Mapping[Any, int], values: Sequence[Any]) -> tuple[Any, list[Any] | None]:
    """Codes of ``values`` in ``table``: ``(array, None)`` when all are known, else
    ``(None, list with None for the unknown ones)``. Changes nothing; raises
    ``TypeError`` for an unhashable value."""
    try:
        return np.fromiter(map(table.get, values), np.intp, len(values)), None
    except TypeError:  # an unknown value (None code), or an unhashable one (raises below)
        return None, list(map(table.get, values))


def _register(
    table: dict[Any, int], labels: list[Any], values: Sequence[Any], codes: list[Any] | None
) -> None:
    """Give the unknown ``values`` (``None`` in ``codes``) codes, in order of appearance."""
    if codes is None:
        return
    for i, c in enumerate(codes):
        if c is None:
            v = values[i]
            c = table.get(v)
            if c is None:
                c = table[v] = len(labels)
                labels.append(v)
            codes[i] = c


class PrequentialEvaluator:
    """Prequential metrics of a classifier, cumulative, windowed and faded.

    See the module docstring for the formulas, the baselines of ``kappa_m``
    and ``kappa_t`` and the values reported when a metric is undefined.

    Parameters
    ----------
    window
        Number of most recent events in the ``window`` view (≥ 1).
    fading_factor
        ``λ`` in (0, 1] of the ``fading`` view; the effective memory is about
        ``1 / (1 - λ)`` events (1000 for the default 0.999). ``λ = 1`` makes
        it equal to the cumulative view.
    loss_matrix
        Optional ``loss_matrix[predicted][true] -> cost``; entries left out
        default to the 0-1 loss. When given, every view also reports
        ``cost``, the mean cost of the decisions made (use
        :func:`bayes_risk_decision` to make decisions that minimise it).

    Examples
    --------
    >>> ev = PrequentialEvaluator(window=2)
    >>> for y_true, y_pred, p_true in [("a", "a", 0.9), ("b", "a", 0.4), ("b", "b", 0.8)]:
    ...     ev.update(y_true, y_pred, {y_true: math.log(p_true)})
    >>> r = ev.report()
    >>> r["cumulative"]["n"], round(r["cumulative"]["accuracy"], 4)
    (3, 0.6667)
    >>> r["window"]["n"], r["window"]["accuracy"]
    (2, 0.5)
    >>> round(r["cumulative"]["log_loss"], 4)  # (-log .9 - log .4 - log .8) / 3
    0.4149
    >>> r["cumulative"]["confusion"]
    [['a', 'a', 1], ['b', 'a', 1], ['b', 'b', 1]]
    """

    def __init__(
        self,
        *,
        window: int = 1000,
        fading_factor: float = 0.999,
        loss_matrix: LossMatrix | None = None,
    ) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigError(f"window must be an integer ≥ 1 (events), got {window!r}")
        if (
            isinstance(fading_factor, bool)
            or not isinstance(fading_factor, (int, float))
            or not 0.0 < fading_factor <= 1.0
        ):
            raise ConfigError(
                f"fading_factor must be in (0, 1], got {fading_factor!r}; "
                "0.999 remembers about the last 1000 events"
            )
        self.window = window
        self.fading_factor = lam = float(fading_factor)
        self.loss_matrix = _check_loss_matrix(loss_matrix)
        # true label -> code = index of first appearance (the majority's tie-break order)
        self._order: dict[Any, int] = {}
        self._tlabels: list[Any] = []  # code -> true label
        self._pcode: dict[Any, int] = {}  # predicted label (None included) -> code
        self._plabels: list[Any] = []  # code -> predicted label
        self._has_last = False
        self._last: Any = None
        self._cumulative = _View()
        self._window = _View()
        self._ring = _Ring()
        self._evictions = 0
        self._fading = _View()
        self._scale = 1.0
        # The vectorised path handles the fading view in runs between two
        # renormalisations; below λ ≈ 7.5e-4 a run is shorter than MIN_BATCH
        # events, and batches run the per-event path.
        self._batchable = lam**MIN_BATCH >= _RENORMALISE_BELOW
        # caches of the batch path, derived from the labels (not part of the state)
        self._tables_key = (-1, -1)
        self._p2t: Any = None  # predicted code -> true code (-1: None or never true)
        self._diagonal: Any = None  # confusion cells (t, p) with p the same label as t
        self._diagonal_labels: list[Any] = []  # their true labels
        self._index_template: Any = np.empty((0, 0), np.intp)  # _fading_run's bins
        self._costs: Any = None  # [predicted code, true code] -> cost
        # update_arrays batches not scored yet (same labels), and their events: scored
        # together once _DEFER_EVENTS are waiting, or before anything reads or
        # changes the state, so nobody can tell (see update_arrays)
        self._pending: list[tuple[Sequence[Hashable], list[Hashable], Any, Any]] = []
        self._pending_events = 0

    @property
    def n(self) -> int:
        """Number of labelled events evaluated since the start."""
        self._flush()
        return int(self._cumulative.n)

    @property
    def n_correct(self) -> int:
        """Number of those whose prediction was right."""
        self._flush()
        return int(self._cumulative.correct)

    def _flush(self) -> None:
        """Score the batches :meth:`update_arrays` queued (one vectorised pass)."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self._pending_events = 0
        if len(pending) == 1:
            self._score_arrays(*pending[0])
            return
        ys: list[Hashable] = []
        for batch in pending:
            ys.extend(batch[0])
        self._score_arrays(
            ys,
            pending[0][1],
            np.concatenate([batch[2] for batch in pending]),
            np.concatenate([batch[3] for batch in pending]),
        )

    def update(
        self, y_true: Hashable, y_pred: Hashable | None, log_proba: Mapping[Any, float]
    ) -> None:
        """Score one labelled event with the prediction made before learning it.

        Parameters
        ----------
        y_true
            The event's label (a hashable scalar, not ``None``).
        y_pred
            The decision that was emitted; ``None`` when the model could not
            predict (never correct).
        log_proba
            ``log P(c | x)`` by class as predicted; classes left out have
            probability 0 (log loss at :data:`LOG_LOSS_FLOOR`).
        """
        self._flush()
        hash(y_pred)  # an unhashable prediction fails here, before any view changed
        lp = log_proba.get(y_true)
        if lp is None or not lp > _LOG_FLOOR:  # also NaN
            loss = _MAX_LOSS
        elif lp >= 0.0:
            loss = 0.0
        else:
            loss = -lp
        self._update_one(y_true, y_pred, loss)

    def _update_one(self, y_true: Any, y_pred: Any, loss: float) -> None:
        """The per-event path: :meth:`update` with the event's log loss computed."""
        correct = y_pred is not None and y_pred == y_true
        matrix = self.loss_matrix
        cost = 0.0 if matrix is None else _cost(matrix, y_pred, y_true)
        nochange_ok = self._has_last and self._last == y_true
        order = self._order
        tc = order.get(y_true)
        if tc is None:
            tc = order[y_true] = len(self._tlabels)
            self._tlabels.append(y_true)
        pc = self._pcode.get(y_pred)
        if pc is None:
            pc = self._pcode[y_pred] = len(self._plabels)
            self._plabels.append(y_pred)

        self._cumulative.add(y_true, y_pred, 1, correct, loss, cost, nochange_ok, order)

        ring = self._ring
        view = self._window
        r_t, r_p, r_correct, r_loss, r_cost, r_nochange, r_majority = ring.views
        if ring.end - ring.start == self.window:
            s = ring.start
            old = (
                self._tlabels[r_t[s]], self._plabels[r_p[s]], r_correct[s], r_loss[s],
                r_cost[s], r_nochange[s], r_majority[s],
            )  # fmt: skip
            ring.start = s + 1
            view.remove(old)
            if old[0] == view.majority:
                view.find_majority(order)
            self._evictions += 1
            if self._evictions >= self.window:
                self._resum_window()
        majority_ok = view.add(y_true, y_pred, 1, correct, loss, cost, nochange_ok, order)
        e = ring.end
        if e == ring.capacity:
            ring.reserve(1)
            e = ring.end
            r_t, r_p, r_correct, r_loss, r_cost, r_nochange, r_majority = ring.views
        r_t[e] = tc
        r_p[e] = pc
        r_correct[e] = correct
        r_loss[e] = loss
        r_cost[e] = cost
        r_nochange[e] = nochange_ok
        r_majority[e] = majority_ok
        ring.end = e + 1

        lam = self.fading_factor
        if lam != 1.0:
            scale = self._scale * lam
            if scale < _RENORMALISE_BELOW:
                self._fading.rescale(scale)
                scale = 1.0
            self._scale = scale
            self._fading.add(y_true, y_pred, 1.0 / scale, correct, loss, cost, nochange_ok, order)
        else:
            self._fading.add(y_true, y_pred, 1.0, correct, loss, cost, nochange_ok, order)

        self._has_last = True
        self._last = y_true

    def update_many(
        self,
        ys_true: Sequence[Hashable],
        ys_pred: Sequence[Hashable | None],
        log_probas: Sequence[Mapping[Any, float]],
    ) -> None:
        """Score several labelled events, in order: exactly :meth:`update` on each triple.

        From :data:`MIN_BATCH` events on, the batch runs the vectorised path of
        :meth:`update_arrays` (each event's ``log P(y_true)`` is read from its
        mapping, the labels are coded once); the state and the report come out
        bit for bit as with :meth:`update` event by event. Shorter batches, and
        streams with more than 64 distinct true labels, run the per-event path.

        Raises
        ------
        TypeError
            If a prediction or a label is unhashable; checked for the whole batch before
            any view changed.
        ValueError
            If the three sequences differ in length.

        Examples
        --------
        >>> a, b = PrequentialEvaluator(window=2), PrequentialEvaluator(window=2)
        >>> events = [("x", "x", {"x": -0.1}), ("y", "x", {"x": -0.2}), ("y", "y", {"y": -0.3})]
        >>> for t, p, lp in events:
        ...     a.update(t, p, lp)
        >>> b.update_many(*zip(*events))
        >>> a.to_state() == b.to_state()
        True
        >>> many = [(t, p, lp) for _ in range(20) for t, p, lp in events]  # 60 events
        >>> for t, p, lp in many:
        ...     a.update(t, p, lp)
        >>> b.update_many(*zip(*many))  # the vectorised path
        >>> a.to_state() == b.to_state() and a.report() == b.report()
        True
        """
        self._flush()
        n = len(ys_true)
        if not (n == len(ys_pred) == len(log_probas)):
            raise ValueError(
                f"update_many needs as many predictions and log-probabilities as labels, got "
                f"{n}, {len(ys_pred)} and {len(log_probas)}"
            )
        if n < MIN_BATCH or not self._batchable:
            for p in ys_pred:
                hash(p)  # an unhashable prediction fails here, before any view changed
            for t in ys_true:
                hash(t)  # likewise an unhashable label
            update = self.update
            for t, p, lp in zip(ys_true, ys_pred, log_probas, strict=True):
                update(t, p, lp)
            return
        # codes first (TypeError for an unhashable label, before any change)
        tc, t_codes = _lookup(self._order, ys_true)
        pc, p_codes = _lookup(self._pcode, ys_pred)
        try:  # log P(y_true); None (absent) becomes NaN
            log_p = np.fromiter(map(dict.get, log_probas, ys_true), np.float64, n)  # type: ignore[arg-type]
        except TypeError:  # not dicts: any mappings
            log_p = np.array(
                [d.get(t) for d, t in zip(log_probas, ys_true, strict=True)], np.float64
            )
        _register(self._order, self._tlabels, ys_true, t_codes)
        _register(self._pcode, self._plabels, ys_pred, p_codes)
        loss = _losses(log_p)
        if len(self._tlabels) > _MAX_BATCH_CLASSES or len(self._plabels) > 2 * _MAX_BATCH_CLASSES:
            update_one = self._update_one
            for t, p, event_loss in zip(ys_true, ys_pred, loss.tolist(), strict=True):
                update_one(t, p, event_loss)
            return
        if tc is None:
            tc = np.array(t_codes, np.intp)
        if pc is None:
            pc = np.array(p_codes, np.intp)
        self._update_batch(tc, pc, loss, ys_true[-1])

    def update_arrays(
        self,
        ys_true: Sequence[Hashable],
        labels: Sequence[Hashable],
        log_proba: np.ndarray,
        best: np.ndarray,
    ) -> None:
        """Score a batch given as arrays: the engine's vectorised path.

        Exactly :meth:`update` on ``(ys_true[i], labels[best[i]],
        dict(zip(labels, log_proba[i])))`` for ``i = 0, 1, ...`` in order,
        without a dict per event: the state and the report come out bit for
        bit as with :meth:`update` event by event, so where the batches are cut
        (or a checkpoint restored) does not matter. Every float sum is formed
        in the per-event order, from its value before the batch
        (``np.cumsum`` and ``np.bincount`` add in array order; adding 0.0 for
        an event that does not count changes nothing), and the fading view's
        scale is multiplied by λ once per event (``np.cumprod``) and
        renormalised at the same events.

        Parameters
        ----------
        ys_true
            The events' labels; a label absent from ``labels`` has probability
            0 (log loss at :data:`LOG_LOSS_FLOOR`).
        labels
            The classes, in the column order of ``log_proba``.
        log_proba
            ``log P(labels[j] | x_i)``, shape ``(len(ys_true), len(labels))``.
        best
            Integer array, shape ``(len(ys_true),)``: event ``i`` predicted
            ``labels[best[i]]`` (a prediction is required; use
            :meth:`update_many` for events without one).

        Raises
        ------
        ValueError
            If a shape disagrees or an index of ``best`` is out of range.
        TypeError
            If a label is unhashable. Nothing has changed when either is raised.

        Notes
        -----
        One batch costs a few dozen numpy operations on arrays of ``B`` events
        (× ``K`` classes for the majority baseline: the argmax of prefix sums
        of class counts, lowest first-seen code on ties, as the per-event rule
        keeps it; with ``K ≤ 2`` the sign of one prefix sum of the difference),
        O(B) Python work to code the labels and O(K²) for the dicts. Below
        :data:`MIN_BATCH` events, with more than 64 distinct true labels (128
        predicted ones) or with ``λ < 7.5e-4`` (fewer than :data:`MIN_BATCH`
        events between two renormalisations), the events run the per-event
        path instead.

        Batches are queued (while their ``labels`` stay the same) and scored
        together once ``_DEFER_EVENTS`` (8192) events wait, or as soon as
        anything reads or changes the evaluator (:attr:`n`, :meth:`report`,
        :meth:`to_state`, :meth:`update`, :meth:`update_many`, another
        ``labels``): the result is the same (bit for bit), one pass over
        2048 events costs less than two over 1024.

        Examples
        --------
        >>> labels = ["no", "yes"]
        >>> lp = np.log([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4]])
        >>> ev = PrequentialEvaluator(window=2)
        >>> ev.update_arrays(["no", "no", "maybe"], labels, lp, lp.argmax(axis=1))
        >>> r = ev.report()["cumulative"]
        >>> r["n"], round(r["accuracy"], 4), r["confusion"]
        (3, 0.3333, [['no', 'no', 1], ['no', 'yes', 1], ['maybe', 'no', 1]])
        >>> round(r["log_loss"], 4)  # (-log .9 - log .3 + 34.54) / 3: "maybe" is no label
        11.9494
        >>> one = PrequentialEvaluator(window=2)
        >>> for y, row in zip(["no", "no", "maybe"], lp):
        ...     one.update(y, labels[int(row.argmax())], dict(zip(labels, row)))
        >>> one.report() == ev.report()
        True

        A batch of :data:`MIN_BATCH` events or more takes the vectorised path:

        >>> rng = np.random.default_rng(0)
        >>> lp = np.log(rng.dirichlet([1.0, 1.0], size=512))
        >>> ys = [labels[i] for i in rng.integers(0, 2, size=512)]
        >>> ev, one = PrequentialEvaluator(window=100), PrequentialEvaluator(window=100)
        >>> ev.update_arrays(ys, labels, lp, lp.argmax(axis=1))
        >>> for y, row in zip(ys, lp):
        ...     one.update(y, labels[int(row.argmax())], dict(zip(labels, row)))
        >>> ev.to_state() == one.to_state() and ev.report() == one.report()
        True
        """
        n = len(ys_true)
        k = len(labels)
        matrix = np.asarray(log_proba, dtype=np.float64)
        if matrix.shape != (n, k):
            raise ValueError(
                f"log_proba must have shape (len(ys_true), len(labels)) = ({n}, {k}), "
                f"got {matrix.shape}"
            )
        index = np.asarray(best)
        if index.shape != (n,) or (n and index.dtype.kind not in "iu"):
            raise ValueError(
                f"best must be an integer array of shape ({n},) (one column of log_proba "
                f"per event), got {index.dtype} of shape {index.shape}"
            )
        if n and (int(index.min()) < 0 or int(index.max()) >= k):
            raise ValueError(
                f"best must index labels, 0 ≤ best[i] < {k}; got values from "
                f"{int(index.min())} to {int(index.max())}"
            )
        dict.fromkeys(ys_true)  # TypeError for an unhashable label, before any change
        dict.fromkeys(labels)
        if n == 0:
            return
        labels = list(labels)
        if self._pending and self._pending[0][1] != labels:
            self._flush()
        self._pending.append((ys_true, labels, matrix, index))
        self._pending_events += n
        if self._pending_events >= _DEFER_EVENTS:
            self._flush()

    def _score_arrays(
        self, ys_true: Sequence[Hashable], labels: list[Hashable], matrix: Any, index: Any
    ) -> None:
        """:meth:`update_arrays` on checked arrays (one vectorised pass)."""
        n = len(ys_true)
        tc, t_codes = _lookup(self._order, ys_true)
        _, l_codes = _lookup(self._pcode, labels)
        _register(self._order, self._tlabels, ys_true, t_codes)
        if tc is None:
            tc = np.array(t_codes, np.intp)
        order = self._order
        column = np.full(len(self._tlabels), -1, np.intp)  # true code -> log_proba column
        for j, label in enumerate(labels):  # a repeated label: its last column, as dict(zip())
            c = order.get(label)
            if c is not None:
                column[c] = j
        columns = column[tc]
        lp = matrix[np.arange(n), columns]
        lp[columns < 0] = np.nan  # absent from labels: probability 0
        loss = _losses(lp)
        pcode = self._pcode
        if (
            n < MIN_BATCH
            or not self._batchable
            or len(self._tlabels) > _MAX_BATCH_CLASSES
            or len(pcode) + (0 if l_codes is None else l_codes.count(None)) > 2 * _MAX_BATCH_CLASSES
        ):
            update_one = self._update_one
            for t, j, event_loss in zip(ys_true, index.tolist(), loss.tolist(), strict=True):
                update_one(t, labels[j], event_loss)
            return
        if l_codes is not None:
            # labels never predicted before: code those predicted now, in the order
            # first predicted (as update does; the codes order the outputs)
            first = sorted(
                (int(np.argmax(index == j)), j)
                for j, c in enumerate(l_codes)
                if c is None and (index == j).any()
            )
            _register(pcode, self._plabels, [labels[j] for _, j in first], [None] * len(first))
        pc = np.array([pcode.get(label, -1) for label in labels], np.intp)[index]
        self._update_batch(tc, pc, loss, ys_true[-1])

    def _tables(self) -> tuple[Any, Any]:
        """``(p2t, costs)`` for the current label codes, rebuilt when a label is added."""
        key = (len(self._tlabels), len(self._plabels))
        if key != self._tables_key:
            order = self._order
            p2t = self._p2t = np.array(
                [-1 if p is None else order.get(p, -1) for p in self._plabels], np.intp
            )
            same = np.flatnonzero(p2t >= 0)
            self._diagonal = p2t[same] * key[1] + same
            self._diagonal_labels = [self._tlabels[t] for t in p2t[same].tolist()]
            matrix = self.loss_matrix
            if matrix is not None:
                self._costs = np.array(
                    [[_cost(matrix, p, t) for t in self._tlabels] for p in self._plabels],
                    np.float64,
                ).reshape(key[1], key[0])
            self._tables_key = key
        return self._p2t, self._costs

    def _update_batch(self, tc: Any, pc: Any, loss: Any, last: Any) -> None:
        """The vectorised path: events coded ``tc`` (true) and ``pc`` (predicted).

        Every label is registered and there are at most 64 true codes. The
        result is the per-event path's, bit for bit: counts are integers, and
        every float sum is formed in the per-event order, from its value before
        the batch (``np.cumsum`` and ``np.bincount`` add in array order, and
        adding 0.0 for an event that does not count changes nothing).

        The majority classifier of a view predicts the argmax of the view's
        class totals *including* the event, ties to the lowest code (first
        seen): the incremental rule of :meth:`_View.add` keeps exactly that,
        and ``np.argmax`` returns the first maximum. So its hits are read off
        prefix sums of class counts from the totals at the batch start (minus,
        for the window, the prefix of the evicted events).
        """
        b = len(tc)
        kt, kp = len(self._tlabels), len(self._plabels)
        tlabels, plabels, order = self._tlabels, self._plabels, self._order
        p2t, costs = self._tables()
        correct = p2t[pc] == tc
        cost = None if costs is None else costs[pc, tc]
        previous = np.empty(b, np.intp)
        previous[0] = order.get(self._last, -1) if self._has_last else -1
        previous[1:] = tc[:-1]
        nochange = previous == tc
        cells = tc * kp + pc
        batch_true = np.bincount(tc, minlength=kt)
        batch_pred = np.bincount(pc, minlength=kp)
        batch_cells = np.bincount(cells, minlength=kt * kp)
        diagonal = self._diagonal  # the cells of correct predictions
        batch_tp = batch_cells[diagonal]
        n_correct = int(np.count_nonzero(correct))
        n_nochange = int(np.count_nonzero(nochange))
        true_key, pred_key = tlabels.__getitem__, plabels.__getitem__
        tp_key = self._diagonal_labels.__getitem__

        def cell_key(j: int) -> tuple[Any, Any]:  # cell j = t × K_p + p
            t, p = divmod(j, kp)
            return (tlabels[t], plabels[p])

        # --- cumulative (weight 1)
        view = self._cumulative
        prefix = _class_prefix(tc, kt)
        majority = _majorities(prefix, kt, view.true, order, tc[:0])
        view.n += b
        view.correct += n_correct
        view.nochange_correct += n_nochange
        view.majority_correct += int(np.count_nonzero(majority == tc))
        view.loss = _running_sum(view.loss, loss)
        if cost is not None:
            view.cost = _running_sum(view.cost, cost)
        _add_counts(view.true, true_key, batch_true)
        _add_counts(view.pred, pred_key, batch_pred)
        _add_counts(view.tp, tp_key, batch_tp)
        _add_counts(view.confusion, cell_key, batch_cells)
        view.majority = tlabels[int(majority[-1])]

        # --- window (weight 1): the batch is appended to the ring; from event
        # `first` on, each event evicts the oldest one of (window ++ batch)
        view = self._window
        ring = self._ring
        size = self.window
        ring.reserve(b)
        start, end = ring.start, ring.end
        first = min(b, size - (end - start))
        evicted = b - first
        r_t, r_p, r_correct, r_loss, r_cost, r_nochange, r_majority = ring.arrays
        new = slice(end, end + b)
        r_t[new] = tc
        r_p[new] = pc
        r_correct[new] = correct
        r_loss[new] = loss
        r_cost[new] = 0.0 if cost is None else cost
        r_nochange[new] = nochange
        gone = slice(start, start + evicted)
        old_t = r_t[gone]
        majority = _majorities(prefix, kt, view.true, order, old_t)
        hits = majority == tc
        r_majority[new] = hits
        ring.start, ring.end = start + evicted, end + b
        view.n += b - evicted
        view.correct += n_correct
        view.nochange_correct += n_nochange
        view.majority_correct += int(np.count_nonzero(hits))
        if evicted:
            old_p = r_p[gone]
            view.correct -= int(np.count_nonzero(r_correct[gone]))
            view.nochange_correct -= int(np.count_nonzero(r_nochange[gone]))
            view.majority_correct -= int(np.count_nonzero(r_majority[gone]))
            _add_counts(view.true, true_key, batch_true - np.bincount(old_t, minlength=kt))
            _add_counts(view.pred, pred_key, batch_pred - np.bincount(old_p, minlength=kp))
            cells_left = batch_cells - np.bincount(old_t * kp + old_p, minlength=kt * kp)
            _add_counts(view.tp, tp_key, cells_left[diagonal])
            _add_counts(view.confusion, cell_key, cells_left)
        else:
            _add_counts(view.true, true_key, batch_true)
            _add_counts(view.pred, pred_key, batch_pred)
            _add_counts(view.tp, tp_key, batch_tp)
            _add_counts(view.confusion, cell_key, batch_cells)
        view.majority = tlabels[int(majority[-1])]
        # The float sums as the per-event path forms them: "- evicted, + new" per
        # event, from the value re-added from the window's events (_resum_window)
        # at the last re-sum of the batch if there is one (the k-th eviction
        # re-sums when the eviction counter reaches `size`), else from the value
        # before the batch.
        resum = None
        counter = self._evictions + evicted
        if evicted:
            k = max(1, size - self._evictions)  # first eviction that re-sums
            if evicted >= k:
                k += (evicted - k) // size * size  # the last one
                resum = first + k - 1  # its event
                counter = evicted - k
        self._evictions = counter
        columns = [(r_loss, "loss")]
        if cost is not None or view.cost != 0.0:
            columns.append((r_cost, "cost"))
        for column, name in columns:
            if resum is None:
                value = _interleaved_sum(
                    getattr(view, name),
                    column[end : end + first],
                    column[gone],
                    column[new][first:],
                )
            else:
                kept = slice(start + resum - first + 1, end + resum)  # after the eviction
                value = _interleaved_sum(
                    float(column[kept].sum()),
                    column[end + resum : end + resum + 1],
                    column[start + resum - first + 1 : start + evicted],
                    column[new][resum + 1 :],
                )
            setattr(view, name, value)

        # --- fading: raw weight 1 / scale, the scale multiplied by λ per event and
        # renormalised (raw statistics × scale, scale = 1) when it drops below
        # _RENORMALISE_BELOW, as in update; runs between renormalisations at once
        lam = self.fading_factor
        scale = self._scale
        renormalised = False
        i = 0
        while i < b:
            m = b - i
            if lam == 1.0:
                scales = None
                length = m
                w = np.ones(m)
            else:
                factors = np.full(m, lam)
                factors[0] = 1.0 if renormalised else scale * lam
                scales = np.cumprod(factors)  # the scale at each event (multiplied in order)
                if scales[-1] >= _RENORMALISE_BELOW:  # (the scales decrease)
                    length = m
                    w = 1.0 / scales
                else:
                    length = int(np.argmax(scales < _RENORMALISE_BELOW))
                    w = 1.0 / scales[:length]
            if length:
                if length == b:  # the whole batch (the usual case): its counts are known
                    run_counts = (batch_true, batch_pred, batch_cells, n_correct, n_nochange)
                    self._fading_run(tc, pc, correct, nochange, loss, cost, w, cells, run_counts)
                else:
                    run = slice(i, i + length)
                    self._fading_run(
                        tc[run], pc[run], correct[run], nochange[run], loss[run],
                        None if cost is None else cost[run], w, cells[run], None,
                    )  # fmt: skip
                if scales is not None:
                    scale = float(scales[length - 1])
            i += length
            renormalised = i < b
            if renormalised and scales is not None:
                self._fading.rescale(float(scales[length]))
                scale = 1.0
        self._scale = scale

        self._has_last = True
        self._last = last

    def _fading_run(
        self,
        tc: Any,
        pc: Any,
        correct: Any,
        nochange: Any,
        loss: Any,
        cost: Any,
        w: Any,
        cells: Any,
        counts: tuple[Any, Any, Any, int, int] | None,
    ) -> None:
        """Add a run of events of raw weights ``w`` to the fading view (no
        renormalisation inside), every sum in event order from its current value.

        ``counts``: the run's class, prediction and cell counts and numbers of
        hits and no-change hits, when already known.
        """
        view = self._fading
        order, tlabels, plabels, pcode = self._order, self._tlabels, self._plabels, self._pcode
        kt, kp = len(tlabels), len(plabels)
        k = max(kt, 2)
        m = len(tc)
        # the running class totals: the current totals, then each event's weight on
        # its class's row (0.0 elsewhere, which changes nothing), summed along the row
        totals = [0.0] * k
        for c, value in view.true.items():
            totals[order[c]] = value
        running = np.zeros((k, m + 1))
        running[:, 0] = totals
        running[tc, np.arange(1, m + 1)] = w
        np.cumsum(running, axis=1, out=running)
        # the majority: their argmax, unless a renormalisation rounded two totals
        # to a tie that the carried majority does not win on codes (then the
        # per-event rule decides, replayed: rare)
        carried = None if view.majority is None else order[view.majority]
        if carried is None or carried == max(range(kt), key=lambda j: (totals[j], -j)):
            if kt <= 2:
                majority = (running[1, 1:] > running[0, 1:]).view(np.int8)
            else:
                majority = running[:kt, 1:].argmax(axis=0)
            final = int(majority[-1])
            hits = majority == tc
        else:
            replayed, final = _replay_majority(totals, carried, tc.tolist(), w.tolist())
            hits = np.array(replayed, dtype=bool)
        # Every other sum in one bincount, which adds in array order: each bin's
        # current value first, then the events, event by event (one column per
        # sum; 0.0 where the event does not count).
        n_cells = kt * kp
        if counts is None:
            counts = (
                np.bincount(tc, minlength=kt), np.bincount(pc, minlength=kp),
                np.bincount(cells, minlength=n_cells), int(np.count_nonzero(correct)),
                int(np.count_nonzero(nochange)),
            )  # fmt: skip
        true_counts, pred_counts, cell_counts, n_correct, n_nochange = counts
        bins = 6 + kp + n_cells
        starts = np.zeros(bins)
        starts[:6] = (
            view.n, view.correct, view.nochange_correct, view.majority_correct, view.loss,
            view.cost,
        )  # fmt: skip
        for p, value in view.pred.items():
            starts[6 + pcode[p]] = value
        for (t, p), value in view.confusion.items():
            starts[6 + kp + order[t] * kp + pcode[p]] = value
        width = 8 if cost is not None else 7
        index = self._index_template
        if index.shape[0] < m or index.shape[1] != width:
            index = self._index_template = np.empty((max(m, 512), width), np.intp)
            index[:, :5] = np.arange(5)  # n, correct, no-change, majority, loss
            index[:, 5] = 5  # cost (with a loss matrix)
        index = index[:m]
        weights = np.empty((m, width))
        weights[:, 0] = w
        np.multiply(w, correct, out=weights[:, 1])
        np.multiply(w, nochange, out=weights[:, 2])
        np.multiply(w, hits, out=weights[:, 3])
        np.multiply(w, loss, out=weights[:, 4])
        if cost is not None:
            np.multiply(w, cost, out=weights[:, 5])
        np.add(pc, 6, out=index[:, -2])
        np.add(cells, 6 + kp, out=index[:, -1])
        weights[:, -2] = w
        weights[:, -1] = w
        sums = np.bincount(
            np.concatenate((_BINS[:bins], index.ravel())),
            np.concatenate((starts, weights.ravel())),
            bins,
        )
        scalars = sums[:6].tolist()
        view.n = scalars[0]
        # a flag that never held leaves its sum as it was (the per-event path never adds)
        if n_correct:
            view.correct = scalars[1]
        if n_nochange:
            view.nochange_correct = scalars[2]
        if hits.any():
            view.majority_correct = scalars[3]
        view.loss = scalars[4]
        if cost is not None:
            view.cost = scalars[5]
        totals = running[:, -1].tolist()
        true = view.true
        for j, count in enumerate(true_counts.tolist()):
            if count:
                true[tlabels[j]] = totals[j]
        pred = view.pred
        values = sums[6:].tolist()
        for j, count in enumerate(pred_counts.tolist()):
            if count:
                pred[plabels[j]] = values[j]
        confusion = view.confusion
        cell_counts = cell_counts.tolist()
        for j, count in enumerate(cell_counts):
            if count:
                confusion[(tlabels[j // kp], plabels[j % kp])] = values[kp + j]
        tp = view.tp
        for d, label in zip(self._diagonal.tolist(), self._diagonal_labels, strict=True):
            if cell_counts[d]:  # tp[t] and the cell (t, t) receive the same additions
                tp[label] = values[kp + d]
        view.majority = tlabels[final]

    def _resum_window(self) -> None:
        """Re-add the window's float sums from its events, so subtraction errors
        never pile up.

        numpy's pairwise sum (error ~1e-16 × log2(window) relative to the sum
        of the terms): it depends on the values and their order only, so the
        batch path, which re-sums the same events, gets the same bits.
        """
        self._evictions = 0
        ring = self._ring
        live = slice(ring.start, ring.end)
        self._window.loss = float(ring.arrays[3][live].sum())
        self._window.cost = float(ring.arrays[4][live].sum())

    def report(self, *, confusion: bool = True) -> dict[str, Any]:
        """All metrics of the three views.

        Parameters
        ----------
        confusion
            Include each view's confusion matrix (O(cells)); ``False`` keeps
            the call O(K), for frequent monitoring.

        Returns
        -------
        dict
            ``{"cumulative": {...}, "window": {...}, "fading": {...}}``, each
            with ``n``, ``accuracy``, ``log_loss``, ``kappa``, ``kappa_m``,
            ``kappa_t``, ``macro_f1``, ``cost`` (with a loss matrix) and
            ``confusion`` (``[[truth, prediction, weight], ...]``, truths in
            the order first seen, then predictions in the order first
            emitted). Undefined metrics are ``None``. JSON-able.
        """
        self._flush()
        with_cost = self.loss_matrix is not None
        order, pcode = self._order, self._pcode
        return {
            "cumulative": self._cumulative.summary(1.0, with_cost, confusion, order, pcode),
            "window": self._window.summary(1.0, with_cost, confusion, order, pcode),
            "fading": self._fading.summary(self._scale, with_cost, confusion, order, pcode),
        }

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """The evaluator as plain JSON-able data, for checkpoints.

        Labels are stored in ``[key, value]`` pairs and lists, never as JSON
        object keys, so ``1``, ``"1"``, ``1.5`` and ``True`` keep their types.

        Examples
        --------
        >>> import json
        >>> ev = PrequentialEvaluator()
        >>> ev.update(1, 1, {1: 0.0})
        >>> copy = PrequentialEvaluator.from_state(json.loads(json.dumps(ev.to_state())))
        >>> copy.report() == ev.report()
        True
        """
        self._flush()
        matrix = self.loss_matrix
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "window_size": encode_key(self.window),
            "fading_factor": self.fading_factor,
            "loss_matrix": None
            if matrix is None
            else [
                [encode_key(i), [[encode_key(j), c] for j, c in row.items()]]
                for i, row in matrix.items()
            ],
            "classes": [encode_key(c) for c in self._order],
            "last_label": [encode_key(self._last)] if self._has_last else [],
            "cumulative": self._cumulative.to_state(self._order, self._pcode),
            "window": self._window.to_state(self._order, self._pcode),
            "window_entries": self._ring.entries(self._tlabels, self._plabels),
            "window_evictions": self._evictions,
            "fading": self._fading.to_state(self._order, self._pcode),
            "fading_scale": self._scale,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> PrequentialEvaluator:
        """Rebuild an evaluator from :meth:`to_state` output.

        Raises
        ------
        ModelStateError
            If the state is malformed or of an unknown format or version.
        """
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise ModelStateError(
                f"not a stream-nb evaluator state (expected format {STATE_FORMAT!r})"
            )
        if state.get("version") != STATE_VERSION:
            raise ModelStateError(
                f"unsupported evaluator state version {state.get('version')!r}; "
                f"this stream-nb reads version {STATE_VERSION}"
            )
        try:
            raw_matrix = state["loss_matrix"]
            matrix = (
                None
                if raw_matrix is None
                else {
                    _label(i, "loss_matrix"): {_label(j, "loss_matrix"): c for j, c in row}
                    for i, row in raw_matrix
                }
            )
            ev = cls(
                window=decode_key(state["window_size"]),
                fading_factor=state["fading_factor"],
                loss_matrix=matrix,
            )
            order = ev._order
            for i, c in enumerate(read_list(state["classes"], "classes")):
                c = _label(c, f"classes[{i}]", False)
                if c in order:
                    raise ModelStateError(f"classes[{i}]: class {c!r} listed twice")
                order[c] = len(ev._tlabels)
                ev._tlabels.append(c)
            last = state["last_label"]
            if last:
                (ev._last,) = last
                ev._last = _label(ev._last, "last_label[0]", False)
                ev._has_last = True
            ev._cumulative = _View.from_state(state["cumulative"], order, "cumulative")
            # the window view as it was (dict order and running float sums
            # included), so a restored evaluator continues bit for bit; its
            # counts must agree with the entries
            ev._window = _View.from_state(state["window"], order, "window")
            ev._fading = _View.from_state(state["fading"], order, "fading")
            pcode, plabels = ev._pcode, ev._plabels
            for view in (ev._cumulative, ev._window, ev._fading):
                for p in view.pred:  # the cumulative view's: in the order first emitted
                    if p not in pcode:
                        pcode[p] = len(plabels)
                        plabels.append(p)
            check = _View()
            entries = state["window_entries"]
            if len(entries) > ev.window:
                raise ValueError(f"{len(entries)} window entries for a window of {ev.window}")
            ring = ev._ring = _Ring(max(64, 2 * len(entries)))
            r_t, r_p, r_correct, r_loss, r_cost, r_nochange, r_majority = ring.views
            for e, item in enumerate(read_list(entries, "window_entries")):
                at = f"window_entries[{e}]"
                t, p, correct, loss, cost, nochange_ok, majority_ok = read_list(item, at, 7)
                if not all(isinstance(v, bool) for v in (correct, nochange_ok, majority_ok)):
                    raise ModelStateError(f"{at}: hits must be true or false")
                entry = (
                    _label(t, f"{at}[0]", False), _label(p, f"{at}[1]"), correct,
                    read_finite(loss, f"{at}[3]"), read_finite(cost, f"{at}[4]"),
                    nochange_ok, majority_ok,
                )  # fmt: skip
                _add_entry(check, entry)
                code = pcode.get(entry[1])
                if code is None:
                    code = pcode[entry[1]] = len(plabels)
                    plabels.append(entry[1])
                r_t[e] = order[entry[0]]
                r_p[e] = code
                r_correct[e], r_loss[e], r_cost[e] = entry[2:5]
                r_nochange[e], r_majority[e] = entry[5:]
            ring.end = len(entries)
            if _counts(check) != _counts(ev._window):
                raise ValueError("window entries disagree with the window counts")
            ev._evictions = read_n_learned(state["window_evictions"], "window_evictions")
            scale = read_finite(state["fading_scale"], "fading_scale")
            if not 0.0 < scale <= 1.0:
                raise ModelStateError(f"fading_scale: must be in (0, 1], got {scale!r}")
            ev._scale = scale
        except ModelStateError as exc:
            raise ModelStateError(f"malformed evaluator state: {exc}") from exc
        except ConfigError as exc:
            raise ModelStateError(f"malformed evaluator state: {exc}") from exc
        except KeyError as exc:
            raise ModelStateError(f"malformed evaluator state: missing field {exc}") from exc
        except (
            TypeError,
            ValueError,
            AttributeError,
            IndexError,
            ArithmeticError,
            RecursionError,
        ) as exc:
            raise ModelStateError(f"malformed evaluator state: {exc!r}") from exc
        return ev


def _counts(view: _View) -> tuple[Any, ...]:
    return (
        view.n, view.correct, view.majority_correct, view.nochange_correct,
        view.true, view.pred, view.tp, view.confusion,
    )  # fmt: skip


def _add_entry(view: _View, entry: tuple[Any, Any, bool, float, float, bool, bool]) -> None:
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
