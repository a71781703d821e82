"""The base of TAN and KDB: Bayesian-network classifiers with a rebuilt structure.

The structure (each feature's parents) is rebuilt from the pair counts on a
schedule; KDB's features with two or more parents also keep *family* counts
(:mod:`stream_nb.seminaive._nodes` tables ``families[j][x_pa(j)]``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Unpack

from stream_nb._exceptions import ModelStateError
from stream_nb._params import log_prior
from stream_nb._state import (
    encode_key,
    pairs,
    read_count,
    read_key,
    read_keys,
    read_list,
    read_pairs,
)
from stream_nb.base import Capabilities, Learner
from stream_nb.seminaive import _nodes
from stream_nb.seminaive._base import (
    COUNT_TOLERANCE,
    SemiNaiveOptions,
    _SemiNaive,
    check_int,
    shared_signature,
)
from stream_nb.seminaive._nodes import Node, add_node, count, load_node
from stream_nb.seminaive._store import Item

__all__ = ["SIGNIFICANCE_Z", "_Dependence"]

_log = math.log
_EMPTY: dict[Any, Any] = {}
_ABSENT = object()  # "feature not in the event" (OTHER is a real bucket)
_NB_TERM: list[Any] = []  # "no parent usable, use the Naive Bayes term"

#: The first structure rebuild happens after this many events (or
#: ``rebuild_every`` if smaller); the gap then doubles up to ``rebuild_every``.
_FIRST_REBUILD = 32

#: TAN/KDB join two features only if their conditional dependence is
#: significant: G > χ² quantile at z = 3.09 σ (one-sided p ≈ 0.001). Without
#: it, sampling noise between irrelevant features (E[G] = df) adds edges that
#: cost accuracy on short streams with many classes.
SIGNIFICANCE_Z = 3.09


class _Dependence(_SemiNaive):
    """Base of TAN and KDB: Bayesian-network classifiers with a periodically rebuilt structure.

    Each feature ``j`` has an ordered tuple of parents ``pa(j)`` (best first).
    Its term is, in order of preference,

    * ``log P̂(x_j | y, x_pa(j))`` from the sparse *family* counts when
      ``|pa(j)| ≥ 2``, every parent is present and that parent configuration
      has weight ≥ ``min_parent_count`` (with ``j`` present);
    * ``log P̂(x_j | y, x_p)`` from the pair store for the first parent ``p``
      present in the event with ``N(x_p) ≥ min_parent_count``;
    * the CategoricalNB term ``log((N(y, x_j) + α) / (N(y, j) + α S_j))``;

    plus the CategoricalNB prior ``log((N_y + α) / (N + Kα))``.

    Family counts of a feature start from zero whenever a rebuild changes its
    parent set (they cannot be recovered from pairwise counts).
    """

    capabilities = Capabilities(informative_features=True, structure=True)

    def structure(self) -> dict[str, Any] | None:
        """The parents of each feature at the last rebuild (:meth:`Learner.structure`)."""
        return {"parents": [{"feature": f, "parents": list(pa)} for f, pa in self.parents.items()]}

    @shared_signature
    def __init__(
        self,
        alpha: float = 1.0,
        *,
        rebuild_every: int = 1000,
        **options: Unpack[SemiNaiveOptions],
    ) -> None:
        super().__init__(alpha, **options)
        self.rebuild_every = check_int(rebuild_every, "rebuild_every", 1)
        self._parents: dict[Hashable, tuple[Hashable, ...]] = {}
        self._families: dict[Hashable, dict[tuple[Hashable, ...], Node]] = {}
        # the schedule counts learned weight (undecayed), so w=2 equals two events
        self._weight_seen = 0.0
        self._next_rebuild = float(min(_FIRST_REBUILD, self.rebuild_every))

    def _params(self) -> dict[str, Any]:
        params = super()._params()
        params["rebuild_every"] = self.rebuild_every
        return params

    @property
    def parents(self) -> dict[Hashable, tuple[Hashable, ...]]:
        """The current structure: feature -> its parents, best first (copy)."""
        return dict(self._parents)

    # ------------------------------------------------------------------ structure
    def _choose_parents(self) -> dict[Hashable, tuple[Hashable, ...]]:
        """Hook: the new structure, from :meth:`_dependencies` (TAN: a tree, KDB: k parents)."""
        raise NotImplementedError

    def _dependencies(self) -> tuple[list[Hashable], Callable[[Hashable, Hashable], float]]:
        """The pair features ranked by ``I(X_i; Y)`` (ties by name), and the weight of
        joining two of them: their ``I(X_i; X_j | Y)`` if significant (G test at
        ``SIGNIFICANCE_Z``, see
        :meth:`~stream_nb.seminaive._store.PairStore.conditional_mutual_information`), else 0.
        """
        store = self._store
        ranked = store.ranked(store.pair_features)
        cmi = store.conditional_mutual_information(self._scale, SIGNIFICANCE_Z)
        order = store.feature_order()

        def weight(a: Hashable, b: Hashable) -> float:
            return cmi.get((a, b) if order[a] < order[b] else (b, a), 0.0)

        return ranked, weight

    def rebuild(self) -> None:
        """Rebuild the structure from the current counts now (also done every ``rebuild_every``).

        Families whose parent set changed restart their counts from zero.
        """
        new = self._choose_parents()
        old = self._parents
        for j, pa in new.items():
            if set(pa) == set(old.get(j, ())):
                new[j] = old.get(j, pa)  # same set: keep the order family keys use
        families = {}
        for j, pa in new.items():
            if len(pa) >= 2:
                families[j] = self._families.get(j, {}) if old.get(j) == pa else {}
        self._parents = new
        self._families = families

    def _after_learn(self, items: list[Item], y: Hashable, w: float) -> None:
        families = self._families
        if families:
            xd = dict(items)
            parents = self._parents
            k = self._store.classes[y]
            n_classes = len(self._store.classes)
            for j, fam in families.items():
                vj = xd.get(j, _ABSENT)
                if vj is _ABSENT:
                    continue
                key = tuple([xd.get(p, _ABSENT) for p in parents[j]])
                if _ABSENT not in key:
                    count(fam, key, vj, k, w, n_classes)
        self._weight_seen += w * self._scale  # raw w × scale = the event's weight
        if self._weight_seen >= self._next_rebuild * (1.0 - COUNT_TOLERANCE):
            self.rebuild()
            self._schedule()

    def _schedule(self) -> None:
        """Next rebuild: the gap doubles from ``_FIRST_REBUILD`` up to ``rebuild_every``."""
        n = self._weight_seen
        self._next_rebuild = n + min(max(n, _FIRST_REBUILD), self.rebuild_every)

    # ------------------------------------------------------------------ scoring
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        store = self._store
        categorical = store.categorical
        class_weight = categorical.class_weight
        if not class_weight:
            return {}
        items = self._encode(x, False)
        a = self.alpha / self._scale
        classes = list(class_weight)
        prior = log_prior(class_weight, categorical.total_weight, a, True, None)
        s = [prior[y] for y in classes]
        counts = categorical.counts
        present = categorical.present
        value_weight = store.value_weight
        pair_node = store.pair_node
        block = store.dense
        terms_at: list[tuple[int, int, int, float]] = []  # (parent item, child item, column, αS)
        index: dict[Any, int] = block.index if block is not None else _EMPTY
        get = index.get
        feat = block.feat if block is not None else _EMPTY
        parents = self._parents
        families = self._families
        threshold = self._raw_threshold()
        xd = dict(items)
        log = _log
        zeros = [0.0] * len(classes)
        for j, vj in items:
            values = counts.get(j)
            if values is None:
                continue
            n_values = len(values)
            sa = a * n_values
            pa = parents.get(j, ())
            node = None
            if len(pa) >= 2:
                key = tuple([xd.get(p, _ABSENT) for p in pa])
                if _ABSENT not in key:
                    node = families[j].get(key)
                    if node is not None and sum(node[0]) < threshold:
                        node = None
            if node is None:
                for p in pa:
                    vp = xd.get(p, _ABSENT)
                    if vp is not _ABSENT and value_weight[p].get(vp, 0.0) >= threshold:
                        if block is not None:  # gathered below, all features at once
                            terms_at.append((get((p, vp), 0), get((j, vj), 0), feat.get(j, 0), sa))
                            break
                        row, ctx = pair_node((p, vp), (j, vj), zeros)
                        terms = [log((r + a) / (c + sa)) for r, c in zip(row, ctx, strict=True)]
                        s = [v + t for v, t in zip(s, terms, strict=True)]
                        break
                else:
                    node = _NB_TERM
            if node is _NB_TERM:  # the Naive Bayes term (CategoricalStatistics.log_likelihoods)
                cg = present[j].get
                rg = values.get(vj, _EMPTY).get
                s = [
                    v + log((rg(y, 0.0) + a) / (cg(y, 0.0) + sa))
                    for v, y in zip(s, classes, strict=True)
                ]
            elif node is not None:  # the family counts
                row = node[1].get(vj, zeros)
                s = [v + log((r + a) / (c + sa)) for v, r, c in zip(s, row, node[0], strict=True)]
        if terms_at:
            assert block is not None
            s = [v + t for v, t in zip(s, block.pair_terms(terms_at, a).tolist(), strict=True)]
        return dict(zip(classes, s, strict=True))

    # ------------------------------------------------------------------ merging
    def merge(self, other: Learner) -> Learner:
        """Add ``other``'s counts, then rebuild the structure from the merged counts.

        Family counts (``|pa(j)| ≥ 2``) are added only where both models have
        the same parents for ``j``; the rebuild may then reset some of them.
        Discretiser rules: see :mod:`stream_nb.seminaive.discretise`.
        """
        both_trained = self.n_learned > 0 and other.n_learned > 0
        super().merge(other)
        if both_trained:
            self.rebuild()
            self._schedule()
        return self

    def _merge_extra(
        self,
        other: _SemiNaive,
        factor: float,
        vmap: Mapping[Hashable, Mapping[Hashable, Hashable]],
    ) -> None:
        assert isinstance(other, _Dependence)  # (merge checks that the classes are equal)
        if self.n_learned == 0:  # untrained: adopt the other's structure and schedule
            self._parents = dict(other._parents)
            self._families = {j: {} for j in other._families}
            self._next_rebuild = other._next_rebuild
        self._weight_seen += other._weight_seen
        cmap = self._store.class_map(other._store)
        n_classes = len(self._store.classes)
        for j, fam in other._families.items():
            pa = self._parents.get(j)
            if pa != other._parents.get(j) or j not in self._families or pa is None:
                continue
            dst = self._families[j]
            maps = [vmap[p] for p in pa]
            for key, node in fam.items():
                new_key = tuple([m[v] for m, v in zip(maps, key, strict=True)])
                add_node(dst, new_key, node, cmap, vmap[j], factor, n_classes)

    def _extra_add_class(self) -> None:
        _nodes.add_class(self._families)

    def _rescale_extra(self, factor: float) -> None:
        _nodes.rescale(self._families, factor)

    # ------------------------------------------------------------------ state
    _FIELDS = (*_SemiNaive._FIELDS, "parents", "families", "next_rebuild", "weight_seen")

    def _extra_to_state(self) -> dict[str, Any]:
        return {
            "parents": [
                [encode_key(j), [encode_key(p) for p in pa]] for j, pa in self._parents.items()
            ],
            "families": [
                [
                    encode_key(j),
                    [[[encode_key(v) for v in k], c, pairs(v)] for k, (c, v) in fam.items()],
                ]
                for j, fam in self._families.items()
            ],
            "next_rebuild": self._next_rebuild,
            "weight_seen": self._weight_seen,
        }

    def _extra_from_state(self, stats: Mapping[str, Any]) -> None:
        counts = self._store.categorical.counts
        cap = self.max_values_per_feature

        def parent_list(value: Any, where: str) -> tuple[Hashable, ...]:
            pa = tuple(read_keys(value, where))
            if any(p not in counts for p in pa):
                raise ModelStateError(f"{where}: parents must be learned features")
            return pa

        parents = read_pairs(stats["parents"], "stats.parents", parent_list)
        for j, pa in parents.items():
            if j not in counts or j in pa:
                raise ModelStateError(
                    f"stats.parents[{j!r}]: not a learned feature, or its own parent"
                )
        self._parents = parents
        n_classes = len(self._store.classes)

        def value(v: Any, where: str) -> Hashable:
            return read_key(v, where, allow_none=cap is not None)

        def family(value_: Any, where: str) -> dict[tuple[Hashable, ...], Node]:
            out: dict[tuple[Hashable, ...], Node] = {}
            for n, node in enumerate(read_list(value_, where)):
                key, c, rows = read_list(node, f"{where}[{n}]", 3)
                key = tuple(
                    value(v, f"{where}[{n}][0][{i}]")
                    for i, v in enumerate(read_list(key, f"{where}[{n}][0]"))
                )
                if key in out:
                    raise ModelStateError(f"{where}[{n}][0]: parent values {key!r} listed twice")
                out[key] = list(load_node(c, rows, n_classes, f"{where}[{n}]", value))
            return out

        families = read_pairs(stats["families"], "stats.families", family)
        if set(families) != {j for j, pa in self._parents.items() if len(pa) >= 2}:
            raise ModelStateError(
                "stats.families: families must exist exactly for features with two or more parents"
            )
        for j, fam in families.items():
            if any(len(key) != len(self._parents[j]) for key in fam):
                raise ModelStateError(f"stats.families[{j!r}]: one value per parent expected")
        self._families = families
        self._next_rebuild = read_count(stats["next_rebuild"], "stats.next_rebuild")
        self._weight_seen = read_count(stats["weight_seen"], "stats.weight_seen")

    def _extra_size(self) -> int:
        return sum(map(len, self._parents.values())) + _nodes.size(self._families)
