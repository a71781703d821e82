"""Work shared by the semi-naive learners: parameters, event encoding, learning, state.

Every event goes through one encoding step before it touches a count:

1. ``None`` and ``NaN`` values are missing (skipped).
2. Numeric values (``int``/``float`` other than ``bool``, or any feature the
   ``schema`` marks ``"numeric"``) become bin indices through the
   :class:`~stream_nb.seminaive.discretise.Discretiser`. During a feature's
   warm-up its values are buffered with their event and replayed when the
   cut points freeze (:meth:`_SemiNaive._replay`); until then a value being
   scored adds a per-class Gaussian term (:mod:`stream_nb.seminaive._warmup`,
   :meth:`_SemiNaive._with_warmup`).
3. Values of a feature that already holds ``max_values_per_feature`` distinct
   values, and is asked to learn or score a new one, become the "other" bucket
   :data:`~stream_nb.seminaive._store.OTHER`.

The resulting ``(feature, value)`` items are what the
:class:`~stream_nb.seminaive._store.PairStore` counts. Scoring lives in the
two families' bases: :mod:`stream_nb.seminaive._superparent` (SPODE, AODE) and
:mod:`stream_nb.seminaive._dependence` (TAN, KDB).

Every learner takes the parameters of :meth:`_SemiNaive.__init__`: one
signature, written once. A learner with parameters of its own forwards the
others as ``**options`` (typed by :class:`SemiNaiveOptions`) and declares its
full signature with :func:`shared_signature`.
"""

from __future__ import annotations

import inspect
from bisect import bisect_right
from collections.abc import Callable, Container, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypedDict, TypeVar, cast

import numpy as np

from stream_nb._exceptions import ConfigError, InvalidEventError, ModelStateError
from stream_nb._params import check_alpha, check_feature_weights, check_nonneg
from stream_nb._state import (
    CATEGORY_TYPES,
    NAME_TYPES,
    check_categories,
    check_feature_names,
    encode_key,
    read_count,
    read_finite,
    read_key,
    read_label,
    read_list,
    read_mapping,
    read_pairs,
)
from stream_nb.base import Capabilities, Learner
from stream_nb.limits import RENORMALISE_BELOW
from stream_nb.naive_bayes._arrays import per_event_answers
from stream_nb.seminaive._dense import Indices
from stream_nb.seminaive._known import Rows, known_run, rows_from_columns
from stream_nb.seminaive._record import record_run
from stream_nb.seminaive._segment import learn_run
from stream_nb.seminaive._store import OTHER, Item, PairStore
from stream_nb.seminaive._warmup import WARMUP_TERMS, gaussian_terms, weighted_gaussian_terms
from stream_nb.seminaive.discretise import (
    Discretiser,
    check_bin_edges,
    check_binnable,
    check_strategy,
)

__all__ = [
    "COUNT_TOLERANCE",
    "SemiNaiveOptions",
    "_SemiNaive",
    "check_feature_name",
    "check_int",
    "check_schema",
    "shared_signature",
]

#: Relative tolerance when comparing a decayed weight ``raw × scale`` with
#: ``min_parent_count`` (or a rebuild schedule): ``(w / s) × s`` may round to
#: just below ``w``.
COUNT_TOLERANCE = 1e-9

_KINDS = ("categorical", "numeric")

#: Fewest known events :meth:`_SemiNaive.predict_learn_many` hands to the batch kernel
#: at once (shorter runs go one event at a time, which also scores known events fast).
_MIN_RUN = 8


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
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return value
    raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")


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


