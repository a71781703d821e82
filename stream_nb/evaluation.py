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
Updates cost O(1) amortised per view (dict increments; the window rescans its
class counts, O(K), only when the evicted event's label was the majority
class; fading statistics use raw units × a global scale like the learners, see
:mod:`stream_nb.base`, so no decay loop runs per event). :meth:`report` costs
O(K) plus O(cells) for the confusion matrix.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from stream_nb._exceptions import ConfigError, ModelStateError

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

STATE_FORMAT = "stream-nb/prequential"
STATE_VERSION = 1

#: ``loss_matrix[predicted][true] -> cost``. Keys are typed ``Any`` because
#: ``Mapping`` is invariant in its key: ``dict[str, ...]`` would not be a
#: ``Mapping[Hashable, ...]`` for mypy.
LossMatrix = Mapping[Any, Mapping[Any, float]]
_SCALARS = (str, int, float, bool, type(None))


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

    def summary(self, scale: float, with_cost: bool, with_confusion: bool) -> dict[str, Any]:
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
        for c, count in self.true.items():
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
        for c, count in true.items():
            f1_sum += 2 * tp.get(c, 0) / (count + pred.get(c, 0))
            classes += 1
        for c in pred:
            if c not in true and c is not None:
                classes += 1  # predicted, never true: F1 = 0
        out["macro_f1"] = f1_sum / classes
        if with_cost:
            out["cost"] = self.cost / n
        if with_confusion:
            out["confusion"] = [
                [t, p, w * scale if scale != 1.0 else w] for (t, p), w in self.confusion.items()
            ]
        return out

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "correct": self.correct,
            "loss": self.loss,
            "cost": self.cost,
            "majority_correct": self.majority_correct,
            "nochange_correct": self.nochange_correct,
            "true": [[c, w] for c, w in self.true.items()],
            "pred": [[c, w] for c, w in self.pred.items()],
            "confusion": [[t, p, w] for (t, p), w in self.confusion.items()],
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any], order: Mapping[Any, int]) -> _View:
        view = cls()
        for name in ("n", "correct", "majority_correct", "nochange_correct"):
            setattr(view, name, _number(state[name], name))
        view.loss = float(_number(state["loss"], "loss"))
        view.cost = float(_number(state["cost"], "cost"))
        view.true = {_label(c): _number(w, "true") for c, w in state["true"]}
        view.pred = {_label(c): _number(w, "pred") for c, w in state["pred"]}
        for t, p, w in state["confusion"]:
            view.confusion[(_label(t), _label(p))] = _number(w, "confusion")
            if t == p and p is not None:
                view.tp[t] = view.confusion[(t, p)]
        for c in view.true:
            if c not in order:
                raise ValueError(f"true label {c!r} missing from the class order")
        view.find_majority(order)
        return view


def _decrement(d: dict[Any, Any], key: Any) -> None:
    left = d[key] - 1
    if left:
        d[key] = left
    else:
        del d[key]


