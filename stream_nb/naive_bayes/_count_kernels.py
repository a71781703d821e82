"""Exact batch kernels of MultinomialNB and ComplementNB.

See :mod:`~stream_nb.naive_bayes._text_batch` for what the kernels share.

Both read the same prefix counts of the batch's entries; each applies its
learner's formulas to every (class, event) at once and stores the counts after
the batch in the learner's array (MultinomialNB's ``log1p(N/α)`` cache is
rebuilt with the rows, when something next reads them). ComplementNB with
``norm=True`` also needs the sums ``H`` and ``D_y`` before every event: each
learned entry changes its token's terms, and those changes are prefix-summed
over the events.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_nb._decay import BatchDecay
from stream_nb._mle import resolve_zero_terms
from stream_nb.naive_bayes._arrays import exact_integer_sums, exclusive_cumsum, row_sum
from stream_nb.naive_bayes._text_batch import (
    KernelResult,
    TokenBatch,
    add_class_weights,
    class_tokens_prefix,
    log_prior,
    normalise,
    priors_scored,
)
from stream_nb.naive_bayes._token_decay import complement_log_sums

if TYPE_CHECKING:
    from stream_nb.naive_bayes.complement import ComplementNB
    from stream_nb.naive_bayes.multinomial import MultinomialNB

__all__ = ["complement_kernel", "multinomial_kernel"]


def _learned(batch: TokenBatch) -> tuple[np.ndarray, np.ndarray, bool]:
    """Each entry's learned weight (``count × w`` for a positive count of a labelled
    event, else 0), which entries learn their token into the vocabulary, and whether
    every learned weight is an integer."""
    classes = batch.classes
    val = batch.val
    positive = val > 0
    if classes.n_labelled == batch.b:
        joins = positive
        inc = val if classes.unit else val * classes.w.take(batch.ev)
    else:
        joins = positive & (batch.k_e >= 0)
        inc = np.where(joins, val * classes.w.take(batch.ev), 0.0)
    return inc, joins, batch.integral and (classes.unit or exact_integer_sums(classes.w))


def _scored(
    learner: MultinomialNB | ComplementNB, batch: TokenBatch, known: np.ndarray | None
) -> np.ndarray:
    """Each entry's value as scored: 0 for a token not in the vocabulary when its event
    is predicted, times its token's weight (``feature_weights``)."""
    val = batch.val
    x = val if known is None else np.where(known, val, 0.0)
    weights = learner.feature_weights
    if weights is not None:
        x = x * batch.token_weights(weights).take(batch.tok)
    return x


