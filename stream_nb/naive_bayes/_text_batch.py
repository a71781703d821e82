"""What the token learners' exact batch kernels share: coded batches, prefix counts, state.

:meth:`stream_nb.base.Learner.predict_learn_many` is the loop "predict event
``t`` with the model that learned events ``0..t-1``, then learn it". For token
counts every quantity event ``t`` sees is a prefix sum over the batch, so the
whole batch is a few array operations on the learner's counts held as one
``K × V`` array (:class:`~stream_nb.naive_bayes._token_store.TokenStore`):

* the batch becomes a list of entries ``(event, token code, value)`` in event
  order (:class:`TokenBatch`); tokens new to the vocabulary get codes after the
  vocabulary's;
* the counts ``N_{k,w}`` before entry ``e`` (token ``w`` of event ``t``) are the
  counts at the batch start plus the weights learned into ``(k, w)`` by the
  entries of the same token before ``e`` (:meth:`TokenBatch.prefix`: the entries
  sorted by token, a cumulative sum per class within each token's run), so event
  ``t`` sees the earlier events of its own batch;
* class weights, per-class token totals, the vocabulary size (a new token joins
  it at its first learned entry) are exclusive prefix sums over the events.

The learners' kernels (:mod:`~stream_nb.naive_bayes._count_kernels` for the
count learners, :mod:`~stream_nb.naive_bayes._bernoulli_batch`) apply their
formulas to every (class, event) at once and write the counts after the batch
into the array only (:meth:`TokenBatch.write`); the learner's per-token rows of
the changed tokens are rebuilt when something next reads them (see
:mod:`~stream_nb.naive_bayes._token_store`). The state after the batch is the
per-event path's bit for bit: with integral weights and counts every sum is an
exact integer, so the order of the additions does not matter; otherwise each
count is the per-event path's sum, added in event order. Predictions agree with
the per-event path to rounding (about 1e-13 relative).

Kernels return ``None`` (nothing changed) for the batches they do not take:
fewer than :data:`MIN_BATCH` events, no class learned yet, a label not learned
before the batch, forgetting (``half_life``), fixed class priors, vocabulary
bounds that the batch could reach, a value that is not a number (``int``,
``float`` or ``bool``), a negative count or one beyond
:data:`~stream_nb.limits.MAX_VALUE`, a weight outside the limits, a score beyond
the double range, a model past the array's size bound
(:data:`~stream_nb.naive_bayes._token_store.MAX_CELLS`) or a batch past
:data:`~stream_nb.naive_bayes._token_store.MAX_BATCH_CELLS`. The per-event path then
handles the batch and raises its errors per event.
"""

from __future__ import annotations

import math
from array import array as IntArray
from collections.abc import Hashable, Mapping, Sequence
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from stream_nb._decay import BatchDecay
from stream_nb._exceptions import InvalidEventError
from stream_nb._softmax import ABSORB
from stream_nb._state import check_feature_names
from stream_nb._stores import OTHER
from stream_nb.limits import MAX_VALUE
from stream_nb.naive_bayes._arrays import (
    BatchClasses,
    exact_integer_sums,
    exclusive_cumsum,
    fixed_log_priors,
    row_max_argmax,
    row_sum,
    running_from,
)
from stream_nb.naive_bayes._token_store import Codes, TokenStore

if TYPE_CHECKING:
    from stream_nb.naive_bayes._text import _TokenLearner

__all__ = [
    "MIN_BATCH",
    "KernelResult",
    "TokenBatch",
    "add_class_weights",
    "class_prefix",
    "class_tokens_prefix",
    "log_prior",
    "normalise",
    "priors_scored",
]

#: Below this many events the per-event loop is cheaper than the kernel's fixed cost.
MIN_BATCH = 64

#: Sums of integral counts below this are exact in float64.
_EXACT_INTEGERS = 2.0**53

#: Token codes sort as uint16 below this (numpy's stable sort is then a radix sort).
_RADIX_CODES = 1 << 16

