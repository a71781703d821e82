"""Whole runs of uniform known events for the batch kernel of TAN and KDB.

Between two structure rebuilds, a run of events whose items fill the same
columns in the same order (no missing value) has, at every position, the
same kind of term: a pair term with the item at a fixed parent position, or
the Naive Bayes term. Each term reads one or two rows of the dense block's
counts, ``counts[slot, parent]``; an earlier event of the run added to such
a row exactly when its own query at that position names the same row. So
the counts each event sees are the counts before the run plus an exclusive
prefix sum of the earlier events' weights grouped by row
(:func:`grouped_prefix`), and the run is scored with a few array operations
(:func:`run_scores`), then learned in event order (:func:`learn_run`).
"""

from __future__ import annotations

import numpy as np

from stream_nb.seminaive._dense import DenseBlock, Floats, Indices

__all__ = ["grouped_prefix", "learn_run", "run_scores"]


def grouped_prefix(keys: Indices, values: Floats) -> Floats:
    """For each row ``t``: the sum of ``values[s]`` over ``s < t`` with ``keys[s] == keys[t]``.

    Examples
    --------
    >>> keys = np.array([3, 1, 3, 3, 1])
    >>> grouped_prefix(keys, np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])).ravel().tolist()
    [0.0, 0.0, 1.0, 5.0, 2.0]
    """
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    ordered = values[order]
    before = np.zeros_like(ordered)
    np.cumsum(ordered[:-1], axis=0, out=before[1:])
    starts = np.empty(len(keys), dtype=bool)
    starts[0] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=starts[1:])
    group = np.cumsum(starts) - 1
    before -= before[np.flatnonzero(starts)][group]
    out = np.empty_like(before)
    out[order] = before
    return out


def run_scores(
    block: DenseBlock,
    items: Indices,
    parent_at: Indices,
    weights: Floats,
    alpha: float,
) -> Floats:
    """The terms of a run of events, each from the counts of the events before it.

    ``items[t]`` are event ``t``'s items, the same columns at every position;
    ``parent_at[i]`` is the position of the parent of position ``i`` (``-1``:
    the Naive Bayes term); ``weights[t, k]`` is event ``t``'s weight in its
    class's entry (zeros: predicted only). Returns, shape ``(B, K)``, the sum
    over positions of ``log((N(y, x_p, x_i) + α) / (N(y, x_p, i) + α S_i))``
    and, for Naive Bayes positions, ``log(N(y, x_i) + α)`` (the caller
    subtracts ``log(N(y, i) + α S_i)``).
    """
    n, d = items.shape
    n_items = block.vw.shape[0]
    pair = np.flatnonzero(parent_at >= 0)
    parents = np.where(parent_at >= 0, parent_at, np.arange(d))
    columns = block.col_of[items[0]]
    queries = np.empty((n, d + len(pair)), dtype=np.intp)
    np.multiply(items, n_items, out=queries[:, :d])
    queries[:, :d] += items[:, parents]
    queries[:, d:] = (columns[pair] + n_items) * n_items
    queries[:, d:] += items[:, parent_at[pair]]
    m = queries.shape[1]
    keys = queries.reshape(-1)
    counts = block.counts_rows.take(keys, axis=0)
    counts += grouped_prefix(keys, np.repeat(weights, m, axis=0))
    offsets = np.full(m, alpha)
    offsets[d:] = alpha * block.s[columns[pair]]
    cube = counts.reshape(n, m, -1)
    cube += offsets[:, None]
    np.log(cube, out=cube)
    sign = np.ones(m)
    sign[d:] = -1.0
    out: Floats = np.einsum("tmk,m->tk", cube, sign)
    return out


def learn_run(block: DenseBlock, items: Indices, ks: Indices, ws: Floats) -> None:
    """Add the learned events of a run (``ks[t] >= 0``) to the block's counts, in event
    order, as :meth:`DenseBlock.learn_known` one at a time would."""
    learned = ks >= 0
    items, ks, ws = items[learned], ks[learned], ws[learned]
    if not len(items):
        return
    n, d = items.shape
    if d != len(block.feat) and block.complete:
        block.end_complete()
    n_items = block.vw.shape[0]
    n_classes = block.n_classes
    slots = block.slots[:, items].transpose(1, 0, 2).reshape(n, 2 * d)  # (n, 2d)
    cells = (slots[:, :, None] * n_items + items[:, None, :]) * n_classes + ks[:, None, None]
    np.add.at(block.counts_flat, cells.reshape(-1), np.repeat(ws, 2 * d * d))
    np.add.at(block.weights, slots.reshape(-1), np.repeat(ws, 2 * d))
    columns = slots[:, d:] - n_items
    np.add.at(block.fy_flat, (columns * n_classes + ks[:, None]).reshape(-1), np.repeat(ws, d))
