"""Categorical Naive Bayes over hashable feature values."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any

from stream_nb._params import check_alpha, check_bool, check_class_prior, log_prior
from stream_nb._state import pairs
from stream_nb._stores import add_scaled, count_leaves, rescale, tree_from_pairs, tree_to_pairs
from stream_nb.base import Learner

__all__ = ["CategoricalNB"]

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

    Parameters
    ----------
    alpha
        Smoothing constant α > 0 (1 is Laplace).
    fit_prior
        Learn class priors; ``False`` gives the uniform prior ``1/K``.
    class_prior
        Fixed priors by label (ratios matter, they need not sum to 1). Seen
        classes missing from it are not scored.
    half_life
        Optional forgetting, see :class:`stream_nb.base.Learner`.

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
    """

    def __init__(
        self,
        alpha: float = 1.0,
        fit_prior: bool = True,
        class_prior: Mapping[Hashable, float] | None = None,
        *,
        half_life: float | None = None,
    ) -> None:
        super().__init__(half_life=half_life)
        self.alpha = check_alpha(alpha)
        self.fit_prior = check_bool(fit_prior, "fit_prior")
        self.class_prior = check_class_prior(class_prior)
        self._class_weight: dict[Hashable, float] = {}
        self._total_weight = 0.0
        # N_{y,i}: feature -> class -> weight of class-y events with the feature present
        self._present: dict[str, dict[Hashable, float]] = {}
        # N_{y,i,v}: feature -> value -> class -> weight
        self._counts: dict[str, dict[Hashable, dict[Hashable, float]]] = {}

    def _params(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "fit_prior": self.fit_prior, "class_prior": self.class_prior}

    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        class_weight = self._class_weight
        class_weight[y] = class_weight.get(y, 0.0) + w
        self._total_weight += w
        present = self._present
        counts = self._counts
        for feature, value in x.items():
            if value is None:
                continue
            by_class = present.get(feature)
            if by_class is None:
                by_class = present[feature] = {}
                counts[feature] = {}
            by_class[y] = by_class.get(y, 0.0) + w
            values = counts[feature]
            value_counts = values.get(value)
            if value_counts is None:
                values[value] = {y: w}
            else:
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
        log = _log
        for feature, value in x.items():
            values = counts.get(feature)
            if values is None or value is None:
                continue
            by_class = present[feature]
            smoothing = len(values) * alpha
            value_counts = values.get(value, _EMPTY)
            for y in jll:
                jll[y] += log(
                    (value_counts.get(y, 0.0) + alpha) / (by_class.get(y, 0.0) + smoothing)
                )
        return jll

    def _merge(self, other: CategoricalNB, factor: float) -> None:
        add_scaled(self._class_weight, other._class_weight, factor)
        self._total_weight += other._total_weight * factor
        add_scaled(self._present, other._present, factor)
        add_scaled(self._counts, other._counts, factor)

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
        self._class_weight = tree_from_pairs(stats["class_weight"], depth=1)
        self._total_weight = float(stats["total_weight"])
        self._present = tree_from_pairs(stats["present"], depth=2)  # type: ignore[assignment]
        self._counts = tree_from_pairs(stats["counts"], depth=3)  # type: ignore[assignment]
        if set(self._present) != set(self._counts):
            raise ValueError("present and counts must name the same features")

    def _size(self) -> tuple[int, int, int]:
        stored = len(self._class_weight) + count_leaves(self._present) + count_leaves(self._counts)
        return len(self._class_weight), len(self._present), stored
