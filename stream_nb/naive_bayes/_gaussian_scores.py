"""How Gaussian statistics score an event: the joint log-likelihood of every class.

Plain functions over a :class:`~stream_nb.naive_bayes._gaussian_stats.GaussianStatistics`
component, called by the learners that hold one; they change no statistic
(:func:`general_scores` materialises lazily kept weights first, see
:meth:`~stream_nb.naive_bayes._gaussian_stats.GaussianStatistics.sync`). :func:`dense_scores`
is the fast path for an event with exactly the learned features in order
(see docs/gaussian.md); :func:`general_scores` handles every other event, and
:func:`joint_log_likelihood` picks between them.

Per scored class ``y``, with ``σ² = M2 / n + ε_f`` (see
:meth:`~stream_nb.naive_bayes._gaussian_stats.GaussianStatistics.epsilons`; a
feature whose ``ε_f`` is 0 is left out)::

    log P(y) − ½ Σ_f w_f (log 2π + log σ²_yf + (x_f − μ_yf)² / σ²_yf)

with the fixed ``feature_weights`` ``w_f`` (1 for a feature they leave out;
a feature of weight 0 is left out).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

from stream_nb.limits import MAX_VALUE, MIN_VARIANCE, check_number
from stream_nb.stats import LOG_2PI

if TYPE_CHECKING:
    from stream_nb.naive_bayes._gaussian_stats import GaussianStatistics

__all__ = ["dense_scores", "general_scores", "joint_log_likelihood"]

_log = math.log
_log2 = math.log2
#: ln 2: ``log(v) = log2(v) × _LN2``; ``math.log2`` is cheaper to call than ``math.log``.
_LN2 = math.log(2.0)
_BOOL = frozenset((bool,))
_INF = math.inf
#: Floor of ε (see GaussianStatistics.epsilon).
_MIN_EPSILON = MIN_VARIANCE
#: Largest |x| of a value scored (``out_of_range`` beyond).
_MAX_VALUE = MAX_VALUE


def joint_log_likelihood(
    g: GaussianStatistics,
    x: Mapping[str, Any],
    scale: float,
    weights: Mapping[Hashable, float] | None = None,
) -> dict[Hashable, float]:
    """``log P(y) + Σ_f w_f log N(x_f; μ_yf, σ²_yf)`` for every scored class (``w_f =
    weights.get(f, 1)``; no ``weights``: every ``w_f`` is 1)."""
    scores = dense_scores(g, x, scale, weights)
    if scores is None:
        return general_scores(g, x, scale, weights)
    out: dict[Hashable, float] = {}
    for y, v in zip(g.scored_labels, scores):  # noqa: B905 (same length)
        out[y] = v
    return out


def dense_scores(
    g: GaussianStatistics,
    x: Mapping[str, Any],
    scale: float,
    weights: Mapping[Hashable, float] | None = None,
) -> list[float] | None:
    """Joint log-likelihoods of the scored classes, in order, on the dense path
    (``weights``: as :func:`joint_log_likelihood`).

    ``None`` when the event is not dense (a feature missing, extra or out of
    order, a class without statistics for some feature, a value that is
    not a non-bool number within ``±MAX_VALUE``, a class whose weight
    decayed to 0): the general path handles those.

    Speed notes: ``log2(v) * LN2`` instead of ``log(v)``
    (``math.log`` parses optional arguments), one ``log`` per class for
    the product of the σ², and no comprehension (each one is a call).
    """
    cw = g.class_weight
    if not cw or g.missing or tuple(x) != g.order:
        return None
    vals = x.values()
    try:
        s = sum(map(abs, vals))
    except (TypeError, OverflowError):  # None, a non-number, an int past the double
        return None  # range: the general path says which
    if not s <= _MAX_VALUE or not _BOOL.isdisjoint(map(type, vals)):
        return None  # NaN, ±inf or beyond ±MAX_VALUE (or Σ|x| beyond it): general path
    log2 = _log2
    alpha = g.prior_alpha / scale  # α in raw units, see Learner
    den = g.total_weight + len(cw) * alpha
    out: list[float] = []
    mx = g.max_var
    if mx <= 0.0:  # every feature constant so far: equal terms for all classes
        try:
            for _, k, lp in g.scored:
                out.append(log2((cw[k] + alpha) / den) * _LN2 if lp is None else lp)
        except (ValueError, ZeroDivisionError):  # log2(0): a class whose weight decayed
            return None  # to 0 is not scored (the general path leaves it out)
        return out
    if weights is not None:
        return _dense_weighted_scores(g, list(vals), alpha, den, weights)
    if g.per_feature:
        return _dense_feature_scores(g, list(vals), alpha, den)
    eps = g.var_smoothing * mx
    if eps < _MIN_EPSILON:
        eps = _MIN_EPSILON
    # -½ F log 2π, shared by every class
    const = -0.5 * len(g.order) * LOG_2PI
    means = g.mean
    variances = g.var
    product = eps >= g.epsilon_floor
    try:
        for _, k, lp in g.scored:
            q = 0.0
            if product:
                p = 1.0
                for x_f, m, v in zip(vals, means[k], variances[k]):  # noqa: B905
                    v += eps  # σ² = M2/n + ε
                    p *= v
                    x_f -= m
                    q += x_f * x_f / v
                if p == _INF:  # overflow is sticky: redo as a sum of logs
                    p = 0.0
                    for v in variances[k]:
                        p += log2(v + eps)
                else:
                    p = log2(p)
            else:
                p = 0.0
                for x_f, m, v in zip(vals, means[k], variances[k]):  # noqa: B905
                    v += eps
                    p += log2(v)
                    x_f -= m
                    q += x_f * x_f / v
            # log P(y) - ½ Σ_f (log 2π + log σ² + (x_f - μ)² / σ²); p is log2 Π σ²
            if not q < _INF:  # NaN/inf input (or overflow): the general path decides
                return None
            if lp is None:
                lp = log2((cw[k] + alpha) / den) * _LN2
            out.append(lp + const - 0.5 * (p * _LN2 + q))
    except TypeError:  # None or a non-number: the general path says which
        return None
    except (ValueError, ZeroDivisionError):  # log2(0): a class whose weight decayed to
        return None  # 0 is not scored (the general path leaves it out)
    return out


def _dense_feature_scores(
    g: GaussianStatistics, vals: list[Any], alpha: float, den: float
) -> list[float] | None:
    """:func:`dense_scores` with one ε per feature (``var_smoothing_mode="feature"``);
    the features whose ε is 0 (constant so far) are left out."""
    cw = g.class_weight
    log2 = _log2
    eps = g.epsilons()
    means = g.mean
    variances = g.var
    if 0.0 in eps:
        active = [j for j, e in enumerate(eps) if e > 0.0]
        vals = [vals[j] for j in active]
        eps = [eps[j] for j in active]
        means = [[row[j] for j in active] for row in means]
        variances = [[row[j] for j in active] for row in variances]
    const = -0.5 * len(vals) * LOG_2PI
    product = min(eps, default=1.0) >= g.epsilon_floor
    out: list[float] = []
    try:
        for _, k, lp in g.scored:
            q = 0.0
            p = 0.0
            if product:
                p = 1.0
                for x_f, m, v, e in zip(vals, means[k], variances[k], eps):  # noqa: B905
                    v += e  # σ² = M2/n + ε_f
                    p *= v
                    x_f -= m
                    q += x_f * x_f / v
                if p == _INF:  # overflow is sticky: redo as a sum of logs
                    p = 0.0
                    for v, e in zip(variances[k], eps):  # noqa: B905
                        p += log2(v + e)
                else:
                    p = log2(p)
            else:
                for x_f, m, v, e in zip(vals, means[k], variances[k], eps):  # noqa: B905
                    v += e
                    p += log2(v)
                    x_f -= m
                    q += x_f * x_f / v
            if not q < _INF:  # NaN/inf input (or overflow): the general path decides
                return None
            if lp is None:
                lp = log2((cw[k] + alpha) / den) * _LN2
            out.append(lp + const - 0.5 * (p * _LN2 + q))
    except TypeError:  # None or a non-number: the general path says which
        return None
    except (ValueError, ZeroDivisionError):  # log2(0): a class whose weight decayed to
        return None  # 0 is not scored (the general path leaves it out)
    return out


def _dense_weighted_scores(
    g: GaussianStatistics,
    vals: list[Any],
    alpha: float,
    den: float,
    weights: Mapping[Hashable, float],
) -> list[float] | None:
    """:func:`dense_scores` with ``feature_weights``: each feature's term times its weight;
    the features of weight 0 and those whose ε is 0 are left out."""
    cw = g.class_weight
    log2 = _log2
    eps = g.epsilons()
    fw = [weights.get(f, 1.0) for f in g.order]
    active = [j for j, (e, w) in enumerate(zip(eps, fw)) if e > 0.0 and w != 0.0]  # noqa: B905
    vals = [vals[j] for j in active]
    eps = [eps[j] for j in active]
    fw = [fw[j] for j in active]
    const = -0.5 * sum(fw) * LOG_2PI
    out: list[float] = []
    try:
        for _, k, lp in g.scored:
            mean = g.mean[k]
            var = g.var[k]
            t = 0.0
            for j, x_f, e, w in zip(active, vals, eps, fw):  # noqa: B905 (same length)
                v = var[j] + e  # σ² = M2/n + ε_f
                x_f -= mean[j]
                t += w * (log2(v) * _LN2 + x_f * x_f / v)
            if not t < _INF:  # NaN/inf input (or overflow): the general path decides
                return None
            if lp is None:
                lp = log2((cw[k] + alpha) / den) * _LN2
            out.append(lp + const - 0.5 * t)
    except TypeError:  # None or a non-number: the general path says which
        return None
    except (ValueError, ZeroDivisionError):  # log2(0): a class whose weight decayed to
        return None  # 0 is not scored (the general path leaves it out)
    return out


def general_scores(
    g: GaussianStatistics,
    x: Mapping[str, Any],
    scale: float,
    weights: Mapping[Hashable, float] | None = None,
) -> dict[Hashable, float]:
    """Joint log-likelihoods of any event: a feature counts only when every scored
    class has statistics for it; values are checked (``non_numeric``, ``non_finite``,
    ``out_of_range``). ``weights``: each feature's term times ``weights.get(f, 1)``
    (a feature of weight 0 is left out)."""
    cw = g.class_weight
    if not cw:
        return {}
    g.sync()
    hint = g.numeric_hint
    fidx = g.feature_index
    scored = g.scored
    alpha = g.prior_alpha / scale  # α in raw units, see Learner
    if not alpha and 0.0 in cw:
        # log(N_y / N) of a class whose weight decayed (underflowed) to 0 is -inf:
        # probability 0, the class is left out as log_softmax leaves out -inf
        scored = [(y, k, lp) for y, k, lp in scored if lp is not None or cw[k] > 0.0]
    ns = g.n
    items: list[tuple[int, float]] = []
    for f, value in x.items():
        if value is None:
            continue
        number = check_number(f, value, hint)
        j = fidx.get(f)
        # a feature counts only if every scored class has statistics for it
        if j is not None and all(ns[k][j] > 0.0 for _, k, _ in scored):
            items.append((j, number))
    if not scored:
        return {}
    den = g.total_weight + len(cw) * alpha
    log_den = _log(den) if den > 0.0 else 0.0  # (0: every class has a fixed prior)
    eps = g.epsilons()
    items = [(j, number) for j, number in items if eps[j] > 0.0]
    if weights is not None:
        return _weighted_scores(g, items, eps, weights, scored, alpha, log_den)
    const = len(items) * LOG_2PI
    out: dict[Hashable, float] = {}
    for y, k, lp in scored:
        mean = g.mean[k]
        var = g.var[k]
        total = 0.0
        for j, number in items:
            v = var[j] + eps[j]
            d = number - mean[j]
            total += _log(v) + d * d / v
        out[y] = (_log(cw[k] + alpha) - log_den if lp is None else lp) - 0.5 * (const + total)
    return out


def _weighted_scores(
    g: GaussianStatistics,
    items: list[tuple[int, float]],
    eps: list[float],
    weights: Mapping[Hashable, float],
    scored: list[tuple[Hashable, int, float | None]],
    alpha: float,
    log_den: float,
) -> dict[Hashable, float]:
    """The end of :func:`general_scores` with ``feature_weights``: ``items`` are the
    (feature index, value) pairs scored, ``eps`` every feature's ε; each term is times its
    feature's weight."""
    features = g.features
    cw = g.class_weight
    weighted = [(j, number, weights.get(features[j], 1.0)) for j, number in items]
    weighted = [(j, number, w) for j, number, w in weighted if w != 0.0]
    out: dict[Hashable, float] = {}
    for y, k, lp in scored:
        mean = g.mean[k]
        var = g.var[k]
        total = 0.0
        for j, number, w in weighted:
            v = var[j] + eps[j]
            d = number - mean[j]
            total += w * (LOG_2PI + _log(v) + d * d / v)
        out[y] = (_log(cw[k] + alpha) - log_den if lp is None else lp) - 0.5 * total
    return out
