"""What the text learners (multinomial, Bernoulli, complement) share: the learner base
(:class:`_TokenLearner`: smoothing, class weights, count rows, the kernels' array) and
the vocabulary bounds. Their event values are checked by
:mod:`~stream_nb.naive_bayes._token_values` (re-exported here).

Bounded vocabulary
------------------
With ``max_vocabulary = m`` the vocabulary keeps the first ``m`` tokens
learned; tokens first met once it holds ``m`` share one *overflow token*
(:data:`stream_nb._stores.OTHER`, ``None`` in states), when learned and when
scored. In an event, the overflow token's value combines those of all such
tokens: their sum for the count learners (``x_other = Σ x_t``), their maximum
for Bernoulli (on when any of them is on). The model is then exactly an
unbounded one learned on the stream so rewritten, so every formula keeps its
meaning with ``V ≤ m + 1``. ``max_features`` instead drops new tokens once
``max_features`` are kept (they are not learned and score nothing); when
both are set, whichever is reached first applies.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from stream_nb._exceptions import ModelStateError
from stream_nb._params import check_alpha, check_cap, check_feature_weights
from stream_nb._state import (
    check_at_most,
    check_consistent,
    check_feature_names,
    field,
    pairs,
    read_count,
    read_key,
    read_label,
    read_mapping,
    read_pairs,
)
from stream_nb._stores import OTHER, add_scaled, n_real, rescale, tree_from_pairs, tree_to_pairs
from stream_nb.base import Learner
from stream_nb.naive_bayes._token_store import MAX_BATCH_CELLS, MAX_CELLS, trimmed_rows
from stream_nb.naive_bayes._token_values import binary_on, check_counts, count_stats, threshold_on

if TYPE_CHECKING:
    from stream_nb.naive_bayes._token_store import TokenStore

__all__ = ["binary_on", "check_counts", "count_stats", "threshold_on"]

T = TypeVar("T")

#: ``(log_probas, predictions, errors)``, as :meth:`~stream_nb.base.Learner.predict_learn_many`
Answers = tuple[list[dict[Hashable, float] | None], list[Hashable | None], dict[int, Exception]]


class _TokenLearner(Learner):
    """What the token learners share: the smoothing ``alpha``, class weights, dense
    count rows and the vocabulary bounds.

    ``_counts[token]`` is a list of raw weights indexed by class (``_index``,
    in order of first appearance); a row is only as long as the highest class
    index that touched the token, missing entries are 0. Subclasses keep
    per-class totals in ``_class_extra`` (name -> label -> raw weight) and
    derived caches, rebuilt by :meth:`_rebuild` after a merge, a rescale or a
    load (caches are never read from a state).

    The batch kernels keep the same counts as one array
    (:mod:`~stream_nb.naive_bayes._token_store`) and leave the rows of the
    tokens they changed stale (``_rows_stale``); every method that reads a row
    calls :meth:`_fresh_rows` first. The keys of ``_counts`` (the vocabulary)
    are always current.

    Subclasses start learning an event with :meth:`_start_learning` (values
    checked, vocabulary bounds applied, class weight added) and call
    :meth:`_scored_tokens` on ``x`` (after checking its values) to score it.
    """

    _EXTRA: tuple[str, ...] = ()
    #: Combines the values of the tokens that share the overflow token.
    _COMBINE: Any = staticmethod(lambda a, b: a + b)
    #: A token with value 0 is learned into the vocabulary (Bernoulli: every
    #: feature present is; count learners: only positive counts are).
    _LEARNS_ZEROS = False
    #: The batch kernel scores ``alpha = 0`` (maximum likelihood) too.
    _KERNEL_MLE = False

    def _raw_class_weights(self) -> Iterable[tuple[Hashable, float]]:
        return self._class_weight.items()

    # ------------------------------------------------------------------ batch kernel
    def predict_learn_rows(
        self,
        xs: Sequence[Mapping[str, Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float] | None = None,
    ) -> tuple[list[Hashable], Any, Any] | None:
        """:meth:`Learner.predict_learn_rows` with the learner's exact batch kernel
        (:mod:`stream_nb.naive_bayes._text_batch`), or ``None`` for a batch it does
        not take (nothing changed). A tracked model-sync delta
        (:meth:`~stream_nb.base.Learner.track_delta`) learns the batch's labelled
        events too, one at a time (``capabilities.kernel_records_delta``).

        Examples
        --------
        >>> from stream_nb import MultinomialNB
        >>> model = MultinomialNB()
        >>> model.learn_one({"spam": 2}, "junk")
        >>> model.learn_one({"meeting": 1}, "work")
        >>> xs = [{"spam": 1, "offer": 1} if i % 2 else {"meeting": 2} for i in range(100)]
        >>> ys = ["junk" if i % 2 else "work" for i in range(100)]
        >>> labels, log_proba, best = model.predict_learn_rows(xs, ys)
        >>> labels, log_proba.shape, [labels[k] for k in best[:4]], model.n_learned
        (['junk', 'work'], (100, 2), ['work', 'junk', 'work', 'junk'], 102)
        >>> model.predict_learn_rows(xs[:10], ys[:10]) is None  # too short a batch
        True
        """
        if not self._kernel_applies():
            return None
        out = self._row_kernel(xs, ys, ws)
        if out is not None and self._delta is not None:  # (kernel_records_delta)
            self._record_batch(xs, ys, [1.0] * len(xs) if ws is None else ws, {})
        return out

    def predict_learn_many(
        self,
        xs: Sequence[Mapping[str, Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float],
    ) -> Answers:
        """:meth:`Learner.predict_learn_many` through the batch kernel where it takes the
        batch (:meth:`predict_learn_rows`), else the per-event loop.

        A batch that meets classes new to the model (the kernel's scores are over a
        fixed set of classes) goes event by event up to the last event that brings
        a new class, and through the kernel from there when it takes the rest."""
        if not self._kernel_applies():
            return Learner.predict_learn_many(self, xs, ys, ws)
        out = self._kernel_answers(xs, ys, ws)
        if out is not None:
            return out
        split = _after_new_classes(self._index, ys)
        if split is None or len(xs) - split < _MIN_SPLIT:
            return Learner.predict_learn_many(self, xs, ys, ws)
        head = Learner.predict_learn_many(self, xs[:split], ys[:split], ws[:split])
        tail = self._kernel_answers(xs[split:], ys[split:], ws[split:])
        if tail is None:
            tail = Learner.predict_learn_many(self, xs[split:], ys[split:], ws[split:])
        errors = dict(head[2])
        errors.update({split + i: e for i, e in tail[2].items()})
        return head[0] + tail[0], head[1] + tail[1], errors

    def _kernel_answers(
        self,
        xs: Sequence[Mapping[str, Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float],
    ) -> Answers | None:
        """The kernel's answers to a batch as :meth:`predict_learn_many` gives them
        (the delta recorded), or ``None`` (nothing changed)."""
        out = self._row_kernel(xs, ys, ws)
        if out is None:
            return None
        from stream_nb.naive_bayes._arrays import per_event_answers

        self._record_batch(xs, ys, ws, {})  # (the kernel bypasses learn_one)
        return per_event_answers(*out)

    #: The kernels' array of the counts (made on first use).
    _store: TokenStore | None
    #: Whether the array mirrors the rows (cleared by anything else that changes them:
    #: a per-event learn, a merge, a rescale, a load).
    _batch_counts_valid: bool
    #: Whether some rows are stale (a kernel changed the array only).
    _rows_stale: bool

    def _kernel_applies(self) -> bool:
        """Whether the batch kernel may take a batch: the class declares one, and
        ``alpha > 0`` unless the kernel applies the zero-probability rule of
        :mod:`stream_nb._mle` itself (``_KERNEL_MLE``; otherwise the per-event path
        does)."""
        return bool(type(self).capabilities.row_kernel) and (self.alpha > 0 or self._KERNEL_MLE)

    def _row_kernel(
        self,
        xs: Sequence[Mapping[str, Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float] | None,
    ) -> tuple[list[Hashable], Any, Any] | None:
        """The learner's batch kernel (:meth:`_batch_kernel`) on this batch (``None``:
        not this batch). With forgetting the kernel learns the batch's raw weights and
        smooths each event with its own ``α / scale``
        (:meth:`~stream_nb.base.Learner._kernel_decay`); the scale is then the one
        learning event by event leaves."""
        kernel = self._batch_kernel()
        if kernel is None or len(xs) < _MIN_SPLIT:
            return None
        takes, decay = self._kernel_decay(ys, ws)
        if not takes:
            return None  # (forgetting: a renormalisation within the batch, or a delta)
        out = kernel(self, xs, ys, ws, decay)
        if out is not None and decay is not None:
            self._scale = decay.end
        return out

    def _batch_kernel(self) -> Callable[..., tuple[list[Hashable], Any, Any] | None] | None:
        """Hook: the kernel function, called as ``kernel(learner, xs, ys, ws, decay)``
        (``decay``: the batch's :class:`~stream_nb._decay.BatchDecay`, ``None`` without
        forgetting; ``None``: the learner has no kernel)."""
        return None

    # ------------------------------------------------------------------ the kernels' array
    #: Where a row holds class ``k``'s count: at ``offset + stride × k``.
    _ROW_LAYOUT = (0, 1)
    #: Most cells (classes × tokens) of the kernels' array; past it the kernels decline
    #: every batch and no array is kept (see :mod:`~stream_nb.naive_bayes._token_store`).
    _ARRAY_CELLS: ClassVar[int] = MAX_CELLS
    #: Most cells (classes × entries) of a batch the kernels take.
    _BATCH_CELLS: ClassVar[int] = MAX_BATCH_CELLS

    def _ready_store(self) -> TokenStore | None:
        """The kernels' array of the counts, rebuilt from the rows if anything else
        changed them since; ``None`` past its size bound."""
        from stream_nb.naive_bayes._token_store import TokenStore as Store

        n_classes = len(self._class_weight)
        store = self._store
        if self._batch_counts_valid and store is not None and store.counts.shape[0] == n_classes:
            return store
        self._fresh_rows()
        if n_classes * len(self._counts) > self._ARRAY_CELLS:
            self._drop_store()
            return None
        if store is None:
            store = self._store = Store(*self._ROW_LAYOUT)
        store.sync(self._counts, n_classes)
        self._batch_counts_valid = True
        return store

    def _count_matrix(self) -> Any:
        """``K × V``: the counts of every token of the vocabulary (in some token order),
        from the kernels' array while it is current, else from the rows."""
        store = self._store
        n_classes = len(self._class_weight)
        if self._batch_counts_valid and store is not None and store.counts.shape[0] == n_classes:
            return store.matrix()
        from stream_nb.naive_bayes._token_store import count_matrix

        return count_matrix(self._counts.values(), n_classes, self._ROW_LAYOUT)

    def _drop_store(self) -> None:
        """Free the kernels' array (the rows made fresh first)."""
        self._fresh_rows()
        self._store = None
        self._batch_counts_valid = False

    def _add_stale_tokens(self, tokens: Sequence[Any]) -> None:
        """Add tokens a kernel learned first to the vocabulary, their rows stale (``None``
        until rebuilt: every reader of a row calls :meth:`_fresh_rows` first)."""
        self._counts.update(dict.fromkeys(tokens))

    def _fresh_rows(self) -> None:
        """Rebuild the rows a kernel left stale (see the class docstring)."""
        if self._rows_stale:
            assert self._store is not None  # (rows are stale only while the array is valid)
            tokens, columns = self._store.take_dirty()
            self._rows_stale = False
            if tokens:
                self._rows_from_columns(tokens, columns)

    def _rows_from_columns(self, tokens: Sequence[Any], columns: Any) -> None:
        """Hook: set the rows of ``tokens`` from their counts (``K × n``, one column
        each), as the per-event path would hold them (with their derived caches)."""
        rows = self._counts
        for token, row in zip(tokens, trimmed_rows(columns), strict=True):
            rows[token] = row

    def feature_names(self) -> list[Hashable]:
        return list(self._counts)

    def __init__(
        self,
        alpha: float,
        *,
        max_vocabulary: int | None,
        half_life: float | None,
        max_classes: int | None,
        max_features: int | None,
        feature_weights: Mapping[Hashable, float] | None = None,
    ) -> None:
        super().__init__(half_life=half_life, max_classes=max_classes, max_features=max_features)
        self.max_vocabulary = check_cap(max_vocabulary, "max_vocabulary")
        self.feature_weights = check_feature_weights(feature_weights)
        self.alpha = check_alpha(alpha, allow_zero=True)
        self._class_weight: dict[Hashable, float] = {}  # N_y, in order of first appearance
        self._total_weight = 0.0  # N
        self._index: dict[Hashable, int] = {}  # label -> class index k
        self._counts: dict[str, list[float]] = {}
        self._class_extra: dict[str, dict[Hashable, float]] = {name: {} for name in self._EXTRA}
        self._store = None
        self._batch_counts_valid = False
        self._rows_stale = False

    def _vocabulary_params(self) -> dict[str, Any]:
        return {
            "max_vocabulary": self.max_vocabulary,
            "feature_weights": self.feature_weights,
            **self._cap_params(),
        }

    def _weighted(self, x: Mapping[Any, Any]) -> Mapping[Any, Any]:
        """``x`` (as scored) with each count times its token's weight (``feature_weights``,
        1 for the others and for the overflow token): the count learners' scores are
        linear in the counts, so this weights every token's terms."""
        weights = self.feature_weights
        if weights is None:
            return x
        get = weights.get
        return {t: c * get(t, 1.0) for t, c in x.items()}

    def _class_labels(self) -> dict[Hashable, int]:
        return self._index

    def _add_weight(self, y: Hashable, w: float) -> int:
        """Add ``w`` to ``N_y`` and ``N``; return the class index of ``y``."""
        class_weight = self._class_weight
        k = self._index.get(y)
        if k is None:
            k = self._index[y] = len(class_weight)
            class_weight[y] = w
            for extra in self._class_extra.values():
                extra[y] = 0.0
        else:
            class_weight[y] += w
        self._total_weight += w
        return k

    def _rebuild(self) -> None:
        """Recompute derived caches from the raw statistics."""

    def _start_learning(
        self, x: Mapping[Any, Any], y: Hashable, w: float, measure: Callable[[Mapping[Any, Any]], T]
    ) -> tuple[Mapping[Any, Any], T, int]:
        """Begin learning ``x``: ``measure`` checks its values (and returns what the
        learner needs of them) before anything changes, the vocabulary bounds apply
        (``x`` is measured again if they changed it), and ``w`` is added to ``N_y``.

        Returns ``(x as learned, its measure, class index of y)``.
        """
        measured = measure(x)
        tokens = self._learned_tokens(x)
        if tokens is not x:  # vocabulary bounds applied
            x = tokens
            measured = measure(x)
        return x, measured, self._add_weight(y, w)

    # ------------------------------------------------------------------ vocabulary
    def _learned_tokens(self, x: Mapping[Any, Any]) -> Mapping[Any, Any]:
        """``x`` as it is learned: token names new to the model checked, bounds applied.

        ``x`` itself (no copy) unless a bound changes it; its values must be
        valid already.
        """
        rows = self._counts
        if x.keys() <= rows.keys() and None not in x:  # every token known: nothing to check
            return x
        check_feature_names(x)
        if self.max_vocabulary is None and self.max_features is None:
            return x
        return self._bounded(x, True)

    def _scored_tokens(self, x: Mapping[Any, Any]) -> Mapping[Any, Any]:
        """``x`` as it is scored: unknown tokens of a full vocabulary read as the overflow token."""
        cap = self.max_vocabulary
        rows = self._counts
        if cap is None or n_real(rows) < cap or x.keys() <= rows.keys():
            return x
        return self._bounded(x, False)

    def _bounded(self, x: Mapping[Any, Any], learning: bool) -> dict[Any, Any]:
        """``x`` with tokens outside the vocabulary admitted, folded into the overflow
        token, or dropped (see the module docstring)."""
        rows = self._counts
        vcap, fcap = self.max_vocabulary, self.max_features
        size = n_real(rows)
        combine = self._COMBINE
        zeros = self._LEARNS_ZEROS
        out: dict[Any, Any] = {}
        for token, value in x.items():
            if token in rows and token is not OTHER:
                out[token] = value
            elif not learning:
                if vcap is not None and size >= vcap:
                    out[OTHER] = value if OTHER not in out else combine(out[OTHER], value)
            elif not zeros and not value > 0:
                continue  # a zero count: not learned, never in the vocabulary
            elif (vcap is None or size < vcap) and (fcap is None or size < fcap):
                out[token] = value
                size += 1
            elif vcap is not None and size >= vcap:
                out[OTHER] = value if OTHER not in out else combine(out[OTHER], value)
            # else: max_features reached, the token is not learned
        return out

    def _token_map(self, other: _TokenLearner) -> dict[Any, Any]:
        """Where each of ``other``'s tokens lands here: itself, :data:`OTHER`, or ``...``
        (dropped), admitting new ones in ``other``'s order as learning would."""
        rows = self._counts
        vcap, fcap = self.max_vocabulary, self.max_features
        size = n_real(rows)
        out: dict[Any, Any] = {}
        for token in other._counts:
            if token in rows or token is OTHER:
                out[token] = token
            elif (vcap is None or size < vcap) and (fcap is None or size < fcap):
                out[token] = token
                size += 1
            elif vcap is not None and size >= vcap:
                out[token] = OTHER
            else:
                out[token] = ...
        return out

    # ------------------------------------------------------------------ sparse views
    def _sparse_counts(self) -> dict[str, dict[Hashable, float]]:
        self._fresh_rows()
        labels = list(self._class_weight)
        return {
            token: {labels[k]: n for k, n in enumerate(row) if n}
            for token, row in self._counts.items()
        }

    def _load(
        self,
        class_weight: dict[Hashable, float],
        total_weight: float,
        extra: Mapping[str, Mapping[Hashable, float]],
        counts: Mapping[Any, Mapping[Hashable, float]],
    ) -> None:
        """Set the raw statistics from sparse form and rebuild everything derived."""
        index = {y: k for k, y in enumerate(class_weight)}
        dense: dict[str, list[float]] = {}
        for token, by_class in counts.items():
            unknown = by_class.keys() - index.keys()
            if unknown:
                raise ModelStateError(
                    f"stats.counts[{token!r}]: names unknown classes {sorted(map(repr, unknown))}"
                )
            row = [0.0] * (max((index[y] for y in by_class), default=-1) + 1)
            for y, n in by_class.items():
                row[index[y]] = n
            dense[token] = row
        self._class_extra = {
            name: {y: float(extra[name].get(y, 0.0)) for y in class_weight} for name in self._EXTRA
        }
        self._class_weight = class_weight
        self._total_weight = total_weight
        self._index = index
        self._store = None  # (a new vocabulary: the array is rebuilt when next needed)
        self._batch_counts_valid = False
        self._rows_stale = False
        self._set_rows(dense)
        self._rebuild()

    def _set_rows(self, dense: dict[str, list[float]]) -> None:
        """Install plain count rows (a subclass may store them in another layout)."""
        self._counts = dense

    # ------------------------------------------------------------------ Learner hooks
    def _merge(self, other: Any, factor: float) -> None:
        class_weight = dict(self._class_weight)
        add_scaled(class_weight, other._class_weight, factor)
        extra = {name: dict(self._class_extra[name]) for name in self._EXTRA}
        for name in self._EXTRA:
            add_scaled(extra[name], other._class_extra[name], factor)
        counts = self._sparse_counts()
        theirs = other._sparse_counts()
        if self.max_vocabulary is not None or self.max_features is not None:
            theirs = self._mapped_counts(other, theirs, extra, factor)
        add_scaled(counts, theirs, factor)
        total = self._total_weight + other._total_weight * factor
        self._load(class_weight, total, extra, counts)

    def _mapped_counts(
        self,
        other: _TokenLearner,
        theirs: dict[Any, dict[Hashable, float]],
        extra: dict[str, dict[Hashable, float]],
        factor: float,
    ) -> dict[Any, dict[Hashable, float]]:
        """``other``'s sparse counts under this model's vocabulary bounds.

        Tokens past ``max_vocabulary`` are summed into the overflow token;
        dropped tokens (``max_features``) leave the per-class totals
        ``extra`` too.
        """
        tmap = self._token_map(other)
        out: dict[Any, dict[Hashable, float]] = {}
        for token, by_class in theirs.items():
            target = tmap[token]
            if target is ...:
                for name in self._EXTRA:
                    column = extra[name]
                    for y, n in by_class.items():
                        column[y] -= n * factor
                continue
            dst = out.setdefault(target, {})
            for y, n in by_class.items():
                dst[y] = dst.get(y, 0.0) + n
        if OTHER in out:
            out[OTHER] = self._overflow_counts(out[OTHER], other._class_weight)
        return out

    def _overflow_counts(
        self, by_class: dict[Hashable, float], their_weights: Mapping[Hashable, float]
    ) -> dict[Hashable, float]:
        """Counts another model (of class weights ``their_weights``) adds to the overflow
        token: the sums of those of its tokens."""
        return by_class

    def _rescale(self, factor: float) -> None:
        self._fresh_rows()
        self._batch_counts_valid = False
        rescale(self._class_weight, factor)
        self._total_weight *= factor
        for extra in self._class_extra.values():
            rescale(extra, factor)
        for row in self._counts.values():
            row[:] = [n * factor for n in row]
        self._rebuild()

    def _stats_to_state(self) -> dict[str, Any]:
        return {
            "class_weight": pairs(self._class_weight),
            "total_weight": self._total_weight,
            **{name: pairs(self._class_extra[name]) for name in self._EXTRA},
            "counts": tree_to_pairs(self._sparse_counts()),
        }

    #: Each count is at most its class weight (Bernoulli: events in which the token was on).
    _COUNTS_BOUNDED_BY_CLASS = False

    def _stats_from_state(self, stats: Mapping[str, Any]) -> None:
        stats = read_mapping(
            stats, "stats", ("class_weight", "total_weight", *self._EXTRA, "counts")
        )
        class_weight = read_pairs(
            field(stats, "class_weight", "stats"),
            "stats.class_weight",
            read_count,
            key=read_label,
        )
        total = read_count(stats["total_weight"], "stats.total_weight")
        check_consistent(total, class_weight.values(), "stats.total_weight", "the class weights")
        extra = {
            name: read_pairs(stats[name], f"stats.{name}", read_count, key=read_label)
            for name in self._EXTRA
        }
        for name, values in extra.items():
            if values.keys() != class_weight.keys():
                raise ModelStateError(
                    f"stats.{name}: must name the same classes as stats.class_weight"
                )
        capped = self.max_vocabulary is not None

        def token(value: Any, where: str) -> Hashable:
            return read_key(value, where, allow_none=capped)

        counts = tree_from_pairs(stats["counts"], 2, "stats.counts", keys=(token, read_label))
        if self.max_vocabulary is not None and n_real(counts) > self.max_vocabulary:
            raise ModelStateError(
                f"stats.counts: {n_real(counts)} tokens, more than "
                f"max_vocabulary={self.max_vocabulary}"
            )
        if self.max_features is not None and n_real(counts) > self.max_features:
            raise ModelStateError(
                f"stats.counts: {n_real(counts)} tokens, more than max_features={self.max_features}"
            )
        sums: dict[Hashable, list[float]] = {y: [] for y in class_weight}
        for t, by_class in counts.items():
            for y, n in by_class.items():
                column = sums.get(y)
                if column is None:
                    raise ModelStateError(f"stats.counts[{t!r}]: unknown class {y!r}")
                column.append(n)
                if self._COUNTS_BOUNDED_BY_CLASS:
                    check_at_most(
                        n, class_weight[y], f"stats.counts[{t!r}][{y!r}]", "the class weight"
                    )
        for name, values in extra.items():
            for y, n in values.items():
                check_consistent(n, sums[y], f"stats.{name}[{y!r}]", "the class's token counts")
        self._load(class_weight, total, extra, counts)

    def _size(self) -> tuple[int, int, int]:
        self._fresh_rows()
        classes = len(self._class_weight)
        stored = classes * (1 + len(self._EXTRA)) + sum(map(len, self._counts.values()))
        return classes, len(self._counts), stored


#: A batch split after its new classes goes through the kernel from there when at least
#: this many events are left (the kernel's own minimum batch).
_MIN_SPLIT = 64


def _after_new_classes(known: Mapping[Hashable, int], ys: Sequence[Hashable | None]) -> int | None:
    """The index just after the last event of ``ys`` whose label is new (to ``known``
    and to the events before it), or ``None`` if there is none (or a label cannot be
    a dictionary key)."""
    seen = set(known)
    last = -1
    try:
        for i, y in enumerate(ys):
            if y is not None and y not in seen:
                seen.add(y)
                last = i
    except TypeError:  # (an unhashable label: the per-event path rejects it)
        return None
    return None if last < 0 else last + 1
