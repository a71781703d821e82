"""BernoulliNB's per-class aggregate at every step of a batch, for its batch kernel.

BernoulliNB scores class ``y`` with ``A_y = Σ_{w: N_{y,w}>0} f(N_{y,w}, N_y)``,
``f(c, N) = log((N − c + α) / (N + 2α))`` (see :class:`~stream_nb.naive_bayes.BernoulliNB`):
a term for every word ever on in the class, each of which changes whenever the class
learns an event. In a batch, class ``y`` has *versions* ``j = 0..m``: the model
after each of the batch's ``m`` class-``y`` events, with ``N_y = N₀ + δ_j``
(``δ_j``: the class's weight learned in the batch so far). :func:`class_aggregates`
gives ``A_y`` at every version from

* ``a₀``, the learner's own aggregate at version 0 (an exact sum),
* the words at their counts at the start of the batch, ``Σ_c H[c] (f(c, N₀ + δ_j) −
  f(c, N₀))`` over the start histogram ``H`` of the counts,
* the *moves* of the batch: a word on in a class-``y`` event goes from count ``c``
  to ``c + w``, which adds ``f(c + w, N) − f(c, N)`` (``f(0, N) = 0``: a word not yet
  on in the class) from the next version on.

Every such term is ``log((a + δ_j) / (b + δ_j))`` for constants ``a < b``. Where
``a ≥ δ_m / ρ`` (*far*) it is summed through its series in ``x_j = δ_j / δ_m``::

    log(a/b) + Σ_{p≥1} (−1)^{p+1}/p · x^p ((δ_m/a)^p − (δ_m/b)^p)

(:data:`_SERIES_TERMS` terms leave less than 1e-19 per term), so a sum of far
terms is a polynomial in ``x_j`` whose coefficients add up: the start histogram's
once per distinct count, the moves' summed per version and cumulated over the
versions. The other
(*near*) terms, of words on in nearly every class-``y`` event, are computed one
by one at every version, grouped by word or by ``(c, w)``, whichever gives fewer
cells. Cost per class: O(distinct counts × P + moves × P + near cells), not
O(vocabulary × versions).
"""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_AGGREGATE_CELLS", "class_aggregates"]

#: Most near cells (terms computed one by one) per class and batch; past it the
#: kernel declines the batch.
MAX_AGGREGATE_CELLS = 1 << 22

#: A segment of versions spans at most ``N / _SEGMENT_SPAN`` of weight (``N``: the class
#: weight at its start), and at least :data:`_MIN_SEGMENT` versions.
_SEGMENT_SPAN = 10.0
_MIN_SEGMENT = 16

#: A term is far when ``δ_m / a`` is at most this, and its series has this many terms:
#: ``ratio**(terms + 1) / (terms + 1)`` is below 1e-19.
_SERIES_RATIO = 0.125
_SERIES_TERMS = 19

#: Near moves of at most this many words are summed by word.
_FEW_WORDS = 64

_POWERS = np.arange(1, _SERIES_TERMS + 1)
_SIGNS = np.where(_POWERS % 2 == 1, 1.0, -1.0) / _POWERS


def _series(a: np.ndarray, b: np.ndarray, scale: float) -> np.ndarray:
    """``(1 + P) × n``: the series coefficients of ``log((a + δ) / (b + δ))`` in
    ``x = δ / scale``, for ``0 < a < b`` (row 0: ``log(a / b)``)."""
    n = len(a)
    out = np.empty((_SERIES_TERMS + 1, n))
    gap = (b - a) / b  # 1 − a/b
    out[0] = np.log1p(-gap)
    q = a / b
    r = scale / a
    term = r.copy()  # (δ/a)^p
    power = q.copy()  # (a/b)^(p−1) for the next p
    missing = gap.copy()  # 1 − (a/b)^p = gap · (1 + q + … + q^(p−1)): no cancellation
    for p in range(1, _SERIES_TERMS + 1):
        # (δ/a)^p − (δ/b)^p = (δ/a)^p (1 − (a/b)^p)
        np.multiply(term, missing, out=out[p])
        out[p] *= _SIGNS[p - 1]
        term *= r
        missing += power * gap
        power *= q
    return out


