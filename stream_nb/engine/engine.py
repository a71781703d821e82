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
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from stream_nb._exceptions import (
    CheckpointError,
    ConfigError,
    InvalidEventError,
)
from stream_nb.base import Learner
from stream_nb.connectors.base import Record, Sink, Source
from stream_nb.engine.batched import process_batched
from stream_nb.engine.checkpoint import (
    Checkpointer,
    decode_snapshot,
    encode_snapshot,
)
from stream_nb.engine.columns import columns_done, columns_wanted
from stream_nb.engine.delayed import DelayedLabelCache
from stream_nb.engine.events import EventDecoder, dead_letter_record
from stream_nb.engine.per_event import process_each
from stream_nb.engine.restore import (
    restore_engine,
    validated,
)
from stream_nb.engine.settings import (
    _EVALUATION_EVERY,
    _MAX_BATCH_CELLS,
    _MODEL_SIZE_EVERY,
    _STATE_ERRORS,
    ENGINE_STATE_FORMAT,
    ErrorPolicy,
    RunSummary,
    _log,
)
from stream_nb.engine.tally import BatchTally


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
        # The column path (see stream_nb.engine.columns), unless decisions or checks need one
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
                validated(self, "the new snapshot", decode_snapshot(data))
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
        return restore_engine(self)

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
        if next_block is not None and columns_wanted(self):
            # a line source: the column path reads the lines without a Record each
            block = next_block(want, self.poll_timeout)
            if block is None:
                return 0
            if not columns_done(self, block.payloads, None, block):
                self._process_general(block.records())
            return len(block.payloads)
        records = source.next_batch(want, self.poll_timeout)
        if records:
            self._process(records)
        return len(records)

    def _process(self, records: list[Record]) -> None:
        if columns_wanted(self) and columns_done(self, [r.payload for r in records], records, None):
            return
        self._process_general(records)

    def _process_general(self, records: list[Record]) -> None:
        if self.explain or self.error_policy is ErrorPolicy.RAISE:
            # explanations read the model at prediction time; "raise" stops at the
            # first bad event, before the events after it are learned
            process_each(self, records)
        else:
            process_batched(self, records)

    def finish_batch(self, tally: BatchTally) -> None:
        """Add one processed batch (see :class:`~stream_nb.engine.tally.BatchTally`) to the
        run's counters, outcomes and metrics."""
        consumed = tally.consumed
        self.consumed += consumed
        self._since_checkpoint += consumed
        self.predictions += tally.predicted
        batch_outcomes = tally.outcomes(self._rejected_outcome)
        outcomes = self.outcomes
        for outcome, value in batch_outcomes.items():
            outcomes[outcome] = outcomes.get(outcome, 0) + value
        metrics = self.metrics
        if metrics is not None:
            for seconds in tally.latencies:
                metrics.record_event_latency(seconds)
            metrics.record_batch(
                consumed=consumed,
                outcomes=batch_outcomes,
                predictions=tally.predicted,
                seconds=time.perf_counter() - tally.batch_start,
                stage_seconds=tally.stage_seconds,
                last_event_timestamp=tally.last_timestamp,
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
