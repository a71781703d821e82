"""TAN: tree-augmented naive Bayes with a periodically rebuilt Chow-Liu tree."""

from __future__ import annotations

from collections.abc import Hashable

from stream_nb.seminaive._dependence import _Dependence

__all__ = ["TAN"]


class TAN(_Dependence):
    """Tree-augmented naive Bayes (Friedman, Geiger & Goldszmidt 1997), learned online.

    Every ``rebuild_every`` events (after early rebuilds at 32, 64, 128, …
    events) the structure is rebuilt from the running pair counts: the
    conditional mutual information ``I(X_i; X_j | Y)`` of every pair of
    features seen together (see
    :func:`~stream_nb.seminaive._information.conditional_mutual_information`)
    weights a complete graph whose maximum weighted spanning tree (Prim's
    algorithm, rooted at the feature with the largest ``I(X_i; Y)``) gives each
    feature at most one parent. Pairs whose dependence is not significant (G
    test at p ≈ 0.001) are not joined, so the tree may be a forest and TAN on
    conditionally independent features is Naive Bayes.
    Cost of a rebuild: one pass over the stored pair counts,
    ``O(P · S² · K)`` for ``P`` stored feature pairs with ``S`` values and
    ``K`` classes, plus ``O(d²)`` for the tree; between rebuilds learning
    costs ``O(d²)`` updates and prediction ``O(d K)``.

    ``score(y) = log P̂(y) + Σ_j log P̂(x_j | y, x_pa(j))`` with
    ``P̂(x_j | y, x_p) = (N(y, x_p, x_j) + α) / (N(y, x_p, j) + α S_j)``,
    and CategoricalNB terms (same α) for the root, for features whose parent
    is absent from ``x`` or has ``N(x_p) < min_parent_count``, and for features
    learned since the last rebuild.

    Parameters
    ----------
    alpha, min_parent_count, max_values_per_feature, n_bins, warmup, bin_edges, strategy,
    warmup_terms, schema, max_pair_features
        As in :class:`~stream_nb.SPODE`.
    feature_weights
        ``{feature: w >= 0}`` (features left out: ``w = 1``): the score is
        ``log P̂(y) + Σ_j w_j log P̂(x_j | y, x_pa(j))``. A weight of 0 removes the
        feature from prediction: no term, and children skip it as a parent (their
        next parent, else Naive Bayes); the structure is still learned with it.
        Models merge only with equal weights; scoring takes the per-event path.
    rebuild_every
        Events between structure rebuilds once the schedule has settled.
    half_life
        Optional forgetting, see :class:`stream_nb.base.Learner`.
    max_classes, max_features
        Memory bounds, as in :class:`~stream_nb.SPODE`.

    Examples
    --------
    >>> import random
    >>> from stream_nb import TAN
    >>> rng = random.Random(0)
    >>> model = TAN(rebuild_every=100)
    >>> for _ in range(300):
    ...     y = rng.random() < 0.5
    ...     a = y if rng.random() < 0.8 else not y
    ...     b = a if rng.random() < 0.9 else not a   # b depends on a
    ...     model.learn_one({"a": str(a), "b": str(b), "c": str(rng.random() < 0.5)}, y)
    >>> model.parents["b"]
    ('a',)
    """

    def _choose_parents(self) -> dict[Hashable, tuple[Hashable, ...]]:
        if not self._store.categorical.counts:
            return {}
        # root: most informative feature; ties and Prim's ties by name, never learning order
        features, weight = self._dependencies()
        parents: dict[Hashable, tuple[Hashable, ...]] = {features[0]: ()}
        # Prim: best[f] = (weight, parent) of the best edge from the tree to f
        best = {f: (weight(features[0], f), features[0]) for f in features[1:]}
        while best:
            f = max(best, key=lambda g: best[g][0])  # first maximum: ties by the order above
            w, p = best.pop(f)
            parents[f] = (p,) if w > 0.0 else ()
            for g, (wg, _pg) in best.items():
                wf = weight(f, g)
                if wf > wg:
                    best[g] = (wf, f)
        return parents
