"""Pieces of prediction and dead-letter records: their encoding state, top-k,
true-label log-probabilities, reasons."""

from __future__ import annotations

import heapq
import operator
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from stream_nb._exceptions import InvalidEventError
from stream_nb.connectors.base import Record
from stream_nb.engine._json import dumps_exact
from stream_nb.engine.events import REASONS
from stream_nb.engine.settings import _OPT_NON_STR


class OutputState:
    """What every processing path learns about the prediction records it writes.

    One object per engine, shared by its paths; the hot loops bind
    :attr:`option` locally and call :meth:`widen` only when ``orjson``
    refuses a record.

    Attributes
    ----------
    option
        The ``orjson.dumps`` option of prediction records: ``0`` until a
        record holds a class label that is not a string as a log-probability
        key (or an integer beyond 64 bits), then ``OPT_NON_STR_KEYS`` for good.
    classes
        The number of classes in the newest prediction; the engine sizes
        its next batch by it (and checkpoints it).

    Examples
    --------
    >>> state = OutputState()
    >>> state.widen({"log_proba": {1: -0.5}}), state.option == _OPT_NON_STR
    (b'{"log_proba":{"1":-0.5}}', True)
    """

    __slots__ = ("classes", "option")

    def __init__(self) -> None:
        self.option = 0
        self.classes = 0

    def widen(self, record: Any) -> bytes:
        """``record`` encoded after ``orjson.dumps`` refused it with :attr:`option`:
        switch to ``OPT_NON_STR_KEYS`` for good and encode it exactly (integers
        beyond 64 bits as their digits)."""
        self.option = _OPT_NON_STR
        return dumps_exact(record, option=_OPT_NON_STR)


def _top(log_proba: dict[Hashable, float], k: int) -> dict[Hashable, float]:
    """The ``k`` most probable classes, most probable first (ties: the earlier class)."""
    if len(log_proba) <= k:
        return log_proba
    # nlargest == sorted(..., reverse=True)[:k], stable, in O(classes)
    return dict(heapq.nlargest(k, log_proba.items(), key=operator.itemgetter(1)))


def _top_rows(labels: list[Hashable], log_proba: np.ndarray, k: int) -> list[dict[Hashable, float]]:
    """:func:`_top` of every row's ``dict(zip(labels, row))``, without building those dicts."""
    n, c = log_proba.shape
    kth = np.partition(log_proba, c - k, axis=1)[:, c - k]  # each row's k-th largest
    rows, columns = np.nonzero(log_proba >= kth[:, None])  # row-major: columns ascend
    values = log_proba[rows, columns].tolist()
    out: list[dict[Hashable, float]] = []
    starts = np.searchsorted(rows, np.arange(n + 1)).tolist()
    columns_list = columns.tolist()
    get = operator.itemgetter(1)
    for i in range(n):
        a, b = starts[i], starts[i + 1]
        pairs = [(labels[j], v) for j, v in zip(columns_list[a:b], values[a:b])]  # noqa: B905
        out.append(dict(heapq.nlargest(k, pairs, key=get)))
    return out


def _true_label_log_probas(
    labels: list[Hashable], log_proba: np.ndarray, ys: Sequence[Hashable]
) -> list[dict[Hashable, float]]:
    """``{y: log P(y)}`` of each event's true label ``y`` (``{}`` for a label not in
    ``labels``): what the prequential evaluator reads of ``dict(zip(labels, row))``."""
    column_of = {label: j for j, label in enumerate(labels)}
    columns = [column_of.get(y, -1) for y in ys]
    values = log_proba[np.arange(len(ys)), columns].tolist()
    return [
        {y: v} if j >= 0 else {}
        for y, j, v in zip(ys, columns, values)  # noqa: B905 (same length)
    ]


def _last_timestamp(records: list[Record]) -> float | None:
    """The newest source timestamp of a batch (``None`` if the source has none)."""
    for record in reversed(records):
        if record.timestamp is not None:
            return record.timestamp
    return None


def _reason(exc: Exception, default: str) -> str:
    """The bounded reason code of a learner error (``default`` for TypeError/ValueError)."""
    if isinstance(exc, InvalidEventError):
        return exc.reason if exc.reason in REASONS else "invalid_event"
    return default
