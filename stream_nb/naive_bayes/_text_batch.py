"""Exact batch kernels of the token learners (multinomial, complement, Bernoulli).

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

Each kernel then applies its learner's formulas to every (class, event) at
once and writes the statistics after the batch back into the learner's rows,
in the order the per-event path would have created them. The state after the
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
from operator import mul
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from stream_nb._exceptions import InvalidEventError
from stream_nb._softmax import ABSORB
from stream_nb._state import check_feature_names
from stream_nb.limits import MAX_VALUE
from stream_nb.naive_bayes._arrays import (
    BatchClasses,
    exclusive_cumsum,
    grouped_exclusive_cumsum,
    row_max_argmax,
    row_sum,
)

if TYPE_CHECKING:
    from stream_nb.naive_bayes._text import _TokenLearner
    from stream_nb.naive_bayes.bernoulli import BernoulliNB
    from stream_nb.naive_bayes.complement import ComplementNB
    from stream_nb.naive_bayes.multinomial import MultinomialNB

__all__ = [
    "MIN_BATCH",
    "TokenBatch",
    "bernoulli_kernel",
    "complement_kernel",
    "many_result",
    "multinomial_kernel",
]

#: Below this many events the per-event loop is cheaper than the kernel's fixed cost.
MIN_BATCH = 64

#: Sums of integral counts below this are exact in float64.
_EXACT_INTEGERS = 2.0**53

#: Most (version, word run) terms the Bernoulli aggregates sum one by one per batch.
_MAX_AGGREGATE_CELLS = 1 << 22

#: The Bernoulli aggregates expand ``log(a + δ)`` in series where ``δ/a`` is at most
#: this, to this many terms: ``ratio**(terms + 1) / (terms + 1)`` is below 1e-19.
_SERIES_RATIO = 0.125
_SERIES_TERMS = 19

_COUNT_TYPES = frozenset((int, float))
_BINARY_TYPES = frozenset((int, float, bool))

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
    if _integral(batch.val):
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
    out: np.ndarray = np.asarray(start, dtype=np.float64)[:, None] + exclusive_cumsum(
        added, axis=-1
    )
    return out


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


def many_result(
    result: KernelResult,
) -> tuple[list[dict[Hashable, float] | None], list[Hashable | None], dict[int, Exception]]:
    """A kernel's arrays as :meth:`~stream_nb.base.Learner.predict_learn_many` returns them."""
    labels, log_proba, best = result
    rows = log_proba.tolist()
    log_probas: list[dict[Hashable, float] | None]
    if len(labels) == 2:
        first, second = labels
        log_probas = [{first: u, second: v} for u, v in rows]
    else:
        log_probas = [dict(zip(labels, r, strict=True)) for r in rows]
    predictions: list[Hashable | None] = list(map(labels.__getitem__, best.tolist()))
    return log_probas, predictions, {}


