"""ComplementNB's normalising sums at every event of a batch, with forgetting.

With ``norm=True`` ComplementNB divides class ``y``'s weights by
``Σ_{w∈V} |log θ_{y,w}| = V log(T − T_y + αV) − G_y``, ``G_y = Σ_{w∈V} log(C_{y,w} + α)``
(``C_{y,w}``: the complement count, see :class:`~stream_nb.naive_bayes.ComplementNB`).
With forgetting, ``α`` is the smoothing constant in raw units, ``α_t = α / scale_t``,
which grows at every learned event, so every term of ``G_y`` changes at every event;
the per-event path recomputes the sums at each prediction after a learn (O(stored
counts) each). :func:`complement_log_sums` gives ``G_y`` before every event of a
batch in O(stored counts × P) per *segment* of the batch, not per event.

A segment starts at event ``s`` and holds the events whose ``α_t`` is within
``(1 + ρ) α_s`` (:data:`_RATIO`: a whole batch when the half-life is long next to
it). With ``u_w = C_{y,w} + α_s`` and ``x_t = (α_t − α_s) / α_s ≤ ρ``::

    log(C_{y,w} + α_t) = log u_w + Σ_{p≥1} (−1)^{p+1}/p · x_t^p (α_s / u_w)^p

(``α_s / u_w ≤ 1``, so :data:`_TERMS` terms leave less than 1e-19 per term). So
``G_y(t) = L_y(t) + Σ_p (−1)^{p+1}/p x_t^p Q_{y,p}(t)`` with ``L_y = Σ_w log u_w`` and
``Q_{y,p} = Σ_w (α_s / u_w)^p``, both computed at the segment's start and changed by
each learned entry (a learned weight ``s`` of class ``k`` raises ``C_{j,w}`` by ``s``
for every other class ``j``; a token new to the vocabulary adds its terms): prefix
sums over the segment's events. A segment of fewer than :data:`_DIRECT_EVENTS`
events (a half-life of a few events) sums the logarithms directly at each event.
"""

from __future__ import annotations

import numpy as np

__all__ = ["complement_log_sums"]

#: A segment's events have ``α_t ≤ (1 + _RATIO) α_s``.
_RATIO = 0.125
#: Terms of the series: ``_RATIO ** (_TERMS + 1) / (_TERMS + 1)`` is below 1e-19.
_TERMS = 19
#: A segment of fewer events sums the logarithms at each event (cheaper than the
#: series' ``_TERMS`` powers of every term).
_DIRECT_EVENTS = 4

_SIGNS = [(1.0 if p % 2 else -1.0) / p for p in range(1, _TERMS + 1)]


def complement_log_sums(
    start: np.ndarray,
    alpha: np.ndarray,
    vocabulary: np.ndarray,
    moves: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> np.ndarray:
    """``K × B``: ``G_y = Σ_{w∈V} log(C_{y,w} + α_t)`` before each event ``t`` of a batch.

    Parameters
    ----------
    start
        ``K × n``: the counts ``N_{y,w}`` of the vocabulary at the batch's start.
    alpha
        ``B``: ``α_t`` in raw units before each event (non-decreasing).
    vocabulary
        ``B``: the vocabulary's size before each event; the tokens the batch adds take
        the columns ``n, n + 1, …`` in the order they join it.
    moves
        ``(event, column, class, weight, complement, joins)`` of each learned entry, in
        event order: its weight ``s`` learned into ``(class, column)``, the complement
        counts ``C_{j,w}`` of every class before it (``K × moves``), and whether it
        brings its token into the vocabulary.
    """
    ev, col, k, step, comp, joins = moves
    n_classes = start.shape[0]
    b = len(alpha)
    width = max(start.shape[1], int(vocabulary.max(initial=0)), int(col.max(initial=-1)) + 1)
    counts = np.zeros((n_classes, width))
    counts[:, : start.shape[1]] = start
    n_w = np.zeros(width)
    for row in counts:  # (in class order, as the per-event path sums a token's row)
        n_w += row
    sizes = vocabulary.astype(np.intp)
    bounds = np.searchsorted(ev, np.arange(b + 1))  # each event's moves
    out = np.empty((n_classes, b))
    s = 0
    while s < b:
        e = int(np.searchsorted(alpha, alpha[s] * (1.0 + _RATIO), side="right"))
        e = min(max(e, s + 1), b)
        lo, hi = int(bounds[s]), int(bounds[e])
        if e - s < _DIRECT_EVENTS:
            for t in range(s, e):
                v = int(sizes[t])
                out[:, t] = np.log((n_w[:v] - counts[:, :v]) + alpha[t]).sum(axis=1)
                a, z = int(bounds[t]), int(bounds[t + 1])
                counts[k[a:z], col[a:z]] += step[a:z]  # (an event names a token once)
                n_w[col[a:z]] += step[a:z]
            s = e
            continue
        out[:, s:e] = _segment(
            (n_w, counts, int(sizes[s])),
            alpha[s:e],
            (ev[lo:hi] - s, k[lo:hi], step[lo:hi], comp[:, lo:hi], joins[lo:hi]),
            bounds[s : e + 1] - lo,
        )
        np.add.at(counts, (k[lo:hi], col[lo:hi]), step[lo:hi])
        np.add.at(n_w, col[lo:hi], step[lo:hi])
        s = e
    return out


def _segment(
    state: tuple[np.ndarray, np.ndarray, int],
    alpha: np.ndarray,
    moves: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    bounds: np.ndarray,
) -> np.ndarray:
    """``G`` at each event of one segment through the series (see the module docstring):
    ``state`` holds ``N_w``, the counts and the vocabulary's size at its start, ``moves``
    its learned entries (event within the segment, class, weight, complement counts
    before, joins) and ``bounds`` where each event's moves start."""
    n_w, counts, v = state
    _, k, step, comp, joins = moves
    n_classes = counts.shape[0]
    a0 = float(alpha[0])
    u = (n_w[:v] - counts[:, :v]) + a0  # K × V
    base = np.log(u).sum(axis=1)
    r = np.divide(a0, u, out=u)  # (α_s / u_w: u is not needed any more)
    x = (alpha - a0) / a0
    # the moves: u_old = C_{j,w} + α_s, u_new = u_old + s for every class j but their own
    own = k[None, :] == np.arange(n_classes)[:, None]
    u_old = comp + a0
    u_new = u_old + np.where(own, 0.0, step[None, :])
    d_log = np.where(joins[None, :], np.log(u_new), np.log1p(np.where(own, 0.0, step) / u_old))
    ends = bounds[:-1]  # the moves before each event: those before its first move

    def before_each_event(d: np.ndarray) -> np.ndarray:
        """``K × events``: the sum of ``d`` (``K × moves``) over the moves of earlier events."""
        total = np.zeros((n_classes, len(ends)))
        if d.shape[1]:
            running = np.cumsum(d, axis=1)
            taken = ends > 0
            total[:, taken] = running[:, ends[taken] - 1]
        return total

    out: np.ndarray = base[:, None] + before_each_event(d_log)
    r_new = a0 / u_new
    r_old = np.where(joins[None, :], 0.0, a0 / u_old)
    power, p_new, p_old = r.copy(), r_new.copy(), r_old.copy()
    xp = x.copy()
    for sign in _SIGNS:
        q = power.sum(axis=1)[:, None] + before_each_event(p_new - p_old)
        out += sign * xp[None, :] * q
        power *= r
        p_new *= r_new
        p_old *= r_old
        xp *= x
    return out
