"""Categorical Naive Bayes over hashable feature values."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from stream_nb._exceptions import ModelStateError
from stream_nb._params import check_alpha, check_bool, check_cap, check_class_prior, log_prior
from stream_nb._state import (
    CATEGORY_TYPES,
    check_at_most,
    check_categories,
    check_consistent,
    check_feature_names,
    field,
    pairs,
    read_count,
    read_key,
    read_label,
    read_mapping,
    read_pairs,
)
from stream_nb._stores import (
    FEATURE_CLASS,
    FEATURE_VALUE_CLASS,
    OTHER,
    add_scaled,
    count_leaves,
    n_real,
    rescale,
    tree_from_pairs,
    tree_to_pairs,
    value_map,
)
from stream_nb.base import Capabilities, Learner

__all__ = ["CategoricalNB", "load_categorical", "merge_values"]

_log = math.log
_EMPTY: dict[Hashable, float] = {}


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
        Smoothing constant α > 0 (1 is Laplace).
    fit_prior
        Learn class priors; ``False`` gives the uniform prior ``1/K``.
    class_prior
        Fixed priors by label (ratios matter, they need not sum to 1). Seen
        classes missing from it are not scored.
    max_values_per_feature
        Distinct values kept per feature before the "other" bucket
        (``None``: unbounded). Bounds the model for ID-like features.
    half_life
        Optional forgetting, see :class:`stream_nb.base.Learner`.
    max_classes, max_features
        Memory bounds, see :class:`stream_nb.base.Learner`.

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
    >>> small.model_size()["stored_counts"], sorted(small._counts["sky"], key=str)
    (4, [None, 'sunny'])
    """

    capabilities = Capabilities(informative_features=True)

    def _raw_class_weights(self) -> Iterable[tuple[Hashable, float]]:
        return self._class_weight.items()

    def feature_names(self) -> list[Hashable]:
        return list(self._present)

    def _informative_entries(self, top: int | None) -> list[dict[str, Any]]:
        from stream_nb.informative import categorical_entries

        # the stores as the model holds them (a state would copy them twice)
        labels, present, counts = self._categorical_stats()
        return categorical_entries(
            labels, present, counts, self.alpha / self._scale, self.class_prior, top
        )

    def __init__(
        self,
        alpha: float = 1.0,
        *,
        fit_prior: bool = True,
        class_prior: Mapping[Hashable, float] | None = None,
        max_values_per_feature: int | None = None,
        half_life: float | None = None,
        max_classes: int | None = None,
        max_features: int | None = None,
    ) -> None:
        super().__init__(half_life=half_life, max_classes=max_classes, max_features=max_features)
        self.alpha = check_alpha(alpha)
        self.fit_prior = check_bool(fit_prior, "fit_prior")
        self.class_prior = check_class_prior(class_prior)
        self.max_values_per_feature = check_cap(max_values_per_feature, "max_values_per_feature")
        self._class_weight: dict[Hashable, float] = {}
        self._total_weight = 0.0
        # N_{y,i}: feature -> class -> weight of class-y events with the feature present
        self._present: dict[str, dict[Hashable, float]] = {}
        # N_{y,i,v}: feature -> value -> class -> weight
        self._counts: dict[str, dict[Hashable, dict[Hashable, float]]] = {}

    def _params(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "fit_prior": self.fit_prior,
            "class_prior": self.class_prior,
            "max_values_per_feature": self.max_values_per_feature,
            **self._cap_params(),
        }

    def _class_labels(self) -> dict[Hashable, float]:
        return self._class_weight

    def _categorical_stats(self) -> tuple[list[Hashable], dict[Any, Any], dict[Any, Any]]:
        """The labels and the stores ``N_{y,i}``, ``N_{y,i,v}`` as held (raw units, not
        copies: read only), for :mod:`stream_nb.informative`."""
        return list(self._class_weight), self._present, self._counts

    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        present = self._present
        # checked before anything changes: names new to the model, and value types
        if not x.keys() <= present.keys():
            check_feature_names(x)
        if not CATEGORY_TYPES.issuperset(map(type, x.values())):
            check_categories(x)
        class_weight = self._class_weight
        class_weight[y] = class_weight.get(y, 0.0) + w
        self._total_weight += w
        counts = self._counts
        for feature, value in x.items():
            if value is None:
                continue
            by_class = present.get(feature)
            if by_class is None:
                if not self._admit(len(present)):
                    continue  # max_features reached: not learned
                by_class = present[feature] = {}
                counts[feature] = {}
            by_class[y] = by_class.get(y, 0.0) + w
            values = counts[feature]
            value_counts = values.get(value)
            if value_counts is None:
                cap = self.max_values_per_feature
                if cap is not None and n_real(values) >= cap:
                    value_counts = values.get(OTHER)
                    value = OTHER
                if value_counts is None:
                    values[value] = {y: w}
                    continue
            value_counts[y] = value_counts.get(y, 0.0) + w

    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        if not self._class_weight:
            return {}
        alpha = self.alpha / self._scale  # α in raw units, see Learner
        jll = log_prior(
            self._class_weight, self._total_weight, alpha, self.fit_prior, self.class_prior
        )
        present = self._present
        counts = self._counts
        cap = self.max_values_per_feature
        log = _log
        for feature, value in x.items():
            values = counts.get(feature)
            if values is None or value is None:
                continue
            by_class = present[feature]
            smoothing = len(values) * alpha
            value_counts = values.get(value, _EMPTY)
            if value_counts is _EMPTY and cap is not None and n_real(values) >= cap:
                value_counts = values.get(OTHER, _EMPTY)
            for y in jll:
                jll[y] += log(
                    (value_counts.get(y, 0.0) + alpha) / (by_class.get(y, 0.0) + smoothing)
                )
        return jll

    def _merge(self, other: CategoricalNB, factor: float) -> None:
        add_scaled(self._class_weight, other._class_weight, factor)
        self._total_weight += other._total_weight * factor
        cap = self.max_values_per_feature
        if cap is None and self.max_features is None:
            add_scaled(self._present, other._present, factor)
            add_scaled(self._counts, other._counts, factor)
            return
        merge_values(
            self._present,
            self._counts,
            other._present,
            other._counts,
            factor,
            cap,
            self._admit(len(self._present), len(other._present)),
        )

    def _rescale(self, factor: float) -> None:
        rescale(self._class_weight, factor)
        self._total_weight *= factor
        rescale(self._present, factor)
        rescale(self._counts, factor)

    def _stats_to_state(self) -> dict[str, Any]:
        return {
            "class_weight": pairs(self._class_weight),
            "total_weight": self._total_weight,
            "present": tree_to_pairs(self._present),
            "counts": tree_to_pairs(self._counts),
        }

    def _stats_from_state(self, stats: Mapping[str, Any]) -> None:
        stats = read_mapping(stats, "stats", ("class_weight", "total_weight", "present", "counts"))
        loaded = load_categorical(
            stats,
            "stats",
            max_values=self.max_values_per_feature,
            max_features=self.max_features,
        )
        self._class_weight, self._total_weight, self._present, self._counts = loaded

    def _size(self) -> tuple[int, int, int]:
        stored = len(self._class_weight) + count_leaves(self._present) + count_leaves(self._counts)
        return len(self._class_weight), len(self._present), stored


