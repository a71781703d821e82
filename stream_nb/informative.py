"""Most informative features of a learner, from its own sufficient statistics.

``stream-nb inspect`` lists them; :func:`informative_features` works on any
learner in memory. Nothing here needs data: every score is computed from the
statistics the model stores (its :meth:`~stream_nb.base.Learner.to_state`),
with the model's own smoothing (α in raw units, the Gaussian ε), and only over
the classes the model scores (``class_prior`` may leave some out). A learner
with fewer than two scored classes has no informative feature.

Scores, by kind of entry (all in nats)
--------------------------------------
``categorical`` (CategoricalNB, the categorical features of NaiveBayes, and
the single counts of SPODE/AODE/TAN/KDB): one entry per (feature, value)::

    log_ratio = max_a log P(x_f = v | a) − min_b log P(x_f = v | b)
    P(x_f = v | y) = (N_{y,f,v} + α) / (N_{y,f} + S_f α)

the evidence the value itself gives, favouring ``a`` over ``b``.

``gaussian`` (GaussianNB, the numeric features of NaiveBayes): one entry per
feature, the largest *mean symmetric KL divergence* between two classes'
fitted normals ``N(μ_y, σ²_y)``, ``σ²_y = M2_y / n_y + ε``,
``ε = var_smoothing × max_f V_f`` or, ``var_smoothing_mode="feature"``,
``ε_f = var_smoothing × V_f`` (the model's ε; a feature the model leaves out,
``V_f = 0``, has no entry)::

    D(a, b) = ½ [KL(a ‖ b) + KL(b ‖ a)]
            = ¼ [(σ²_a − σ²_b)² / (σ²_a σ²_b) + (μ_a − μ_b)² (1/σ²_a + 1/σ²_b)]

the log-likelihood ratio in favour of the true class, in expectation over
the two classes' events. ``favours`` is the class with the larger mean
(large values favour it).

``token`` (MultinomialNB, ComplementNB): one entry per token ``w``, its term
in ``D(a, b)`` between two classes' smoothed token distributions ``θ``::

    score = max_{a,b} ½ (θ_{a,w} − θ_{b,w}) (log θ_{a,w} − log θ_{b,w})

i.e. the absolute log-ratio ``|log θ_a/θ_b|`` weighted by the support
``½ |θ_a − θ_b|``: a rare token (small θ in every class) cannot rank high
however large its ratio, a frequent token only if its rates differ.
MultinomialNB: ``θ_{y,w} = (N_{y,w} + α) / (T_y + αV)``. ComplementNB: the
complement distributions ``θ_{y,w} = (C_{y,w} + α) / (Σ_w C_{y,w} + αV)``,
``C_{y,w} = Σ_{y'≠y} N_{y',w}``, which the model scores with (before
``norm``'s per-class scaling); a token favours the class whose complement
rate is *smaller*. ``log_ratio`` is the per-occurrence log-ratio of that
pair, ``support`` the token's total (true-weight) count.

``binary`` (BernoulliNB): one entry per feature, ``D(a, b)`` between the two
classes' Bernoulli distributions ``p_{y,w} = (N_{y,w} + α) / (N_y + 2α)``::

    score = max_{a,b} ½ (p_a − p_b) (logit p_a − logit p_b)

(the on and off states both count); ``favours`` is the class in which the
feature is on more often, ``log_ratio = log p_favours − log p_against`` of
the on state, ``support`` the weight of events in which it was on.

Semi-naive learners (SPODE, AODE, TAN, KDB) add to their ``categorical``
entries the feature's ``mutual_information`` ``I(X_f; Y)`` (the quantity
that ranks features in their structure search) and, for a discretised
numeric feature, the bin's ``interval`` ``[low, high)`` (``None``: unbounded).
The "other" bucket of a capped feature has value ``None``.
:func:`structure` gives the dependence structure (parents of each feature).

Scores of different kinds measure different things (a value's evidence,
a feature's expected evidence, a token's weighted divergence term): a
NaiveBayes ranking that mixes ``categorical`` and ``gaussian`` entries is a
guide, compare within a kind for anything finer.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from stream_nb._state import decode_key, from_pairs
from stream_nb.base import Learner
from stream_nb.limits import MIN_VARIANCE
from stream_nb.seminaive._information import log_product_ratio

__all__ = [
    "bernoulli_divergence",
    "bernoulli_entries",
    "categorical_entries",
    "complement_entries",
    "gaussian_divergence",
    "gaussian_entries",
    "informative_features",
    "multinomial_entries",
    "mutual_information",
    "seminaive_entries",
    "state_stats",
    "structure",
    "token_divergence_term",
]

_log = math.log
_log1p = math.log1p

Entry = dict[str, Any]


def _tree(items: Any, depth: int) -> dict[Hashable, Any]:
    """A store of ``to_state`` output as nested dicts (the inverse of
    :func:`stream_nb._stores.tree_to_pairs`). The state is the live model's own, so
    it is not validated again: O(size) with a small constant."""
    if depth == 1:
        return {decode_key(k): v for k, v in items}
    return {decode_key(k): _tree(v, depth - 1) for k, v in items}


# ---------------------------------------------------------------------- formulas
def gaussian_divergence(mean_a: float, var_a: float, mean_b: float, var_b: float) -> float:
    """Mean symmetric KL divergence ``½ [KL(a ‖ b) + KL(b ‖ a)]`` of two normals.

    ``¼ [(σ²_a − σ²_b)² / (σ²_a σ²_b) + (μ_a − μ_b)² (1/σ²_a + 1/σ²_b)]``
    (the log terms of the two KLs cancel).

    Parameters
    ----------
    mean_a, var_a, mean_b, var_b
        Means and variances (> 0) of the two normals.

    Returns
    -------
    float
        The divergence in nats, 0 for identical normals.

    Examples
    --------
    >>> gaussian_divergence(0.0, 1.0, 2.0, 1.0)  # ¼ · 4 · 2
    2.0
    >>> gaussian_divergence(0.0, 1.0, 0.0, 4.0)  # ¼ · 9/4
    0.5625
    """
    dv = var_a - var_b
    dm = mean_a - mean_b
    # (dv/va)(dv/vb) rather than dv²/(va·vb): no overflow for variances up to 1e300
    return 0.25 * ((dv / var_a) * (dv / var_b) + dm * dm * (1.0 / var_a + 1.0 / var_b))


def bernoulli_divergence(p_a: float, p_b: float) -> float:
    """Mean symmetric KL divergence of two Bernoulli distributions, ``0 < p < 1``.

    ``½ [KL(a ‖ b) + KL(b ‖ a)] = ½ (p_a − p_b)(logit p_a − logit p_b)``.

    Examples
    --------
    >>> round(bernoulli_divergence(0.9, 0.1), 5)  # ½ · 0.8 · 2 log 9
    1.75778
    """
    logit_a = _log(p_a) - _log1p(-p_a)
    logit_b = _log(p_b) - _log1p(-p_b)
    return 0.5 * (p_a - p_b) * (logit_a - logit_b)


def token_divergence_term(theta_a: float, theta_b: float) -> float:
    """One token's term ``½ (θ_a − θ_b)(log θ_a − log θ_b)`` of the mean symmetric KL.

    Summed over the vocabulary it gives ``½ [KL(a ‖ b) + KL(b ‖ a)]`` of the
    two token distributions; it is ``½ |θ_a − θ_b| · |log θ_a/θ_b|``, a
    log-ratio weighted by how much probability mass is at stake.

    Examples
    --------
    >>> round(token_divergence_term(0.02, 0.01), 6)  # ½ · 0.01 · log 2
    0.003466
    >>> token_divergence_term(1e-6, 1e-8) < token_divergence_term(0.02, 0.01)
    True
    """
    return 0.5 * (theta_a - theta_b) * (_log(theta_a) - _log(theta_b))


# ---------------------------------------------------------------------- public API
def informative_features(model: Learner, top: int | None = 10) -> list[Entry]:
    """The ``top`` most informative features of ``model``, best first.

    See the module docstring for the score of each kind. Every entry has
    ``feature``, ``kind``, ``favours`` and ``against`` (the two classes the
    score compares), ``log_ratio`` (≥ 0, evidence for ``favours`` over
    ``against``) and ``score`` (the ranking key); ``categorical`` entries
    also have ``value``; other fields depend on the kind. Ties keep the
    order in which the model learned the features.

    Parameters
    ----------
    model
        A stream-nb learner: this is ``model.informative_features(top)``
        (:meth:`stream_nb.base.Learner.informative_features`). A learner class
        without scores (``capabilities.informative_features`` false) gives ``[]``.
    top
        How many entries to return; ``None`` for all.

    Returns
    -------
    list of dict
        JSON-able entries sorted by decreasing ``score``.

    Raises
    ------
    ConfigError
        If ``top`` is negative.

    Examples
    --------
    >>> from stream_nb import GaussianNB
    >>> model = GaussianNB()
    >>> for i in range(100):
    ...     y = i % 2
    ...     model.learn_one({"noise": float(i % 7), "signal": 3.0 * y + (i % 5) / 5}, y)
    >>> # signal: σ² = 0.08 + ε in both classes, ε = 1e-2 × 2.33 (its variance overall),
    >>> # D = ¼ · 3² · (2 / 0.1033) = 43.56
    >>> [(e["feature"], e["favours"], round(e["score"], 2)) for e in informative_features(model)]
    [('signal', 1, 43.56), ('noise', 1, 0.0)]
    """

    return model.informative_features(top)


def structure(model: Learner) -> dict[str, Any] | None:
    """The dependence structure of a semi-naive learner, or ``None`` for the others.

    TAN and KDB: ``{"parents": [{"feature": f, "parents": [p, ...]}, ...]}``,
    the structure of the last rebuild (parents best first, in the order the
    rebuild ranked the features; features learned since then are not listed
    and use the Naive Bayes term). SPODE: the same list with every feature's
    parent the super-parent, plus ``"super_parent"`` (the ``parent``
    parameter, or the feature with the largest ``I(X_f; Y)``, as the model
    chooses it). AODE averages every super-parent and has no single
    structure: ``None``.

    Examples
    --------
    >>> import random
    >>> from stream_nb import KDB
    >>> rng = random.Random(1)
    >>> model = KDB(k=1, rebuild_every=100)
    >>> for _ in range(300):
    ...     y = rng.random() < 0.5
    ...     a = y if rng.random() < 0.9 else not y
    ...     b = a if rng.random() < 0.9 else not a   # b depends on a, given y
    ...     model.learn_one({"a": str(a), "b": str(b)}, y)
    >>> structure(model)
    {'parents': [{'feature': 'a', 'parents': []}, {'feature': 'b', 'parents': ['a']}]}
    """

    return model.structure()


def state_stats(model: Learner) -> tuple[Any, float]:
    """``(stats, scale)`` of ``model.to_state()``: the statistics the entry builders read."""
    state = model.to_state()
    return state["stats"], float(state["scale"])


# ---------------------------------------------------------------------- categorical
def _scored(labels: Sequence[Hashable], class_prior: Mapping[Hashable, float] | None) -> list[Any]:
    """The classes the model scores: all, or those ``class_prior`` names."""
    return [y for y in labels if class_prior is None or y in class_prior]


def categorical_entries(
    labels: Sequence[Hashable],
    present: Mapping[Any, Mapping[Hashable, float]],
    counts: Mapping[Any, Mapping[Hashable, Mapping[Hashable, float]]],
    alpha: float,
    class_prior: Any,
    top: int | None,
) -> list[Entry]:
    """``categorical`` entries from CategoricalNB-layout stores (``N_{y,i}``,
    ``N_{y,i,v}``): the ``top`` best (all with ``None``), best first, ties in learning
    order."""
    scored = _scored(labels, class_prior)
    if len(scored) < 2:
        return []
    log = _log
    columns = range(len(scored))
    found = []  # (log ratio, feature, value, hi, lo): entries are built for the best only
    for feature, values in counts.items():
        by_class = present[feature]
        smoothing = len(values) * alpha
        for value, value_counts in values.items():
            ratios = [
                log((value_counts.get(y, 0.0) + alpha) / (by_class.get(y, 0.0) + smoothing))
                for y in scored
            ]
            hi = max(columns, key=ratios.__getitem__)
            lo = min(columns, key=ratios.__getitem__)
            found.append((ratios[hi] - ratios[lo], feature, value, hi, lo))
    best = heapq.nlargest(top, found, key=_first) if top is not None else found
    return [
        {
            "feature": feature,
            "kind": "categorical",
            "value": value,
            "favours": scored[hi],
            "against": scored[lo],
            "log_ratio": log_ratio,
            "score": log_ratio,
        }
        for log_ratio, feature, value, hi, lo in best
    ]


def _first(item: tuple[Any, ...]) -> Any:
    return item[0]


# ---------------------------------------------------------------------- Gaussian
def gaussian_entries(
    g: Mapping[str, Any], var_smoothing: float, class_prior: Any, *, per_feature: bool = False
) -> list[Entry]:
    """``gaussian`` entries from a Gaussian statistics state
    (:meth:`stream_nb.naive_bayes._gaussian_stats.GaussianStatistics.to_state`)."""
    from stream_nb.naive_bayes._gaussian_stats import feature_epsilons

    labels = [y for y, _ in g["classes"]]
    ks = [k for k, y in enumerate(labels) if class_prior is None or y in class_prior]
    if len(ks) < 2:
        return []
    n, mean, m2 = g["n"], g["mean"], g["m2"]
    gn, _gmean, gm2 = g["global"]
    if per_feature:
        epsilons = feature_epsilons(var_smoothing, gn, gm2)
    else:
        max_var = max((s / c for c, s in zip(gn, gm2, strict=True) if c > 0.0), default=0.0)
        if max_var <= 0.0:  # every feature constant so far: the model leaves the terms out
            return []
        epsilons = [max(var_smoothing * max_var, MIN_VARIANCE)] * len(gn)  # floor included
    out = []
    for j, feature in enumerate(g["features"]):
        eps = epsilons[j]
        # as in prediction: left out (ε 0), or not used until every class has it
        if eps == 0.0 or any(n[k][j] <= 0.0 for k in ks):
            continue
        best = -1.0
        pair = (ks[0], ks[1])
        for ka, kb in combinations(ks, 2):
            d = gaussian_divergence(
                mean[ka][j], m2[ka][j] / n[ka][j] + eps, mean[kb][j], m2[kb][j] / n[kb][j] + eps
            )
            if d > best:
                best, pair = d, (ka, kb)
        ka, kb = pair
        if mean[kb][j] > mean[ka][j]:
            ka, kb = kb, ka
        out.append(
            {
                "feature": feature,
                "kind": "gaussian",
                "favours": labels[ka],
                "against": labels[kb],
                "log_ratio": best,
                "score": best,
                "means": [mean[ka][j], mean[kb][j]],
                "stds": [
                    math.sqrt(m2[ka][j] / n[ka][j] + eps),
                    math.sqrt(m2[kb][j] / n[kb][j] + eps),
                ],
            }
        )
    return out


# ---------------------------------------------------------------------- tokens
def _best_pairs(prob: np.ndarray, logs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, the largest ``½ (prob_a − prob_b)(logs_a − logs_b)`` over column pairs.

    Returns the scores and the two column indices ``(a, b)`` of the best pair,
    oriented so that ``prob_a ≥ prob_b`` (first pair wins ties).
    """
    rows, k = prob.shape
    best = np.full(rows, -1.0)
    ia = np.zeros(rows, dtype=np.intp)
    ib = np.zeros(rows, dtype=np.intp)
    for a, b in combinations(range(k), 2):
        term = 0.5 * (prob[:, a] - prob[:, b]) * (logs[:, a] - logs[:, b])
        better = term > best
        best = np.where(better, term, best)
        ia = np.where(better, a, ia)
        ib = np.where(better, b, ib)
    flip = prob[np.arange(rows), ib] > prob[np.arange(rows), ia]
    return best, np.where(flip, ib, ia), np.where(flip, ia, ib)


