"""The Gaussian term of a numeric feature still in its discretiser's warm-up.

Until its cut points freeze, a numeric feature has no bins, so it has no counts
and no place in the SPODEs or trees. With ``warmup_terms="gaussian"`` it still
contributes, as a child conditionally independent of every other feature given
the class (never a parent), the per-class Gaussian log-density

``log N(x_f; μ_y, σ²_y) = −½ log(2π σ²_y) − (x_f − μ_y)² / (2 σ²_y)``,

added to every class score (the same in every SPODE of AODE, so it is added
after mixing). The statistics are those of the events buffered for the
feature's replay (every learned event with a finite value of ``f``: value
``x_e``, class ``y_e``, true weight ``w_e`` = raw weight × the forgetting scale),
so they need no state of their own and merge, forget and round-trip with that
buffer:

* over all classes: ``W = Σ w_e``, ``μ = Σ w_e x_e / W``,
  ``v = Σ w_e (x_e − μ)² / W``;
* per class (events of class ``y`` only): ``W_y``, ``m_y``, ``v_y`` likewise;
* shrunk towards the pooled values by one pseudo-event:
  ``μ_y = (W_y m_y + μ) / (W_y + 1)``, ``σ²_y = (W_y v_y + v) / (W_y + 1)``.

No term when ``W = 0`` or ``v = 0`` (one distinct value so far tells nothing),
or when the term is not finite for some class (a value so far out that its
squared distance overflows). Once the cut points freeze the buffered values are
replayed into the counts and the term is gone: the model is then exactly the
one without the term.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["WARMUP_TERMS", "gaussian_terms", "weighted_gaussian_terms"]

#: The values of the ``warmup_terms`` parameter.
WARMUP_TERMS = ("gaussian", "none")

_LOG_2PI = math.log(2.0 * math.pi)


def gaussian_terms(
    pending: Iterable[Sequence[Any]],
    values: Mapping[Hashable, float],
    classes: Sequence[Hashable],
    scale: float,
) -> list[float] | None:
    """``Σ_f log N(x_f; μ_y, σ²_y)`` by class (in ``classes`` order) over the warming
    features ``values`` (feature -> the event's finite value), from the buffered events
    ``pending`` (``[items, {feature: raw value}, y, raw w]``); ``None``: no term.

    Examples
    --------
    >>> pending = [[[], {"t": 1.0}, "a", 1.0], [[], {"t": 3.0}, "a", 1.0],
    ...            [[], {"t": 10.0}, "b", 1.0]]
    >>> terms = gaussian_terms(pending, {"t": 2.0}, ["a", "b"], 1.0)
    >>> [round(v, 4) for v in terms]
    [-1.8531, -3.8331]
    >>> gaussian_terms(pending, {"t": 2.0, "u": 5.0}, ["a", "b"], 1.0) == terms  # u: no data
    True
    """
    by_feature: dict[Hashable, list[tuple[float, Hashable, float]]] = {f: [] for f in values}
    for entry in pending:
        raw, y, w = entry[1], entry[2], entry[3] * scale
        for f, v in raw.items():
            found = by_feature.get(f)
            if found is not None:
                found.append((float(v), y, w))
    out: list[float] | None = None
    for f, x in values.items():
        terms = _feature_terms(by_feature[f], x, classes)
        if terms is not None:
            out = terms if out is None else [a + b for a, b in zip(out, terms, strict=True)]
    return out


def weighted_gaussian_terms(
    pending: Iterable[Sequence[Any]],
    values: Mapping[Hashable, float],
    classes: Sequence[Hashable],
    scale: float,
    weights: Mapping[Hashable, float],
) -> list[float] | None:
    """``Σ_f w_f log N(x_f; μ_y, σ²_y)``: :func:`gaussian_terms` with each feature's term
    times its weight ``w_f = weights.get(f, 1)`` (``feature_weights``; weight 0: no term).

    Examples
    --------
    >>> pending = [[[], {"t": 1.0}, "a", 1.0], [[], {"t": 3.0}, "a", 1.0],
    ...            [[], {"t": 10.0}, "b", 1.0]]
    >>> [round(v, 4) for v in weighted_gaussian_terms(pending, {"t": 2.0}, ["a", "b"], 1.0,
    ...                                                {"t": 0.5})]
    [-0.9266, -1.9166]
    >>> weighted_gaussian_terms(pending, {"t": 2.0}, ["a", "b"], 1.0, {"t": 0.0}) is None
    True
    """
    pending = list(pending)
    out: list[float] | None = None
    for f, x in values.items():
        w = weights.get(f, 1.0)
        if w == 0.0:
            continue
        terms = gaussian_terms(pending, {f: x}, classes, scale)
        if terms is not None:
            terms = [w * t for t in terms]
            out = terms if out is None else [a + b for a, b in zip(out, terms, strict=True)]
    return out


def _moments(data: Sequence[tuple[float, Hashable, float]]) -> tuple[float, float, float]:
    """``(W, mean, variance)`` of weighted values (``W = 0``: ``(0, 0, 0)``)."""
    total = sum(w for _x, _y, w in data)
    if total <= 0.0:
        return 0.0, 0.0, 0.0
    mean = sum(w * x for x, _y, w in data) / total
    return total, mean, sum(w * (x - mean) * (x - mean) for x, _y, w in data) / total


def _feature_terms(
    data: list[tuple[float, Hashable, float]], x: float, classes: Sequence[Hashable]
) -> list[float] | None:
    total, mean, var = _moments(data)
    if total <= 0.0 or not var > 0.0:
        return None
    out = []
    for y in classes:
        w_y, m_y, v_y = _moments([d for d in data if d[1] == y])
        mu = (w_y * m_y + mean) / (w_y + 1.0)
        sigma2 = (w_y * v_y + var) / (w_y + 1.0)
        d = x - mu
        term = -0.5 * (_LOG_2PI + math.log(sigma2)) - d * d / (2.0 * sigma2)
        if not math.isfinite(term):
            return None
        out.append(term)
    return out