# ---------------------------------------------------------------------- learning
def _integral(*arrays: np.ndarray) -> bool:
    """Whether every value of ``arrays`` is an integer and their sum stays exact."""
    total = 0.0
    for a in arrays:
        if len(a) and not (a == np.floor(a)).all():
            return False
        total += float(np.abs(a).sum())
    return total < _EXACT_INTEGERS


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
    if not _integral(start, added):
        return None
    return (touched % u).tolist(), (touched // u).tolist(), (start + added).tolist()


# ---------------------------------------------------------------------- multinomial
def multinomial_kernel(
    learner: MultinomialNB,
    codes: TokenCodes,
    xs: Sequence[Mapping[Any, Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
) -> KernelResult | None:
    """Predict then learn a batch with :class:`~stream_nb.naive_bayes.MultinomialNB`'s
    formulas (see the module docstring), or ``None``."""
    if learner.class_prior is not None:
        return None
    batch = TokenBatch.of(learner, codes, xs, ys, ws, _COUNT_TYPES, layout=(2, 2))
    if batch is None:
        return None
    classes = batch.classes
    alpha = learner.alpha / learner._scale
    k_e = batch.event_class()
    inc = np.where((k_e >= 0) & (batch.val > 0), batch.val * classes.w.take(batch.ev), 0.0)
    known, added, order = batch.known(batch.first_learned(inc > 0))
    vocabulary = len(learner._counts) + added
    c0 = batch.c0
    counts = batch.prefix(c0, inc)
    x_known = np.where(known, batch.val, 0.0)
    # Σ_w x_w log1p(N_{y,w}/α) + X (log α − log(T_y + αV)), as MultinomialNB
    acc = batch.per_event_classes(x_known[None, :] * np.log1p(counts * (1.0 / alpha)))
    big_x = batch.per_event(x_known)
    totals = count_totals(batch, xs)
    class_tokens = learner._class_extra["class_tokens"]
    t_y = class_tokens_prefix(classes, [class_tokens[y] for y in classes.labels], totals)
    with np.errstate(divide="ignore"):
        log_den = np.log(t_y + alpha * vocabulary[None, :])
    term = np.where(big_x > 0, big_x, 0.0)[None, :] * (math.log(alpha) - log_den)
    jll = log_prior(learner, classes, alpha) + acc + np.where(big_x > 0, term, 0.0)
    result = normalise(jll, classes.labels)
    if result is None:
        return None
    # --- the statistics after the batch
    pairs = learned_counts(batch, c0, inc, k_e)
    tokens = batch.tokens
    rows = cast(dict[Any, list[float]], learner._counts)
    for u in order:
        rows[tokens[u]] = [1.0]
    log1p = math.log1p
    inv_alpha = learner._inv_alpha
    cache = learner._cache_logs
    if pairs is not None:
        us, ks, ns = pairs
        slots = [2 * k + 2 for k in ks]  # N_{k,w}; its log1p(N/α) sits just before
        # (math.log1p, as learn_one: numpy's may differ in the last bit)
        logs = map(log1p, map(mul, ns, repeat(inv_alpha))) if cache else repeat(0.0)
        learned_rows = map(rows.__getitem__, map(tokens.__getitem__, us))
        for row, i, n, lg in zip(learned_rows, slots, ns, logs):  # noqa: B905
            try:
                row[i] = n
            except IndexError:
                row.extend([0.0] * (i + 1 - len(row)))
                row[i] = n
            if cache:
                row[i - 1] = lg
        codes.learned(batch, order, pairs)
    else:  # one entry at a time, in event order, as learn_one adds them
        for e in np.flatnonzero(inc).tolist():
            row = rows[tokens[batch.tok[e]]]
            i = 2 * int(k_e[e]) + 2
            if len(row) <= i:
                row.extend([0.0] * (i + 1 - len(row)))
            n = row[i] = row[i] + float(batch.val[e]) * float(classes.w[batch.ev[e]])
            if cache:
                row[i - 1] = log1p(n * inv_alpha)
        codes.add([tokens[u] for u in order])
        learner._batch_counts_valid = False  # (sums of real weights: rebuilt from the rows)
    add_class_weights(learner, ys, ws, totals)
    return result


def _write_counts(
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


# ---------------------------------------------------------------------- complement
def complement_kernel(
    learner: ComplementNB,
    codes: TokenCodes,
    xs: Sequence[Mapping[Any, Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
) -> KernelResult | None:
    """Predict then learn a batch with :class:`~stream_nb.naive_bayes.ComplementNB`'s
    formulas (``norm`` either way; see the module docstring), or ``None``."""
    batch = TokenBatch.of(learner, codes, xs, ys, ws, _COUNT_TYPES)
    if batch is None:
        return None
    classes = batch.classes
    alpha = learner.alpha / learner._scale
    k_e = batch.event_class()
    inc = np.where((k_e >= 0) & (batch.val > 0), batch.val * classes.w.take(batch.ev), 0.0)
    known, added, order = batch.known(batch.first_learned(inc > 0))
    vocabulary = len(learner._counts) + added  # V before each event
    c0 = batch.c0
    counts = batch.prefix(c0, inc)  # K × nnz: N_{j,w} before each entry
    n_w = row_sum(counts.T)  # N_w
    shifted = n_w + alpha
    x_known = np.where(known, batch.val, 0.0)
    big_x = batch.per_event(x_known)
    base = batch.per_event(x_known * np.log(shifted))
    # d_{j,w} = log((N_w + α) / (C_{j,w} + α)), 0 where N_{j,w} = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(counts > 0, np.log(shifted[None, :] / (n_w[None, :] - counts + alpha)), 0.0)
    acc = batch.per_event_classes(x_known[None, :] * d)
    totals = count_totals(batch, xs)
    class_tokens = learner._class_extra["class_tokens"]
    t_y = class_tokens_prefix(classes, [class_tokens[y] for y in classes.labels], totals)
    total = row_sum(t_y.T)  # T before each event
    log_den = np.log(total[None, :] - t_y + alpha * vocabulary[None, :])
    jll = acc - base[None, :] + big_x[None, :] * log_den
    if learner.norm:
        h, sum_d, h_end, d_end, updates = _complement_sums(
            learner, batch, counts, n_w, d, inc, k_e, alpha
        )
        abs_sum = vocabulary[None, :] * log_den - (h[None, :] - sum_d)
        if not (abs_sum != 0).all():
            return None
        jll = jll / abs_sum
    jll = np.where(vocabulary[None, :] <= 1, 0.0, jll)
    result = normalise(jll, classes.labels)
    if result is None:
        return None
    # --- the statistics after the batch
    pairs = learned_counts(batch, c0, inc, k_e)
    _write_counts(learner, codes, batch, order, pairs, inc, k_e)
    add_class_weights(learner, ys, ws, totals)
    if learner.norm:
        learner._batch_sums(h_end, d_end, updates)
    return result


def _complement_sums(
    learner: ComplementNB,
    batch: TokenBatch,
    counts: np.ndarray,
    n_w: np.ndarray,
    d: np.ndarray,
    inc: np.ndarray,
    k_e: np.ndarray,
    alpha: float,
) -> tuple[np.ndarray, np.ndarray, float, list[float], int]:
    """ComplementNB's ``H = Σ_w log(N_w + α)`` and ``D_j = Σ_{w: N_{j,w}>0} d_{j,w}``
    before each event (``B`` and ``K × B``), after the batch, and the number of
    terms updated: each learned entry changes its token's terms (``d``: the
    entries' ``d_{j,w}`` before them)."""
    if learner._sums_alpha != alpha:
        learner._refresh_sums()
    n_classes = counts.shape[0]
    d0 = np.zeros(n_classes)
    d0[: len(learner._sum_d)] = learner._sum_d[:n_classes]
    idx = np.flatnonzero(inc)
    step = inc.take(idx)
    before = n_w.take(idx)
    after = before + step
    # H: log(N_w + α) grows by log1p(step / (N_w + α)); a new token adds log(step + α)
    with np.errstate(divide="ignore"):
        dh = np.where(before > 0, np.log1p(step / (before + alpha)), np.log(step + alpha))
    # D_j: the token's term for class j after the entry, minus before
    counts_after = counts.take(idx, axis=1)
    counts_after[k_e.take(idx), np.arange(len(idx))] += step
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(
            counts_after > 0,
            np.log((after + alpha)[None, :] / (after[None, :] - counts_after + alpha)),
            0.0,
        )
    dd = term - d.take(idx, axis=1)
    ev = batch.ev.take(idx)
    dh_event = np.bincount(ev, weights=dh, minlength=batch.b)
    dd_event = np.stack([np.bincount(ev, weights=row, minlength=batch.b) for row in dd])
    h0 = learner._sum_log_total
    h = h0 + exclusive_cumsum(dh_event)
    sum_d = d0[:, None] + exclusive_cumsum(dd_event, axis=-1)
    h_end = float(h[-1] + dh_event[-1])
    d_end: list[float] = (sum_d[:, -1] + dd_event[:, -1]).tolist()
    updates = int(np.where(before > 0, n_classes, 1).sum())
    return h, sum_d, h_end, d_end, updates


# ---------------------------------------------------------------------- Bernoulli
def bernoulli_kernel(
    learner: BernoulliNB,
    codes: TokenCodes,
    xs: Sequence[Mapping[Any, Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
) -> KernelResult | None:
    """Predict then learn a batch with :class:`~stream_nb.naive_bayes.BernoulliNB`'s
    formulas, or ``None``; integral weights and counts only (the aggregates group
    the words by count, see :func:`_bernoulli_aggregates`)."""
    if learner.class_prior is not None:
        return None
    batch = TokenBatch.of(learner, codes, xs, ys, ws, _BINARY_TYPES, counts=False)
    if batch is None:
        return None
    classes = batch.classes
    labels = classes.labels
    n0 = np.array([learner._class_weight[y] for y in labels])
    if not classes.unit and not _integral(classes.w):
        return None
    val = batch.val
    threshold = learner.binarize
    if threshold is None:
        if not ((val == 0.0) | (val == 1.0)).all():
            return None  # a value other than 0/1: rejected per event
        on = val == 1.0
    else:
        on = val > threshold
    alpha = learner.alpha / learner._scale
    if alpha != learner._agg_alpha:  # (as a prediction would)
        learner._agg = [None] * len(learner._agg)
        learner._agg_alpha = alpha
    k_e = batch.event_class()
    labelled = k_e >= 0
    inc = np.where(labelled & on, classes.w.take(batch.ev), 0.0)
    known, added, order = batch.known(batch.first_learned(labelled))
    vocabulary = len(learner._counts) + added
    c0 = batch.c0
    if not _integral(c0.reshape(-1), n0, classes.w):
        return None
    counts = batch.prefix(c0, inc)  # K × nnz: events with the word on, before each entry
    n_y = class_prefix(classes, n0.tolist())  # K × B
    n_e = n_y.take(batch.ev, axis=1)
    on_known = on & known
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.log((counts + alpha) * ((n_e + alpha) / alpha) / (n_e - counts + alpha))
    acc = batch.per_event_classes(np.where(on_known[None, :] & (counts > 0), terms, 0.0))
    if not np.isfinite(acc).all():
        return None  # (a product past the double range: the per-event path splits it)
    n_on = batch.per_event(on_known.astype(np.float64))
    first_on = np.zeros(len(batch.ev))
    learned = np.flatnonzero(inc)
    rows_k = k_e.take(learned)
    newly_on = counts[rows_k, learned] == 0
    first_on[learned[newly_on]] = 1.0
    on_words = np.array(learner._on_words, dtype=np.float64)[:, None] + exclusive_cumsum(
        np.stack([batch.per_event(np.where(k_e == k, first_on, 0.0)) for k in range(len(labels))]),
        axis=-1,
    )
    aggregates = _bernoulli_aggregates(learner, batch, counts, inc, k_e, n_y, n0, alpha)
    if aggregates is None:
        return None
    shifted = n_y + alpha
    jll = (
        log_prior(learner, classes, alpha)
        + aggregates
        - (vocabulary[None, :] - on_words) * np.log1p(alpha / shifted)
        + n_on[None, :] * np.log(alpha / shifted)
        + acc
    )
    result = normalise(jll, labels)
    if result is None:
        return None
    # --- the statistics after the batch
    pairs = learned_counts(batch, c0, inc, k_e)
    if pairs is None:
        return None
    hist = learner._hist
    on_count = learner._on_words
    start = c0.tolist()
    for u, k, n in zip(*pairs):  # noqa: B905 (same length)
        h = hist[k]
        old = start[k][u]
        if old:
            m = h[old] - 1
            if m:
                h[old] = m
            else:
                del h[old]
        else:
            on_count[k] += 1
        h[n] = h.get(n, 0) + 1
    _write_counts(learner, codes, batch, order, pairs, inc, k_e)
    agg = learner._agg
    for k in set(classes.k.tolist()):
        agg[k] = None
    add_class_weights(learner, ys, ws, None)
    return result


def _bernoulli_aggregates(
    learner: BernoulliNB,
    batch: TokenBatch,
    counts: np.ndarray,
    inc: np.ndarray,
    k_e: np.ndarray,
    n_y: np.ndarray,
    n0: np.ndarray,
    alpha: float,
) -> np.ndarray | None:
    """``K × B``: BernoulliNB's ``A_y = Σ_{w: N_{y,w}>0} log((N_y − N_{y,w} + α) / (N_y + 2α))``
    before each event, or ``None`` past :data:`_MAX_AGGREGATE_CELLS`.

    ``A_y`` changes only when class ``y`` learns: its *versions* ``j = 0..m``
    are the model after each of the batch's ``m`` class-``y`` events, with
    ``N_y = N₀ + δ_j``. Every word is a run of versions at a constant count
    ``c`` (a word untouched by the batch: all of them; a word on in class-``y``
    events: one run per count it takes), so ``A_y(j)`` is a sum of terms
    ``f(c, δ_j) = log((a + δ_j) / (b + δ_j))`` with ``a = N₀ − c + α`` and
    ``b = N₀ + 2α``. Where ``a ≥ δ_m / ρ`` the term is its series in ``δ``::

        f = log(a/b) + Σ_{p≥1} (−1)^{p+1} (δ/s)^p / p · ((s/a)^p − (s/b)^p)

    (``s = δ_m``; :data:`_SERIES_TERMS` terms leave less than 1e-19 per word), so
    each run adds its ``1 + P`` coefficients to every version it spans (one
    cumulative sum over versions), and ``A_y(j)`` is one dot product per
    version. The few runs with a smaller ``a`` (words on in nearly every
    class-``y`` event) are summed term by term. Version 0 is the learner's own
    aggregate. Cost: O((runs + versions) × P + near terms), not O(vocabulary
    × versions).
    """
    classes = batch.classes
    b = batch.b
    out = np.empty((len(classes.labels), b))
    cells = 0
    powers = np.arange(1, _SERIES_TERMS + 1)
    signs = np.where(powers % 2 == 1, 1.0, -1.0) / powers
    for k in range(len(classes.labels)):
        a0 = learner._agg[k]
        if a0 is None:
            a0 = learner._aggregate(k, float(n0[k]), alpha)
        events = classes.rows[classes.k == k]
        m = len(events)
        if not m:
            out[k] = a0
            continue
        version = np.searchsorted(events, np.arange(b))  # class-k events before each event
        n_versions = n_y[k].take(events)  # N_y of versions 0..m-1
        n_versions = np.append(n_versions, n_versions[-1] + classes.w[events[-1]])
        start = float(n_versions[0])
        delta = n_versions - start
        # --- runs of the words on in class-k events of the batch: one per move c → c + w
        idx = np.flatnonzero((k_e == k) & (inc > 0))
        order = np.argsort(batch.tok.take(idx), kind="stable")
        idx = idx.take(order)
        tok = batch.tok.take(idx)
        old = counts[k].take(idx)
        new = old + inc.take(idx)
        after = version.take(batch.ev.take(idx)) + 1  # the first version showing the move
        first = np.ones(len(idx), dtype=bool)
        first[1:] = tok[1:] != tok[:-1]
        until = np.full(len(idx), m + 1, dtype=np.intp)
        until[:-1] = np.where(first[1:], m + 1, after[1:])
        initial = first & (old > 0)  # the word's run before its first move
        # --- the words the batch does not touch: the start histogram less the touched
        hist = learner._hist[k]
        keys = np.fromiter(hist.keys(), np.float64, len(hist))
        mult = np.fromiter(hist.values(), np.float64, len(hist))
        sorter = np.argsort(keys)
        keys, mult = keys.take(sorter), mult.take(sorter)
        touched, n_touched = np.unique(old[initial], return_counts=True)
        at = np.searchsorted(keys, touched)
        if len(touched) and (at.max() >= len(keys) or not (keys.take(at) == touched).all()):
            return None  # (the histogram does not hold the counts: not this batch)
        mult[at] -= n_touched
        kept = mult > 0
        c = np.concatenate((keys[kept], old[initial], new))
        mu = np.concatenate((mult[kept], np.ones(int(initial.sum()) + len(new))))
        v1 = np.concatenate((np.zeros(int(kept.sum()) + int(initial.sum()), dtype=np.intp), after))
        v2 = np.concatenate((np.full(int(kept.sum()), m + 1, dtype=np.intp), after[initial], until))
        # --- far runs: the series; near runs: term by term
        scale = float(delta[-1])
        a = (start - c) + alpha
        far = a >= scale / _SERIES_RATIO
        a_versions = np.zeros(m + 1)
        bb = start + 2.0 * alpha
        if far.any():
            af, muf = a[far], mu[far]
            log_ratio = np.log(((start - c[far]) + alpha) / bb)
            coefficients = np.empty((len(af), _SERIES_TERMS + 1))
            coefficients[:, 0] = muf * log_ratio
            r = scale / af
            term = muf.copy()
            for p in range(1, _SERIES_TERMS + 1):
                term *= r
                coefficients[:, p] = term * -np.expm1(p * log_ratio)
            # runs over every version add to all; the others from their first
            # version up to their last (a cumulative sum of steps)
            v1f, v2f = v1[far], v2[far]
            whole = (v1f == 0) & (v2f == m + 1)
            moments = np.empty((m + 1, _SERIES_TERMS + 1))
            moments[:] = coefficients[whole].sum(axis=0)
            part = np.flatnonzero(~whole)
            if len(part):
                starts, stops = v1f.take(part), v2f.take(part)
                for p in range(_SERIES_TERMS + 1):
                    column = coefficients[:, p].take(part)
                    steps = np.bincount(starts, column, m + 2) - np.bincount(stops, column, m + 2)
                    moments[:, p] += np.cumsum(steps[: m + 1])
            x = delta / scale
            series = (x[:, None] ** powers[None, :]) * signs[None, :]
            a_versions += moments[:, 0] + (moments[:, 1:] * series).sum(axis=1)
        near = ~far
        if near.any():
            lengths = v2[near] - v1[near]
            total = int(lengths.sum())
            cells += total
            if cells > _MAX_AGGREGATE_CELLS:
                return None
            offsets = np.cumsum(lengths) - lengths
            j = np.repeat(v1[near], lengths) + (np.arange(total) - np.repeat(offsets, lengths))
            n_j = n_versions.take(j)
            with np.errstate(divide="ignore", invalid="ignore"):
                terms = np.repeat(mu[near], lengths) * np.log(
                    ((n_j - np.repeat(c[near], lengths)) + alpha) / (n_j + 2.0 * alpha)
                )
            a_versions += np.bincount(j, weights=terms, minlength=m + 1)
        a_versions[0] = a0
        out[k] = a_versions.take(version)
    return out
