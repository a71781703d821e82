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


def _kinds(c: np.ndarray, w: np.ndarray) -> tuple[int, np.ndarray]:
    """The distinct ``(c, w)`` pairs of the moves: their number and each move's pair."""
    if (w == w[0]).all():
        kinds, inverse = np.unique(c, return_inverse=True)
        return len(kinds), inverse
    pairs, inverse = np.unique(np.stack([c, w]), axis=1, return_inverse=True)
    return pairs.shape[1], inverse.reshape(-1)


def _direct(a: np.ndarray, b: np.ndarray, delta: np.ndarray, times: np.ndarray) -> np.ndarray:
    """``Σ_i times[i, j] log((a_i + δ_j) / (b_i + δ_j))`` for every version ``j``, the
    logarithm taken where ``times`` is not 0 only (elsewhere it may be undefined)."""
    total = np.zeros(len(delta))
    if not len(a):
        return total
    rows, cols = np.nonzero(times)
    values = times[rows, cols] * np.log((a[rows] + delta[cols]) / (b[rows] + delta[cols]))
    total += np.bincount(cols, weights=values, minlength=len(delta))
    return total


def class_aggregates(
    a0: float,
    start: float,
    alpha: float,
    delta: np.ndarray,
    histogram: tuple[np.ndarray, np.ndarray],
    moves: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> np.ndarray | None:
    """A class's aggregate at each of its versions ``0..m`` (see the module docstring),
    or ``None`` past :data:`MAX_AGGREGATE_CELLS`.

    The versions are summed in segments whose span of ``δ`` is at most
    ``N / _SEGMENT_SPAN`` (``N``: the class weight at the segment's start), so that
    most terms are far even while the class weight is small next to the batch's
    (early in a stream): each segment starts from the aggregate the previous one
    ended with, and from the histogram the previous segments' moves left.

    Parameters
    ----------
    a0
        The aggregate at version 0 (the learner's exact sum).
    start
        The class weight ``N₀`` at the start of the batch.
    alpha
        α in raw units.
    delta
        ``δ_j`` for ``j = 0..m`` (integers: the moves' versions group by them).
    histogram
        ``(counts, words)``: the start histogram of the words' counts ``> 0``.
    moves
        ``(count before, weight, version after, word)`` of each move, in version
        order (``version after`` in ``1..m``; ``word``: any integer per word).
    """
    m1 = len(delta)
    out = np.empty(m1)
    out[0] = a0
    counts, words = histogram
    c, w, after, word = moves
    j0 = 0
    while j0 < m1 - 1:
        n_start = start + float(delta[j0])
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
            delta[j0 : j1 + 1] - delta[j0],
            (counts, words),
            (c[lo:hi], w[lo:hi], after[lo:hi] - j0, word[lo:hi]),
        )
        if values is None:
            return None
        out[j0 : j1 + 1] = values
        if j1 < m1 - 1:
            counts, words = _moved(counts, words, c[lo:hi], w[lo:hi])
        j0 = j1
    return out


