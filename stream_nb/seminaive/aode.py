"""AODE: averaged one-dependence estimators."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb.seminaive._base import _SemiNaive
from stream_nb.seminaive._store import Item

__all__ = ["AODE"]

_exp = math.exp
_log = math.log


class AODE(_SemiNaive):
    """Averaged one-dependence estimators (Webb, Boughton & Wang 2005), learned online.

    Every feature value of the event with enough support is tried as a
    super-parent and the SPODE joint estimates are averaged:

    ``score(y) = log Σ_{i ∈ parents} exp(SPODE_i(y))``,
    ``parents = {i in x, learned : N(x_i) ≥ min_parent_count}``,

    with ``SPODE_i(y) = log P̂(y, x_i) + Σ_{j ≠ i} log P̂(x_j | y, x_i)`` as in
    :class:`SPODE` (the ``1/|parents|`` factor cancels when normalising over
    classes). The sum is a max-shifted log-sum-exp. With no qualifying parent
    the model is :class:`~stream_nb.CategoricalNB` with the same α.

    Cost per event with ``d`` features present and ``K`` classes: learning
    ``O(d²)`` dictionary updates, prediction ``O(d² K)`` logarithms.

    Parameters
    ----------
    alpha
        Smoothing constant α > 0.
    min_parent_count
        Weight ``N(x_i)`` (all classes) a value needs to act as a super-parent.
        Webb et al. use 30 in batch; 1 (default) uses every value seen at least once.
    max_values_per_feature, n_bins, warmup, bin_edges, schema,
    max_pair_features, half_life, max_classes, max_features
        As in :class:`SPODE`.

    Examples
    --------
    >>> from stream_nb import AODE
    >>> model = AODE()
    >>> for x, y in [({"a": 0, "b": "x"}, "no"), ({"a": 1, "b": "y"}, "yes"),
    ...              ({"a": 1, "b": "x"}, "yes"), ({"a": 0, "b": "y"}, "no")]:
    ...     model.learn_one(x, y, w=2.0)
    >>> model.predict_one({"a": "1", "b": "x"}) is not None
    True
    >>> round(sum(model.predict_proba_one({"b": "y"}).values()), 9)
    1.0
    """

    def __init__(
        self,
        alpha: float = 1.0,
        *,
        min_parent_count: float = 1.0,
        max_values_per_feature: int | None = 100,
        n_bins: int = 10,
        warmup: int = 100,
        bin_edges: Mapping[Hashable, Sequence[float]] | None = None,
        schema: Mapping[Hashable, str] | None = None,
        max_pair_features: int | None = 200,
        half_life: float | None = None,
        max_classes: int | None = None,
        max_features: int | None = None,
    ) -> None:
        super().__init__(
            alpha=alpha,
            min_parent_count=min_parent_count,
            max_values_per_feature=max_values_per_feature,
            n_bins=n_bins,
            warmup=warmup,
            bin_edges=bin_edges,
            schema=schema,
            half_life=half_life,
            max_pair_features=max_pair_features,
            max_classes=max_classes,
            max_features=max_features,
        )

    _dense_pairs = True

    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        store = self._store
        class_weight = store.nb._class_weight
        if not class_weight:
            return {}
        items = self._encode(x, False)
        if store.dense is not None:
            return self._dense_jll(items)
        value_weight = store.value_weight
        pair_features = store.pair_features
        threshold = self._raw_threshold()
        parents = [
            item
            for item in items
            if item[0] in pair_features and value_weight[item[0]].get(item[1], 0.0) >= threshold
        ]
        if not parents:
            return self._fallback(items)
        a = self.alpha / self._scale
        classes = list(class_weight)
        children = self._children(items, a)
        chunk = self._safe_chunk(a, children)
        spode = self._spode
        scores = [spode(p, children, classes, a, chunk) for p in parents]
        if len(scores) == 1:
            combined = scores[0]
        else:
            combined = []
            exp = _exp
            for k in range(len(classes)):
                column = [s[k] for s in scores]
                m = max(column)
                combined.append(m + _log(sum([exp(v - m) for v in column])))
        naive = self._naive_terms(items, classes, a)
        if naive is not None:  # features past max_pair_features: the same in every SPODE
            combined = [v + t for v, t in zip(combined, naive, strict=True)]
        return dict(zip(classes, combined, strict=True))

    def _dense_jll(self, items: list[Item]) -> dict[Hashable, float]:
        """The same scores from the dense block: one array op per step instead of loops."""
        a = self.alpha / self._scale
        scores = self._dense_scores(items, a, None)
        if scores is None:
            return self._fallback(items)
        if len(scores) == 1:
            combined = scores[0].tolist()
        else:
            # log Σ_i exp(SPODE_i): every score is a log-probability (≤ 0), so the
            # plain sum cannot overflow; shift by the max only if it underflows.
            ones = self._store.dense.vectors(len(scores))[1]  # type: ignore[union-attr]
            total = ones @ np.exp(scores)
            if total.min() > 0.0:
                combined = np.log(total).tolist()
            else:
                m = scores.max(axis=0)
                scores -= m
                combined = (np.log(ones @ np.exp(scores)) + m).tolist()
        classes = list(self._store.nb._class_weight)
        naive = self._naive_terms(items, classes, a)
        if naive is not None:
            combined = [v + t for v, t in zip(combined, naive, strict=True)]
        return dict(zip(classes, combined, strict=True))
