"""Gaussian Naive Bayes, learned one event at a time, exact in log space.

The per-(class, feature) Welford statistics, the smoothing ε and the Gaussian
terms live in :class:`_GaussianStats`, shared by :class:`GaussianNB` and
:class:`stream_nb.naive_bayes.mixed.NaiveBayes`.

Layout (chosen for the prequential hot loop, see docs/gaussian.md): classes
and features get dense indices ``k`` and ``j`` in order of first appearance;
class ``k`` keeps flat lists ``_n[k][j]``, ``_mean[k][j]``, ``_m2[k][j]`` and
the derived population variance ``_var[k][j] = M2 / n``. When an event has
exactly the learned features in the learned order (the common case for
real-valued streams) one ``zip`` over the values and these lists does all the
work; anything else goes through a general per-feature path.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from numbers import Real
from typing import TYPE_CHECKING, Any

from stream_nb._exceptions import InvalidEventError
from stream_nb._params import check_class_prior, check_nonneg
from stream_nb._state import check_mapping, encode_key, pairs
from stream_nb.base import ABSORB, Capabilities, Learner, log_softmax
from stream_nb.limits import MAX_VALUE, MAX_VAR_SMOOTHING, MIN_VARIANCE, value_out_of_range
from stream_nb.naive_bayes._gaussian_state import check_gaussian_stats
from stream_nb.stats import LOG_2PI, chan_merge

__all__ = ["GaussianNB"]

_log = math.log
_log2 = math.log2
_log1p = math.log1p
_exp = math.exp
#: ln 2: ``log(v) = log2(v) × _LN2``; ``math.log2`` is cheaper to call than ``math.log``.
_LN2 = math.log(2.0)
_isfinite = math.isfinite
_BOOL = frozenset((bool,))
_INF = math.inf

#: Floor of ε when ``var_smoothing × max variance`` is smaller (``var_smoothing=0``
#: or tiny variances): keeps every σ² ≥ 1e-90, so ``(x - μ)² / σ²`` summed over
#: an event stays finite for every value within ``MAX_VALUE`` (see
#: :mod:`stream_nb.limits`). Below the variance of data at any scale above 1e-40.
_MIN_EPSILON = MIN_VARIANCE
#: Largest |x| of a value learned or scored (``out_of_range`` beyond).
_MAX_VALUE = MAX_VALUE

#: The product of σ² over features replaces a sum of logs (one ``log`` per
#: class instead of one per feature) when no partial product can leave the
#: normal float range: every factor is ≥ ε ≥ ``_PRODUCT_FLOOR ** (1/F)``, so
#: partial products stay ≥ 1e-290; overflow is sticky (``inf``) and detected.
_PRODUCT_FLOOR = 1e-290


def _check_number(feature: Hashable, value: Any, hint: str) -> float:
    """``value`` as a float within ``±MAX_VALUE``, or :class:`InvalidEventError`
    (``non_numeric`` ending with ``hint``, ``non_finite`` or ``out_of_range``)."""
    if value.__class__ is bool or not isinstance(value, Real):
        raise InvalidEventError(
            f"feature {feature!r} has non-numeric value {value!r} ({type(value).__name__}); "
            + hint.format(feature=feature),
            reason="non_numeric",
        )
    number: Any = value  # (a Real: compared as it is, exactly for an int of any size)
    if not -_MAX_VALUE <= number <= _MAX_VALUE:
        if number != number or number in (_INF, -_INF):
            raise InvalidEventError(
                f"feature {feature!r} has non-finite value {value!r}; send a finite number "
                "or leave the feature out (None) when it is missing",
                reason="non_finite",
            )
        raise value_out_of_range(feature, value)
    return float(value)


class _GaussianStats:
    """Class weights and per-(class, feature) Welford statistics with ε bookkeeping.

    A mixin for learners: it uses ``self._scale`` (from :class:`Learner`) and
    the attributes ``var_smoothing``, ``class_prior``, ``_prior_alpha`` and
    ``_fit_prior`` that the learner sets before calling :meth:`_g_init`.

    Prior: ``log P(y) = log((N_y + α) / (N + Kα))`` with α = ``_prior_alpha``
    (0 for GaussianNB, i.e. ``log(N_y / N)``), the uniform prior when
    ``_fit_prior`` is false and ``class_prior`` when given, exactly as
    :func:`stream_nb._params.log_prior`.

    ε bookkeeping: ``_gvar[j]`` is the population variance of feature ``j``
    over every learned event (a second Welford per feature, ``_gn``, ``_gmean``,
    ``_gm2``), ``_maxvar = _gvar[_argmax]`` its maximum and ``_second`` an upper
    bound of every other ``_gvar``. Updating a non-maximal feature costs one
    comparison; only when the maximal feature's variance drops below
    ``_second`` is the maximum searched again (O(features), rare).
    """

    # Slots keep attribute access on the hot path a fixed offset (a learner has
    # more attributes than CPython's shared-key instance dicts take).
    __slots__ = (
        "_argmax",
        "_cw",
        "_eps_floor",
        "_features",
        "_fidx",
        "_gm2",
        "_gmean",
        "_gn",
        "_gnlazy",
        "_guniform",
        "_gvar",
        "_gvar_stale",
        "_index",
        "_kernel_codes",
        "_labels",
        "_m2",
        "_maxvar",
        "_mean",
        "_missing",
        "_n",
        "_nlazy",
        "_order",
        "_scored",
        "_scored_labels",
        "_second",
        "_total",
        "_uniform",
        "_var",
    )

    var_smoothing: float
    class_prior: dict[Hashable, float] | None
    _prior_alpha: float
    _fit_prior: bool
    _scale: float
    #: End of the ``non_numeric`` error message; ``{feature}`` is filled in.
    _NUMERIC_HINT = (
        "GaussianNB models numbers only (int or float; bools are not numbers here): "
        "send numbers, or use NaiveBayes, which treats str and bool values as categorical"
    )

    if TYPE_CHECKING:  # provided by the learner (Learner's hook)

        def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]: ...

        max_features: int | None

        def _new_features(self, names: list[Any], n_known: int) -> list[Any]: ...

        def _admit(self, n_known: int, new: int = 1) -> int: ...

    def _class_labels(self) -> dict[Hashable, int]:
        """The learned classes (for ``max_classes``, see :class:`Learner`)."""
        return self._index

    def _n_features(self) -> int:
        """Features with statistics (for ``max_features``)."""
        return len(self._fidx)

    # ------------------------------------------------------------------ batches
    def predict_learn_many(
        self,
        xs: Sequence[Mapping[str, Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float],
    ) -> tuple[list[dict[Hashable, float] | None], list[Hashable | None], dict[int, Exception]]:
        """:meth:`Learner.predict_learn_many`, vectorised with numpy where the batch allows.

        Every statistic an event sees is a prefix sum over the batch, so one
        numpy pass gives every prediction (equal to the per-event loop to about
        1e-12) and the statistics after the batch; see
        :mod:`stream_nb.naive_bayes._vectorised`. Short or unusual batches (forgetting,
        ``class_prior``, a new class, missing or non-numeric values, other
        keys) run the per-event loop, and so do subclasses, which may change
        the formulas: only a class that sets ``_VECTORISED`` in its own body
        takes the kernel.

        Examples
        --------
        >>> from stream_nb import GaussianNB, NaiveBayes
        >>> xs = [{"a": float(i % 5), "b": float(i % 3)} for i in range(200)]
        >>> ys = [i % 2 for i in range(200)]
        >>> for model in (GaussianNB(), NaiveBayes()):
        ...     lps, preds, errors = model.predict_learn_many(xs, ys, [1.0] * 200)
        ...     print(lps[0], preds[1], errors, model.n_learned)
        {} 0 {} 200
        {} 0 {} 200
        """
        if type(self).__dict__.get("_VECTORISED", False):
            from stream_nb.naive_bayes._vectorised import (
                gaussian_predict_learn_many,  # numpy: on first use
            )

            out = gaussian_predict_learn_many(self, xs, ys, ws)
            if out is not None:
                # the kernel bypasses learn_one
                self._record_batch(xs, ys, ws, out[2])  # type: ignore[attr-defined]
                return out
        return Learner.predict_learn_many(self, xs, ys, ws)  # type: ignore[arg-type]

    def predict_learn_columns(
        self,
        names: tuple[str, ...],
        columns: Sequence[Sequence[Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float] | None = None,
    ) -> tuple[list[Hashable], Any, Any] | None:
        """:meth:`Learner.predict_learn_columns` with the numpy kernel (same cases as
        :meth:`predict_learn_many`; ``None`` otherwise).

        Examples
        --------
        >>> from stream_nb import NaiveBayes
        >>> model = NaiveBayes()
        >>> for i in range(10):
        ...     model.learn_one({"a": float(i), "c": "u" if i % 2 else "v"}, i % 2)
        >>> a = [float(i % 7) for i in range(100)]
        >>> c = ["u" if i % 2 else "v" for i in range(100)]
        >>> labels, log_proba, best = model.predict_learn_columns(
        ...     ("a", "c"), [a, c], [i % 2 for i in range(100)]
        ... )
        >>> labels, log_proba.shape, [labels[k] for k in best[:4]], model.n_learned
        ([0, 1], (100, 2), [0, 1, 0, 1], 110)
        """
        if type(self).__dict__.get("_VECTORISED", False):
            from stream_nb.naive_bayes._vectorised import gaussian_predict_learn_columns

            return gaussian_predict_learn_columns(self, names, columns, ys, ws)
        return None

    # ------------------------------------------------------------------ setup
    def _column_split(self, names: tuple[str, ...]) -> tuple[str, ...] | None:
        """The categorical features of a column batch with keys ``names``, for the kernel.

        ``()`` when ``names`` are exactly this model's Gaussian features in
        order; ``None`` when the column kernel cannot take such a batch.
        """
        return () if names == self._order else None

    def _g_init(self) -> None:
        self._labels: list[Hashable] = []
        self._index: dict[Hashable, int] = {}
        self._cw: list[float] = []
        self._total = 0.0
        self._features: list[Hashable] = []
        self._fidx: dict[Hashable, int] = {}
        self._order: tuple[Hashable, ...] = ()
        # the column kernel's value -> code map per categorical feature (NaiveBayes;
        # not a statistic: never saved, and a stale code only names a value)
        self._kernel_codes: dict[Hashable, tuple[dict[Any, int], list[Any]]] = {}
        self._n: list[list[float]] = []
        self._mean: list[list[float]] = []
        self._m2: list[list[float]] = []
        self._var: list[list[float]] = []
        self._gn: list[float] = []
        self._gmean: list[float] = []
        self._gm2: list[float] = []
        self._gvar: list[float] = []
        self._maxvar = 0.0
        self._argmax = -1
        self._second = 0.0
        self._missing = 0  # (class, feature) pairs without statistics
        # _uniform[k]: every n[k][j] is equal (all class-k events had every feature);
        # _guniform: the same for the global n. Dense learning then skips per-feature n.
        self._uniform: list[bool] = []
        self._guniform = True
        self._gvar_stale = False  # _gvar is not kept up to date by uniform dense learning
        self._nlazy: list[bool] = []  # _n[k][1:] not filled in (equal to _n[k][0])
        self._gnlazy = False  # the same for _gn
        self._eps_floor = 1.0  # ε at or above this keeps the σ² product in range
        # (label, k, fixed log prior or None): the classes that are scored
        self._scored: list[tuple[Hashable, int, float | None]] = []
        self._scored_labels: list[Hashable] = []

    def _g_add_class(self, y: Hashable, rescore: bool = True) -> int:
        """Give class ``y`` statistics of weight 0 (O(features)); ``rescore=False``
        leaves the list of scored classes to the caller, who adds several at once."""
        k = len(self._labels)
        f = len(self._features)
        self._labels.append(y)
        self._index[y] = k
        self._cw.append(0.0)
        self._n.append([0.0] * f)
        self._mean.append([0.0] * f)
        self._m2.append([0.0] * f)
        self._var.append([0.0] * f)
        self._uniform.append(True)
        self._nlazy.append(False)
        self._missing += f
        if rescore:
            self._g_rebuild_scored()
        return k

    def _g_add_features(self, features: Sequence[Hashable]) -> None:
        """Give new features (not learned yet) statistics of weight 0 in every class.

        O(len(features) × classes): every list grows by ``extend``, and ``_order``
        (the key tuple of dense events) is rebuilt once for the whole batch, so
        an event with many new features costs O(its features), not O(model) per
        feature.
        """
        if not features:
            return
        self._g_sync()
        j = len(self._features)
        self._features.extend(features)
        fidx = self._fidx
        for f in features:
            fidx[f] = j
            j += 1
        self._order = tuple(self._features)
        # a new feature has weight 0 everywhere: uniformity survives only where all was 0
        self._uniform = [
            u and (not row or row[0] == 0.0) for u, row in zip(self._uniform, self._n, strict=True)
        ]
        self._guniform = self._guniform and (not self._gn or self._gn[0] == 0.0)
        zeros = [0.0] * len(features)
        for lst in (*self._n, *self._mean, *self._m2, *self._var):
            lst.extend(zeros)
        for lst in (self._gn, self._gmean, self._gm2, self._gvar):
            lst.extend(zeros)
        self._missing += len(self._labels) * len(features)
        self._eps_floor = _PRODUCT_FLOOR ** (1.0 / j)

    def _g_rebuild_scored(self) -> None:
        prior = self.class_prior
        if prior is None:
            self._scored = [(y, k, None) for k, y in enumerate(self._labels)]
        else:
            self._scored = [
                (y, k, _log(prior[y])) for k, y in enumerate(self._labels) if y in prior
            ]
        if prior is None and not self._fit_prior:
            uniform = -_log(len(self._labels))
            self._scored = [(y, k, uniform) for y, k, _ in self._scored]
        self._scored_labels = [y for y, _, _ in self._scored]

    def _g_epsilon(self) -> float:
        """ε = var_smoothing × max variance (floored), or 0 when every feature is constant.

        When every learned feature is constant (max variance 0), every class
        that has statistics for a feature has the same mean and variance 0 for
        it, so the Gaussian terms are equal for all classes; 0 tells the caller
        to leave them out (the posterior is then the prior).
        """
        mx = self._maxvar
        if mx <= 0.0:
            return 0.0
        eps = self.var_smoothing * mx
        return eps if eps > _MIN_EPSILON else _MIN_EPSILON

    # ------------------------------------------------------------------ learning
    def _g_learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        """Learn the numeric features of ``x`` (all of them) for class ``y``."""
        if tuple(x) != self._order:
            return self._g_learn_general(x, y, w)
        vals = x.values()
        try:
            s = sum(map(abs, vals))
        except (TypeError, OverflowError):  # None, a non-number, an int past the double
            return self._g_learn_general(x, y, w)  # range: the general path says which
        # NaN, an infinity or a value beyond ±MAX_VALUE (Σ|x| ≥ each |x|): the general
        # path says which (or, for a sum past MAX_VALUE of values within it, learns it)
        if not s <= _MAX_VALUE or not _BOOL.isdisjoint(map(type, vals)):
            return self._g_learn_general(x, y, w)
        # Dense event: every learned feature, in order, validated.
        k = self._index.get(y)
        if k is None:
            k = self._g_add_class(y)
        self._cw[k] += w
        self._total += w
        n_k = self._n[k]
        if not n_k:
            return
        m_k = self._mean[k]
        s_k = self._m2[k]
        v_k = self._var[k]
        gm = self._gmean
        gs = self._gm2
        if self._uniform[k] and self._guniform:
            # Every event so far had every feature: one weight per class and one
            # in total, kept in n[k][0] and gn[0] (the other entries are filled
            # in lazily, see _g_sync), and max_f V_f = max_f M2_f / n.
            n = n_k[0]
            if self._missing and n == 0.0:
                self._missing -= len(n_k)
            n += w
            n_k[0] = n
            self._nlazy[k] = True
            gn_ = self._gn
            gn = gn_[0] + w
            gn_[0] = gn
            self._gnlazy = True
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
            self._argmax = am
            self._maxvar = self._second = mx / gn
            self._gvar_stale = True
            return
        self._g_sync()
        if self._missing:
            self._missing -= n_k.count(0.0)
        self._uniform[k] = self._guniform = False
        gn_ = self._gn
        gv = self._gvar
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
        mx = self._maxvar = max(gv)
        self._argmax = gv.index(mx)
        self._second = mx
        return None

    def _g_sync(self) -> None:
        """Fill in what uniform dense learning leaves out: the per-feature weights
        (all equal to entry 0) and ``_gvar``. O(features) per class left lazy,
        paid at most once per dense event, so amortised."""
        if self._gnlazy:
            gn = self._gn
            gn[:] = [gn[0]] * len(gn)
            self._gnlazy = False
        lazy = self._nlazy
        if True in lazy:
            for k, row in enumerate(self._n):
                if lazy[k]:
                    row[:] = [row[0]] * len(row)
                    lazy[k] = False
        if self._gvar_stale:
            self._gvar = [
                s / n if n > 0.0 else 0.0 for n, s in zip(self._gn, self._gm2, strict=True)
            ]
            self._gvar_stale = False

    def _g_learn_general(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        hint = self._NUMERIC_HINT
        items = [(f, _check_number(f, v, hint)) for f, v in x.items() if v is not None]
        fidx = self._fidx
        new = [f for f, _ in items if f not in fidx]
        if new:  # names first met: checked, and bounded by max_features
            keep = self._new_features(new, self._n_features())
            if len(keep) < len(new):
                dropped = set(new[len(keep) :])
                items = [item for item in items if item[0] not in dropped]
        self._g_sync()
        k = self._index.get(y)
        if k is None:
            k = self._g_add_class(y)
        self._cw[k] += w
        self._total += w
        fidx = self._fidx
        if new:
            self._g_add_features([f for f, _ in items if f not in fidx])
        if len(items) != len(fidx):
            # some feature gets no weight from this event: weights no longer uniform
            self._uniform[k] = self._guniform = False
        n_k = self._n[k]
        m_k = self._mean[k]
        s_k = self._m2[k]
        v_k = self._var[k]
        gn = self._gn
        gm = self._gmean
        gs = self._gm2
        gv = self._gvar
        mx = self._maxvar
        am = self._argmax
        second = self._second
        stale = False
        for f, value in items:
            j = fidx[f]
            if n_k[j] == 0.0:
                self._missing -= 1
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
            self._g_find_max()
        else:
            self._maxvar, self._argmax, self._second = mx, am, second

    def _g_find_max(self) -> None:
        """Exact maximum of the feature variances, its index and the runner-up."""
        self._g_sync()
        gv = self._gvar
        if not gv:
            self._maxvar, self._argmax, self._second = 0.0, -1, 0.0
            return
        mx = max(gv)
        am = gv.index(mx)
        gv[am] = -1.0
        self._second = max(gv) if len(gv) > 1 else 0.0
        gv[am] = mx
        self._maxvar = mx
        self._argmax = am

    # ------------------------------------------------------------------ scoring
    def _g_joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """``log P(y) + Σ_f log N(x_f; μ_yf, σ²_yf)`` for every scored class."""
        scores = self._g_dense_scores(x)
        if scores is None:
            return self._g_jll_general(x)
        out: dict[Hashable, float] = {}
        for y, v in zip(self._scored_labels, scores):  # noqa: B905 (same length)
            out[y] = v
        return out

    def predict_log_proba_one(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """Normalised log posterior ``log P(y | x)`` of every class; ``{}`` before learning."""
        if x.__class__ is not dict:
            x = check_mapping(x)
        scores = self._g_dense_scores(x)
        if scores is None:
            return log_softmax(self._joint_log_likelihood(x))
        # max-shifted log-sum-exp (as stream_nb.base.log_softmax; the scores are finite)
        labels = self._scored_labels
        out: dict[Hashable, float] = {}
        if len(scores) == 2:
            a, b = scores
            lse = a + _log1p(_exp(b - a)) if a >= b else b + _log1p(_exp(a - b))
            if -ABSORB < lse < ABSORB:
                out[labels[0]] = a - lse
                out[labels[1]] = b - lse
            else:  # (see stream_nb.base.ABSORB)
                top, tail = (a, _log1p(_exp(b - a))) if a >= b else (b, _log1p(_exp(a - b)))
                out[labels[0]] = (a - top) - tail
                out[labels[1]] = (b - top) - tail
            return out
        if not scores:  # class_prior names none of the learned classes
            return out
        top = max(scores)
        total = 0.0
        for v in scores:
            total += _exp(v - top)
        if not -ABSORB < top < ABSORB:  # (see stream_nb.base.ABSORB)
            tail = _log2(total) * _LN2
            for y, v in zip(labels, scores):  # noqa: B905 (same length)
                out[y] = (v - top) - tail
            return out
        top += _log2(total) * _LN2
        for y, v in zip(labels, scores):  # noqa: B905 (same length)
            out[y] = v - top
        return out

    def _g_dense_scores(self, x: Mapping[str, Any]) -> list[float] | None:
        """Joint log-likelihoods of the scored classes, in order, on the dense path.

        ``None`` when the event is not dense (a feature missing, extra or out of
        order, a class without statistics for some feature, a value that is
        not a non-bool number within ``±MAX_VALUE``, a class whose weight
        decayed to 0): the general path handles those.

        Speed notes (measured): ``log2(v) * LN2`` instead of ``log(v)``
        (``math.log`` parses optional arguments), one ``log`` per class for
        the product of the σ², and no comprehension (each one is a call).
        """
        cw = self._cw
        if not cw or self._missing or tuple(x) != self._order:
            return None
        vals = x.values()
        try:
            s = sum(map(abs, vals))
        except (TypeError, OverflowError):  # None, a non-number, an int past the double
            return None  # range: the general path says which
        if not s <= _MAX_VALUE or not _BOOL.isdisjoint(map(type, vals)):
            return None  # NaN, ±inf or beyond ±MAX_VALUE (or Σ|x| beyond it): general path
        log2 = _log2
        alpha = self._prior_alpha / self._scale  # α in raw units, see Learner
        den = self._total + len(cw) * alpha
        out: list[float] = []
        mx = self._maxvar
        if mx <= 0.0:  # every feature constant so far: equal terms for all classes
            try:
                for _, k, lp in self._scored:
                    out.append(log2((cw[k] + alpha) / den) * _LN2 if lp is None else lp)
            except (ValueError, ZeroDivisionError):  # log2(0): a class whose weight decayed
                return None  # to 0 is not scored (the general path leaves it out)
            return out
        eps = self.var_smoothing * mx
        if eps < _MIN_EPSILON:
            eps = _MIN_EPSILON
        # -½ F log 2π, shared by every class
        const = -0.5 * len(self._order) * LOG_2PI
        means = self._mean
        variances = self._var
        product = eps >= self._eps_floor
        try:
            for _, k, lp in self._scored:
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

    def _g_jll_general(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        cw = self._cw
        if not cw:
            return {}
        self._g_sync()
        hint = self._NUMERIC_HINT
        fidx = self._fidx
        scored = self._scored
        alpha = self._prior_alpha / self._scale  # α in raw units, see Learner
        if not alpha and 0.0 in cw:
            # log(N_y / N) of a class whose weight decayed (underflowed) to 0 is -inf:
            # probability 0, the class is left out as log_softmax leaves out -inf
            scored = [(y, k, lp) for y, k, lp in scored if lp is not None or cw[k] > 0.0]
        ns = self._n
        items: list[tuple[int, float]] = []
        for f, value in x.items():
            if value is None:
                continue
            number = _check_number(f, value, hint)
            j = fidx.get(f)
            # a feature counts only if every scored class has statistics for it
            if j is not None and all(ns[k][j] > 0.0 for _, k, _ in scored):
                items.append((j, number))
        if not scored:
            return {}
        den = self._total + len(cw) * alpha
        log_den = _log(den) if den > 0.0 else 0.0  # (0: every class has a fixed prior)
        eps = self._g_epsilon()
        if eps == 0.0:
            items = []
        const = len(items) * LOG_2PI
        out: dict[Hashable, float] = {}
        for y, k, lp in scored:
            mean = self._mean[k]
            var = self._var[k]
            total = 0.0
            for j, number in items:
                v = var[j] + eps
                d = number - mean[j]
                total += _log(v) + d * d / v
            out[y] = (_log(cw[k] + alpha) - log_den if lp is None else lp) - 0.5 * (const + total)
        return out

    # ------------------------------------------------------------------ merge / scale
    def _g_merge(self, other: _GaussianStats, factor: float) -> None:
        self._g_sync()
        other._g_sync()
        new_classes = [y for y in other._labels if y not in self._index]
        for y in new_classes:
            self._g_add_class(y, rescore=False)
        if new_classes:
            self._g_rebuild_scored()
        fresh = [f for f in other._features if f not in self._fidx]
        self._g_add_features(fresh[: self._admit(self._n_features(), len(fresh))])
        # other's features past max_features are not learned (-1)
        jmap = [self._fidx.get(f, -1) for f in other._features]
        for ko, y in enumerate(other._labels):
            k = self._index[y]
            self._cw[k] += other._cw[ko] * factor
            n_k, m_k, s_k = self._n[k], self._mean[k], self._m2[k]
            on, om, os_ = other._n[ko], other._mean[ko], other._m2[ko]
            for jo, j in enumerate(jmap):
                if j < 0:
                    continue
                n_k[j], m_k[j], s_k[j] = chan_merge(
                    n_k[j], m_k[j], s_k[j], on[jo] * factor, om[jo], os_[jo] * factor
                )
        self._total += other._total * factor
        for jo, j in enumerate(jmap):
            if j < 0:
                continue
            self._gn[j], self._gmean[j], self._gm2[j] = chan_merge(
                self._gn[j],
                self._gmean[j],
                self._gm2[j],
                other._gn[jo] * factor,
                other._gmean[jo],
                other._gm2[jo] * factor,
            )
        self._g_derive()

    def _g_rescale(self, factor: float) -> None:
        self._g_sync()
        self._cw = [c * factor for c in self._cw]
        self._total *= factor
        self._n = [[n * factor for n in row] for row in self._n]
        self._m2 = [[s * factor for s in row] for row in self._m2]
        self._gn = [n * factor for n in self._gn]
        self._gm2 = [s * factor for s in self._gm2]
        self._g_derive()

    def _g_derive(self) -> None:
        """Recompute everything derived from the raw statistics."""
        self._var = [
            [s / n if n > 0.0 else 0.0 for n, s in zip(ns, ss, strict=True)]
            for ns, ss in zip(self._n, self._m2, strict=True)
        ]
        self._gvar = [s / n if n > 0.0 else 0.0 for n, s in zip(self._gn, self._gm2, strict=True)]
        self._gvar_stale = False
        self._missing = sum(row.count(0.0) for row in self._n)
        self._uniform = [not row or row.count(row[0]) == len(row) for row in self._n]
        gn = self._gn
        self._guniform = not gn or gn.count(gn[0]) == len(gn)
        self._g_find_max()

    # ------------------------------------------------------------------ state
    def _g_to_state(self) -> dict[str, Any]:
        self._g_sync()
        return {
            "classes": pairs(dict(zip(self._labels, self._cw, strict=True))),
            "total_weight": self._total,
            "features": [encode_key(f) for f in self._features],
            "n": [list(r) for r in self._n],
            "mean": [list(r) for r in self._mean],
            "m2": [list(r) for r in self._m2],
            "global": [list(self._gn), list(self._gmean), list(self._gm2)],
        }

    def _g_from_state(self, stats: Mapping[str, Any], where: str = "stats") -> None:
        classes, features = check_gaussian_stats(
            stats,
            where,
            positive_classes=False,  # a weight may decay to 0: that class scores nothing
            max_features=self.max_features,
        )
        # built in one pass, O(classes × features): no per-class or per-feature rebuild
        self._g_init()
        kk, ff = len(classes), len(features)
        self._labels = list(classes)
        self._index = {y: k for k, y in enumerate(self._labels)}
        self._cw = list(classes.values())
        self._features = list(features)
        self._fidx = {f: j for j, f in enumerate(features)}
        self._order = tuple(features)
        self._total = _finite(stats["total_weight"])
        self._n = _matrix(stats["n"], kk, ff)
        self._mean = _matrix(stats["mean"], kk, ff)
        self._m2 = _matrix(stats["m2"], kk, ff)
        self._gn, self._gmean, self._gm2 = _matrix(stats["global"], 3, ff)
        self._nlazy = [False] * kk
        if ff:
            self._eps_floor = _PRODUCT_FLOOR ** (1.0 / ff)
        self._g_rebuild_scored()
        self._g_derive()  # variances, ε bookkeeping, missing and uniform flags

    def _g_size(self) -> tuple[int, int, int]:
        kk, ff = len(self._labels), len(self._features)
        return kk, ff, 3 * kk * ff + 3 * ff + kk + 1


def _welford(n: float, mean: float, m2: float, x: float, w: float) -> tuple[float, float, float]:
    n += w
    d = x - mean
    mean += d * (w / n)  # w/n first: the first value is kept exactly
    m2 += w * d * (x - mean)
    # rounding may step μ' just past x when w/n ≈ 1, making the last term a tiny
    # negative number: M2 is a sum of squares, never below 0
    return n, mean, m2 if m2 >= 0.0 else 0.0


def _finite(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _isfinite(value):
        raise ValueError(f"statistic must be a finite number, got {value!r}")
    return float(value)


def _matrix(rows: Any, n_rows: int, n_cols: int) -> list[list[float]]:
    out = [[_finite(v) for v in row] for row in rows]
    if len(out) != n_rows or any(len(row) != n_cols for row in out):
        raise ValueError(f"expected a {n_rows}×{n_cols} table of statistics")
    return out


class GaussianNB(_GaussianStats, Learner):
    """Gaussian Naive Bayes over numeric features, learned one event at a time.

    Each (class ``y``, feature ``f``) keeps weighted Welford statistics: weight
    ``n``, mean ``μ`` and ``M2``. With the population variance ``M2 / n``:

    - ``σ²_yf = M2_yf / n_yf + ε``, ``ε = var_smoothing × max_f V_f``, where
      ``V_f`` is the population variance of feature ``f`` over every learned
      event (scikit-learn's convention, kept incrementally). ``ε`` is floored
      at ``_MIN_EPSILON`` = 1e-300; when every feature has been constant so
      far (``max V_f = 0``) the Gaussian terms are equal for every class and
      left out.
    - ``log P(y) = log(N_y / N)``; ``class_prior`` overrides it (seen classes
      missing from it are not scored).
    - ``log p(x_f | y) = -½ (log(2π σ²_yf) + (x_f - μ_yf)² / σ²_yf)``, analytic.

    A feature contributes only when every scored class has statistics for it;
    a feature absent from ``x`` or ``None`` contributes nothing. Values must
    be ``int`` or ``float`` (``bool`` is not a number here): anything else
    raises :class:`~stream_nb.InvalidEventError` with reason ``"non_numeric"``
    naming the feature, NaN/inf reason ``"non_finite"``, and the model is left
    unchanged.

    Parameters
    ----------
    var_smoothing
        Fraction of the largest feature variance added to every variance (≥ 0).
    class_prior
        Fixed priors by label (ratios matter, they need not sum to 1).
    half_life
        Optional forgetting, see :class:`stream_nb.base.Learner`.
    max_classes, max_features
        Memory bounds, see :class:`stream_nb.base.Learner`.

    Examples
    --------
    >>> from stream_nb import GaussianNB
    >>> model = GaussianNB()
    >>> for x, y in [({"height": 1.80, "weight": 85.0}, "m"),
    ...              ({"height": 1.75, "weight": 80.0}, "m"),
    ...              ({"height": 1.60, "weight": 55.0}, "f"),
    ...              ({"height": 1.65, "weight": 60.0}, "f")]:
    ...     model.learn_one(x, y)
    >>> model.predict_one({"height": 1.70, "weight": 62.0})
    'f'
    >>> round(model.predict_proba_one({"height": 1.78, "weight": 83.0})["m"], 6)
    1.0
    """

    capabilities = Capabilities(numeric_only=True, column_kernel=True, informative_features=True)

    def _informative_entries(self, top: int | None) -> list[dict[str, Any]]:
        from stream_nb.informative import gaussian_entries, state_stats

        stats, _ = state_stats(self)
        return gaussian_entries(stats, self.var_smoothing, self.class_prior)

    def __init__(
        self,
        var_smoothing: float = 1e-9,
        *,
        class_prior: Mapping[Hashable, float] | None = None,
        half_life: float | None = None,
        max_classes: int | None = None,
        max_features: int | None = None,
    ) -> None:
        super().__init__(half_life=half_life, max_classes=max_classes, max_features=max_features)
        self.var_smoothing = check_nonneg(var_smoothing, "var_smoothing", MAX_VAR_SMOOTHING)
        self.class_prior = check_class_prior(class_prior)
        self._prior_alpha = 0.0
        self._fit_prior = True
        self._g_init()

    def _params(self) -> dict[str, Any]:
        return {
            "var_smoothing": self.var_smoothing,
            "class_prior": self.class_prior,
            **self._cap_params(),
        }

    _learn = _GaussianStats._g_learn
    _joint_log_likelihood = _GaussianStats._g_joint_log_likelihood

    _VECTORISED = True  # the batch kernel implements exactly this class's formulas

    def _merge(self, other: GaussianNB, factor: float) -> None:
        self._g_merge(other, factor)

    def _rescale(self, factor: float) -> None:
        self._g_rescale(factor)

    def _stats_to_state(self) -> dict[str, Any]:
        return self._g_to_state()

    def _stats_from_state(self, stats: Mapping[str, Any]) -> None:
        self._g_from_state(stats)

    def _size(self) -> tuple[int, int, int]:
        return self._g_size()
