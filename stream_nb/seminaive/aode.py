"""AODE: averaged one-dependence estimators."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Unpack

from stream_nb._exceptions import ConfigError
from stream_nb.seminaive._base import SemiNaiveOptions, shared_signature
from stream_nb.seminaive._superparent import _SuperParent
from stream_nb.seminaive._weights import dense_mutual_information, smoothed_mutual_information

#: The values of ``AODE(weighting=...)``.
WEIGHTINGS = ("uniform", "mutual_information")

__all__ = ["AODE"]


class AODE(_SuperParent):
    """Averaged one-dependence estimators (Webb, Boughton & Wang 2005), learned online.

    Every feature value of the event with enough support is tried as a
    super-parent and the SPODE joint estimates are averaged:

    ``score(y) = log Σ_{i ∈ parents} exp(SPODE_i(y))``,
    ``parents = {i in x, learned : N(x_i) ≥ min_parent_count}``,

    with ``SPODE_i(y) = log P̂(y, x_i) + Σ_{j ≠ i} log P̂(x_j | y, x_i)`` as in
    :class:`SPODE` (the ``1/|parents|`` factor cancels when normalising over
    classes). The sum is a max-shifted log-sum-exp. With no qualifying parent
    the model is :class:`~stream_nb.CategoricalNB` with the same α.

    Weighted AODE (Jiang & Zhang 2006, ``weighting="mutual_information"``) mixes
    the same SPODEs with weights ``W_i = I(X_i; Y)``:
    ``score(y) = log(Σ_{i ∈ parents} W_i exp(SPODE_i(y)) / Σ_{i ∈ parents} W_i)``,
    the mutual information being that of SPODE ``i``'s own smoothed prior
    ``P̂(y, x_i)`` and its marginals (see :mod:`stream_nb.seminaive._weights`),
    recomputed from the current counts at each prediction. Parents qualify as
    above; when every qualifying parent's weight is 0 (one class learned so far,
    say) they are mixed uniformly. Predictions then take the per-event path
    (no batch kernel).

    Cost per event with ``d`` features present and ``K`` classes: learning
    ``O(d²)`` dictionary updates, prediction ``O(d² K)`` logarithms.

    Parameters
    ----------
    alpha
        Smoothing constant α ≥ 0; 0 is maximum likelihood (zero counts score ``-inf``,
        see :mod:`stream_nb.seminaive._zero`; the known-event path and batch kernel are not used).
    min_parent_count
        Weight ``N(x_i)`` (all classes) a value needs to act as a super-parent.
        Webb et al. use 30 in batch; 1 (default) uses every value seen at least once.
    weighting
        ``"uniform"`` (default, AODE) or ``"mutual_information"`` (weighted AODE).
    max_values_per_feature, n_bins, warmup, bin_edges, strategy, warmup_terms, schema,
    max_pair_features, feature_weights, half_life, max_classes, max_features
        As in :class:`SPODE` (a feature of weight 0 has no SPODE in the mixture).

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

    Weighted by ``I(X_i; Y)``: ``a`` tells the class, ``b`` does not, so the
    SPODE with parent ``a`` weighs more than with uniform weights:

    >>> weighted = AODE(weighting="mutual_information")
    >>> for x, y in [({"a": "0", "b": "x"}, "no"), ({"a": "1", "b": "y"}, "yes"),
    ...              ({"a": "1", "b": "x"}, "yes"), ({"a": "0", "b": "y"}, "no")]:
    ...     weighted.learn_one(x, y)
    ...     model.learn_one(x, y)
    >>> probe = {"a": "1", "b": "x"}
    >>> weighted.predict_proba_one(probe)["yes"] > model.predict_proba_one(probe)["yes"]
    True
    """

    @shared_signature
    def __init__(
        self,
        alpha: float = 1.0,
        *,
        weighting: str = "uniform",
        **options: Unpack[SemiNaiveOptions],
    ) -> None:
        super().__init__(alpha, **options)
        if weighting not in WEIGHTINGS:
            raise ConfigError(
                f"weighting must be 'uniform' or 'mutual_information', got {weighting!r}"
            )
        self.weighting = weighting
        # I(X_i; Y) by feature, valid while the key (the counts' version) holds
        self._mi: tuple[tuple[float, float, int], dict[Hashable, float]] | None = None

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "weighting": self.weighting}

    def _weighted(self) -> bool:
        return self.weighting != "uniform"

    def _parent_weights(self, features: list[Hashable]) -> list[float]:
        """``I(X_i; Y)`` of each feature (see :mod:`stream_nb.seminaive._weights`) when
        weighted, else uniform weights."""
        if not self._weighted():
            return super()._parent_weights(features)
        store = self._store
        key = (store.total_weight, self._scale, self.n_learned)
        if self._mi is None or self._mi[0] != key:
            self._mi = (key, {})
        cache = self._mi[1]
        a = self.alpha / self._scale
        block = store.dense
        if block is not None and block.n_classes == len(store.class_weight):
            if not cache:  # every pair feature at once, from the dense block
                mi = dense_mutual_information(block, a).tolist()
                cache.update(zip(block.feat, mi, strict=True))
            return [cache[f] for f in features]
        categorical = store.categorical
        classes = list(categorical.class_weight)
        out = []
        for f in features:
            mi = cache.get(f)
            if mi is None:
                mi = cache[f] = smoothed_mutual_information(
                    categorical.counts[f], classes, store.feature_weight[f], a
                )
            out.append(mi)
        return out
