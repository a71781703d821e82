"""Restoring the engine from its newest valid snapshot, or refusing to start over silently."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stream_nb._exceptions import CheckpointError, CorruptCheckpointError
from stream_nb.base import STATE_VERSION as LEARNER_STATE_VERSION
from stream_nb.base import Learner
from stream_nb.connectors.base import Sink
from stream_nb.engine.checkpoint import check_version
from stream_nb.engine.delayed import DelayedLabelCache
from stream_nb.engine.settings import _STATE_ERRORS, ENGINE_STATE_FORMAT, _log
from stream_nb.evaluation import STATE_VERSION as EVALUATOR_VERSION

if TYPE_CHECKING:
    from stream_nb.engine.engine import Engine


@dataclass
class Restored:
    """A snapshot's content, validated and rebuilt, not applied yet (the engine
    applies it to itself, see :meth:`Engine.restore <stream_nb.engine.Engine.restore>`).

    ``columns`` is the column path's ``[misses, skip]``, ``classes`` the class
    count that sizes batches.
    """

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


def validated(engine: Engine, name: str, body: dict[str, Any]) -> Restored:
    """Rebuild a snapshot's content without applying it (``name`` prefixes messages).

    Raises
    ------
    CorruptCheckpointError
        If the snapshot is invalid (any part fails its validation).
    NewerSnapshotError
        If a newer stream-nb wrote it (its learner or evaluator state
        has a higher version): that is not damage, so it is not skipped.
    CheckpointError
        If it is valid but belongs to another learner class.
    """
    found = body.get("format")
    if found != ENGINE_STATE_FORMAT:
        raise CorruptCheckpointError(
            f"{name}: engine state format {found!r}, expected {ENGINE_STATE_FORMAT!r}"
        )
    for key in ("learner", "source"):
        if key not in body:
            raise CorruptCheckpointError(f"{name}: no {key!r} key")
    for key in ("source", "sink", "dead_letters"):
        if body.get(key) is not None and not isinstance(body[key], dict):
            raise CorruptCheckpointError(
                f"{name}: {key} position must be an object or null, got {body[key]!r:.80}"
            )
    versions = (("learner", LEARNER_STATE_VERSION), ("evaluator", EVALUATOR_VERSION))
    for part, supported in versions:
        state = body.get(part)
        if isinstance(state, dict):
            check_version(name, f"{part} state", state.get("version"), supported)
    try:
        learner = Learner.from_state(body["learner"])
    except _STATE_ERRORS as exc:
        raise CorruptCheckpointError(f"{name}: invalid learner state: {exc}") from exc
    if type(learner) is not type(engine.learner):
        raise CheckpointError(
            f"{name} holds a {type(learner).__name__}, but the engine runs a "
            f"{type(engine.learner).__name__}; use another --checkpoint-dir or the same --model"
        )
    evaluator = engine.evaluator
    if evaluator is not None and body.get("evaluator") is not None:
        try:
            evaluator = type(evaluator).from_state(body["evaluator"])
        except _STATE_ERRORS as exc:
            raise CorruptCheckpointError(f"{name}: invalid evaluator state: {exc}") from exc
    delayed = engine.delayed
    if delayed is not None and body.get("delayed") is not None:
        try:
            delayed = delayed.loaded(body["delayed"])
        except _STATE_ERRORS as exc:
            raise CorruptCheckpointError(f"{name}: invalid delayed-label cache: {exc}") from exc
    counters = body.get("counters")
    if counters is None:
        counters = {}
    if not isinstance(counters, dict):
        raise CorruptCheckpointError(f"{name}: counters must be an object")
    columns = counters.get("columns", [0, 0])
    if not isinstance(columns, list) or len(columns) != 2:
        raise CorruptCheckpointError(f"{name}: counters.columns must be [misses, skip]")
    return Restored(
        learner=learner,
        evaluator=evaluator,
        delayed=delayed,
        consumed=_count(counters.get("consumed", 0), f"{name}: counters.consumed"),
        predictions=_count(counters.get("predictions", 0), f"{name}: counters.predictions"),
        outcomes=_counts(counters.get("outcomes"), f"{name}: counters.outcomes"),
        rejected=_counts(counters.get("rejected"), f"{name}: counters.rejected"),
        columns=(
            _count(columns[0], f"{name}: counters.columns[0]"),
            _count(columns[1], f"{name}: counters.columns[1]"),
        ),
        classes=_count(counters.get("classes", 0), f"{name}: counters.classes"),
    )


def newest_valid(engine: Engine) -> tuple[str, dict[str, Any], Restored] | None:
    """The newest valid snapshot's id, body and content, with the invalid newer ones
    moved aside; ``None`` when there is none, after :func:`start_over` accepted a new
    model (see :meth:`Engine.restore <stream_nb.engine.Engine.restore>`)."""
    checkpointer = engine.checkpointer
    if checkpointer is None:
        return None
    checkpointer.clean_temporary()
    invalid: list[tuple[Path, str]] = []
    found: tuple[str, dict[str, Any], Restored] | None = None
    for snapshot_id, path in checkpointer.snapshots():
        try:
            body = checkpointer.read(path)
            found = (snapshot_id, body, validated(engine, path.name, body))
        except CorruptCheckpointError as exc:
            _log.warning("skipping invalid snapshot %s", exc)
            invalid.append((path, str(exc)))
            continue
        break
    if found is None:
        start_over(engine, invalid)
        return None
    for path, reason in invalid:
        checkpointer.reject(path, reason)
    if invalid:
        _log.warning(
            "restoring the older snapshot %s: %d newer one(s) were invalid",
            found[0],
            len(invalid),
        )
    return found


def rewind(engine: Engine, body: dict[str, Any]) -> None:
    """Seek the source (when seekable) and truncate the sinks back to a snapshot's positions."""
    if body.get("source") is not None and engine.source.seekable:
        engine.source.seek(body["source"])
    if body.get("sink") is not None:
        engine.sink.truncate(body["sink"])
    if engine.dead_letters is not None and body.get("dead_letters") is not None:
        engine.dead_letters.truncate(body["dead_letters"])


