"""What the token learners' exact batch kernels share: coded batches, prefix sums, state.

:meth:`stream_nb.base.Learner.predict_learn_many` is the loop "predict event
``t`` with the model that learned events ``0..t-1``, then learn it". For token
counts every quantity event ``t`` sees is a prefix sum over the batch, so the
whole batch is a few array operations:

* the batch's tokens get integer codes (:class:`TokenBatch`): one code per
  distinct token, kept between batches for the tokens of the vocabulary
  (:class:`TokenCodes`, with the vocabulary's counts as one ``K × V`` array, so
  the batch's start counts are one gather; a token first met gets a
  batch-local code), and the events become a CSR-like list of entries
  ``(event, token, value)`` in event order;
* the counts ``N_{k,w}`` before entry ``e`` (token ``w`` of event ``t``) are the
  counts at the batch start plus the weights learned into ``(k, w)`` by the
  entries of the same token before ``e`` (:func:`grouped_exclusive_cumsum`), so
  event ``t`` sees the earlier events of its own batch;
* class weights, per-class token totals, the vocabulary size (a new token joins
  it at its first learned entry) are exclusive prefix sums over the events.

The learners' kernels (:mod:`~stream_nb.naive_bayes._count_kernels` for the
count learners, :mod:`~stream_nb.naive_bayes._bernoulli_batch`) then apply their
formulas to every (class, event) at once and write the statistics after the
batch back into the learner's rows, in the order the per-event path would have
created them. The state after the
batch is the per-event path's bit for bit: with unit weights and integral
counts every sum is an exact integer; otherwise the counts are added one
entry at a time, in event order, as :meth:`learn_one` adds them. Predictions
agree with the per-event path to rounding (about 1e-13 relative).

Kernels return ``None`` (nothing changed) for the batches they do not take:
fewer than :data:`MIN_BATCH` events, no class learned yet, a label not learned
before the batch, forgetting (``half_life``), fixed class priors, vocabulary
bounds that the batch could reach, a value that is not an ``int`` or
``float`` (``bool`` too for Bernoulli), a negative count or one beyond
:data:`~stream_nb.limits.MAX_VALUE`, a weight outside the limits, a score
beyond the double range. The per-event path then handles the batch and raises
its errors per event.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from stream_nb._exceptions import InvalidEventError
from stream_nb._softmax import ABSORB
from stream_nb._state import check_feature_names
from stream_nb.limits import MAX_VALUE
from stream_nb.naive_bayes._arrays import (
    BatchClasses,
    exact_integer_sums,
    exclusive_cumsum,
    grouped_exclusive_cumsum,
    row_max_argmax,
    row_sum,
    running_from,
)

if TYPE_CHECKING:
    from stream_nb.naive_bayes._text import _TokenLearner

__all__ = [
    "BINARY_TYPES",
    "COUNT_TYPES",
    "MIN_BATCH",
    "KernelResult",
    "TokenBatch",
    "TokenCodes",
    "add_class_weights",
    "class_prefix",
    "class_tokens_prefix",
    "count_totals",
    "integral",
    "learned_counts",
    "log_prior",
    "normalise",
    "write_counts",
]

#: Below this many events the per-event loop is cheaper than the kernel's fixed cost.
MIN_BATCH = 64

#: Sums of integral counts below this are exact in float64.
_EXACT_INTEGERS = 2.0**53

#: The values the count learners' kernels take, and Bernoulli's.
COUNT_TYPES = frozenset((int, float))
BINARY_TYPES = frozenset((int, float, bool))

#: ``(labels, log_proba B × K, best)``
KernelResult = tuple[list[Hashable], np.ndarray, np.ndarray]


class TokenCodes:
    """Integer codes of the vocabulary's tokens, and their counts as one array.

    A cache next to a learner's statistics (never in its state): ``counts``
    (``K × codes``) mirrors the learner's count rows while the learner's
    ``_batch_counts_valid`` is set; anything else that changes the counts (a
    per-event learn, a merge, a rescale, a load) clears it, and :meth:`sync`
    rebuilds the mirror from the rows. Codes are only given to tokens of the
    vocabulary, so the cache grows with the vocabulary.

    Examples
    --------
    >>> codes = TokenCodes()
    >>> codes.add(["a", "b"]), codes.code, codes.tokens
    (None, {'a': 0, 'b': 1}, ['a', 'b'])
    """

    __slots__ = ("code", "counts", "tokens")

    def __init__(self) -> None:
        self.code: dict[Hashable, int] = {}
        self.tokens: list[Hashable] = []
        self.counts = np.zeros((0, 0))

    def add(self, tokens: Sequence[Hashable]) -> None:
        """Give codes to ``tokens`` (none of which has one)."""
        code = self.code
        for token in tokens:
            code[token] = len(self.tokens)
            self.tokens.append(token)

    def sync(self, learner: _TokenLearner, n_classes: int, offset: int, stride: int) -> None:
        """Make :attr:`counts` the learner's counts (rows holding class ``k``'s count
        at ``offset + stride × k``), every token of its vocabulary coded."""
        rows = cast(dict[Any, list[float]], learner._counts)
        if learner._batch_counts_valid and self.counts.shape == (n_classes, len(self.tokens)):
            return
        code = self.code
        self.add([t for t in rows if t not in code])
        counts = np.zeros((n_classes, len(self.tokens)))
        present = [(c, rows[t]) for c, t in enumerate(self.tokens) if t in rows]
        if present:
            where = np.fromiter((c for c, _ in present), np.intp, len(present))
            lists = [r for _, r in present]
            lengths = np.fromiter(map(len, lists), np.intp, len(lists))
            total = int(lengths.sum())
            flat = np.fromiter(chain.from_iterable(lists), np.float64, total)
            within = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            columns = np.repeat(where, lengths)
            keep = np.flatnonzero((within >= offset) & ((within - offset) % stride == 0))
            counts[(within.take(keep) - offset) // stride, columns.take(keep)] = flat.take(keep)
        self.counts = counts
        learner._batch_counts_valid = True

    def learned(
        self,
        batch: TokenBatch,
        order: list[int],
        pairs: tuple[list[int], list[int], list[float]],
    ) -> None:
        """Code the batch's new tokens (``order``) and set the learned ``pairs`` in
        :attr:`counts`, as the rows were set."""
        n_before = len(self.tokens)
        self.add([batch.tokens[u] for u in order])
        code_of = batch.codes.copy()
        if order:
            code_of[order] = np.arange(n_before, len(self.tokens))
            grown = np.zeros((self.counts.shape[0], len(self.tokens)))
            grown[:, :n_before] = self.counts
            self.counts = grown
        us, ks, ns = pairs
        if us:
            self.counts[ks, code_of.take(us)] = ns


class TokenBatch:
    """A batch of token events, coded for the kernels.

    Attributes
    ----------
    classes
        Labels and weights (:class:`~stream_nb.naive_bayes._arrays.BatchClasses`).
    tokens, codes
        The batch's distinct tokens (index ``u``) and their codes (tokens new to
        the vocabulary: batch-local codes after the vocabulary's).
    c0, known0
        ``K × U``: each token's counts at the batch start; whether it is in the
        vocabulary.
    ev, tok, val
        One entry per (event, token) in event order: its event, its token ``u``,
        its value (float).
    """

    __slots__ = ("b", "c0", "classes", "codes", "ev", "known0", "tok", "tokens", "val")

    def __init__(
        self,
        classes: BatchClasses,
        tokens: list[Hashable],
        codes: np.ndarray,
        c0: np.ndarray,
        known0: np.ndarray,
        ev: np.ndarray,
        tok: np.ndarray,
        val: np.ndarray,
    ) -> None:
        self.b = len(classes.w)
        self.classes = classes
        self.tokens = tokens
        self.codes = codes
        self.c0 = c0
        self.known0 = known0
        self.ev = ev
        self.tok = tok
        self.val = val

    @classmethod
    def of(
        cls,
        learner: _TokenLearner,
        codes: TokenCodes,
        xs: Sequence[Mapping[Any, Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float] | None,
        value_types: frozenset[type],
        counts: bool = True,
        layout: tuple[int, int] = (0, 1),
    ) -> TokenBatch | None:
        """Code a batch for ``learner``, or ``None`` if no kernel may take it (see the
        module docstring); the values must be of ``value_types`` and, for ``counts``,
        within [0, MAX_VALUE] (otherwise within ±2**53, where comparisons are exact);
        ``layout``: ``(offset, stride)`` of the class counts in the learner's rows."""
        b = len(xs)
        if b < MIN_BATCH or len(ys) != b or (ws is not None and len(ws) != b):
            return None
        if learner.half_life is not None or not learner._class_weight:
            return None
        if set(map(type, xs)) != {dict}:
            return None
        dicts = cast(Sequence[dict[Any, Any]], xs)
        classes = BatchClasses.of(list(learner._class_weight), learner._index, ys, ws)
        if classes is None:
            return None
        values: list[Any] = list(chain.from_iterable(map(dict.values, dicts)))
        if not value_types.issuperset(map(type, values)):
            return None
        nnz = len(values)
        try:
            val = np.array(values, dtype=np.float64) if nnz else np.zeros(0)
        except OverflowError:  # (an int beyond the double range)
            return None
        if counts and nnz and not ((val >= 0.0) & (val <= MAX_VALUE)).all():
            return None  # negative, or beyond the limits: rejected per event
        if not counts and nnz and not (np.abs(val) <= _EXACT_INTEGERS).all():
            return None
        rows = cast(dict[Any, list[float]], learner._counts)
        if None in rows:
            return None  # the overflow token: the vocabulary is (or was) full
        codes.sync(learner, len(classes.labels), *layout)
        code = codes.code
        n_codes = len(codes.tokens)  # (every token of the vocabulary)
        coded = np.fromiter(map(code.get, chain.from_iterable(dicts), repeat(-1)), np.intp, nnz)
        extra: list[Hashable] = []
        missing = np.flatnonzero(coded < 0)
        if len(missing):
            keys = list(chain.from_iterable(dicts))
            local: dict[Hashable, int] = {}
            for i in missing.tolist():
                token = keys[i]
                c = local.get(token)
                if c is None:
                    c = local[token] = n_codes + len(extra)
                    extra.append(token)
                coded[i] = c
            if token_bound_reached(learner, len(extra)):
                return None
            try:
                check_feature_names(extra)
            except InvalidEventError:
                return None
        # distinct codes, in code order, without sorting (codes are dense)
        present = np.zeros(n_codes + len(extra), dtype=bool)
        present[coded] = True
        uniq = np.flatnonzero(present)
        remap = np.cumsum(present) - 1
        tok = remap.take(coded)
        every = codes.tokens + extra if extra else codes.tokens
        tokens = list(map(every.__getitem__, uniq.tolist()))
        known0 = uniq < n_codes
        n_known = int(known0.sum())  # (the known codes come first)
        c0 = np.zeros((len(classes.labels), len(uniq)))
        c0[:, :n_known] = codes.counts.take(uniq[:n_known], axis=1)
        ev = np.repeat(np.arange(b), np.fromiter(map(len, xs), np.intp, b))
        return cls(classes, tokens, uniq, c0, known0, ev, tok, val)

    def prefix(self, c0: np.ndarray, inc: np.ndarray) -> np.ndarray:
        """``K × nnz``: the counts entry ``e`` sees, ``c0`` (``K × U``) plus what the
        entries of its token before it learned (``inc``: each entry's learned
        weight, into its event's class)."""
        classes = self.classes
        k_of_event = np.full(self.b, -1, dtype=np.intp)
        k_of_event[classes.rows] = classes.k
        k_e = k_of_event.take(self.ev)
        n = len(self.ev)
        learned = np.zeros((len(classes.labels), n))
        mask = inc != 0
        idx = np.flatnonzero(mask)
        learned[k_e[idx], idx] = inc[idx]
        out: np.ndarray = c0.take(self.tok, axis=1)
        if len(idx):
            out += grouped_exclusive_cumsum(self.tok, learned)
        return out

    def event_class(self) -> np.ndarray:
        """Each entry's class index (``-1``: its event is unlabelled)."""
        classes = self.classes
        k_of_event = np.full(self.b, -1, dtype=np.intp)
        k_of_event[classes.rows] = classes.k
        return k_of_event.take(self.ev)

    def first_learned(self, learns: np.ndarray) -> np.ndarray:
        """For each token, its first entry with ``learns`` set (``nnz`` if none)."""
        n = len(self.ev)
        first = np.full(len(self.tokens), n, dtype=np.intp)
        idx = np.flatnonzero(learns)
        np.minimum.at(first, self.tok.take(idx), idx)
        return first

    def known(self, first: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """From each token's first learned entry (:meth:`first_learned`): whether each
        entry's token is in the vocabulary when its event is predicted, the size of
        the vocabulary before each event (``B``), and the tokens new to it in the
        order the per-event path adds them (by first learned entry)."""
        n = len(self.ev)
        ev_ext = np.append(self.ev, self.b)  # (entry nnz: never learned)
        first_event = ev_ext.take(first)
        known = self.known0.take(self.tok) | (first_event.take(self.tok) < self.ev)
        new = np.flatnonzero(~self.known0 & (first < n))
        added = np.bincount(first_event.take(new), minlength=self.b).astype(np.float64)
        order: list[int] = new[np.argsort(first.take(new), kind="stable")].tolist()
        return known, exclusive_cumsum(added), order

    def per_event(self, weights: np.ndarray) -> np.ndarray:
        """Sum of ``weights`` (one per entry) over each event's entries."""
        out: np.ndarray = np.bincount(self.ev, weights=weights, minlength=self.b)
        return out

    def per_event_classes(self, weights: np.ndarray) -> np.ndarray:
        """``K × B``: :meth:`per_event` of each row of the ``K × nnz`` ``weights``."""
        return np.stack([self.per_event(row) for row in weights])


def token_bound_reached(learner: _TokenLearner, new: int) -> bool:
    """Whether ``new`` more tokens could reach ``max_vocabulary`` or pass ``max_features``."""
    size = len(learner._counts)
    vcap, fcap = learner.max_vocabulary, learner.max_features
    return (vcap is not None and size + new >= vcap) or (fcap is not None and size + new > fcap)


def count_totals(batch: TokenBatch, xs: Sequence[Mapping[Any, Any]]) -> list[float]:
    """Each event's sum of counts, as :func:`~stream_nb.naive_bayes._text.check_counts`
    adds them (integral counts: exactly, in any order)."""
    if integral(batch.val):
        totals: list[float] = batch.per_event(batch.val).tolist()
        return totals
    return [sum(x.values()) for x in xs]


def class_prefix(classes: BatchClasses, start: Sequence[float]) -> np.ndarray:
    """``K × B``: a per-class statistic at each event, ``start`` plus the batch's
    weights before it."""
    out: np.ndarray = np.asarray(start, dtype=np.float64)[:, None] + classes.before
    return out


def class_tokens_prefix(
    classes: BatchClasses, start: Sequence[float], totals: Sequence[float]
) -> np.ndarray:
    """``K × B``: ``T_y`` before each event, ``start`` plus ``Σ total × w`` of the
    class's earlier events of the batch (``totals``: each event's count total)."""
    added = classes.onehot * np.asarray(totals, dtype=np.float64)[None, :]
    return running_from(np.asarray(start, dtype=np.float64), added)


def log_prior(learner: Any, classes: BatchClasses, alpha: float) -> np.ndarray | float:
    """``K × B`` log priors ``log((N_y + α) / (N + Kα))`` before each event (or ``-log K``
    when priors are not fitted), as :func:`stream_nb._params.log_prior`."""
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


# ---------------------------------------------------------------------- learning
def integral(*arrays: np.ndarray) -> bool:
    """Whether every value of ``arrays`` is an integer and their sum stays exact."""
    return exact_integer_sums(*arrays)


def add_class_weights(
    learner: _TokenLearner,
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
    totals: Sequence[float] | None,
) -> int:
    """Add the batch's labelled events to ``N_y``, ``N`` (and ``T_y += total × w``
    when ``totals`` are given) one event at a time, as :meth:`learn_one` does;
    returns the number of events learned."""
    class_weight = learner._class_weight
    tokens = learner._class_extra["class_tokens"] if totals is not None else None
    total_weight = learner._total_weight
    n = 0
    weights = repeat(1.0) if ws is None else ws
    sums = repeat(0.0) if totals is None else totals
    for y, w, s in zip(ys, weights, sums):  # noqa: B905 (same length, checked)
        if y is None:
            continue
        class_weight[y] += w
        total_weight += w
        if tokens is not None:
            tokens[y] += s * w
        n += 1
    learner._total_weight = total_weight
    learner.n_learned += n
    return n


def learned_counts(
    batch: TokenBatch, c0: np.ndarray, inc: np.ndarray, k_e: np.ndarray
) -> tuple[list[int], list[int], list[float]] | None:
    """``(token, class, count after the batch)`` of every pair the batch learned into,
    when every sum is exact (integral counts: then in any order), else ``None``."""
    idx = np.flatnonzero(inc)
    if not len(idx):
        return [], [], []
    u = len(batch.tokens)
    pair = k_e.take(idx) * u + batch.tok.take(idx)
    k_n = c0.shape[0]
    sums = np.bincount(pair, weights=inc.take(idx), minlength=k_n * u)
    touched = np.flatnonzero(np.bincount(pair, minlength=k_n * u))
    start = c0.reshape(-1).take(touched)
    added = sums.take(touched)
    if not integral(start, added):
        return None
    return (touched % u).tolist(), (touched // u).tolist(), (start + added).tolist()


def write_counts(
    learner: _TokenLearner,
    codes: TokenCodes,
    batch: TokenBatch,
    order: list[int],
    pairs: tuple[list[int], list[int], list[float]] | None,
    inc: np.ndarray,
    k_e: np.ndarray,
) -> None:
    """Write plain count rows (class ``k`` at index ``k``) after the batch: the tokens
    new to the vocabulary in ``order``, then every learned pair (see :func:`learned_counts`;
    ``None``: the entries ``inc`` added one at a time, in event order), and the same
    into the codes' counts."""
    tokens = batch.tokens
    rows = cast(dict[Any, list[float]], learner._counts)
    for u in order:
        rows[tokens[u]] = []
    if pairs is not None:
        us, ks, ns = pairs
        for row, k, n in zip(map(rows.__getitem__, map(tokens.__getitem__, us)), ks, ns):  # noqa: B905
            if len(row) <= k:
                row.extend([0.0] * (k + 1 - len(row)))
            row[k] = n
        codes.learned(batch, order, pairs)
        return
    val, w, ev, tok = batch.val, batch.classes.w, batch.ev, batch.tok
    for e in np.flatnonzero(inc).tolist():
        row = rows[tokens[tok[e]]]
        k = int(k_e[e])
        if len(row) <= k:
            row.extend([0.0] * (k + 1 - len(row)))
        row[k] += float(val[e]) * float(w[ev[e]])
    codes.add([tokens[u] for u in order])
    learner._batch_counts_valid = False  # (sums of real weights: rebuilt from the rows)