def merge_values(
    present: dict[Any, dict[Hashable, float]],
    counts: dict[Any, dict[Hashable, dict[Hashable, float]]],
    other_present: Mapping[Any, Mapping[Hashable, float]],
    other_counts: Mapping[Any, Mapping[Hashable, Mapping[Hashable, float]]],
    factor: float,
    cap: int | None,
    room: int,
) -> list[Hashable]:
    """Add ``factor ×`` another model's categorical counts under the bounds.

    Features new here are taken in the other model's order while ``room``
    lasts (later ones are dropped); values past ``cap`` go to the "other"
    bucket (:func:`stream_nb._stores.value_map`). Returns the features added.
    """
    theirs = {}
    added = []
    for f, values in other_counts.items():
        if f not in present:
            if not room:
                continue  # max_features reached: not learned
            room -= 1
            present[f] = {}
            counts[f] = {}
            added.append(f)
        theirs[f] = values
    vmap = value_map(counts, theirs, cap)
    for f, values in theirs.items():
        add_scaled(present[f], other_present[f], factor)  # type: ignore[arg-type]
        dst = counts[f]
        mapping = vmap[f]
        for v, by_class in values.items():
            target = mapping[v]
            branch = dst.get(target)
            if branch is None:
                branch = dst[target] = {}
            add_scaled(branch, by_class, factor)  # type: ignore[arg-type]
    return added


