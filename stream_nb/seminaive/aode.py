"""AODE: averaged one-dependence estimators."""

from __future__ import annotations

from stream_nb.seminaive._superparent import _SuperParent

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

    Cost per event with ``d`` features present and ``K`` classes: learning
    ``O(d²)`` dictionary updates, prediction ``O(d² K)`` logarithms.

    Parameters
    ----------
    alpha
        Smoothing constant α > 0.
    min_parent_count
        Weight ``N(x_i)`` (all classes) a value needs to act as a super-parent.
        Webb et al. use 30 in batch; 1 (default) uses every value seen at least once.
    max_values_per_feature, n_bins, warmup, bin_edges, strategy, schema,
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
