"""Normalisation of joint log-likelihoods into log-probabilities (max-shifted log-sum-exp).

:func:`log_softmax` is what :meth:`stream_nb.base.Learner.predict_log_proba_one`
applies to every learner's scores; :func:`log_softmax_argmax` adds the decision
in the same pass (the prequential loops), and :func:`log_softmax_scores` is the
variant for scores held as a list in class order (GaussianNB's dense path).
Classes scored ``-inf`` have probability 0 and are left out.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

__all__ = ["ABSORB", "log_softmax", "log_softmax_argmax", "log_softmax_scores"]

_exp = math.exp
_log = math.log
_log1p = math.log1p
_log2 = math.log2
#: ln 2: ``log(v) = log2(v) × _LN2``; ``math.log2`` is cheaper to call than ``math.log``.
_LN2 = math.log(2.0)
_NEG_INF = -math.inf

#: Past this magnitude of the top score ``m``, ``m + log Σ exp(v − m)`` would lose
#: digits of the log-sum (all of it once ``|m| > 2**53 × log K``: every class would
#: get log-probability 0), so the log-probabilities are computed as
#: ``(v − m) − log Σ`` instead. Below it the two agree to 2**-32, and the
#: first form (one subtraction per class) is kept.
ABSORB = 2.0**20


def log_softmax(jll: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Normalise joint log-likelihoods into log-probabilities (max-shifted log-sum-exp).

    Parameters
    ----------
    jll
        Unnormalised log scores by class.

    Returns
    -------
    dict
        ``jll[c] - log Σ_c' exp(jll[c'])``; ``{}`` for an empty input. Classes
        whose score is ``-inf`` are left out (their probability is 0).

    Examples
    --------
    >>> lp = log_softmax({"a": 0.0, "b": 0.0})
    >>> round(math.exp(lp["a"]), 6)
    0.5
    """
    if not jll:
        return {}
    m = max(jll.values())
    if m == -math.inf:
        return {}
    total = 0.0
    for v in jll.values():
        total += _exp(v - m)
    if -ABSORB < m < ABSORB:
        lse = m + _log(total)
        return {c: v - lse for c, v in jll.items() if v != -math.inf}
    log_total = _log(total)
    return {c: (v - m) - log_total for c, v in jll.items() if v != -math.inf}


def log_softmax_argmax(jll: Mapping[Hashable, float]) -> tuple[dict[Hashable, float], Hashable]:
    """``(log_softmax(jll), first argmax of jll)`` in one pass over the scores.

    Bit-identical to :func:`log_softmax` and to
    :meth:`~stream_nb.base.Learner.predict_one` (same max shift, same
    left-to-right sum, first maximum wins ties). ``jll`` must not be empty.

    Examples
    --------
    >>> lp, best = log_softmax_argmax({"a": 0.0, "b": 1.0})
    >>> best, round(math.exp(lp["b"]), 6)
    ('b', 0.731059)
    """
    values = list(jll.values())
    m = max(values)
    y_pred = list(jll)[values.index(m)]
    if m == _NEG_INF:
        return {}, y_pred
    total = 0.0
    for v in values:
        total += _exp(v - m)
    if -ABSORB < m < ABSORB:
        lse = m + _log(total)
        return {c: v - lse for c, v in jll.items() if v != _NEG_INF}, y_pred
    log_total = _log(total)
    return {c: (v - m) - log_total for c, v in jll.items() if v != _NEG_INF}, y_pred


def log_softmax_scores(
    labels: Sequence[Hashable], scores: Sequence[float]
) -> dict[Hashable, float]:
    """The log posterior of finite scores given in the order of ``labels``.

    The same max shift as :func:`log_softmax`; two classes take
    ``log1p(exp(-|a - b|))`` for the log-sum, and the logarithm is ``log2 × ln 2``
    (cheaper to call). ``{}`` for no scores.

    Examples
    --------
    >>> lp = log_softmax_scores(["a", "b", "c"], [0.0, 0.0, 0.0])
    >>> round(math.exp(lp["c"]), 6)
    0.333333
    """
    out: dict[Hashable, float] = {}
    if len(scores) == 2:
        a, b = scores
        lse = a + _log1p(_exp(b - a)) if a >= b else b + _log1p(_exp(a - b))
        if -ABSORB < lse < ABSORB:
            out[labels[0]] = a - lse
            out[labels[1]] = b - lse
        else:
            top, tail = (a, _log1p(_exp(b - a))) if a >= b else (b, _log1p(_exp(a - b)))
            out[labels[0]] = (a - top) - tail
            out[labels[1]] = (b - top) - tail
        return out
    if not scores:
        return out
    top = max(scores)
    total = 0.0
    for v in scores:
        total += _exp(v - top)
    if not -ABSORB < top < ABSORB:
        tail = _log2(total) * _LN2
        for y, v in zip(labels, scores):  # noqa: B905 (same length)
            out[y] = (v - top) - tail
        return out
    top += _log2(total) * _LN2
    for y, v in zip(labels, scores):  # noqa: B905 (same length)
        out[y] = v - top
    return out
