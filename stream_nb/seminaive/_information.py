"""Mutual information of the pair store: ``I(X_i; Y)``, ``I(X_i; X_j | Y)`` and the
rankings SPODE, TAN and KDB choose their parents by.

``I(X_i; X_j | Y)`` is read from the sparse view of
:class:`~stream_nb.seminaive._store.PairStore` (one pass over the stored pair
counts), or, while the store is dense, straight from its block with array
operations per pair of columns instead of dictionaries
(:func:`dense_conditional_mutual_information`): a structure rebuild of TAN or KDB
then costs ``O(F²)`` numpy calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from stream_nb.seminaive._dense import DenseBlock
from stream_nb.seminaive._nodes import Node

if TYPE_CHECKING:
    from stream_nb.seminaive._store import PairStore

__all__ = [
    "canonical",
    "chi2_quantile",
    "class_mutual_information",
    "conditional_mutual_information",
    "dense_conditional_mutual_information",
    "feature_order",
    "log_product_ratio",
    "ranked",
]

_log = math.log


def class_mutual_information(store: PairStore) -> dict[Hashable, float]:
    """``I(X_i; Y)`` for every learned feature (maximum likelihood, nats).

    Absence counts as no information: each term is weighted by
    ``N(y, x_i) / N`` over all events, so rarely present features rank low.
    """
    categorical = store.categorical
    total = categorical.total_weight
    out: dict[Hashable, float] = {}
    for f, values in categorical.counts.items():
        n_f = store.feature_weight[f]
        by_class = categorical.present[f]
        vw = store.value_weight[f]
        mi = 0.0
        for v, vc in values.items():
            nv = vw[v]
            for y, n in vc.items():
                if n > 0.0:
                    mi += n * log_product_ratio(n, n_f, by_class[y], nv)
        out[f] = mi / total if total > 0 else 0.0
    return out


def feature_order(store: PairStore) -> dict[Hashable, int]:
    """Position of each learned feature in learning order (keys ``(i, j)`` of
    :func:`conditional_mutual_information` have ``i`` first)."""
    return {f: k for k, f in enumerate(store.categorical.counts)}


def ranked(store: PairStore, features: Iterable[Hashable] | None = None) -> list[Hashable]:
    """``features`` (default: every learned one) by ``I(X_i; Y)``, largest first; ties
    by name (:func:`canonical`), never by learning order."""
    mi = class_mutual_information(store)
    return sorted(mi if features is None else features, key=lambda f: (-mi[f], canonical(f)))


def conditional_mutual_information(
    store: PairStore, scale: float = 1.0, z: float | None = None
) -> dict[tuple[Hashable, Hashable], float]:
    """``I(X_i; X_j | Y)`` for every pair seen together, keyed ``(i, j)`` in learning order.

    ``Σ N(y, x_i, x_j)/N · log(N(y, x_i, x_j) N_ij(y) / (N(y, x_i, j) N(y, i, x_j)))``
    with the marginals taken over the events where both are present
    (maximum likelihood, Friedman, Geiger & Goldszmidt 1997). Cost: one pass
    over the stored pair counts, O(pairs × values² × classes).

    Parameters
    ----------
    scale
        The learner's global scale (raw × scale = true weight), for the test below.
    z
        If given, pairs whose G statistic ``2 Σ n log(…)`` (true weights) is
        below the upper ``z``-σ quantile of χ² with
        ``df = K (S_i − 1)(S_j − 1)`` (Wilson–Hilferty approximation) are
        left out: their dependence is indistinguishable from sampling noise.
    """
    order = feature_order(store)
    if store.dense is not None:
        significant = None
        if z is not None:
            z_ = z

            def significant(df: int, g: float) -> bool:
                return g > chi2_quantile(df, z_)

        total_weight = store.categorical.total_weight
        return dense_conditional_mutual_information(
            store.dense, order, total_weight, scale, significant
        )
    # (i, j) -> list of the nodes of every v_i
    tables: dict[tuple[Hashable, Hashable], list[Node]] = {}
    for (i, _vi), sub in store.pairs.items():
        oi = order[i]
        for j, node in sub.items():
            if oi < order[j]:
                tables.setdefault((i, j), []).append(node)
    total = store.categorical.total_weight
    out: dict[tuple[Hashable, Hashable], float] = {}
    if total <= 0:
        return out
    n_classes = len(store.classes)
    for key, nodes in tables.items():
        t_y = [0.0] * n_classes
        col: dict[Hashable, list[float]] = {}
        for ctx, values in nodes:
            t_y = [a + b for a, b in zip(t_y, ctx, strict=True)]
            for vj, row in values.items():
                c = col.get(vj)
                col[vj] = row.copy() if c is None else [a + b for a, b in zip(c, row, strict=True)]
        g = 0.0
        for ctx, values in nodes:
            for vj, row in values.items():
                c = col[vj]
                for k, n in enumerate(row):
                    if n > 0.0:
                        g += n * log_product_ratio(n, t_y[k], ctx[k], c[k])
        if z is not None:
            df = sum(t > 0.0 for t in t_y) * (len(nodes) - 1) * (len(col) - 1)
            if df == 0 or 2.0 * g * scale <= chi2_quantile(df, z):
                continue
        out[key] = g / total
    return out


def log_product_ratio(a: float, b: float, c: float, d: float) -> float:
    """``log(a·b / (c·d))`` for positive weights, also where a product leaves the double
    range (weights decayed towards 0 by forgetting): then as a sum of logarithms.

    The term of every mutual information here and in :mod:`stream_nb.informative`.

    Examples
    --------
    >>> log_product_ratio(2.0, 3.0, 1.0, 6.0)
    0.0
    >>> round(log_product_ratio(1e-200, 1e-200, 1e-250, 1e-250), 4)  # c·d underflows to 0
    230.2585
    """
    den = c * d
    if den > 0.0:
        r = a * b / den
        if 0.0 < r < math.inf:
            return _log(r)
    return _log(a) + _log(b) - _log(c) - _log(d)


def chi2_quantile(df: int, z: float) -> float:
    """Upper quantile of χ² with ``df`` degrees of freedom at ``z`` standard deviations.

    Wilson & Hilferty (1931): ``(χ²/df)^(1/3)`` is close to normal with mean
    ``1 − 2/(9 df)`` and variance ``2/(9 df)``.

    Examples
    --------
    >>> round(chi2_quantile(10, 3.09), 1)  # exact 0.999 quantile: 29.59
    29.8
    """
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + z * math.sqrt(c)) ** 3


def canonical(feature: Hashable) -> tuple[str, str]:
    """A sort key for feature names that does not depend on the order they were learned in."""
    return (type(feature).__name__, repr(feature))


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
