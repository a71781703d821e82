"""Scores of known events from the dense block: every SPODE as one product of ratios.

For an event of known items (see :mod:`~stream_nb.seminaive._known`) the dense
block holds, for each parent item ``a`` and each of the event's slots, the count
``N(y, x_a, x_b)`` (item slots) or ``N(y, x_a, j)`` (column slots) of
``P̂(x_j | y, x_a) = (N(y, x_a, x_b) + α) / (N(y, x_a, j) + α S_j)``. One gather
of the event's ``2d × d`` cells (:meth:`DenseBlock.event` rows), the offsets
``α`` and ``α S_j`` and one division give every ratio; the parent's own cell
becomes its joint prior ``P̂(y, x_a) = (N(y, x_a) + α) / (N_i + α K S_i)`` by
writing that denominator in place of its own column (:func:`ratios`). The
product over the ``d`` cells of a parent is ``exp(SPODE_a(y))``, so AODE's
``Σ_a exp(SPODE_a(y))`` needs no logarithm at all, and SPODE's score is the log
of one product. (A complete block reads only the item slots: see
:func:`~stream_nb.seminaive._fast.spode_ratios`.)

Every ratio is at most 1 and at least ``f = α / (N + α K S_max)`` (all counts of
a cell are at most ``N``), so a product of ``L`` ratios stays at or above
:data:`TINY` (normal doubles, full relative precision) when ``f^L ≥ TINY``
(:func:`safe_length`). Events with more items than that multiply their ratios in
chunks of ``L`` and add the logarithms of the chunks (:func:`log_spodes`), and
AODE then mixes the SPODEs with a max-shifted log-sum-exp. With ``α = 1``, 10
classes and binary features, one product holds for 24 features up to
``N ≈ 10^12`` and for 100 features up to ``N ≈ 700``.

The same formulas score one event (``predict_proba_one`` and friends) and a
batch (the batch kernel, :func:`predict_learn_products`): the batch gathers each
event's cells as it comes, adds its weight to the counts of its class, and
scores all the gathered events at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from stream_nb.seminaive._dense import Bools, DenseBlock, Floats, Indices

__all__ = [
    "TINY",
    "log_spodes",
    "predict_learn_products",
    "ratios",
    "safe_length",
]

#: The smallest product of ratios formed (far above the smallest normal double, 2.2e-308).
TINY = 1e-290

_LOG_TINY = math.log(TINY)

#: Largest buffer of gathered cells the batch kernel holds at once (bytes).
BUFFER_BYTES = 2**20


def safe_length(block: DenseBlock, alpha: float, total: float) -> int:
    """How many ratios a product may hold without falling below :data:`TINY`, for total
    weight ``total`` and smoothing ``alpha`` (raw units; see the module docstring).

    Examples
    --------
    >>> block = DenseBlock(n_classes=10)
    >>> block.s_max = 2.0
    >>> safe_length(block, 1.0, 1e6), safe_length(block, 1.0, 1e12)
    (48, 24)
    """
    f = alpha / (total + alpha * block.n_classes * block.s_max)
    if f >= 1.0:
        return 1 << 30
    return max(1, int(_LOG_TINY / math.log(f)))


def ratios(gathered: Floats, prior: Floats) -> Floats:
    """Every ratio of the SPODEs of gathered events, in place: shape ``(..., d, d, K)``.

    ``gathered`` holds the counts plus offsets of events' cells, shape
    ``(..., 2d, d, K)`` (slots, then parents: :meth:`DenseBlock.event` rows);
    ``prior[..., p]`` is ``N_i + α K S_i`` of parent ``p``. Entry ``[..., j, p, k]``
    of the result is ``P̂(x_j | y_k, x_p)`` for ``j ≠ p`` and ``P̂(y_k, x_p)`` for ``j = p``.
    """
    d = gathered.shape[-2]
    num = gathered[..., :d, :, :]
    den = gathered[..., d:, :, :]
    own = np.arange(d)
    den[..., own, own, :] = prior[..., :, None]
    np.divide(num, den, out=num)
    return num


def log_spodes(ratio: Floats, length: int) -> Floats:
    """``SPODE_p(y)`` of every parent from :func:`ratios`, shape ``(..., d, K)``: the log of
    products of at most ``length`` ratios, added."""
    d = ratio.shape[-3]
    if d <= length:
        one: Floats = np.log(np.multiply.reduce(ratio, axis=-3))
        return one
    starts = np.arange(0, d, length)
    out: Floats = np.log(np.multiply.reduceat(ratio, starts, axis=-3)).sum(axis=-3)
    return out


def mix_logs(spodes: Floats) -> Floats:
    """``log Σ_p exp(spodes[..., p, k])`` over parents, max-shifted: shape ``(..., K)``."""
    top = spodes.max(axis=-2)
    out: Floats = top + np.log(np.exp(spodes - top[..., None, :]).sum(axis=-2))
    return out


def predict_learn_products(
    block: DenseBlock,
    items: Indices,
    ks: Sequence[int] | Indices,
    ws: Sequence[float] | Floats,
    length: int,
    parent_at: Indices | None = None,
    alphas: Floats | None = None,
    qualifies: Bools | None = None,
) -> Floats:
    """Score then learn, in turn, ``B`` events of ``d`` known items each (the batch kernel).

    ``items[t]`` are event ``t``'s items, ``ks[t]`` its class index (``-1``:
    predicted only) and ``ws[t]`` its weight in raw units; ``length`` is
    :func:`safe_length` for the whole batch; ``parent_at[t]`` (SPODE) the position
    of the super-parent in ``items[t]``; ``alphas[t]`` (forgetting) the α of event
    ``t`` in raw units (``None``: the block's, :meth:`DenseBlock.prepare`);
    ``qualifies[t, i]`` whether item ``i`` of event ``t`` is a parent (``None``:
    all; every event needs one). Returns each event's joint log-likelihood, shape
    ``(B, K)``: AODE's ``log Σ_p exp(SPODE_p(y))``, or SPODE's ``SPODE_p(y)``,
    from the counts of the events before it.

    Each event's cells are gathered from the counts, then its weight is added to
    those of its class (the counts one event at a time would hold, in the same
    order); the offsets, ratios and products of a chunk of gathered events are
    then taken at once. The item and column weights and ``N(y, i)`` are added in
    event order (``np.add.at``).
    """
    b, d = items.shape
    if d != len(block.feat) and block.complete:
        block.end_complete()
    n_classes = block.n_classes
    info = block.info[:, items]  # (5, B, d)
    k_of = np.array(ks, dtype=np.intp)
    w_of = np.array(ws, dtype=np.float64)
    learned = np.flatnonzero(k_of >= 0)
    columns = info[4]
    prior = _weight_before(block, columns, learned, w_of[learned])
    if alphas is None:
        prior += block.aks[columns]  # N_i + α K S_i
        units = None
    else:
        prior += (alphas * n_classes)[:, None] * block.s[columns]
        units = np.ones(len(block.offsets))  # the offset of each slot for α = 1: 1 or S_j
        units[block.vw.shape[0] :] = np.where(block.s > 0.0, block.s, 1.0)
    out = np.empty((b, n_classes))
    ks_list = k_of.tolist()
    ws_list = w_of.tolist()
    if parent_at is None and block.complete and block.lazy_columns:
        alpha_of = np.full(b, block.alpha) if alphas is None else alphas
        spodes = _complete_spodes(block, items, info, (ks_list, ws_list), (prior, alpha_of), length)
        if d <= length:
            if qualifies is not None:
                spodes *= qualifies[:, :, None]
            out[:] = np.log(spodes.sum(axis=1))
        else:
            if qualifies is not None:
                spodes[~qualifies] = -np.inf
            out[:] = mix_logs(spodes)
        _add_weights(block, info, learned, k_of[learned], w_of[learned])
        return out
    counts = block.counts_rows
    by_class = [counts[:, k] for k in range(n_classes)]
    take = counts.take
    offsets = block.offsets
    step = max(1, BUFFER_BYTES // (16 * d * d * n_classes))
    for t0 in range(0, b, step):
        t1 = min(b, t0 + step)
        n = t1 - t0
        slots = np.concatenate((info[0, t0:t1], info[1, t0:t1]), axis=1)  # (n, 2d)
        rows = slots[:, :, None] + items[t0:t1, None, :]  # (n, 2d, d)
        # the offset of each slot: α for items, α S_j for columns
        slot_of = np.concatenate((info[2, t0:t1], info[3, t0:t1]), axis=1)
        if units is None:
            shift = offsets.take(slot_of)
        else:
            shift = alphas[t0:t1, None] * units.take(slot_of)  # type: ignore[index]
        if parent_at is None:
            gathered = np.empty((n, 2 * d, d, n_classes))
            for cells, into, k, w in zip(
                rows, gathered, ks_list[t0:t1], ws_list[t0:t1], strict=True
            ):
                take(cells, axis=0, out=into, mode="clip")
                if k >= 0:
                    by_class[k][cells] = into[:, :, k] + w
            gathered += shift[:, :, None, None]
            ratio = ratios(gathered, prior[t0:t1])
            if d <= length:
                products = np.multiply.reduce(ratio, axis=1)  # (n, parents, K)
                if qualifies is not None:
                    products *= qualifies[t0:t1, :, None]
                out[t0:t1] = np.log(products.sum(axis=1))
            else:
                spodes = log_spodes(ratio, length)
                if qualifies is not None:
                    spodes[~qualifies[t0:t1]] = -np.inf
                out[t0:t1] = mix_logs(spodes)
        else:
            at = parent_at[t0:t1]
            own = np.arange(n)
            parent_rows = rows[own, :, at]  # (n, 2d): every slot with the parent
            picked = np.empty((n, 2 * d, n_classes))
            for t in range(t0, t1):
                take(parent_rows[t - t0], axis=0, out=picked[t - t0], mode="clip")
                k = ks_list[t]
                if k >= 0:
                    cells = rows[t - t0]
                    column = by_class[k]
                    column[cells] = column[cells] + ws_list[t]
            picked += shift[:, :, None]
            num = picked[:, :d]
            den = picked[:, d:]
            den[own, at] = prior[t0 + own, at][:, None]
            np.divide(num, den, out=num)
            out[t0:t1] = log_spodes(num[:, :, None], length)[:, 0]
    _add_weights(block, info, learned, k_of[learned], w_of[learned])
    return out


def _complete_spodes(
    block: DenseBlock,
    items: Indices,
    info: Indices,
    learning: tuple[list[int], list[float]],
    smoothing: tuple[Floats, Floats],
    length: int,
) -> Floats:
    """:func:`predict_learn_products` (AODE) in a complete block with lazy columns: each
    event's item cells alone are gathered and learned (its column cells are left to
    :meth:`DenseBlock.materialize`), and every denominator ``N(y, x_p) + α S_j``
    comes from the diagonal (as
    :func:`~stream_nb.seminaive._fast.spode_ratios`). Returns every
    ``SPODE_p(y)`` of every event, shape ``(B, d, K)``: the products themselves when
    ``d ≤ length``, else their logs.

    ``learning`` holds the class indices and raw weights, ``smoothing`` the
    ``N_i + α K S_i`` of every parent of every event and each event's α.
    """
    b, d = items.shape
    n_classes = block.n_classes
    ks_list, ws_list = learning
    prior, alpha_of = smoothing
    cells = block.cells
    by_class = [cells[:, k] for k in range(n_classes)]
    take = cells.take
    s_of = block.s[info[4]]  # (B, d): S_j of each item's feature
    step = max(1, BUFFER_BYTES // (8 * d * d * n_classes))
    spodes = np.empty((b, d, n_classes))
    for t0 in range(0, b, step):
        t1 = min(b, t0 + step)
        rows = info[0, t0:t1, :, None] + items[t0:t1, None, :]  # (n, child, parent)
        gathered = np.empty((t1 - t0, d, d, n_classes))
        for cells_t, into, k, w in zip(rows, gathered, ks_list[t0:t1], ws_list[t0:t1], strict=True):
            take(cells_t, axis=0, out=into, mode="clip")
            if k >= 0:
                by_class[k][cells_t] = into[:, :, k] + w
        alpha = alpha_of[t0:t1, None, None]
        gathered += alpha[:, :, :, None]
        diagonal = np.moveaxis(gathered.diagonal(axis1=1, axis2=2), 1, 2)  # N(y, x_p) + α
        extra = alpha * (s_of[t0:t1, :, None] - 1.0)  # α (S_j − 1), (n, d, 1)
        dens = diagonal[:, None, :, :] + extra[:, :, :, None]  # (n, child j, parent p, K)
        fix = diagonal + extra  # N(y, x_p) + α S_p: the parent's own child's denominator
        fix /= prior[t0:t1, :, None]
        np.divide(gathered, dens, out=gathered)
        if d <= length:
            spodes[t0:t1] = np.multiply.reduce(gathered, axis=1) * fix
        else:
            spodes[t0:t1] = log_spodes(gathered, length) + np.log(fix)
    block.leave_columns()
    return spodes


def _weight_before(block: DenseBlock, columns: Indices, learned: Indices, w_of: Floats) -> Floats:
    """``N_i`` of every parent of every event before it, shape ``(B, d)``: the column weight
    before the batch plus the weights of the learned events before each event, added in
    event order (a cumulative sum, as one event at a time)."""
    b, d = columns.shape
    fw = np.zeros((b + 1, block.fw.shape[0]))
    fw[0] = block.fw
    fw[np.repeat(learned + 1, d), columns[learned].ravel()] = np.repeat(w_of, d)
    np.cumsum(fw, axis=0, out=fw)
    before: Floats = fw[np.arange(b)[:, None], columns]
    return before


def _add_weights(
    block: DenseBlock, info: Indices, learned: Indices, k_of: Indices, w_of: Floats
) -> None:
    """Add the ``learned`` events to the item and column weights and ``N(y, i)``, in event
    order (``np.add.at`` adds in index order: the sums of one event at a time)."""
    if not len(learned):
        return
    d = info.shape[2]
    slots = np.concatenate((info[2, learned], info[3, learned]), axis=1)  # (n, 2d)
    np.add.at(block.weights, slots.ravel(), np.repeat(w_of, 2 * d))
    at = info[4, learned] * block.n_classes + k_of[:, None]
    np.add.at(block.fy_flat, at.ravel(), np.repeat(w_of, d))