def _polynomial(coefficients: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``Σ_p coefficients[p] x^p`` at every ``x`` (Horner's rule; a coefficient is one
    number or one per ``x``)."""
    out = np.broadcast_to(coefficients[-1], x.shape).copy()
    for c in coefficients[-2::-1]:
        out *= x
        out += c
    return out


def _kinds(c: np.ndarray, w: np.ndarray, times: np.ndarray) -> tuple[int, np.ndarray]:
    """The distinct ``(c, w, times)`` of the moves: their number and each move's kind."""
    if (w == w[0]).all() and (times == times[0]).all():
        kinds, inverse = np.unique(c, return_inverse=True)
        return len(kinds), inverse
    pairs, inverse = np.unique(np.stack([c, w, times]), axis=1, return_inverse=True)
    return pairs.shape[1], inverse.reshape(-1)


def _move_terms(
    c: np.ndarray, w: np.ndarray, alpha: float, versions: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """``(numerator, denominator)``, ``moves × versions``: ``f(c + w, N_j) − f(c, N_j)`` is
    the logarithm of their ratio, ``((N_j − (c + w)) + α_j) / ((N_j − c) + α_j)``, or
    over ``N_j + α₀ + α_j`` for a word not on before (``c = 0``)."""
    weight, alphas = versions
    new = c + w
    numerator = (weight[None, :] - new[:, None]) + alphas[None, :]
    denominator = np.where(
        (c > 0)[:, None],
        (weight[None, :] - c[:, None]) + alphas[None, :],
        ((weight + alpha) + alphas)[None, :],
    )
    return numerator, denominator


def class_aggregates(
    a0: float,
    alpha: float,
    histogram: tuple[np.ndarray, np.ndarray],
    moves: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None],
    versions: tuple[np.ndarray, np.ndarray],
) -> np.ndarray | None:
    """A class's aggregate at each of its versions ``0..m`` (see the module docstring),
    or ``None`` past :data:`MAX_AGGREGATE_CELLS`.

    The versions are summed in segments whose span of ``z`` is at most
    ``N / _SEGMENT_SPAN`` (``N``: the class weight at the segment's start), so that
    most terms are far even while the class weight is small next to the batch's
    (early in a stream): each segment starts from the aggregate the previous one
    ended with, and from the histogram the previous segments' moves left.

    Parameters
    ----------
    a0
        The aggregate at version 0 (the learner's exact sum).
    alpha
        α in raw units at version 0 (the denominators are ``N + α₀ + α``).
    histogram
        ``(counts, words)``: the start histogram of the words' counts ``> 0`` (``words``
        may be real: a word counting as its weight).
    moves
        ``(count before, weight, version after, word, times)`` of each move, in version
        order (``version after`` in ``1..m``; ``word``: any integer per word; ``times``:
        how many times its terms count, one number per word, ``None``: once).
    versions
        ``(N, α)``: the class weight and α (raw units) at each version ``0..m``, as the
        per-event path holds them (non-decreasing; without forgetting α is constant);
        ``z_j = (N_j − N_s) + (α_j − α_s)`` from a segment's first version ``s``, two
        differences summed, so that a small change of α is not lost next to a large
        one of ``N``. The near terms, whose ``N − c`` may be small next to ``N``, are
        computed from these and the moves' counts as that path computes them.
    """
    weight, alphas = versions
    m1 = len(weight)
    delta = (weight - weight[0]) + (alphas - alphas[0])  # (where the segments end)
    out = np.empty(m1)
    out[0] = a0
    counts, words = histogram
    c, w, after, word, times = moves
    if times is None:
        times = np.ones(len(c))
    j0 = 0
    while j0 < m1 - 1:
        n_start = float(versions[0][j0])
        span = max(
            n_start / _SEGMENT_SPAN, float(delta[min(j0 + _MIN_SEGMENT, m1 - 1)] - delta[j0])
        )
        j1 = int(np.searchsorted(delta, delta[j0] + span, side="right")) - 1
        j1 = min(max(j1, j0 + 1), m1 - 1)
        lo, hi = np.searchsorted(after, [j0, j1], side="right")
        values = _segment(
            float(out[j0]),
            n_start,
            alpha,
            (weight[j0 : j1 + 1] - weight[j0]) + (alphas[j0 : j1 + 1] - alphas[j0]),
            (counts, words),
            (c[lo:hi], w[lo:hi], after[lo:hi] - j0, word[lo:hi], times[lo:hi]),
            (versions[0][j0 : j1 + 1], versions[1][j0 : j1 + 1]),
        )
        if values is None:
            return None
        out[j0 : j1 + 1] = values
        if j1 < m1 - 1:
            counts, words = _moved(counts, words, (c[lo:hi], w[lo:hi], times[lo:hi]))
        j0 = j1
    return out


def _moved(
    counts: np.ndarray, words: np.ndarray, moves: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """The histogram of counts after ``moves`` (from ``c`` to ``c + w``, a word counting
    ``times``; ``c = 0``: a word not counted before): a word moved several times nets
    out to its last count."""
    c, w, times = moves
    values = np.concatenate((counts, c + w, c[c > 0]))
    weights = np.concatenate((words, times, -times[c > 0]))
    keys, inverse = np.unique(values, return_inverse=True)
    totals = np.bincount(inverse, weights=weights, minlength=len(keys))
    kept = totals != 0
    return keys[kept], totals[kept]


def _segment(
    a0: float,
    start: float,
    alpha: float,
    delta: np.ndarray,
    histogram: tuple[np.ndarray, np.ndarray],
    moves: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    versions: tuple[np.ndarray, np.ndarray],
) -> np.ndarray | None:
    """:func:`class_aggregates` over versions ``0..m`` from ``a0`` at version 0, without
    segments (same parameters, for the segment: ``start`` and ``histogram`` at its
    first version, ``delta``, the moves' versions and ``versions`` from it; ``alpha``
    stays the batch's ``α₀``)."""
    m1 = len(delta)
    scale = float(delta[-1])
    x = delta / scale
    out = np.full(m1, a0)
    # --- the words at their start counts: Σ_c H[c] (f(c, N₀ + δ_j) − f(c, N₀))
    counts, words = histogram
    # f(c, N_j) = log((a + z) / (b + z)) with a, b at the segment's first version
    # (``z = δ + ε`` from it): N and α there as the per-event path holds them
    alpha_s = float(versions[1][0])
    a = (start - counts) + alpha_s
    b = np.full(len(a), (start + alpha) + alpha_s)
    far = a >= scale / _SERIES_RATIO
    coefficients = _series(a[far], b[far], scale)
    out += _polynomial(coefficients[1:] @ words[far], x) * x
    near = ~far
    if near.any():
        if int(near.sum()) * m1 > MAX_AGGREGATE_CELLS:
            return None
        weight, alphas = versions
        # f(c, N_j) = log(((N_j − c) + α_j) / (N_j + α₀ + α_j)), from version 0 on
        cells = np.log(
            ((weight[None, :] - counts[near][:, None]) + alphas[None, :])
            / ((weight + alpha) + alphas)[None, :]
        )
        out += (words[near][:, None] * (cells - cells[:, :1])).sum(axis=0)
    # --- the moves: from their version on, f(c + w, N) − f(c, N)
    c, w, after, word, times = moves
    if not len(c):
        return out
    on_before = c > 0
    a = (start - (c + w)) + alpha_s
    b = np.where(on_before, (start - c) + alpha_s, (start + alpha) + alpha_s)
    far = a >= scale / _SERIES_RATIO
    if far.any():
        table = _series(a[far], b[far], scale) * times[far]
        # each version's moves' coefficients (moves are in version order), summed
        # up to every version
        moved_at = after[far]
        first = np.flatnonzero(np.diff(moved_at, prepend=-1))
        sums = np.zeros((_SERIES_TERMS + 1, m1))
        sums[:, moved_at.take(first)] = np.add.reduceat(table, first, axis=1)
        np.cumsum(sums, axis=1, out=sums)
        out += sums[0] + _polynomial(sums[1:], x) * x
    near = ~far
    if near.any():
        moved = _near_moves(
            (c[near], w[near], after[near], word[near], times[near]), alpha, versions
        )
        if moved is None:
            return None
        out += moved
    return out


def _near_moves(
    moves: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    alpha: float,
    versions: tuple[np.ndarray, np.ndarray],
) -> np.ndarray | None:
    """The near moves' terms at every version, one cell per (word or ``(c, w, times)``
    kind, version): by word, a word's near moves add ``f(c(j), N_j) − f(c_first, N_j)``
    (they telescope; a word's near moves are its last ones: ``a`` falls as its count
    grows), by kind, ``n_κ(j) (f(c + w, N_j) − f(c, N_j))``; each times the word's
    ``times``, and each from the class weights and α of ``versions`` (see
    :func:`class_aggregates`)."""
    c, w, after, word, mult = moves
    m1 = len(versions[0])
    words, by_word = np.unique(word, return_inverse=True)
    # (a few words: by word without counting the kinds)
    n_kinds, by_kind = _kinds(c, w, mult) if len(words) > _FEW_WORDS else (len(c) + 1, by_word)
    if min(len(words), n_kinds) * m1 > MAX_AGGREGATE_CELLS:
        return None
    total = np.zeros(m1)
    if n_kinds <= len(words):
        times = np.zeros((n_kinds, m1))
        np.add.at(times, (by_kind, after), mult)
        times = np.cumsum(times, axis=1)
        kind = np.zeros(n_kinds, dtype=np.intp)
        kind[by_kind] = np.arange(len(c))
        numerator, denominator = _move_terms(c.take(kind), w.take(kind), alpha, versions)
        rows, cols = np.nonzero(times)  # (the logarithm where a move of the kind was made)
        values = times[rows, cols] * np.log(numerator[rows, cols] / denominator[rows, cols])
        total += np.bincount(cols, weights=values, minlength=m1)
        return total
    # by word: the count before its first near move, and its count at every version
    # (after its last move so far: counts only grow)
    n_words = len(words)
    first = np.full(n_words, len(c), dtype=np.intp)
    np.minimum.at(first, by_word, np.arange(len(c)))
    count = np.zeros((n_words, m1))
    count[by_word, after] = c + w  # (a word moves once per version)
    np.maximum.accumulate(count, axis=1, out=count)
    begun = count > 0
    rows, cols = np.nonzero(begun)
    numerator, denominator = _move_terms(c.take(first), np.zeros(n_words), alpha, versions)
    weight, alphas = versions
    # f(c(j), N_j) − f(c_first, N_j), or f(c(j), N_j) for a word first on here
    values = np.log(
        ((weight.take(cols) - count[rows, cols]) + alphas.take(cols)) / denominator[rows, cols]
    ) * mult.take(first).take(rows)
    total += np.bincount(cols, weights=values, minlength=m1)
    return total
