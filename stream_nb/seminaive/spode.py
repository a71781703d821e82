"""SPODE: a super-parent one-dependence estimator."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Unpack

from stream_nb.base import Capabilities
from stream_nb.seminaive._base import SemiNaiveOptions, check_feature_name, shared_signature
from stream_nb.seminaive._information import canonical, ranked
from stream_nb.seminaive._superparent import _SuperParent

__all__ = ["SPODE"]


class SPODE(_SuperParent):
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
        Smoothing constant α ≥ 0; 0 is maximum likelihood (zero counts score ``-inf``,
        see :mod:`stream_nb.seminaive._zero`; the known-event path and batch kernel are not used).
    min_parent_count
        Weight ``N(x_p)`` the parent value needs to be used (decayed weight with ``half_life``).
    max_values_per_feature
        Distinct values kept per feature; later new values share one "other"
        bucket (``None``: unbounded). Bounds the model for ID-like features.
    n_bins, warmup, bin_edges, strategy
        Discretisation of numeric features: ``strategy="frequency"`` (default,
        equal-frequency) or ``"width"`` (equal-width over the warm-up sample's
        range; later values outside it go to the edge bins), see
        :mod:`stream_nb.seminaive.discretise`.
    warmup_terms
        ``"gaussian"`` (default): while a numeric feature warms up, its value adds
        a per-class Gaussian log-density (from the events seen so far) to every
        class score, see :mod:`stream_nb.seminaive._warmup`; ``"none"``: it is
        left out until its cut points freeze. Nothing changes once they have.
    schema
        Optional ``feature -> "categorical" | "numeric"``; by default
        ``int``/``float`` values are numeric and everything else categorical.
    max_pair_features
        Only the first ``max_pair_features`` features learned get pair counts
        (``None``: all). Later features are modelled as in Naive Bayes (their
        CategoricalNB term is added to every class) and are never parents, so
        pair memory and per-event cost stay bounded by the cap² however many
        features events carry.
    feature_weights
        ``{feature: w >= 0}`` (features left out: ``w = 1``): each child term
        ``log P̂(x_j | y, x_p)`` is multiplied by ``w_j``, and the parent's joint
        term ``log P̂(y, x_p)`` is split into ``log P̂_p(y) + w_p log P̂(x_p | y)``.
        A weight of 0 removes the feature from prediction (no term, never a
        parent; a parent of weight 0 means the Naive Bayes fallback) while its
        counts are still learned; see :mod:`stream_nb.seminaive._feature_weights`.
        Models merge only with equal weights; scoring takes the per-event path.
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

    capabilities = Capabilities(
        informative_features=True, structure=True, column_kernel=True, kernel_records_delta=True
    )

    def structure(self) -> dict[str, Any] | None:
        """Every feature's parent is the super-parent (:meth:`Learner.structure`).

        ``"super_parent"`` is the ``parent`` parameter, or the feature with the
        largest ``I(X_f; Y)`` as the model chooses it (among the features of
        non-zero ``feature_weights``).
        """
        from stream_nb.informative import mutual_information

        stats = self.to_state()["stats"]["store"]
        features = [f for f, _ in stats["nb"]["counts"]]
        parent = self.parent
        if parent is None:
            mi = mutual_information(stats)
            weights = self._score_weights
            if weights is not None:  # a feature of weight 0 is never the parent
                mi = {f: v for f, v in mi.items() if weights.get(f, 1.0)}
            parent = min(mi, key=lambda f: (-mi[f], canonical(f))) if mi else None
        shared = [parent] if parent in features else []  # an unlearned parent: NB terms
        return {
            "super_parent": parent,
            "parents": [
                {"feature": f, "parents": [] if f == parent else list(shared)} for f in features
            ],
        }

    @shared_signature
    def __init__(
        self,
        parent: Hashable | None = None,
        *,
        alpha: float = 1.0,
        **options: Unpack[SemiNaiveOptions],
    ) -> None:
        super().__init__(alpha, **options)
        self.parent = None if parent is None else check_feature_name(parent, "parent")
        self._auto: tuple[tuple[float, float, int], Hashable] | None = None

    def _params(self) -> dict[str, Any]:
        return {"parent": self.parent, **super()._params()}

    def _parent_fixed(self) -> bool:
        # the best parent (parent=None) may change with every event learned
        return self.parent is not None

    def _super_parent(self) -> Hashable | None:
        # None (nothing learned yet, so no feature qualifies) reads as "every feature"
        return self.parent if self.parent is not None else self._best_parent()

    def _best_parent(self) -> Hashable:
        """The learned feature with the largest ``I(X_i; Y)`` (cached until the counts change)."""
        store = self._store
        key = (store.categorical.total_weight, self._scale, self.n_learned)
        if self._auto is None or self._auto[0] != key:
            ranking = ranked(store)
            weights = self._score_weights
            if weights is not None:  # a feature of weight 0 is never the parent
                ranking = [f for f in ranking if weights.get(f, 1.0)]
            self._auto = (key, ranking[0] if ranking else None)
        return self._auto[1]
