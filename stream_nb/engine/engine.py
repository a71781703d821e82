"""The streaming loop: decode, predict, emit, learn, dead-letter, checkpoint.

Per event (prequential order)::

    event = decoder.decode(payload)            # bad input -> error policy
    jll   = learner joint log-likelihood(x)    # {} before anything was learned
    emit  {"id" | "position", "y_pred", "y_true"?, "log_proba", "n_learned", "explain"?}
    if labelled:   evaluator.update(y, y_pred, log_proba); learner.learn_one(x, y, w)
    elif delayed:  cache (x, w, y_pred, log_proba) under the event's id

A label-only event ``{"id": ..., "y": ...}`` (delayed labels) emits nothing:
it scores the prediction emitted earlier and learns the cached features.

Per batch (``batch_size`` records): metrics are recorded once, then a
checkpoint is written when ``checkpoint_every`` events or
``checkpoint_interval`` seconds have passed. A checkpoint flushes the sinks
first, so a snapshot never refers to output that is not durable; on restore
the sinks are truncated back to the snapshot's positions and the source seeks
to its position, so every event is learned exactly once and, for files,
every input line gets exactly one prediction record.

Restore never starts over silently: a snapshot that fails validation is
moved aside and the next older one is used; when none is valid, or when
there is no snapshot but the output already holds records, the engine
refuses to start unless ``reset_state`` says to start a new model. A
snapshot is validated as a restore would read it before it is written.
Batches hold at most ``_MAX_BATCH_CELLS`` events × classes, so per-batch
memory does not grow with the number of classes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from stream_nb._exceptions import (
    CheckpointError,
    ConfigError,
    CorruptCheckpointError,
    InvalidEventError,
)
from stream_nb.base import STATE_VERSION as LEARNER_STATE_VERSION
from stream_nb.base import Learner
from stream_nb.base import log_softmax_argmax as _log_softmax_argmax
from stream_nb.connectors.base import LineBlock, Record, Sink, Source
from stream_nb.engine._json import dumps_exact, is_wide
from stream_nb.engine.checkpoint import (
    Checkpointer,
    check_version,
    decode_snapshot,
    encode_snapshot,
)
from stream_nb.engine.delayed import DelayedLabelCache
from stream_nb.engine.events import EventDecoder, dead_letter_record
from stream_nb.engine.explain import explain as explain_event
from stream_nb.engine.parse import _columns, _parse_uniform
from stream_nb.engine.records import (
    _last_timestamp,
    _reason,
    _top,
    _top_rows,
    _true_label_log_probas,
)
from stream_nb.engine.restore import _count, _counts, _existing_output, _Restored
from stream_nb.engine.settings import (
    _COLUMNS_MAX_SKIP,
    _COLUMNS_MIN_BATCH,
    _EVALUATION_EVERY,
    _EVALUATOR_MATRIX_CLASSES,
    _MAX_BATCH_CELLS,
    _MODEL_SIZE_EVERY,
    _NUMBERS,
    _OPT_NON_STR,
    _SCALARS,
    _STATE_ERRORS,
    _TEMPLATE_MAX_CLASSES,
    _TEMPLATE_TYPES,
    ENGINE_STATE_FORMAT,
    ErrorPolicy,
    RunSummary,
    _log,
)
from stream_nb.evaluation import STATE_VERSION as EVALUATOR_VERSION


class Engine:
    """Run a learner over a source, prequentially, with dead letters and checkpoints.

    Parameters
    ----------
    learner
        Any :class:`~stream_nb.base.Learner`.
    source, sink
        Where records come from and where prediction records go.
    dead_letters
        Sink for rejected events (``None``: they are only counted and logged).
    decoder
        Event decoder (shape, field names, size limit).
    checkpointer
        Snapshots; ``None`` disables checkpointing.
    evaluator
        A :class:`stream_nb.evaluation.PrequentialEvaluator` (or anything with
        ``update``/``report``/``to_state``/``from_state``), or ``None``. Its
        ``log_proba`` arguments hold at least the true label's log-probability
        (with more than 64 classes, only that one).
    metrics
        A :class:`stream_nb.engine.telemetry.EngineMetrics`, or ``None``.
    error_policy
        See :class:`ErrorPolicy`.
    batch_size
        Records per batch (metrics and checkpoint checks run per batch).
    checkpoint_every, checkpoint_interval
        Checkpoint after this many consumed records and/or seconds.
    top_k
        Emit only the ``k`` most probable classes' log-probabilities (``None``: all).
    explain
        Add per-feature contributions (see :mod:`stream_nb.engine.explain`).
    loss_matrix
        ``loss_matrix[i][j]`` = cost of deciding ``i`` when the truth is ``j``;
        decisions then minimise the Bayes risk.
    delayed
        A :class:`DelayedLabelCache` to enable delayed labels.
    poll_timeout
        Seconds :meth:`Source.next_batch` may block (bounds shutdown latency).
    latency_every
        Measure one event in this many for the per-event latency histogram.
    reset_state
        Accept starting a new model when the checkpoint directory holds no
        valid snapshot although it holds snapshot files, or although the sinks
        already hold output: invalid snapshots are then moved aside
        (``*.rejected``) and the sinks' earlier output is truncated. Without
        it :meth:`restore` refuses. A valid snapshot is always restored.

    Examples
    --------
    >>> from stream_nb import CategoricalNB
    >>> from stream_nb.connectors.memory import ListSource, MemorySink
    >>> sink = MemorySink()
    >>> lines = [b'{"sky": "sun", "y": "play"}', b'{"sky": "sun"}', b'not json']
    >>> engine = Engine(CategoricalNB(), ListSource(lines), sink, dead_letters=MemorySink())
    >>> summary = engine.run()
    >>> [r["y_pred"] for r in sink.records()]
    [None, 'play']
    >>> summary.rejected
    {'invalid_json': 1}
    """

    def __init__(
        self,
        learner: Learner,
        source: Source,
        sink: Sink,
        *,
        dead_letters: Sink | None = None,
        decoder: EventDecoder | None = None,
        checkpointer: Checkpointer | None = None,
        evaluator: Any | None = None,
        metrics: Any | None = None,
        error_policy: ErrorPolicy = ErrorPolicy.DEAD_LETTER,
        batch_size: int = 512,
        checkpoint_every: int | None = None,
        checkpoint_interval: float | None = None,
        top_k: int | None = None,
        explain: bool = False,
        loss_matrix: Mapping[Hashable, Mapping[Hashable, float]] | None = None,
        delayed: DelayedLabelCache | None = None,
        poll_timeout: float = 0.2,
        latency_every: int = 64,
        reset_state: bool = False,
    ) -> None:
        if not isinstance(error_policy, ErrorPolicy):
            raise ConfigError(
                f"error_policy must be an ErrorPolicy, got {error_policy!r}; "
                "use ErrorPolicy('dead_letter') to convert a string"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        if checkpoint_every is not None and (
            isinstance(checkpoint_every, bool)
            or not isinstance(checkpoint_every, int)
            or checkpoint_every < 1
        ):
            raise ConfigError(
                f"checkpoint_every must be a positive integer or None, got {checkpoint_every!r}"
            )
        if checkpoint_interval is not None and not checkpoint_interval > 0:
            raise ConfigError(
                f"checkpoint_interval must be positive seconds or None, got {checkpoint_interval!r}"
            )
        if top_k is not None and (
            isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1
        ):
            raise ConfigError(f"top_k must be a positive integer or None, got {top_k!r}")
        if latency_every < 1:
            raise ConfigError(f"latency_every must be >= 1, got {latency_every!r}")
        self.learner = learner
        self.source = source
        self.sink = sink
        self.dead_letters = dead_letters
        self.decoder = decoder if decoder is not None else EventDecoder()
        self.checkpointer = checkpointer
        self.evaluator = evaluator
        self.metrics = metrics
        self.error_policy = error_policy
        self.batch_size = batch_size
        self.checkpoint_every = checkpoint_every
        self.checkpoint_interval = checkpoint_interval
        self.top_k = top_k
        self.explain = explain
        self.loss_matrix = loss_matrix
        self.delayed = delayed
        self.poll_timeout = poll_timeout
        self.latency_every = latency_every
        self.reset_state = reset_state
        self._decide: Callable[[dict[Hashable, float]], Hashable | None] | None = None
        if loss_matrix is not None:
            from stream_nb.evaluation import bayes_risk_decision

            matrix = loss_matrix
            self._decide = lambda lp: bayes_risk_decision(lp, matrix)
        # cumulative counters (checkpointed)
        self.consumed = 0
        self.predictions = 0
        self.outcomes: dict[str, int] = {}
        self.rejected: dict[str, int] = {}
        self._stop = False
        self._restored_from: str | None = None
        self._last_snapshot: str | None = None
        self._since_checkpoint = 0
        self._last_checkpoint_time = time.monotonic()
        self._extra_providers: dict[str, Callable[[], Any]] = {}
        self._extra_consumers: dict[str, Callable[[Any], None]] = {}
        self._batch_hooks: list[Callable[[Engine], None]] = []
        self._progress: Callable[[Engine], None] | None = None
        self._last_size_time = 0.0
        self._last_evaluation_time = 0.0
        self._reported_evicted = 0
        self._dump_option = 0  # becomes OPT_NON_STR_KEYS once a non-string label is met
        self._rejected_outcome = (
            "dead_letter" if error_policy is ErrorPolicy.DEAD_LETTER else "skipped"
        )
        # The column path (see _process_columns), unless decisions or checks need one
        # dictionary per event; _columns_wanted checks the learner batch by batch.
        self._columns_ok = loss_matrix is None and not self.decoder.nonnegative
        self._columns_skip = 0  # batches left before the column path is tried again
        self._label_keys: tuple[list[Hashable], list[Hashable]] | None = None
        self._line_template: (
            tuple[list[Hashable], bytes, list[bytes], dict[Hashable, int]] | None
        ) = None
        self._columns_misses = 0
        # classes in the newest prediction (sizes the next batch, see _MAX_BATCH_CELLS)
        self._classes = 0
        # monotonic time of the processing loop's last completed iteration (see progress_age)
        self._heartbeat = time.monotonic()

    # ------------------------------------------------------------------ hooks
    def add_extra_state(
        self, name: str, provider: Callable[[], Any], consumer: Callable[[Any], None]
    ) -> None:
        """Store ``provider()`` in every snapshot under ``extra[name]``; on restore pass it to
        ``consumer`` (e.g. a Kafka connector's model-sync offsets). Must be JSON-able."""
        self._extra_providers[name] = provider
        self._extra_consumers[name] = consumer

    def add_batch_hook(self, hook: Callable[[Engine], None]) -> None:
        """Call ``hook(engine)`` after every batch, before the checkpoint check (e.g. to
        merge model deltas from other replicas into ``engine.learner``)."""
        self._batch_hooks.append(hook)

    def set_progress(self, callback: Callable[[Engine], None] | None) -> None:
        """Call ``callback(engine)`` after every batch (progress lines)."""
        self._progress = callback

    def stop(self) -> None:
        """Ask :meth:`run` to return after the current batch (safe from a signal handler)."""
        self._stop = True

    @property
    def learned(self) -> int:
        """Events learned by the current model (``learner.n_learned``)."""
        return self.learner.n_learned

    @property
    def ready(self) -> bool:
        """Readiness for ``/readyz``: the source can deliver."""
        return bool(self.source.ready)

    def progress_age(self) -> float:
        """Seconds since the processing loop last completed an iteration (idle polls
        included; before :meth:`run`, since the engine was created). ``/healthz``
        fails when it exceeds the health deadline: the loop is stuck."""
        return time.monotonic() - self._heartbeat

    # ------------------------------------------------------------------ state
    def _snapshot_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "format": ENGINE_STATE_FORMAT,
            "created": time.time(),
            "learner": self.learner.to_state(),
            "source": self.source.position(),
            "sink": self.sink.position(),
            "dead_letters": None if self.dead_letters is None else self.dead_letters.position(),
            "evaluator": None if self.evaluator is None else self.evaluator.to_state(),
            "delayed": None if self.delayed is None else self.delayed.to_state(),
            "counters": {
                "consumed": self.consumed,
                "predictions": self.predictions,
                "outcomes": self.outcomes,
                "rejected": self.rejected,
                # the column path's state and the class count that sizes batches: a
                # restored engine cuts and routes batches as an uninterrupted one
                "columns": [self._columns_misses, self._columns_skip],
                "classes": self._classes,
            },
            "extra": {name: provide() for name, provide in self._extra_providers.items()},
        }
        return body

    def checkpoint(self) -> str:
        """Flush the sinks, write a snapshot, then ``source.commit``; return the snapshot id.

        The snapshot is validated as :meth:`restore` will read it (encoded,
        decoded, every part rebuilt) before it is written: a model that would
        not restore is never written, the previous snapshot stays the newest
        and a :class:`CheckpointError` says why. A failure is counted in
        ``stream_nb_checkpoint_failures_total{reason}``: ``sink`` (flushing
        the output failed), ``invalid_state`` (the snapshot would not
        restore) or ``io`` (writing it failed, e.g. a full disk).

        Raises
        ------
        CheckpointError
            If there is no checkpointer or the snapshot cannot be written.
        """
        if self.checkpointer is None:
            raise CheckpointError("no checkpointer configured; pass checkpointer=Checkpointer(dir)")
        start = time.perf_counter()
        stage = "sink"
        try:
            self.sink.flush()
            if self.dead_letters is not None:
                self.dead_letters.flush()
            stage = "invalid_state"
            try:
                body = self._snapshot_body()
                position = body["source"]
                data = encode_snapshot(body)
                del body  # (freed before a second copy of the model is built)
                self._validated("the new snapshot", decode_snapshot(data))
            except _STATE_ERRORS as exc:
                kept = self._last_snapshot or "none"
                raise CheckpointError(
                    f"refusing to write a snapshot that would not restore: {exc}; the newest "
                    f"snapshot ({kept}) is kept, and the events after it will be processed "
                    "again at the next start"
                ) from exc
            stage = "io"
            snapshot_id = self.checkpointer.write_encoded(data)
        except Exception:
            if self.metrics is not None:
                self.metrics.record_checkpoint(
                    result="failure", seconds=time.perf_counter() - start, reason=stage
                )
            raise
        self.source.commit(position, snapshot_id)
        if self.metrics is not None:
            self.metrics.record_checkpoint(result="success", seconds=time.perf_counter() - start)
        self._last_snapshot = snapshot_id
        self._since_checkpoint = 0
        self._last_checkpoint_time = time.monotonic()
        _log.debug("checkpoint %s written", snapshot_id)
        return snapshot_id

    def _validated(self, name: str, body: dict[str, Any]) -> _Restored:
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
        if type(learner) is not type(self.learner):
            raise CheckpointError(
                f"{name} holds a {type(learner).__name__}, but the engine runs a "
                f"{type(self.learner).__name__}; use another --checkpoint-dir or the same --model"
            )
        evaluator = self.evaluator
        if evaluator is not None and body.get("evaluator") is not None:
            try:
                evaluator = type(evaluator).from_state(body["evaluator"])
            except _STATE_ERRORS as exc:
                raise CorruptCheckpointError(f"{name}: invalid evaluator state: {exc}") from exc
        delayed = self.delayed
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
        return _Restored(
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

    def restore(self) -> bool:
        """Restore the newest valid snapshot; ``False`` when there is none (a new model).

        Walks the snapshots newest first. One that fails validation (its
        checksum, its engine format, its learner, evaluator or cache state, a
        missing ``source``) is moved aside as ``<name>.rejected`` with a
        warning saying why, and the next older one is tried. The valid one
        restores the model, evaluator, delayed-label cache, counters and extra
        state; the source seeks to its position (when seekable) and the sinks
        are truncated back to theirs.

        A new model is accepted only when it cannot lose anything: with no
        snapshot file at all and sinks that hold no output yet. Otherwise
        (every snapshot invalid, or output without a snapshot) it refuses
        unless ``reset_state`` is set, which moves the invalid snapshots aside
        and truncates the sinks' earlier output (:meth:`Sink.discard`).

        Raises
        ------
        CheckpointError
            If it refuses to start over, or a valid snapshot cannot be applied
            (another learner class, a source or sink that cannot go back to
            its position).
        """
        if self.checkpointer is None:
            return False
        checkpointer = self.checkpointer
        checkpointer.clean_temporary()
        invalid: list[tuple[Path, str]] = []
        found: tuple[str, dict[str, Any], _Restored] | None = None
        for snapshot_id, path in checkpointer.snapshots():
            try:
                body = checkpointer.read(path)
                found = (snapshot_id, body, self._validated(path.name, body))
            except CorruptCheckpointError as exc:
                _log.warning("skipping invalid snapshot %s", exc)
                invalid.append((path, str(exc)))
                continue
            break
        if found is None:
            self._start_over(invalid)
            return False
        for path, reason in invalid:
            checkpointer.reject(path, reason)
        snapshot_id, body, restored = found
        if invalid:
            _log.warning(
                "restoring the older snapshot %s: %d newer one(s) were invalid",
                snapshot_id,
                len(invalid),
            )
        self.learner = restored.learner
        self.evaluator = restored.evaluator
        self.delayed = restored.delayed
        self.consumed, self.predictions = restored.consumed, restored.predictions
        self.outcomes, self.rejected = restored.outcomes, restored.rejected
        self._columns_misses, self._columns_skip = restored.columns
        self._classes = restored.classes
        if body.get("source") is not None and self.source.seekable:
            self.source.seek(body["source"])
        if body.get("sink") is not None:
            self.sink.truncate(body["sink"])
        if self.dead_letters is not None and body.get("dead_letters") is not None:
            self.dead_letters.truncate(body["dead_letters"])
        extra = body.get("extra") or {}
        for name, consume in self._extra_consumers.items():
            if name in extra:
                consume(extra[name])
        self._restored_from = snapshot_id
        self._last_snapshot = snapshot_id
        _log.info(
            "restored snapshot %s: %d events learned, source at %s",
            snapshot_id,
            self.learner.n_learned,
            body.get("source"),
        )
        return True

    def _start_over(self, invalid: list[tuple[Path, str]]) -> None:
        """No valid snapshot: refuse, or (``reset_state``) clear what a new model replaces."""
        assert self.checkpointer is not None
        directory = str(self.checkpointer.directory)
        sinks = [sink for sink in (self.sink, self.dead_letters) if sink is not None]
        outputs = [found for sink in sinks if (found := _existing_output(sink)) is not None]
        if not invalid and not outputs:
            return  # a first start: nothing to lose
        if not self.reset_state:
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
            self.checkpointer.reject(path, reason)
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

    # ------------------------------------------------------------------ loop
    def run(self, *, max_events: int | None = None) -> RunSummary:
        """Process records until the source is exhausted, ``max_events`` records were
        consumed in this call, or :meth:`stop` was called; then flush and checkpoint."""
        start = time.perf_counter()
        self._stop = False
        source = self.source
        if self.checkpointer is not None and self._last_snapshot is None:
            # Snapshot 0 pins the starting positions: a crash before the next
            # checkpoint then truncates the sinks back to where this run began.
            self.checkpoint()
        remaining = max_events
        if self.metrics is not None:
            self.metrics.record_model_size(self.learner.model_size())
        self._heartbeat = time.monotonic()
        while not self._stop:
            want = self.batch_size
            if self._classes:
                want = min(want, max(1, _MAX_BATCH_CELLS // self._classes))
            if remaining is not None:
                want = min(want, remaining)
            if want <= 0:
                break
            got = self._next(source, want)
            if got:
                if remaining is not None:
                    remaining -= got
                if got < want:
                    # Caught up with the source: show the output now (no fsync).
                    self._push()
            elif source.exhausted:
                break
            else:
                self._flush_idle()
            for hook in self._batch_hooks:
                hook(self)
            if self._progress is not None:
                self._progress(self)
            if self.checkpointer is not None and self._checkpoint_due():
                self.checkpoint()
            self._heartbeat = time.monotonic()
        self.sink.flush()
        if self.dead_letters is not None:
            self.dead_letters.flush()
        if self.checkpointer is not None and self._since_checkpoint:
            self.checkpoint()
        self._publish_evaluation()
        return self.summary(time.perf_counter() - start)

    def summary(self, seconds: float = 0.0) -> RunSummary:
        """Current counters as a :class:`RunSummary`."""
        return RunSummary(
            consumed=self.consumed,
            predictions=self.predictions,
            learned=self.learner.n_learned,
            outcomes=dict(self.outcomes),
            rejected=dict(self.rejected),
            seconds=seconds,
            report=None if self.evaluator is None else self.evaluator.report(),
            restored_from=self._restored_from,
            last_snapshot=self._last_snapshot,
            delayed_pending=0 if self.delayed is None else len(self.delayed),
            delayed_evicted=0 if self.delayed is None else self.delayed.evicted,
        )

    def _checkpoint_due(self) -> bool:
        if self.checkpoint_every is not None and self._since_checkpoint >= self.checkpoint_every:
            return True
        return (
            self.checkpoint_interval is not None
            and self._since_checkpoint > 0
            and time.monotonic() - self._last_checkpoint_time >= self.checkpoint_interval
        )

    def _publish_evaluation(self) -> None:
        """Refresh the prequential gauges and counters (an O(classes) report, and it
        scores the evaluator's queued batches)."""
        if self.metrics is not None and self.evaluator is not None:
            self.metrics.record_evaluation(self.evaluator)
            self._last_evaluation_time = time.monotonic()

    def _push(self) -> None:
        # Caught up with the source: the metrics say what the output shows.
        self._publish_evaluation()
        for sink in (self.sink, self.dead_letters):
            push = getattr(sink, "push", None)
            if push is not None:
                push()

    def _flush_idle(self) -> None:
        # The source is idle: make what was emitted visible downstream.
        self._publish_evaluation()
        self.sink.flush()
        if self.dead_letters is not None:
            self.dead_letters.flush()

    def _reject(self, record: Record, reason: str, message: str) -> None:
        policy = self.error_policy
        if policy is ErrorPolicy.RAISE:
            raise InvalidEventError(
                f"event at {record.position} rejected ({reason}): {message}", reason=reason
            )
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        if policy is ErrorPolicy.DEAD_LETTER and self.dead_letters is not None:
            # The event's key and headers go with it (sinks without keys ignore them).
            self.dead_letters.write(
                dead_letter_record(record.payload, record.position, reason, message),
                key=record.key,
                headers=list(record.headers) if record.headers else None,
            )
        if self.metrics is not None:
            self.metrics.record_dead_letter(reason)

    def _next(self, source: Source, want: int) -> int:
        """Read and process one batch of at most ``want`` records; how many came."""
        next_block = getattr(source, "next_block", None)
        if next_block is not None and self._columns_wanted():
            # a line source: the column path reads the lines without a Record each
            block = next_block(want, self.poll_timeout)
            if block is None:
                return 0
            if not self._columns_done(block.payloads, None, block):
                self._process_general(block.records())
            return len(block.payloads)
        records = source.next_batch(want, self.poll_timeout)
        if records:
            self._process(records)
        return len(records)

    def _process(self, records: list[Record]) -> None:
        if self._columns_wanted() and self._columns_done(
            [r.payload for r in records], records, None
        ):
            return
        self._process_general(records)

    def _process_general(self, records: list[Record]) -> None:
        if self.explain or self.error_policy is ErrorPolicy.RAISE:
            # explanations read the model at prediction time; "raise" stops at the
            # first bad event, before the events after it are learned
            self._process_each(records)
        else:
            self._process_batched(records)

    def _columns_wanted(self) -> bool:
        """Whether this batch should try the column path (after a miss, the next ones
        skip it for a growing number of batches)."""
        if not self._columns_ok or self.explain or self.error_policy is ErrorPolicy.RAISE:
            return False
        if not self.learner.columns_supported:
            return False
        if self._columns_skip:
            self._columns_skip -= 1
            return False
        return True

    def _columns_done(
        self, payloads: list[bytes], records: list[Record] | None, block: LineBlock | None
    ) -> bool:
        if self._process_columns(payloads, records, block):
            self._columns_misses = 0
            return True
        self._columns_misses += 1
        self._columns_skip = min(_COLUMNS_MAX_SKIP, 2 ** min(self._columns_misses, 8) - 1)
        return False

    def _process_columns(
        self, payloads: list[bytes], records: list[Record] | None, block: LineBlock | None
    ) -> bool:
        """The column path: a whole batch of uniform events through the learner's array kernel.

        Taken when every record of the batch is a valid JSON object with the
        same keys in the same order (flat, or nested with uniform feature
        objects), every id and label is a scalar, and
        :meth:`Learner.predict_learn_columns` accepts the batch (it checks
        the feature values). The records, evaluation and model are those of
        :meth:`_process_batched`; no per-event dictionary is built for the
        learner or the evaluator. Returns ``False``, having changed nothing,
        for any other batch, which then takes the general path.
        """
        decoder = self.decoder
        if len(payloads) < _COLUMNS_MIN_BATCH or max(map(len, payloads)) > decoder.max_bytes:
            return False
        perf = time.perf_counter
        batch_start = perf()
        try:
            parsed = _parse_uniform(payloads)
        except orjson.JSONDecodeError:
            return False
        if parsed is None:
            return False
        decoded = self._columns_of(*parsed)
        del parsed  # the columns hold the values
        if decoded is None:
            return False
        x_names, x_columns, ys, ids, ws = decoded
        b = len(payloads)
        n_labelled = b - ys.count(None) if None in ys else b
        delayed = self.delayed
        if n_labelled < b and delayed is not None and ids is not None:
            return False  # unlabelled events with ids go to the delayed-label cache
        learner = self.learner
        n_before = learner.n_learned
        t_model = perf()
        result = learner.predict_learn_columns(x_names, x_columns, ys, ws)
        if result is None:
            return False
        t_emit = perf()
        labels, log_proba, best = result
        self._classes = len(labels)
        sink = self.sink
        top_k = self.top_k
        text = None
        if (
            block is not None
            and ids is None
            and n_labelled == b
            and (top_k is None or top_k >= len(labels))
            and not getattr(sink, "uses_keys", True)
        ):
            # a labelled line block: the records from one template, no dict per event
            text = self._block_text(block, labels, log_proba, best, ys, n_before)
        log_probas: list[dict[Hashable, float]] | None = None
        if text is not None:
            sink.write_lines(text)
        else:
            log_probas = self._emit_column_records(
                labels, log_proba, best, ys, ids, n_before, records, block
            )
        t_evaluate = perf()
        evaluator = self.evaluator
        if evaluator is not None and n_labelled:
            if n_labelled < b:
                mask = [y is not None for y in ys]
                ys_l = [y for y in ys if y is not None]
                log_proba, best = log_proba[mask], best[mask]
                log_probas = None
            else:
                ys_l = list(ys)
            update_arrays = getattr(evaluator, "update_arrays", None)
            if update_arrays is not None and len(labels) <= _EVALUATOR_MATRIX_CLASSES:
                update_arrays(ys_l, labels, log_proba, best)
            else:
                predictions = list(map(labels.__getitem__, best.tolist()))
                if log_probas is None:
                    if len(labels) > _EVALUATOR_MATRIX_CLASSES:
                        log_probas = _true_label_log_probas(labels, log_proba, ys_l)
                    else:
                        rows = log_proba.tolist()
                        log_probas = [dict(zip(labels, row, strict=True)) for row in rows]
                evaluator.update_many(ys_l, predictions, log_probas)
        t_end = perf()
        latencies: list[float] = []
        if self.metrics is not None:
            # Every event of a batch waits for the whole batch: its latency is the
            # batch's, sampled one event in latency_every as on the other paths.
            every = self.latency_every
            sampled = (self.consumed + b) // every - self.consumed // every
            latencies = [t_end - batch_start] * sampled
        self._finish_batch(
            b,
            None if records is None else _last_timestamp(records),
            batch_start,
            n_pred=b,
            n_only=b - n_labelled,
            n_learn=n_labelled,
            n_delayed=0,
            n_matched=0,
            n_unmatched=0,
            n_rejected=0,
            n_blank=0,
            stage_seconds={
                "decode": t_model - batch_start,
                "predict": t_emit - t_model,
                "emit": t_evaluate - t_emit,
                "evaluate": t_end - t_evaluate,
                "learn": 0.0,
            },
            latencies=latencies,
        )
        return True

    def _process_each(self, records: list[Record]) -> None:
        """The per-event path (explanations, error policy ``raise``)."""
        learner = self.learner
        decoder = self.decoder
        decode = decoder.decode
        validate = decoder._validate
        exact = decoder.exact
        max_bytes = decoder.max_bytes
        loads = orjson.loads
        decode_error = orjson.JSONDecodeError
        dumps = orjson.dumps
        dump_option = self._dump_option
        evaluator = self.evaluator
        update = None if evaluator is None else evaluator.update
        update_many = getattr(evaluator, "update_many", None)
        # Evaluations are queued in order and handed over once per batch (update_many).
        eval_true: list[Any] = []
        eval_pred: list[Any] = []
        eval_lp: list[Any] = []
        delayed = self.delayed
        decide = self._decide
        top_k = self.top_k
        want_explain = self.explain
        jll_of = learner.joint_log_likelihood_one
        learn = learner.learn_one
        metrics = self.metrics
        perf = time.perf_counter
        sample_every = self.latency_every
        n_pred = n_only = n_learn = n_delayed = n_matched = n_unmatched = n_rejected = 0
        n_blank = 0
        n_classes = self._classes
        t_decode = t_predict = t_emit = t_learn = t_evaluate = 0.0
        sampled = 0
        batch_start = perf()
        counter = self.consumed
        sampling = metrics is not None
        keyed = getattr(self.sink, "uses_keys", True)
        # Unkeyed sinks get the batch's lines in one write_many call.
        lines: list[bytes] = []
        emit = lines.append
        if keyed:
            write = self.sink.write
        timed = False
        evaluate_seconds = 0.0  # measured for the whole batch when update_many is used
        try:
            for record in records:
                if sampling:
                    counter += 1
                    timed = counter % sample_every == 0
                    if timed:
                        t0 = perf()
                payload = record.payload
                try:
                    if len(payload) <= max_bytes:
                        try:
                            obj = loads(payload)
                        except decode_error:
                            obj = decode(payload)  # raises InvalidEventError with the reason
                        x, y, eid, w = validate(obj, True)
                        if type(y) is float or type(eid) is float:  # maybe beyond 64 bits
                            x, y, eid, w = exact(payload, (x, y, eid, w))
                    else:
                        x, y, eid, w = decode(payload)  # raises (too_large)
                except InvalidEventError as exc:
                    if not payload.strip():
                        n_blank += 1
                        continue
                    n_rejected += 1
                    self._reject(record, exc.reason, str(exc))
                    continue
                if x is None:
                    # Label-only event: score the earlier prediction and learn its features.
                    pending = None if delayed is None else delayed.pop(eid)
                    if pending is None:
                        if delayed is None:
                            n_rejected += 1
                            self._reject(
                                record,
                                "missing_features",
                                "label-only event but delayed labels are disabled; "
                                "enable them with --delayed-labels",
                            )
                        else:
                            n_unmatched += 1
                        continue
                    if update is not None:
                        if update_many is not None:
                            eval_true.append(y)
                            eval_pred.append(pending.y_pred)
                            eval_lp.append(pending.log_proba)
                        else:
                            update(y, pending.y_pred, pending.log_proba)
                    try:
                        learn(pending.x, y, pending.w)
                    except (InvalidEventError, TypeError, ValueError) as exc:
                        n_rejected += 1
                        self._reject(record, _reason(exc, "learn_error"), str(exc))
                        continue
                    n_matched += 1
                    continue
                if timed:
                    t1 = perf()
                n_before = learner.n_learned
                try:
                    jll = jll_of(x)
                except (InvalidEventError, TypeError, ValueError) as exc:
                    n_rejected += 1
                    self._reject(record, _reason(exc, "predict_error"), str(exc))
                    continue
                if jll:
                    lp, y_pred = _log_softmax_argmax(jll)
                    if decide is not None:
                        y_pred = decide(lp)
                else:
                    lp = {}
                    y_pred = None
                n_classes = len(lp)
                shown = lp if top_k is None else _top(lp, top_k)
                # The source position rides along so consumers can drop at-least-once
                # duplicates. Key order: id, position, y_pred, y_true, log_proba, n_learned.
                if eid is None:
                    if y is None:
                        out = {
                            "position": record.position,
                            "y_pred": y_pred,
                            "log_proba": shown,
                            "n_learned": n_before,
                        }
                    else:
                        out = {
                            "position": record.position,
                            "y_pred": y_pred,
                            "y_true": y,
                            "log_proba": shown,
                            "n_learned": n_before,
                        }
                elif y is None:
                    out = {
                        "id": eid,
                        "position": record.position,
                        "y_pred": y_pred,
                        "log_proba": shown,
                        "n_learned": n_before,
                    }
                else:
                    out = {
                        "id": eid,
                        "position": record.position,
                        "y_pred": y_pred,
                        "y_true": y,
                        "log_proba": shown,
                        "n_learned": n_before,
                    }
                if want_explain and jll:
                    out["explain"] = explain_event(learner, x, jll, predicted=y_pred)
                if timed:
                    t2 = perf()
                try:
                    line = dumps(out, option=dump_option)
                except TypeError:  # non-string class labels as log_proba keys: switch for good
                    dump_option = self._dump_option = _OPT_NON_STR
                    line = dumps_exact(out, option=dump_option)
                if keyed:
                    # Keyed by the source record's key, else the event id (Kafka partitioning).
                    key = record.key
                    if key is None and eid is not None:
                        key = str(eid).encode()
                    write(line, key=key, headers=list(record.headers) if record.headers else None)
                else:
                    emit(line)
                n_pred += 1
                if timed:
                    t3 = perf()
                if y is not None:
                    if update is not None:
                        if update_many is not None:
                            eval_true.append(y)
                            eval_pred.append(y_pred)
                            eval_lp.append(lp)
                        else:
                            update(y, y_pred, lp)
                    if timed:
                        t_evaluate += perf() - t3
                    try:
                        learn(x, y, w)
                    except (InvalidEventError, TypeError, ValueError) as exc:
                        n_rejected += 1
                        self._reject(record, _reason(exc, "learn_error"), str(exc))
                        continue
                    n_learn += 1
                elif delayed is not None and eid is not None:
                    delayed.put(eid, x, w, y_pred, lp)
                    n_delayed += 1
                else:
                    n_only += 1
                if timed:
                    t4 = perf()
                    sampled += 1
                    t_decode += t1 - t0
                    t_predict += t2 - t1
                    t_emit += t3 - t2
                    t_learn += t4 - t3  # evaluate time is subtracted below
                    metrics.record_event_latency(t4 - t0)  # type: ignore[union-attr]
        finally:
            # Also on an error-policy stop mid-batch: what was done before it is kept.
            if lines:
                self.sink.write_many(lines)
            if eval_true:
                t5 = perf()
                update_many(eval_true, eval_pred, eval_lp)  # type: ignore[misc]
                evaluate_seconds = perf() - t5
        self._classes = n_classes
        if metrics is not None:
            # Stage seconds are estimated from the sampled events, scaled to the batch.
            scale = len(records) / sampled if sampled else 0.0
            stage_seconds = {
                "decode": t_decode * scale,
                "predict": t_predict * scale,
                "emit": t_emit * scale,
                "evaluate": t_evaluate * scale + evaluate_seconds,
                "learn": max(0.0, t_learn - t_evaluate) * scale,
            }
        else:
            stage_seconds = {}
        self._finish_batch(
            len(records),
            _last_timestamp(records),
            batch_start,
            n_pred=n_pred,
            n_only=n_only,
            n_learn=n_learn,
            n_delayed=n_delayed,
            n_matched=n_matched,
            n_unmatched=n_unmatched,
            n_rejected=n_rejected,
            n_blank=n_blank,
            stage_seconds=stage_seconds,
            latencies=(),
        )

    def _json_keys(self, labels: list[Hashable]) -> list[Hashable]:
        """The labels as the strings JSON shows as object keys (``OPT_NON_STR_KEYS``'s text),
        or the labels themselves if two would show the same (then orjson converts)."""
        cached = self._label_keys
        if cached is not None and cached[0] == labels:
            return cached[1]
        shown = list(orjson.loads(dumps_exact(dict.fromkeys(labels, 0), option=_OPT_NON_STR)))
        keys: list[Hashable] = shown if len(shown) == len(labels) else list(labels)
        self._label_keys = (list(labels), keys)
        return keys

    def _emit_column_records(
        self,
        labels: list[Hashable],
        log_proba: np.ndarray,
        best: np.ndarray,
        ys: Sequence[Hashable | None],
        ids: Sequence[Any] | None,
        n_before: int,
        records: list[Record] | None,
        block: LineBlock | None,
    ) -> list[dict[Hashable, float]] | None:
        """Write a column batch's prediction records built as dicts (any batch);
        returns the log-probability dicts when it built them."""
        predictions = list(map(labels.__getitem__, best.tolist()))
        top_k = self.top_k
        log_probas: list[dict[Hashable, float]] | None = None
        b = len(ys)
        n_labelled = b - ys.count(None) if None in ys else b
        out: list[dict[str, Any]]
        if records is not None:
            positions = [r[1] for r in records]
        else:
            assert block is not None
            positions = block.positions()
        if ids is None and n_labelled == b and (top_k is None or top_k >= len(labels)):
            # The common case in one comprehension: no id, every event labelled.
            learned = range(n_before, n_before + b)
            keys = self._json_keys(labels)  # the text JSON gives the labels as keys
            if len(keys) == 2:
                first, second = keys
                us, vs = log_proba.T.tolist()  # two columns: no list per event
                out = [
                    {
                        "position": p,
                        "y_pred": yp,
                        "y_true": y,
                        "log_proba": {first: u, second: v},
                        "n_learned": n,
                    }
                    for p, yp, y, u, v, n in zip(positions, predictions, ys, us, vs, learned)  # noqa: B905
                ]
            else:
                rows = log_proba.tolist()
                out = [
                    {
                        "position": p,
                        "y_pred": yp,
                        "y_true": y,
                        "log_proba": dict(zip(keys, row)),  # noqa: B905
                        "n_learned": n,
                    }
                    for p, yp, y, row, n in zip(positions, predictions, ys, rows, learned)  # noqa: B905
                ]
        else:
            if top_k is not None and top_k < len(labels):
                # only the k shown classes of each event become Python objects
                shown = _top_rows(labels, log_proba, top_k)
            else:
                rows = log_proba.tolist()
                log_probas = shown = [dict(zip(labels, row, strict=True)) for row in rows]
            out = []
            n = n_before
            for i, y in enumerate(ys):
                record_out: dict[str, Any] = {} if ids is None or ids[i] is None else {"id": ids[i]}
                record_out["position"] = positions[i]
                record_out["y_pred"] = predictions[i]
                if y is not None:
                    record_out["y_true"] = y
                record_out["log_proba"] = shown[i]
                record_out["n_learned"] = n
                if y is not None:
                    n += 1
                out.append(record_out)
        sink = self.sink
        keyed = getattr(sink, "uses_keys", True)
        if not keyed:
            # One dumps call for the whole batch, cut into lines: each record is an
            # object starting with a key, so every boundary reads '},{"'; inside a
            # string '"' is escaped, so the cut is exact unless a record holds an
            # array of objects (a custom position), which the line count catches.
            try:
                blob = orjson.dumps(out, option=0 if log_probas is None else self._dump_option)
            except TypeError:  # non-string class labels as keys: switch for good
                self._dump_option = _OPT_NON_STR
                blob = dumps_exact(out, option=self._dump_option)
            text = blob[1:-1].replace(b'},{"', b'}\n{"')
            # (a line block's positions hold two ints: no array, nothing to count)
            if block is not None or text.count(b"\n") == b - 1:
                sink.write_lines(text)
            else:
                keyed = True
        if keyed:
            dumps = orjson.dumps
            option = self._dump_option
            try:
                lines = [dumps(o, option=option) for o in out]
            except TypeError:  # non-string class labels as keys: switch for good
                option = self._dump_option = _OPT_NON_STR
                lines = [dumps_exact(o, option=option) for o in out]
            if getattr(sink, "uses_keys", True):
                for i, line in enumerate(lines):
                    key = headers = None
                    if records is not None:
                        record = records[i]
                        key = record.key
                        headers = list(record.headers) if record.headers else None
                    if key is None and ids is not None and ids[i] is not None:
                        key = str(ids[i]).encode()
                    sink.write(line, key=key, headers=headers)
            else:
                sink.write_many(lines)
        return log_probas

    def _block_text(
        self,
        block: LineBlock,
        labels: list[Hashable],
        log_proba: np.ndarray,
        best: np.ndarray,
        ys: Sequence[Hashable],
        n_before: int,
    ) -> bytes | None:
        """The prediction records of a labelled line block as one text, or ``None``.

        Byte for byte what ``orjson.dumps`` gives for the record dicts, built
        without them: one ``%`` format of a line template per event; the floats
        rendered by ``orjson`` (a list of them in one call, split at the
        commas); the text from ``"y_pred"`` to the first log-probability's
        key precomputed for every (predicted, true) pair of classes. Taken
        when the labels and the batch's true labels are all ``int``, ``str``
        or ``bool`` of one type (so a label's text is its class's text), their
        object keys are distinct and there are at most 64 classes.
        """
        b = len(ys)
        k = len(labels)
        label_type = type(labels[0])
        if k > _TEMPLATE_MAX_CLASSES or label_type not in _TEMPLATE_TYPES:
            return None
        if set(map(type, labels)) != {label_type} or set(map(type, ys)) != {label_type}:
            return None
        cached = self._line_template
        if cached is None or cached[0] != labels:
            try:
                texts = [orjson.dumps(label) for label in labels]
                keys = [orjson.dumps({label: 0}, option=_OPT_NON_STR)[1:-3] for label in labels]
            except orjson.JSONEncodeError:  # e.g. an int beyond 64 bits
                return None
            if len(set(keys)) != len(keys):
                return None  # e.g. 1 and "1": the dict path shows what orjson does
            # pair p * k + t: '"y_pred":P,"y_true":T,"log_proba":{KEY0:'
            pairs = [
                b'"y_pred":' + predicted + b',"y_true":' + true + b',"log_proba":{' + keys[0] + b":"
                for predicted in texts
                for true in texts
            ]
            rest = b"".join(b"," + key.replace(b"%", b"%%") + b":%b" for key in keys[1:])
            line = b'{"position":{"line":%d,"offset":%d},%b%b' + rest + b'},"n_learned":%d}'
            column_of = {label: j for j, label in enumerate(labels)}
            cached = self._line_template = (list(labels), line, pairs, column_of)
        _, line, pairs, column_of = cached
        pair = best * k
        pair += np.fromiter(map(column_of.__getitem__, ys), np.intp, count=b)
        # each class's column as one JSON array, cut at the commas (no float's text
        # holds one); orjson writes float64 array items as it writes Python floats
        by_class = np.ascontiguousarray(log_proba.T)
        option = orjson.OPT_SERIALIZE_NUMPY
        floats = [orjson.dumps(column, option=option)[1:-1].split(b",") for column in by_class]
        first = block.first
        rows = zip(  # noqa: B905 (all b long)
            range(first, first + b),
            block.offsets,
            map(pairs.__getitem__, pair.tolist()),
            *floats,
            range(n_before, n_before + b),
        )
        return b"\n".join(map(line.__mod__, rows))

    def _columns_of(
        self,
        objs: list[dict[str, Any]],
        transposed: tuple[dict[str, Any], list[Sequence[Any]]] | None = None,
    ) -> (
        tuple[
            tuple[str, ...],
            list[Sequence[Any]],
            Sequence[Any],
            Sequence[Any] | None,
            Sequence[float] | None,
        ]
        | None
    ):
        """``(feature names, feature columns, labels, ids, weights)`` of uniform events.

        ``None`` unless every event validates as :class:`EventDecoder` would
        accept it and all have the same features in the same order. Uniform
        objects (the same keys throughout) are split into columns in one
        C-level transpose; flat events that differ only in the label, id or
        weight fields (e.g. some unlabelled) have those fields popped first.
        ``transposed``: ``(first object, columns)`` when the caller has already
        transposed uniform objects (``objs`` is then not read).
        """
        decoder = self.decoder
        label_field, id_field, weight_field = (
            decoder.label_field,
            decoder.id_field,
            decoder.weight_field,
        )
        features_field = decoder.features_field
        columns: list[Sequence[Any]] | None
        if transposed is None:
            first = objs[0]
            names = tuple(first)
            columns = _columns(objs, names)
        else:
            first, columns = transposed
            names = tuple(first)
        nested = features_field in first and (
            decoder.shape == "nested"
            or (decoder.shape == "auto" and type(first[features_field]) is dict)
        )
        b = len(objs) if columns is None else len(columns[0])
        ys: Sequence[Any]
        ids: Sequence[Any] | None = None
        raw_ws: Sequence[Any] | None = None
        x_columns: list[Sequence[Any]]
        xs: Sequence[Any] = objs
        if columns is not None:
            where = {name: j for j, name in enumerate(names)}
            ys = columns[where[label_field]] if label_field in where else (None,) * b
            if id_field in where:
                ids = columns[where[id_field]]
            if weight_field in where:
                raw_ws = columns[where[weight_field]]
            special = {label_field, id_field, weight_field}
            if nested:
                if len(names) - len(special & where.keys()) != 1:
                    return None  # other top-level keys beside the features object
                xs = columns[where[features_field]]
            else:
                if decoder.shape == "nested":
                    return None
                x_names = tuple(n for n in names if n not in special)
                x_columns = [columns[where[n]] for n in x_names]
        elif nested or decoder.shape == "nested":
            return None
        else:
            # the objects are ours (parsed for this batch): pop as EventDecoder does
            ys = [o.pop(label_field, None) for o in objs]
            if id_field is not None:
                ids = [o.pop(id_field, None) for o in objs]
            if weight_field is not None:
                raw_ws = [o.pop(weight_field, None) for o in objs]
            nested = True  # the features are now whole objects, as when nested
        if nested:
            if set(map(type, xs)) != {dict}:
                return None
            x_names = tuple(xs[0])
            x_cols = _columns(xs, x_names)
            if x_cols is None:
                return None
            x_columns = x_cols
        if not x_names:
            return None
        types = set(map(type, ys))
        if not _SCALARS.issuperset(types) or (float in types and any(map(is_wide, ys))):
            return None  # (a float label beyond 2**63 may be a rounded integer: per event)
        if ids is not None:
            types = set(map(type, ids))
            if not _SCALARS.issuperset(types) or (float in types and any(map(is_wide, ids))):
                return None
            if ids.count(None) == b:
                ids = None
        ws: Sequence[float] | None = None
        if raw_ws is not None and raw_ws.count(None) < b:
            if None in raw_ws:
                raw_ws = [1.0 if w is None else w for w in raw_ws]
            if not _NUMBERS.issuperset(map(type, raw_ws)):
                return None
            if not all(w > 0 and w - w == 0 for w in raw_ws):
                return None  # the general path names the bad weight
            ws = raw_ws
        return x_names, x_columns, ys, ids, ws

    def _process_batched(self, records: list[Record]) -> None:
        """The batch path: runs of ordinary events go through ``predict_learn_many``.

        Same records, dead letters, evaluation and model as the per-event path
        (:meth:`_process_each`): a run ("segment") of decoded events is
        predicted and learned by one :meth:`Learner.predict_learn_many` call,
        then emitted in order. A rejected or label-only event first finishes
        the segment before it, so every side effect keeps its order.
        """
        learner = self.learner
        decoder = self.decoder
        decode = decoder.decode
        validate = decoder._validate
        exact = decoder.exact
        max_bytes = decoder.max_bytes
        loads = orjson.loads
        decode_error = orjson.JSONDecodeError
        dumps = orjson.dumps
        evaluator = self.evaluator
        update = None if evaluator is None else evaluator.update
        update_many = getattr(evaluator, "update_many", None)
        eval_true: list[Any] = []
        eval_pred: list[Any] = []
        eval_lp: list[Any] = []
        delayed = self.delayed
        decide = self._decide
        top_k = self.top_k
        metrics = self.metrics
        perf = time.perf_counter
        sample_every = self.latency_every
        counts = dict.fromkeys(
            ("pred", "only", "learn", "delayed", "matched", "unmatched", "rejected", "blank"), 0
        )
        stage = dict.fromkeys(("decode", "predict", "emit"), 0.0)
        latencies: list[float] = []
        batch_start = perf()
        counter = self.consumed
        sampling = metrics is not None
        keyed = getattr(self.sink, "uses_keys", True)
        lines: list[bytes] = []
        # the current segment: decoded ordinary events not yet predicted
        # (x, y, w, id, record, sampled start time) per event
        segment: list[tuple[dict[str, Any], Any, float, Any, Record, float | None]] = []
        add = segment.append

        # no decisions, truncation, keys, sampling or per-event evaluator calls
        plain = (
            decide is None
            and top_k is None
            and not keyed
            and not sampling
            and (update is None or update_many is not None)
        )

        def run_segment() -> None:
            n_learned = learner.n_learned  # before the segment
            t_model = perf()
            seg_x, seg_y, seg_w, seg_id, seg_rec, seg_t0 = zip(*segment)  # noqa: B905
            segment.clear()
            log_probas, predictions, errors = learner.predict_learn_many(seg_x, seg_y, seg_w)
            t_emit = perf()
            if log_probas[-1] is not None:
                self._classes = len(log_probas[-1])
            option = self._dump_option
            if plain and not errors and None not in seg_y:
                # The common case, every event labelled and learned: the same records
                # with fewer branches, the evaluation queued by three C-level extends.
                append = lines.append
                for record, y, eid, lp, y_pred in zip(  # noqa: B905 (same length)
                    seg_rec, seg_y, seg_id, log_probas, predictions
                ):
                    if eid is None:
                        out: dict[str, Any] = {
                            "position": record.position,
                            "y_pred": y_pred,
                            "y_true": y,
                            "log_proba": lp,
                            "n_learned": n_learned,
                        }
                    else:
                        out = {
                            "id": eid,
                            "position": record.position,
                            "y_pred": y_pred,
                            "y_true": y,
                            "log_proba": lp,
                            "n_learned": n_learned,
                        }
                    n_learned += 1
                    try:
                        line = dumps(out, option=option)
                    except TypeError:  # non-string class labels as keys: switch for good
                        option = self._dump_option = _OPT_NON_STR
                        line = dumps_exact(out, option=option)
                    append(line)
                n = len(seg_y)
                counts["pred"] += n
                counts["learn"] += n
                if update is not None:
                    eval_true.extend(seg_y)
                    eval_pred.extend(predictions)
                    eval_lp.extend(log_probas)
                stage["predict"] += t_emit - t_model
                stage["emit"] += perf() - t_emit
                return
            n_pred = n_learn = n_only = n_delayed = 0
            for i, lp in enumerate(log_probas):
                record = seg_rec[i]
                if lp is None:
                    exc = errors[i]
                    counts["rejected"] += 1
                    self._reject(record, _reason(exc, "predict_error"), str(exc))
                    continue
                y_pred = predictions[i]
                if decide is not None and y_pred is not None:
                    y_pred = decide(lp)
                shown = lp if top_k is None else _top(lp, top_k)
                y = seg_y[i]
                eid = seg_id[i]
                # Key order: id, position, y_pred, y_true, log_proba, n_learned.
                if eid is None:
                    if y is None:
                        out = {
                            "position": record.position,
                            "y_pred": y_pred,
                            "log_proba": shown,
                            "n_learned": n_learned,
                        }
                    else:
                        out = {
                            "position": record.position,
                            "y_pred": y_pred,
                            "y_true": y,
                            "log_proba": shown,
                            "n_learned": n_learned,
                        }
                elif y is None:
                    out = {
                        "id": eid,
                        "position": record.position,
                        "y_pred": y_pred,
                        "log_proba": shown,
                        "n_learned": n_learned,
                    }
                else:
                    out = {
                        "id": eid,
                        "position": record.position,
                        "y_pred": y_pred,
                        "y_true": y,
                        "log_proba": shown,
                        "n_learned": n_learned,
                    }
                try:
                    line = dumps(out, option=option)
                except TypeError:  # non-string class labels as log_proba keys: switch for good
                    option = self._dump_option = _OPT_NON_STR
                    line = dumps_exact(out, option=option)
                if keyed:
                    key = record.key
                    if key is None and eid is not None:
                        key = str(eid).encode()
                    self.sink.write(
                        line, key=key, headers=list(record.headers) if record.headers else None
                    )
                else:
                    lines.append(line)
                n_pred += 1
                if y is not None:
                    if update is not None:
                        if update_many is not None:
                            eval_true.append(y)
                            eval_pred.append(y_pred)
                            eval_lp.append(lp)
                        else:
                            update(y, y_pred, lp)
                    if errors and i in errors:
                        exc = errors[i]
                        counts["rejected"] += 1
                        self._reject(record, _reason(exc, "learn_error"), str(exc))
                        continue
                    n_learned += 1
                    n_learn += 1
                elif delayed is not None and eid is not None:
                    delayed.put(eid, seg_x[i], seg_w[i], y_pred, lp)
                    n_delayed += 1
                else:
                    n_only += 1
                if sampling:
                    t0 = seg_t0[i]
                    if t0 is not None:
                        latencies.append(perf() - t0)
            counts["pred"] += n_pred
            counts["learn"] += n_learn
            counts["only"] += n_only
            counts["delayed"] += n_delayed
            stage["predict"] += t_emit - t_model
            stage["emit"] += perf() - t_emit

        evaluate_seconds = 0.0
        try:
            t_start = perf()
            for record in records:
                t0: float | None = None
                if sampling:
                    counter += 1
                    if counter % sample_every == 0:
                        t0 = perf()
                payload = record.payload
                try:
                    if len(payload) <= max_bytes:
                        try:
                            obj = loads(payload)
                        except decode_error:
                            obj = decode(payload)  # raises InvalidEventError with the reason
                        x, y, eid, w = validate(obj, True)
                        if type(y) is float or type(eid) is float:  # maybe beyond 64 bits
                            x, y, eid, w = exact(payload, (x, y, eid, w))
                    else:
                        x, y, eid, w = decode(payload)  # raises (too_large)
                except InvalidEventError as exc:
                    if not payload.strip():
                        counts["blank"] += 1
                        continue
                    stage["decode"] += perf() - t_start
                    if segment:
                        run_segment()
                    t_start = perf()
                    counts["rejected"] += 1
                    self._reject(record, exc.reason, str(exc))
                    continue
                if x is not None:
                    add((x, y, w, eid, record, t0))
                    continue
                # Label-only event: score the earlier prediction and learn its features.
                stage["decode"] += perf() - t_start
                if segment:
                    run_segment()
                t_start = perf()
                pending = None if delayed is None else delayed.pop(eid)
                if pending is None:
                    if delayed is None:
                        counts["rejected"] += 1
                        self._reject(
                            record,
                            "missing_features",
                            "label-only event but delayed labels are disabled; "
                            "enable them with --delayed-labels",
                        )
                    else:
                        counts["unmatched"] += 1
                    continue
                if update is not None:
                    if update_many is not None:
                        eval_true.append(y)
                        eval_pred.append(pending.y_pred)
                        eval_lp.append(pending.log_proba)
                    else:
                        update(y, pending.y_pred, pending.log_proba)
                try:
                    learner.learn_one(pending.x, y, pending.w)
                except (InvalidEventError, TypeError, ValueError) as exc:
                    counts["rejected"] += 1
                    self._reject(record, _reason(exc, "learn_error"), str(exc))
                    continue
                counts["matched"] += 1
            stage["decode"] += perf() - t_start
            if segment:
                run_segment()
        finally:
            if lines:
                self.sink.write_many(lines)
            if eval_true:
                t5 = perf()
                update_many(eval_true, eval_pred, eval_lp)  # type: ignore[misc]
                evaluate_seconds = perf() - t5
        self._finish_batch(
            len(records),
            _last_timestamp(records),
            batch_start,
            n_pred=counts["pred"],
            n_only=counts["only"],
            n_learn=counts["learn"],
            n_delayed=counts["delayed"],
            n_matched=counts["matched"],
            n_unmatched=counts["unmatched"],
            n_rejected=counts["rejected"],
            n_blank=counts["blank"],
            stage_seconds={
                "decode": stage["decode"],
                # the learner's batched predict + learn, one call per segment
                "predict": stage["predict"],
                "emit": stage["emit"],
                "evaluate": evaluate_seconds,
                "learn": 0.0,
            },
            latencies=latencies,
        )

    def _finish_batch(
        self,
        consumed: int,
        last_ts: float | None,
        batch_start: float,
        *,
        n_pred: int,
        n_only: int,
        n_learn: int,
        n_delayed: int,
        n_matched: int,
        n_unmatched: int,
        n_rejected: int,
        n_blank: int,
        stage_seconds: Mapping[str, float],
        latencies: Iterable[float],
    ) -> None:
        """Counters, outcomes and metrics of one processed batch."""
        self.consumed += consumed
        self._since_checkpoint += consumed
        self.predictions += n_pred
        batch_outcomes = {
            "learned": n_learn,
            "predicted": n_only,
            "delayed": n_delayed,
            "label_matched": n_matched,
            "label_unmatched": n_unmatched,
            self._rejected_outcome: n_rejected,
            "blank": n_blank,
        }
        outcomes = self.outcomes
        for outcome, value in batch_outcomes.items():
            if value:
                outcomes[outcome] = outcomes.get(outcome, 0) + value
        metrics = self.metrics
        if metrics is not None:
            for seconds in latencies:
                metrics.record_event_latency(seconds)
            metrics.record_batch(
                consumed=consumed,
                outcomes={k: v for k, v in batch_outcomes.items() if v},
                predictions=n_pred,
                seconds=time.perf_counter() - batch_start,
                stage_seconds=stage_seconds,
                last_event_timestamp=last_ts,
            )
            delayed = self.delayed
            if delayed is not None:
                evicted = delayed.evicted - self._reported_evicted
                self._reported_evicted = delayed.evicted
                metrics.record_delayed_label_cache(size=len(delayed), evicted=max(0, evicted))
            now = time.monotonic()
            if now - self._last_evaluation_time >= _EVALUATION_EVERY:
                self._publish_evaluation()
            if now - self._last_size_time >= _MODEL_SIZE_EVERY:
                # model_size() walks the whole model: O(model), so only now and then.
                self._last_size_time = now
                metrics.record_model_size(self.learner.model_size())
