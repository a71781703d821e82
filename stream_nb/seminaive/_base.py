"""Work shared by the semi-naive learners: parameters, event encoding, scoring terms.

Every event goes through one encoding step before it touches a count:

1. ``None`` and ``NaN`` values are missing (skipped).
2. Numeric values (``int``/``float`` other than ``bool``, or any feature the
   ``schema`` marks ``"numeric"``) become bin indices through the
   :class:`~stream_nb.seminaive.discretise.Discretiser`. During a feature's
   warm-up its values are buffered with their event and replayed when the
   cut points freeze (:meth:`_SemiNaive._replay`).
3. Values of a feature that already holds ``max_values_per_feature`` distinct
   values, and is asked to learn or score a new one, become the "other" bucket
   :data:`~stream_nb.seminaive._store.OTHER`.

The resulting ``(feature, value)`` items are what the :class:`PairStore` counts.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb._exceptions import ConfigError, InvalidEventError, ModelStateError
from stream_nb._params import check_alpha, check_nonneg, log_prior
from stream_nb._state import (
    CATEGORY_TYPES,
    NAME_TYPES,
    check_categories,
    check_feature_names,
    encode_key,
    pairs,
    read_count,
    read_finite,
    read_key,
    read_keys,
    read_label,
    read_list,
    read_mapping,
    read_pairs,
)
from stream_nb._stores import capped
from stream_nb.base import Capabilities, Learner
from stream_nb.seminaive._store import OTHER, Item, Node, PairStore, add_vector, load_vector
from stream_nb.seminaive.discretise import Discretiser, check_bin_edges, check_binnable

__all__ = [
    "SIGNIFICANCE_Z",
    "_Dependence",
    "_SemiNaive",
    "canonical",
    "check_feature_name",
    "check_int",
    "check_schema",
]

_log = math.log
_exp = math.exp
_EMPTY: dict[Any, Any] = {}
_ABSENT = object()  # "feature not in the event" (OTHER is a real bucket)
_NB_TERM: list[Any] = []  # TAN/KDB: "no parent usable, use the CategoricalNB term"

#: Relative tolerance when comparing a decayed weight ``raw × scale`` with
#: ``min_parent_count``: ``(w / s) × s`` may round to just below ``w``.
_COUNT_TOLERANCE = 1e-9

#: Products of probability ratios are folded into a log before they can fall
#: below this (the smallest normal double is 2.2e-308; keep a margin).
_LOG_SAFE_PRODUCT = math.log(1e-290)

#: The first structure rebuild of TAN/KDB happens after this many events (or
#: ``rebuild_every`` if smaller); the gap then doubles up to ``rebuild_every``.
_FIRST_REBUILD = 32

_KINDS = ("categorical", "numeric")

#: TAN/KDB join two features only if their conditional dependence is
#: significant: G > χ² quantile at z = 3.09 σ (one-sided p ≈ 0.001). Without
#: it, sampling noise between irrelevant features (E[G] = df) adds edges that
#: cost accuracy on short streams with many classes.
SIGNIFICANCE_Z = 3.09


class _Known:
    """Membership in either of two mappings (features with counts or warming up)."""

    __slots__ = ("a", "b")

    def __init__(self, a: Mapping[Any, Any], b: Mapping[Any, Any]) -> None:
        self.a, self.b = a, b

    def __contains__(self, key: object) -> bool:
        return key in self.a or key in self.b


def _number(value: Any, where: str) -> float | int:
    """A finite number kept as it is (an integer exactly, tagged when large)."""
    number = read_key(value, where)
    if number.__class__ is int:
        return number
    return read_finite(number, where)


def check_int(value: Any, name: str, minimum: int) -> int:
    """An ``int`` (not ``bool``) at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_schema(schema: Any) -> dict[Hashable, str] | None:
    """``None`` or a mapping feature -> ``"categorical"`` | ``"numeric"``."""
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        raise ConfigError(
            f"schema must be a mapping feature -> 'categorical' or 'numeric', got {schema!r}"
        )
    for feature, kind in schema.items():
        if kind not in _KINDS:
            raise ConfigError(
                f"schema[{feature!r}] must be 'categorical' or 'numeric', got {kind!r}"
            )
    return dict(schema)


