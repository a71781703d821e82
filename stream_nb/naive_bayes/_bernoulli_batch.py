"""Exact batch kernel of BernoulliNB (see :mod:`~stream_nb.naive_bayes._text_batch`).

The on-counts before each entry are prefix sums as for the count learners; the
per-class aggregates ``A_y`` (a term for every word ever on in the class) at every
step of the batch come from :mod:`~stream_nb.naive_bayes._token_aggregates`.
Integral weights and counts only: the aggregates group the batch's changes by
count.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_nb._decay import BatchDecay
from stream_nb.naive_bayes._arrays import exact_integer_sums, exclusive_cumsum, running_from
from stream_nb.naive_bayes._text_batch import (
    KernelResult,
    TokenBatch,
    add_class_weights,
    log_prior,
    normalise,
    priors_scored,
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
    decay: BatchDecay | None = None,
) -> KernelResult | None:
    """Predict then learn a batch with :class:`~stream_nb.naive_bayes.BernoulliNB`'s
    formulas, or ``None``; without forgetting, integral weights and counts only (see
    the module docstring)."""
    if not priors_scored(learner):
        return None
    batch = TokenBatch.of(learner, xs, ys, ws, decay, counts=False)
    if batch is None:
        return None
    classes = batch.classes
    labels = classes.labels
    n0 = np.array([learner._class_weight[y] for y in labels])
    integral = exact_integer_sums(n0, classes.w)
    val = batch.val
    threshold = learner.binarize
    if threshold is None:
        if not ((val == 0.0) | (val == 1.0)).all():
            return None  # a value other than 0/1: rejected per event
        on = val == 1.0
    else:
        on = val > threshold
    alpha = batch.alpha
    alpha0 = float(alpha[0]) if isinstance(alpha, np.ndarray) else alpha
    if alpha0 != learner._agg_alpha:  # (as a prediction would)
        learner._agg = [None] * len(learner._agg)
        learner._agg_alpha = alpha0
    k_e = batch.k_e
    labelled = k_e >= 0
    inc = np.where(labelled & on, classes.w.take(batch.ev), 0.0)
    weights = None  # feature_weights: each token's weight by code, each entry's
    if learner.feature_weights is not None:
        weights = batch.token_weights(learner.feature_weights)
    known, vocabulary, order = batch.vocabulary(labelled, len(learner._counts), weights)
    # K × nnz: events with the word on
    counts, start, after, changed = batch.prefix(inc, integral)
    n_y = running_from(n0, classes.onehot)  # K × B: N_y before each event, as learn_one sums it
    on_known = on if known is None else on & known
    # per on word w with N_{y,w} = c > 0: log((c + α) / (N_y − c + α)) + log((N_y + α) / α)
    positive = on_known[None, :] & (counts > 0)
    n_e = n_y.take(batch.ev, axis=1)
    alpha_e = batch.entry_alpha()
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.log((counts + alpha_e) / (n_e - counts + alpha_e))
    entry_weight = 1.0 if weights is None else weights.take(batch.tok)
    acc = batch.per_event(np.where(positive, terms * entry_weight, 0.0))
    shifted = n_y + alpha
    n_on = batch.per_event(on_known * entry_weight)
    n_positive = batch.per_event(positive * entry_weight)
    first_on = np.zeros(batch.nnz)
    learned = np.flatnonzero(inc)
    rows_k = k_e.take(learned)
    newly_on = counts[rows_k, learned] == 0
    first_on[learned[newly_on]] = 1.0
    first_on *= entry_weight
    found = _aggregates(learner, batch, (counts, inc), n_y, alpha0, weights)
    if found is None:
        return None
    aggregates, on_words0 = found
    on_words = on_words0[:, None] + exclusive_cumsum(
        np.stack([batch.per_event(np.where(k_e == k, first_on, 0.0)) for k in range(len(labels))]),
        axis=-1,
    )
    if isinstance(alpha, np.ndarray):  # (forgetting: see _aggregates)
        aggregates -= on_words * np.log1p((alpha - alpha0) / (n_y + alpha0 + alpha))
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
    for k in range(len(agg)) if decay is not None else set(classes.k.tolist()):
        agg[k] = None
    add_class_weights(learner, batch, ys, ws, None, xs)
    return result


def _aggregates(
    learner: BernoulliNB,
    batch: TokenBatch,
    learned: tuple[np.ndarray, np.ndarray],
    n_y: np.ndarray,
    alpha: float,
    weights: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """``K × B``: each class's aggregate ``A_y`` before each event (see
    :func:`~stream_nb.naive_bayes._token_aggregates.class_aggregates`), and the number
    of words on in each class at the start, or ``None``.

    With ``feature_weights`` (``weights``: each token's by code) both are weighted: a
    word's term, and the word itself, count its weight times; the histogram of the
    counts at the start is then made from the kernels' array.

    With forgetting (``α_t = α₀ + ε_t`` before event ``t``; ``alpha``: ``α₀``) a term
    ``log((N_y − c + α_t) / (N_y + 2α_t))`` is ``log((a + z) / (b + z)) −
    log1p(ε / (N_y + α₀ + α_t))`` with ``a = N₀ − c + α₀``, ``b = N₀ + 2α₀`` and
    ``z = δ + ε`` (``δ``: the class's raw weight learned in the batch so far): the
    aggregates of :func:`class_aggregates` in ``z``, one version per event, less the
    last term once per word on in the class (the caller takes it off).

    ``learned``: the counts before each entry (``K × nnz``) and each entry's learned
    weight; ``n_y``: the class weights before each event (``K × B``)."""
    counts, inc = learned
    classes = batch.classes
    b = batch.b
    k_of_event = np.full(b, -1, dtype=np.intp)
    k_of_event[classes.rows] = classes.k
    entries = np.flatnonzero(inc)
    learned_k = batch.k_e.take(entries)
    out = np.empty((len(classes.labels), b))
    forgets = isinstance(batch.alpha, np.ndarray)
    # α at versions 0..B (the last one, after the batch, is never read: any value not
    # below the one before it)
    alphas = (
        np.append(batch.alpha, batch.alpha[-1])
        if isinstance(batch.alpha, np.ndarray)
        else np.zeros(0)
    )
    on_words = np.array(learner._on_words, dtype=np.float64)
    matrix = batch.store.matrix()
    for k in range(len(classes.labels)):
        start = float(n_y[k, 0])
        if weights is None:
            a0 = learner._agg[k]
            if a0 is None:
                a0 = learner._aggregate(k, start, alpha)
            hist = learner._hist[k]
            histogram = (
                np.fromiter(hist.keys(), np.float64, len(hist)),
                np.fromiter(hist.values(), np.float64, len(hist)),
            )
        else:
            histogram = _weighted_histogram(matrix[k], weights)
            on_words[k] = float(histogram[1].sum())
            a0 = math.fsum(
                (
                    histogram[1] * np.log(((start - histogram[0]) + alpha) / (start + 2.0 * alpha))
                ).tolist()
            )
        mine = k_of_event == k
        if not forgets:
            version = np.cumsum(mine) - mine  # class-k events before each event
            weight = np.cumsum(np.concatenate(([start], classes.w[mine])))  # (as learn_one)
            versions = (weight, np.full(len(weight), alpha))
        else:
            version = np.arange(b)
            versions = (np.append(n_y[k], n_y[k, -1] + classes.onehot[k, -1]), alphas)
        if not (versions[0][-1] > start or versions[1][-1] > alpha):
            out[k] = a0  # (nothing changes)
            continue
        moves = entries.take(np.flatnonzero(learned_k == k))
        tokens = batch.tok.take(moves)
        values = class_aggregates(
            a0,
            alpha,
            histogram,
            (
                counts[k].take(moves),
                inc.take(moves),
                version.take(batch.ev.take(moves)) + 1,
                tokens,
                None if weights is None else weights.take(tokens),
            ),
            versions,
        )
        if values is None:
            return None
        out[k] = values.take(version)
    return out, on_words


def _weighted_histogram(column: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct counts ``> 0`` of one class's ``column`` of the array and the sum of
    the weights of the words at each."""
    on = column > 0
    values, inverse = np.unique(column[on], return_inverse=True)
    totals = np.bincount(inverse, weights=weights[: len(column)][on], minlength=len(values))
    return values, totals


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
