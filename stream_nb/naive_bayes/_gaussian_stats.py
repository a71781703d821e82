"""The Gaussian statistics component of :class:`~stream_nb.naive_bayes.gaussian.GaussianNB`
and :class:`~stream_nb.naive_bayes.mixed.NaiveBayes`.

Layout (chosen for the prequential hot loop, see docs/gaussian.md): classes
and features get dense indices ``k`` and ``j`` in order of first appearance;
class ``k`` keeps flat lists ``n[k][j]``, ``mean[k][j]``, ``m2[k][j]`` and
the derived population variance ``var[k][j] = M2 / n``. When an event has
exactly the learned features in the learned order (the common case for
real-valued streams) one ``zip`` over the values and these lists does all the
work; anything else goes through a general per-feature path. How the
statistics score an event is :mod:`stream_nb.naive_bayes._gaussian_scores`, how
they are read from a state :mod:`stream_nb.naive_bayes._gaussian_state`, and the
batch (column) kernel over them :mod:`stream_nb.naive_bayes._vectorised`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Hashable, Iterable, Mapping, Sequence
from typing import Any

from stream_nb._exceptions import ConfigError
from stream_nb._params import check_nonneg
from stream_nb._state import encode_key, pairs
from stream_nb.limits import MAX_VALUE, MAX_VAR_SMOOTHING, MIN_VARIANCE, check_number
from stream_nb.naive_bayes._gaussian_state import read_gaussian_stats
from stream_nb.stats import chan_merge

__all__ = [
    "FEATURE",
    "GLOBAL",
    "VAR_SMOOTHING_DEFAULTS",
    "GaussianStatistics",
    "check_var_smoothing",
    "feature_epsilons",
]

#: ``var_smoothing_mode`` of scikit-learn's rule: ``ε = var_smoothing × max_f V_f``.
GLOBAL = "global"
#: ``var_smoothing_mode`` of the per-feature rule: ``ε_f = var_smoothing × V_f``.
FEATURE = "feature"
#: ``var_smoothing`` when none is given, by mode: scikit-learn's 1e-9 for its rule; for
#: the per-feature rule the value chosen on the accuracy benchmark (docs/benchmarks.md).
VAR_SMOOTHING_DEFAULTS = {GLOBAL: 1e-9, FEATURE: 1e-2}

_log = math.log
_BOOL = frozenset((bool,))
_INF = math.inf

#: Floor of ε when ``var_smoothing × max variance`` is smaller (``var_smoothing=0``
#: or tiny variances): keeps every σ² ≥ 1e-90, so ``(x - μ)² / σ²`` summed over
#: an event stays finite for every value within ``MAX_VALUE`` (see
#: :mod:`stream_nb.limits`). Below the variance of data at any scale above 1e-40.
_MIN_EPSILON = MIN_VARIANCE
#: Largest |x| of a value learned (``out_of_range`` beyond).
_MAX_VALUE = MAX_VALUE

#: The product of σ² over features replaces a sum of logs (one ``log`` per
#: class instead of one per feature) when no partial product can leave the
#: normal float range: every factor is ≥ ε ≥ ``_PRODUCT_FLOOR ** (1/F)``, so
#: partial products stay ≥ 1e-290; overflow is sticky (``inf``) and detected.
_PRODUCT_FLOOR = 1e-290


def check_var_smoothing(value: Any, mode: Any) -> tuple[float, str]:
    """The learner parameters ``var_smoothing`` (``None``: the mode's default, see
    :data:`VAR_SMOOTHING_DEFAULTS`) and ``var_smoothing_mode``, checked.

    Examples
    --------
    >>> check_var_smoothing(None, "feature"), check_var_smoothing(1e-9, "global")
    ((0.01, 'feature'), (1e-09, 'global'))
    >>> check_var_smoothing(None, "max")
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ConfigError: var_smoothing_mode must be 'feature' ...
    """
    if mode not in VAR_SMOOTHING_DEFAULTS:
        raise ConfigError(
            "var_smoothing_mode must be 'feature' (ε_f = var_smoothing × the feature's "
            "variance) or 'global' (scikit-learn's ε = var_smoothing × the largest "
            f"variance), got {mode!r}"
        )
    if value is None:
        return VAR_SMOOTHING_DEFAULTS[mode], mode
    return check_nonneg(value, "var_smoothing", MAX_VAR_SMOOTHING), mode


def feature_epsilons(
    var_smoothing: float, all_n: Sequence[float], all_m2: Sequence[float]
) -> list[float]:
    """``ε_f`` of the per-feature rule from each feature's weight and M2 over every event.

    ``ε_f = var_smoothing × V_f`` with ``V_f = M2_f / n_f``, floored at
    :data:`~stream_nb.limits.MIN_VARIANCE`; ``0.0`` (the feature is left out of
    the scores) when ``V_f = 0``: a feature constant over every learned event
    has the same mean and variance 0 in every class, so its terms are equal for
    every class and change no posterior.

    Examples
    --------
    >>> feature_epsilons(0.01, [4.0, 4.0, 2.0], [8.0, 0.0, 1e-100])
    [0.02, 0.0, 1e-90]
    """
    out = []
    for n, s in zip(all_n, all_m2, strict=True):
        if s > 0.0 and n > 0.0:
            e = var_smoothing * (s / n)
            out.append(e if e > _MIN_EPSILON else _MIN_EPSILON)
        else:
            out.append(0.0)
    return out


class GaussianStatistics:
    """Class weights and per-(class, feature) Welford statistics with ε bookkeeping.

    One table for every (class ``k``, feature ``j``): weight ``n[k][j]``,
    mean ``mean[k][j]``, ``m2[k][j]`` and the derived ``var[k][j]``; the class
    weights ``class_weight[k]`` and their sum ``total_weight``. The learner
    owns one, learns through it, scores with
    :mod:`~stream_nb.naive_bayes._gaussian_scores`, and keeps the forgetting
    scale: weights passed in are raw (see :class:`~stream_nb.base.Learner`).

    Prior: ``log P(y) = log((N_y + α) / (N + Kα))`` with α = ``prior_alpha``
    (0 for GaussianNB, i.e. ``log(N_y / N)``), the uniform prior when
    ``fit_prior`` is false and ``class_prior`` when given, exactly as
    :func:`stream_nb._params.log_prior`.

    ε (``per_feature`` false, scikit-learn's rule): ``ε = var_smoothing × max_j
    all_var[j]`` for every feature; ``per_feature``: ``ε_j = var_smoothing ×
    all_var[j]`` (:func:`feature_epsilons`); :meth:`epsilons` gives either.

    ε bookkeeping: ``all_var[j]`` is the population variance of feature ``j``
    over every learned event (a second Welford per feature: ``all_n``,
    ``all_mean``, ``all_m2``), ``max_var = all_var[max_feature]`` its maximum
    and ``second_var`` an upper bound of every other ``all_var``. Updating a
    non-maximal feature costs one comparison; only when the maximal feature's
    variance drops below ``second_var`` is the maximum searched again
    (O(features), rare).

    Parameters
    ----------
    var_smoothing, class_prior
        The learner's parameters of those names.
    per_feature
        ``var_smoothing_mode="feature"`` of the learner (``False``: ``"global"``).
    prior_alpha, fit_prior
        Smoothing of the class prior (0: maximum likelihood) and whether it is
        learned.
    numeric_hint
        End of the ``non_numeric`` error message; ``{feature}`` is filled in.
    admit
        The learner's bound on new features: given names first met, returns
        those to learn (checked, at most ``max_features`` in all).

    Examples
    --------
    >>> stats = GaussianStatistics(
    ...     var_smoothing=1e-2, class_prior=None, prior_alpha=0.0, fit_prior=True,
    ...     numeric_hint="numbers only", admit=lambda names: names, per_feature=True,
    ... )
    >>> stats.learn({"a": 1.0, "b": 5.0}, "p", 1.0)
    >>> stats.learn({"a": 3.0, "b": 5.0}, "p", 1.0)
    >>> stats.mean, stats.var, stats.labels, stats.epsilons()
    ([[2.0, 5.0]], [[1.0, 0.0]], ['p'], [0.01, 0.0])
    """

    # Slots keep attribute access on the hot path a fixed offset.
    __slots__ = (
        "admit",
        "all_m2",
        "all_mean",
        "all_n",
        "all_n_lazy",
        "all_uniform",
        "all_var",
        "all_var_stale",
        "class_index",
        "class_prior",
        "class_weight",
        "epsilon_floor",
        "feature_index",
        "features",
        "fit_prior",
        "labels",
        "m2",
        "max_feature",
        "max_var",
        "mean",
        "missing",
        "n",
        "n_lazy",
        "numeric_hint",
        "order",
        "per_feature",
        "prior_alpha",
        "scored",
        "scored_labels",
        "second_var",
        "total_weight",
        "uniform",
        "var",
        "var_smoothing",
    )

    def __init__(
        self,
        *,
        var_smoothing: float,
        class_prior: dict[Hashable, float] | None,
        prior_alpha: float,
        fit_prior: bool,
        numeric_hint: str,
        admit: Callable[[Sequence[Any]], list[Any]],
        per_feature: bool = False,
    ) -> None:
        self.var_smoothing = var_smoothing
        self.per_feature = per_feature
        self.class_prior = class_prior
        self.prior_alpha = prior_alpha
        self.fit_prior = fit_prior
        self.numeric_hint = numeric_hint
        self.admit = admit
        self.reset()

    # ------------------------------------------------------------------ setup
    def reset(self) -> None:
        """Forget every statistic (the settings stay)."""
        self.labels: list[Hashable] = []
        self.class_index: dict[Hashable, int] = {}
        self.class_weight: list[float] = []
        self.total_weight = 0.0
        self.features: list[Hashable] = []
        self.feature_index: dict[Hashable, int] = {}
        self.order: tuple[Hashable, ...] = ()
        self.n: list[list[float]] = []
        self.mean: list[list[float]] = []
        self.m2: list[list[float]] = []
        self.var: list[list[float]] = []
        self.all_n: list[float] = []
        self.all_mean: list[float] = []
        self.all_m2: list[float] = []
        self.all_var: list[float] = []
        self.max_var = 0.0
        self.max_feature = -1
        self.second_var = 0.0
        self.missing = 0  # (class, feature) pairs without statistics
        # uniform[k]: every n[k][j] is equal (all class-k events had every feature);
        # all_uniform: the same for the global n. Dense learning then skips per-feature n.
        self.uniform: list[bool] = []
        self.all_uniform = True
        self.all_var_stale = False  # all_var is not kept up to date by uniform dense learning
        self.n_lazy: list[bool] = []  # n[k][1:] not filled in (equal to n[k][0])
        self.all_n_lazy = False  # the same for all_n
        self.epsilon_floor = 1.0  # ε at or above this keeps the σ² product in range
        # (label, k, fixed log prior or None): the classes that are scored
        self.scored: list[tuple[Hashable, int, float | None]] = []
        self.scored_labels: list[Hashable] = []

    def add_class(self, y: Hashable, rescore: bool = True) -> int:
        """Give class ``y`` statistics of weight 0 (O(features)); ``rescore=False``
        leaves the list of scored classes to the caller, who adds several at once."""
        k = len(self.labels)
        f = len(self.features)
        self.labels.append(y)
        self.class_index[y] = k
        self.class_weight.append(0.0)
        self.n.append([0.0] * f)
        self.mean.append([0.0] * f)
        self.m2.append([0.0] * f)
        self.var.append([0.0] * f)
        self.uniform.append(True)
        self.n_lazy.append(False)
        self.missing += f
        if rescore:
            self.rebuild_scored()
        return k

    def add_features(self, features: Sequence[Hashable]) -> None:
        """Give new features (not learned yet) statistics of weight 0 in every class.

        O(len(features) × classes): every list grows by ``extend``, and ``order``
        (the key tuple of dense events) is rebuilt once for the whole batch, so
        an event with many new features costs O(its features), not O(model) per
        feature.
        """
        if not features:
            return
        self.sync()
        j = len(self.features)
        self.features.extend(features)
        fidx = self.feature_index
        for f in features:
            fidx[f] = j
            j += 1
        self.order = tuple(self.features)
        # a new feature has weight 0 everywhere: uniformity survives only where all was 0
        self.uniform = [
            u and (not row or row[0] == 0.0) for u, row in zip(self.uniform, self.n, strict=True)
        ]
        self.all_uniform = self.all_uniform and (not self.all_n or self.all_n[0] == 0.0)
        zeros = [0.0] * len(features)
        for lst in (*self.n, *self.mean, *self.m2, *self.var):
            lst.extend(zeros)
        for lst in (self.all_n, self.all_mean, self.all_m2, self.all_var):
            lst.extend(zeros)
        self.missing += len(self.labels) * len(features)
        self.epsilon_floor = _PRODUCT_FLOOR ** (1.0 / j)

    def rebuild_scored(self) -> None:
        prior = self.class_prior
        if prior is None:
            self.scored = [(y, k, None) for k, y in enumerate(self.labels)]
        else:
            self.scored = [(y, k, _log(prior[y])) for k, y in enumerate(self.labels) if y in prior]
        if prior is None and not self.fit_prior:
            uniform = -_log(len(self.labels))
            self.scored = [(y, k, uniform) for y, k, _ in self.scored]
        self.scored_labels = [y for y, _, _ in self.scored]

    def epsilons(self) -> list[float]:
        """ε of every feature, in feature order; ``0.0``: the feature is left out.

        Global rule: ``var_smoothing × max variance`` (floored at
        :data:`~stream_nb.limits.MIN_VARIANCE`) for every feature, or 0 for every
        feature when every learned feature is constant (max variance 0): every
        class that has statistics for a feature then has the same mean and
        variance 0 for it, so the Gaussian terms are equal for all classes and
        left out (the posterior is the prior). Per-feature rule:
        :func:`feature_epsilons`. O(features).
        """
        if self.per_feature:
            gn = self.all_n
            if self.all_n_lazy or self.all_uniform:  # (every entry equals entry 0)
                n = gn[0] if gn else 0.0
                if n > 0.0:
                    # ε_f = var_smoothing × M2_f / n with one division in all
                    c = self.var_smoothing / n
                    eps = [s * c for s in self.all_m2]
                    if min(eps) >= _MIN_EPSILON:  # (no 0 to leave out, no floor)
                        return eps
                gn = [n] * len(gn)
            return feature_epsilons(self.var_smoothing, gn, self.all_m2)
        mx = self.max_var
        if mx <= 0.0:
            return [0.0] * len(self.features)
        e = self.var_smoothing * mx
        return [e if e > _MIN_EPSILON else _MIN_EPSILON] * len(self.features)

    # ------------------------------------------------------------------ learning
    def learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        """Learn the numeric features of ``x`` (all of them) for class ``y``."""
        if tuple(x) != self.order:
            return self.learn_general(x, y, w)
        vals = x.values()
        try:
            s = sum(map(abs, vals))
        except (TypeError, OverflowError):  # None, a non-number, an int past the double
            return self.learn_general(x, y, w)  # range: the general path says which
        # NaN, an infinity or a value beyond ±MAX_VALUE (Σ|x| ≥ each |x|): the general
        # path says which (or, for a sum past MAX_VALUE of values within it, learns it)
        if not s <= _MAX_VALUE or not _BOOL.isdisjoint(map(type, vals)):
            return self.learn_general(x, y, w)
        # Dense event: every learned feature, in order, validated.
        k = self.class_index.get(y)
        if k is None:
            k = self.add_class(y)
        self.class_weight[k] += w
        self.total_weight += w
        n_k = self.n[k]
        if not n_k:
            return
        m_k = self.mean[k]
        s_k = self.m2[k]
        v_k = self.var[k]
        gm = self.all_mean
        gs = self.all_m2
        if self.uniform[k] and self.all_uniform:
            # Every event so far had every feature: one weight per class and one
            # in total, kept in n[k][0] and gn[0] (the other entries are filled
            # in lazily, see sync), and max_f V_f = max_f M2_f / n.
            n = n_k[0]
            if self.missing and n == 0.0:
                self.missing -= len(n_k)
            n += w
            n_k[0] = n
            self.n_lazy[k] = True
            gn_ = self.all_n
            gn = gn_[0] + w
            gn_[0] = gn
            self.all_n_lazy = True
            mx = -1.0
            am = 0
            # Welford with n' = n + w: μ' = μ + d·(w/n'), M2' = M2 + d²·w(n'-w)/n'
            # (= M2 + w·d·(x - μ'), with one subtraction less per feature)
            r = w / n
            c = w * (n - w) / n
            gr = w / gn
            gc = w * (gn - w) / gn
            for j, x_f in enumerate(vals):
                m = m_k[j]
                d = x_f - m
                m_k[j] = m + d * r
                s = s_k[j] + d * d * c
                s_k[j] = s
                v_k[j] = s / n
                m = gm[j]
                d = x_f - m
                gm[j] = m + d * gr
                s = gs[j] + d * d * gc
                gs[j] = s
                if s > mx:
                    mx = s
                    am = j
            self.max_feature = am
            self.max_var = self.second_var = mx / gn
            self.all_var_stale = True
            return
        self.sync()
        if self.missing:
            self.missing -= n_k.count(0.0)
        self.uniform[k] = self.all_uniform = False
        gn_ = self.all_n
        gv = self.all_var
        for j, x_f in enumerate(vals):
            n = n_k[j] + w
            m = m_k[j]
            d = x_f - m
            m += d * (w / n)  # w/n first: exactly 1 for a first event
            s = s_k[j] + w * d * (x_f - m)
            if s < 0.0:  # (rounding: μ' may step past x when w/n ≈ 1)
                s = 0.0
            n_k[j] = n
            m_k[j] = m
            s_k[j] = s
            v_k[j] = s / n
            n = gn_[j] + w
            m = gm[j]
            d = x_f - m
            m += d * (w / n)  # w/n first: exactly 1 for a first event
            s = gs[j] + w * d * (x_f - m)
            if s < 0.0:
                s = 0.0
            gn_[j] = n
            gm[j] = m
            gs[j] = s
            gv[j] = s / n
        # every variance changed: the maximum is exact again (O(features) = O(|x|))
        mx = self.max_var = max(gv)
        self.max_feature = gv.index(mx)
        self.second_var = mx
        return None

    def sync(self) -> None:
        """Fill in what uniform dense learning leaves out: the per-feature weights
        (all equal to entry 0) and ``all_var``. O(features) per class left lazy,
        paid at most once per dense event, so amortised."""
        if self.all_n_lazy:
            gn = self.all_n
            gn[:] = [gn[0]] * len(gn)
            self.all_n_lazy = False
        lazy = self.n_lazy
        if True in lazy:
            for k, row in enumerate(self.n):
                if lazy[k]:
                    row[:] = [row[0]] * len(row)
                    lazy[k] = False
        if self.all_var_stale:
            self.all_var = [
                s / n if n > 0.0 else 0.0 for n, s in zip(self.all_n, self.all_m2, strict=True)
            ]
            self.all_var_stale = False

    def learn_general(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        hint = self.numeric_hint
        items = [(f, check_number(f, v, hint)) for f, v in x.items() if v is not None]
        fidx = self.feature_index
        new = [f for f, _ in items if f not in fidx]
        if new:  # names first met: checked, and bounded by max_features
            keep = self.admit(new)
            if len(keep) < len(new):
                dropped = set(new[len(keep) :])
                items = [item for item in items if item[0] not in dropped]
        self.sync()
        k = self.class_index.get(y)
        if k is None:
            k = self.add_class(y)
        self.class_weight[k] += w
        self.total_weight += w
        fidx = self.feature_index
        if new:
            self.add_features([f for f, _ in items if f not in fidx])
        if len(items) != len(fidx):
            # some feature gets no weight from this event: weights no longer uniform
            self.uniform[k] = self.all_uniform = False
        n_k = self.n[k]
        m_k = self.mean[k]
        s_k = self.m2[k]
        v_k = self.var[k]
        gn = self.all_n
        gm = self.all_mean
        gs = self.all_m2
        gv = self.all_var
        mx = self.max_var
        am = self.max_feature
        second = self.second_var
        stale = False
        for f, value in items:
            j = fidx[f]
            if n_k[j] == 0.0:
                self.missing -= 1
            n, m, s = _welford(n_k[j], m_k[j], s_k[j], value, w)
            n_k[j] = n
            m_k[j] = m
            s_k[j] = s
            v_k[j] = s / n
            n, m, s = _welford(gn[j], gm[j], gs[j], value, w)
            gn[j] = n
            gm[j] = m
            gs[j] = s
            var = gv[j] = s / n
            if stale:
                continue
            if j == am:
                if var >= second:
                    mx = var
                else:
                    stale = True  # the maximum may have moved: search again below
            elif var > mx:
                second = mx
                mx = var
                am = j
            elif var > second:
                second = var
        if stale:
            self.find_max()
        else:
            self.max_var, self.max_feature, self.second_var = mx, am, second

    def find_max(self) -> None:
        """Exact maximum of the feature variances, its index and the runner-up."""
        self.sync()
        gv = self.all_var
        if not gv:
            self.max_var, self.max_feature, self.second_var = 0.0, -1, 0.0
            return
        mx = max(gv)
        am = gv.index(mx)
        gv[am] = -1.0
        self.second_var = max(gv) if len(gv) > 1 else 0.0
        gv[am] = mx
        self.max_var = mx
        self.max_feature = am

    # ------------------------------------------------------------------ merge / scale
    def drop_feature(self, feature: Hashable) -> None:
        """Forget every statistic of ``feature`` (a NaiveBayes feature whose numbers are
        binned from now on). O(classes × features).

        Examples
        --------
        >>> stats = GaussianStatistics(
        ...     var_smoothing=1e-9, class_prior=None, prior_alpha=0.0, fit_prior=True,
        ...     numeric_hint="numbers only", admit=lambda names: list(names),
        ... )
        >>> stats.learn({"a": 1.0, "b": 2.0}, "p", 1.0)
        >>> stats.drop_feature("a")
        >>> stats.features, stats.mean, stats.class_weight
        (['b'], [[2.0]], [1.0])
        """
        self.sync()
        j = self.feature_index[feature]
        del self.features[j]
        for table in (self.n, self.mean, self.m2, self.var):
            for row in table:
                del row[j]
        for row in (self.all_n, self.all_mean, self.all_m2, self.all_var):
            del row[j]
        self.feature_index = {f: i for i, f in enumerate(self.features)}
        self.order = tuple(self.features)
        ff = len(self.features)
        self.epsilon_floor = _PRODUCT_FLOOR ** (1.0 / ff) if ff else 1.0
        self.derive()

    def merge(
        self, other: GaussianStatistics, factor: float, exclude: Container[Hashable] = ()
    ) -> None:
        """Add ``other``'s statistics, scaled by ``factor`` (Chan's merge per feature);
        ``other``'s features in ``exclude`` are left out."""
        self.sync()
        other.sync()
        new_classes = [y for y in other.labels if y not in self.class_index]
        for y in new_classes:
            self.add_class(y, rescore=False)
        if new_classes:
            self.rebuild_scored()
        fresh = [f for f in other.features if f not in self.feature_index and f not in exclude]
        self.add_features(self.admit(fresh))
        # other's features past max_features, or excluded, are not learned (-1)
        jmap = [-1 if f in exclude else self.feature_index.get(f, -1) for f in other.features]
        for ko, y in enumerate(other.labels):
            k = self.class_index[y]
            self.class_weight[k] += other.class_weight[ko] * factor
            n_k, m_k, s_k = self.n[k], self.mean[k], self.m2[k]
            on, om, os_ = other.n[ko], other.mean[ko], other.m2[ko]
            for jo, j in enumerate(jmap):
                if j < 0:
                    continue
                n_k[j], m_k[j], s_k[j] = chan_merge(
                    n_k[j], m_k[j], s_k[j], on[jo] * factor, om[jo], os_[jo] * factor
                )
        self.total_weight += other.total_weight * factor
        for jo, j in enumerate(jmap):
            if j < 0:
                continue
            self.all_n[j], self.all_mean[j], self.all_m2[j] = chan_merge(
                self.all_n[j],
                self.all_mean[j],
                self.all_m2[j],
                other.all_n[jo] * factor,
                other.all_mean[jo],
                other.all_m2[jo] * factor,
            )
        self.derive()

    def merge_batch(
        self,
        labels: Sequence[Hashable],
        features: Sequence[Hashable],
        class_weights: Sequence[float],
        moments: tuple[list[list[float]], list[list[float]]],
        all_moments: tuple[float, list[float], list[float]],
    ) -> None:
        """Merge (as :meth:`merge`) the statistics of a batch of dense events learned
        elsewhere, e.g. what a batch kernel learned, into a model-sync delta.

        ``labels`` are the batch's classes in the order it first met them, with
        their weights ``class_weights``; ``moments`` their ``(mean, m2)`` over
        ``features`` (every event had every feature, so each feature's weight is
        its class's); ``all_moments`` the batch's ``(weight, mean, m2)`` over
        every feature, without the classes.

        Examples
        --------
        >>> stats = GaussianStatistics(
        ...     var_smoothing=1e-9, class_prior=None, prior_alpha=0.0, fit_prior=True,
        ...     numeric_hint="numbers only", admit=lambda names: list(names),
        ... )
        >>> stats.learn({"a": 1.0}, "p", 1.0)
        >>> stats.merge_batch(["q", "p"], ["a"], [1.0, 1.0], ([[5.0], [3.0]], [[0.0], [0.0]]),
        ...                   (2.0, [4.0], [2.0]))
        >>> stats.labels, stats.mean, stats.m2, stats.all_m2
        (['p', 'q'], [[2.0], [5.0]], [[2.0], [0.0]], [8.0])
        """
        batch = GaussianStatistics(
            var_smoothing=self.var_smoothing,
            class_prior=self.class_prior,
            prior_alpha=self.prior_alpha,
            fit_prior=self.fit_prior,
            numeric_hint=self.numeric_hint,
            admit=list,
            per_feature=self.per_feature,
        )
        batch.labels = list(labels)
        batch.class_weight = list(class_weights)
        batch.features = list(features)
        means, m2s = moments
        batch.n = [[w] * len(features) for w in class_weights]
        batch.mean, batch.m2 = means, m2s
        all_weight, batch.all_mean, batch.all_m2 = all_moments
        batch.all_n = [all_weight] * len(features)
        batch.total_weight = all_weight
        self.merge(batch, 1.0)

    def set_batch_end(
        self,
        moments: tuple[list[list[float]], list[list[float]], list[list[float]]],
        all_moments: tuple[list[float], list[float], list[float]],
        class_weights: Iterable[tuple[int, float]],
        weights: Iterable[float],
    ) -> None:
        """Take the statistics a batch kernel computed for the end of its batch.

        ``moments`` are the new ``(n, mean, m2)`` tables, ``all_moments`` the new
        ``(all_n, all_mean, all_m2)``; each ``(k, w)`` of ``class_weights`` is added
        to ``class_weight[k]`` and each of ``weights`` to ``total_weight``, in order.
        """
        self.n, self.mean, self.m2 = moments
        self.all_n, self.all_mean, self.all_m2 = all_moments
        class_weight = self.class_weight
        for k, w in class_weights:
            class_weight[k] += w
        total = self.total_weight
        for w in weights:
            total += w
        self.total_weight = total
        self.derive()

    def rescale(self, factor: float) -> None:
        self.sync()
        self.class_weight = [c * factor for c in self.class_weight]
        self.total_weight *= factor
        self.n = [[n * factor for n in row] for row in self.n]
        self.m2 = [[s * factor for s in row] for row in self.m2]
        self.all_n = [n * factor for n in self.all_n]
        self.all_m2 = [s * factor for s in self.all_m2]
        self.derive()

    def derive(self) -> None:
        """Recompute everything derived from the raw statistics."""
        self.var = [
            [s / n if n > 0.0 else 0.0 for n, s in zip(ns, ss, strict=True)]
            for ns, ss in zip(self.n, self.m2, strict=True)
        ]
        self.all_var = [
            s / n if n > 0.0 else 0.0 for n, s in zip(self.all_n, self.all_m2, strict=True)
        ]
        self.all_var_stale = False
        self.missing = sum(row.count(0.0) for row in self.n)
        self.uniform = [not row or row.count(row[0]) == len(row) for row in self.n]
        gn = self.all_n
        self.all_uniform = not gn or gn.count(gn[0]) == len(gn)
        self.find_max()

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        self.sync()
        return {
            "classes": pairs(dict(zip(self.labels, self.class_weight, strict=True))),
            "total_weight": self.total_weight,
            "features": [encode_key(f) for f in self.features],
            "n": [list(r) for r in self.n],
            "mean": [list(r) for r in self.mean],
            "m2": [list(r) for r in self.m2],
            "global": [list(self.all_n), list(self.all_mean), list(self.all_m2)],
        }

    def from_state(
        self, stats: Mapping[str, Any], where: str = "stats", max_features: int | None = None
    ) -> None:
        """Load statistics from :meth:`to_state` output, checked (see
        :func:`~stream_nb.naive_bayes._gaussian_state.read_gaussian_stats`)."""
        t = read_gaussian_stats(stats, where, max_features=max_features)
        # built in one pass, O(classes × features): no per-class or per-feature rebuild
        self.reset()
        kk, ff = len(t.classes), len(t.features)
        self.labels = list(t.classes)
        self.class_index = {y: k for k, y in enumerate(self.labels)}
        self.class_weight = list(t.classes.values())
        self.features = list(t.features)
        self.feature_index = {f: j for j, f in enumerate(t.features)}
        self.order = tuple(t.features)
        self.total_weight = t.total_weight
        self.n, self.mean, self.m2 = t.n, t.mean, t.m2
        self.all_n, self.all_mean, self.all_m2 = t.all_n, t.all_mean, t.all_m2
        self.n_lazy = [False] * kk
        if ff:
            self.epsilon_floor = _PRODUCT_FLOOR ** (1.0 / ff)
        self.rebuild_scored()
        self.derive()  # variances, ε bookkeeping, missing and uniform flags

    def size(self) -> tuple[int, int, int]:
        kk, ff = len(self.labels), len(self.features)
        return kk, ff, 3 * kk * ff + 3 * ff + kk + 1


def _welford(n: float, mean: float, m2: float, x: float, w: float) -> tuple[float, float, float]:
    n += w
    d = x - mean
    mean += d * (w / n)  # w/n first: the first value is kept exactly
    m2 += w * d * (x - mean)
    # rounding may step μ' just past x when w/n ≈ 1, making the last term a tiny
    # negative number: M2 is a sum of squares, never below 0
    return n, mean, m2 if m2 >= 0.0 else 0.0
