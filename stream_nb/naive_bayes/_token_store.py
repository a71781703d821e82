"""The token learners' counts as one ``K × V`` array, next to their per-token rows.

A token learner (:mod:`~stream_nb.naive_bayes._text`) keeps two layouts of the
same counts: the per-token rows of its per-event path (``_counts``: one short
list per token, the layout ``learn_one`` and the predict methods read), and, once
a batch kernel ran, a :class:`TokenStore`: every token of the vocabulary has an
integer code and class ``k``'s count of the token with code ``c`` is
``counts[k, c]``. Either layout may lag behind the other, never both:

* a batch kernel reads and writes the array only, and marks the codes it
  changed *dirty*: their rows are stale (the learner's ``_rows_stale``) until
  :meth:`TokenStore.take_dirty` hands their columns back to the learner, which
  rebuilds those rows (with its derived caches) before anything else reads a
  row: a stream of kernel batches never writes a row;
* anything else that changes the counts (``learn_one``, a merge, a rescale, a
  load) changes the rows, with the rows fresh, and clears the learner's
  ``_batch_counts_valid``; the next kernel batch rebuilds the array from the
  rows (:meth:`TokenStore.sync`).

The vocabulary itself (which tokens, in which order) is always the rows' keys:
a kernel adds the tokens it learns first to the rows as it adds them to the
array (their rows stale until rebuilt).

Memory: the array holds ``K × V`` float64 cells, dense. Past
:data:`MAX_CELLS` (many classes times a large vocabulary) no array is kept and
the kernels decline every batch: the rows, whose size is the number of counts
actually stored, are the only layout.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

__all__ = ["MAX_BATCH_CELLS", "MAX_CELLS", "Codes", "TokenStore", "count_matrix", "trimmed_rows"]

#: Most cells (classes × tokens) of a store's array: 2**24 float64, 128 MiB. Past it
#: the batch kernels decline (the per-event rows hold the counts alone).
MAX_CELLS = 1 << 24

#: Most cells (classes × entries) of a batch's arrays: 2**22 float64, 32 MiB each.
MAX_BATCH_CELLS = 1 << 22


class Codes(dict[Hashable, int]):
    """Token -> code, with ``-1`` for a token without one, so that a batch's tokens are
    coded by one C-level ``map`` of ``__getitem__`` (a missing key calls
    :meth:`__missing__`, which notes it in :attr:`missing`, in order).

    Examples
    --------
    >>> codes = Codes(a=0, b=1)
    >>> list(map(codes.__getitem__, ["a", "z", "b", "y"])), codes.missing
    ([0, -1, 1, -1], ['z', 'y'])
    """

    __slots__ = ("missing",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The keys looked up and not found since this list was last replaced.
        self.missing: list[Hashable] = []

    def __missing__(self, key: Hashable) -> int:
        self.missing.append(key)
        return -1


class TokenStore:
    """Codes of the vocabulary's tokens and their counts as one ``K × capacity`` array.

    Columns past :attr:`n_codes` are zero (room for the tokens a batch adds);
    ``dirty[c]`` marks a code whose row in the learner is stale.

    Parameters
    ----------
    offset, stride
        Where a learner's row holds class ``k``'s count: at ``offset + stride × k``.

    Examples
    --------
    >>> store = TokenStore(0, 1)
    >>> store.sync({"a": [1.0, 2.0], "b": [3.0]}, 2)
    >>> store.code, store.counts[:, : store.n_codes].tolist()
    ({'a': 0, 'b': 1}, [[1.0, 3.0], [2.0, 0.0]])
    """

    __slots__ = ("code", "counts", "dirty", "n_dirty", "offset", "stride", "tokens")

    def __init__(self, offset: int = 0, stride: int = 1) -> None:
        self.offset = offset
        self.stride = stride
        self.code = Codes()
        self.tokens: list[Hashable] = []
        self.counts = np.zeros((0, 0))
        self.dirty = np.zeros(0, dtype=bool)
        self.n_dirty = 0  # (an upper bound: codes marked since the last take_dirty)

    @property
    def n_codes(self) -> int:
        """Number of coded tokens (the vocabulary once synced)."""
        return len(self.tokens)

    def sync(self, rows: Mapping[Any, Sequence[float]], n_classes: int) -> None:
        """Rebuild the array from the learner's (fresh) rows, coding every token of
        the vocabulary in the rows' order; nothing is dirty afterwards."""
        self.code = Codes(zip(rows, range(len(rows)), strict=True))
        self.tokens = list(rows)
        n = len(self.tokens)
        counts = count_matrix(rows.values(), n_classes, (self.offset, self.stride), _capacity(n))
        self.counts = counts
        self.dirty = np.zeros(counts.shape[1], dtype=bool)
        self.n_dirty = 0

    def matrix(self) -> np.ndarray:
        """``K × n_codes``: the counts of the coded tokens (a view)."""
        return self.counts[:, : self.n_codes]

    def reserve(self, n_columns: int) -> None:
        """Make room for ``n_columns`` codes (new columns zero)."""
        capacity = self.counts.shape[1]
        if n_columns <= capacity:
            return
        size = _capacity(n_columns)
        grown = np.zeros((self.counts.shape[0], size))
        grown[:, :capacity] = self.counts
        self.counts = grown
        dirty = np.zeros(size, dtype=bool)
        dirty[:capacity] = self.dirty
        self.dirty = dirty

    def add(self, tokens: Sequence[Hashable]) -> None:
        """Code ``tokens`` (none of which has a code), in order."""
        n = len(self.tokens)
        self.code.update(zip(tokens, range(n, n + len(tokens)), strict=True))
        self.tokens.extend(tokens)

    def mark(self, codes: np.ndarray) -> None:
        """Mark ``codes`` dirty (their rows are stale)."""
        self.dirty[codes] = True
        self.n_dirty += len(codes)

    def take_dirty(self) -> tuple[list[Hashable], np.ndarray]:
        """The dirty tokens (in code order) and their columns (``K × n``); clears them."""
        if not self.n_dirty:
            return [], self.counts[:, :0]
        codes = np.flatnonzero(self.dirty)
        self.dirty[codes] = False
        self.n_dirty = 0
        tokens = self.tokens
        return [tokens[c] for c in codes.tolist()], self.counts.take(codes, axis=1)


