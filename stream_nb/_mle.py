"""The decision rule for maximum-likelihood estimates (``alpha=0``).

With ``alpha=0`` a value never seen with a class has probability 0 and its term
``log P(x_j | y)`` is ``-inf``. When at least one class keeps a finite score that
is the maximum-likelihood posterior as it stands. When every class has a ``-inf``
term (the textbook zero-probability failure) the posterior would be ``0/0``; the
rule used by every stream-nb learner is then:

1. count, per class, its zero-probability terms ``k_y``;
2. only the classes with the fewest such terms stay possible (the others get
   probability 0), and among them the finite terms decide, the ``-inf`` ones
   being left out.

A term that is ``-inf`` for every class thus drops out (it does not tell the
classes apart), and when some class has no zero term the rule is the plain
maximum-likelihood posterior. Scores stay finite for at least one class, so
predictions, log-probabilities and the engine's records are always defined.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

import numpy as np
import numpy.typing as npt

__all__ = ["resolve_zero_terms", "resolve_zero_terms_one", "split_terms_one"]

_NEG_INF = -math.inf


def resolve_zero_terms(
    finite: npt.NDArray[np.float64], zeros: npt.NDArray[np.integer]
) -> npt.NDArray[np.float64]:
    """Scores by the rule above, from each class's sum of finite terms and its count
    of ``-inf`` terms (both shaped ``(..., n_classes)``).

    Examples
    --------
    >>> import numpy as np
    >>> resolve_zero_terms(np.array([[-1.0, -2.0], [-1.0, -2.0]]), np.array([[1, 0], [1, 1]]))
    array([[-inf,  -2.],
           [ -1.,  -2.]])
    """
    fewest = zeros.min(axis=-1, keepdims=True)
    return np.where(zeros == fewest, finite, _NEG_INF)


def resolve_zero_terms_one(
    finite: Mapping[Hashable, float], zeros: Mapping[Hashable, int]
) -> dict[Hashable, float]:
    """:func:`resolve_zero_terms` for one event's scores held in dicts keyed by class.

    Examples
    --------
    >>> resolve_zero_terms_one({"a": -1.0, "b": -2.0}, {"a": 1, "b": 1})
    {'a': -1.0, 'b': -2.0}
    >>> resolve_zero_terms_one({"a": -1.0, "b": -2.0}, {"a": 2, "b": 1})
    {'a': -inf, 'b': -2.0}
    """
    if not zeros:
        return dict(finite)
    fewest = min(zeros.values())
    return {c: (v if zeros.get(c, 0) == fewest else _NEG_INF) for c, v in finite.items()}


def split_terms_one(
    scores: Mapping[Hashable, float],
) -> tuple[dict[Hashable, float], dict[Hashable, int]]:
    """Scores (e.g. log priors) as the ``(finite, zeros)`` pair that the terms of an event
    are then added to: a ``-inf`` score is one zero term on a finite part of 0.

    Examples
    --------
    >>> split_terms_one({"a": -0.5, "b": -math.inf})
    ({'a': -0.5, 'b': 0.0}, {'a': 0, 'b': 1})
    """
    finite = {}
    zeros = {}
    for c, v in scores.items():
        if v == _NEG_INF:
            finite[c] = 0.0
            zeros[c] = 1
        else:
            finite[c] = v
            zeros[c] = 0
    return finite, zeros
