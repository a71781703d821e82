"""Weighted Welford statistics with a Chan merge, and the Gaussian log-density.

Everything here works in the *raw units* of :mod:`stream_nb.base`: a weight
``n`` and a sum of squared deviations ``M2`` scale with the global forgetting
scale, a mean does not. Ratios (``M2 / n``) are therefore scale-free.

Formulas (weight ``w`` added to ``(n, mean, M2)``; West 1979)::

    n'    = n + w
    d     = x - mean
    mean' = mean + d · (w / n')
    M2'   = M2 + w · d · (x - mean')

Chan et al. (1979) merge of ``(n_a, m_a, M2_a)`` and ``(n_b, m_b, M2_b)``::

    n  = n_a + n_b
    δ  = m_b - m_a
    m  = m_a + δ · n_b / n
    M2 = M2_a + M2_b + δ² · n_a · n_b / n

The learners keep these statistics in flat lists for speed and call the
functions below only off the hot path; :class:`Welford` is the same thing as
a small object for code that needs one statistic at a time.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "LOG_2PI",
    "Welford",
    "chan_merge",
    "gaussian_log_density",
    "welford_add",
]

#: log(2π), the constant of the Gaussian log-density.
LOG_2PI = math.log(2.0 * math.pi)

_log = math.log


def welford_add(
    n: float, mean: float, m2: float, x: float, w: float = 1.0
) -> tuple[float, float, float]:
    """Add value ``x`` with weight ``w > 0`` to ``(n, mean, M2)``.

    Examples
    --------
    >>> s = (0.0, 0.0, 0.0)
    >>> for v in (1.0, 2.0, 3.0, 4.0):
    ...     s = welford_add(*s, v)
    >>> s
    (4.0, 2.5, 5.0)
    """
    n += w
    d = x - mean
    mean += d * (w / n)  # w/n first: the first value is kept exactly
    return n, mean, m2 + w * d * (x - mean)


def chan_merge(
    n_a: float, mean_a: float, m2_a: float, n_b: float, mean_b: float, m2_b: float
) -> tuple[float, float, float]:
    """Combine two Welford statistics (Chan's parallel formula).

    Either side may be empty (``n = 0``).

    Examples
    --------
    >>> a = welford_add(*welford_add(0.0, 0.0, 0.0, 1.0), 2.0)
    >>> b = welford_add(*welford_add(0.0, 0.0, 0.0, 3.0), 4.0)
    >>> chan_merge(*a, *b)
    (4.0, 2.5, 5.0)
    """
    if n_b == 0.0:
        return n_a, mean_a, m2_a
    if n_a == 0.0:
        return n_b, mean_b, m2_b
    n = n_a + n_b
    delta = mean_b - mean_a
    between = delta * delta * n_a * n_b / n
    if between == math.inf:  # δ²·n_a·n_b past the double range, δ²·n_a·n_b/n within it
        between = delta * delta * (n_a / n) * n_b
    return n, mean_a + delta * n_b / n, m2_a + m2_b + between


def gaussian_log_density(x: float, mean: float, var: float) -> float:
    """``log N(x; mean, var) = -½ (log(2π var) + (x - mean)² / var)``, analytically.

    Never the log of a (possibly underflowed) density: far tails stay finite.

    Examples
    --------
    >>> round(gaussian_log_density(0.0, 0.0, 1.0), 6)
    -0.918939
    >>> gaussian_log_density(1e6, 0.0, 1.0) > -math.inf
    True
    """
    d = x - mean
    return -0.5 * (LOG_2PI + _log(var) + d * d / var)


class Welford:
    """Weighted running mean and variance of one variable, mergeable.

    Parameters
    ----------
    n, mean, m2
        Initial statistics (weight, mean, sum of weighted squared deviations).

    Examples
    --------
    >>> a, b = Welford(), Welford()
    >>> for v in (1.0, 2.0):
    ...     a.update(v)
    >>> b.update(3.0, w=2.0)
    >>> a.merge(b).mean, a.variance
    (2.25, 0.6875)
    """

    __slots__ = ("m2", "mean", "n")

    def __init__(self, n: float = 0.0, mean: float = 0.0, m2: float = 0.0) -> None:
        self.n = n
        self.mean = mean
        self.m2 = m2

    def update(self, x: float, w: float = 1.0) -> None:
        """Add ``x`` with weight ``w``."""
        self.n, self.mean, self.m2 = welford_add(self.n, self.mean, self.m2, x, w)

    def merge(self, other: Welford, factor: float = 1.0) -> Welford:
        """Add ``other`` (its weight and ``M2`` multiplied by ``factor``) in place."""
        self.n, self.mean, self.m2 = chan_merge(
            self.n, self.mean, self.m2, other.n * factor, other.mean, other.m2 * factor
        )
        return self

    def rescale(self, factor: float) -> None:
        """Multiply the weight-like statistics (``n``, ``M2``) by ``factor``."""
        self.n *= factor
        self.m2 *= factor

    @property
    def variance(self) -> float:
        """Population variance ``M2 / n`` (0 when empty)."""
        return self.m2 / self.n if self.n > 0.0 else 0.0

    def to_state(self) -> list[float]:
        """``[n, mean, M2]``."""
        return [self.n, self.mean, self.m2]

    @classmethod
    def from_state(cls, state: Any) -> Welford:
        """Inverse of :meth:`to_state`."""
        n, mean, m2 = (float(v) for v in state)
        return cls(n, mean, m2)

    def __repr__(self) -> str:
        return f"Welford(n={self.n!r}, mean={self.mean!r}, m2={self.m2!r})"
