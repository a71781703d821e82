"""``I(X_i; X_j | Y)`` of every pair of features straight from a dense block.

The same quantity as
:meth:`~stream_nb.seminaive._store.PairStore.conditional_mutual_information`
over the sparse view (whose nodes are the block's nonzero ``ctx`` cells and
rows), computed with array operations per pair of columns instead of
dictionaries: a structure rebuild of TAN or KDB costs ``O(F²)`` numpy calls.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

import numpy as np

from stream_nb.seminaive._dense import DenseBlock

__all__ = ["dense_conditional_mutual_information"]


def dense_conditional_mutual_information(
    block: DenseBlock,
    order: Mapping[Hashable, int],
    total: float,
    scale: float,
    threshold: Callable[[int, float], bool] | None,
) -> dict[tuple[Hashable, Hashable], float]:
    """``I(X_i; X_j | Y)`` keyed ``(i, j)`` with ``order[i] < order[j]`` (see the module
    docstring); ``threshold(df, G)`` (``None``: every pair) says whether a pair's G statistic
    ``G = 2 g × scale`` with ``df`` degrees of freedom is significant; pairs that
    are not are left out.

    Examples
    --------
    >>> from stream_nb.seminaive._store import PairStore
    >>> store = PairStore(None, True)
    >>> for y, a, b in [("p", "u", "u"), ("p", "v", "v"), ("q", "u", "v"), ("q", "v", "u")]:
    ...     if y not in store.classes:
    ...         store.add_class(y)
    ...     store.learn([("a", a), ("b", b)], y, 1.0)
    >>> block = store.dense
    >>> cmi = dense_conditional_mutual_information(block, {"a": 0, "b": 1}, 4.0, 1.0, None)
    >>> round(cmi[("a", "b")], 6)
    0.693147
    """
    n = len(block.index)
    out: dict[tuple[Hashable, Hashable], float] = {}
    if not n or total <= 0:
        return out
    col_of = block.col_of[1 : n + 1]
    ctx = block.ctx[1 : n + 1]
    pair = block.pair[1 : n + 1, 1 : n + 1]
    ctx_seen = (ctx != 0.0).any(axis=2)
    pair_seen = (pair != 0.0).any(axis=2)
    features = sorted(block.feat, key=order.__getitem__)
    members = {f: np.flatnonzero(col_of == block.feat[f]) for f in features}
    for x, i in enumerate(features):
        for j in features[x + 1 :]:
            cj = block.feat[j]
            a = members[i][ctx_seen[members[i], cj]]
            if not len(a):
                continue
            b = members[j]
            rows = pair[a][:, b]  # (|a|, |b|, K)
            parent = ctx[a, cj]  # (|a|, K)
            t_y = parent.sum(axis=0)
            col = rows.sum(axis=0)  # (|b|, K)
            seen = rows > 0.0
            if seen.any():
                at = np.nonzero(seen)
                counts = rows[at]
                logs = np.log(counts) + np.log(t_y[at[2]])
                logs -= np.log(parent[at[0], at[2]]) + np.log(col[at[1], at[2]])
                g = float(counts @ logs)
            else:
                g = 0.0
            if threshold is not None:
                df = int((t_y > 0.0).sum()) * (len(a) - 1)
                df *= int(pair_seen[a][:, b].any(axis=0).sum()) - 1
                if df == 0 or not threshold(df, 2.0 * g * scale):
                    continue
            out[(i, j)] = g / total
    return out