def _token_table(
    stats: Mapping[str, Any], labels: list[Any]
) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """Tokens, their raw counts by class (``len(tokens) × len(labels)``) and all-class totals."""
    counts = _tree(stats["counts"], depth=2)
    tokens = list(counts)
    table = np.zeros((len(tokens), len(labels)))
    totals = np.zeros(len(tokens))
    col = {y: k for k, y in enumerate(labels)}
    for i, by_class in enumerate(counts.values()):
        for y, c in by_class.items():
            totals[i] += c
            k = col.get(y)
            if k is not None:
                table[i, k] = c
    return tokens, table, totals


def _token_classes(
    stats: Mapping[str, Any], class_prior: Mapping[Hashable, float] | None
) -> tuple[dict[Hashable, Any], list[Any]] | None:
    """The class weights and the scored classes of a token learner's statistics;
    ``None`` when fewer than two classes are scored or no token was learned."""
    class_weight = from_pairs(stats["class_weight"])
    labels = _scored(list(class_weight), class_prior)
    if len(labels) < 2 or not stats["counts"]:
        return None
    return class_weight, labels


def _token_entries(
    kind: str,
    tokens: list[Any],
    labels: list[Any],
    prob: np.ndarray,
    logs: np.ndarray,
    pair_logs: np.ndarray,
    support: np.ndarray,
    top: int | None,
    *,
    favours_smaller: bool = False,
) -> list[Entry]:
    """Entries of the ``top`` best tokens only (a vocabulary can be large), best first.

    ``prob`` holds each token's probability by class and ``logs`` its log; a
    pair of classes scores ``½ (prob_a − prob_b)(pair_logs_a − pair_logs_b)``.
    For the best pair (``prob_a ≥ prob_b``) ``log_ratio = logs_a − logs_b``;
    the token favours ``a``, or ``b`` with ``favours_smaller``.
    """
    score, big, small = _best_pairs(prob, pair_logs)
    rows = np.arange(len(tokens))
    log_ratio = logs[rows, big] - logs[rows, small]
    fav, against = (small, big) if favours_smaller else (big, small)
    order = np.argsort(-score, kind="stable")[:top]  # stable: ties in learning order
    return [
        {
            "feature": tokens[i],
            "kind": kind,
            "favours": labels[int(fav[i])],
            "against": labels[int(against[i])],
            "log_ratio": float(log_ratio[i]),
            "score": float(score[i]),
            "support": float(support[i]),
        }
        for i in order.tolist()
    ]


