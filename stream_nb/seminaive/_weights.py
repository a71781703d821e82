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

__all__ = ["smoothed_mutual_information"]


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
