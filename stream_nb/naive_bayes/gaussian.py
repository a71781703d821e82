"""Gaussian Naive Bayes, learned one event at a time, exact in log space.

The per-(class, feature) Welford statistics and the smoothing ε live in one
:class:`~stream_nb.naive_bayes._gaussian_stats.GaussianStatistics` component,
which :class:`GaussianNB` and :class:`stream_nb.naive_bayes.mixed.NaiveBayes`
each hold (their shared learner methods are in :class:`_GaussianLearner`); the
Gaussian terms are :mod:`stream_nb.naive_bayes._gaussian_scores`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from stream_nb._params import check_class_prior, check_feature_weights
from stream_nb._softmax import log_softmax_scores
from stream_nb._state import check_mapping
from stream_nb.base import Capabilities, Learner, log_softmax
from stream_nb.naive_bayes._categorical_stats import CategoricalStatistics
from stream_nb.naive_bayes._gaussian_scores import dense_scores, joint_log_likelihood
from stream_nb.naive_bayes._gaussian_stats import (
    FEATURE,
    GLOBAL,
    GaussianStatistics,
    check_var_smoothing,
)

__all__ = ["GaussianNB"]


class _GaussianLearner(Learner):
    """What GaussianNB and NaiveBayes share: a :class:`GaussianStatistics` component
    (``gaussian``), the numpy batch kernel and the dense per-event posterior.

    Subclasses create ``self.gaussian`` in ``__init__`` (see :meth:`_new_gaussian`).
    The batch kernel (:mod:`stream_nb.naive_bayes._vectorised`) implements exactly
    the formulas of GaussianNB and NaiveBayes; a class takes it when it declares
    ``capabilities.column_kernel`` (see :class:`~stream_nb.base.Capabilities`), so
    a subclass that changes the formulas declares its own capabilities without it.
    """

    gaussian: GaussianStatistics
    var_smoothing: float
    var_smoothing_mode: str
    class_prior: dict[Hashable, float] | None
    #: The ``feature_weights`` parameter (``None``: every weight is 1).
    feature_weights: dict[Hashable, float] | None = None
    #: The weights the scores use: ``feature_weights``, or ``None`` when every one is 1
    #: (the unweighted paths then give the same numbers to the bit).
    _score_weights: dict[Hashable, float] | None = None
    #: End of the ``non_numeric`` error message; ``{feature}`` is filled in.
    _NUMERIC_HINT = (
        "GaussianNB models numbers only (int or float; bools are not numbers here): "
        "send numbers, or use NaiveBayes, which treats str and bool values as categorical"
    )

    def _raw_class_weights(self) -> Iterable[tuple[Hashable, float]]:
        return zip(self.gaussian.labels, self.gaussian.class_weight, strict=True)

    def feature_names(self) -> list[Hashable]:
        return list(self.gaussian.features)

    def _set_feature_weights(self, feature_weights: Any) -> None:
        """Check and keep ``feature_weights`` (see :attr:`_score_weights`)."""
        self.feature_weights = check_feature_weights(feature_weights)
        weights = self.feature_weights
        if weights is not None and all(w == 1.0 for w in weights.values()):
            weights = None
        self._score_weights = weights

    def _new_gaussian(self, prior_alpha: float, fit_prior: bool) -> GaussianStatistics:
        """The component, with this learner's parameters and feature bound."""
        return GaussianStatistics(
            var_smoothing=self.var_smoothing,
            class_prior=self.class_prior,
            prior_alpha=prior_alpha,
            fit_prior=fit_prior,
            numeric_hint=self._NUMERIC_HINT,
            admit=self._admit_features,
            per_feature=self.var_smoothing_mode == FEATURE,
        )

    @classmethod
    def _state_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """States written before ``var_smoothing_mode`` existed used the global rule."""
        if "var_smoothing" in params and "var_smoothing_mode" not in params:
            return {**params, "var_smoothing_mode": GLOBAL}
        return params

    def _admit_features(self, names: Sequence[Any]) -> list[Any]:
        """Names first met that are learned: checked, and bounded by ``max_features``."""
        return self._new_features(list(names), self._n_features())

    def _class_labels(self) -> dict[Hashable, int]:
        """The learned classes (for ``max_classes``, see :class:`Learner`)."""
        return self.gaussian.class_index

    def _n_features(self) -> int:
        """Features with statistics (for ``max_features``)."""
        return len(self.gaussian.feature_index)

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
        :mod:`stream_nb.naive_bayes._vectorised`. Short or unusual batches (a class
        missing from ``class_prior``, a new class, missing or non-numeric values,
        other keys) run the per-event loop, and so does a class that does not declare
        ``capabilities.column_kernel``.

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
        if type(self).capabilities.column_kernel:
            from stream_nb.naive_bayes._vectorised import (
                gaussian_predict_learn_many,  # numpy: on first use
            )

            out = gaussian_predict_learn_many(self._column_step, xs, ys, ws)
            if out is not None:
                return out  # (a tracked delta: the kernel recorded the batch into it)
        return Learner.predict_learn_many(self, xs, ys, ws)

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
        return self._column_step(names, columns, ys, ws)

    def _column_step(
        self,
        names: tuple[str, ...],
        columns: Sequence[Sequence[Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float] | None,
    ) -> tuple[list[Hashable], Any, Any] | None:
        """The batch kernel behind :meth:`predict_learn_columns` and :meth:`predict_learn_many`."""
        kernel = type(self).capabilities.column_kernel
        if not kernel:
            return None
        categorical = self._column_split(names)
        if categorical is None:
            return None
        kernel_columns = self._kernel_columns(names, columns)
        if kernel_columns is None:
            return None
        columns = kernel_columns
        weights = self._score_weights
        gaussian_weights = category_weights = None
        if weights is not None:
            gaussian_weights = [weights.get(f, 1.0) for f in self.gaussian.order]
            category_weights = [weights.get(f, 1.0) for f in categorical]
        from stream_nb.naive_bayes._vectorised import gaussian_predict_learn_columns

        cat, alpha = self._categorical_part()
        delta = self.delta
        if delta is not None and (
            not isinstance(delta, _GaussianLearner)
            or (cat is not None and not self._within_caps(delta, categorical, names, columns))
        ):
            # (a cap that may bind: a delta applies max_values_per_feature to its own
            # values, learn_one records them)
            return None
        takes, decay = self._kernel_decay(ys, ws)
        if not takes:
            return None  # (forgetting: a renormalisation within the batch, or a delta)
        out = gaussian_predict_learn_columns(
            self.gaussian,
            cat,
            categorical,
            names,
            columns,
            ys,
            ws,
            var_smoothing=self.var_smoothing,
            category_alpha=alpha,
            feature_weights=gaussian_weights,
            category_weights=category_weights,
            delta=None if delta is None else delta.gaussian,
            delta_categorical=None if delta is None else delta._categorical_part()[0],
            decay=decay,
        )
        if out is None:
            return None
        labels, log_proba, best, learned = out
        if decay is not None:
            self._scale = decay.end
        self.n_learned += learned
        if delta is not None:
            self._delta_recorded(ys, ws)
            delta._recorded_kinds(names, self)
        return labels, log_proba, best

    def _within_caps(
        self,
        delta: _GaussianLearner,
        categorical: tuple[str, ...],
        names: tuple[str, ...],
        columns: Sequence[Sequence[Any]],
    ) -> bool:
        """Whether the batch's ``categorical`` columns meet no ``max_values_per_feature``,
        in this model or in its delta (each then learns every value as it is)."""
        from stream_nb.naive_bayes._categorical_batch import values_within_caps

        pair = (self._categorical_part()[0], delta._categorical_part()[0])
        stats = [s for s in pair if s is not None]
        where = dict(zip(names, columns, strict=True))
        return values_within_caps(stats, categorical, [where[f] for f in categorical])

    def _recorded_kinds(self, names: tuple[str, ...], model: _GaussianLearner) -> None:
        """Hook: ``model``'s batch kernel recorded a batch of features ``names`` into this
        model (its delta); NaiveBayes fixes the kinds (``model``'s) of the features it
        now has statistics for."""
        return None

    def _categorical_part(self) -> tuple[CategoricalStatistics | None, float]:
        """The categorical statistics the batch kernel learns too, and their α
        (NaiveBayes); ``(None, 0.0)`` without."""
        return None, 0.0

    def _kernel_columns(
        self, names: tuple[str, ...], columns: Sequence[Sequence[Any]]
    ) -> Sequence[Sequence[Any]] | None:
        """Hook: the columns as the kernel learns them (NaiveBayes: binned numbers as their
        bins), after :meth:`_column_split` accepted ``names``; ``None``: the per-event path."""
        return columns

    def _column_split(self, names: tuple[str, ...]) -> tuple[str, ...] | None:
        """The categorical features of a column batch with keys ``names``, for the kernel.

        ``()`` when ``names`` are exactly this model's Gaussian features in
        order; ``None`` when the column kernel cannot take such a batch.
        """
        return () if names == self.gaussian.order else None

    def predict_log_proba_one(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """Normalised log posterior ``log P(y | x)`` of every class; ``{}`` before learning."""
        if x.__class__ is not dict:
            x = check_mapping(x)
        gaussian = self.gaussian
        scores = dense_scores(gaussian, x, self._scale, self._score_weights)
        if scores is None:
            return log_softmax(self._joint_log_likelihood(x))
        # max-shifted log-sum-exp, as log_softmax (the scores are finite)
        return log_softmax_scores(gaussian.scored_labels, scores)


class GaussianNB(_GaussianLearner):
    """Gaussian Naive Bayes over numeric features, learned one event at a time.

    Each (class ``y``, feature ``f``) keeps weighted Welford statistics: weight
    ``n``, mean ``μ`` and ``M2``. With the population variance ``M2 / n``, and
    ``V_f`` the population variance of feature ``f`` over every learned event:

    - ``σ²_yf = M2_yf / n_yf + ε_f``, with ``ε_f`` by ``var_smoothing_mode``:

      * ``"feature"`` (the default): ``ε_f = var_smoothing × V_f``, 1e-2 by
        default, so each feature is smoothed on its own scale and a feature of
        large variance (a salary in dollars) cannot swamp one of small variance
        (an education level). A feature with ``V_f = 0`` (constant over every
        learned event) is left out: its terms are equal for every class. A
        feature constant within a class but not overall gets ``ε_f > 0``.
      * ``"global"`` (scikit-learn's rule): ``ε = var_smoothing × max_f V_f``
        for every feature, 1e-9 by default; when every feature has been
        constant so far (``max V_f = 0``) the Gaussian terms are left out.

      ``ε`` is floored at :data:`~stream_nb.limits.MIN_VARIANCE` = 1e-90.
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
        Fraction (≥ 0) of the feature's own variance (``"feature"``) or of the
        largest feature variance (``"global"``) added to every class variance;
        ``None``: 1e-2 for ``"feature"``, 1e-9 (scikit-learn's) for ``"global"``.
    var_smoothing_mode
        ``"feature"`` or ``"global"`` (see above). Models of different modes do
        not merge.
    class_prior
        Fixed priors by label (ratios matter, they need not sum to 1).
    feature_weights
        ``{feature: w >= 0}``: each feature's log-density term is times its
        weight, ``log P(y) + Σ_f w_f log p(x_f | y)`` (features left out:
        ``w = 1``). A weight of 0 removes the feature from prediction while its
        statistics (and its share of ``ε``) are still learned. Models merge
        only with equal weights; the batch kernel multiplies each term by its
        weight too.
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

    capabilities = Capabilities(
        numeric_only=True, column_kernel=True, kernel_records_delta=True, informative_features=True
    )

    def _informative_entries(self, top: int | None) -> list[dict[str, Any]]:
        from stream_nb.informative import gaussian_entries, state_stats

        stats, _ = state_stats(self)
        return gaussian_entries(
            stats, self.var_smoothing, self.class_prior, per_feature=self.gaussian.per_feature
        )

    def __init__(
        self,
        var_smoothing: float | None = None,
        *,
        var_smoothing_mode: str = FEATURE,
        class_prior: Mapping[Hashable, float] | None = None,
        feature_weights: Mapping[Hashable, float] | None = None,
        half_life: float | None = None,
        max_classes: int | None = None,
        max_features: int | None = None,
    ) -> None:
        super().__init__(half_life=half_life, max_classes=max_classes, max_features=max_features)
        self.var_smoothing, self.var_smoothing_mode = check_var_smoothing(
            var_smoothing, var_smoothing_mode
        )
        self.class_prior = check_class_prior(class_prior)
        self._set_feature_weights(feature_weights)
        self.gaussian = self._new_gaussian(prior_alpha=0.0, fit_prior=True)

    def _params(self) -> dict[str, Any]:
        return {
            "var_smoothing": self.var_smoothing,
            "var_smoothing_mode": self.var_smoothing_mode,
            "class_prior": self.class_prior,
            "feature_weights": self.feature_weights,
            **self._cap_params(),
        }

    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        self.gaussian.learn(x, y, w)

    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        return joint_log_likelihood(self.gaussian, x, self._scale, self._score_weights)

    def _merge(self, other: GaussianNB, factor: float) -> None:
        self.gaussian.merge(other.gaussian, factor)

    def _rescale(self, factor: float) -> None:
        self.gaussian.rescale(factor)

    def _stats_to_state(self) -> dict[str, Any]:
        return self.gaussian.to_state()

    def _stats_from_state(self, stats: Mapping[str, Any]) -> None:
        self.gaussian.from_state(stats, max_features=self.max_features)

    def _size(self) -> tuple[int, int, int]:
        return self.gaussian.size()
