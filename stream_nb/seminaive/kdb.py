"""KDB: k-dependence Bayesian classifier with a periodically rebuilt structure."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Unpack

from stream_nb.seminaive._base import SemiNaiveOptions, check_int, shared_signature
from stream_nb.seminaive._dependence import _Dependence

__all__ = ["KDB"]


class KDB(_Dependence):
    """k-dependence Bayes (Sahami 1996), learned online.

    On every rebuild (same schedule as :class:`~stream_nb.TAN`) features are
    ranked by ``I(X_i; Y)`` (ties: by name); each feature takes as
    parents up to ``k`` higher-ranked features with the largest
    ``I(X_i; X_j | Y)``, best first, among those whose dependence is
    significant (G test at p ≈ 0.001, see
    :func:`~stream_nb.seminaive._information.conditional_mutual_information`).
    Cost of a rebuild: one pass over the pair counts plus ``O(d² log d)``.

    With ``k = 1`` every term uses the pair store (all history). For a
    feature with two or more parents the term uses sparse *family* counts
    ``N(y, x_pa, x_j)`` and ``N(y, x_pa, j)``, one update per feature per
    event; they start when the structure gives the feature that parent set
    (so they hold fewer events than the pair counts), and the model falls
    back to the best single present parent, then to CategoricalNB, exactly as
    described in :class:`~stream_nb.seminaive._dependence._Dependence`. Their size
    is bounded by ``max_values_per_feature^(k+1) · K`` per feature.

    Parameters
    ----------
    k
        Maximum number of feature parents per feature (≥ 1).
    alpha, rebuild_every, min_parent_count, max_values_per_feature, n_bins, warmup,
    bin_edges, strategy, warmup_terms, schema, max_pair_features, feature_weights, half_life,
    max_classes, max_features
        As in :class:`~stream_nb.TAN`.

    Examples
    --------
    >>> import random
    >>> from stream_nb import KDB
    >>> rng = random.Random(1)
    >>> model = KDB(k=1, rebuild_every=100)
    >>> for _ in range(300):
    ...     y = rng.random() < 0.5
    ...     a = y if rng.random() < 0.9 else not y
    ...     b = a if rng.random() < 0.9 else not a
    ...     model.learn_one({"a": str(a), "b": str(b)}, y)
    >>> model.parents
    {'a': (), 'b': ('a',)}
    """

    @shared_signature
    def __init__(
        self,
        k: int = 2,
        *,
        alpha: float = 1.0,
        rebuild_every: int = 1000,
        **options: Unpack[SemiNaiveOptions],
    ) -> None:
        super().__init__(alpha, rebuild_every=rebuild_every, **options)
        self.k = check_int(k, "k", 1)

    def _params(self) -> dict[str, Any]:
        return {"k": self.k, **super()._params()}

    def _choose_parents(self) -> dict[Hashable, tuple[Hashable, ...]]:
        ranked, weight = self._dependencies()
        parents: dict[Hashable, tuple[Hashable, ...]] = {}
        for r, f in enumerate(ranked):
            scored = []
            for g in ranked[:r]:
                w = weight(g, f)
                if w > 0.0:
                    scored.append((w, g))
            scored.sort(key=lambda t: -t[0])
            parents[f] = tuple(g for _w, g in scored[: self.k])
        return parents
