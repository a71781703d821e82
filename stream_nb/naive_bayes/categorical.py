"""Categorical Naive Bayes over hashable feature values.

The counts and the scores live in one
:class:`~stream_nb.naive_bayes._categorical_stats.CategoricalStatistics`
component, which NaiveBayes (its categorical part) and the pair store of the
semi-naive learners (:mod:`stream_nb.seminaive`) hold too.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from stream_nb._params import (
    check_alpha,
    check_bool,
    check_cap,
    check_class_prior,
    check_feature_weights,
)
from stream_nb._state import CATEGORY_TYPES, check_categories, check_feature_names
from stream_nb.base import Capabilities, Learner
from stream_nb.naive_bayes._arrays import MIN_BATCH, per_event_answers
from stream_nb.naive_bayes._categorical_batch import values_within_caps
from stream_nb.naive_bayes._categorical_kernel import (
    categorical_predict_learn_columns,
    columns_of_events,
)
from stream_nb.naive_bayes._categorical_stats import CategoricalStatistics

__all__ = ["CategoricalNB"]


class CategoricalNB(Learner):
    """Categorical Naive Bayes with Lidstone smoothing, learned one event at a time.

    ``log P(y) = log((N_y + α) / (N + Kα))`` and
    ``log P(x_i = v | y) = log((N_{y,i,v} + α) / (N_{y,i} + S_i α))``, where
    ``N_{y,i}`` is the weight of class-``y`` events in which feature ``i`` was
    present and ``S_i`` the number of distinct values of feature ``i`` learned
    so far. A value never seen has count 0 and leaves ``S_i`` unchanged; a
    feature never learned, absent from ``x`` or ``None``, contributes nothing.

    With ``max_values_per_feature = m``, a feature keeps its first ``m``
    distinct values; a value first met once the feature holds ``m`` values,
    learned or scored, is read as the shared "other" bucket ``None`` (see
    :mod:`stream_nb._stores`): ``N_{y,i,other}`` is the weight of every
    such value, and ``S_i ≤ m + 1`` counts the bucket once it was learned.
    The formulas above are otherwise unchanged, so the model equals an
    unbounded one learned on the stream with those values replaced by the
    bucket.

    Parameters
    ----------
    alpha
        Smoothing constant α ≥ 0 (1 is Laplace). 0 is maximum likelihood: zero
        counts give probability 0, decided by the rule of :mod:`stream_nb._mle`
        (docs/learners.md, "Maximum likelihood").
    fit_prior
        Learn class priors; ``False`` gives the uniform prior ``1/K``.
    class_prior
        Fixed priors by label (ratios matter, they need not sum to 1). Seen
        classes missing from it are not scored.
    max_values_per_feature
        Distinct values kept per feature before the "other" bucket
        (``None``: unbounded). Bounds the model for ID-like features.
    feature_weights
        ``{feature: w >= 0}``: the score becomes
        ``log P(y) + Σ_i w_i log P(x_i | y)`` (features left out: ``w = 1``). A
        weight of 0 removes the feature from prediction while its counts are
        still learned. Models merge only with equal weights; the batch kernel
        weighs each term as the per-event path does.
    half_life
        Optional forgetting, see :class:`stream_nb.base.Learner`.
    max_classes, max_features
        Memory bounds, see :class:`stream_nb.base.Learner`.

    Attributes
    ----------
    categorical : CategoricalStatistics
        The counts (read only), e.g. ``categorical.counts[feature][value][label]``.

    Raises
    ------
    InvalidEventError
        From ``learn_one`` when a value cannot be a category (NaN, an
        infinity, bytes, a tuple…) or a feature name cannot be saved, with
        ``reason="invalid_features"``; the model is left unchanged.

    Examples
    --------
    >>> from stream_nb import CategoricalNB
    >>> model = CategoricalNB()
    >>> for x, y in [({"sky": "sunny", "wind": "weak"}, "play"),
    ...              ({"sky": "rain", "wind": "strong"}, "stay"),
    ...              ({"sky": "sunny", "wind": "strong"}, "play")]:
    ...     model.learn_one(x, y)
    >>> model.predict_one({"sky": "sunny"})
    'play'
    >>> round(model.predict_proba_one({"sky": "sunny"})["play"], 4)
    0.7714

    With a cap, new values share the "other" bucket:

    >>> small = CategoricalNB(max_values_per_feature=1)
    >>> for sky in ["sunny", "rain", "fog"]:
    ...     small.learn_one({"sky": sky}, "play")
    >>> small.model_size()["stored_counts"], sorted(small.categorical.counts["sky"], key=str)
    (4, [None, 'sunny'])
    """

    capabilities = Capabilities(
        column_kernel=True, kernel_records_delta=True, informative_features=True
    )

    def _raw_class_weights(self) -> Iterable[tuple[Hashable, float]]:
        return self.categorical.class_weight.items()

    def feature_names(self) -> list[Hashable]:
        return list(self.categorical.present)

    def _informative_entries(self, top: int | None) -> list[dict[str, Any]]:
        from stream_nb.informative import categorical_entries

        if not self.alpha:
            return []  # maximum likelihood: a value seen in one class only has log-ratio inf
        # the counts as the model holds them (a state would copy them twice)
        stats = self.categorical
        return categorical_entries(
            list(stats.class_weight),
            stats.present,
            stats.counts,
            self.alpha / self._scale,
            self.class_prior,
            top,
        )

    def __init__(
        self,
        alpha: float = 1.0,
        *,
        fit_prior: bool = True,
        class_prior: Mapping[Hashable, float] | None = None,
        max_values_per_feature: int | None = None,
        feature_weights: Mapping[Hashable, float] | None = None,
        half_life: float | None = None,
        max_classes: int | None = None,
        max_features: int | None = None,
    ) -> None:
        super().__init__(half_life=half_life, max_classes=max_classes, max_features=max_features)
        self.alpha = check_alpha(alpha, allow_zero=True)
        self.fit_prior = check_bool(fit_prior, "fit_prior")
        self.class_prior = check_class_prior(class_prior)
        self.max_values_per_feature = check_cap(max_values_per_feature, "max_values_per_feature")
        self.feature_weights = check_feature_weights(feature_weights)
        self.categorical = CategoricalStatistics(
            self.max_values_per_feature,
            admit=None if self.max_features is None else self._admit_feature,
            fit_prior=self.fit_prior,
            class_prior=self.class_prior,
        )

    def _params(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "fit_prior": self.fit_prior,
            "class_prior": self.class_prior,
            "max_values_per_feature": self.max_values_per_feature,
            "feature_weights": self.feature_weights,
            **self._cap_params(),
        }

    def _admit_feature(self) -> bool:
        """Whether one more feature may be learned (``max_features``)."""
        return bool(self._admit(len(self.categorical.present)))

    def _class_labels(self) -> dict[Hashable, float]:
        return self.categorical.class_weight

    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        stats = self.categorical
        # checked before anything changes: names new to the model, and value types
        if not x.keys() <= stats.present.keys():
            check_feature_names(x)
        if not CATEGORY_TYPES.issuperset(map(type, x.values())):
            check_categories(x)
        stats.learn(x.items(), y, w)

    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        weights = self.feature_weights
        if weights is not None:
            return self.categorical.weighted_joint_log_likelihood(
                x, self.alpha / self._scale, weights
            )
        return self.categorical.joint_log_likelihood(x, self.alpha / self._scale)  # α raw

    # ------------------------------------------------------------------ batch kernel
    def predict_learn_many(
        self,
        xs: Sequence[Mapping[str, Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float],
    ) -> tuple[list[dict[Hashable, float] | None], list[Hashable | None], dict[int, Exception]]:
        """:meth:`Learner.predict_learn_many`, vectorised with numpy where the batch allows.

        Every count an event sees is a prefix sum over the batch, so one numpy
        pass gives every prediction (equal to the per-event loop to about
        1e-12) and the counts after the batch (exactly those of the loop); see
        :mod:`stream_nb.naive_bayes._categorical_kernel`. Events need not share
        their keys (an absent feature is a missing one); with ``half_life`` the
        kernel forgets as the loop does. Short or unusual batches
        (a class missing from ``class_prior``, a new class, a feature new to
        the model, a renormalisation of the forgetting scale) run the per-event loop, and so
        does a class that does not declare ``capabilities.column_kernel``.

        Examples
        --------
        >>> from stream_nb import CategoricalNB
        >>> xs = [{"sky": "sun" if i % 3 else "rain", "wind": i % 2 == 0} for i in range(200)]
        >>> ys = ["play" if i % 3 else "stay" for i in range(200)]
        >>> model = CategoricalNB()
        >>> lps, preds, errors = model.predict_learn_many(xs, ys, [1.0] * 200)
        >>> lps[0], preds[1], errors, model.n_learned
        ({}, 'stay', {}, 200)
        """
        if type(self).capabilities.column_kernel and len(xs) >= MIN_BATCH:
            found = columns_of_events(xs)
            if found is not None and len(ys) == len(ws) == len(xs):
                out = self._column_step(*found, ys, ws)
                if out is not None:
                    return per_event_answers(*out)
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
        >>> from stream_nb import CategoricalNB
        >>> model = CategoricalNB()
        >>> model.learn_one({"sky": "sun"}, "play")
        >>> model.learn_one({"sky": "rain"}, "stay")
        >>> sky = ["sun", "rain", None, "fog"] * 25  # (None: missing)
        >>> ys = ["play", "stay", "stay", "play"] * 25
        >>> labels, log_proba, best = model.predict_learn_columns(("sky",), [sky], ys)
        >>> labels, log_proba.shape, [labels[k] for k in best[:4]], model.n_learned
        (['play', 'stay'], (100, 2), ['play', 'stay', 'play', 'stay'], 102)
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
        if not type(self).capabilities.column_kernel:
            return None
        delta = self.delta
        if delta is not None and (
            not isinstance(delta, CategoricalNB)
            or not values_within_caps([self.categorical, delta.categorical], names, columns)
        ):
            # (a cap that may bind: a delta applies it to its own values, learn_one
            # records them)
            return None
        takes, decay = self._kernel_decay(ys, ws)
        if not takes:
            return None  # (forgetting: a renormalisation within the batch, or a delta)
        stats = self.categorical
        full = self.max_features is not None and len(stats.present) >= self.max_features
        out = categorical_predict_learn_columns(
            stats,
            names,
            columns,
            ys,
            ws,
            alpha=self.alpha,
            full=full,
            delta=None if delta is None else delta.categorical,
            decay=decay,
            feature_weights=self.feature_weights,
        )
        if out is None:
            return None
        labels, log_proba, best, learned = out
        if decay is not None:
            self._scale = decay.end
        self.n_learned += learned
        self._delta_recorded(ys, ws)
        return labels, log_proba, best

    def _merge(self, other: CategoricalNB, factor: float) -> None:
        mine, theirs = self.categorical, other.categorical
        room = None  # new features, in other's order, while room lasts (None: no bound)
        if self.max_features is not None:
            room = self._admit(len(mine.counts), len(theirs.counts))
        mine.merge(theirs, factor, mine.value_map(theirs, mine.admitted(theirs, room)))

    def _rescale(self, factor: float) -> None:
        self.categorical.rescale(factor)

    def _stats_to_state(self) -> dict[str, Any]:
        return self.categorical.to_state()

    def _stats_from_state(self, stats: Mapping[str, Any]) -> None:
        self.categorical.load_state(stats, "stats", max_features=self.max_features)

    def _size(self) -> tuple[int, int, int]:
        stats = self.categorical
        return len(stats.class_weight), len(stats.present), stats.size()
