"""The one sparse store of single and pairwise counts shared by SPODE, AODE, TAN and KDB.

Notation (all weights in the raw units of :mod:`stream_nb.base`):

``N(y)``, ``N``, ``N(y, i)`` and ``N(y, x_i)``
    Kept by an embedded :class:`~stream_nb.naive_bayes.categorical.CategoricalNB` (its
    ``_class_weight``, ``_total_weight``, ``_present`` and ``_counts``), whose
    scoring is reused as the fallback with the same α.
``N_i``
    ``feature_weight[i]``: weight of events in which feature ``i`` was present.
``N(x_i)``
    ``value_weight[i][v]``: weight of events with ``x_i = v``, all classes.
``N(y, x_i, j)`` and ``N(y, x_i, x_j)``
    ``pairs[(i, v_i)][j] = [ctx, values]`` where ``ctx[k] = N(y_k, x_i, j)`` and
    ``values[v_j][k] = N(y_k, x_i, x_j)``, for ordered pairs ``i ≠ j`` of features
    present together, only for combinations actually seen.

Pair counts are lists indexed by class (``classes[y] = k``, the order classes
were first learned) rather than dicts keyed by class: AODE's prediction reads
``d(d − 1)`` such vectors and zipping lists avoids ``d(d − 1)·K`` ``dict.get``
calls (docs/benchmarks.md). A new
class appends one ``0.0`` to every vector once (O(model), rare).

Learning an event with ``d`` features present costs ``d`` single updates and
``d(d − 1)`` pair updates; nothing else is touched.

With ``dense=True`` (AODE, SPODE) the pair counts live instead in a
:class:`~stream_nb.seminaive._dense.DenseBlock` of numpy arrays while it stays
under :data:`~stream_nb.seminaive._dense.DENSE_MAX_BYTES`; past that, or after
a merge or state load that does not fit, the store converts to (or stays with)
the dictionaries above. ``pairs`` is then a view built from the block on
demand (states, merges and sizes are the same in both representations).
"""

from __future__ import annotations

import math
from collections.abc import Container, Hashable, Mapping
from typing import Any

from stream_nb._exceptions import ModelStateError
from stream_nb._state import (
    check_at_most,
    check_consistent,
    encode_key,
    pairs,
    read_count,
    read_key,
    read_keys,
    read_list,
    read_mapping,
    read_pairs,
)
from stream_nb._stores import (
    OTHER,
    add_scaled,
    count_leaves,
    rescale,
    tree_from_pairs,
    tree_to_pairs,
    value_map,
)
from stream_nb.naive_bayes.categorical import CategoricalNB, load_categorical
from stream_nb.seminaive._dense import DenseBlock

__all__ = ["OTHER", "PairStore", "add_vector", "chi2_quantile", "load_vector"]

_log = math.log

Item = tuple[Hashable, Hashable]
Node = list[Any]  # [ctx: list by class, values: dict v_j -> list by class]