def snapshot_time(body: dict[str, Any]) -> float | None:
    """When a snapshot was written (its ``created`` Unix time), or ``None`` when it does
    not say (it is informational: a snapshot is never rejected for it).

    Examples
    --------
    >>> snapshot_time({"created": 1700000000.25}), snapshot_time({"created": "yesterday"})
    (1700000000.25, None)
    """
    created = body.get("created")
    if isinstance(created, bool) or not isinstance(created, (int, float)):
        return None
    if not (created > 0 and math.isfinite(created)):
        return None
    return float(created)


def start_over(engine: Engine, invalid: list[tuple[Path, str]]) -> None:
    """No valid snapshot: refuse, or (``reset_state``) clear what a new model replaces."""
    assert engine.checkpointer is not None
    directory = str(engine.checkpointer.directory)
    sinks = [sink for sink in (engine.sink, engine.dead_letters) if sink is not None]
    outputs = [found for sink in sinks if (found := _existing_output(sink)) is not None]
    if not invalid and not outputs:
        return  # a first start: nothing to lose
    if not engine.reset_state:
        if invalid:
            names = ", ".join(path.name for path, _ in invalid)
            what = f"{len(invalid)} snapshot(s) in {directory!r}, none valid ({names}; "
            what += f"newest: {invalid[0][1]})"
        else:
            what = f"no snapshot in {directory!r}, but the output already holds records"
        if outputs:
            what += f"; existing output: {', '.join(outputs)}"
        raise CheckpointError(
            f"refusing to start a new model: {what}. Starting over would re-read the "
            "input and duplicate or lose output; fix or restore the checkpoint directory, "
            "or pass --reset-state (STREAM_NB_RESET_STATE=1) to start a new model: "
            "invalid snapshots are moved aside and the output files are truncated"
        )
    for path, reason in invalid:
        engine.checkpointer.reject(path, reason)
    for sink in sinks:
        found = _existing_output(sink)
        if found is not None:
            _log.warning("--reset-state: truncating %s", found)
            sink.discard()
    _log.warning(
        "--reset-state: starting a new model in %s (%d invalid snapshot(s) moved aside)",
        directory,
        len(invalid),
    )
