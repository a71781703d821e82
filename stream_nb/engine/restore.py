"""Restoring the engine from its newest valid snapshot, or refusing to start over silently."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stream_nb._exceptions import (
    CorruptCheckpointError,
)
from stream_nb.base import Learner
from stream_nb.connectors.base import Sink
from stream_nb.engine.delayed import DelayedLabelCache


@dataclass
class _Restored:
    """A snapshot's content, validated and rebuilt, not applied yet."""

    learner: Learner
    evaluator: Any
    delayed: DelayedLabelCache | None
    consumed: int
    predictions: int
    outcomes: dict[str, int]
    rejected: dict[str, int]
    columns: tuple[int, int]
    classes: int


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CorruptCheckpointError(f"{what} must be a non-negative integer, got {value!r}")
    count: int = value
    return count


def _counts(value: Any, what: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CorruptCheckpointError(f"{what} must be an object, got {type(value).__name__}")
    return {str(k): _count(v, f"{what}[{k!r}]") for k, v in value.items()}


def _existing_output(sink: Sink) -> str | None:
    """:meth:`Sink.existing_output`, ``None`` for a sink without it (duck-typed sinks)."""
    existing = getattr(sink, "existing_output", None)
    return None if existing is None else existing()
