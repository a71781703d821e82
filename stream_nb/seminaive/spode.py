"""SPODE: a super-parent one-dependence estimator."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from stream_nb.base import Capabilities
from stream_nb.seminaive._base import _SemiNaive, canonical, check_feature_name
from stream_nb.seminaive._store import Item

__all__ = ["SPODE"]


class SPODE(_SemiNaive):
    """Super-parent one-dependence estimator: every feature depends on the class and ``parent``.

    With α = ``alpha``, ``K`` classes and ``S_i`` distinct values of feature ``i`` so far,

    ``score(y) = log P̂(y, x_p) + Σ_{j ≠ p, j in x, j learned} log P̂(x_j | y, x_p)``,

    ``P̂(y, x_i) = (N(y, x_i) + α) / (N_i + α K S_i)`` and
    ``P̂(x_j | y, x_i) = (N(y, x_i, x_j) + α) / (N(y, x_i, j) + α S_j)``
    (Webb, Boughton & Wang 2005, Weka's Laplace estimates generalised to α),
    normalised over classes in log space. When the parent is absent from
    ``x``, never learned, or its value ``x_p`` has weight
    ``N(x_p) < min_parent_count`` (by default: was never learned), the model
    falls back to :class:`~stream_nb.CategoricalNB` with the same α, so a
    SPODE equals an :class:`AODE` restricted to one parent.

    Parameters
    ----------
    parent
        Name of the super-parent feature. ``None`` (default, a convenience)
        uses the learned feature with the largest ``I(X_i; Y)`` (ties by
        name), recomputed whenever the counts changed: O(values × classes)
        extra per prediction, so name the parent when you know it.
    alpha
        Smoothing constant α > 0.
    min_parent_count
        Weight ``N(x_p)`` the parent value needs to be used (decayed weight with ``half_life``).
    max_values_per_feature
        Distinct values kept per feature; later new values share one "other"
        bucket (``None``: unbounded). Bounds the model for ID-like features.
    n_bins, warmup, bin_edges
        Equal-frequency discretisation of numeric features, see
        :mod:`stream_nb.seminaive.discretise`.
    schema
        Optional ``feature -> "categorical" | "numeric"``; by default
        ``int``/``float`` values are numeric and everything else categorical.
    max_pair_features
        Only the first ``max_pair_features`` features learned get pair counts
        (``None``: all). Later features are modelled as in Naive Bayes (their
        CategoricalNB term is added to every class) and are never parents, so
        pair memory and per-event cost stay bounded by the cap² however many
        features events carry.
    half_life
        Optional forgetting, see :class:`stream_nb.base.Learner`.
    max_classes, max_features
        Memory bounds, see :class:`stream_nb.base.Learner` (features warming
        up count; a feature not learned gets no bins).

    Examples
    --------
    >>> from stream_nb import SPODE
    >>> model = SPODE(parent="sky")
    >>> for x, y in [({"sky": "sunny", "wind": "weak"}, "play"),
    ...              ({"sky": "rain", "wind": "strong"}, "stay"),
    ...              ({"sky": "sunny", "wind": "strong"}, "play")]:
    ...     model.learn_one(x, y)
    >>> model.predict_one({"sky": "sunny", "wind": "strong"})
    'play'
    """

    capabilities = Capabilities(informative_features=True, structure=True)

    def structure(self) -> dict[str, Any] | None:
        """Every feature's parent is the super-parent (:meth:`Learner.structure`).

        ``"super_parent"`` is the ``parent`` parameter, or the feature with the
        largest ``I(X_f; Y)`` as the model chooses it.
        """
        from stream_nb.informative import mutual_information

        stats = self.to_state()["stats"]["store"]
        features = [f for f, _ in stats["nb"]["counts"]]
        parent = self.parent
        if parent is None:
            mi = mutual_information(stats)
            parent = min(mi, key=lambda f: (-mi[f], canonical(f))) if mi else None
        shared = [parent] if parent in features else []  # an unlearned parent: NB terms
        return {
            "super_parent": parent,
            "parents": [
                {"feature": f, "parents": [] if f == parent else list(shared)} for f in features
            ],
        }

    def __init__(
        self,
        parent: Hashable | None = None,
        *,
        alpha: float = 1.0,
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
        self.parent = None if parent is None else check_feature_name(parent, "parent")
        self._auto: tuple[tuple[float, float, int], Hashable] | None = None

    _dense_pairs = True

    def _params(self) -> dict[str, Any]:
        return {"parent": self.parent, **super()._params()}

    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        store = self._store
        class_weight = store.nb._class_weight
        if not class_weight:
            return {}
        items = self._encode(x, False)
        name = self.parent if self.parent is not None else self._best_parent()
        if store.dense is not None:
            return self._dense_jll(items, name)
        parent = None
        for item in items:
            if item[0] == name:
                values = store.value_weight.get(item[0])
                if (
                    values is not None
                    and item[0] in store.pair_features
                    and values.get(item[1], 0.0) >= self._raw_threshold()
                ):
                    parent = item
                break
        if parent is None:
            return self._fallback(items)
        a = self.alpha / self._scale
        classes = list(class_weight)
        children = self._children(items, a)
        scores = self._spode(parent, children, classes, a, self._safe_chunk(a, children))
        naive = self._naive_terms(items, classes, a)
        if naive is not None:
            scores = [v + t for v, t in zip(scores, naive, strict=True)]
        return dict(zip(classes, scores, strict=True))

    def _dense_jll(self, items: list[Item], name: Hashable) -> dict[Hashable, float]:
        """The same scores from the dense block."""
        a = self.alpha / self._scale
        scores = self._dense_scores(items, a, name)
        if scores is None:
            return self._fallback(items)
        out = scores[0].tolist()
        classes = list(self._store.nb._class_weight)
        naive = self._naive_terms(items, classes, a)
        if naive is not None:
            out = [v + t for v, t in zip(out, naive, strict=True)]
        return dict(zip(classes, out, strict=True))

    def _best_parent(self) -> Hashable:
        """The learned feature with the largest ``I(X_i; Y)`` (cached until the counts change)."""
        nb = self._store.nb
        key = (nb._total_weight, self._scale, self.n_learned)
        if self._auto is None or self._auto[0] != key:
            mi = self._store.class_mutual_information()
            best = min(mi, key=lambda f: (-mi[f], canonical(f))) if mi else None
            self._auto = (key, best)
        return self._auto[1]