class PairStore:
    """Sparse single and pairwise class-conditional counts (see the module docstring).

    Parameters
    ----------
    alpha
        Smoothing constant of the embedded CategoricalNB fallback.

    Examples
    --------
    >>> s = PairStore(alpha=1.0)
    >>> s.add_class("yes")
    >>> s.learn([("a", 1), ("b", "x")], "yes", 1.0)
    >>> s.pairs[("a", 1)]["b"]
    [[1.0], {'x': [1.0]}]
    >>> s.size()
    14
    """

    __slots__ = (
        "_sparse",
        "classes",
        "dense",
        "feature_weight",
        "max_pair_features",
        "nb",
        "pair_features",
        "value_weight",
        "want_dense",
    )

    def __init__(
        self,
        alpha: float,
        max_pair_features: int | None = None,
        dense: bool = False,
        max_values_per_feature: int | None = None,
    ) -> None:
        self.nb = CategoricalNB(alpha=alpha, max_values_per_feature=max_values_per_feature)
        self.feature_weight: dict[Hashable, float] = {}
        self.value_weight: dict[Hashable, dict[Hashable, float]] = {}
        self._sparse: dict[Item, dict[Hashable, Node]] = {}
        self.want_dense = dense
        self.dense: DenseBlock | None = DenseBlock(0) if dense else None
        self.classes: dict[Hashable, int] = {}  # class -> index in every count vector
        # features with pair counts: the first ``max_pair_features`` learned (ordered set)
        self.max_pair_features = max_pair_features
        self.pair_features: dict[Hashable, None] = {}

    @property
    def pairs(self) -> dict[Item, dict[Hashable, Node]]:
        """The sparse pair counts (built from the dense block when there is one: read only)."""
        if self.dense is not None:
            return self.dense.to_sparse(self.nb._counts)
        return self._sparse

    def pair_node(
        self, parent: Item, child: Item, zeros: list[float]
    ) -> tuple[list[float], list[float]]:
        """``(N(y, x_i, x_j), N(y, x_i, j))`` by class index for ``parent = (i, x_i)``, ``child``.

        Zeros where the two were never seen together (either representation).
        """
        dense = self.dense
        if dense is None:
            node = self._sparse.get(parent)
            if node is None:
                return zeros, zeros
            pair = node.get(child[0])
            if pair is None:
                return zeros, zeros
            return pair[1].get(child[1], zeros), pair[0]
        a = dense.index.get(parent)
        c = dense.feat.get(child[0])
        if a is None or c is None:
            return zeros, zeros
        b = dense.index.get(child, 0)
        return dense.pair[a, b].tolist(), dense.ctx[a, c].tolist()

    def to_sparse(self) -> None:
        """Keep the pair counts in dictionaries from now on (drop the dense block)."""
        if self.dense is not None:
            self._sparse = self.dense.to_sparse(self.nb._counts)
            self.dense = None

    def try_dense(self) -> None:
        """Move the pair counts into a dense block if wanted and small enough."""
        if not self.want_dense:
            return
        block = DenseBlock(len(self.classes))
        if block.load(
            self.nb._counts,
            self.classes,
            self.feature_weight,
            self.value_weight,
            self.pair_features,
            self.pairs,
        ):
            self.dense = block
            self._sparse = {}
        else:
            self.to_sparse()

    def _admit(self, f: Hashable) -> None:
        """A feature learned for the first time gets pair counts while there is room."""
        cap = self.max_pair_features
        if cap is None or len(self.pair_features) < cap:
            self.pair_features[f] = None

    def add_class(self, y: Hashable) -> None:
        """Give class ``y`` the next index: append ``0.0`` to every pair vector."""
        self.classes[y] = len(self.classes)
        if self.dense is not None:
            if self.dense.add_class():
                return
            self.to_sparse()  # the block would be too large: it has K − 1 classes
        for sub in self._sparse.values():
            for ctx, values in sub.values():
                ctx.append(0.0)
                for row in values.values():
                    row.append(0.0)

    # ------------------------------------------------------------------ learning
    def learn(self, items: list[Item], y: Hashable, w: float) -> None:
        """Add one (already discretised) event: ``items`` are its present ``(feature, value)``.

        ``y`` must have been given an index with :meth:`add_class`.
        """
        nb = self.nb
        class_weight = nb._class_weight
        class_weight[y] = class_weight.get(y, 0.0) + w
        nb._total_weight += w
        present: dict[Any, Any] = nb._present
        counts: dict[Any, Any] = nb._counts
        feature_weight = self.feature_weight
        value_weight = self.value_weight
        pair_features = self.pair_features
        for f, v in items:
            by_class = present.get(f)
            if by_class is None:
                by_class = present[f] = {}
                counts[f] = {}
                value_weight[f] = {}
                feature_weight[f] = 0.0
                self._admit(f)
            by_class[y] = by_class.get(y, 0.0) + w
            feature_weight[f] += w
            values = counts[f]
            vc = values.get(v)
            if vc is None:
                values[v] = {y: w}
            else:
                vc[y] = vc.get(y, 0.0) + w
            fvw = value_weight[f]
            fvw[v] = fvw.get(v, 0.0) + w
        k = self.classes[y]
        if self.dense is not None:
            if self.dense.learn(items, pair_features, k, w):
                return
            self.to_sparse()  # the block would be too large
        if len(pair_features) < len(present):  # some features are Naive Bayes only
            items = [item for item in items if item[0] in pair_features]
        if len(items) < 2:
            return
        pairs = self._sparse
        zeros = [0.0] * len(self.classes)
        for item in items:
            i = item[0]
            sub = pairs.get(item)
            if sub is None:
                sub = pairs[item] = {}
            for j, vj in items:
                if j is i:
                    continue
                node = sub.get(j)
                if node is None:
                    node = sub[j] = [zeros.copy(), {}]
                node[0][k] += w
                row = node[1].get(vj)
                if row is None:
                    row = node[1][vj] = zeros.copy()
                row[k] += w

    def add_item(self, items: list[Item], item: Item, y: Hashable, w: float) -> None:
        """Add feature ``item`` to an event already learned with ``items`` (warm-up replay).

        Adds the single counts of ``item`` and its pair counts with every item
        of the event, in both directions: afterwards the store is exactly as if
        the event had been learned with ``items + [item]``.
        """
        nb = self.nb
        f, v = item
        present: dict[Any, Any] = nb._present
        if f not in present:
            present[f] = {}
            nb._counts[f] = {}  # type: ignore[index]
            self.value_weight[f] = {}
            self.feature_weight[f] = 0.0
            self._admit(f)
        by_class = present[f]
        by_class[y] = by_class.get(y, 0.0) + w
        self.feature_weight[f] += w
        values: dict[Any, Any] = nb._counts[f]  # type: ignore[index]
        vc = values.setdefault(v, {})
        vc[y] = vc.get(y, 0.0) + w
        fvw = self.value_weight[f]
        fvw[v] = fvw.get(v, 0.0) + w
        pair_features = self.pair_features
        if f not in pair_features:
            return
        k = self.classes[y]
        if self.dense is not None:
            if self.dense.add_item(items, item, pair_features, k, w):
                return
            self.to_sparse()
        items = [item for item in items if item[0] in pair_features]
        if not items:
            return
        n_classes = len(self.classes)
        pairs = self._sparse
        sub = pairs.setdefault(item, {})
        for other in items:
            for parent, j, vj in ((sub, other[0], other[1]), (pairs.setdefault(other, {}), f, v)):
                node = parent.get(j)
                if node is None:
                    node = parent[j] = [[0.0] * n_classes, {}]
                node[0][k] += w
                row = node[1].get(vj)
                if row is None:
                    row = node[1][vj] = [0.0] * n_classes
                row[k] += w

    # ------------------------------------------------------------------ merging
    def value_map(
        self, other: PairStore, cap: int | None, keep: Container[Hashable] | None = None
    ) -> dict[Hashable, dict[Hashable, Hashable]]:
        """Where each of ``other``'s values lands here: itself, or :data:`OTHER` past the cap
        (:func:`stream_nb._stores.value_map`), for its features in ``keep`` (all by default)."""
        theirs: Any = other.nb._counts
        if keep is not None:
            theirs = {f: v for f, v in theirs.items() if f in keep}
        return value_map(self.nb._counts, theirs, cap)

    def class_map(self, other: PairStore) -> list[int]:
        """Index here of each of ``other``'s class indices (add its new classes first)."""
        return [self.classes[y] for y in other.classes]

    def merge(
        self,
        other: PairStore,
        factor: float,
        vmap: Mapping[Hashable, Mapping[Hashable, Hashable]],
    ) -> None:
        """Add ``factor × other``, relabelling values through ``vmap`` (see :meth:`value_map`).

        Every class of ``other`` must already have an index here (:meth:`add_class`).
        """
        cmap = self.class_map(other)
        n_classes = len(self.classes)
        nb, onb = self.nb, other.nb
        self.to_sparse()
        for f in onb._counts:
            if f not in nb._counts and f in vmap:
                self._admit(f)
        pair_features = self.pair_features
        add_scaled(nb._class_weight, onb._class_weight, factor)
        nb._total_weight += onb._total_weight * factor
        if len(vmap) == len(onb._counts):
            add_scaled(nb._present, onb._present, factor)
            add_scaled(self.feature_weight, other.feature_weight, factor)
        else:  # some of other's features are past max_features: not learned
            present: dict[Any, Any] = nb._present
            their_present: dict[Any, Any] = onb._present
            for g in vmap:
                add_scaled(present.setdefault(g, {}), their_present[g], factor)
                self.feature_weight[g] = self.feature_weight.get(g, 0.0) + (
                    other.feature_weight[g] * factor
                )
        for f, values in onb._counts.items():
            if f not in vmap:
                continue
            mapping = vmap[f]
            dst = nb._counts.setdefault(f, {})
            dst_w = self.value_weight.setdefault(f, {})
            src_w = other.value_weight[f]
            for v, by_class in values.items():
                t = mapping[v]
                add_scaled(dst.setdefault(t, {}), by_class, factor)
                dst_w[t] = dst_w.get(t, 0.0) + src_w[v] * factor
        for (i, vi), sub in other.pairs.items():
            if i not in pair_features or i not in vmap:
                continue  # Naive Bayes only (or not learned) here: drop the pairs of i
            dst_sub = self._sparse.setdefault((i, vmap[i][vi]), {})
            for j, (ctx, values) in sub.items():
                if j not in pair_features or j not in vmap:
                    continue
                node = dst_sub.get(j)
                if node is None:
                    node = dst_sub[j] = [[0.0] * n_classes, {}]
                add_vector(node[0], ctx, cmap, factor)
                mapping = vmap[j]
                dst_values = node[1]
                for vj, row in values.items():
                    t = mapping[vj]
                    target = dst_values.get(t)
                    if target is None:
                        target = dst_values[t] = [0.0] * n_classes
                    add_vector(target, row, cmap, factor)
        self.try_dense()

    def rescale(self, factor: float) -> None:
        """Multiply every stored weight by ``factor``."""
        self.nb._rescale(factor)
        rescale(self.feature_weight, factor)
        rescale(self.value_weight, factor)
        if self.dense is not None:
            self.dense.rescale(factor)
        for sub in self._sparse.values():
            for ctx, values in sub.values():
                ctx[:] = [v * factor for v in ctx]
                for row in values.values():
                    row[:] = [v * factor for v in row]

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """JSON-able statistics."""
        return {
            "nb": self.nb._stats_to_state(),
            "pair_features": [encode_key(f) for f in self.pair_features],
            "feature_weight": tree_to_pairs(self.feature_weight),
            "value_weight": tree_to_pairs(self.value_weight),
            "pairs": [
                [
                    encode_key(i),
                    encode_key(vi),
                    [[encode_key(j), c, pairs(v)] for j, (c, v) in sub.items()],
                ]
                for (i, vi), sub in self.pairs.items()
            ],
        }

    def load_state(self, state: Any, where: str = "stats.store") -> None:
        """Inverse of :meth:`to_state`, validated (O(size)).

        Checks, besides those of :func:`stream_nb.naive_bayes.categorical.load_categorical`:
        ``N_i = Σ_y N(y, i)`` and ``N(x_i) = Σ_y N(y, x_i)`` for every
        learned feature and value; pair features learned and at most
        ``max_pair_features``; every pair node of two distinct pair features
        and learned values, one weight ≥ 0 per class, with
        ``N(y, x_i, j) = Σ_{x_j} N(y, x_i, x_j) ≤ N(y, x_i)``.
        """
        state = read_mapping(
            state, where, ("nb", "pair_features", "feature_weight", "value_weight", "pairs")
        )
        nb = self.nb
        cap = nb.max_values_per_feature
        nb_state = read_mapping(
            state["nb"], f"{where}.nb", ("class_weight", "total_weight", "present", "counts")
        )
        loaded = load_categorical(nb_state, f"{where}.nb", max_values=cap, max_features=None)
        nb._class_weight, nb._total_weight, nb._present, nb._counts = loaded
        present: dict[Any, Any] = nb._present
        counts: dict[Any, Any] = nb._counts
        self.feature_weight = read_pairs(
            state["feature_weight"], f"{where}.feature_weight", read_count
        )

        def value(v: Any, w: str) -> Any:
            return read_key(v, w, allow_none=cap is not None)

        self.value_weight = tree_from_pairs(
            state["value_weight"], 2, f"{where}.value_weight", keys=(read_key, value)
        )
        if (
            self.feature_weight.keys() != present.keys()
            or self.value_weight.keys() != present.keys()
        ):
            raise ModelStateError(
                f"{where}: feature_weight and value_weight must name the learned features"
            )
        for f, by_class in present.items():
            check_consistent(
                self.feature_weight[f], by_class.values(), f"{where}.feature_weight[{f!r}]",
                "its class weights",
            )  # fmt: skip
            vw = self.value_weight[f]
            if vw.keys() != counts[f].keys():
                raise ModelStateError(
                    f"{where}.value_weight[{f!r}]: must name the feature's learned values"
                )
            for v, by_class_v in counts[f].items():
                check_consistent(
                    vw[v], by_class_v.values(), f"{where}.value_weight[{f!r}][{v!r}]",
                    "its class weights",
                )  # fmt: skip
        self.classes = {y: k for k, y in enumerate(nb._class_weight)}
        self.pair_features = dict.fromkeys(
            read_keys(state["pair_features"], f"{where}.pair_features")
        )
        if not self.pair_features.keys() <= present.keys():
            raise ModelStateError(f"{where}.pair_features: must be learned features")
        if self.max_pair_features is not None and len(self.pair_features) > self.max_pair_features:
            raise ModelStateError(
                f"{where}.pair_features: {len(self.pair_features)} features, more than "
                f"max_pair_features={self.max_pair_features}"
            )
        labels = list(self.classes)
        n_classes = len(labels)
        store: dict[Item, dict[Hashable, Node]] = {}
        for e, entry in enumerate(read_list(state["pairs"], f"{where}.pairs")):
            at = f"{where}.pairs[{e}]"
            i, vi, sub = read_list(entry, at, 3)
            i = read_key(i, f"{at}[0]")
            vi = value(vi, f"{at}[1]")
            if i not in self.pair_features or vi not in counts[i]:
                raise ModelStateError(
                    f"{at}: ({i!r}, {vi!r}) is not a learned value of a pair feature"
                )
            if (i, vi) in store:
                raise ModelStateError(f"{at}: ({i!r}, {vi!r}) listed twice")
            parent = counts[i][vi]
            node_map: dict[Hashable, Node] = {}
            for n, node in enumerate(read_list(sub, f"{at}[2]")):
                nat = f"{at}[2][{n}]"
                j, ctx, values = read_list(node, nat, 3)
                j = read_key(j, f"{nat}[0]")
                if j == i or j not in self.pair_features or j in node_map:
                    raise ModelStateError(f"{nat}: feature {j!r} is not a new pair feature here")
                ctx = load_vector(ctx, n_classes, f"{nat}[1]")
                rows = read_pairs(
                    values, f"{nat}[2]", lambda v, w: load_vector(v, n_classes, w), key=value
                )
                if not rows.keys() <= counts[j].keys():
                    raise ModelStateError(f"{nat}[2]: values that feature {j!r} never learned")
                for k, y in enumerate(labels):
                    check_consistent(
                        ctx[k], [row[k] for row in rows.values()], f"{nat}[1][{k}]",
                        "the pair counts of its values",
                    )  # fmt: skip
                    check_at_most(ctx[k], parent.get(y, 0.0), f"{nat}[1][{k}]", "N(y, x_i)")
                node_map[j] = [ctx, rows]
            store[(i, vi)] = node_map
        self._sparse = store
        self.dense = None
        self.try_dense()

    def size(self) -> int:
        """Stored numbers."""
        nb = self.nb
        n = len(nb._class_weight) + 1 + count_leaves(nb._present) + count_leaves(nb._counts)
        n += len(self.feature_weight) + count_leaves(self.value_weight)
        if self.dense is not None:
            return n + self.dense.size()
        for sub in self._sparse.values():
            for ctx, values in sub.values():
                n += len(ctx) * (1 + len(values))
        return n

    # ------------------------------------------------------------------ information
    def class_mutual_information(self) -> dict[Hashable, float]:
        """``I(X_i; Y)`` for every learned feature (maximum likelihood, nats).

        Absence counts as no information: each term is weighted by
        ``N(y, x_i) / N`` over all events, so rarely present features rank low.
        """
        nb = self.nb
        total = nb._total_weight
        out: dict[Hashable, float] = {}
        for f, values in nb._counts.items():
            n_f = self.feature_weight[f]
            by_class = nb._present[f]
            vw = self.value_weight[f]
            mi = 0.0
            for v, vc in values.items():
                nv = vw[v]
                for y, n in vc.items():
                    if n > 0.0:
                        mi += n * _log_ratio(n, n_f, by_class[y], nv)
            out[f] = mi / total if total > 0 else 0.0
        return out

    def conditional_mutual_information(
        self, scale: float = 1.0, z: float | None = None
    ) -> dict[tuple[Hashable, Hashable], float]:
        """``I(X_i; X_j | Y)`` for every pair seen together, keyed ``(i, j)`` in learning order.

        ``Σ N(y, x_i, x_j)/N · log(N(y, x_i, x_j) N_ij(y) / (N(y, x_i, j) N(y, i, x_j)))``
        with the marginals taken over the events where both are present
        (maximum likelihood, Friedman, Geiger & Goldszmidt 1997). Cost: one pass
        over the stored pair counts, O(pairs × values² × classes).

        Parameters
        ----------
        scale
            The learner's global scale (raw × scale = true weight), for the test below.
        z
            If given, pairs whose G statistic ``2 Σ n log(…)`` (true weights) is
            below the upper ``z``-σ quantile of χ² with
            ``df = K (S_i − 1)(S_j − 1)`` (Wilson–Hilferty approximation) are
            left out: their dependence is indistinguishable from sampling noise.
        """
        order: dict[Any, int] = {f: k for k, f in enumerate(self.nb._counts)}
        # (i, j) -> list of the nodes of every v_i
        tables: dict[tuple[Hashable, Hashable], list[Node]] = {}
        for (i, _vi), sub in self.pairs.items():
            oi = order[i]
            for j, node in sub.items():
                if oi < order[j]:
                    tables.setdefault((i, j), []).append(node)
        total = self.nb._total_weight
        out: dict[tuple[Hashable, Hashable], float] = {}
        if total <= 0:
            return out
        n_classes = len(self.classes)
        for key, nodes in tables.items():
            t_y = [0.0] * n_classes
            col: dict[Hashable, list[float]] = {}
            for ctx, values in nodes:
                t_y = [a + b for a, b in zip(t_y, ctx, strict=True)]
                for vj, row in values.items():
                    c = col.get(vj)
                    col[vj] = (
                        row.copy() if c is None else [a + b for a, b in zip(c, row, strict=True)]
                    )
            g = 0.0
            for ctx, values in nodes:
                for vj, row in values.items():
                    c = col[vj]
                    for k, n in enumerate(row):
                        if n > 0.0:
                            g += n * _log_ratio(n, t_y[k], ctx[k], c[k])
            if z is not None:
                df = sum(t > 0.0 for t in t_y) * (len(nodes) - 1) * (len(col) - 1)
                if df == 0 or 2.0 * g * scale <= chi2_quantile(df, z):
                    continue
            out[key] = g / total
        return out


