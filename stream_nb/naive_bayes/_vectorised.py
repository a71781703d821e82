"""Exact batched prequential steps for GaussianNB and NaiveBayes (numpy).

:meth:`stream_nb.base.Learner.predict_learn_many` is defined as the loop
"predict event ``i`` with the model that learned events ``0..i-1``, then learn
it". For Gaussian and categorical statistics every quantity event ``i`` sees
is a *prefix sum* over the batch, so the whole batch is computed with a few
array operations instead of one Python loop per event and feature.

Gaussian statistics (per class ``k`` and feature ``j``; shift ``d = x - μ₀``
by the class mean at the batch start, so the sums do not cancel)::

    W_i  = Σ_{l<i, y_l=k} w_l                   n_i  = n₀ + W_i
    S1_i = Σ_{l<i, y_l=k} w_l d_l               μ_i  = μ₀ + S1_i / n_i
    S2_i = Σ_{l<i, y_l=k} w_l d_l²              M2_i = M2₀ + S2_i - S1_i² / n_i

(the Welford/Chan merge of the batch prefix into the start statistics). The
global per-feature statistics of ε likewise, with ``ε_i = var_smoothing ×
max_j M2g_ij / ng_ij`` (``var_smoothing_mode="global"``) or ``ε_ij =
var_smoothing × M2g_ij / ng_ij`` (``"feature"``; a feature with ``M2g_ij = 0``
is left out of event ``i``'s scores, as on the per-event path). Categorical
counts ``N_{k,f,v}`` before event ``i`` are the start counts plus an
exclusive cumulative sum grouped by value, the present weights ``N_{k,f}``
the class prefix ``W_i``, and the number of distinct values ``S_f`` grows by
one at the first *learned* occurrence of a new value; a missing categorical
value (``None``) adds no term
(:mod:`~stream_nb.naive_bayes._categorical_batch`). Scores then follow the
learners' formulas for all events × classes at once (with ``feature_weights``,
each term times its feature's weight), and the statistics after
the batch are the prefix at ``i = B``. A tracked model-sync delta gets the
batch's own moments (merged by Chan's formula) and counts.

The result equals the per-event path to rounding (about 1e-12 relative on
the log posteriors; the tests ask for 1e-9). Anything unusual returns
``None`` and the caller runs the per-event loop: a renormalisation of the
forgetting scale (``half_life``: otherwise the batch is learned with its raw
weights, see :class:`stream_nb._decay.BatchDecay`), a class missing from
``class_prior``, a label not learned before the batch, events with other keys than the learned
features, missing (``None``) or non-numeric Gaussian values, values beyond
``±MAX_VALUE`` or weights outside ``[MIN_WEIGHT, MAX_WEIGHT]``
(:mod:`stream_nb.limits`: the per-event path rejects those events), sums of
the batch whose squares leave the double range, classes without statistics
for some feature, all-constant features.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_nb._decay import BatchDecay
from stream_nb._mle import resolve_zero_terms
from stream_nb.limits import MAX_VALUE, MIN_VARIANCE
from stream_nb.naive_bayes._arrays import (
    MIN_BATCH,
    BatchClasses,
    exclusive_cumsum,
    fixed_log_priors,
    per_event_answers,
    posteriors,
    sum_of_logs,
)
from stream_nb.naive_bayes._categorical_batch import CategoricalColumns
from stream_nb.naive_bayes._categorical_stats import CategoricalStatistics
from stream_nb.stats import LOG_2PI

if TYPE_CHECKING:
    from stream_nb.naive_bayes._gaussian_stats import GaussianStatistics

__all__ = ["MIN_BATCH", "gaussian_predict_learn_columns", "gaussian_predict_learn_many"]

#: Same floor as GaussianStatistics.epsilon (ε never below it).
_MIN_EPSILON = MIN_VARIANCE

_NUMBERS = frozenset((int, float))

Result = tuple[list[dict[Hashable, float] | None], list[Hashable | None], dict[int, Exception]]
#: ``(labels, log_proba, best)``: the classes, the B × K log posteriors, the decisions' columns
ColumnResult = tuple[list[Hashable], np.ndarray, np.ndarray]
#: A :data:`ColumnResult` and the number of events learned
KernelResult = tuple[list[Hashable], np.ndarray, np.ndarray, int]
#: A learner's column kernel: ``(names, columns, ys, ws)`` -> a result or ``None``
ColumnStep = Callable[
    [tuple[str, ...], Sequence[Sequence[Any]], Sequence[Hashable | None], Sequence[float] | None],
    "tuple[list[Hashable], Any, Any] | None",
]


def gaussian_predict_learn_many(
    step: ColumnStep,
    xs: Sequence[Mapping[str, Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float],
) -> Result | None:
    """``predict_learn_many(xs, ys, ws)`` of a learner whose column kernel is ``step``
    (:meth:`~stream_nb.base.Learner.predict_learn_columns` or what it runs).

    For events that all have the same keys, in the same order: their values
    become columns, ``step`` runs, and its arrays become the per-event answers.
    ``None`` (nothing changed) when the batch is not one the kernel handles;
    the caller then runs the per-event loop. See the module docstring.
    """
    b = len(xs)
    if b < MIN_BATCH or len(ys) != b or len(ws) != b:
        return None
    keys = tuple(xs[0])
    if not all(map(keys.__eq__, map(tuple, xs))):
        return None
    columns = list(zip(*[x.values() for x in xs])) if keys else []  # noqa: B905
    out = step(keys, columns, ys, ws)
    if out is None:
        return None
    labels, log_proba, best = out
    return per_event_answers(labels, log_proba, best)


def gaussian_predict_learn_columns(
    g: GaussianStatistics,
    cat: CategoricalStatistics | None,
    categorical: tuple[str, ...],
    names: tuple[str, ...],
    columns: Sequence[Sequence[Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
    *,
    var_smoothing: float,
    category_alpha: float,
    feature_weights: Sequence[float] | None = None,
    category_weights: Sequence[float] | None = None,
    delta: GaussianStatistics | None = None,
    delta_categorical: CategoricalStatistics | None = None,
    decay: BatchDecay | None = None,
) -> KernelResult | None:
    """Predict then learn a batch of column-wise events into Gaussian (and categorical)
    statistics: feature ``names[j]`` of event ``i`` is ``columns[j][i]``.

    ``g`` holds the Gaussian features (``g.order``), ``cat`` the categorical
    ones: ``categorical`` names those of the batch (``()`` for GaussianNB,
    whose ``cat`` is ``None``); ``category_alpha`` smooths their terms. The
    caller checks that there is no forgetting and no fixed class prior.
    ``feature_weights``: the weight of each Gaussian feature, in ``g.order``
    (``None``: every one 1); each feature's term is times its weight, and a
    feature of weight 0 is left out; ``category_weights`` likewise for the
    categorical features, in the order of ``categorical``.

    Returns ``(labels, log_proba, best, learned)``: row ``i`` of the ``B × K``
    array ``log_proba`` holds ``log P(labels[k] | x_i)`` before event ``i`` is
    learned, ``labels[best[i]]`` is its decision (the first most probable
    class) and ``learned`` the number of labelled events; ``None`` and nothing
    changed when the batch is not one the kernel handles. ``ws=None`` means
    every weight is 1.

    ``delta`` and ``delta_categorical``: the statistics of a tracked model-sync
    delta (:meth:`~stream_nb.base.Learner.track_delta`), which get what the
    batch learned: its own moments per class, merged by Chan's formula, and its
    category counts.

    ``decay``: the forgetting of a learner with ``half_life`` over this batch
    (:class:`stream_nb._decay.BatchDecay`): the events are learned with its raw
    weights, and the prior and category terms smoothed with ``α / scale``
    before each event (means and variances are ratios of raw weights); the
    caller sets the scale after the batch.
    """
    b = len(ys)
    labels = g.labels
    index = g.class_index
    n_classes = len(labels)
    gaussian: tuple[Hashable, ...] = g.order
    if b < MIN_BATCH or n_classes == 0 or len(columns) != len(names):
        return None
    if gaussian and (g.missing or g.max_var <= 0.0):
        return None
    if (cat is None and categorical) or not (gaussian or categorical):
        return None  # (no categorical statistics to learn them into; nothing to learn)
    where: dict[Hashable, int] = {f: j for j, f in enumerate(names)}
    x = None
    if gaussian:
        x = _gaussian_values([columns[where[f]] for f in gaussian], b)
        if x is None:
            return None
    batch = None
    if categorical and cat is not None:
        batch = CategoricalColumns.of(cat, categorical, [columns[where[f]] for f in categorical], b)
        if batch is None:
            return None
    classes = BatchClasses.of(list(labels), index, ys, ws)
    if classes is None:
        return None
    prior_alpha: float | np.ndarray = g.prior_alpha
    cat_alpha: float | np.ndarray = category_alpha
    if decay is not None:  # raw weights, and α in raw units before each event
        classes = classes.reweighted(decay.raw)
        if prior_alpha:
            prior_alpha = decay.smoothing(g.prior_alpha)
        if category_alpha:
            cat_alpha = decay.smoothing(category_alpha)
    # categorical codes, checked before any statistic changes
    if batch is not None and not batch.encode():
        return None

    terms = None
    if x is not None:
        terms = _GaussianTerms.of(g, x, classes, var_smoothing, feature_weights)
        if terms is None:
            return None  # all features constant at some point: the per-event path
        jll = terms.jll
    else:
        jll = np.zeros((n_classes, b))
    # learning weight of every event (0 if unlabelled), and the weight learned before it
    wl = np.where(classes.labelled, classes.w, 0.0)
    learned_before = exclusive_cumsum(wl)  # B
    # --- prior: log class_prior[y], log((N_y + α) / (N + Kα)), or the uniform 1/K
    if g.class_prior is not None:
        fixed = fixed_log_priors(labels, g.class_prior)
        if fixed is None:
            return None  # a class without a prior: left out of the per-event path's answers
        jll += fixed
    elif g.fit_prior:
        cw = np.array(g.class_weight)[:, None] + classes.before
        den = g.total_weight + learned_before + n_classes * prior_alpha
        jll += np.log(cw + prior_alpha) - np.log(den)[None, :]
    else:
        jll -= math.log(n_classes)
    # --- categorical terms: log((N_{y,f,v} + α) / (N_{y,f} + S_f α)) (see _categorical_batch)
    if batch is not None and category_alpha == 0:  # maximum likelihood: stream_nb._mle's rule
        found = batch.mle_log_likelihoods(classes, category_weights)
        if found is None:
            return None  # a value past max_values_per_feature, or not a category
        jll += found[0]
        jll = resolve_zero_terms(jll.T, found[1].T).T
        if not np.isfinite(jll).all():
            return None  # a class of probability 0: the per-event path's records leave it out
    elif batch is not None:
        cat_terms = batch.log_likelihoods(classes, cat_alpha, category_weights)
        if cat_terms is None:
            return None  # a value past max_values_per_feature, or not a category
        jll += cat_terms

    # --- normalise (max-shifted log-sum-exp) and decide (first maximum)
    normalised = posteriors(jll)
    if normalised is None:
        return None  # (a score beyond the double range: the per-event path)
    log_proba, best = normalised
    result_labels = list(labels)

    # --- the statistics after the batch (prefix at i = B), then learn counters
    wk = classes.onehot.sum(axis=1)  # K
    end = _empty_end(n_classes) if terms is None else terms.end(wk, wl)
    if end is None:
        return None  # a batch sum squared past the double range: the per-event path
    # per class: (label, learned weight); unit weights give exact integer sums
    learned = classes.learned(ys, wk)
    if delta is not None and classes.n_labelled:
        # the batch's own statistics (shifted by the start means, as above)
        order = classes.first_order()
        moments, all_moments = (
            (([[] for _ in order], [[] for _ in order]), (float(wl.sum()), [], []))
            if terms is None
            else terms.batch_moments(order, wk, wl)
        )
        delta.merge_batch(
            [labels[k] for k in order], gaussian, wk[order].tolist(), moments, all_moments
        )
    g.set_batch_end(
        end[0],
        end[1],
        [
            (index[y], c)
            for y, c in (learned.class_weights if classes.unit else learned.event_weights)
        ],
        [float(classes.n_labelled)] if classes.unit else [wi for _, wi in learned.event_weights],
    )
    if batch is not None:
        batch.learn(classes, ys, learned, delta_categorical)
    return result_labels, log_proba, best, classes.n_labelled


def _gaussian_values(g_cols: list[Sequence[Any]], b: int) -> np.ndarray | None:
    """The Gaussian features' values, F × B, or ``None`` unless every one is an ``int``
    or ``float`` within ``±MAX_VALUE``."""
    if any(len(col) != b for col in g_cols):
        return None
    if not _NUMBERS.issuperset(map(type, itertools.chain.from_iterable(g_cols))):
        return None  # (one C-level pass over every value)
    try:  # F × B (fromiter: no dtype discovery, which np.array does per element)
        x = np.fromiter(itertools.chain.from_iterable(g_cols), np.float64, len(g_cols) * b)
        x = x.reshape(len(g_cols), b)
    except (OverflowError, ValueError, TypeError):
        return None  # e.g. an int beyond the float range: the per-event path says so
    if not (np.abs(x) <= MAX_VALUE).all():
        return None  # NaN, ±inf or out of range: the per-event path rejects those events
    return x


#: ``((n, mean, m2), (all_n, all_mean, all_m2))`` after a batch, as set_batch_end takes them
End = tuple[
    tuple[list[list[float]], list[list[float]], list[list[float]]],
    tuple[list[float], list[float], list[float]],
]


def _empty_end(n_classes: int) -> End:
    """The Gaussian statistics of a model without Gaussian features."""
    rows: list[list[float]] = [[] for _ in range(n_classes)]
    return (rows, [list(r) for r in rows], [list(r) for r in rows]), ([], [], [])


class _GaussianTerms:
    """The Gaussian terms of a batch (``jll``: K × B, without the prior) and the sums
    over the batch that give the statistics after it (see the module docstring)."""

    g: GaussianStatistics
    jll: np.ndarray
    n0: np.ndarray  # the start statistics: per class (F × K) and over every event (F)
    mean0: np.ndarray
    m20: np.ndarray
    gmean0: np.ndarray
    gm20: np.ndarray
    t1: np.ndarray  # the batch's sums S1, S2 per class (F × K)
    t2: np.ndarray
    gd: np.ndarray  # over every event: x - mean, w (x - mean), its prefix sums, weights
    gwd: np.ndarray
    gs1: np.ndarray
    gs2: np.ndarray
    gn: np.ndarray

    @classmethod
    def of(
        cls,
        g: GaussianStatistics,
        x: np.ndarray,
        classes: BatchClasses,
        var_smoothing: float,
        feature_weights: Sequence[float] | None,
    ) -> _GaussianTerms | None:
        """The terms of the F × B values ``x``; ``None`` when every feature is constant
        before some event (the per-event path)."""
        self = cls()
        self.g = g
        g.sync()  # materialise lazily kept weights and variances
        # Layout F × K × B (feature, class, event): the events run along the last,
        # contiguous axis, so every numpy loop is B long (a short last axis costs ~10x),
        # and the sums over features are over the leading axis.
        n0 = self.n0 = np.array(g.n).T  # F × K
        mean0 = self.mean0 = np.array(g.mean).T
        m20 = self.m20 = np.array(g.m2).T
        gn0 = np.array(g.all_n)  # F
        gmean0 = self.gmean0 = np.array(g.all_mean)
        gm20 = self.gm20 = np.array(g.all_m2)
        onehot_kb = classes.onehot  # K × B learning weights

        # --- per-class Gaussian statistics before every event: F × K × B
        # (in place where possible: fewer temporaries stay in the CPU caches)
        d = x[:, None, :] - mean0[:, :, None]
        wd = onehot_kb[None, :, :] * d
        s1 = exclusive_cumsum(wd, axis=-1)
        self.t1 = s1[:, :, -1] + wd[:, :, -1]  # the batch's sums S1, S2 (F × K), for after it
        wd *= d  # w d², in place
        s2 = exclusive_cumsum(wd, axis=-1)
        self.t2 = s2[:, :, -1] + wd[:, :, -1]
        del wd
        wc = classes.before  # K × B
        # 1 / n_i; without missing values every feature has its class's weight: K × B
        if (n0 == n0[:1]).all():
            inv_n = 1.0 / (n0[0][:, None] + wc)
        else:
            inv_n = 1.0 / (n0[:, :, None] + wc[None, :, :])
        shift = s1 * inv_n  # μ_i - μ₀ = S1_i / n_i
        var = s1 * shift  # M2_i / n_i = (M2₀ + S2_i - S1_i² / n_i) / n_i
        np.subtract(s2, var, out=var)
        var += m20[:, :, None]
        var *= inv_n
        # --- global statistics (ε): F × B
        gd = self.gd = x - gmean0[:, None]
        wl = np.where(classes.labelled, classes.w, 0.0)  # each event's learning weight
        gwd = self.gwd = wl[None, :] * gd
        gs1 = self.gs1 = exclusive_cumsum(gwd, axis=-1)
        gs2 = self.gs2 = exclusive_cumsum(gwd * gd, axis=-1)
        gn = self.gn = gn0[:, None] + exclusive_cumsum(wl)[None, :]
        gvar = (gm20[:, None] + gs2 - gs1 * gs1 / gn) / gn
        maxvar = gvar.max(axis=0)
        if not (maxvar > 0.0).all():
            return None  # all features constant at some point: the per-event path
        v = var
        active = None  # per-feature ε: the features that are scored, F × B
        if g.per_feature:
            # ε_f = var_smoothing × V_f (floored); a feature constant so far (V_f = 0) is
            # left out (see feature_epsilons): σ² = 1 there, its terms zeroed below
            active = gvar > 0.0
            v += np.where(active, np.maximum(var_smoothing * gvar, _MIN_EPSILON), 1.0)[:, None, :]
        else:
            v += np.maximum(var_smoothing * maxvar, _MIN_EPSILON)[None, None, :]
        z2 = np.subtract(d, shift, out=shift)  # x - μ_i = d - S1_i / n_i
        z2 *= z2
        z2 /= v
        n_scored: Any = len(x)
        if active is not None and not active.all():
            z2 = np.where(active[:, None, :], z2, 0.0)
            v = np.where(active[:, None, :], v, 1.0)
            n_scored = active.sum(axis=0)
        # K × B
        if feature_weights is None:
            self.jll = -0.5 * (n_scored * LOG_2PI + sum_of_logs(v) + z2.sum(axis=0))
        else:
            self.jll = -0.5 * _weighted_sum(v, z2, active, feature_weights)
        return self

    def end(self, wk: np.ndarray, wl: np.ndarray) -> End | None:
        """The statistics after the batch (``wk``: each class's learned weight, ``wl``:
        each event's), or ``None`` when a sum squared leaves the double range."""
        n_end = self.n0 + wk[None, :]
        t1 = self.t1
        # (M2 is a sum of squares: a difference that rounds below 0 is 0, as per event)
        m2_end = np.maximum(self.m20 + self.t2 - t1 * t1 / n_end, 0.0)
        g1 = self.gs1[:, -1] + self.gwd[:, -1]
        g2 = self.gs2[:, -1] + self.gwd[:, -1] * self.gd[:, -1]
        gn_end = self.gn[:, -1] + wl[-1]
        gm2_end = np.maximum(self.gm20 + g2 - g1 * g1 / gn_end, 0.0)
        if not (np.isfinite(m2_end).all() and np.isfinite(gm2_end).all()):
            return None
        return (
            (n_end.T.tolist(), (self.mean0 + t1 / n_end).T.tolist(), m2_end.T.tolist()),
            (gn_end.tolist(), (self.gmean0 + g1 / gn_end).tolist(), gm2_end.tolist()),
        )

    def batch_moments(
        self, order: list[int], wk: np.ndarray, wl: np.ndarray
    ) -> tuple[tuple[list[list[float]], list[list[float]]], tuple[float, list[float], list[float]]]:
        """The batch's own moments, per class (``order``: the classes in the order the
        batch met them) and over every event, for ``GaussianStatistics.merge_batch``."""
        w_k = wk[order]
        t1_k = self.t1[:, order]
        g1 = self.gs1[:, -1] + self.gwd[:, -1]
        g2 = self.gs2[:, -1] + self.gwd[:, -1] * self.gd[:, -1]
        gw = float(wl.sum())
        return (
            (
                (self.mean0[:, order] + t1_k / w_k).T.tolist(),
                np.maximum(self.t2[:, order] - t1_k * t1_k / w_k, 0.0).T.tolist(),
            ),
            (gw, (self.gmean0 + g1 / gw).tolist(), np.maximum(g2 - g1 * g1 / gw, 0.0).tolist()),
        )


def _weighted_sum(
    v: np.ndarray, z2: np.ndarray, active: np.ndarray | None, weights: Sequence[float]
) -> np.ndarray:
    """``Σ_f w_f (log 2π + log σ² + z²)`` over the features (the first axis of the F × K × B
    arrays ``v`` = σ² and ``z2``), a feature of weight 0 left out; ``active`` (F × B, per-feature
    ε) marks the features scored for each event (the others have ``σ² = 1`` and ``z² = 0``)."""
    fw = np.asarray(weights, dtype=np.float64)
    terms = np.log(v)
    terms += z2
    terms += LOG_2PI if active is None else np.where(active, LOG_2PI, 0.0)[:, None, :]
    terms[fw == 0.0] = 0.0  # (before the product: 0 × inf would be NaN)
    terms *= fw[:, None, None]
    out: np.ndarray = terms.sum(axis=0)
    return out