#: ``(labels, log_proba B × K, best)``
KernelResult = tuple[list[Hashable], np.ndarray, np.ndarray]


class TokenBatch:
    """A batch of token events, coded for the kernels.

    Attributes
    ----------
    b, nnz
        Events and entries (event, token) of the batch.
    classes
        Labels and weights (:class:`~stream_nb.naive_bayes._arrays.BatchClasses`).
    ev, tok, val, k_e
        One entry per (event, token) in event order: its event, its token's code
        (``n_codes + j`` for the ``j``-th token new to the vocabulary, in order of
        appearance), its value (float) and its event's class (``-1``: unlabelled).
    n_codes, new_tokens
        Codes of the vocabulary before the batch; the batch's tokens new to it.
    integral
        Whether every value is an integer.
    alpha
        The smoothing constant in raw units before each event: one number, or ``B``
        of them with forgetting (``α / scale``, see :class:`~stream_nb._decay.BatchDecay`).
    decay
        The learner's forgetting over the batch (``None``: it keeps every event); the
        classes' weights are then the raw ones.
    """

    __slots__ = (
        "_groups",
        "alpha",
        "b",
        "classes",
        "decay",
        "ev",
        "integral",
        "k_e",
        "n_codes",
        "new_tokens",
        "nnz",
        "starts",
        "store",
        "tok",
        "val",
    )

    def __init__(
        self,
        store: TokenStore,
        classes: BatchClasses,
        lens: np.ndarray,
        tok: np.ndarray,
        values: tuple[np.ndarray, bool],
        new_tokens: list[Hashable],
    ) -> None:
        b = len(lens)
        val, self.integral = values
        self.store = store
        self.b = b
        self.classes = classes
        self.nnz = len(tok)
        self.tok = tok
        self.val = val
        self.n_codes = store.n_codes
        self.new_tokens = new_tokens
        self.ev = np.arange(b).repeat(lens)
        # reduceat needs every event to have an entry; otherwise per_event uses bincount
        self.starts = lens.cumsum() - lens if lens.all() else None
        k_of_event = np.full(b, -1, dtype=np.intp)
        k_of_event[classes.rows] = classes.k
        self.k_e = k_of_event.take(self.ev)
        self._groups: tuple[np.ndarray, ...] | None = None
        self.alpha: float | np.ndarray = 0.0
        self.decay: BatchDecay | None = None

    @classmethod
    def of(
        cls,
        learner: _TokenLearner,
        xs: Sequence[Mapping[Any, Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float] | None,
        decay: BatchDecay | None,
        *,
        counts: bool = True,
    ) -> TokenBatch | None:
        """Code a batch for ``learner``, or ``None`` if no kernel may take it (see the
        module docstring): the values must be numbers and, for ``counts``, within
        [0, MAX_VALUE] (otherwise within ±2**53, where comparisons are exact).
        ``decay``: the learner's forgetting over the batch (the events are then
        learned with its raw weights, see :attr:`alpha`)."""
        b = len(xs)
        if b < MIN_BATCH or len(ys) != b or (ws is not None and len(ws) != b):
            return None
        if not learner._class_weight:
            return None
        if set(map(type, xs)) != {dict}:
            return None
        dicts = cast(Sequence[dict[Any, Any]], xs)
        classes = BatchClasses.of(list(learner._class_weight), learner._index, ys, ws)
        if classes is None:
            return None
        if decay is not None:
            classes = classes.reweighted(decay.raw)
        lens = np.fromiter(map(len, dicts), np.intp, b)
        nnz = int(lens.sum())
        n_classes = len(classes.labels)
        if n_classes * nnz > learner._BATCH_CELLS:
            return None
        values = _values(dicts, nnz, counts)
        if values is None:
            return None
        rows = learner._counts
        if OTHER in rows:
            return None  # the overflow token: the vocabulary is (or was) full
        store = learner._ready_store()
        if store is None:
            return None
        code = store.code
        n_codes = store.n_codes
        code.missing = []
        tok = _coded(code, dicts, nnz)
        new_tokens: list[Hashable] = []
        unknown = code.missing  # (the entries coded -1, in order)
        if unknown:
            code.missing = []
            new_tokens = list(dict.fromkeys(unknown))  # (in order of appearance)
            local = dict(zip(new_tokens, range(n_codes, n_codes + len(new_tokens)), strict=True))
            tok[tok < 0] = np.fromiter(map(local.__getitem__, unknown), np.intp, len(unknown))
            if token_bound_reached(learner, len(new_tokens)):
                return None
            try:
                check_feature_names(new_tokens)
            except InvalidEventError:
                return None
            if n_classes * (n_codes + len(new_tokens)) > learner._ARRAY_CELLS:
                learner._drop_store()
                return None
            store.reserve(n_codes + len(new_tokens))
        batch = cls(store, classes, lens, tok, values, new_tokens)
        alpha = learner.alpha
        batch.alpha = alpha / learner._scale if decay is None else decay.smoothing(alpha)
        batch.decay = decay
        return batch

    # ------------------------------------------------------------------ per entry
    def entry_alpha(self) -> float | np.ndarray:
        """:attr:`alpha` of each entry's event (one number without forgetting)."""
        alpha = self.alpha
        if isinstance(alpha, np.ndarray):
            out: np.ndarray = alpha.take(self.ev)
            return out
        return alpha

    def token_weights(self, weights: Mapping[Any, float]) -> np.ndarray:
        """Each token's weight by code (``feature_weights``; 1 for the tokens it leaves
        out), over the vocabulary's codes and the batch's new tokens."""
        out = np.ones(self.n_codes + len(self.new_tokens))
        code = self.store.code
        get = code.get
        for token, weight in weights.items():
            c = get(token)
            if c is not None and c < self.n_codes:
                out[c] = weight
        if self.new_tokens:
            wget = weights.get
            out[self.n_codes :] = [wget(t, 1.0) for t in self.new_tokens]
        return out

    # ------------------------------------------------------------------ per event
    def per_event(self, weights: np.ndarray) -> np.ndarray:
        """Sum of ``weights`` (one per entry) over each event's entries (``B``), or of
        each row of a ``K × nnz`` array (``K × B``)."""
        starts = self.starts
        if starts is not None:
            out: np.ndarray = np.add.reduceat(weights, starts, axis=-1)
            return out
        if weights.ndim == 1:
            return np.bincount(self.ev, weights=weights, minlength=self.b)
        return np.stack([np.bincount(self.ev, weights=row, minlength=self.b) for row in weights])

    # ------------------------------------------------------------------ vocabulary
    def vocabulary(
        self, joins: np.ndarray, size: int, weights: np.ndarray | None = None
    ) -> tuple[np.ndarray | None, np.ndarray | float, list[int]]:
        """The vocabulary as each event sees it, from ``joins`` (the entries that learn
        their token into it) and its ``size`` before the batch.

        Returns whether each entry's token is in the vocabulary when its event is
        predicted (``None``: all are), the vocabulary's size before each event
        (``B``, or ``size`` when the batch adds nothing; with ``weights``, each
        token's by code, the sum of its tokens' weights instead) and the new tokens
        ``j`` that join, in the order the per-event path adds them (by first joining
        entry).
        """
        n_new = len(self.new_tokens)
        if weights is not None:
            size = float(weights[: self.n_codes].sum())  # type: ignore[assignment]
        if not n_new:
            return None, size, []
        sub = np.flatnonzero(self.tok >= self.n_codes)
        j = self.tok.take(sub) - self.n_codes
        first = np.full(n_new, self.nnz, dtype=np.intp)
        joining = joins.take(sub)
        np.minimum.at(first, j[joining], sub[joining])  # (few entries: the new tokens')
        ev_ext = np.append(self.ev, self.b)  # (entry nnz: never joins)
        first_event = ev_ext.take(first)
        known = np.ones(self.nnz, dtype=bool)
        known[sub] = first_event.take(j) < self.ev.take(sub)
        joined = np.flatnonzero(first < self.nnz)
        order: list[int] = joined.take(np.argsort(first.take(joined), kind="stable")).tolist()
        if not order:
            return known, size, []
        added = np.bincount(
            first_event.take(joined),
            None if weights is None else weights.take(self.n_codes + joined),
            minlength=self.b,
        ).astype(np.float64)
        return known, size + exclusive_cumsum(added), order

    # ------------------------------------------------------------------ counts
    def groups(self) -> tuple[np.ndarray, ...]:
        """The entries sorted by token (stable: event order within a token):
        ``(order, codes sorted, first entry of each token's run, each run's length)``."""
        if self._groups is None:
            tok = self.tok
            n = self.n_codes + len(self.new_tokens)
            if n <= _RADIX_CODES:
                order = tok.astype(np.uint16).argsort(kind="stable")
            else:  # codes of this batch only, so that they sort as uint16 if they can
                present = np.zeros(n, dtype=bool)
                present[tok] = True
                local = (np.cumsum(present) - 1).take(tok)
                keys = local.astype(np.uint16) if present.sum() <= _RADIX_CODES else local
                order = np.argsort(keys, kind="stable")
            ts = tok.take(order)
            first = np.empty(self.nnz, dtype=bool)
            first[:1] = True
            np.not_equal(ts[1:], ts[:-1], out=first[1:])
            runs = np.flatnonzero(first)
            lengths = np.diff(np.append(runs, self.nnz))
            self._groups = (order, ts, runs, lengths)
        return self._groups

    def prefix(
        self, inc: np.ndarray, integral: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(K × nnz, K × runs, K × runs, runs)``: the counts each entry sees (the counts
        at the batch start plus ``inc``, each entry's learned weight into its event's
        class, of the earlier entries of its token), each token's counts at the start
        and after the batch (in the order of :meth:`groups`' runs) and whether the
        batch learned into it.

        ``integral``: every value of ``inc`` is an integer. When the counts at the
        start are integers too and every sum stays below 2**53, each run's sums are
        differences of one cumulative sum. Otherwise each count is the count at the
        start plus the learned weights added one entry at a time, in event order, as
        :meth:`~stream_nb.base.Learner.learn_one` adds them: every count before an
        entry and after the batch is the per-event path's to the bit.
        """
        order, ts, runs, lengths = self.groups()
        n_classes = len(self.classes.labels)
        nnz = self.nnz
        inc_s = inc.take(order)
        k_s = self.k_e.take(order)
        start = self.store.counts.take(ts.take(runs), axis=1)  # K × runs: counts at the start
        classes = np.arange(n_classes)[:, None]
        if (
            integral
            and float(inc_s.sum()) + float(start.max(initial=0.0)) < _EXACT_INTEGERS
            and bool((start == np.floor(start)).all())
        ):
            # every partial sum of a run is an exact integer: int64 sums (exact, and
            # several times faster than float64 cumulative sums)
            learned_i = (k_s[None, :] == classes) * inc_s.astype(np.int64)
            inclusive = learned_i.cumsum(axis=1)
            base = inclusive.take(runs, axis=1) - learned_i.take(runs, axis=1)
            before_i = inclusive - learned_i
            before_i += (start.astype(np.int64) - base).repeat(lengths, axis=1)
            before = before_i.astype(np.float64)
            after = start + (inclusive.take(runs + lengths - 1, axis=1) - base)
        else:
            learned = (k_s[None, :] == classes) * inc_s
            before, after = _sequential_prefix(start, learned, runs, lengths)
        unsort = np.empty_like(order)
        unsort[order] = np.arange(nnz)
        changed = (after != start).any(axis=0)  # (a learned weight is positive)
        return before.take(unsort, axis=1), start, after, changed

    def write(
        self, learner: _TokenLearner, after: np.ndarray, order: list[int], changed: np.ndarray
    ) -> None:
        """Store the counts after the batch: the runs ``changed`` (a mask over
        :meth:`groups`' runs) of ``after`` into the array, the new tokens that joined
        the vocabulary (``order``, see :meth:`vocabulary`) into the learner's
        vocabulary; their rows are stale until rebuilt."""
        store = self.store
        n_codes = self.n_codes
        _, ts, runs, _ = self.groups()
        codes = ts.take(runs)
        if self.new_tokens:
            final = np.full(len(self.new_tokens), -1, dtype=np.intp)
            final[order] = np.arange(n_codes, n_codes + len(order))
            new = codes >= n_codes
            codes = codes.copy()
            codes[new] = final.take(codes[new] - n_codes)
            changed = changed & (codes >= 0)
            tokens = self.new_tokens
            joined = [tokens[j] for j in order]
            store.add(joined)
            learner._add_stale_tokens(joined)
        where = np.flatnonzero(changed)
        touched = codes.take(where)
        values = after.take(where, axis=1)
        for row, new_values in zip(store.counts, values, strict=True):  # (1-D: faster)
            row[touched] = new_values
        store.mark(touched)
        if self.new_tokens:
            store.mark(np.arange(n_codes, store.n_codes))
        learner._rows_stale = True


def _coded(code: Codes, dicts: Sequence[dict[Any, Any]], nnz: int) -> np.ndarray:
    """The code of every entry's token, in entry order (``-1``: no code yet), in one
    C-level loop."""
    return np.fromiter(map(code.__getitem__, chain.from_iterable(dicts)), np.intp, nnz)


def _values(
    dicts: Sequence[dict[Any, Any]], nnz: int, counts: bool
) -> tuple[np.ndarray, bool] | None:
    """The batch's values as float64 in entry order and whether all are integers, or
    ``None`` for a value the kernels do not take (not an ``int``, ``float`` or
    ``bool``; for ``counts`` a negative one or one past ``MAX_VALUE``, otherwise one
    past 2**53)."""
    if not nnz:
        return np.zeros(0), True
    values = list(chain.from_iterable(map(dict.values, dicts)))
    try:  # integers (and bools) only: one C-level pass that refuses anything else
        array = np.frombuffer(IntArray("q", values), np.int64)
    except (TypeError, OverflowError):
        try:  # dtype found from the values: numbers and bools only give a numeric array
            array = np.array(values)
        except (ValueError, TypeError, OverflowError):
            return None
    kind = array.dtype.kind
    if array.ndim != 1 or kind not in "biuf":
        return None
    if kind != "f":  # (integers: exact in float64 below 2**53)
        if counts and array.min() < 0:
            return None  # negative: rejected per event
        val = array.astype(np.float64)
        if not counts and kind in "iu" and not (np.abs(val) <= _EXACT_INTEGERS).all():
            return None  # (compared with a threshold: exact below 2**53 only)
        return val, True
    val = array.astype(np.float64, copy=False)
    if counts:
        if not ((val >= 0.0) & (val <= MAX_VALUE)).all():
            return None  # negative, or beyond the limits: rejected per event
    elif not (np.abs(val) <= _EXACT_INTEGERS).all():
        return None
    return val, bool((val == np.floor(val)).all())


def _sequential_prefix(
    start: np.ndarray, learned: np.ndarray, runs: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(K × n, K × runs)``: in runs of columns of ``learned`` (starting at ``runs``), the
    run's ``start`` plus the columns before each column, and plus all of the run's
    columns, added one column after the other (adding a class's 0 changes nothing, so
    each class's sum is its own weights' in order, as ``learn_one`` adds them).

    ``numpy.cumsum`` along an axis adds in order: the runs are laid out as the rows of
    one ``runs × (1 + width)`` array per width (a power of two: at most twice the
    cells), ``start`` first and zeros after each run's end."""
    n_classes, n = learned.shape
    before = np.empty((n_classes, n))
    after = np.empty_like(start)
    if not len(runs):
        return before, after
    width = np.left_shift(1, np.ceil(np.log2(lengths)).astype(np.intp))
    # the runs by width, and each entry's place in its width's array (a row per run)
    by_width = np.argsort(width, kind="stable")
    widths, first = np.unique(width.take(by_width), return_index=True)
    row = np.empty(len(runs), dtype=np.intp)
    row[by_width] = np.arange(len(runs)) - np.repeat(first, np.diff(np.append(first, len(runs))))
    run_of = np.repeat(np.arange(len(runs)), lengths)
    place = row.take(run_of) * (width.take(run_of) + 1) + (np.arange(n) - runs.take(run_of)) + 1
    entry_width = width.take(run_of)
    bounds = np.append(first, len(runs)).tolist()
    for i, w in enumerate(widths.tolist()):
        mine = by_width[bounds[i] : bounds[i + 1]]
        cols = np.flatnonzero(entry_width == w)
        grid = np.zeros((n_classes, len(mine), w + 1))
        grid[:, :, 0] = start.take(mine, axis=1)
        flat = grid.reshape(n_classes, -1)
        spot = place.take(cols)
        flat[:, spot] = learned.take(cols, axis=1)
        np.cumsum(grid, axis=2, out=grid)
        before[:, cols] = flat.take(spot - 1, axis=1)
        after[:, mine] = flat.take(np.arange(len(mine)) * (w + 1) + lengths.take(mine), axis=1)
    return before, after


def token_bound_reached(learner: _TokenLearner, new: int) -> bool:
    """Whether ``new`` more tokens could reach ``max_vocabulary`` or pass ``max_features``."""
    size = len(learner._counts)
    vcap, fcap = learner.max_vocabulary, learner.max_features
    return (vcap is not None and size + new >= vcap) or (fcap is not None and size + new > fcap)


def class_prefix(classes: BatchClasses, start: Sequence[float]) -> np.ndarray:
    """``K × B``: a per-class statistic at each event, ``start`` plus the batch's
    weights before it."""
    out: np.ndarray = np.asarray(start, dtype=np.float64)[:, None] + classes.before
    return out


def class_tokens_prefix(
    classes: BatchClasses, start: Sequence[float], totals: np.ndarray
) -> np.ndarray:
    """``K × B``: ``T_y`` before each event, ``start`` plus ``Σ total × w`` of the
    class's earlier events of the batch (``totals``: each event's count total)."""
    added = classes.onehot * totals[None, :]
    return running_from(np.asarray(start, dtype=np.float64), added)


def priors_scored(learner: Any) -> bool:
    """Whether a kernel can score the class priors: none fixed, or a fixed ``class_prior``
    for every class learned (the per-event path leaves a class without one out of its
    answers; a kernel's answers hold every class)."""
    fixed = learner.class_prior
    return fixed is None or all(y in fixed for y in learner._class_weight)


def log_prior(learner: Any, classes: BatchClasses, alpha: float | np.ndarray) -> np.ndarray | float:
    """``K × B`` log priors ``log((N_y + α) / (N + Kα))`` before each event (or ``-log K``
    when priors are not fitted, ``K × 1`` ``log class_prior[y]`` when fixed: see
    :func:`priors_scored`), as :func:`stream_nb._params.log_prior`."""
    if learner.class_prior is not None:
        fixed = fixed_log_priors(classes.labels, learner.class_prior)
        assert fixed is not None  # (priors_scored: every class has one)
        return fixed
    k = len(classes.labels)
    if not learner.fit_prior:
        return -math.log(k)
    n_y = class_prefix(classes, list(learner._class_weight.values()))
    total = learner._total_weight + exclusive_cumsum(classes.w * classes.labelled)
    out: np.ndarray = np.log(n_y + alpha) - np.log(total + k * alpha)[None, :]
    return out


def normalise(jll: np.ndarray, labels: list[Hashable]) -> KernelResult | None:
    """The ``K × B`` scores as ``(labels, log posterior B × K, decisions)``, or ``None``
    if a score is not finite (the per-event path leaves such classes out)."""
    if not np.isfinite(jll).all():
        return None
    top, best = row_max_argmax(jll.T)
    log_total = np.log(row_sum(np.exp(jll - top[None, :]).T))
    if np.abs(top).max() < ABSORB:
        log_proba = (jll - (top + log_total)[None, :]).T
    else:  # (see stream_nb._softmax.ABSORB)
        log_proba = ((jll - top[None, :]) - log_total[None, :]).T
    return list(labels), log_proba, best


def add_class_weights(
    learner: _TokenLearner,
    batch: TokenBatch,
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
    totals: np.ndarray | None,
    xs: Sequence[Mapping[Any, Any]],
) -> None:
    """Add the batch's labelled events to ``N_y``, ``N`` (and ``T_y += total × w``
    when ``totals``, each event's count total, are given) as :meth:`learn_one` adds
    them: at once when every sum is an exact integer, else one event at a time
    (each total then summed as :func:`~stream_nb.naive_bayes._text.check_counts` sums it)."""
    classes = batch.classes
    class_weight = learner._class_weight
    tokens = learner._class_extra["class_tokens"] if totals is not None else None
    learner.n_learned += classes.n_labelled
    starts = [learner._total_weight, *class_weight.values()]
    if tokens is not None:
        starts += tokens.values()
    w = classes.w
    parts = [np.array(starts), w]
    if totals is not None:
        parts.append(totals * w)
    if batch.integral and exact_integer_sums(*parts):  # (every partial sum is below their total)
        by_class = classes.onehot.sum(axis=1).tolist()
        added = (classes.onehot @ totals).tolist() if totals is not None else None
        labels = classes.labels
        for k, n in enumerate(by_class):
            if n:
                y = labels[k]
                class_weight[y] += n
                if tokens is not None and added is not None:
                    tokens[y] += added[k]
        learner._total_weight += float(w.take(classes.rows).sum())
        return
    if batch.decay is None:  # (Python's sums: an int weight keeps an int class weight)
        total_weight = learner._total_weight
        weights: Any = repeat(1.0) if ws is None else ws
        sums: Any = repeat(0.0) if totals is None else (sum(x.values()) for x in xs)
        for y, wi, s in zip(ys, weights, sums):  # noqa: B905 (same length, checked)
            if y is None:
                continue
            class_weight[y] += wi
            total_weight += wi
            if tokens is not None:
                tokens[y] += s * wi
        learner._total_weight = total_weight
        return
    # the raw weights, one event after the other (numpy.cumsum adds in order): each
    # class's sums, and the total's, are learn_one's
    rows = classes.rows
    learned_w = w.take(rows)
    learner._total_weight = _sum_in_order(learner._total_weight, learned_w)
    products = None
    if tokens is not None and totals is not None:
        if batch.integral and float(np.abs(totals).sum()) < _EXACT_INTEGERS:
            sums = totals.take(rows)  # (exact integers: check_counts' sums)
        else:
            sums = np.array([float(sum(xs[i].values())) for i in rows.tolist()])
        products = sums * learned_w
    labels = classes.labels
    for k in np.unique(classes.k).tolist():
        mine = np.flatnonzero(classes.k == k)
        y = labels[k]
        class_weight[y] = _sum_in_order(class_weight[y], learned_w.take(mine))
        if tokens is not None and products is not None:
            tokens[y] = _sum_in_order(tokens[y], products.take(mine))


def _sum_in_order(start: float, added: np.ndarray) -> float:
    """``start`` plus each of ``added`` in turn (as ``+=`` one at a time)."""
    steps = np.empty(len(added) + 1)
    steps[0] = start
    steps[1:] = added
    return float(np.cumsum(steps)[-1])
