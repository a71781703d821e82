"""Attribute weights over Naive Bayes statistics: per-feature terms, scores, gradient, merge.

The learner :class:`~stream_nb.naive_bayes.weighted.WeightedNB` holds
NaiveBayes statistics (a
:class:`~stream_nb.naive_bayes._gaussian_stats.GaussianStatistics` and a
:class:`~stream_nb.naive_bayes._categorical_stats.CategoricalStatistics`) and
one weight ``w_j ≥ 0`` per feature. Its score is::

    score(y) = log P(y) + Σ_j w_j log P(x_j | y)

with every term exactly as NaiveBayes computes it: :func:`event_terms` reads
them from the components' public state, one list per feature (the components
offer the sum over features, not the terms). :func:`weighted_scores` adds them
up, :func:`gradient` is ``∂ log P(y | x) / ∂ w_j`` and :func:`merge_weights`
the rule by which two models' weights combine.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from stream_nb._softmax import log_softmax
from stream_nb.limits import check_number
from stream_nb.naive_bayes._categorical_stats import CategoricalStatistics
from stream_nb.naive_bayes._gaussian_scores import general_scores
from stream_nb.naive_bayes._gaussian_stats import GaussianStatistics
from stream_nb.stats import LOG_2PI

__all__ = ["Terms", "event_terms", "gradient", "merge_weights", "weighted_scores"]

_log = math.log
_exp = math.exp


class Terms(NamedTuple):
    """The pieces of one event's score.

    ``labels`` are the scored classes in order, ``prior[k] = log P(labels[k])``
    and ``terms[i][k] = log P(x_{features[i]} | labels[k])`` for each feature
    of the event that contributes (learned, not ``None``; a Gaussian feature
    only when every scored class has statistics for it and ε > 0, as in
    NaiveBayes).
    """

    labels: list[Hashable]
    prior: list[float]
    features: list[Hashable]
    terms: list[list[float]]


def event_terms(
    gaussian: GaussianStatistics,
    categorical: CategoricalStatistics,
    x: Mapping[Any, Any],
    numeric: Iterable[Hashable],
    discrete: Iterable[Hashable],
    alpha: float,
    scale: float,
) -> Terms | None:
    """The prior and per-feature terms of ``x``; ``None`` before anything was learned.

    Parameters
    ----------
    gaussian, categorical
        The statistics (read only; ``gaussian.sync()`` fills in lazily kept weights).
    x
        The event.
    numeric, discrete
        Its Gaussian and categorical features (keys of ``x``), as NaiveBayes splits them.
    alpha
        α of the categorical terms in raw units.
    scale
        The forgetting scale (for the class prior, see :class:`~stream_nb.base.Learner`).

    Raises
    ------
    InvalidEventError
        For a Gaussian value that is not a finite number within range, or an
        unhashable categorical value (as NaiveBayes).
    """
    prior_by_class = general_scores(gaussian, {}, scale)  # log P(y): no feature term
    if not prior_by_class:
        return None
    labels = list(prior_by_class)
    prior = list(prior_by_class.values())
    features: list[Hashable] = []
    terms: list[list[float]] = []
    _gaussian_terms(gaussian, x, numeric, labels, features, terms)
    counts = categorical.counts
    learned = []
    for f in discrete:
        value = x[f]
        if value is not None and f in counts:
            learned.append(f)
    try:
        for f in learned:
            value = categorical.capped(f, x[f])
            terms.append(categorical.log_likelihoods(f, value, labels, alpha))
            features.append(f)
    except TypeError:
        categorical.check_hashable(x, learned)  # names the unhashable value
        raise
    return Terms(labels, prior, features, terms)


def _gaussian_terms(
    g: GaussianStatistics,
    x: Mapping[Any, Any],
    numeric: Iterable[Hashable],
    labels: Sequence[Hashable],
    features: list[Hashable],
    terms: list[list[float]],
) -> None:
    """Append ``-½ (log 2π + log σ²_yf + (x_f − μ_yf)² / σ²_yf)`` of each Gaussian feature.

    The same terms as :func:`~stream_nb.naive_bayes._gaussian_scores.general_scores`:
    values checked, a feature counted only when every scored class has
    statistics for it, none whose ε is 0 (see ``GaussianStatistics.epsilons``).
    """
    g.sync()
    fidx = g.feature_index
    index = g.class_index
    rows = [index[y] for y in labels]
    ns = g.n
    items: list[tuple[Hashable, int, float]] = []
    for f in numeric:
        value = x[f]
        if value is None:
            continue
        number = check_number(f, value, g.numeric_hint)
        j = fidx.get(f)
        if j is not None and all(ns[k][j] > 0.0 for k in rows):
            items.append((f, j, number))
    eps = g.epsilons()
    means, variances = g.mean, g.var
    for f, j, number in items:
        if eps[j] == 0.0:
            continue  # (left out, see GaussianStatistics.epsilons)
        row = []
        for k in rows:
            v = variances[k][j] + eps[j]
            d = number - means[k][j]
            row.append(-0.5 * (LOG_2PI + _log(v) + d * d / v))
        features.append(f)
        terms.append(row)


def weighted_scores(terms: Terms, weights: Sequence[float]) -> list[float]:
    """``log P(y) + Σ_i w_i log P(x_i | y)`` of every class of ``terms``, in order.

    ``weights[i]`` is the weight of ``terms.features[i]``; a feature of weight
    0 adds nothing (also where its term is ``-inf``).

    Examples
    --------
    >>> terms = Terms(["a", "b"], [-0.5, -1.0], ["f", "g"], [[-1.0, -2.0], [-3.0, -1.0]])
    >>> weighted_scores(terms, [1.0, 0.5])
    [-3.0, -3.5]
    """
    scores = list(terms.prior)
    for w, row in zip(weights, terms.terms, strict=True):
        if w == 0.0:
            continue
        for k, t in enumerate(row):
            scores[k] += w * t
    return scores


def gradient(terms: Terms, weights: Sequence[float], y: Hashable) -> list[float]:
    """``∂ log P(y | x) / ∂ w_i = log P(x_i | y) − Σ_c P(c | x) log P(x_i | c)`` per feature.

    ``P(c | x)`` is the posterior under ``weights``; ``y`` is one of ``terms.labels``.
    A term of a class of posterior 0 does not count (it may be ``-inf``).

    Examples
    --------
    Two classes equally likely: each component is half the term's difference.

    >>> terms = Terms(["a", "b"], [0.0, 0.0], ["f"], [[-1.0, -3.0]])
    >>> gradient(terms, [0.0], "a")
    [1.0]
    """
    scores = weighted_scores(terms, weights)
    log_posterior = log_softmax(dict(zip(terms.labels, scores, strict=True)))
    posterior = [_exp(log_posterior[c]) if c in log_posterior else 0.0 for c in terms.labels]
    k_true = terms.labels.index(y)
    out = []
    for row in terms.terms:
        expected = 0.0
        for p, t in zip(posterior, row, strict=True):
            if p > 0.0:
                expected += p * t
        out.append(row[k_true] - expected)
    return out


def merge_weights(
    weights: dict[Hashable, float],
    evidence: dict[Hashable, float],
    other_weights: Mapping[Hashable, float],
    other_evidence: Mapping[Hashable, float],
    factor: float,
    keep: Iterable[Hashable],
) -> None:
    """Combine another model's weights into ``weights`` and ``evidence``, in place.

    For each feature of ``keep`` (those the merged model learned) that the
    other model has a weight for, with evidence ``e = evidence[f]`` here and
    ``e' = factor × other_evidence[f]`` (the raw weight of the events that
    stepped it, in this model's units)::

        w = (e w_here + e' w_other) / (e + e'),    e ← e + e'

    A side without evidence (or without the feature) leaves the other's
    weight exactly; a feature known only here keeps its weight.
    """
    for f in keep:
        theirs = other_weights.get(f)
        if theirs is None:
            continue
        e_other = other_evidence.get(f, 0.0) * factor
        mine = weights.get(f)
        e_mine = evidence.get(f, 0.0)
        if mine is None or e_mine == 0.0:
            weights[f] = theirs
        elif e_other > 0.0:
            weights[f] = (e_mine * mine + e_other * theirs) / (e_mine + e_other)
        evidence[f] = e_mine + e_other
