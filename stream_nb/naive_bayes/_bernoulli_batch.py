"""Exact batch kernel of BernoulliNB (see :mod:`~stream_nb.naive_bayes._text_batch`).

The on-counts before each entry are prefix sums as for the count learners; the
per-class aggregates ``A_y`` (a term for every word ever on in the class) at every
step of the batch come from :mod:`~stream_nb.naive_bayes._token_aggregates`.
Integral weights and counts only: the aggregates group the batch's changes by
count.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_nb.naive_bayes._arrays import exact_integer_sums, exclusive_cumsum
from stream_nb.naive_bayes._text_batch import (
    KernelResult,
    TokenBatch,
    add_class_weights,
    class_prefix,
    log_prior,
    normalise,
)
from stream_nb.naive_bayes._token_aggregates import class_aggregates

if TYPE_CHECKING:
    from stream_nb.naive_bayes.bernoulli import BernoulliNB

__all__ = ["bernoulli_kernel"]


def bernoulli_kernel(
    learner: BernoulliNB,
    xs: Sequence[Mapping[Any, Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
) -> KernelResult | None:
    """Predict then learn a batch with :class:`~stream_nb.naive_bayes.BernoulliNB`'s
    formulas, or ``None``; integral weights and counts only (see the module docstring)."""
    if learner.class_prior is not None:
        return None
    batch = TokenBatch.of(learner, xs, ys, ws, counts=False)
    if batch is None:
        return None
    classes = batch.classes
    labels = classes.labels
    n0 = np.array([learner._class_weight[y] for y in labels])
    if not exact_integer_sums(n0, classes.w):
        return None
    val = batch.val
    threshold = learner.binarize
    if threshold is None:
        if not ((val == 0.0) | (val == 1.0)).all():
            return None  # a value other than 0/1: rejected per event
        on = val == 1.0
    else:
        on = val > threshold
    alpha = learner.alpha / learner._scale
    if alpha != learner._agg_alpha:  # (as a prediction would)
        learner._agg = [None] * len(learner._agg)
        learner._agg_alpha = alpha
    k_e = batch.k_e
    labelled = k_e >= 0
    inc = np.where(labelled & on, classes.w.take(batch.ev), 0.0)
    known, vocabulary, order = batch.vocabulary(labelled, len(learner._counts))
    counts, start, after, changed = batch.prefix(inc, True)  # K × nnz: events with the word on
    if not exact_integer_sums(start, inc):
        return None  # (the aggregates group the changes by count: integral counts only)
    n_y = class_prefix(classes, n0.tolist())  # K × B
    on_known = on if known is None else on & known
    # per on word w with N_{y,w} = c > 0: log((c + α) / (N_y − c + α)) + log((N_y + α) / α)
    positive = on_known[None, :] & (counts > 0)
    n_e = n_y.take(batch.ev, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.log((counts + alpha) / (n_e - counts + alpha))
    acc = batch.per_event(np.where(positive, terms, 0.0))
    shifted = n_y + alpha
    n_on = batch.per_event(on_known.astype(np.float64))
    n_positive = batch.per_event(positive.astype(np.float64))
    first_on = np.zeros(batch.nnz)
    learned = np.flatnonzero(inc)
    rows_k = k_e.take(learned)
    newly_on = counts[rows_k, learned] == 0
    first_on[learned[newly_on]] = 1.0
    on_words = np.array(learner._on_words, dtype=np.float64)[:, None] + exclusive_cumsum(
        np.stack([batch.per_event(np.where(k_e == k, first_on, 0.0)) for k in range(len(labels))]),
        axis=-1,
    )
    aggregates = _aggregates(learner, batch, counts, inc, n0, alpha)
    if aggregates is None:
        return None
    log_odds = np.log(shifted / alpha)  # log((N_y + α) / α)
    jll = (
        log_prior(learner, classes, alpha)
        + aggregates
        - (vocabulary - on_words) * np.log1p(alpha / shifted)
        - (n_on[None, :] - n_positive) * log_odds
        + acc
    )
    result = normalise(jll, labels)
    if result is None:
        return None
    # --- the statistics after the batch
    _update_histograms(learner, start, after, changed)
    batch.write(learner, after, order, changed)
    agg = learner._agg
    for k in set(classes.k.tolist()):
        agg[k] = None
    add_class_weights(learner, batch, ys, ws, None, xs)
    return result


def _aggregates(
    learner: BernoulliNB,
    batch: TokenBatch,
    counts: np.ndarray,
    inc: np.ndarray,
    n0: np.ndarray,
    alpha: float,
) -> np.ndarray | None:
    """``K × B``: each class's aggregate ``A_y`` before each event (see
    :func:`~stream_nb.naive_bayes._token_aggregates.class_aggregates`), or ``None``."""
    classes = batch.classes
    b = batch.b
    k_of_event = np.full(b, -1, dtype=np.intp)
    k_of_event[classes.rows] = classes.k
    learned = np.flatnonzero(inc)
    learned_k = batch.k_e.take(learned)
    out = np.empty((len(classes.labels), b))
    for k in range(len(classes.labels)):
        start = float(n0[k])
        a0 = learner._agg[k]
        if a0 is None:
            a0 = learner._aggregate(k, start, alpha)
        mine = k_of_event == k
        if not mine.any():
            out[k] = a0
            continue
        version = np.cumsum(mine) - mine  # class-k events before each event
        delta = np.concatenate(([0.0], np.cumsum(classes.w[mine])))
        hist = learner._hist[k]
        histogram = (
            np.fromiter(hist.keys(), np.float64, len(hist)),
            np.fromiter(hist.values(), np.float64, len(hist)),
        )
        moves = learned.take(np.flatnonzero(learned_k == k))
        values = class_aggregates(
            a0,
            start,
            alpha,
            delta,
            histogram,
            (
                counts[k].take(moves),
                inc.take(moves),
                version.take(batch.ev.take(moves)) + 1,
                batch.tok.take(moves),
            ),
        )
        if values is None:
            return None
        out[k] = values.take(version)
    return out


def _update_histograms(
    learner: BernoulliNB, start: np.ndarray, after: np.ndarray, changed: np.ndarray
) -> None:
    """Move the words the batch turned on from their count at the start to their count
    after it in each class's histogram (and count the words on for the first time)."""
    hist = learner._hist
    on_words = learner._on_words
    start_c, after_c = start[:, changed], after[:, changed]
    for k in range(start.shape[0]):
        moved = after_c[k] != start_c[k]
        old, new = start_c[k][moved], after_c[k][moved]
        h = hist[k]
        values, times = np.unique(old[old > 0], return_counts=True)
        for c, m in zip(values.tolist(), times.tolist(), strict=True):
            left = h[c] - m
            if left:
                h[c] = left
            else:
                del h[c]
        on_words[k] += int((old == 0).sum())
        values, times = np.unique(new, return_counts=True)
        for c, m in zip(values.tolist(), times.tolist(), strict=True):
            h[c] = h.get(c, 0) + m