def multinomial_entries(
    stats: Mapping[str, Any], alpha: float, class_prior: Any, scale: float, top: int | None
) -> list[Entry]:
    """``token`` entries of a MultinomialNB state's statistics (α in raw units)."""
    found = _token_classes(stats, class_prior)
    if found is None:
        return []
    class_weight, labels = found
    class_tokens = from_pairs(stats["class_tokens"])
    tokens, table, totals = _token_table(stats, list(class_weight))
    table = table[:, [list(class_weight).index(y) for y in labels]]
    # θ_{y,w} = (N_{y,w} + α) / (T_y + αV)
    den = np.array([class_tokens[y] for y in labels]) + alpha * len(tokens)
    theta = (table + alpha) / den
    logs = np.log(theta)
    return _token_entries("token", tokens, labels, theta, logs, logs, totals * scale, top)


def complement_entries(
    stats: Mapping[str, Any], alpha: float, scale: float, top: int | None
) -> list[Entry]:
    """``token`` entries of a ComplementNB state's statistics (α in raw units)."""
    found = _token_classes(stats, None)
    if found is None:
        return []
    _, labels = found
    class_tokens = from_pairs(stats["class_tokens"])
    tokens, table, totals = _token_table(stats, labels)
    # θ_{y,w} = (C_{y,w} + α) / (Σ_w C_{y,w} + αV), C_{y,w} = N_w − N_{y,w}, Σ_w C_{y,w} = T − T_y
    total = sum(class_tokens.values())
    den = np.array([total - class_tokens[y] for y in labels]) + alpha * len(tokens)
    theta = (totals[:, None] - table + alpha) / den
    logs = np.log(theta)
    # a token favours the class whose complement rate is smaller
    return _token_entries(
        "token", tokens, labels, theta, logs, logs, totals * scale, top, favours_smaller=True
    )


