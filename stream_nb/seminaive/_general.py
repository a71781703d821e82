"""Scores of encoded events from a dense block: the general path of the semi-naive learners.

Events that are not *known* (see :mod:`~stream_nb.seminaive._known`: a value
the block does not hold, a number still warming up, forgetting with weighted
scores, …) are encoded first; these functions then read the block's counts for
their items (``0``: a value never learned, all-zero counts).
"""

from __future__ import annotations

import numpy as np

from stream_nb.seminaive._dense import DenseBlock, Floats, Indices

__all__ = ["pair_terms", "spode_scores", "weighted_spode_scores"]


def pair_terms(block: DenseBlock, at: list[tuple[int, int, int, float]], a: float) -> Floats:
    """``Σ log((N(y, x_i, x_j) + α) / (N(y, x_i, j) + α S_j))`` by class, shape ``(K,)``.

    ``at`` lists ``(parent item, child item, child column, α S_j)``; item
    ``0`` (never learned) has zero counts.
    """
    arr = np.array(at)
    pi = arr[:, 0].astype(np.intp)
    d = block.vw.shape[0]
    rows = block.counts_rows
    num = rows.take(arr[:, 1].astype(np.intp) * d + pi, axis=0)
    num += a
    den = rows.take((arr[:, 2].astype(np.intp) + d) * d + pi, axis=0)
    den += arr[:, 3:4]
    num /= den
    out: Floats = block.vectors(len(at))[1] @ np.log(num)
    return out


def spode_scores(
    block: DenseBlock, idx: Indices, cols: Indices, parents: Indices, a: float
) -> Floats:
    """``SPODE_i(y)`` for each parent position, shape ``(len(parents), K)``.

    ``log P̂(y, x_i) + Σ_{j ≠ i} log P̂(x_j | y, x_i)`` with
    ``P̂(y, x_i) = (N(y, x_i) + α) / (N_i + α K S_i)`` and
    ``P̂(x_j | y, x_i) = (N(y, x_i, x_j) + α) / (N(y, x_i, j) + α S_j)``;
    ``idx``/``cols`` are the children, ``parents`` positions in them, ``α``
    in raw units. The ratios form a ``(parents, children, K)`` array whose
    parent-as-own-child cell holds ``P̂(y, x_i)`` instead, so one log and
    one sum over children (a matrix product with ones) give every score.
    """
    s = block.s
    if len(parents) == len(idx):  # every child is a parent (parents = arange)
        pi, pc = idx, cols
    else:
        pi, pc = idx[parents], cols[parents]
    ratio, den = _pair_counts(block, idx, cols, pi, a)
    # the parent's own cell: (N(y, x_i) + α) / (N_i + α K S_i) = P̂(y, x_i)
    den[block.vectors(len(pi))[0], parents] = (block.fw[pc] + (a * block.n_classes) * s[pc])[
        :, None
    ]
    ratio /= den
    ones = block.vectors(len(idx))[1]
    out: Floats = ones @ np.log(ratio)
    return out


def weighted_spode_scores(
    block: DenseBlock,
    idx: Indices,
    cols: Indices,
    parents: Indices,
    a: float,
    weights: Floats,
    with_parent: Floats,
) -> Floats:
    """:func:`spode_scores` with ``feature_weights``, shape ``(len(parents), K)``:
    ``log P̂_i(y) + Σ_j w_j log P̂(x_j | y, x_i)``, the parent's own cell holding
    ``P̂(x_i | y) = (N(y, x_i) + α) / (N_i(y) + α S_i)`` and
    ``P̂_i(y) = (N_i(y) + α S_i) / (N_i + α K S_i)``
    (:mod:`stream_nb.seminaive._feature_weights`).

    ``weights`` are the children's ``w_j`` (all positive: weight-0 features are
    left out of ``idx``), ``with_parent[p]`` the ``N_i(y)`` of parent ``p``
    by class; ``α > 0`` in raw units.

    Examples
    --------
    >>> import numpy as np
    >>> b = DenseBlock(n_classes=2)
    >>> for items, k in [([("a", "u"), ("b", "x")], 0), ([("a", "v"), ("b", "x")], 1)]:
    ...     _ = b.learn(items, {"a": None, "b": None}, k, 1.0)
    >>> idx, cols = b.children([("a", "u"), ("b", "x")])
    >>> ones = weighted_spode_scores(b, idx, cols, np.array([0]), 1.0, np.ones(2),
    ...                                np.array([[1.0, 1.0]]))
    >>> bool(np.allclose(ones, spode_scores(b, idx, cols, np.array([0]), 1.0)))
    True
    """
    s = block.s
    pi, pc = idx[parents], cols[parents]
    ratio, den = _pair_counts(block, idx, cols, pi, a)
    own = with_parent + (a * s[pc])[:, None]  # N_i(y) + α S_i
    den[block.vectors(len(pi))[0], parents] = own
    ratio /= den
    out: Floats = weights @ np.log(ratio)
    out += np.log(own / (block.fw[pc] + (a * block.n_classes) * s[pc])[:, None])
    return out


def _pair_counts(
    block: DenseBlock, idx: Indices, cols: Indices, pi: Indices, a: float
) -> tuple[Floats, Floats]:
    """``N(y, x_i, x_j) + α`` and ``N(y, x_i, j) + α S_j`` of every parent item ``pi``
    (rows) and child item ``idx`` of column ``cols`` (columns), ``(parents, children, K)``
    each, both new arrays."""
    d = block.vw.shape[0]
    rows = block.counts_rows
    ratio = rows.take(idx * d + pi[:, None], axis=0)
    ratio += a
    den = rows.take((cols + d) * d + pi[:, None], axis=0)
    den += (a * block.s[cols])[:, None]
    return ratio, den
