"""Numpy kernels of the evaluator's vectorised path.

Per-class prefix counts, losses, running sums and majorities over a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb.evaluation.views import LOG_FLOOR, MAX_LOSS

#: From this many events on, :meth:`PrequentialEvaluator.update_many` and
#: :meth:`PrequentialEvaluator.update_arrays` take the vectorised path. Below
#: it numpy's fixed cost (a few dozen array operations per batch) is not paid
#: back (docs/benchmarks.md).
MIN_BATCH = 32


#: Above this many distinct true labels (or twice as many distinct
#: predictions, ``None`` included) batches run the per-event path, so the
#: vectorised path's events × classes matrices stay small.
MAX_BATCH_CLASSES = 64


def _vector(counts: Mapping[Any, float], order: Mapping[Any, int], k: int, dtype: Any) -> Any:
    """A view's class totals as an array indexed by class code."""
    out = np.zeros(k, dtype)
    for c, w in counts.items():
        out[order[c]] = w
    return out


def add_counts(d: dict[Any, Any], key: Callable[[int], Any], delta: Any) -> None:
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


def losses(log_p_true: Any) -> Any:
    """Per-event log loss from ``log P(y | x)`` (NaN: label absent), as in ``update``:
    the floor's loss below it (or NaN), 0.0 from 0 up, else ``-log P``."""
    # (comparisons with NaN raise no floating-point warning)
    return np.where(log_p_true >= 0.0, 0.0, np.where(log_p_true > LOG_FLOOR, -log_p_true, MAX_LOSS))


def class_prefix(tc: Any, k: int) -> Any:
    """Prefix sums of a batch's class counts, for :func:`majorities`: with at most
    two classes, of ``[class 1] - [class 0]``; else of the one-hot counts (B × K)."""
    if k <= 2:
        return np.cumsum(2 * tc - 1)
    counts = np.zeros((len(tc), k), np.int64)
    counts[np.arange(len(tc)), tc] = 1
    return np.cumsum(counts, axis=0, out=counts)


def majorities(
    prefix: Any, k: int, totals: Mapping[Any, float], order: Mapping[Any, int], gone: Any
) -> Any:
    """The majority class's code after each event of a batch.

    The argmax, first (lowest code) on ties, of the class ``totals`` at the
    batch start plus the batch's events up to ``i`` (``prefix``, from
    :func:`class_prefix`), minus the window's evicted events ``gone`` up to
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


#: Bin numbers of the bincount of batch.fading_run: 6 sums, ≤ 2 K predictions, ≤ 2 K² cells.
BINS = np.arange(6 + 2 * MAX_BATCH_CLASSES * (1 + MAX_BATCH_CLASSES))


def running_sum(value: float, terms: Any) -> float:
    """``((value + terms[0]) + terms[1]) + ...``: the per-event order of additions."""
    return float(np.cumsum(np.concatenate(([value], terms)))[-1])


def interleaved_sum(value: float, plain: Any, removed: Any, added: Any) -> float:
    """``value + plain[0] + ... - removed[0] + added[0] - removed[1] + added[1] ...``,
    added in that order (``x - y`` is ``x + (-y)`` in IEEE arithmetic)."""
    terms = np.empty(1 + len(plain) + 2 * len(removed))
    terms[0] = value
    terms[1 : 1 + len(plain)] = plain
    pairs = terms[1 + len(plain) :].reshape(-1, 2)
    np.negative(removed, out=pairs[:, 0])
    pairs[:, 1] = added
    return float(np.cumsum(terms)[-1])


def replay_majority(
    totals: list[float], majority: int, tc: list[int], w: list[float]
) -> tuple[list[bool], int]:
    """The per-event majority rule of :meth:`View.add
    <stream_nb.evaluation.views.View.add>` on codes, event by event."""
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


def lookup(table: Mapping[Any, int], values: Sequence[Any]) -> tuple[Any, list[Any] | None]:
    """Codes of ``values`` in ``table``: ``(array, None)`` when all are known, else
    ``(None, list with None for the unknown ones)``. Changes nothing; raises
    ``TypeError`` for an unhashable value."""
    try:
        return np.fromiter(map(table.get, values), np.intp, len(values)), None
    except TypeError:  # an unknown value (None code), or an unhashable one (raises below)
        return None, list(map(table.get, values))


def register(
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
