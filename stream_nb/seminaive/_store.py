"""The one sparse store of single and pairwise counts shared by SPODE, AODE, TAN and KDB.

Notation (all weights in the raw units of :mod:`stream_nb.base`):

``N(y)``, ``N``, ``N(y, i)`` and ``N(y, x_i)``
    Kept by a :class:`~stream_nb.naive_bayes._categorical_stats.CategoricalStatistics`
    (``categorical``: its ``class_weight``, ``total_weight``, ``present`` and
    ``counts``), the statistics of CategoricalNB, whose Naive Bayes score is the
    learners' fallback with the same α.
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
calls (docs/benchmarks.md). A new class appends one ``0.0`` to every vector
once (O(model), rare).

Learning an event with ``d`` features present costs ``d`` single updates and
``d(d − 1)`` pair updates; nothing else is touched. Pair nodes have the shape
described in :mod:`stream_nb.seminaive._nodes`.

With ``dense=True`` (as the four learners make it) the pair counts live instead in a
:class:`~stream_nb.seminaive._dense.DenseBlock` of numpy arrays while it stays
under :data:`~stream_nb.seminaive._dense.DENSE_MAX_BYTES`; past that, or after
a merge or state load that does not fit, the store converts to (or stays with)
the dictionaries above. ``pairs`` is then a view built from the block on
demand (states, merges and sizes are the same in both representations).

Events learned by :meth:`PairStore.learn_known` (the AODE/SPODE path for
events of known values) update ``N(y)`` and ``N`` at once and the block; the
block holds every other single count of theirs too, added in the same order,
so the dictionaries are filled from it when next read (or every
:data:`MAX_DEFERRED` events), with the very values eager updates would give.
"""

from __future__ import annotations

import math
from collections.abc import Container, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb._state import (
    encode_key,
    pairs,
)
from stream_nb._stores import OTHER, count_leaves, rescale, tree_to_pairs
from stream_nb.naive_bayes._categorical_stats import CategoricalStatistics
from stream_nb.seminaive import _nodes
from stream_nb.seminaive._dense import DenseBlock
from stream_nb.seminaive._nodes import Node, add_node, count
from stream_nb.seminaive._states import read_store_state

__all__ = [
    "MAX_DEFERRED",
    "OTHER",
    "Item",
    "PairStore",
]

_log = math.log

Item = tuple[Hashable, Hashable]

#: Events :meth:`PairStore.learn_known` defers at most: their single counts are
#: copied into the dictionaries then (bounded memory without readers).
MAX_DEFERRED = 4096

#: The "missing value" marker of the store's categorical statistics: none. The
#: store learns encoded items, in which ``None`` is the "other" bucket.
_NO_MISSING = object()


