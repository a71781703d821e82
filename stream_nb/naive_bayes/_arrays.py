"""What the exact batch kernels share: the classes of a batch, prefix sums, reductions.

The kernels (:mod:`~stream_nb.naive_bayes._vectorised`, and the categorical
terms of :mod:`~stream_nb.naive_bayes._categorical_batch`) lay arrays out
class × event (K × B): the events run along the last, contiguous axis, so
every numpy loop is B long. :class:`BatchClasses` holds a batch's learning
weights in that layout and their exclusive prefix sums; the functions below
are the prefix sums and row reductions the kernels compute with.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from stream_nb._softmax import ABSORB
from stream_nb.limits import MAX_WEIGHT, MIN_WEIGHT

__all__ = [
    "MIN_BATCH",
    "BatchClasses",
    "Learned",
    "exact_integer_sums",
    "exclusive_cumsum",
    "first_rows",
    "fixed_log_priors",
    "grouped_exclusive_cumsum",
    "per_event_answers",
    "posteriors",
    "row_max_argmax",
    "row_sum",
    "sum_of_logs",
]

#: Below this many events the per-event loop is cheaper than numpy's fixed
#: cost per array operation (a few dozen per batch); see docs/benchmarks.md.
MIN_BATCH = 64

#: ``(log_probas, predictions, errors)``, as :meth:`~stream_nb.base.Learner.predict_learn_many`
Answers = tuple[list[dict[Hashable, float] | None], list[Hashable | None], dict[int, Exception]]


class Learned:
    """What a batch adds (:meth:`BatchClasses.learned`); the per-event lists are built
    on first use (a batch of unit weights adds its class totals only)."""

    __slots__ = ("_event_weights", "_w", "_weights", "_ys", "class_weights")

    def __init__(
        self,
        class_weights: list[tuple[Hashable, float]],
        ys: Sequence[Hashable | None],
        w: np.ndarray,
    ) -> None:
        #: The batch's total weight of each class that has one, in class order.
        self.class_weights = class_weights
        self._ys = ys
        self._w = w
        self._weights: list[float] | None = None
        self._event_weights: list[tuple[Hashable, float]] | None = None

    @property
    def weights(self) -> list[float]:
        """Every event's weight."""
        if self._weights is None:
            self._weights = self._w.tolist()
        return self._weights

    @property
    def event_weights(self) -> list[tuple[Hashable, float]]:
        """``(label, weight)`` of each labelled event, in order (real-valued weights are
        added one event at a time, as the per-event path does)."""
        if self._event_weights is None:
            self._event_weights = [
                (y, wi) for y, wi in zip(self._ys, self.weights, strict=True) if y is not None
            ]
        return self._event_weights