def _moved(
    counts: np.ndarray, words: np.ndarray, c: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The histogram of counts after ``moves`` (from ``c`` to ``c + w``; ``c = 0``: a word
    not counted before): a word moved several times nets out to its last count."""
    values = np.concatenate((counts, c + w, c[c > 0]))
    weights = np.concatenate((words, np.ones(len(c)), -np.ones(int((c > 0).sum()))))
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
    moves: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> np.ndarray | None:
    """:func:`class_aggregates` over versions ``0..m`` from ``a0`` at version 0, without
    segments (same parameters, for the segment: ``start`` and ``histogram`` at its
    first version, ``delta`` and the moves' versions from it)."""
    m1 = len(delta)
    scale = float(delta[-1])
    x = delta / scale
    out = np.full(m1, a0)
    # --- the words at their start counts: Σ_c H[c] (f(c, N₀ + δ_j) − f(c, N₀))
    counts, words = histogram
    a = (start - counts) + alpha
    b = np.full(len(a), start + 2.0 * alpha)
    far = a >= scale / _SERIES_RATIO
    coefficients = _series(a[far], b[far], scale)
    out += _polynomial(coefficients[1:] @ words[far], x) * x
    near = ~far
    if near.any():
        if int(near.sum()) * m1 > MAX_AGGREGATE_CELLS:
            return None
        an, bn = a[near], b[near]
        cells = np.log((an[:, None] + delta[None, :]) / (bn[:, None] + delta[None, :]))
        out += (words[near][:, None] * (cells - cells[:, :1])).sum(axis=0)  # (from version 0)
    # --- the moves: from their version on, f(c + w, N) − f(c, N)
    c, w, after, word = moves
    if not len(c):
        return out
    on_before = c > 0
    a = np.where(on_before, (start - c - w) + alpha, (start - w) + alpha)
    b = np.where(on_before, (start - c) + alpha, start + 2.0 * alpha)
    far = a >= scale / _SERIES_RATIO
    if far.any():
        table = _series(a[far], b[far], scale)
        # each version's moves' coefficients (moves are in version order), summed
        # up to every version
        versions = after[far]
        first = np.flatnonzero(np.diff(versions, prepend=-1))
        sums = np.zeros((_SERIES_TERMS + 1, m1))
        sums[:, versions.take(first)] = np.add.reduceat(table, first, axis=1)
        np.cumsum(sums, axis=1, out=sums)
        out += sums[0] + _polynomial(sums[1:], x) * x
    near = ~far
    if near.any():
        moved = _near_moves(c[near], w[near], after[near], word[near], a[near], b[near], delta)
        if moved is None:
            return None
        out += moved
    return out


def _near_moves(
    c: np.ndarray,
    w: np.ndarray,
    after: np.ndarray,
    word: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    delta: np.ndarray,
) -> np.ndarray | None:
    """The near moves' terms at every version, one cell per (word or ``(c, w)`` kind,
    version): by word, a word's near moves add ``f(c(j), N_j) − f(c_first, N_j)`` (they
    telescope; a word's near moves are its last ones: ``a`` falls as its count
    grows), by kind, ``n_κ(j) (f(c + w, N_j) − f(c, N_j))``."""
    m1 = len(delta)
    words, by_word = np.unique(word, return_inverse=True)
    # (a few words: by word without counting the kinds)
    n_kinds, by_kind = _kinds(c, w) if len(words) > _FEW_WORDS else (len(c) + 1, by_word)
    if min(len(words), n_kinds) * m1 > MAX_AGGREGATE_CELLS:
        return None
    if n_kinds <= len(words):
        times = np.zeros((n_kinds, m1))
        np.add.at(times, (by_kind, after), 1.0)
        times = np.cumsum(times, axis=1)
        representative = np.zeros(n_kinds, dtype=np.intp)
        representative[by_kind] = np.arange(len(c))
        return _direct(a.take(representative), b.take(representative), delta, times)
    # by word: the count before its first near move, and its count at every version
    n_words = len(words)
    first = np.full(n_words, len(c), dtype=np.intp)
    np.minimum.at(first, by_word, np.arange(len(c)))
    c_first = c.take(first)
    step = np.zeros((n_words, m1))
    np.add.at(step, (by_word, after), w)
    count = c_first[:, None] + np.cumsum(step, axis=1)
    begun = np.cumsum(step, axis=1) > 0
    start = a.take(first) + c_first + w.take(first)  # N₀ + α (a = N₀ − c − w + α)
    n_j = start[:, None] + delta[None, :]  # N_j + α
    # N_j + 2α, for a word first on here (c = 0: b − a − w = α)
    plus = n_j + (b.take(first) - a.take(first) - w.take(first))[:, None]
    total = np.zeros(m1)
    rows, cols = np.nonzero(begun)
    now = count[rows, cols]
    before = c_first.take(rows)
    denominator = np.where(before > 0, n_j[rows, cols] - before, plus[rows, cols])
    # f(c(j), N_j) − f(c_first, N_j) = log((N_j − c(j) + α) / (N_j − c_first + α)),
    # or f(c(j), N_j) = log((N_j − c(j) + α) / (N_j + 2α)) for a word first on here
    values = np.log((n_j[rows, cols] - now) / denominator)
    total += np.bincount(cols, weights=values, minlength=m1)
    return total