def count_matrix(
    rows: Collection[Sequence[float]],
    n_classes: int,
    layout: tuple[int, int] = (0, 1),
    columns: int | None = None,
) -> np.ndarray:
    """``K × columns`` (default: one per row): the counts held in per-token ``rows``,
    class ``k``'s at ``offset + stride × k`` of a row (``layout``); missing counts 0.

    Examples
    --------
    >>> count_matrix([[1.0, 2.0], [3.0]], 2).tolist()
    [[1.0, 3.0], [2.0, 0.0]]
    """
    n = len(rows)
    counts = np.zeros((n_classes, n if columns is None else columns))
    if n:
        lists = list(rows)
        lengths = np.fromiter(map(len, lists), np.intp, n)
        total = int(lengths.sum())
        flat = np.fromiter(chain.from_iterable(lists), np.float64, total)
        within = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        index = np.repeat(np.arange(n), lengths)
        offset, stride = layout
        keep = np.flatnonzero((within >= offset) & ((within - offset) % stride == 0))
        k = (within.take(keep) - offset) // stride
        counts[k, index.take(keep)] = flat.take(keep)
    return counts


def trimmed_rows(columns: np.ndarray) -> list[list[float]]:
    """The ``K × n`` counts as ``n`` rows, each cut after its last non-zero count (a
    count row is only as long as the highest class that counted the token).

    Examples
    --------
    >>> trimmed_rows(np.array([[1.0, 0.0, 0.0], [2.0, 3.0, 0.0]]))
    [[1.0, 2.0], [0.0, 3.0], []]
    """
    n_classes = columns.shape[0]
    nonzero = columns != 0
    lengths = (n_classes - np.argmax(nonzero[::-1], axis=0)) * nonzero.any(axis=0)
    out: list[list[float]] = columns.T.tolist()
    for i in np.flatnonzero(lengths < n_classes).tolist():
        del out[i][lengths[i] :]
    return out


def _capacity(n: int) -> int:
    """Columns to allocate for ``n`` codes: some room to grow without a copy."""
    return max(64, n + (n >> 2))