def multinomial_kernel(
    learner: MultinomialNB,
    xs: Sequence[Mapping[Any, Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
    decay: BatchDecay | None = None,
) -> KernelResult | None:
    """Predict then learn a batch with :class:`~stream_nb.naive_bayes.MultinomialNB`'s
    formulas (see the module docstring), or ``None``."""
    if not priors_scored(learner):
        return None
    batch = TokenBatch.of(learner, xs, ys, ws, decay, counts=True)
    if batch is None:
        return None
    classes = batch.classes
    alpha = batch.alpha
    inc, joins, integral = _learned(batch)
    known, vocabulary, order = batch.vocabulary(joins, len(learner._counts))
    counts, _, after, changed = batch.prefix(inc, integral)
    val = batch.val
    x_known = _scored(learner, batch, known)
    totals = batch.per_event(val)
    class_tokens = learner._class_extra["class_tokens"]
    t_y = class_tokens_prefix(classes, [class_tokens[y] for y in classes.labels], totals)
    if learner.alpha == 0:
        jll = _multinomial_mle(batch, counts, x_known, t_y, log_prior(learner, classes, 0.0))
    else:
        # Σ_w x_w log((N_{y,w} + α) / (T_y + αV)) = Σ_w x_w log(N_{y,w} + α) − X log(T_y + αV)
        # (MultinomialNB's log1p(N_{y,w}/α) + X log α, with the log α folded in)
        counts += batch.entry_alpha()
        acc = batch.per_event(np.log(counts, out=counts) * x_known)
        big_x = batch.per_event(x_known)
        log_den = _log_positive(t_y + alpha * vocabulary)  # (0 only with an empty vocabulary)
        jll = log_prior(learner, classes, alpha) + acc - np.where(big_x > 0, big_x, 0.0) * log_den
    result = normalise(jll, classes.labels)
    if result is None:
        return None
    batch.write(learner, after, order, changed)
    add_class_weights(learner, batch, ys, ws, totals, xs)
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
    finite = batch.per_event(x_positive * np.log(np.where(positive, counts, 1.0)))
    x_y = batch.per_event(x_positive)
    finite -= x_y * np.log(np.where(x_y > 0, t_y, 1.0))
    zero = (x_known > 0)[None, :] & ~positive
    zeros = batch.per_event(zero.astype(np.float64))
    resolved: np.ndarray = resolve_zero_terms((prior + finite).T, zeros.T).T
    return resolved


def complement_kernel(
    learner: ComplementNB,
    xs: Sequence[Mapping[Any, Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
    decay: BatchDecay | None = None,
) -> KernelResult | None:
    """Predict then learn a batch with :class:`~stream_nb.naive_bayes.ComplementNB`'s
    formulas (``norm`` either way; see the module docstring), or ``None``."""
    batch = TokenBatch.of(learner, xs, ys, ws, decay, counts=True)
    if batch is None:
        return None
    classes = batch.classes
    alpha = batch.alpha
    inc, joins, integral = _learned(batch)
    known, vocabulary, order = batch.vocabulary(joins, len(learner._counts))
    counts, _, after, changed = batch.prefix(inc, integral)  # K × nnz: N_{j,w} before each entry
    n_w = row_sum(counts.T)  # N_w
    present = counts > 0 if learner.norm else None
    # C_{j,w} + α: the complement counts (N_w itself where N_{j,w} = 0), N_w − N_{j,w}
    # first (as learn_one), so a small α is not lost next to large counts
    complement = np.subtract(n_w[None, :], counts, out=counts)
    decayed_norms = None
    if learner.norm and decay is not None:  # (G_y needs the complement counts themselves)
        decayed_norms = _decayed_norms(batch, complement, inc, vocabulary, order)
    complement += batch.entry_alpha()
    val = batch.val
    x_known = _scored(learner, batch, known)
    big_x = batch.per_event(x_known)
    totals = batch.per_event(val)
    class_tokens = learner._class_extra["class_tokens"]
    t_y = class_tokens_prefix(classes, [class_tokens[y] for y in classes.labels], totals)
    total = row_sum(t_y.T)  # T before each event
    # (0 only with an empty vocabulary, whose scores are 0 below)
    log_den = _log_positive(total[None, :] - t_y + alpha * vocabulary)
    # ComplementNB's Σ_w x_w d_{j,w} − Σ_w x_w log(N_w + α), d_{j,w} = log((N_w + α)/(C_{j,w} + α))
    # (0 where N_{j,w} = 0): −Σ_w x_w log(C_{j,w} + α)
    jll = big_x[None, :] * log_den - batch.per_event(np.log(complement) * x_known)
    scored = np.asarray(vocabulary)[None] > 1  # (with V ≤ 1 every θ is 1: every score 0)
    if present is not None:
        if decayed_norms is None:
            assert not isinstance(alpha, np.ndarray)  # (α changes with forgetting only)
            h, sum_d, h_end, d_end, updates = _complement_sums(
                learner, batch, n_w, (complement, present), inc, alpha
            )
            log_sums = h[None, :] - sum_d
        else:
            log_sums = decayed_norms
        abs_sum = np.where(scored, vocabulary * log_den - log_sums, 1.0)
        if not (abs_sum != 0).all():
            return None
        jll = jll / abs_sum
    jll = np.where(scored, jll, 0.0)
    result = normalise(jll, classes.labels)
    if result is None:
        return None
    batch.write(learner, after, order, changed)
    add_class_weights(learner, batch, ys, ws, totals, xs)
    if decayed_norms is not None:
        learner._sums_stale()
    elif learner.norm:
        learner._batch_sums(h_end, d_end, updates)
    return result


def _decayed_norms(
    batch: TokenBatch,
    complement: np.ndarray,
    inc: np.ndarray,
    vocabulary: np.ndarray | float,
    order: list[int],
) -> np.ndarray:
    """``K × B``: ComplementNB's ``Σ_{w∈V} log(C_{y,w} + α)`` before each event of a batch
    with forgetting (:func:`~stream_nb.naive_bayes._token_decay.complement_log_sums`), from
    the complement counts before each entry (``K × nnz``) and the learned weights."""
    idx = np.flatnonzero(inc)
    tok = batch.tok.take(idx)
    n_codes = batch.n_codes
    new = tok >= n_codes
    column = tok.copy()
    joins = np.zeros(len(idx), dtype=bool)
    if new.any():
        final = np.full(len(batch.new_tokens), -1, dtype=np.intp)
        final[order] = np.arange(n_codes, n_codes + len(order))  # (in the order they join)
        column[new] = final.take(tok[new] - n_codes)
        _, first = np.unique(column[new], return_index=True)
        joins[np.flatnonzero(new)[first]] = True
    alpha = batch.alpha
    assert isinstance(alpha, np.ndarray)
    sizes = np.broadcast_to(np.asarray(vocabulary, dtype=np.float64), (batch.b,))
    return complement_log_sums(
        batch.store.matrix(),
        alpha,
        sizes,
        (
            batch.ev.take(idx),
            column,
            batch.k_e.take(idx),
            inc.take(idx),
            complement.take(idx, axis=1),
            joins,
        ),
    )


def _log_positive(a: np.ndarray) -> np.ndarray:
    """``log a`` where ``a > 0``, 0 elsewhere."""
    out: np.ndarray = np.log(np.where(a > 0, a, 1.0))
    return out


def _complement_sums(
    learner: ComplementNB,
    batch: TokenBatch,
    n_w: np.ndarray,
    complement: tuple[np.ndarray, np.ndarray],
    inc: np.ndarray,
    alpha: float,
) -> tuple[np.ndarray, np.ndarray, float, list[float], int]:
    """ComplementNB's ``H = Σ_w log(N_w + α)`` and ``D_j = Σ_{w: N_{j,w}>0} d_{j,w}``
    before each event (``B`` and ``K × B``), after the batch, and the number of
    terms updated, from each learned entry's changes (as ``learn_one`` makes them:
    a learned weight ``s`` of class ``k`` adds ``δ = log1p(s / (N_w + α))`` to ``H``
    and ``D_k``, and ``δ − log1p(s / (C_{j,w} + α))`` to ``D_j`` for every other class
    with ``N_{j,w} > 0``; a new token adds ``log(s + α)`` to ``H``); ``complement``:
    ``C_{j,w} + α`` before each entry and whether ``N_{j,w} > 0`` (``K × nnz`` each)."""
    if learner._sums_alpha != alpha:
        learner._refresh_sums()
    comp_all, present = complement
    n_classes = comp_all.shape[0]
    d0 = np.zeros(n_classes)
    d0[: len(learner._sum_d)] = learner._sum_d[:n_classes]
    idx = np.flatnonzero(inc)
    step = inc.take(idx)
    before = n_w.take(idx)
    delta = np.log1p(step / (before + alpha))
    dh = np.where(before > 0, delta, np.log(step + alpha))
    k = batch.k_e.take(idx)
    comp = comp_all.take(idx, axis=1)
    own = k[None, :] == np.arange(n_classes)[:, None]
    other = present.take(idx, axis=1) & ~own  # the other classes with N_{j,w} > 0
    dd = (own | other) * delta[None, :] - np.where(other, np.log1p(step[None, :] / comp), 0.0)
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
