"""Exact batch kernel of BernoulliNB (see :mod:`~stream_nb.naive_bayes._text_batch`).

The on-counts before each entry are prefix sums as for the count learners; the
per-class aggregates ``A_y`` (a term for every word ever on in the class) are
summed by runs of constant count with a series in the batch's class weight, see
:func:`_bernoulli_aggregates`. Integral weights and counts only: the runs
group the words by count.
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

if TYPE_CHECKING:
    from stream_nb.naive_bayes.bernoulli import BernoulliNB

__all__ = ["bernoulli_kernel"]

#: Most (version, word run) terms the aggregates sum one by one per batch.
_MAX_AGGREGATE_CELLS = 1 << 22

#: The aggregates expand ``log(a + δ)`` in series where ``δ/a`` is at most this, to
#: this many terms: ``ratio**(terms + 1) / (terms + 1)`` is below 1e-19.
_SERIES_RATIO = 0.125
_SERIES_TERMS = 19


def bernoulli_kernel(
    learner: BernoulliNB,
    xs: Sequence[Mapping[Any, Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
) -> KernelResult | None:
    """Predict then learn a batch with :class:`~stream_nb.naive_bayes.BernoulliNB`'s
    formulas, or ``None``; integral weights and counts only (the aggregates group
    the words by count, see :func:`_bernoulli_aggregates`)."""
    if learner.class_prior is not None:
        return None
    batch = TokenBatch.of(learner, xs, ys, ws, counts=False)
    if batch is None:
        return None
    classes = batch.classes
    labels = classes.labels
    n0 = np.array([learner._class_weight[y] for y in labels])
    if not classes.unit and not exact_integer_sums(classes.w):
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
    if not exact_integer_sums(n0, classes.w):
        return None
    counts, start, after, changed = batch.prefix(inc, True)  # K × nnz: events with the word on
    if not exact_integer_sums(start, inc):
        return None  # (the runs group the words by count: integral counts only)
    n_y = class_prefix(classes, n0.tolist())  # K × B
    n_e = n_y.take(batch.ev, axis=1)
    on_known = on if known is None else on & known
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.log((counts + alpha) * ((n_e + alpha) / alpha) / (n_e - counts + alpha))
    acc = batch.per_event(np.where(on_known[None, :] & (counts > 0), terms, 0.0))
    if not np.isfinite(acc).all():
        return None  # (a product past the double range: the per-event path splits it)
    n_on = batch.per_event(on_known.astype(np.float64))
    first_on = np.zeros(batch.nnz)
    learned = np.flatnonzero(inc)
    rows_k = k_e.take(learned)
    newly_on = counts[rows_k, learned] == 0
    first_on[learned[newly_on]] = 1.0
    on_words = np.array(learner._on_words, dtype=np.float64)[:, None] + exclusive_cumsum(
        np.stack([batch.per_event(np.where(k_e == k, first_on, 0.0)) for k in range(len(labels))]),
        axis=-1,
    )
    aggregates = _bernoulli_aggregates(learner, batch, counts, inc, k_e, n_y, n0, alpha)
    if aggregates is None:
        return None
    shifted = n_y + alpha
    jll = (
        log_prior(learner, classes, alpha)
        + aggregates
        - (vocabulary - on_words) * np.log1p(alpha / shifted)
        + n_on[None, :] * np.log(alpha / shifted)
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


def _bernoulli_aggregates(
    learner: BernoulliNB,
    batch: TokenBatch,
    counts: np.ndarray,
    inc: np.ndarray,
    k_e: np.ndarray,
    n_y: np.ndarray,
    n0: np.ndarray,
    alpha: float,
) -> np.ndarray | None:
    """``K × B``: BernoulliNB's ``A_y = Σ_{w: N_{y,w}>0} log((N_y − N_{y,w} + α) / (N_y + 2α))``
    before each event, or ``None`` past :data:`_MAX_AGGREGATE_CELLS`.

    ``A_y`` changes only when class ``y`` learns: its *versions* ``j = 0..m``
    are the model after each of the batch's ``m`` class-``y`` events, with
    ``N_y = N₀ + δ_j``. Every word is a run of versions at a constant count
    ``c`` (a word untouched by the batch: all of them; a word on in class-``y``
    events: one run per count it takes), so ``A_y(j)`` is a sum of terms
    ``f(c, δ_j) = log((a + δ_j) / (b + δ_j))`` with ``a = N₀ − c + α`` and
    ``b = N₀ + 2α``. Where ``a ≥ δ_m / ρ`` the term is its series in ``δ``::

        f = log(a/b) + Σ_{p≥1} (−1)^{p+1} (δ/s)^p / p · ((s/a)^p − (s/b)^p)

    (``s = δ_m``; :data:`_SERIES_TERMS` terms leave less than 1e-19 per word), so
    each run adds its ``1 + P`` coefficients to every version it spans (one
    cumulative sum over versions), and ``A_y(j)`` is one dot product per
    version. The few runs with a smaller ``a`` (words on in nearly every
    class-``y`` event) are summed term by term. Version 0 is the learner's own
    aggregate. Cost: O((runs + versions) × P + near terms), not O(vocabulary
    × versions).
    """
    classes = batch.classes
    b = batch.b
    out = np.empty((len(classes.labels), b))
    cells = 0
    powers = np.arange(1, _SERIES_TERMS + 1)
    signs = np.where(powers % 2 == 1, 1.0, -1.0) / powers
    for k in range(len(classes.labels)):
        a0 = learner._agg[k]
        if a0 is None:
            a0 = learner._aggregate(k, float(n0[k]), alpha)
        events = classes.rows[classes.k == k]
        m = len(events)
        if not m:
            out[k] = a0
            continue
        version = np.searchsorted(events, np.arange(b))  # class-k events before each event
        n_versions = n_y[k].take(events)  # N_y of versions 0..m-1
        n_versions = np.append(n_versions, n_versions[-1] + classes.w[events[-1]])
        start = float(n_versions[0])
        delta = n_versions - start
        # --- runs of the words on in class-k events of the batch: one per move c → c + w
        idx = np.flatnonzero((k_e == k) & (inc > 0))
        order = np.argsort(batch.tok.take(idx), kind="stable")
        idx = idx.take(order)
        tok = batch.tok.take(idx)
        old = counts[k].take(idx)
        new = old + inc.take(idx)
        after = version.take(batch.ev.take(idx)) + 1  # the first version showing the move
        first = np.ones(len(idx), dtype=bool)
        first[1:] = tok[1:] != tok[:-1]
        until = np.full(len(idx), m + 1, dtype=np.intp)
        until[:-1] = np.where(first[1:], m + 1, after[1:])
        initial = first & (old > 0)  # the word's run before its first move
        # --- the words the batch does not touch: the start histogram less the touched
        hist = learner._hist[k]
        keys = np.fromiter(hist.keys(), np.float64, len(hist))
        mult = np.fromiter(hist.values(), np.float64, len(hist))
        sorter = np.argsort(keys)
        keys, mult = keys.take(sorter), mult.take(sorter)
        touched, n_touched = np.unique(old[initial], return_counts=True)
        at = np.searchsorted(keys, touched)
        if len(touched) and (at.max() >= len(keys) or not (keys.take(at) == touched).all()):
            return None  # (the histogram does not hold the counts: not this batch)
        mult[at] -= n_touched
        kept = mult > 0
        c = np.concatenate((keys[kept], old[initial], new))
        mu = np.concatenate((mult[kept], np.ones(int(initial.sum()) + len(new))))
        v1 = np.concatenate((np.zeros(int(kept.sum()) + int(initial.sum()), dtype=np.intp), after))
        v2 = np.concatenate((np.full(int(kept.sum()), m + 1, dtype=np.intp), after[initial], until))
        # --- far runs: the series; near runs: term by term
        scale = float(delta[-1])
        a = (start - c) + alpha
        far = a >= scale / _SERIES_RATIO
        a_versions = np.zeros(m + 1)
        bb = start + 2.0 * alpha
        if far.any():
            af, muf = a[far], mu[far]
            log_ratio = np.log(((start - c[far]) + alpha) / bb)
            coefficients = np.empty((len(af), _SERIES_TERMS + 1))
            coefficients[:, 0] = muf * log_ratio
            r = scale / af
            term = muf.copy()
            for p in range(1, _SERIES_TERMS + 1):
                term *= r
                coefficients[:, p] = term * -np.expm1(p * log_ratio)
            # runs over every version add to all; the others from their first
            # version up to their last (a cumulative sum of steps)
            v1f, v2f = v1[far], v2[far]
            whole = (v1f == 0) & (v2f == m + 1)
            moments = np.empty((m + 1, _SERIES_TERMS + 1))
            moments[:] = coefficients[whole].sum(axis=0)
            part = np.flatnonzero(~whole)
            if len(part):
                starts, stops = v1f.take(part), v2f.take(part)
                for p in range(_SERIES_TERMS + 1):
                    column = coefficients[:, p].take(part)
                    steps = np.bincount(starts, column, m + 2) - np.bincount(stops, column, m + 2)
                    moments[:, p] += np.cumsum(steps[: m + 1])
            x = delta / scale
            series = (x[:, None] ** powers[None, :]) * signs[None, :]
            a_versions += moments[:, 0] + (moments[:, 1:] * series).sum(axis=1)
        near = ~far
        if near.any():
            lengths = v2[near] - v1[near]
            total = int(lengths.sum())
            cells += total
            if cells > _MAX_AGGREGATE_CELLS:
                return None
            offsets = np.cumsum(lengths) - lengths
            j = np.repeat(v1[near], lengths) + (np.arange(total) - np.repeat(offsets, lengths))
            n_j = n_versions.take(j)
            with np.errstate(divide="ignore", invalid="ignore"):
                terms = np.repeat(mu[near], lengths) * np.log(
                    ((n_j - np.repeat(c[near], lengths)) + alpha) / (n_j + 2.0 * alpha)
                )
            a_versions += np.bincount(j, weights=terms, minlength=m + 1)
        a_versions[0] = a0
        out[k] = a_versions.take(version)
    return out