def _log_ratio(a: float, b: float, c: float, d: float) -> float:
    """``log(a·b / (c·d))`` for positive weights, also where a product leaves the double
    range (weights decayed towards 0 by forgetting): then as a sum of logarithms."""
    den = c * d
    if den > 0.0:
        r = a * b / den
        if 0.0 < r < math.inf:
            return _log(r)
    return _log(a) + _log(b) - _log(c) - _log(d)


def chi2_quantile(df: int, z: float) -> float:
    """Upper quantile of χ² with ``df`` degrees of freedom at ``z`` standard deviations.

    Wilson & Hilferty (1931): ``(χ²/df)^(1/3)`` is close to normal with mean
    ``1 − 2/(9 df)`` and variance ``2/(9 df)``.

    Examples
    --------
    >>> round(chi2_quantile(10, 3.09), 1)  # exact 0.999 quantile: 29.59
    29.8
    """
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + z * math.sqrt(c)) ** 3


def add_vector(dst: list[float], src: list[float], cmap: list[int], factor: float) -> None:
    """``dst[cmap[k]] += factor × src[k]``: add a class vector of another model."""
    for k, v in enumerate(src):
        dst[cmap[k]] += v * factor


def load_vector(values: Any, n_classes: int, where: str = "state") -> list[float]:
    """A class vector from a state: ``n_classes`` finite weights ≥ 0."""
    if not isinstance(values, list) or len(values) != n_classes:
        raise ModelStateError(
            f"{where}: count vectors must hold one number per class ({n_classes})"
        )
    return [read_count(v, f"{where}[{k}]") for k, v in enumerate(values)]