def _label(value: Any) -> Any:
    if not isinstance(value, _SCALARS):
        raise ValueError(f"labels must be JSON scalars, got {type(value).__name__}")
    return value


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


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
        self.fading_factor = float(fading_factor)
        self.loss_matrix = _check_loss_matrix(loss_matrix)
        self._order: dict[Any, int] = {}  # true label -> index of first appearance
        self._has_last = False
        self._last: Any = None
        self._cumulative = _View()
        self._window = _View()
        self._entries: deque[tuple[Any, Any, bool, float, float, bool, bool]] = deque()
        self._evictions = 0
        self._fading = _View()
        self._scale = 1.0

    @property
    def n(self) -> int:
        """Number of labelled events evaluated since the start."""
        return int(self._cumulative.n)

    @property
    def n_correct(self) -> int:
        """Number of those whose prediction was right."""
        return int(self._cumulative.correct)

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
        hash(y_pred)  # an unhashable prediction fails here, before any view changed
        lp = log_proba.get(y_true)
        if lp is None or not lp > _LOG_FLOOR:  # also NaN
            loss = _MAX_LOSS
        elif lp >= 0.0:
            loss = 0.0
        else:
            loss = -lp
        correct = y_pred is not None and y_pred == y_true
        matrix = self.loss_matrix
        cost = 0.0 if matrix is None else _cost(matrix, y_pred, y_true)
        nochange_ok = self._has_last and self._last == y_true
        order = self._order
        if y_true not in order:
            order[y_true] = len(order)

        self._cumulative.add(y_true, y_pred, 1, correct, loss, cost, nochange_ok, order)

        entries = self._entries
        view = self._window
        if len(entries) == self.window:
            old = entries.popleft()
            view.remove(old)
            if old[0] == view.majority:
                view.find_majority(order)
            self._evictions += 1
            if self._evictions >= self.window:
                self._resum_window()
        majority_ok = view.add(y_true, y_pred, 1, correct, loss, cost, nochange_ok, order)
        entries.append((y_true, y_pred, correct, loss, cost, nochange_ok, majority_ok))

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

        The engine calls this once per batch. The three views' bookkeeping is
        inlined into one loop over plain local variables (no method call or
        attribute access per event and view), the same operations in the same
        order as :meth:`update`, so the state and every float sum are
        bit-identical to calling :meth:`update` event by event.

        Raises
        ------
        TypeError
            If a prediction or a label is unhashable; checked for the whole batch before
            any view changed.

        Examples
        --------
        >>> a, b = PrequentialEvaluator(window=2), PrequentialEvaluator(window=2)
        >>> events = [("x", "x", {"x": -0.1}), ("y", "x", {"x": -0.2}), ("y", "y", {"y": -0.3})]
        >>> for t, p, lp in events:
        ...     a.update(t, p, lp)
        >>> b.update_many(*zip(*events))
        >>> a.to_state() == b.to_state()
        True
        """
        for p in ys_pred:
            hash(p)  # an unhashable prediction fails here, before any view changed
        for t in ys_true:
            hash(t)  # likewise an unhashable label
        if not (len(ys_true) == len(ys_pred) == len(log_probas)):
            raise ValueError(
                f"update_many needs as many predictions and log-probabilities as labels, got "
                f"{len(ys_true)}, {len(ys_pred)} and {len(log_probas)}"
            )
        matrix = self.loss_matrix
        order = self._order
        has_last, last = self._has_last, self._last
        log_floor, max_loss = _LOG_FLOOR, _MAX_LOSS
        # cumulative view (weight 1)
        cv = self._cumulative
        c_true, c_pred, c_tp, c_conf = cv.true, cv.pred, cv.tp, cv.confusion
        c_n, c_correct, c_loss, c_cost = cv.n, cv.correct, cv.loss, cv.cost
        c_majc, c_noch, c_major = cv.majority_correct, cv.nochange_correct, cv.majority
        # window view (weight 1, evictions)
        wv = self._window
        w_true, w_pred, w_tp, w_conf = wv.true, wv.pred, wv.tp, wv.confusion
        w_n, w_correct, w_loss, w_cost = wv.n, wv.correct, wv.loss, wv.cost
        w_majc, w_noch = wv.majority_correct, wv.nochange_correct
        entries = self._entries
        popleft, append = entries.popleft, entries.append
        size = self.window
        evictions = self._evictions
        # fading view (raw weight 1 / scale)
        fv = self._fading
        f_true, f_pred, f_tp, f_conf = fv.true, fv.pred, fv.tp, fv.confusion
        f_n, f_correct, f_loss, f_cost = fv.n, fv.correct, fv.loss, fv.cost
        f_majc, f_noch, f_major = fv.majority_correct, fv.nochange_correct, fv.majority
        lam = self.fading_factor
        scale = self._scale
        hits: list[Any] = []  # true labels of the correct predictions, in order
        for t, p, log_proba in zip(ys_true, ys_pred, log_probas, strict=True):
            lp = log_proba.get(t)
            if lp is None or not lp > log_floor:  # also NaN
                loss = max_loss
            elif lp >= 0.0:
                loss = 0.0
            else:
                loss = -lp
            correct = p is not None and p == t
            cost = 0.0 if matrix is None else _cost(matrix, p, t)
            nochange_ok = has_last and last == t
            if t not in order:
                order[t] = len(order)
            key = (t, p)

            # --- cumulative: _View.add(t, p, 1, ...)
            # (n, the column totals, the confusion cells and the diagonal are added
            # once per batch below: integer counts, first-seen order as here)
            count = c_true.get(t, 0) + 1
            c_true[t] = count
            if correct:
                hits.append(t)
            c_loss += 1 * loss
            c_cost += 1 * cost
            if nochange_ok:
                c_noch += 1
            m = c_major
            if m is None or (
                t != m and (count > c_true[m] or (count == c_true[m] and order[t] < order[m]))
            ):
                c_major = m = t
            if m == t:
                c_majc += 1

            # --- window: evict the oldest (_View.remove), then add
            if len(entries) == size:
                t0, p0, correct0, loss0, cost0, nochange0, majority0 = popleft()
                w_n -= 1
                # _decrement inlined: a count reaching 0 leaves its dict
                left = w_true[t0] - 1
                if left:
                    w_true[t0] = left
                else:
                    del w_true[t0]
                left = w_pred[p0] - 1
                if left:
                    w_pred[p0] = left
                else:
                    del w_pred[p0]
                key0 = (t0, p0)
                left = w_conf[key0] - 1
                if left:
                    w_conf[key0] = left
                else:
                    del w_conf[key0]
                if correct0:
                    w_correct -= 1
                    left = w_tp[t0] - 1
                    if left:
                        w_tp[t0] = left
                    else:
                        del w_tp[t0]
                w_loss -= loss0
                w_cost -= cost0
                if nochange0:
                    w_noch -= 1
                if majority0:
                    w_majc -= 1
                if t0 == wv.majority:
                    # _View.find_majority inlined: most frequent, ties to the first seen
                    best: Any = None
                    best_count: float = -1
                    best_order = 0
                    for c, c_count in w_true.items():
                        if c_count > best_count or (
                            c_count == best_count and order[c] < best_order
                        ):
                            best, best_count, best_order = c, c_count, order[c]
                    wv.majority = best
                evictions += 1
                if evictions >= size:
                    # _resum_window: exact re-sums, so subtraction errors never pile up
                    evictions = 0
                    w_loss = math.fsum(e[3] for e in entries)
                    w_cost = math.fsum(e[4] for e in entries)
            w_n += 1
            count = w_true.get(t, 0) + 1
            w_true[t] = count
            w_pred[p] = w_pred.get(p, 0) + 1
            w_conf[key] = w_conf.get(key, 0) + 1
            if correct:
                w_correct += 1
                w_tp[t] = w_tp.get(t, 0) + 1
            w_loss += 1 * loss
            w_cost += 1 * cost
            if nochange_ok:
                w_noch += 1
            m = wv.majority
            if m is None or (
                t != m and (count > w_true[m] or (count == w_true[m] and order[t] < order[m]))
            ):
                wv.majority = m = t
            majority_ok = m == t
            if majority_ok:
                w_majc += 1
            append((t, p, correct, loss, cost, nochange_ok, majority_ok))

            # --- fading: raw weight 1 / scale, renormalised like update()
            if lam != 1.0:
                scale = scale * lam
                if scale < _RENORMALISE_BELOW:
                    fv.n, fv.correct, fv.loss, fv.cost = f_n, f_correct, f_loss, f_cost
                    fv.majority_correct, fv.nochange_correct = f_majc, f_noch
                    fv.rescale(scale)
                    f_n, f_correct, f_loss, f_cost = fv.n, fv.correct, fv.loss, fv.cost
                    f_majc, f_noch = fv.majority_correct, fv.nochange_correct
                    scale = 1.0
                w = 1.0 / scale
            else:
                w = 1.0
            f_n += w
            count = f_true.get(t, 0) + w
            f_true[t] = count
            f_pred[p] = f_pred.get(p, 0) + w
            f_conf[key] = f_conf.get(key, 0) + w
            if correct:
                f_correct += w
                f_tp[t] = f_tp.get(t, 0) + w
            f_loss += w * loss
            f_cost += w * cost
            if nochange_ok:
                f_noch += w
            m = f_major
            if m is None or (
                t != m and (count > f_true[m] or (count == f_true[m] and order[t] < order[m]))
            ):
                f_major = m = t
            if m == t:
                f_majc += w

            has_last = True
            last = t
        # the cumulative view's counts that no per-event decision reads, in one pass
        # each (Counter keeps first-occurrence order, so the dicts' order is as in update)
        for p, c in Counter(ys_pred).items():
            c_pred[p] = c_pred.get(p, 0) + c
        for key, c in Counter(zip(ys_true, ys_pred)).items():  # noqa: B905 (checked)
            c_conf[key] = c_conf.get(key, 0) + c
        for t, c in Counter(hits).items():
            c_tp[t] = c_tp.get(t, 0) + c
        c_n += len(ys_true)
        c_correct += len(hits)
        cv.n, cv.correct, cv.loss, cv.cost = c_n, c_correct, c_loss, c_cost
        cv.majority_correct, cv.nochange_correct, cv.majority = c_majc, c_noch, c_major
        wv.n, wv.correct, wv.loss, wv.cost = w_n, w_correct, w_loss, w_cost
        wv.majority_correct, wv.nochange_correct = w_majc, w_noch
        self._evictions = evictions
        fv.n, fv.correct, fv.loss, fv.cost = f_n, f_correct, f_loss, f_cost
        fv.majority_correct, fv.nochange_correct, fv.majority = f_majc, f_noch, f_major
        self._scale = scale
        self._has_last, self._last = has_last, last

    def _resum_window(self) -> None:
        """Re-add the window's float sums exactly, so subtraction errors never pile up."""
        self._evictions = 0
        self._window.loss = math.fsum(e[3] for e in self._entries)
        self._window.cost = math.fsum(e[4] for e in self._entries)

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
            ``confusion`` (``[[truth, prediction, weight], ...]``). Undefined
            metrics are ``None``. JSON-able.
        """
        with_cost = self.loss_matrix is not None
        return {
            "cumulative": self._cumulative.summary(1.0, with_cost, confusion),
            "window": self._window.summary(1.0, with_cost, confusion),
            "fading": self._fading.summary(self._scale, with_cost, confusion),
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
        matrix = self.loss_matrix
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "window_size": self.window,
            "fading_factor": self.fading_factor,
            "loss_matrix": None
            if matrix is None
            else [[i, [[j, c] for j, c in row.items()]] for i, row in matrix.items()],
            "classes": list(self._order),
            "last_label": [self._last] if self._has_last else [],
            "cumulative": self._cumulative.to_state(),
            "window": self._window.to_state(),
            "window_entries": [list(e) for e in self._entries],
            "window_evictions": self._evictions,
            "fading": self._fading.to_state(),
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
                else {_label(i): {_label(j): c for j, c in row} for i, row in raw_matrix}
            )
            ev = cls(
                window=state["window_size"],
                fading_factor=state["fading_factor"],
                loss_matrix=matrix,
            )
            for c in state["classes"]:
                ev._order[_label(c)] = len(ev._order)
            last = state["last_label"]
            if last:
                (ev._last,) = last
                ev._last = _label(ev._last)
                ev._has_last = True
            order = ev._order
            ev._cumulative = _View.from_state(state["cumulative"], order)
            # the window view as it was (dict order and running float sums
            # included), so a restored evaluator continues bit for bit; its
            # counts must agree with the entries
            ev._window = _View.from_state(state["window"], order)
            check = _View()
            entries = ev._entries
            for t, p, correct, loss, cost, nochange_ok, majority_ok in state["window_entries"]:
                entry = (
                    _label(t), _label(p), bool(correct), float(loss), float(cost),
                    bool(nochange_ok), bool(majority_ok),
                )  # fmt: skip
                entries.append(entry)
                _add_entry(check, entry)
            if len(entries) > ev.window:
                raise ValueError(f"{len(entries)} window entries for a window of {ev.window}")
            if _counts(check) != _counts(ev._window):
                raise ValueError("window entries disagree with the window counts")
            ev._evictions = int(state["window_evictions"])
            ev._fading = _View.from_state(state["fading"], order)
            scale = _number(state["fading_scale"], "fading_scale")
            if not scale > 0:
                raise ValueError(f"fading_scale must be positive, got {scale!r}")
            ev._scale = float(scale)
        except ModelStateError:
            raise
        except ConfigError as exc:
            raise ModelStateError(f"malformed evaluator state: {exc}") from exc
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
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
