"""Exact batch kernels of MultinomialNB and ComplementNB.

See :mod:`~stream_nb.naive_bayes._text_batch` for what the kernels share.

Both read the same prefix counts of the batch's entries; each applies its
learner's formulas to every (class, event) at once and writes the counts after
the batch back (MultinomialNB with its ``log1p(N/α)`` cache, computed with
``math.log1p`` as ``learn_one`` computes it). ComplementNB with ``norm=True``
also needs the sums ``H`` and ``D_y`` before every event: each learned entry
changes its token's terms, and those changes are prefix-summed over the events.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from itertools import repeat
from operator import mul
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from stream_nb._mle import resolve_zero_terms
from stream_nb.naive_bayes._arrays import exclusive_cumsum, row_sum
from stream_nb.naive_bayes._text_batch import (
    COUNT_TYPES,
    KernelResult,
    TokenBatch,
    TokenCodes,
    add_class_weights,
    class_tokens_prefix,
    count_totals,
    learned_counts,
    log_prior,
    normalise,
    write_counts,
)

if TYPE_CHECKING:
    from stream_nb.naive_bayes.complement import ComplementNB
    from stream_nb.naive_bayes.multinomial import MultinomialNB

__all__ = ["complement_kernel", "multinomial_kernel"]


def multinomial_kernel(
    learner: MultinomialNB,
    codes: TokenCodes,
    xs: Sequence[Mapping[Any, Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
) -> KernelResult | None:
    """Predict then learn a batch with :class:`~stream_nb.naive_bayes.MultinomialNB`'s
    formulas (see the module docstring), or ``None``."""
    if learner.class_prior is not None:
        return None
    batch = TokenBatch.of(learner, codes, xs, ys, ws, COUNT_TYPES, layout=(2, 2))
    if batch is None:
        return None
    classes = batch.classes
    alpha = learner.alpha / learner._scale
    k_e = batch.event_class()
    inc = np.where((k_e >= 0) & (batch.val > 0), batch.val * classes.w.take(batch.ev), 0.0)
    known, added, order = batch.known(batch.first_learned(inc > 0))
    vocabulary = len(learner._counts) + added
    c0 = batch.c0
    counts = batch.prefix(c0, inc)
    x_known = np.where(known, batch.val, 0.0)
    totals = count_totals(batch, xs)
    class_tokens = learner._class_extra["class_tokens"]
    t_y = class_tokens_prefix(classes, [class_tokens[y] for y in classes.labels], totals)
    if alpha == 0:
        jll = _multinomial_mle(batch, counts, x_known, t_y, log_prior(learner, classes, 0.0))
    else:
        # Σ_w x_w log1p(N_{y,w}/α) + X (log α − log(T_y + αV)), as MultinomialNB
        acc = batch.per_event_classes(x_known[None, :] * np.log1p(counts * (1.0 / alpha)))
        big_x = batch.per_event(x_known)
        with np.errstate(divide="ignore"):
            log_den = np.log(t_y + alpha * vocabulary[None, :])
        term = np.where(big_x > 0, big_x, 0.0)[None, :] * (math.log(alpha) - log_den)
        jll = log_prior(learner, classes, alpha) + acc + np.where(big_x > 0, term, 0.0)
    result = normalise(jll, classes.labels)
    if result is None:
        return None
    # --- the statistics after the batch
    pairs = learned_counts(batch, c0, inc, k_e)
    tokens = batch.tokens
    rows = cast(dict[Any, list[float]], learner._counts)
    for u in order:
        rows[tokens[u]] = [1.0]
    log1p = math.log1p
    inv_alpha = learner._inv_alpha
    cache = learner._cache_logs
    if pairs is not None:
        us, ks, ns = pairs
        slots = [2 * k + 2 for k in ks]  # N_{k,w}; its log1p(N/α) sits just before
        # (math.log1p, as learn_one: numpy's may differ in the last bit)
        logs = map(log1p, map(mul, ns, repeat(inv_alpha))) if cache else repeat(0.0)
        learned_rows = map(rows.__getitem__, map(tokens.__getitem__, us))
        for row, i, n, lg in zip(learned_rows, slots, ns, logs):  # noqa: B905
            try:
                row[i] = n
            except IndexError:
                row.extend([0.0] * (i + 1 - len(row)))
                row[i] = n
            if cache:
                row[i - 1] = lg
        codes.learned(batch, order, pairs)
    else:  # one entry at a time, in event order, as learn_one adds them
        for e in np.flatnonzero(inc).tolist():
            row = rows[tokens[batch.tok[e]]]
            i = 2 * int(k_e[e]) + 2
            if len(row) <= i:
                row.extend([0.0] * (i + 1 - len(row)))
            n = row[i] = row[i] + float(batch.val[e]) * float(classes.w[batch.ev[e]])
            if cache:
                row[i - 1] = log1p(n * inv_alpha)
        codes.add([tokens[u] for u in order])
        learner._batch_counts_valid = False  # (sums of real weights: rebuilt from the rows)
    add_class_weights(learner, ys, ws, totals)
    return result


def _multinomial_mle(
    batch: TokenBatch,
    counts: np.ndarray,
    x_known: np.ndarray,
    t_y: np.ndarray,
    prior: np.ndarray | float,
) -> np.ndarray:
    """MultinomialNB's ``K × B`` scores with ``alpha = 0``: per class and event the finite
    terms ``Σ x_w (log N_{y,w} − log T_y)`` over the entries with ``N_{y,w} > 0``, the
    others (a positive count of a token never counted in the class) being zero-probability
    terms, decided by :mod:`stream_nb._mle`'s rule as per event (``-inf`` for a class so
    ruled out: :func:`normalise` then hands the batch to the per-event path)."""
    positive = counts > 0.0
    x_positive = np.where(positive, x_known[None, :], 0.0)
    finite = batch.per_event_classes(x_positive * np.log(np.where(positive, counts, 1.0)))
    x_y = batch.per_event_classes(x_positive)
    finite -= x_y * np.log(np.where(x_y > 0, t_y, 1.0))
    zero = (x_known > 0)[None, :] & ~positive
    zeros = batch.per_event_classes(zero.astype(np.float64))
    resolved: np.ndarray = resolve_zero_terms((prior + finite).T, zeros.T).T
    return resolved


def complement_kernel(
    learner: ComplementNB,
    codes: TokenCodes,
    xs: Sequence[Mapping[Any, Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
) -> KernelResult | None:
    """Predict then learn a batch with :class:`~stream_nb.naive_bayes.ComplementNB`'s
    formulas (``norm`` either way; see the module docstring), or ``None``."""
    batch = TokenBatch.of(learner, codes, xs, ys, ws, COUNT_TYPES)
    if batch is None:
        return None
    classes = batch.classes
    alpha = learner.alpha / learner._scale
    k_e = batch.event_class()
    inc = np.where((k_e >= 0) & (batch.val > 0), batch.val * classes.w.take(batch.ev), 0.0)
    known, added, order = batch.known(batch.first_learned(inc > 0))
    vocabulary = len(learner._counts) + added  # V before each event
    c0 = batch.c0
    counts = batch.prefix(c0, inc)  # K × nnz: N_{j,w} before each entry
    n_w = row_sum(counts.T)  # N_w
    shifted = n_w + alpha
    x_known = np.where(known, batch.val, 0.0)
    big_x = batch.per_event(x_known)
    base = batch.per_event(x_known * np.log(shifted))
    # d_{j,w} = log((N_w + α) / (C_{j,w} + α)), 0 where N_{j,w} = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(counts > 0, np.log(shifted[None, :] / (n_w[None, :] - counts + alpha)), 0.0)
    acc = batch.per_event_classes(x_known[None, :] * d)
    totals = count_totals(batch, xs)
    class_tokens = learner._class_extra["class_tokens"]
    t_y = class_tokens_prefix(classes, [class_tokens[y] for y in classes.labels], totals)
    total = row_sum(t_y.T)  # T before each event
    log_den = np.log(total[None, :] - t_y + alpha * vocabulary[None, :])
    jll = acc - base[None, :] + big_x[None, :] * log_den
    if learner.norm:
        h, sum_d, h_end, d_end, updates = _complement_sums(
            learner, batch, counts, n_w, d, inc, k_e, alpha
        )
        abs_sum = vocabulary[None, :] * log_den - (h[None, :] - sum_d)
        if not (abs_sum != 0).all():
            return None
        jll = jll / abs_sum
    jll = np.where(vocabulary[None, :] <= 1, 0.0, jll)
    result = normalise(jll, classes.labels)
    if result is None:
        return None
    # --- the statistics after the batch
    pairs = learned_counts(batch, c0, inc, k_e)
    write_counts(learner, codes, batch, order, pairs, inc, k_e)
    add_class_weights(learner, ys, ws, totals)
    if learner.norm:
        learner._batch_sums(h_end, d_end, updates)
    return result


def _complement_sums(
    learner: ComplementNB,
    batch: TokenBatch,
    counts: np.ndarray,
    n_w: np.ndarray,
    d: np.ndarray,
    inc: np.ndarray,
    k_e: np.ndarray,
    alpha: float,
) -> tuple[np.ndarray, np.ndarray, float, list[float], int]:
    """ComplementNB's ``H = Σ_w log(N_w + α)`` and ``D_j = Σ_{w: N_{j,w}>0} d_{j,w}``
    before each event (``B`` and ``K × B``), after the batch, and the number of
    terms updated: each learned entry changes its token's terms (``d``: the
    entries' ``d_{j,w}`` before them)."""
    if learner._sums_alpha != alpha:
        learner._refresh_sums()
    n_classes = counts.shape[0]
    d0 = np.zeros(n_classes)
    d0[: len(learner._sum_d)] = learner._sum_d[:n_classes]
    idx = np.flatnonzero(inc)
    step = inc.take(idx)
    before = n_w.take(idx)
    after = before + step
    # H: log(N_w + α) grows by log1p(step / (N_w + α)); a new token adds log(step + α)
    with np.errstate(divide="ignore"):
        dh = np.where(before > 0, np.log1p(step / (before + alpha)), np.log(step + alpha))
    # D_j: the token's term for class j after the entry, minus before
    counts_after = counts.take(idx, axis=1)
    counts_after[k_e.take(idx), np.arange(len(idx))] += step
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(
            counts_after > 0,
            np.log((after + alpha)[None, :] / (after[None, :] - counts_after + alpha)),
            0.0,
        )
    dd = term - d.take(idx, axis=1)
    ev = batch.ev.take(idx)
    dh_event = np.bincount(ev, weights=dh, minlength=batch.b)
    dd_event = np.stack([np.bincount(ev, weights=row, minlength=batch.b) for row in dd])
    h0 = learner._sum_log_total
    h = h0 + exclusive_cumsum(dh_event)
    sum_d = d0[:, None] + exclusive_cumsum(dd_event, axis=-1)
    h_end = float(h[-1] + dh_event[-1])
    d_end: list[float] = (sum_d[:, -1] + dd_event[:, -1]).tolist()
    updates = int(np.where(before > 0, n_classes, 1).sum())
    return h, sum_d, h_end, d_end, updates