def canonical(feature: Hashable) -> tuple[str, str]:
    """A sort key for feature names that does not depend on the order they were learned in."""
    return (type(feature).__name__, repr(feature))


def check_feature_name(value: Any, name: str) -> Hashable:
    """A feature name usable in a JSON state: str, int or float."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{name} must be a feature name (str or int), got {value!r}")
    return value


class _SemiNaive(Learner):
    """Base of SPODE, AODE, TAN and KDB: parameters, encoding, store, merge and state."""

    #: Keep pair counts in a dense numpy block while it is small (see ``_dense``).
    _dense_pairs = False

    capabilities = Capabilities(informative_features=True)

    def _raw_class_weights(self) -> Iterable[tuple[Hashable, float]]:
        # the single counts are a CategoricalNB in the store, in this model's raw units
        return self._store.nb._raw_class_weights()

    def feature_names(self) -> list[Hashable]:
        return self._store.nb.feature_names()

    def _informative_entries(self, top: int | None) -> list[dict[str, Any]]:
        from stream_nb.informative import seminaive_entries, state_stats

        stats, scale = state_stats(self)
        return seminaive_entries(stats, self.alpha / scale, top)

    def __init__(
        self,
        alpha: float,
        min_parent_count: float,
        max_values_per_feature: int | None,
        n_bins: int,
        warmup: int,
        bin_edges: Mapping[Hashable, Sequence[float]] | None,
        schema: Mapping[Hashable, str] | None,
        half_life: float | None,
        max_pair_features: int | None = 200,
        max_classes: int | None = None,
        max_features: int | None = None,
    ) -> None:
        super().__init__(half_life=half_life, max_classes=max_classes, max_features=max_features)
        self.alpha = check_alpha(alpha)
        self.min_parent_count = check_nonneg(min_parent_count, "min_parent_count")
        if max_values_per_feature is not None:
            check_int(max_values_per_feature, "max_values_per_feature", 1)
        self.max_values_per_feature = max_values_per_feature
        if max_pair_features is not None:
            check_int(max_pair_features, "max_pair_features", 1)
        self.max_pair_features = max_pair_features
        self.n_bins = check_int(n_bins, "n_bins", 2)
        self.warmup = check_int(warmup, "warmup", 1)
        self.bin_edges = check_bin_edges(bin_edges)
        self.schema = check_schema(schema)
        self._declared_numeric = [f for f, k in (self.schema or {}).items() if k == "numeric"]
        self._store = PairStore(
            self.alpha, max_pair_features, self._dense_pairs, max_values_per_feature
        )
        self._disc = Discretiser(self.n_bins, self.warmup, self.bin_edges)
        # events learned while some of their numeric features were warming up:
        # [items, {feature: raw value}, y, raw w], replayed when the bins freeze
        self._pending: list[list[Any]] = []

    def _params(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "min_parent_count": self.min_parent_count,
            "max_values_per_feature": self.max_values_per_feature,
            "max_pair_features": self.max_pair_features,
            "n_bins": self.n_bins,
            "warmup": self.warmup,
            "bin_edges": self.bin_edges,
            "schema": self.schema,
            **self._cap_params(),
        }

    def _class_labels(self) -> dict[Hashable, int]:
        return self._store.classes

    def _n_features(self) -> int:
        """Features with counts or a warm-up sample (for ``max_features``)."""
        return len(self._store.nb._counts) + len(self._disc.samples)

    def _check_event(self, x: Mapping[Any, Any]) -> None:
        """Names and categorical values a state could not hold, before anything changes."""
        if not NAME_TYPES.issuperset(map(type, x)):
            check_feature_names(x)
        schema = self.schema
        for f, v in x.items():
            t = v.__class__
            if (t is float or t is int) and (schema is None or schema.get(f) != "categorical"):
                check_binnable(f, v)  # a number binned as numeric
                continue
            if t in CATEGORY_TYPES:
                continue  # None, str, bool, an int category
            check_categories(x, (f,))

    # ------------------------------------------------------------------ encoding
    def _encode(
        self,
        x: Mapping[Any, Any],
        learning: bool,
        pending: dict[Any, float] | None = None,
        weight: float = 1.0,
    ) -> list[Item]:
        """The event's present ``(feature, value)`` items after discretisation and the cap.

        When learning, numeric values still in their feature's warm-up are left
        out of the items and put in ``pending``; ``weight`` is the event's weight
        for the discretiser's warm-up sample.
        """
        schema = self.schema
        disc = self._disc
        counts: dict[Any, Any] = self._store.nb._counts
        cap = self.max_values_per_feature
        out: list[Item] = []
        if learning:
            self._check_event(x)
        known: Any = counts
        room = -1  # features that may still be admitted (-1: no bound)
        if learning and self.max_features is not None:
            known = _Known(counts, disc.samples)
            room = self._admit(self._n_features(), len(x))
        for f in self._declared_numeric:  # validate before the discretiser changes
            v = x.get(f)
            if v is not None and type(v) is not float and type(v) is not int:
                raise InvalidEventError(
                    f"feature {f!r} is numeric in the schema but got {v!r}; send a number "
                    "or None (missing)",
                    reason="invalid_value",
                )
        for f, v in x.items():
            if v is None:
                continue
            if room >= 0 and f not in known:
                if not room:
                    continue  # max_features reached: not learned
                room -= 1
            tv = type(v)
            kind = None if schema is None else schema.get(f)
            if kind == "numeric" or (kind is None and (tv is float or tv is int)):
                if v != v:  # NaN: missing
                    continue
                raw = v
                if learning:
                    v = disc.learn_value(f, v, weight)
                else:
                    check_binnable(f, v)
                    v = disc.bin_value(f, v)
                if v is None:
                    if pending is not None and raw - raw == 0.0:  # ±inf in warm-up: missing
                        pending[f] = raw
                    continue
            if cap is not None:  # the rule of stream_nb._stores.capped, inlined
                values = counts.get(f)
                if (
                    values is not None
                    and v not in values
                    and len(values) - (OTHER in values) >= cap
                ):
                    v = OTHER
            out.append((f, v))
        return out

    # ------------------------------------------------------------------ learning
    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        pending: dict[Any, float] = {}
        items = self._encode(x, True, pending, w * self._scale)  # raw w × scale = true w
        if y not in self._store.classes:
            self._add_class(y)
        self._store.learn(items, y, w)
        self._after_learn(items, y, w)
        if pending:
            self._pending.append([list(items), pending, y, w])
            self._replay()

    def _replay(self) -> None:
        """Add the buffered warm-up values of every feature whose bins are now frozen.

        Each such value is binned with the frozen cut points (and the cap) and
        its single and pair counts are added to its event, so the store ends up
        exactly as if the cut points had been known from the first event
        (family counts of KDB excepted: they only count live events).
        """
        edges = self._disc.edges
        keep = []
        store = self._store
        for entry in self._pending:
            items, pending, y, w = entry
            for f in [f for f in pending if f in edges]:
                item = (f, self._capped(f, bisect_right(edges[f], pending.pop(f))))
                store.add_item(items, item, y, w)
                items.append(item)
            if pending:
                keep.append(entry)
        self._pending = keep

    def _capped(self, f: Hashable, v: Hashable) -> Hashable:
        """``v``, or the "other" bucket if ``f`` is full (:func:`stream_nb._stores.capped`)."""
        values: Any = self._store.nb._counts.get(f)  # type: ignore[call-overload]
        return capped(values, v, self.max_values_per_feature)

    def _add_class(self, y: Hashable) -> None:
        """Give a new class an index in every count vector."""
        self._store.add_class(y)
        self._extra_add_class()

    def _extra_add_class(self) -> None:
        """Hook: append a ``0.0`` to subclass count vectors."""

    def _after_learn(self, items: list[Item], y: Hashable, w: float) -> None:
        """Hook for structure learners (family counts, rebuilds)."""

    # ------------------------------------------------------------------ scoring
    def _fallback(self, items: list[Item]) -> dict[Hashable, float]:
        """CategoricalNB scores with the same α (shares the store's single counts)."""
        nb = self._store.nb
        nb._scale = self._scale
        x: dict[Any, Any] = dict(items)
        return nb._joint_log_likelihood(x)

    def _raw_threshold(self) -> float:
        """``min_parent_count`` in raw units, less a rounding tolerance."""
        return self.min_parent_count * (1.0 - _COUNT_TOLERANCE) / self._scale

    def _children(
        self, items: list[Item], a: float
    ) -> list[tuple[Hashable, Hashable, float, float]]:
        """``(j, x_j, α·S_j, −log S_j)`` for the event's learned features with pair counts."""
        counts: dict[Any, Any] = self._store.nb._counts
        pair_features = self._store.pair_features
        out = []
        for j, vj in items:
            values = counts.get(j)
            if values is not None and j in pair_features:
                s = len(values)
                out.append((j, vj, a * s, -_log(s)))
        return out

    def _spode(
        self,
        parent: Item,
        children: list[tuple[Hashable, Hashable, float, float]],
        classes: list[Hashable],
        a: float,
        chunk: int,
    ) -> list[float]:
        """``log P̂(y, x_p) + Σ_{j≠p} log P̂(x_j | y, x_p)`` for every class, in ``classes`` order.

        ``P̂(y, x_i) = (N(y, x_i) + α) / (N_i + α K S_i)`` and
        ``P̂(x_j | y, x_i) = (N(y, x_i, x_j) + α) / (N(y, x_i, j) + α S_j)``.
        """
        store = self._store
        log = _log
        i, vi = parent
        values = store.nb._counts[i]  # type: ignore[index]
        pc = values.get(vi, _EMPTY)
        ld = log(store.feature_weight[i] + a * len(classes) * len(values))
        s = [log(pc.get(y, 0.0) + a) - ld for y in classes]
        sub = store.pairs.get(parent, _EMPTY)
        n_classes = len(classes)
        zeros = [0.0] * n_classes
        ones = [1.0] * n_classes
        # Σ log(ratio) = log Π ratio over chunks of at most ``chunk`` children:
        # one log per chunk instead of one per child, and ``chunk`` is small
        # enough that a product can never underflow (see _safe_chunk).
        p = ones
        const = 0.0
        get = sub.get
        if chunk >= len(children):  # the usual case: one log per class at the end
            for j, vj, sa, unseen in children:
                if j is i:
                    continue
                node = get(j)
                if node is None:  # N(y, x_i, j) = 0 for every y: the term is log(α / αS_j)
                    const += unseen
                    continue
                row = node[1].get(vj, zeros)
                p = [q * (r + a) / (c + sa) for q, r, c in zip(p, row, node[0], strict=True)]
            return [v + log(q) + const for v, q in zip(s, p, strict=True)]
        in_chunk = 0
        for j, vj, sa, unseen in children:
            if j is i:
                continue
            node = get(j)
            if node is None:
                const += unseen
                continue
            row = node[1].get(vj, zeros)
            p = [q * (r + a) / (c + sa) for q, r, c in zip(p, row, node[0], strict=True)]
            in_chunk += 1
            if in_chunk == chunk:
                s = [v + log(q) for v, q in zip(s, p, strict=True)]
                p = ones
                in_chunk = 0
        return [v + log(q) + const for v, q in zip(s, p, strict=True)]

    def _dense_scores(
        self, items: list[Item], a: float, parent: Hashable | None
    ) -> np.ndarray | None:
        """Dense ``SPODE_i(y)`` for the qualifying parents (all, or feature ``parent``).

        Shape ``(parents, K)`` in class-index order; ``None`` when no parent qualifies.
        """
        block = self._store.dense
        assert block is not None
        idx, cols = block.children(items)
        if not len(idx):
            return None
        if parent is None:
            parents = np.flatnonzero(block.vw[idx] >= self._raw_threshold())
        else:
            c = block.feat.get(parent)
            if c is None:
                return None
            parents = np.flatnonzero(cols == c)
            if not len(parents) or block.vw[idx[parents[0]]] < self._raw_threshold():
                return None
        if not len(parents):
            return None
        return block.spode_scores(idx, cols, parents, a)

    def _naive_terms(
        self, items: list[Item], classes: list[Hashable], a: float
    ) -> list[float] | None:
        """CategoricalNB terms of the event's learned features *without* pair counts.

        Features past ``max_pair_features`` are modelled as in Naive Bayes:
        ``log((N(y, x_j) + α) / (N(y, j) + α S_j))`` added to every class score.
        ``None`` when there are none.
        """
        store = self._store
        if len(store.pair_features) == len(store.feature_weight):
            return None
        counts: dict[Any, Any] = store.nb._counts
        present: dict[Any, Any] = store.nb._present
        out: list[float] | None = None
        log = _log
        for j, vj in items:
            values = counts.get(j)
            if values is None or j in store.pair_features:
                continue
            cg = present[j].get
            rg = values.get(vj, _EMPTY).get
            sa = a * len(values)
            terms = [log((rg(y, 0.0) + a) / (cg(y, 0.0) + sa)) for y in classes]
            out = terms if out is None else [p + q for p, q in zip(out, terms, strict=True)]
        return out

    def _safe_chunk(self, a: float, children: list[tuple[Hashable, Hashable, float, float]]) -> int:
        """Children whose ratios may be multiplied before taking a log, without underflow.

        Each ratio ``(N(y,x_i,x_j) + α) / (N(y,x_i,j) + αS_j)`` is at least
        ``f = α / (N + α max S_j)`` (all in raw units), so a product of ``L``
        ratios stays above ``_SAFE_PRODUCT`` when ``L ≤ log(_SAFE_PRODUCT) / log f``.
        """
        if not children:
            return 1
        s_max = max(sa for _j, _v, sa, _u in children)  # α max S_j, raw units
        f = a / (self._store.nb._total_weight + s_max)
        if f >= 1.0:
            return len(children)
        return max(1, int(_LOG_SAFE_PRODUCT / _log(f)))

    # ------------------------------------------------------------------ merging
    def _merge(self, other: Any, factor: float) -> None:
        keep = self._merged_features(other)
        self._disc.merge(other._disc, keep)
        for y in other._store.classes:
            if y not in self._store.classes:
                self._add_class(y)
        vmap = self._store.value_map(other._store, self.max_values_per_feature, keep)
        self._merge_extra(other, factor, vmap)
        self._store.merge(other._store, factor, vmap)
        for items, pending, y, w in other._pending:
            mapped = [(f, vmap[f][v]) for f, v in items if f in vmap]
            raw = {f: v for f, v in pending.items() if keep is None or f in keep}
            if raw:
                self._pending.append([mapped, raw, y, w * factor])
        self._replay()

    def _merged_features(self, other: Any) -> set[Hashable] | None:
        """``other``'s features this model learns in a merge (``None``: all of them).

        Past ``max_features`` its new features (counted first, then those
        warming up, each in the order ``other`` met them) are dropped.
        """
        if self.max_features is None:
            return None
        mine = _Known(self._store.nb._counts, self._disc.samples)
        theirs = [*other._store.nb._counts, *other._disc.samples]
        new = [f for f in dict.fromkeys(theirs) if f not in mine]
        room = self._admit(self._n_features(), len(new))
        return {f for f in theirs if f in mine} | set(new[:room])

    def _merge_extra(
        self, other: Any, factor: float, vmap: Mapping[Hashable, Mapping[Hashable, Hashable]]
    ) -> None:
        """Hook: merge subclass statistics (called before the store merge)."""

    # ------------------------------------------------------------------ model deltas
    def defer_binning(self) -> None:
        """Cut points freeze only from a merge, never from this model's own sample.

        Values of features still warming up stay raw (pending, with their
        sample) until a merged model brings frozen cut points: under model
        sync the shared base model decides them, so every worker bins alike.
        """
        self._disc.warmup = math.inf

    def _prepare_delta(self, delta: Learner) -> None:
        # a delta bins with this model's frozen cut points and never freezes its own;
        # values of features still warming up stay raw in it, to be binned by the
        # model it is merged into
        assert isinstance(delta, _SemiNaive)
        target = delta._disc
        for feature, edges in self._disc.edges.items():
            target.edges.setdefault(feature, list(edges))
        target.warmup = math.inf

    def _rescale(self, factor: float) -> None:
        self._store.rescale(factor)
        for entry in self._pending:
            entry[3] *= factor
        self._rescale_extra(factor)

    def _rescale_extra(self, factor: float) -> None:
        """Hook: rescale subclass statistics."""

    # ------------------------------------------------------------------ state
    def _stats_to_state(self) -> dict[str, Any]:
        return {
            "store": self._store.to_state(),
            "discretiser": self._disc.to_state(),
            "pending": [
                [
                    [[encode_key(f), encode_key(v)] for f, v in items],
                    [[encode_key(f), encode_key(v)] for f, v in pending.items()],
                    encode_key(y),
                    w,
                ]
                for items, pending, y, w in self._pending
            ],
            **self._extra_to_state(),
        }

    _FIELDS: tuple[str, ...] = ("store", "discretiser", "pending")

    def _stats_from_state(self, stats: Mapping[str, Any]) -> None:
        stats = read_mapping(stats, "stats", self._FIELDS)
        store = self._store
        store.load_state(stats["store"], "stats.store")
        self._disc.load_state(stats["discretiser"], "stats.discretiser")
        counts: Any = store.nb._counts
        cap = self.max_values_per_feature
        buffered = []
        for e, entry in enumerate(read_list(stats["pending"], "stats.pending")):
            at = f"stats.pending[{e}]"
            items, pending, y, w = read_list(entry, at, 4)
            parts = []
            for i, item in enumerate(read_list(items, f"{at}[0]")):
                f, v = read_list(item, f"{at}[0][{i}]", 2)
                f = read_key(f, f"{at}[0][{i}][0]")
                v = read_key(v, f"{at}[0][{i}][1]", allow_none=cap is not None)
                if v not in counts.get(f, ()):
                    raise ModelStateError(f"{at}[0][{i}]: ({f!r}, {v!r}) was never learned")
                parts.append((f, v))
            raw = read_pairs(pending, f"{at}[1]", _number)
            if not raw:
                raise ModelStateError(f"{at}[1]: a pending event has warm-up values")
            y = read_label(y, f"{at}[2]")
            if y not in store.classes:
                raise ModelStateError(f"{at}[2]: unknown class {y!r}")
            buffered.append([parts, raw, y, read_count(w, f"{at}[3]")])
        self._pending = buffered
        self._extra_from_state(stats)
        if self.max_features is not None and self._n_features() > self.max_features:
            raise ModelStateError(
                f"stats: {self._n_features()} features, more than max_features={self.max_features}"
            )

    def _extra_to_state(self) -> dict[str, Any]:
        return {}

    def _extra_from_state(self, stats: Mapping[str, Any]) -> None:
        """Hook: load subclass statistics."""

    def _size(self) -> tuple[int, int, int]:
        nb = self._store.nb
        stored = self._store.size() + self._disc.size() + self._extra_size()
        stored += sum(len(e[0]) + len(e[1]) + 1 for e in self._pending)
        return len(nb._class_weight), len(nb._present), stored

    def _extra_size(self) -> int:
        return 0


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

    _dense_pairs = True

    capabilities = Capabilities(informative_features=True, structure=True)

    def structure(self) -> dict[str, Any] | None:
        """The parents of each feature at the last rebuild (:meth:`Learner.structure`)."""
        return {"parents": [{"feature": f, "parents": list(pa)} for f, pa in self.parents.items()]}

    def __init__(self, rebuild_every: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
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
        raise NotImplementedError

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
            zeros = [0.0] * len(self._store.classes)
            for j, fam in families.items():
                vj = xd.get(j, _ABSENT)
                if vj is _ABSENT:
                    continue
                key = tuple([xd.get(p, _ABSENT) for p in parents[j]])
                if _ABSENT in key:
                    continue
                node = fam.get(key)
                if node is None:
                    node = fam[key] = [zeros.copy(), {}]
                node[0][k] += w
                row = node[1].get(vj)
                if row is None:
                    row = node[1][vj] = zeros.copy()
                row[k] += w
        self._weight_seen += w * self._scale  # raw w × scale = the event's weight
        if self._weight_seen >= self._next_rebuild * (1.0 - _COUNT_TOLERANCE):
            self.rebuild()
            self._schedule()

    def _schedule(self) -> None:
        """Next rebuild: the gap doubles from ``_FIRST_REBUILD`` up to ``rebuild_every``."""
        n = self._weight_seen
        self._next_rebuild = n + min(max(n, _FIRST_REBUILD), self.rebuild_every)

    # ------------------------------------------------------------------ scoring
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        store = self._store
        nb = store.nb
        class_weight = nb._class_weight
        if not class_weight:
            return {}
        items = self._encode(x, False)
        a = self.alpha / self._scale
        classes = list(class_weight)
        prior = log_prior(class_weight, nb._total_weight, a, True, None)
        s = [prior[y] for y in classes]
        counts: dict[Any, Any] = nb._counts
        present: dict[Any, Any] = nb._present
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
            if node is _NB_TERM:  # the CategoricalNB term
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
        self, other: Any, factor: float, vmap: Mapping[Hashable, Mapping[Hashable, Hashable]]
    ) -> None:
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
            jmap = vmap[j]
            for key, (ctx, values) in fam.items():
                new_key = tuple([m[v] for m, v in zip(maps, key, strict=True)])
                node = dst.get(new_key)
                if node is None:
                    node = dst[new_key] = [[0.0] * n_classes, {}]
                add_vector(node[0], ctx, cmap, factor)
                for vj, row in values.items():
                    t = jmap[vj]
                    target = node[1].get(t)
                    if target is None:
                        target = node[1][t] = [0.0] * n_classes
                    add_vector(target, row, cmap, factor)

    def _extra_add_class(self) -> None:
        for fam in self._families.values():
            for ctx, values in fam.values():
                ctx.append(0.0)
                for row in values.values():
                    row.append(0.0)

    def _rescale_extra(self, factor: float) -> None:
        for fam in self._families.values():
            for ctx, values in fam.values():
                ctx[:] = [v * factor for v in ctx]
                for row in values.values():
                    row[:] = [v * factor for v in row]

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
        counts: Any = self._store.nb._counts
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
                out[key] = [
                    load_vector(c, n_classes, f"{where}[{n}][1]"),
                    read_pairs(
                        rows,
                        f"{where}[{n}][2]",
                        lambda r, w: load_vector(r, n_classes, w),
                        key=value,
                    ),
                ]
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
        n = sum(map(len, self._parents.values()))
        for fam in self._families.values():
            for ctx, values in fam.values():
                n += len(ctx) * (1 + len(values))
        return n
