"""The streaming engine: event decoding, the prequential loop, delayed labels, checkpoints.

See :mod:`stream_nb.engine.engine` for the loop and ``docs/engine.md`` for
the design.
"""

from __future__ import annotations

from stream_nb.engine.checkpoint import Checkpointer, read_snapshot
from stream_nb.engine.delayed import DelayedLabelCache
from stream_nb.engine.engine import Engine
from stream_nb.engine.events import REASONS, Event, EventDecoder
from stream_nb.engine.explain import explain
from stream_nb.engine.runtime import abandon, abandoned, stop_watchdog, tune_gc, tune_malloc
from stream_nb.engine.settings import ErrorPolicy, RunSummary

__all__ = [
    "REASONS",
    "Checkpointer",
    "DelayedLabelCache",
    "Engine",
    "ErrorPolicy",
    "Event",
    "EventDecoder",
    "RunSummary",
    "abandon",
    "abandoned",
    "explain",
    "read_snapshot",
    "stop_watchdog",
    "tune_gc",
    "tune_malloc",
]
