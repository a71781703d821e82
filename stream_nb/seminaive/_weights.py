"""The SPODE weights of weighted AODE (Jiang & Zhang 2006): ``W_i = I(X_i; Y)``.

The mutual information is that of the joint distribution SPODE ``i`` itself uses
as its prior, ``P̂(y, x_i) = (N(y, x_i) + α) / (N_i + α K S_i)`` over the
``S_i × K`` cells of feature ``i``'s learned values and the classes, with its own
marginals ``P̂(x_i) = Σ_y P̂(y, x_i)`` and ``P̂(y) = Σ_{x_i} P̂(y, x_i)``:

``I(X_i; Y) = Σ_{x_i, y} P̂(y, x_i) log(P̂(y, x_i) / (P̂(x_i) P̂(y)))``,

in nats, with ``0 log 0 = 0`` (only with ``α = 0``). Being the mutual information
of a distribution it is never negative, and it is 0 when the feature tells
nothing about the class (one class learned, one value, or counts proportional).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np

from stream_nb.seminaive._dense import DenseBlock, Floats

__all__ = ["dense_mutual_information", "smoothed_mutual_information"]


def smoothed_mutual_information(
    counts: Mapping[Hashable, Mapping[Hashable, float]],
    classes: list[Hashable],
    n_feature: float,
    alpha: float,
) -> float:
    """``I(X_i; Y)`` of ``P̂(y, x_i)`` (see the module docstring).

    ``counts[v][y] = N(y, x_i = v)``, ``classes`` every class learned (``K``),
    ``n_feature = N_i`` and ``alpha`` α, all in the same (raw) units.

    Examples
    --------
    >>> counts = {"u": {"a": 3.0}, "v": {"b": 3.0}}
    >>> round(smoothed_mutual_information(counts, ["a", "b"], 6.0, 0.0), 6)  # log 2
    0.693147
    >>> round(smoothed_mutual_information(counts, ["a", "b"], 6.0, 1.0), 6)
    0.192745
    >>> smoothed_mutual_information({"u": {"a": 2.0}}, ["a"], 2.0, 1.0)
    0.0
    """
    rows = [[by_class.get(y, 0.0) for y in classes] for by_class in counts.values()]
    if len(rows) < 2 or len(classes) < 2:
        return 0.0
    joint = np.array(rows)
    joint += alpha
    joint /= n_feature + alpha * joint.size
    p_value = joint.sum(axis=1, keepdims=True)
    p_class = joint.sum(axis=0, keepdims=True)
    seen = joint > 0.0
    cells = joint[seen]
    ratio = cells / (p_value * p_class)[seen]
    return max(0.0, float(cells @ np.log(ratio)))


def dense_mutual_information(block: DenseBlock, alpha: float) -> Floats:
    """:func:`smoothed_mutual_information` of every pair feature of a dense block at once,
    by column (``alpha`` in raw units): from its diagonal ``N(y, x_i)``, ``N_i`` and
    ``S_i``, in a few array operations.

    Examples
    --------
    >>> block = DenseBlock(n_classes=2)
    >>> for items, k in [([("a", "u"), ("b", "x")], 0), ([("a", "v"), ("b", "x")], 1)] * 3:
    ...     _ = block.learn(items, {"a": None, "b": None}, k, 1.0)
    >>> dense_mutual_information(block, 0.0).round(6).tolist()  # a tells the class, b does not
    [0.693147, 0.0]
    >>> round(float(dense_mutual_information(block, 1.0)[0]), 6)
    0.192745
    """
    n = len(block.index)
    n_columns = len(block.feat)
    items = np.arange(1, n + 1)
    col = block.col_of[items]
    n_classes = block.n_classes
    joint = block.diagonal(items) + alpha  # (items, K): N(y, x_i) + α
    joint /= (block.fw[col] + (alpha * n_classes) * block.s[col])[:, None]
    p_value = joint.sum(axis=1)
    p_class = np.zeros((n_columns, n_classes))
    np.add.at(p_class, col, joint)
    seen = joint > 0.0
    terms = np.zeros_like(joint)
    expected = p_value[:, None] * p_class[col]
    np.log(joint / np.where(seen, expected, 1.0), out=terms, where=seen)
    terms *= joint
    out = np.zeros(n_columns)
    np.add.at(out, col, terms.sum(axis=1))
    out[block.s[:n_columns] < 2] = 0.0  # one value: no information (as the dict version)
    if n_classes < 2:
        out[:] = 0.0
    np.maximum(out, 0.0, out=out)
    result: Floats = out
    return result