class BatchClasses:
    """The labels and weights of a batch, as a kernel learns them.

    Built by :meth:`of`; every array is over the batch's ``b`` events.

    Attributes
    ----------
    labels
        The classes, in the model's order (index ``k``).
    w
        Every event's weight (1 when the batch has none).
    unit
        Whether every weight is 1 (sums of weights are then exact integers).
    labelled, n_labelled, rows, k
        The events with a label (mask), their number, their rows and classes.
    onehot
        ``K × B``: event ``i``'s weight in its class's row, 0 elsewhere (and
        in every row for an unlabelled event).
    before
        ``K × B``: the weight of each class learned before event ``i`` in the batch.
    """

    __slots__ = ("before", "k", "labelled", "labels", "n_labelled", "onehot", "rows", "unit", "w")

    def __init__(
        self,
        labels: list[Hashable],
        w: np.ndarray,
        unit: bool,
        k_arr: np.ndarray,
    ) -> None:
        b = len(k_arr)
        self.labels = labels
        self.w = w
        self.unit = unit
        self.labelled = k_arr >= 0
        self.n_labelled = int(self.labelled.sum())
        self.rows = np.arange(b) if self.n_labelled == b else np.flatnonzero(self.labelled)
        self.k = k_arr[self.rows]
        self.onehot = np.zeros((len(labels), b))
        self.onehot.put(self.k * b + self.rows, w[self.rows])
        self.before = exclusive_cumsum(self.onehot, axis=-1)

    @classmethod
    def of(
        cls,
        labels: list[Hashable],
        index: Mapping[Hashable, int],
        ys: Sequence[Hashable | None],
        ws: Sequence[float] | None,
    ) -> BatchClasses | None:
        """The classes of a batch with labels ``ys`` (``None``: unlabelled, predicted only)
        and weights ``ws`` (``None``: every weight 1); ``index`` gives each label's
        position in ``labels``. ``None`` for a label not in ``index`` (or unhashable)
        or a weight outside [MIN_WEIGHT, MAX_WEIGHT]: the per-event path handles those.
        """
        b = len(ys)
        try:
            if None in ys:
                k_arr = np.array([-1 if y is None else index[y] for y in ys], dtype=np.intp)
            else:
                k_arr = np.fromiter(map(index.__getitem__, ys), np.intp, b)
        except (KeyError, TypeError):
            return None  # a new class (or an unhashable label): the per-event path
        unit = ws is None
        w = np.ones(b)
        if ws is not None:
            try:
                w = np.asarray(ws, dtype=np.float64)
            except (TypeError, ValueError):
                return None  # not numbers: the per-event path names the weight
            if w.shape != (b,) or not ((w >= MIN_WEIGHT) & (w <= MAX_WEIGHT)).all():
                return None  # the per-event path raises the right error
            unit = bool((w == 1.0).all())
        return cls(labels, w, unit, k_arr)

    def reweighted(self, w: np.ndarray) -> BatchClasses:
        """The same events and classes with weights ``w`` (checked by the caller), never
        unit: the raw weights of a forgetting learner (:class:`stream_nb._decay.BatchDecay`),
        added one event at a time as the per-event path adds them."""
        k_arr = np.full(len(self.w), -1, dtype=np.intp)
        k_arr[self.rows] = self.k
        return BatchClasses(self.labels, w, False, k_arr)

    def first_order(self) -> list[int]:
        """The classes that learn in this batch (their ``k``), in the order of their first
        labelled event (the order in which learning event by event meets them)."""
        ks, first = np.unique(self.k, return_index=True)
        return ks.take(np.argsort(first, kind="stable")).tolist()  # type: ignore[no-any-return]

    def learned(self, ys: Sequence[Hashable | None], wk: np.ndarray | None = None) -> Learned:
        """What the batch with labels ``ys`` adds; ``wk`` is ``onehot.sum(axis=1)`` if the
        caller has it (the class totals)."""
        if wk is None:
            wk = self.onehot.sum(axis=1)
        class_weights = [(self.labels[k], c) for k, c in enumerate(wk.tolist()) if c]
        return Learned(class_weights, ys, self.w)


def fixed_log_priors(
    labels: Sequence[Hashable], class_prior: Mapping[Hashable, float]
) -> np.ndarray | None:
    """``log class_prior[y]`` of every class (K × 1), or ``None`` when a class is missing
    from ``class_prior`` (the per-event path leaves such a class out of its answers).

    Examples
    --------
    >>> fixed_log_priors(["a", "b"], {"a": 1.0, "b": 3.0}).ravel().round(4).tolist()
    [0.0, 1.0986]
    >>> fixed_log_priors(["a", "c"], {"a": 1.0}) is None
    True
    """
    try:
        priors = [class_prior[y] for y in labels]
    except KeyError:
        return None
    out: np.ndarray = np.log(np.array(priors, dtype=np.float64))[:, None]
    return out


def exclusive_cumsum(a: np.ndarray, axis: int = 0) -> np.ndarray:
    """Along ``axis``, entry ``i`` holds the sum of entries ``0..i-1`` (zeros for ``i = 0``).

    Examples
    --------
    >>> exclusive_cumsum(np.array([1.0, 2.0, 3.0])).tolist()
    [0.0, 1.0, 3.0]
    """
    out = np.empty_like(a)
    if axis == 0:
        out[0] = 0.0
        np.cumsum(a[:-1], axis=0, out=out[1:])
    else:  # the last axis
        out[..., 0] = 0.0
        np.cumsum(a[..., :-1], axis=-1, out=out[..., 1:])
    return out


