"""Scores of the semi-naive learners with ``alpha = 0`` (maximum likelihood).

Every probability the learners use is a ratio of counts ``(n + α) / (d + α s)``
(``s``: the number of values the ratio is spread over, e.g. ``S_j``). With
``α = 0``:

* ``d > 0, n > 0``: the term is ``log(n / d)``;
* ``d > 0, n = 0``: a zero count, the term is ``-inf``: it is counted, not added;
* ``d = 0`` (``n = 0`` too: the conditioning event was never seen, e.g. class
  ``y`` never learned with both ``x_i`` and feature ``j``): the ratio takes its
  limit as ``α → 0``, ``1 / s``, a finite term.

A score is then a pair per class, the sum of its finite terms and its count of
``-inf`` terms (:class:`ZeroScore`), decided by :mod:`stream_nb._mle`'s rule. A
mixture of SPODEs (AODE) is reduced first (:func:`mix`): per class, its count is
the fewest any mixed SPODE has, and only the SPODEs with that count are mixed.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from stream_nb._mle import resolve_zero_terms_one

__all__ = ["ZeroScore", "mix"]

_log = math.log
_exp = math.exp


class ZeroScore:
    """Per class, the sum of the finite log terms and the number of ``-inf`` terms.

    Examples
    --------
    >>> score = ZeroScore(2)
    >>> score.add([1.0, 0.0], [2.0, 3.0], 2)  # log(1/2) and a zero count
    >>> score.add([0.0, 0.0], [0.0, 0.0], 4)  # never conditioned on: log(1/4) each
    >>> [round(v, 4) for v in score.finite], score.zeros
    ([-2.0794, -1.3863], [0, 1])
    >>> score.resolve(["a", "b"])
    {'a': -2.0794415416798357, 'b': -inf}
    """

    __slots__ = ("finite", "zeros")

    def __init__(self, n_classes: int) -> None:
        self.finite = [0.0] * n_classes
        self.zeros = [0] * n_classes

    def add(self, num: Sequence[float], den: Sequence[float], s: float) -> None:
        """Add the term ``log(num / den)`` of each class (see the module docstring)."""
        finite, zeros = self.finite, self.zeros
        for k, (n, d) in enumerate(zip(num, den, strict=True)):
            if d == 0.0:
                finite[k] -= _log(s)
            elif n == 0.0:
                zeros[k] += 1
            else:
                finite[k] += _log(n / d)

    def add_weighted(
        self, num: Sequence[float], den: Sequence[float], s: float, alpha: float, weight: float
    ) -> None:
        """Add ``weight × log((num + α) / (den + α s))`` of each class; with ``α = 0`` the
        terms of :meth:`add` times ``weight``. A term of weight 0 adds nothing, not even a
        zero count (see ``feature_weights``, :mod:`stream_nb.seminaive._feature_weights`).

        Examples
        --------
        >>> score = ZeroScore(2)
        >>> score.add_weighted([1.0, 3.0], [2.0, 4.0], 2, 1.0, 2.0)  # 2 log(2/4), 2 log(4/6)
        >>> score.add_weighted([1.0, 0.0], [2.0, 3.0], 2, 0.0, 0.0)  # weight 0: nothing
        >>> [round(v, 4) for v in score.finite], score.zeros
        ([-1.3863, -0.8109], [0, 0])
        """
        if weight == 0.0:
            return
        finite, zeros = self.finite, self.zeros
        if alpha > 0.0:
            smoothing = alpha * s
            for k, (n, d) in enumerate(zip(num, den, strict=True)):
                finite[k] += weight * _log((n + alpha) / (d + smoothing))
            return
        for k, (n, d) in enumerate(zip(num, den, strict=True)):
            if d == 0.0:
                finite[k] -= weight * _log(s)
            elif n == 0.0:
                zeros[k] += 1
            else:
                finite[k] += weight * _log(n / d)

    def extend(self, other: ZeroScore) -> None:
        """Add ``other``'s terms (the terms every SPODE shares)."""
        self.finite = [a + b for a, b in zip(self.finite, other.finite, strict=True)]
        self.zeros = [a + b for a, b in zip(self.zeros, other.zeros, strict=True)]

    def resolve(self, classes: Sequence[Hashable]) -> dict[Hashable, float]:
        """Scores by class under :mod:`stream_nb._mle`'s rule."""
        return resolve_zero_terms_one(
            dict(zip(classes, self.finite, strict=True)),
            dict(zip(classes, self.zeros, strict=True)),
        )


def mix(spodes: Sequence[ZeroScore], weights: Sequence[float]) -> ZeroScore:
    """The mixture ``log Σ_p W_p exp(SPODE_p(y)) − log Σ_p W_p`` under the zero-count rule.

    Per class ``y``: ``zeros(y) = min_p zeros_p(y)`` and the finite part is the
    mixture of the SPODEs attaining it,
    ``log Σ_{p : zeros_p(y) = zeros(y)} W_p exp(finite_p(y)) − log Σ_p W_p``.
    Weights are positive. When some SPODE has no zero count for ``y`` this is
    the plain mixture (the others' ``exp(-inf)`` is 0).

    Examples
    --------
    >>> a, b = ZeroScore(1), ZeroScore(1)
    >>> a.add([1.0], [2.0], 2)
    >>> b.add([0.0], [2.0], 2)  # -inf: left out of the mixture
    >>> out = mix([a, b], [1.0, 1.0])
    >>> round(out.finite[0], 6), out.zeros
    (-1.386294, [0])
    """
    out = ZeroScore(len(spodes[0].finite))
    log_total = _log(sum(weights))
    for k in range(len(out.finite)):
        fewest = min(s.zeros[k] for s in spodes)
        terms = [
            (w, s.finite[k]) for s, w in zip(spodes, weights, strict=True) if s.zeros[k] == fewest
        ]
        top = max(v for _w, v in terms)
        out.finite[k] = top + _log(sum(w * _exp(v - top) for w, v in terms)) - log_total
        out.zeros[k] = fewest
    return out