class PairStore:
    """Sparse single and pairwise class-conditional counts (see the module docstring).

    Parameters
    ----------
    max_pair_features
        Features with pair counts: the first ones learned (``None``: all).
    dense
        Keep the pair counts in a dense block while it is small enough.
    max_values_per_feature
        The learner's cap on distinct values (the "other" bucket past it).

    Examples
    --------
    >>> s = PairStore()
    >>> s.add_class("yes")
    >>> s.learn([("a", 1), ("b", "x")], "yes", 1.0)
    >>> s.pairs[("a", 1)]["b"]
    [[1.0], {'x': [1.0]}]
    >>> s.size()
    14
    """

    __slots__ = (
        "_categorical",
        "_deferred",
        "_feature_weight",
        "_n_deferred",
        "_sparse",
        "_value_weight",
        "classes",
        "dense",
        "lazy_columns",
        "max_pair_features",
        "pair_features",
        "want_dense",
    )

    def __init__(
        self,
        max_pair_features: int | None = None,
        dense: bool = False,
        max_values_per_feature: int | None = None,
    ) -> None:
        self._categorical = CategoricalStatistics(max_values_per_feature, missing=_NO_MISSING)
        self._feature_weight: dict[Hashable, float] = {}
        self._value_weight: dict[Hashable, dict[Hashable, float]] = {}
        # events learned by learn_known whose single counts are only in the block yet:
        # (items, class index) of one event, or (items (n, d), class indices (n,)) of a batch
        self._deferred: list[tuple[Any, Any]] = []
        self._n_deferred = 0
        self._sparse: dict[Item, dict[Hashable, Node]] = {}
        self.want_dense = dense
        # the blocks' lazy_columns (see _dense; set by a learner that scores from the block)
        self.lazy_columns = False
        self.dense: DenseBlock | None = DenseBlock(0) if dense else None
        self.classes: dict[Hashable, int] = {}  # class -> index in every count vector
        # features with pair counts: the first ``max_pair_features`` learned (ordered set)
        self.max_pair_features = max_pair_features
        self.pair_features: dict[Hashable, None] = {}

    # ------------------------------------------------------------------ single counts
    @property
    def categorical(self) -> CategoricalStatistics:
        """``N(y)``, ``N``, ``N(y, i)`` and ``N(y, x_i)`` (see the module docstring)."""
        if self._deferred:
            self._flush()
        return self._categorical

    @property
    def feature_weight(self) -> dict[Hashable, float]:
        """``N_i`` by feature."""
        if self._deferred:
            self._flush()
        return self._feature_weight

    @feature_weight.setter
    def feature_weight(self, value: dict[Hashable, float]) -> None:
        self._feature_weight = value

    @property
    def value_weight(self) -> dict[Hashable, dict[Hashable, float]]:
        """``N(x_i)`` by feature and value."""
        if self._deferred:
            self._flush()
        return self._value_weight

    @value_weight.setter
    def value_weight(self, value: dict[Hashable, dict[Hashable, float]]) -> None:
        self._value_weight = value

    @property
    def class_weight(self) -> dict[Hashable, float]:
        """``N(y)`` by class, in learning order (always current: never deferred)."""
        return self._categorical.class_weight

    @property
    def total_weight(self) -> float:
        """``N`` (always current: never deferred)."""
        return self._categorical.total_weight

    def _flush(self) -> None:
        """Copy the single counts of the events :meth:`learn_known` deferred from the block.

        The block adds every weight to ``N(y, x_i)`` (its diagonal), ``N(x_i)``,
        ``N_i`` and ``N(y, i)`` in the order the dictionaries would have, so
        the values copied are those eager updates would hold; a class new to a
        feature or value is inserted where its first event would have put it.
        When the deferred events outnumber the block's counts, every nonzero
        count of the block is copied instead (the same values: a count the
        deferred events did not touch is already in the dictionaries), unless
        some class is new to a feature or value.
        """
        deferred = self._deferred
        n_deferred = self._n_deferred
        self._deferred = []
        self._n_deferred = 0
        block = self.dense
        assert block is not None
        if n_deferred * 4 < len(block.index) * block.n_classes or not self._copy_block(block):
            self._copy_in_order(block, deferred)

    def _copy_block(self, block: DenseBlock) -> bool:
        """Copy every nonzero single count of the block into the dictionaries; ``False``
        (some copied, the same values) if some class is new to a feature or value there."""
        labels = list(self.classes)
        named = block.items
        categorical = self._categorical
        present, counts = categorical.present, categorical.counts
        n = len(block.index)
        items = np.arange(1, n + 1)
        diagonal = block.diagonal(items)  # (n, K): N(y, x_i)
        aa, kk = np.nonzero(diagonal)
        for a, k, w in zip((aa + 1).tolist(), kk.tolist(), diagonal[aa, kk].tolist(), strict=True):
            f, v = named[a]
            by_class = counts[f][v]
            y = labels[k]
            if y not in by_class:
                return False
            by_class[y] = w
        columns = {c: f for f, c in block.feat.items()}
        fy = block.fy[: len(columns)]
        cc, kk = np.nonzero(fy)
        for c, k, w in zip(cc.tolist(), kk.tolist(), fy[cc, kk].tolist(), strict=True):
            by_class = present[columns[c]]
            y = labels[k]
            if y not in by_class:
                return False
            by_class[y] = w
        value_weight, feature_weight = self._value_weight, self._feature_weight
        for a, w in zip(range(1, n + 1), block.vw[1 : n + 1].tolist(), strict=True):
            f, v = named[a]
            value_weight[f][v] = w
        for c, w in enumerate(block.fw[: len(columns)].tolist()):
            feature_weight[columns[c]] = w
        return True

    def _copy_in_order(self, block: DenseBlock, deferred: list[tuple[Any, Any]]) -> None:
        """Copy the single counts the ``deferred`` events touched, new keys in the order
        of their first event."""
        n_classes = block.n_classes
        items = np.concatenate([np.ravel(idx) for idx, _k in deferred]).astype(np.intp)
        ks = np.concatenate(
            [
                np.full(len(idx), k, dtype=np.intp)
                if isinstance(k, int)
                else np.repeat(k, idx.shape[1])
                for idx, k in deferred
            ]
        )
        keys, first = np.unique(items * n_classes + ks, return_index=True)
        keys = keys[np.argsort(first, kind="stable")]  # in order of first appearance
        aa, kk = np.divmod(keys, n_classes)
        cc = block.col_of[aa]
        labels = list(self.classes)
        named = block.items
        categorical = self._categorical
        present, counts = categorical.present, categorical.counts
        diagonal = block.diagonal(aa)[np.arange(len(aa)), kk].tolist()
        by_feature = block.fy[cc, kk].tolist()
        for a, k, n, n_f in zip(aa.tolist(), kk.tolist(), diagonal, by_feature, strict=True):
            f, v = named[a]
            y = labels[k]
            present[f][y] = n_f
            counts[f][v][y] = n
        value_weight, feature_weight = self._value_weight, self._feature_weight
        for a, n in zip(aa.tolist(), block.vw[aa].tolist(), strict=True):
            f, v = named[a]
            value_weight[f][v] = n
            feature_weight[f] = float(block.fw[block.col_of[a]])

    @property
    def pairs(self) -> dict[Item, dict[Hashable, Node]]:
        """The sparse pair counts (built from the dense block when there is one: read only)."""
        if self.dense is not None:
            return self.dense.to_sparse(self.categorical.counts)
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
        """Move the pair counts into dictionaries (drop the dense block; :meth:`try_dense`
        may build one again)."""
        if self.dense is not None:
            self._sparse = self.dense.to_sparse(self.categorical.counts)
            self.dense = None

    def keep_sparse(self) -> None:
        """Keep the pair counts in dictionaries for good (never in a dense block)."""
        self.want_dense = False
        self.to_sparse()

    def try_dense(self) -> None:
        """Move the pair counts into a dense block if wanted and small enough."""
        if not self.want_dense:
            return
        block = DenseBlock(len(self.classes), self.lazy_columns)
        categorical = self.categorical
        if block.load(
            categorical.counts,
            categorical.present,
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
        _nodes.add_class(self._sparse)

    # ------------------------------------------------------------------ learning
    def learn_known(self, idx: list[int], y: Hashable, k: int, w: float) -> None:
        """:meth:`learn` an event whose every ``(feature, value)`` is a known item of the
        dense block: their block indices ``idx``, the class ``y`` with index ``k``.

        The same counts, without encoding or new entries: ``N(y)`` and ``N``
        now, the other single counts when next read (:meth:`_flush`).
        """
        dense = self.dense
        assert dense is not None
        categorical = self._categorical
        class_weight = categorical.class_weight
        class_weight[y] = class_weight.get(y, 0.0) + w
        categorical.total_weight += w
        dense.learn_known(idx, k, w)
        self._deferred.append((idx, k))
        self._n_deferred += 1
        if self._n_deferred >= MAX_DEFERRED:
            self._flush()

    def learned_known(
        self, items: Any, ks: Any, ys: Sequence[Hashable | None], ws: Sequence[float]
    ) -> None:
        """Count events the dense block has learned already (as :meth:`learn_known` would,
        less the block): ``items`` (an ``(n, d)`` array) of the learned events, their
        class indices ``ks`` (an array), and every event's label ``ys[i]`` (``None``: not
        learned) and weight."""
        categorical = self._categorical
        class_weight = categorical.class_weight
        total = categorical.total_weight
        for y, w in zip(ys, ws, strict=True):
            if y is not None:
                class_weight[y] += w
                total += w
        categorical.total_weight = total
        if len(ks):
            self._deferred.append((items, ks))
            self._n_deferred += len(ks)
            if self._n_deferred >= MAX_DEFERRED:
                self._flush()

    def learn(self, items: list[Item], y: Hashable, w: float) -> None:
        """Add one (already discretised) event: ``items`` are its present ``(feature, value)``.

        ``y`` must have been given an index with :meth:`add_class`.
        """
        self.categorical.learn(items, y, w)
        feature_weight = self.feature_weight
        value_weight = self.value_weight
        pair_features = self.pair_features
        for f, v in items:
            fvw = value_weight.get(f)
            if fvw is None:  # a feature learned for the first time
                fvw = value_weight[f] = {}
                feature_weight[f] = 0.0
                self._admit(f)
            feature_weight[f] += w
            fvw[v] = fvw.get(v, 0.0) + w
        k = self.classes[y]
        if self.dense is not None:
            if self.dense.learn(items, pair_features, k, w):
                return
            self.to_sparse()  # the block would be too large
        if len(pair_features) < len(feature_weight):  # some features are Naive Bayes only
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
        f, v = item
        self.categorical.learn([item], y, w, event=False)
        fvw = self.value_weight.get(f)
        if fvw is None:
            fvw = self.value_weight[f] = {}
            self.feature_weight[f] = 0.0
            self._admit(f)
        self.feature_weight[f] += w
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
            count(sub, other[0], other[1], k, w, n_classes)
            count(pairs.setdefault(other, {}), f, v, k, w, n_classes)

    # ------------------------------------------------------------------ merging
    def value_map(
        self, other: PairStore, keep: Container[Hashable] | None = None
    ) -> dict[Hashable, dict[Hashable, Hashable]]:
        """Where each of ``other``'s values lands here: itself, or :data:`OTHER` past the cap,
        for its features in ``keep`` (all by default); see
        :meth:`~stream_nb.naive_bayes._categorical_stats.CategoricalStatistics.value_map`."""
        return self.categorical.value_map(other.categorical, keep)

    def class_map(self, other: PairStore) -> list[int]:
        """Index here of each of ``other``'s class indices (add its new classes first)."""
        return [self.classes[y] for y in other.classes]

    def merge(
        self,
        other: PairStore,
        factor: float,
        vmap: Mapping[Hashable, Mapping[Hashable, Hashable]],
    ) -> None:
        """Add ``factor × other``, relabelling values through ``vmap`` (see :meth:`value_map`);
        ``other``'s features missing from ``vmap`` are left out.

        Every class of ``other`` must already have an index here (:meth:`add_class`).
        """
        cmap = self.class_map(other)
        n_classes = len(self.classes)
        self.to_sparse()
        theirs = other.categorical.counts
        for f in theirs:
            if f not in self.feature_weight and f in vmap:
                self._admit(f)
        self.categorical.merge(other.categorical, factor, vmap)
        feature_weight, value_weight = self.feature_weight, self.value_weight
        for f, values in theirs.items():
            mapping = vmap.get(f)
            if mapping is None:
                continue  # past max_features: not learned
            feature_weight[f] = feature_weight.get(f, 0.0) + other.feature_weight[f] * factor
            dst = value_weight.setdefault(f, {})
            src = other.value_weight[f]
            for v in values:
                t = mapping[v]
                dst[t] = dst.get(t, 0.0) + src[v] * factor
        pair_features = self.pair_features
        for (i, vi), sub in other.pairs.items():
            if i not in pair_features or i not in vmap:
                continue  # Naive Bayes only (or not learned) here: drop the pairs of i
            nodes = self._sparse.setdefault((i, vmap[i][vi]), {})
            for j, node in sub.items():
                if j in pair_features and j in vmap:
                    add_node(nodes, j, node, cmap, vmap[j], factor, n_classes)
        self.try_dense()

    def rescale(self, factor: float) -> None:
        """Multiply every stored weight by ``factor``."""
        self.categorical.rescale(factor)
        rescale(self.feature_weight, factor)
        rescale(self.value_weight, factor)
        if self.dense is not None:
            self.dense.rescale(factor)
        _nodes.rescale(self._sparse, factor)

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """JSON-able statistics."""
        return {
            "nb": self.categorical.to_state(),
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

        Checks, besides those of
        :meth:`~stream_nb.naive_bayes._categorical_stats.CategoricalStatistics.load_state`
        (on ``nb``, the categorical statistics):
        ``N_i = Σ_y N(y, i)`` and ``N(x_i) = Σ_y N(y, x_i)`` for every
        learned feature and value; pair features learned and at most
        ``max_pair_features``; every pair node of two distinct pair features
        and learned values, one weight ≥ 0 per class, with
        ``N(y, x_i, j) = Σ_{x_j} N(y, x_i, x_j) ≤ N(y, x_i)``.
        """
        loaded = read_store_state(state, where, self.categorical, self.max_pair_features)
        self.feature_weight = loaded.feature_weight
        self.value_weight = loaded.value_weight
        self.classes = {y: k for k, y in enumerate(self.categorical.class_weight)}
        self.pair_features = loaded.pair_features
        self._sparse = loaded.pairs
        self.dense = None
        self.try_dense()

    def size(self) -> int:
        """Stored numbers."""
        n = self.categorical.size() + 1  # (and N)
        n += len(self.feature_weight) + count_leaves(self.value_weight)
        if self.dense is not None:
            return n + self.dense.size()
        return n + _nodes.size(self._sparse)