def running_from(start: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``K × B``: entry ``[k, i]`` is ``start[k] + a[k, 0] + … + a[k, i-1]``, added left
    to right (``(start + a0) + a1``, as learning one event at a time adds them, so the
    result is the per-event path's to the bit whatever the magnitudes).

    Examples
    --------
    >>> running_from(np.array([1e16]), np.array([[1.0, 1.0, 1.0]])).tolist()
    [[1e+16, 1e+16, 1e+16]]
    >>> (1e16 + exclusive_cumsum(np.array([1.0, 1.0, 1.0]))).tolist()  # 1e16 + 2: another sum
    [1e+16, 1e+16, 1.0000000000000002e+16]
    """
    steps = np.empty_like(a)
    steps[:, 0] = start
    steps[:, 1:] = a[:, :-1]
    out: np.ndarray = np.cumsum(steps, axis=1)
    return out


#: Up to this many classes, row-wise maxima and sums loop over the columns: numpy's
#: reductions over a short last axis cost ~10x more than a few whole-column operations.
_COLUMN_LOOP_CLASSES = 16


def row_max_argmax(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's maximum and the column of its first maximum (as ``argmax``)."""
    if a.shape[1] > _COLUMN_LOOP_CLASSES:
        return a.max(axis=1), a.argmax(axis=1)
    top = a[:, 0].copy()
    best = np.zeros(len(a), dtype=np.intp)
    for k in range(1, a.shape[1]):
        column = a[:, k]
        best[column > top] = k  # strictly greater: ties keep the first column
        np.maximum(top, column, out=top)
    return top, best


def row_sum(a: np.ndarray) -> np.ndarray:
    """Each row's sum, adding the columns left to right."""
    if a.shape[1] > _COLUMN_LOOP_CLASSES:
        sums: np.ndarray = a.sum(axis=1)
        return sums
    total = a[:, 0].copy()
    for k in range(1, a.shape[1]):
        total += a[:, k]
    return total


#: Products of factors between these bounds are exact to rounding in one ``log``.
_PRODUCT_LOW, _PRODUCT_HIGH = 1e-280, 1e280


def sum_of_logs(a: np.ndarray, axis: int = 0) -> np.ndarray:
    """``np.log(a).sum(axis)`` as ``log(prod(a, axis))``: one logarithm per output instead
    of one per factor (the libm ``log`` is the kernel's costliest operation per
    element). Where a product leaves the normal range the logs are summed instead."""
    with np.errstate(over="ignore", under="ignore"):  # (checked just below)
        product = np.multiply.reduce(a, axis=axis)
    logs: np.ndarray  # (numpy's reductions are typed Any)
    if product.min() > _PRODUCT_LOW and product.max() < _PRODUCT_HIGH:
        logs = np.log(product)
    else:
        logs = np.log(a).sum(axis=axis)
    return logs


#: Sums of integers below this magnitude are exact in float64.
_EXACT_INTEGERS = 2.0**53


def exact_integer_sums(*arrays: np.ndarray) -> bool:
    """Whether every value of ``arrays`` is an integer and every partial sum of them,
    in any order, is an exactly represented integer (below 2**53 in magnitude).

    Examples
    --------
    >>> exact_integer_sums(np.array([1.0, 2.0]), np.array([3.0]))
    True
    >>> exact_integer_sums(np.array([0.5])), exact_integer_sums(np.array([2.0**53]))
    (False, False)
    """
    total = 0.0
    for a in arrays:
        if a.size and not (a == np.floor(a)).all():
            return False
        total += float(np.abs(a).sum())
    return total < _EXACT_INTEGERS


def grouped_exclusive_cumsum(codes: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Column ``i`` of the K × n array ``a`` repeated along its columns to the length of
    ``codes`` (n divides it): the sum of columns ``l < i`` with ``codes[l] == codes[i]``.

    Examples
    --------
    >>> grouped_exclusive_cumsum(np.array([0, 1, 0, 0]), np.array([[1.0, 2.0, 3.0, 4.0]]))
    array([[0., 0., 1., 4.]])
    >>> grouped_exclusive_cumsum(np.array([0, 0, 0, 0]), np.array([[1.0, 2.0]]))
    array([[0., 1., 3., 4.]])
    >>> grouped_exclusive_cumsum(np.array([0, 1, 1]), np.array([[4294967295.0, 0.1, 1.0]]))
    array([[0. , 0. , 0.1]])
    """
    # small codes sort as uint16, where numpy's stable sort is a radix sort (O(n))
    keys = codes.astype(np.uint16) if len(codes) and codes.max() < 1 << 16 else codes
    order = np.argsort(keys, kind="stable")
    sorted_codes = codes.take(order)
    # (``take`` along an axis: several times faster than fancy indexing of a 2-D array)
    columns = order if a.shape[1] == len(codes) else order % a.shape[1]
    values = a.take(columns, axis=1)
    sums = exclusive_cumsum(values, axis=-1)
    new_group = np.empty(len(codes), dtype=bool)
    new_group[0] = True
    np.not_equal(sorted_codes[1:], sorted_codes[:-1], out=new_group[1:])
    starts = np.flatnonzero(new_group)
    if exact_integer_sums(values):
        # subtract, in each group, the running sum reached at the group's first column
        # (every partial sum is an exact integer, so the difference is exact too)
        group_of = np.cumsum(new_group) - 1
        sums -= sums.take(starts.take(group_of), axis=1)
    else:  # each group on its own, so no group's sum carries another's rounding
        for start, stop in zip(starts.tolist(), [*starts[1:].tolist(), len(codes)], strict=True):
            sums[:, start:stop] = exclusive_cumsum(values[:, start:stop], axis=-1)
    unsort = np.empty_like(order)
    unsort[order] = np.arange(len(order))
    return sums.take(unsort, axis=1)


def first_rows(keys: np.ndarray) -> dict[int, int]:
    """Each distinct key of ``keys`` and the index of its first occurrence.

    Examples
    --------
    >>> first_rows(np.array([5, 3, 5, 2]))
    {2: 3, 3: 1, 5: 0}
    """
    distinct, first = np.unique(keys, return_index=True)
    return dict(zip(distinct.tolist(), first.tolist(), strict=True))


def posteriors(jll: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Normalise the K × B joint log-likelihoods of a batch (max-shifted log-sum-exp, as
    :func:`stream_nb.base.log_softmax`) and decide (the first most probable class).

    Returns ``(log_proba, best)``: the B × K log posteriors and each event's
    column of its decision; ``None`` when a score is not finite (beyond the
    double range: the per-event path handles the batch).
    """
    if not np.isfinite(jll).all():
        return None
    top, best = row_max_argmax(jll.T)
    log_total = np.log(row_sum(np.exp(jll - top[None, :]).T))
    if np.abs(top).max() < ABSORB:
        log_proba = (jll - (top + log_total)[None, :]).T  # B × K (a view of the K × B array)
    else:  # (see stream_nb.base.ABSORB)
        log_proba = ((jll - top[None, :]) - log_total[None, :]).T
    return log_proba, best


def per_event_answers(labels: list[Hashable], log_proba: np.ndarray, best: np.ndarray) -> Answers:
    """A kernel's arrays as :meth:`~stream_nb.base.Learner.predict_learn_many` answers:
    one ``{label: log posterior}`` dict and one decision per event, no errors."""
    lp_rows = log_proba.tolist()
    log_probas: list[dict[Hashable, float] | None]
    if len(labels) == 2:
        first, second = labels
        log_probas = [{first: u, second: v} for u, v in lp_rows]
    else:
        log_probas = [dict(zip(labels, r, strict=True)) for r in lp_rows]
    predictions: list[Hashable | None] = list(map(labels.__getitem__, best.tolist()))
    return log_probas, predictions, {}
