"""Writing a checkpoint: the engine's snapshot, validated as a restore reads it, then written.

:meth:`Engine.checkpoint <stream_nb.engine.Engine.checkpoint>` calls
:func:`write_snapshot`; :mod:`stream_nb.engine.restore` reads what it writes and
:mod:`stream_nb.engine.checkpoint` holds the files.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from stream_nb._exceptions import CheckpointError
from stream_nb.engine.checkpoint import Checkpointer, decode_snapshot, encode_snapshot
from stream_nb.engine.restore import validated
from stream_nb.engine.settings import _STATE_ERRORS, ENGINE_STATE_FORMAT

if TYPE_CHECKING:
    from stream_nb.engine.engine import Engine

__all__ = ["snapshot_body", "write_snapshot"]


def snapshot_body(
    engine: Engine, *, columns: list[int], extra: Mapping[str, Callable[[], Any]]
) -> dict[str, Any]:
    """The engine's state as a snapshot body (JSON-able): the model, the positions of the
    source and sinks, the evaluator, the delayed-label cache, the counters, the column
    path's state ``columns`` and ``provide()`` of every ``extra`` provider."""
    return {
        "format": ENGINE_STATE_FORMAT,
        "created": time.time(),
        "learner": engine.learner.to_state(),
        "source": engine.source.position(),
        "sink": engine.sink.position(),
        "dead_letters": None if engine.dead_letters is None else engine.dead_letters.position(),
        "evaluator": None if engine.evaluator is None else engine.evaluator.to_state(),
        "delayed": None if engine.delayed is None else engine.delayed.to_state(),
        "counters": {
            "consumed": engine.consumed,
            "predictions": engine.predictions,
            "outcomes": engine.outcomes,
            "rejected": engine.rejected,
            # the column path's state and the class count that sizes batches: a
            # restored engine cuts and routes batches as an uninterrupted one
            "columns": columns,
            "classes": engine.output.classes,
        },
        "extra": {name: provide() for name, provide in extra.items()},
    }


def write_snapshot(
    engine: Engine,
    checkpointer: Checkpointer,
    *,
    columns: list[int],
    extra: Mapping[str, Callable[[], Any]],
    kept: str | None,
) -> str:
    """Flush the engine's sinks, write its snapshot, then ``source.commit``; the snapshot id.

    ``columns`` and ``extra`` go to :func:`snapshot_body`; ``kept`` is the
    newest snapshot so far (named in the message when this one is refused).
    Every attempt is counted in the engine's metrics, a failure under the
    stage that failed: ``sink``, ``invalid_state`` or ``io``.

    Raises
    ------
    CheckpointError
        If the snapshot would not restore (nothing is written).
    Exception
        Whatever flushing a sink or writing the file raised.
    """
    metrics = engine.metrics
    start = time.perf_counter()
    stage = "sink"
    try:
        engine.sink.flush()
        if engine.dead_letters is not None:
            engine.dead_letters.flush()
        stage = "invalid_state"
        try:
            body = snapshot_body(engine, columns=columns, extra=extra)
            position = body["source"]
            data = encode_snapshot(body)
            del body  # (freed before a second copy of the model is built)
            validated(engine, "the new snapshot", decode_snapshot(data))
        except _STATE_ERRORS as exc:
            raise CheckpointError(
                f"refusing to write a snapshot that would not restore: {exc}; the newest "
                f"snapshot ({kept or 'none'}) is kept, and the events after it will be "
                "processed again at the next start"
            ) from exc
        stage = "io"
        snapshot_id = checkpointer.write_encoded(data)
    except Exception:
        if metrics is not None:
            metrics.record_checkpoint(
                result="failure", seconds=time.perf_counter() - start, reason=stage
            )
        raise
    engine.source.commit(position, snapshot_id)
    if metrics is not None:
        metrics.record_checkpoint(result="success", seconds=time.perf_counter() - start)
    return snapshot_id
