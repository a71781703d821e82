"""Dense numpy counts for the semi-naive learners while the model's value sets are small.

Every ``(feature, value)`` item of a pair feature gets an index ``a`` (``1, 2,
…`` in order of appearance; index ``0`` is an all-zero item that stands for a
value never learned) and every pair feature a column ``c``. The counts live in
one array ``counts`` of *child slots* × parents × classes: slot ``b < D`` is
item ``b``, slot ``D + c`` is column ``c`` (``D``: the item capacity). With
the views ``pair[a, b] = counts[b, a]`` and ``ctx[a, c] = counts[D + c, a]``:

* ``pair[a, a, k] = N(y_k, x_i)`` (the diagonal) and ``vw[a] = N(x_i)`` (all classes),
* ``fw[c] = N_i`` and ``s[c] = S_i`` (distinct values learned),
* ``pair[a, b, k] = N(y_k, x_i, x_j)`` for items ``a = (i, x_i)``, ``b = (j, x_j)``,
* ``ctx[a, c, k] = N(y_k, x_i, j)`` for feature ``j`` in column ``c``.

An event with items ``ii`` (columns ``cc``) has the child slots
``cs = (ii, D + cc)``, and learning it adds its weight to ``counts[cs, ii, k]``:
one gather, add and scatter of the ``2d²`` cells (the diagonal ``pair[a, a]``
gets ``N(y, x_i)`` from the same add; ``ctx[a, c(a)]``, a feature with itself,
is written too but never read).

The block is *complete* while every event it learned held a value of every
pair feature (:attr:`DenseBlock.complete`): then ``N(y, x_i, j) = N(y, x_i)`` for
every item and column, and every column has the same weight ``N_i`` (the same
weights, added in the same order, so bit for bit), and a super-parent's
denominators follow from its diagonal alone
(:mod:`stream_nb.seminaive._products`). An event without some pair feature, a
feature first met after other events, or a value added to an event already
learned (warm-up replay) ends it; a load checks the counts. A block with
``lazy_columns`` (AODE and SPODE scoring known events) then learns only the item
cells of each event and leaves its column cells *stale*: :meth:`DenseBlock.materialize`
writes them from the diagonal (the very values) before anything reads them —
the ``counts``, ``counts_rows``, ``counts_flat``, ``pair`` and ``ctx`` views do
it, and so does the end of completeness; :attr:`DenseBlock.cells` reads without
it (exact for item slots only).

Memory is ``8 K (D² + D F)`` bytes for ``D`` items and ``F`` pair features
(capacities grow by doubling). A block whose
counts would exceed :data:`DENSE_MAX_BYTES` is not built: the store keeps (or
goes back to) its sparse dictionaries, so ID-like features still work with
memory bounded by ``max_values_per_feature``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["DENSE_MAX_BYTES", "Bools", "DenseBlock", "Floats", "Indices"]

#: Count arrays, item indices / columns into them, and masks.
Floats = npt.NDArray[np.float64]
Indices = npt.NDArray[np.intp]
Bools = npt.NDArray[np.bool_]

#: Largest dense block (bytes of the count arrays at their allocated
#: capacity). 32 MiB holds e.g. 10 classes × 640 items or 2 classes × 1,400
#: items; LED (48 items, 10 classes) needs 0.5 MiB.
DENSE_MAX_BYTES = 32 * 2**20

_MIN_ITEMS = 16
_MIN_FEATURES = 8

Item = tuple[Hashable, Hashable]

#: The arrays of one event's known items (see :meth:`DenseBlock.event`): the items (a
#: list), their indices, the rows of ``INFO`` for them (``(5, d)``), the cell rows and
#: whether those include the column slots.
Event = tuple[list[int], Indices, Indices, Indices, bool]

#: Rows of :attr:`DenseBlock.info`, one column per item ``a`` of column ``c``:
#: ``a·D`` and ``(D + c)·D`` (the item's two slots as row offsets of the
#: ``(slots × parents, K)`` view), ``a`` and ``D + c`` (its two slots, also its
#: entries of ``weights``), and ``c``.
INFO_ROWS = 5


def _nbytes(d: int, f: int, k: int) -> int:
    return 8 * (k * (d * d + d * f + d) + d + 2 * f)


def _cap(n: int, minimum: int) -> int:
    """The capacity holding ``n``: a power of two, at least ``minimum``."""
    return max(minimum, 1 << max(n - 1, 0).bit_length())


class DenseBlock:
    """Dense single and pair counts of the pair features (see the module docstring).

    Examples
    --------
    >>> b = DenseBlock(n_classes=1)
    >>> b.learn([("a", 1), ("b", "x")], {"a": None, "b": None}, 0, 1.0)
    True
    >>> b.index, b.pair[1, 2].tolist(), b.ctx[1, b.feat["b"]].tolist()
    ({('a', 1): 1, ('b', 'x'): 2}, [1.0], [1.0])
    >>> b.codes  # the items of string values, by feature
    {'b': {'x': 2}}
    """

    __slots__ = (
        "_counts",
        "_ctx",
        "_event",
        "_flat",
        "_pair",
        "_prepared",
        "_rows",
        "_stale",
        "_vectors",
        "aks",
        "alpha",
        "codes",
        "col_of",
        "complete",
        "feat",
        "fw",
        "fy",
        "fy_flat",
        "index",
        "info",
        "items",
        "lazy_columns",
        "least",
        "n_classes",
        "offsets",
        "s",
        "s_max",
        "slot_aks",
        "slot_weights",
        "slots",
        "uniform_s",
        "vw",
        "weights",
    )

    def __init__(self, n_classes: int, lazy_columns: bool = False) -> None:
        self.n_classes = n_classes
        self.lazy_columns = lazy_columns  # see the module docstring
        self._stale = False  # the column cells wait for materialize()
        self.index: dict[Item, int] = {}
        self.feat: dict[Hashable, int] = {}
        self.items: list[Item] = [("", "")]  # item by index (0: the placeholder)
        # feature -> string value -> item: the items of events given as strings
        self.codes: dict[Hashable, dict[str, int]] = {}
        self._vectors: list[tuple[Indices, Floats]] = []
        self.alpha = 0.0  # the α (raw units) of offsets and aks (see prepare)
        self._prepared: float | None = None  # the α they hold (None: S changed since)
        self.s_max = 0.0  # the largest S_j
        self.uniform_s: float | None = None  # S_j when every column has as many values
        self.complete = True  # see the module docstring
        # a lower bound of every learned item's N(x_i) (they only grow without forgetting)
        self.least = math.inf
        self._alloc(_MIN_ITEMS, _MIN_FEATURES)

    def _alloc(self, d: int, f: int) -> None:
        k = self.n_classes
        self._counts = np.zeros((d + f, d, k))
        # (parent, child) views: pair[a, b] = counts[b, a], ctx[a, c] = counts[d + c, a]
        self._pair = self._counts[:d].transpose(1, 0, 2)
        self._ctx = self._counts[d:].transpose(1, 0, 2)
        self._flat = self._counts.reshape(-1)
        self._rows = self._counts.reshape((d + f) * d, k)  # row b·d + a: slot b, parent a
        # by slot: vw for items, fw for columns; then α K S_i of columns (see prepare)
        self.slot_weights = np.zeros((2, d + f))
        self.weights = self.slot_weights[0]
        self.slot_aks = self.slot_weights[1]
        self.aks = self.slot_weights[1, d:]
        self.vw = self.weights[:d]
        self.fw = self.weights[d:]
        self.s = np.zeros(f)
        self.fy = np.zeros((f, k))  # N(y, i) of column c: present[feature][class]
        self.fy_flat = self.fy.reshape(-1)
        self.col_of = np.zeros(d, dtype=np.intp)  # item -> its feature's column
        self.info = np.zeros((INFO_ROWS, d), dtype=np.intp)  # see INFO_ROWS
        self.slots = self.info[2:4]  # the child slots of each item: (a, d + its column)
        self._set_info()
        self._event: Event | None = None
        self._prepared = None

    # ------------------------------------------------------------------ views
    @property
    def counts(self) -> Floats:
        """The counts, ``(slots, parents, K)`` (see the module docstring)."""
        self.materialize()
        return self._counts

    @property
    def counts_rows(self) -> Floats:
        """The counts as ``(slots × parents, K)`` rows: row ``b·D + a`` is slot ``b``,
        parent ``a``."""
        self.materialize()
        return self._rows

    @property
    def counts_flat(self) -> Floats:
        """The counts, flat."""
        self.materialize()
        return self._flat

    @property
    def pair(self) -> Floats:
        """``pair[a, b, k] = N(y_k, x_i, x_j)`` (a view of the counts)."""
        self.materialize()
        return self._pair

    @property
    def ctx(self) -> Floats:
        """``ctx[a, c, k] = N(y_k, x_i, j)`` (a view of the counts)."""
        self.materialize()
        return self._ctx

    @property
    def cells(self) -> Floats:
        """:attr:`counts_rows` as they stand: exact in item slots, in column slots only
        when not stale (a complete block's learned events may leave them to
        :meth:`materialize`)."""
        return self._rows

    def diagonal(self, items: Indices) -> Floats:
        """``N(y, x_i)`` of ``items`` by class, shape ``(len(items), K)`` (never stale)."""
        out: Floats = self._counts[items, items]
        return out

    def materialize(self) -> None:
        """Write the stale column cells of a complete block: ``N(y, x_i, j) = N(y, x_i)``."""
        if self._stale:
            self._stale = False
            n, f = len(self.index), len(self.feat)
            items = np.arange(1, n + 1)
            self._ctx[1 : n + 1, :f] = self._counts[items, items][:, None, :]

    def leave_columns(self) -> None:
        """A complete block learned events into its item cells alone (a batch kernel):
        its column cells wait for :meth:`materialize`."""
        self._stale = True

    def end_complete(self) -> None:
        """The block learns an event without some pair feature (or the like): its column
        cells are written and it is no longer complete."""
        self.materialize()
        self.complete = False

    def _set_info(self) -> None:
        """Fill :attr:`info` from :attr:`col_of`."""
        d = self.vw.shape[0]
        items = np.arange(d)
        info = self.info
        info[0] = items * d
        info[1] = (d + self.col_of) * d
        info[2] = items
        info[3] = d + self.col_of
        info[4] = self.col_of

    def _set_column(self, a: int, c: int) -> None:
        """Item ``a`` belongs to column ``c``."""
        d = self.vw.shape[0]
        self.col_of[a] = c
        info = self.info
        info[1, a] = (d + c) * d
        info[3, a] = d + c
        info[4, a] = c

    def _grow(self, n_items: int, n_features: int, n_classes: int) -> bool:
        """Make room for item indices ``< n_items`` and ``n_features`` columns."""
        d0, f0 = self.vw.shape[0], self.fw.shape[0]
        k0 = self.n_classes
        if n_items <= d0 and n_features <= f0 and n_classes == k0:
            return True
        d, f = _cap(n_items, d0), _cap(n_features, f0)
        if _nbytes(d, f, n_classes) > DENSE_MAX_BYTES:
            return False
        old = (self._counts, self.vw, self.fw, self.s, self.col_of, self.fy)
        self.n_classes = n_classes
        self._alloc(d, f)
        self._counts[:d0, :d0, :k0] = old[0][:d0]
        self._counts[d : d + f0, :d0, :k0] = old[0][d0:]
        self.vw[:d0] = old[1]
        self.fw[:f0] = old[2]
        self.s[:f0] = old[3]
        self.col_of[:d0] = old[4]
        self.fy[:f0, :k0] = old[5]
        self._set_info()
        return True

    def add_class(self) -> bool:
        """One more class (a zero slice); ``False`` if the block would be too large."""
        return self._grow(len(self.index) + 1, len(self.feat), self.n_classes + 1)

    def _indices(
        self, items: list[Item], pair_features: Mapping[Hashable, None]
    ) -> tuple[list[int], list[int]] | None:
        """Item indices of the pair items (allocating new ones) and the new items.

        ``None``: the block would be too large.
        """
        index, feat = self.index, self.feat
        get = index.get
        known = [get(item, 0) for item in items]
        if 0 not in known:  # the usual case: every item is a known pair item
            return known, []
        idx: list[int] = []
        new: list[Item] = []
        new_f: list[Hashable] = []
        for item in items:
            f = item[0]
            if f not in feat:
                if f not in pair_features:
                    continue
                if f not in new_f:
                    new_f.append(f)
            a = get(item)
            if a is None:
                new.append(item)
                a = -len(new)
            idx.append(a)
        fresh: list[int] = []
        if new or new_f:
            if not self._grow(len(index) + len(new) + 1, len(feat) + len(new_f), self.n_classes):
                return None
            if new_f and index and self.complete:  # the items so far never met these features
                self.end_complete()
            for f in new_f:
                feat[f] = len(feat)
            for item in new:
                a = index[item] = len(index) + 1
                self.items.append(item)
                c = feat[item[0]]
                self._set_column(a, c)
                self.s[c] += 1.0
                if item[1].__class__ is str:
                    self.codes.setdefault(item[0], {})[item[1]] = a
                fresh.append(a)
            self._values_changed()
            idx = [a if a > 0 else index[new[-a - 1]] for a in idx]
        return idx, fresh

    def _values_changed(self) -> None:
        """``S_j`` changed: :attr:`s_max`, :attr:`uniform_s` and :meth:`prepare` again."""
        s = self.s[: len(self.feat)]
        self.s_max = float(s.max()) if len(s) else 0.0
        self.uniform_s = float(s[0]) if len(s) and (s == s[0]).all() else None
        self._prepared = None

    def learn(
        self, items: list[Item], pair_features: Mapping[Hashable, None], k: int, w: float
    ) -> bool:
        """Add one event's counts; ``False`` (nothing changed) if the block would be too large."""
        found = self._indices(items, pair_features)
        if found is None:
            return False
        idx, fresh = found
        if not idx:
            return True
        if fresh:
            self.least = min(self.least, w)
        if len(idx) != len(self.feat) and self.complete:
            self.end_complete()
        self._add(self.event(idx), k, w)
        return True

    def learn_known(self, idx: list[int], k: int, w: float) -> None:
        """:meth:`learn` for an event whose items are all known: their indices ``idx``."""
        if len(idx) != len(self.feat) and self.complete:
            self.end_complete()
        self._add(self.event(idx), k, w)

    def event(self, idx: list[int]) -> Event:
        """``(idx, items, info, rows, full)`` of an event of known items ``idx``.

        ``info`` are the columns of :attr:`info` of its items, shape ``(5, d)``;
        ``rows[j, i]`` is the row of ``counts[slots[j], items[i]]`` in the ``(slots ×
        parents, K)`` view (``slots``: the items, then their columns, ``full``; a
        complete block with lazy columns reads and learns item slots only, and
        gets those alone). The last event's arrays are kept: a prediction then the
        learning of the same event build them once.
        """
        full = not (self.complete and self.lazy_columns)
        cached = self._event
        if cached is not None and cached[0] == idx and (cached[4] or not full):
            return cached
        info = self.info.take(idx, axis=1)
        ii = info[2]
        bases = info[:2].ravel() if full else info[0]
        cached = self._event = (idx, ii, info, np.add.outer(bases, ii), full)
        return cached

    def _add(self, event: Event, k: int, w: float) -> None:
        """Add weight ``w`` of class ``k`` to the event's cells, the weights of its slots
        and ``fy``."""
        idx, _ii, info, rows, _full = event
        if self.complete and self.lazy_columns:  # the column cells equal the diagonal
            rows = rows[: len(idx)]
            self._stale = True
        by_class = self._rows[:, k]
        cells = by_class[rows]
        cells += w
        by_class[rows] = cells
        self.weights[info[2:4].ravel()] += w
        self.fy[:, k][info[4]] += w

    def add_item(
        self,
        items: list[Item],
        item: Item,
        pair_features: Mapping[Hashable, None],
        k: int,
        w: float,
    ) -> bool:
        """Add ``item`` to an event already learned with ``items`` (see ``PairStore.add_item``)."""
        found = self._indices([item, *items], pair_features)
        if found is None:
            return False
        idx, fresh = found
        if fresh:
            self.least = min(self.least, w)
        self.end_complete()  # (the other events lack the item's feature)
        a = idx[0]
        c = int(self.col_of[a])
        self.pair[a, a, k] += w
        self.vw[a] += w
        self.fw[c] += w
        self.fy[c, k] += w
        if len(idx) >= 2:
            ii = np.array(idx[1:], dtype=np.intp)
            cc = self.col_of[ii]
            self.pair[a, ii, k] += w
            self.pair[ii, a, k] += w
            self.ctx[a, cc, k] += w
            self.ctx[ii, c, k] += w
        return True

    def rescale(self, factor: float) -> None:
        """Multiply every count by ``factor`` (stale column cells are written from the
        diagonal all the same)."""
        for arr in (self._counts, self.weights, self.fy):
            arr *= factor
        self.least = 0.0  # (weights shrink: no bound)

    # ------------------------------------------------------------------ smoothing
    def prepare(self, alpha: float) -> None:
        """``offsets`` (by slot: ``α`` for items, ``α S_j`` for columns) and ``aks``
        (``α K S_i`` by column) for ``α = alpha`` in raw units; kept until ``S_j``
        changes."""
        if self._prepared == alpha:
            return
        d = self.vw.shape[0]
        self.alpha = alpha
        self.offsets = np.full(self._counts.shape[0], alpha)
        self.offsets[d:] = np.where(self.s > 0.0, alpha * self.s, alpha)
        np.multiply(alpha * self.n_classes, self.s, out=self.aks)
        self._prepared = alpha

    # ------------------------------------------------------------------ conversion
    def load(
        self,
        counts: Mapping[Any, Any],
        present: Mapping[Hashable, Mapping[Hashable, float]],
        classes: Mapping[Hashable, int],
        feature_weight: Mapping[Hashable, float],
        value_weight: Mapping[Hashable, Mapping[Hashable, float]],
        pair_features: Mapping[Hashable, None],
        pairs: Mapping[Item, Mapping[Hashable, Any]],
    ) -> bool:
        """Fill an empty block from sparse counts; ``False`` if it would be too large."""
        feats = [f for f in counts if f in pair_features]
        n_items = sum(len(counts[f]) for f in feats)
        if not self._grow(n_items + 1, len(feats), len(classes)):
            return False
        index, feat = self.index, self.feat
        for f in feats:
            c = feat[f] = len(feat)
            self.fw[c] = feature_weight[f]
            for y, n in present[f].items():
                self.fy[c, classes[y]] = n
            self.s[c] = len(counts[f])
            vw = value_weight[f]
            for v, by_class in counts[f].items():
                a = index[(f, v)] = len(index) + 1
                self.items.append((f, v))
                self._set_column(a, c)
                if v.__class__ is str:
                    self.codes.setdefault(f, {})[v] = a
                self.vw[a] = vw[v]
                for y, n in by_class.items():
                    self.pair[a, a, classes[y]] = n
        for item, sub in pairs.items():
            pa = index.get(item)
            if pa is None:
                continue
            for j, (ctx, values) in sub.items():
                pc = feat.get(j)
                if pc is None:
                    continue
                self.ctx[pa, pc] = ctx
                for vj, row in values.items():
                    self.pair[pa, index[(j, vj)]] = row
        n = len(index)
        if n:
            self._values_changed()
            self.least = float(self.vw[1 : n + 1].min())
            self.complete = self.check_complete()
        return True

    def check_complete(self) -> bool:
        """Whether ``N(y, x_i, j) = N(y, x_i)`` for every item and every other column, and
        every column has the same weight ``N_i`` (as every event had every feature)."""
        n, f = len(self.index), len(self.feat)
        items = np.arange(1, n + 1)
        same = (self.ctx[1 : n + 1, :f] == self.counts[items, items][:, None, :]).all(axis=2)
        same[np.arange(n), self.col_of[1 : n + 1]] = True  # (a feature with itself)
        fw = self.fw[:f]
        return bool(same.all()) and bool((fw == fw[0]).all())

    def to_sparse(self, counts: Mapping[Any, Any]) -> dict[Item, dict[Hashable, list[Any]]]:
        """The sparse ``pairs`` dictionary of ``PairStore`` (combinations with nonzero counts).

        Features and values come in the order of ``counts`` (first learned first).
        """
        index, feat = self.index, self.feat
        order = []
        for f, values in counts.items():
            c = feat.get(f)
            if c is not None:
                order.append((f, c, [(v, index[(f, v)]) for v in values if (f, v) in index]))
        ctx_seen = (self.ctx != 0.0).any(axis=2)
        pair_seen = (self.pair != 0.0).any(axis=2)
        out: dict[Item, dict[Hashable, list[Any]]] = {}
        for i, _ci, values_i in order:
            for vi, a in values_i:
                sub: dict[Hashable, list[Any]] = {}
                seen_c, seen_p = ctx_seen[a], pair_seen[a]
                for j, cj, values_j in order:
                    if j == i or not seen_c[cj]:
                        continue
                    rows = self.pair[a]
                    sub[j] = [
                        self.ctx[a, cj].tolist(),
                        {vj: rows[b].tolist() for vj, b in values_j if seen_p[b]},
                    ]
                if sub:
                    out[(i, vi)] = sub
        return out

    def size(self) -> int:
        """Numbers the sparse view would store: ``K (1 + values)`` per (item, feature) node.

        Counted from the block without building the view (O(D² K) array work).
        """
        n = len(self.index)
        if not n:
            return 0
        k = self.n_classes
        own = self.col_of[1 : n + 1]
        rows = np.arange(n)
        ctx_seen = (self.ctx[1 : n + 1] != 0.0).any(axis=2)
        ctx_seen[rows, own] = False  # a feature with itself is no node
        pair_seen = (self.pair[1 : n + 1, 1 : n + 1] != 0.0).any(axis=2)
        onehot = np.zeros((n, ctx_seen.shape[1]))
        onehot[rows, own] = 1.0
        per_node = pair_seen @ onehot  # (item, column): values seen with the item
        return int(k * (ctx_seen.sum() + (per_node * ctx_seen).sum()))

    # ------------------------------------------------------------------ scoring
    def children(self, items: list[Item]) -> tuple[Indices, Indices]:
        """Item indices (``0``: value never learned) and columns of the learned pair features."""
        get = self.index.get
        known = [get(item, 0) for item in items]
        if 0 not in known:  # the usual case
            ii = np.array(known, dtype=np.intp)
            return ii, self.col_of[ii]
        feat = self.feat
        idx: list[int] = []
        cols: list[int] = []
        for item, a in zip(items, known, strict=True):
            c = feat.get(item[0])
            if c is not None:
                idx.append(a)
                cols.append(c)
        return np.array(idx, dtype=np.intp), np.array(cols, dtype=np.intp)

    def vectors(self, n: int) -> tuple[Indices, Floats]:
        """Cached ``arange(n)`` and ``ones(n)``."""
        cache = self._vectors
        while len(cache) <= n:
            cache.append((np.arange(len(cache)), np.ones(len(cache))))
        return cache[n]
