"""The engine's error policy, run summary and tuning constants, shared by its modules."""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import orjson

from stream_nb._exceptions import ConfigError, StreamNBError
from stream_nb._state import STATE_ERRORS

_log = logging.getLogger("stream_nb.engine")


ENGINE_STATE_FORMAT = "stream-nb/engine"


_OPT_NON_STR = orjson.OPT_NON_STR_KEYS


_NEG_INF = float("-inf")


_exp = math.exp


_ln = math.log


#: Seconds between two model-size measurements (an O(model) walk) for metrics.
_MODEL_SIZE_EVERY = 5.0


#: Under backlog, seconds between two refreshes of the prequential metrics (a report
#: per batch would cost more than it tells); they are refreshed too whenever
#: the engine catches up with its source or it is idle, and at the end.
_EVALUATION_EVERY = 1.0


#: The column path's smallest batch (below it numpy's fixed costs dominate) and the
#: most batches it sits out after misses.
_COLUMNS_MIN_BATCH = 64


_COLUMNS_MAX_SKIP = 64


_SCALARS = frozenset((str, int, float, bool, type(None)))


_NUMBERS = frozenset((int, float))


#: Label types whose JSON text is fixed by the class they equal (see columns.block_text).
_TEMPLATE_TYPES = frozenset((int, str, bool))


_TEMPLATE_MAX_CLASSES = 64


#: Most events × classes in one batch: with many classes a batch holds fewer events,
#: so the per-batch arrays and dictionaries stay within a few MiB (up to 256 classes
#: a batch keeps its full size).
_MAX_BATCH_CELLS = 1 << 18


#: Above this many classes the column path hands the evaluator each event's true-label
#: log-probability only (all its metrics use), not the events × classes matrix.
_EVALUATOR_MATRIX_CLASSES = 64


#: Errors a malformed state can raise from a ``from_state`` that does not map them all
#: to ModelStateError; at restore each makes the snapshot invalid, never the daemon stop.
_STATE_ERRORS: tuple[type[Exception], ...] = (StreamNBError, *STATE_ERRORS)


def check_positive_int(name: str, value: object, *, optional: bool = False) -> None:
    """Raise :class:`~stream_nb.ConfigError` unless ``value`` is a positive ``int``
    (or ``None``, when ``optional``).

    Examples
    --------
    >>> check_positive_int("batch_size", 0)
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ConfigError: batch_size must be a positive integer, got 0
    """
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        expected = "a positive integer or None" if optional else "a positive integer"
        raise ConfigError(f"{name} must be {expected}, got {value!r}")


class ErrorPolicy(enum.Enum):
    """What happens to an event that cannot be used."""

    RAISE = "raise"  #: stop with InvalidEventError
    SKIP = "skip"  #: count it (per reason) and go on
    DEAD_LETTER = "dead_letter"  #: count it and write it to the dead-letter sink


@dataclass
class RunSummary:
    """What a :meth:`Engine.run` call did (counters are cumulative over restarts)."""

    consumed: int
    predictions: int
    learned: int
    outcomes: dict[str, int]
    rejected: dict[str, int]
    seconds: float
    report: dict[str, Any] | None = None
    restored_from: str | None = None
    last_snapshot: str | None = None
    delayed_pending: int = 0
    delayed_evicted: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data view (JSON-able)."""
        return {
            "consumed": self.consumed,
            "predictions": self.predictions,
            "learned": self.learned,
            "outcomes": dict(self.outcomes),
            "rejected": dict(self.rejected),
            "seconds": self.seconds,
            "report": self.report,
            "restored_from": self.restored_from,
            "last_snapshot": self.last_snapshot,
            "delayed_pending": self.delayed_pending,
            "delayed_evicted": self.delayed_evicted,
        }
