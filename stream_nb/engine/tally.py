"""The bookkeeping the processing paths share: a batch's tally, its queued evaluations,
and the handling of label-only events."""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stream_nb._exceptions import InvalidEventError
from stream_nb.connectors.base import Record
from stream_nb.engine.records import _reason

if TYPE_CHECKING:
    from stream_nb.engine.engine import Engine


@dataclass(slots=True)
class BatchTally:
    """What one processed batch did, for the engine's counters and metrics.

    Each path counts in fast locals while it runs and fills one tally at the
    end (label-only events and rejections count here directly: they are rare).
    :meth:`Engine.finish_batch <stream_nb.engine.Engine.finish_batch>` adds it
    to the run's totals.

    Attributes
    ----------
    consumed
        Records the batch took from the source.
    batch_start
        ``time.perf_counter()`` when the batch began.
    last_timestamp
        Timestamp of the batch's last record, if the source gives one.
    predicted, only, learned, delayed, matched, unmatched, rejected, blank
        Prediction records emitted, and the events of each outcome: predicted
        only, learned, waiting for a delayed label, label matched, label
        unmatched, rejected (dead-lettered), blank line.
    stage_seconds
        Seconds per stage (``decode``, ``predict``, ``emit``, ``evaluate``, ``learn``).
    latencies
        Sampled per-event latencies, in seconds.

    Examples
    --------
    >>> tally = BatchTally(consumed=3, batch_start=0.0, learned=2, blank=1)
    >>> tally.outcomes("rejected")
    {'learned': 2, 'blank': 1}
    """

    consumed: int
    batch_start: float
    last_timestamp: float | None = None
    predicted: int = 0
    only: int = 0
    learned: int = 0
    delayed: int = 0
    matched: int = 0
    unmatched: int = 0
    rejected: int = 0
    blank: int = 0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    latencies: Iterable[float] = ()

    def outcomes(self, rejected_outcome: str) -> dict[str, int]:
        """The non-zero outcome counts, rejections under ``rejected_outcome``."""
        every = {
            "learned": self.learned,
            "predicted": self.only,
            "delayed": self.delayed,
            "label_matched": self.matched,
            "label_unmatched": self.unmatched,
            rejected_outcome: self.rejected,
            "blank": self.blank,
        }
        return {k: v for k, v in every.items() if v}


class EvaluationQueue:
    """A batch's evaluations, in event order, for the engine's evaluator.

    With an evaluator that has ``update_many`` they are queued (``true``,
    ``predicted``, ``log_proba``) and handed over once by :meth:`flush`;
    otherwise :meth:`add` calls ``update`` at once. The hot loops bind the
    lists and ``update`` locally; :meth:`add` serves the rarer events.
    """

    __slots__ = ("log_proba", "predicted", "true", "update", "update_many")

    def __init__(self, evaluator: Any) -> None:
        self.update = None if evaluator is None else evaluator.update
        self.update_many = getattr(evaluator, "update_many", None)
        self.true: list[Any] = []
        self.predicted: list[Any] = []
        self.log_proba: list[Any] = []

    def add(self, y: Hashable, y_pred: Hashable, log_proba: Any) -> None:
        """Queue (or score at once) one evaluation."""
        if self.update is None:
            return
        if self.update_many is not None:
            self.true.append(y)
            self.predicted.append(y_pred)
            self.log_proba.append(log_proba)
        else:
            self.update(y, y_pred, log_proba)

    def flush(self) -> float:
        """Hand the queued evaluations over; returns the seconds it took."""
        if not self.true:
            return 0.0
        start = time.perf_counter()
        self.update_many(self.true, self.predicted, self.log_proba)  # type: ignore[misc]
        return time.perf_counter() - start


def learn_label_only(
    engine: Engine, record: Record, y: Any, eid: Any, tally: BatchTally, queue: EvaluationQueue
) -> None:
    """A label-only event ``{id, y}``: score the earlier prediction and learn its features.

    Without delayed labels the event is rejected (``missing_features``); an id
    nothing waits for counts as unmatched; a learner that rejects the cached
    features dead-letters the event (``learn_error`` or the learner's reason).
    """
    delayed = engine.delayed
    pending = None if delayed is None else delayed.pop(eid)
    if pending is None:
        if delayed is None:
            tally.rejected += 1
            engine.reject(
                record,
                "missing_features",
                "label-only event but delayed labels are disabled; "
                "enable them with --delayed-labels",
            )
        else:
            tally.unmatched += 1
        return
    queue.add(y, pending.y_pred, pending.log_proba)
    try:
        engine.learner.learn_one(pending.x, y, pending.w)
    except (InvalidEventError, TypeError, ValueError) as exc:
        tally.rejected += 1
        engine.reject(record, _reason(exc, "learn_error"), str(exc))
        return
    tally.matched += 1