def load_categorical(
    stats: Mapping[str, Any],
    where: str,
    *,
    max_values: int | None,
    max_features: int | None,
    class_weight: dict[Hashable, float] | None = None,
) -> tuple[dict[Hashable, float], float, dict[Any, Any], dict[Any, Any]]:
    """Read and check CategoricalNB-layout statistics (also NaiveBayes' categorical part).

    ``class_weight`` and ``total_weight`` are read from ``stats`` unless
    ``class_weight`` is given. Checks, each naming the field: weights finite
    and ≥ 0, ``N = Σ_y N_y``, ``N_{y,i} = Σ_v N_{y,i,v} ≤ N_y``, classes
    known, ``present`` and ``counts`` naming the same features, each with
    at least one value, the "other" bucket (``null``) only with a cap, and
    the caps respected. O(size of the statistics).

    Returns
    -------
    tuple
        ``(class_weight, total_weight, present, counts)``.
    """
    total = 0.0
    if class_weight is None:
        class_weight = read_pairs(
            field(stats, "class_weight", where), f"{where}.class_weight", read_count, key=read_label
        )
        total = read_count(field(stats, "total_weight", where), f"{where}.total_weight")
        check_consistent(total, class_weight.values(), f"{where}.total_weight", "the class weights")
    present = tree_from_pairs(
        field(stats, "present", where), 2, f"{where}.present", keys=FEATURE_CLASS
    )
    value_key = FEATURE_VALUE_CLASS if max_values is not None else (read_key, read_key, read_label)
    counts = tree_from_pairs(field(stats, "counts", where), 3, f"{where}.counts", keys=value_key)
    if present.keys() != counts.keys():
        missing = next(iter(present.keys() ^ counts.keys()))
        raise _error(
            f"{where}.counts", f"present and counts must name the same features ({missing!r})"
        )
    if max_features is not None and len(present) > max_features:
        raise _error(
            f"{where}.present", f"{len(present)} features, more than max_features={max_features}"
        )
    for f, by_class in present.items():
        values = counts[f]
        if not values:
            raise _error(f"{where}.counts[{f!r}]", "a learned feature needs at least one value")
        if max_values is not None and n_real(values) > max_values:
            raise _error(
                f"{where}.counts[{f!r}]",
                f"{n_real(values)} values, more than max_values_per_feature={max_values}",
            )
        sums: dict[Hashable, list[float]] = {}
        for by_value in values.values():
            for y, n in by_value.items():
                sums.setdefault(y, []).append(n)
        if sums.keys() != by_class.keys():
            extra = next(iter(sums.keys() ^ by_class.keys()))
            raise _error(f"{where}.counts[{f!r}]", f"class {extra!r} disagrees with present")
        for y, n in by_class.items():
            if y not in class_weight:
                raise _error(f"{where}.present[{f!r}]", f"unknown class {y!r}")
            check_consistent(n, sums[y], f"{where}.present[{f!r}][{y!r}]", "its value counts")
            check_at_most(n, class_weight[y], f"{where}.present[{f!r}][{y!r}]", "the class weight")
    return class_weight, total, present, counts


def _error(where: str, message: str) -> ModelStateError:
    return ModelStateError(f"{where}: {message}")
