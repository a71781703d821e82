"""One engine run in memory, for comparing the engine's processing paths.

A learner with a batch kernel (columns or rows) must give the engine's fast path the
same prediction records, dead letters, model and evaluation as its general path
(``column_path=False``); :func:`run_engine` runs one of them on JSON lines and keeps
everything such a comparison needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from stream_nb.base import Learner
from stream_nb.connectors.memory import ListSource, MemorySink
from stream_nb.engine import Engine, RunSummary
from stream_nb.evaluation import PrequentialEvaluator

__all__ = ["EngineRun", "run_engine"]


@dataclass(frozen=True)
class EngineRun:
    """What one :func:`run_engine` produced; two runs compare equal when they wrote the
    same bytes and ended with the same model, evaluation and outcomes."""

    #: Prediction records, as written.
    records: list[bytes]
    #: Dead letters, as written.
    dead_letters: list[bytes]
    #: The learner's state after the run.
    state: dict[str, Any]
    #: The prequential evaluator's report.
    report: dict[str, Any]
    #: The engine's outcome counts (``{"learned": n, ...}``).
    outcomes: dict[str, int]
    #: The engine's whole summary (not compared: it holds the run's duration).
    summary: RunSummary = field(compare=False)


def run_engine(
    learner: Learner,
    lines: Sequence[bytes],
    *,
    column_path: bool,
    batch_size: int = 100,
    window: int = 50,
    **options: Any,
) -> EngineRun:
    """Run ``learner`` over ``lines`` (JSON events) through an in-memory engine.

    Parameters
    ----------
    learner
        The learner, trained further by the run.
    lines
        One JSON event per item.
    column_path
        Whether the engine may use the learner's batch kernels (``False``: the
        general path, one event at a time through the learner's protocol).
    batch_size, window
        The engine's batch size and the evaluator's window.
    **options
        Further :class:`~stream_nb.engine.Engine` options (a decoder, an id field …).

    Examples
    --------
    >>> import orjson
    >>> from stream_nb import CategoricalNB
    >>> lines = [orjson.dumps({"sky": s, "y": s == "sun"}) for s in ["sun", "rain"] * 50]
    >>> fast = run_engine(CategoricalNB(), lines, column_path=True)
    >>> slow = run_engine(CategoricalNB(), lines, column_path=False)
    >>> fast == slow, len(fast.records), fast.summary.outcomes
    (True, 100, {'learned': 100})
    """
    sink, dead = MemorySink(), MemorySink()
    evaluator = PrequentialEvaluator(window=window)
    engine = Engine(
        learner,
        ListSource(list(lines)),
        sink,
        dead_letters=dead,
        evaluator=evaluator,
        batch_size=batch_size,
        column_path=column_path,
        **options,
    )
    summary = engine.run()
    return EngineRun(
        sink.values(),
        dead.values(),
        learner.to_state(),
        evaluator.report(),
        dict(summary.outcomes),
        summary,
    )