def check_feature_name(value: Any, name: str) -> Hashable:
    """A feature name usable in a JSON state: str, int or float."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return value
    raise ConfigError(f"{name} must be a feature name (str or int), got {value!r}")


class SemiNaiveOptions(TypedDict, total=False):
    """The keyword-only parameters of :meth:`_SemiNaive.__init__`, for ``**options``."""

    min_parent_count: float
    max_values_per_feature: int | None
    n_bins: int
    warmup: int
    bin_edges: Mapping[Hashable, Sequence[float]] | None
    strategy: str
    warmup_terms: str
    schema: Mapping[Hashable, str] | None
    max_pair_features: int | None
    feature_weights: Mapping[Hashable, float] | None
    half_life: float | None
    max_classes: int | None
    max_features: int | None


_Init = TypeVar("_Init", bound=Callable[..., None])


def shared_signature(init: _Init) -> _Init:
    """Declare the signature of an ``__init__`` that forwards ``**options``.

    ``inspect.signature`` (hence ``help()``, and the CLI, which reads the
    learners' default bounds) then shows the method's own parameters
    followed by the keyword-only parameters of :meth:`_SemiNaive.__init__`
    with their defaults, exactly as if they were written out.
    """
    own = inspect.signature(init)
    shared = list(inspect.signature(_SemiNaive.__init__).parameters.values())[2:]
    params = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
    cast(Any, init).__signature__ = own.replace(parameters=[*params, *shared])
    return init


class _SemiNaive(Learner):
    """Base of SPODE, AODE, TAN and KDB: parameters, encoding, store, merge and state."""

    capabilities = Capabilities(informative_features=True)

    def _raw_class_weights(self) -> Iterable[tuple[Hashable, float]]:
        # the store's categorical statistics, in this model's raw units
        return self._store.categorical.class_weight.items()

    def feature_names(self) -> list[Hashable]:
        return list(self._store.categorical.present)

    def _informative_entries(self, top: int | None) -> list[dict[str, Any]]:
        from stream_nb.informative import seminaive_entries, state_stats

        stats, scale = state_stats(self)
        return seminaive_entries(stats, self.alpha / scale, top)

    def __init__(
        self,
        alpha: float = 1.0,
        *,
        min_parent_count: float = 1.0,
        max_values_per_feature: int | None = 100,
        n_bins: int = 10,
        warmup: int = 100,
        bin_edges: Mapping[Hashable, Sequence[float]] | None = None,
        strategy: str = "frequency",
        warmup_terms: str = "gaussian",
        schema: Mapping[Hashable, str] | None = None,
        max_pair_features: int | None = 200,
        feature_weights: Mapping[Hashable, float] | None = None,
        half_life: float | None = None,
        max_classes: int | None = None,
        max_features: int | None = None,
    ) -> None:
        super().__init__(half_life=half_life, max_classes=max_classes, max_features=max_features)
        self.alpha = check_alpha(alpha, allow_zero=True)
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
        self.strategy = check_strategy(strategy)
        if warmup_terms not in WARMUP_TERMS:
            raise ConfigError(f"warmup_terms must be 'gaussian' or 'none', got {warmup_terms!r}")
        self.warmup_terms = warmup_terms
        self.schema = check_schema(schema)
        self.feature_weights = check_feature_weights(feature_weights)
        # the weights scoring uses: None when every weight is 1 (the unweighted paths)
        self._score_weights = self.feature_weights
        if self.feature_weights is not None and all(
            w == 1.0 for w in self.feature_weights.values()
        ):
            self._score_weights = None
        self._declared_numeric = [f for f, k in (self.schema or {}).items() if k == "numeric"]
        # pair counts in a dense numpy block while it is small (see ``_dense``)
        self._store = PairStore(max_pair_features, True, max_values_per_feature)
        self._disc = Discretiser(self.n_bins, self.warmup, self.bin_edges, self.strategy)
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
            "strategy": self.strategy,
            "warmup_terms": self.warmup_terms,
            "schema": self.schema,
            "feature_weights": self.feature_weights,
            **self._cap_params(),
        }

    # ------------------------------------------------------------------ batch kernel
    def predict_learn_many(
        self,
        xs: Sequence[Mapping[str, Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float],
    ) -> tuple[list[dict[Hashable, float] | None], list[Hashable | None], dict[int, Exception]]:
        """:meth:`Learner.predict_learn_many` through the batch kernel for every run of
        known events (see :meth:`_predict_learn_known`), one event at a time otherwise.

        A run ends at an event the dense block does not know (a new value, say):
        that event is predicted and learned on its own, and the next run may then
        know its values.
        """
        n = len(xs)
        log_probas: list[dict[Hashable, float] | None] = []
        predictions: list[Hashable | None] = []
        errors: dict[int, Exception] = {}
        i = 0
        while i < n:
            block = self._store.dense
            stop = n
            if block is not None and self._batch_ready():
                rows, parents = known_run(
                    block.codes, xs, i, self._kernel_parent(), self._frozen_bins()
                )
                stop = i + len(rows)
                if len(rows) >= _MIN_RUN:
                    out = self._predict_learn_known(rows, parents, ys[i:stop], ws[i:stop])
                    if out is not None:
                        if self._delta is not None:  # (capabilities.kernel_records_delta)
                            record_run(self, rows, ys[i:stop], ws[i:stop], xs[i:stop].__getitem__)
                        answers = per_event_answers(*out)
                        log_probas += answers[0]
                        predictions += answers[1]
                        i = stop
                        continue
                stop = max(stop, i + 1)
            answers = super().predict_learn_many(xs[i:stop], ys[i:stop], ws[i:stop])
            log_probas += answers[0]
            predictions += answers[1]
            errors.update({i + j: exc for j, exc in answers[2].items()})
            i = stop
        return log_probas, predictions, errors

    def predict_learn_columns(
        self,
        names: tuple[str, ...],
        columns: Sequence[Sequence[Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float] | None = None,
    ) -> tuple[list[Hashable], Any, Any] | None:
        """:meth:`Learner.predict_learn_columns` through the batch kernel when every event
        is known (see :meth:`_predict_learn_known`); ``None`` otherwise.

        Examples
        --------
        >>> from stream_nb import AODE, TAN
        >>> for model in (AODE(), TAN()):
        ...     for i in range(6):
        ...         model.learn_one({"a": "u" if i % 2 else "v", "b": "p"}, i % 2)
        ...     labels, log_proba, best = model.predict_learn_columns(
        ...         ("a", "b"), [["u", "v", "u"], ["p", "p", None]], [1, 0, None]
        ...     )
        ...     print(labels, log_proba.shape, [labels[k] for k in best], model.n_learned)
        [0, 1] (3, 2) [1, 0, 1] 8
        [0, 1] (3, 2) [1, 0, 1] 8
        """
        block = self._store.dense
        if block is None or not self._batch_ready():
            return None
        batch = rows_from_columns(
            block.codes, names, columns, self._kernel_parent(), self._frozen_bins()
        )
        if batch is None:
            return None
        weights = [1.0] * len(ys) if ws is None else ws
        out = self._predict_learn_known(*batch, ys, weights)
        if out is not None and self._delta is not None:  # (capabilities.kernel_records_delta)

            def raw(i: int) -> dict[str, Any]:
                return {name: column[i] for name, column in zip(names, columns, strict=True)}

            record_run(self, batch[0], ys, weights, raw)
        return out

    def _batch_ready(self) -> bool:
        """Hook: whether the batch kernel may take a batch (no kernel here)."""
        return False

    def _learn_known_run(
        self, rows: Rows, ks: Indices, ys: Sequence[Hashable], ws: Sequence[float]
    ) -> None:
        """Learn events whose every item (``rows``, in the dense block) and class (indices
        ``ks``, labels ``ys``) are known, with weights ``ws``, as :meth:`learn_one` would one
        after another (a model-sync delta recording what a batch kernel learned, see
        :mod:`~stream_nb.seminaive._record`), forgetting included."""
        store = self._store
        t, n = 0, len(ys)
        while t < n:
            _before, raws, stop, scale = self._decay_steps(ys[t:], ws[t:])
            stop += t
            if stop > t:
                if isinstance(rows, np.ndarray):
                    block = store.dense
                    assert block is not None
                    run, k_run = rows[t:stop], ks[t:stop]
                    learn_run(block, run, k_run, np.array(raws, dtype=np.float64))
                    store.learned_known(run, k_run, ys[t:stop], raws)
                    self.n_learned += stop - t
                else:
                    for idx, k, y, w in zip(rows[t:stop], ks[t:stop].tolist(), ys[t:stop], raws,
                                            strict=True):  # fmt: skip
                        store.learn_known(idx, y, k, w)
                    self.n_learned += stop - t
                self._scale = scale
            if stop < n:  # its learning renormalises first
                self._learn_known_step(list(rows[stop]), ys[stop], int(ks[stop]), ws[stop])
                stop += 1
            t = stop

    def _decay_steps(
        self, ys: Sequence[Hashable | None], ws: Sequence[float]
    ) -> tuple[list[float], list[float], int, float]:
        """What :meth:`learn_one`'s forgetting does to the events of a batch, in turn, up to
        the first labelled one whose learning renormalises (``stop``; ``len(ys)`` if none):
        the scale before each event (the raw units of its prediction), its weight in raw
        units (0: not learned) and the scale after them. The model is not changed."""
        gamma = self._gamma
        scale = self._scale
        befores: list[float] = []
        raws: list[float] = []
        for i, (y, w) in enumerate(zip(ys, ws, strict=True)):
            if y is None:
                befores.append(scale)
                raws.append(0.0)
            elif gamma is None:
                befores.append(scale)
                raws.append(w)
            else:
                after = scale * (gamma if w == 1.0 else gamma**w)
                if after < RENORMALISE_BELOW:
                    return befores, raws, i, scale
                befores.append(scale)
                scale = after
                raws.append(w / scale)
        return befores, raws, len(ys), scale

    def _learn_known_step(self, idx: list[int], y: Hashable, k: int, w: float) -> None:
        """Learn one event of known items ``idx`` and class ``y`` (index ``k``) as
        :meth:`learn_one` would: forgetting (a renormalisation included), the counts,
        ``n_learned``; not the tracked delta (the caller records it)."""
        gamma = self._gamma
        if gamma is not None:
            scale = self._scale * (gamma if w == 1.0 else gamma**w)
            if scale < RENORMALISE_BELOW:
                self._rescale(scale)
                scale = 1.0
            self._scale = scale
            w = w / scale
        self._store.learn_known(idx, y, k, w)
        self.n_learned += 1

    def _kernel_parent(self) -> Hashable | None:
        """Hook: the super-parent feature whose item the kernel needs per event, if any."""
        return None

    def _predict_learn_known(
        self,
        rows: Rows,
        parent_items: list[int | None],
        ys: Sequence[Hashable | None],
        ws: Sequence[float],
    ) -> tuple[list[Hashable], Any, Any] | None:
        """Hook: the batch kernel on known events (``None``: not taken, nothing changed)."""
        return None

    def _class_labels(self) -> dict[Hashable, int]:
        return self._store.classes

    def _n_features(self) -> int:
        """Features with counts or a warm-up sample (for ``max_features``)."""
        return len(self._store.categorical.counts) + len(self._disc.samples)

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

        Numeric values still in their feature's warm-up are left out of the
        items and put in ``pending`` (when given: the values to buffer when
        learning, the values of the Gaussian warm-up terms when predicting);
        ``weight`` is the event's weight for the discretiser's warm-up sample.
        """
        schema = self.schema
        disc = self._disc
        counts = self._store.categorical.counts
        cap = self.max_values_per_feature
        out: list[Item] = []
        if learning:
            self._check_event(x)
        known: Container[Hashable] = counts
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
        capped = store.categorical.capped  # the cap, as when the value was learned
        replayed = False
        for entry in self._pending:
            items, pending, y, w = entry
            for f in [f for f in pending if f in edges]:
                item = (f, capped(f, bisect_right(edges[f], pending.pop(f))))
                store.add_item(items, item, y, w)
                items.append(item)
                replayed = True
            if pending:
                keep.append(entry)
        self._pending = keep
        if replayed and store.dense is not None:  # (add_item ends a block's completeness)
            store.dense.complete = store.dense.check_complete()

    def _frozen_bins(self) -> dict[Hashable, tuple[list[float], dict[int, int]]]:
        """The numeric pair features whose cut points are frozen: their cut points and the
        dense block's item of each bin learned (see :mod:`~stream_nb.seminaive._known`)."""
        block = self._store.dense
        out: dict[Hashable, tuple[list[float], dict[int, int]]] = {}
        if block is None:
            return out
        index = block.index
        for f, edges in self._disc.edges.items():
            if f in block.feat:
                bins = {b: index[(f, b)] for b in range(len(edges) + 1) if (f, b) in index}
                out[f] = (edges, bins)
        return out

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
        """The Naive Bayes scores of the store's single counts, with the same α.

        As for an event, ``None`` values contribute nothing: an item in the
        "other" bucket is left out.
        """
        return self._store.categorical.joint_log_likelihood(dict(items), self.alpha / self._scale)

    def _with_warmup(
        self, jll: dict[Hashable, float], warming: Mapping[Hashable, float]
    ) -> dict[Hashable, float]:
        """``jll`` plus the Gaussian terms of the event's ``warming`` values (features in
        their warm-up, see :mod:`stream_nb.seminaive._warmup`), with
        ``warmup_terms="gaussian"``."""
        if not warming or self.warmup_terms != "gaussian" or not self._pending:
            return jll
        if self._score_weights is not None:
            terms = weighted_gaussian_terms(
                self._pending, warming, list(jll), self._scale, self._score_weights
            )
        else:
            terms = gaussian_terms(self._pending, warming, list(jll), self._scale)
        if terms is None:
            return jll
        return {y: v + t for (y, v), t in zip(jll.items(), terms, strict=True)}

    def _raw_threshold(self) -> float:
        """``min_parent_count`` in raw units, less a rounding tolerance."""
        return self.min_parent_count * (1.0 - COUNT_TOLERANCE) / self._scale

    # ------------------------------------------------------------------ merging
    def _merge(self, other: _SemiNaive, factor: float) -> None:
        keep = self._merged_features(other)
        self._disc.merge(other._disc, keep)
        for y in other._store.classes:
            if y not in self._store.classes:
                self._add_class(y)
        vmap = self._store.value_map(other._store, keep)
        self._merge_extra(other, factor, vmap)
        self._store.merge(other._store, factor, vmap)
        for items, pending, y, w in other._pending:
            mapped = [(f, vmap[f][v]) for f, v in items if f in vmap]
            raw = {f: v for f, v in pending.items() if keep is None or f in keep}
            if raw:
                self._pending.append([mapped, raw, y, w * factor])
        self._replay()

    def _merged_features(self, other: _SemiNaive) -> set[Hashable] | None:
        """``other``'s features this model learns in a merge (``None``: all of them).

        Past ``max_features`` its new features (counted first, then those
        warming up, each in the order ``other`` met them) are dropped.
        """
        if self.max_features is None:
            return None
        mine = _Known(self._store.categorical.counts, self._disc.samples)
        theirs = [*other._store.categorical.counts, *other._disc.samples]
        new = [f for f in dict.fromkeys(theirs) if f not in mine]
        room = self._admit(self._n_features(), len(new))
        return {f for f in theirs if f in mine} | set(new[:room])

    def _merge_extra(
        self,
        other: _SemiNaive,
        factor: float,
        vmap: Mapping[Hashable, Mapping[Hashable, Hashable]],
    ) -> None:
        """Hook: merge subclass statistics (called before the store merge)."""

    # ------------------------------------------------------------------ model deltas
    def defer_binning(self) -> None:
        """Cut points freeze only from a merge, never from this model's own sample.

        Values of features still warming up stay raw (pending, with their
        sample) until a merged model brings frozen cut points: under model
        sync the shared base model decides them, so every worker bins alike.
        """
        self._disc.defer()

    def _prepare_delta(self, delta: Learner) -> None:
        assert isinstance(delta, _SemiNaive)
        delta._disc.bin_like(self._disc)  # frozen cut points; values warming up stay raw

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
        counts = store.categorical.counts
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
        categorical = self._store.categorical
        stored = self._store.size() + self._disc.size() + self._extra_size()
        stored += sum(len(e[0]) + len(e[1]) + 1 for e in self._pending)
        return len(categorical.class_weight), len(categorical.present), stored

    def _extra_size(self) -> int:
        return 0