def bernoulli_entries(
    stats: Mapping[str, Any], alpha: float, class_prior: Any, scale: float, top: int | None
) -> list[Entry]:
    """``binary`` entries of a BernoulliNB state's statistics (α in raw units)."""
    found = _token_classes(stats, class_prior)
    if found is None:
        return []
    class_weight, labels = found
    tokens, table, totals = _token_table(stats, labels)
    # p_{y,w} = (N_{y,w} + α) / (N_y + 2α)
    p = (table + alpha) / (np.array([class_weight[y] for y in labels]) + 2.0 * alpha)
    logs = np.log(p)
    logits = logs - np.log1p(-p)
    return _token_entries("binary", tokens, labels, p, logs, logits, totals * scale, top)


# ---------------------------------------------------------------------- semi-naive
def mutual_information(store: Mapping[str, Any]) -> dict[Hashable, float]:
    """``I(X_f; Y)`` per feature from a PairStore state, as the structure search computes it.

    ``Σ_v Σ_y N(y, x_f) log(N(y, x_f) N_f / (N(y, f) N(x_f))) / N``: the maximum
    likelihood mutual information over events where ``f`` is present, times
    the fraction of such events (absence carries no information).
    """
    nb = store["nb"]
    total = float(nb["total_weight"])
    present = _tree(nb["present"], depth=2)
    counts = _tree(nb["counts"], depth=3)
    feature_weight = _tree(store["feature_weight"], depth=1)
    value_weight = _tree(store["value_weight"], depth=2)
    out: dict[Hashable, float] = {}
    for f, values in counts.items():
        n_f = feature_weight[f]
        by_class = present[f]
        mi = 0.0
        for v, value_counts in values.items():
            n_v = value_weight[f][v]
            for y, n in value_counts.items():
                if n > 0.0:
                    mi += n * log_product_ratio(n, n_f, by_class[y], n_v)
        out[f] = mi / total if total > 0 else 0.0
    return out


def seminaive_entries(stats: Mapping[str, Any], alpha: float, top: int | None) -> list[Entry]:
    store = stats["store"]
    nb = store["nb"]
    labels = [decode_key(y) for y, _ in nb["class_weight"]]
    present, counts = _tree(nb["present"], depth=2), _tree(nb["counts"], depth=3)
    entries = categorical_entries(labels, present, counts, alpha, None, top)
    if not entries:
        return entries
    mi = mutual_information(store)
    edges = from_pairs(stats["discretiser"]["edges"])
    for e in entries:
        e["mutual_information"] = mi[e["feature"]]
        cuts = edges.get(e["feature"])
        v = e["value"]
        if cuts is not None and type(v) is int:  # a bin index: bisect_right(cuts, value)
            e["interval"] = [cuts[v - 1] if v > 0 else None, cuts[v] if v < len(cuts) else None]
    return entries
