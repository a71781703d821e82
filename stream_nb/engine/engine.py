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

from stream_nb._exceptions import CheckpointError, ConfigError, InvalidEventError
from stream_nb.base import Learner
from stream_nb.connectors.base import Record, Sink, Source
from stream_nb.engine.batched import process_batched
from stream_nb.engine.checkpoint import Checkpointer
from stream_nb.engine.columns import ColumnPath
from stream_nb.engine.delayed import DelayedLabelCache
from stream_nb.engine.events import EventDecoder, dead_letter_record
from stream_nb.engine.per_event import process_each
from stream_nb.engine.records import OutputState
from stream_nb.engine.restore import newest_valid, rewind, snapshot_time
from stream_nb.engine.settings import (
    _EVALUATION_EVERY,
    _MAX_BATCH_CELLS,
    _MODEL_SIZE_EVERY,
    ErrorPolicy,
    RunSummary,
    _log,
    check_positive_int,
)
from stream_nb.engine.snapshot import write_snapshot
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
        A :class:`stream_nb.engine.telemetry.EngineMetrics`, or ``None``. The engine
        publishes its checkpoint interval there and registers the gauges read at
        scrape time: readiness (:attr:`ready`), :meth:`progress_age` and
        :meth:`backlog_bytes`.
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
    column_path
        Let uniform batches take the column path (:mod:`stream_nb.engine.columns`:
        one call of the learner's array kernel per batch) when the learner has
        one. ``False`` sends every batch through the general path: the same
        records, byte for byte, and the same model (to compare the two paths).

    Attributes
    ----------
    output
        The :class:`~stream_nb.engine.records.OutputState` its processing paths share.

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
        column_path: bool = True,
    ) -> None:
        if not isinstance(error_policy, ErrorPolicy):
            raise ConfigError(
                f"error_policy must be an ErrorPolicy, got {error_policy!r}; "
                "use ErrorPolicy('dead_letter') to convert a string"
            )
        check_positive_int("batch_size", batch_size)
        check_positive_int("checkpoint_every", checkpoint_every, optional=True)
        if checkpoint_interval is not None and not checkpoint_interval > 0:
            raise ConfigError(
                f"checkpoint_interval must be positive seconds or None, got {checkpoint_interval!r}"
            )
        check_positive_int("top_k", top_k, optional=True)
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
        self.output = OutputState()
        self._rejected_outcome = (
            "dead_letter" if error_policy is ErrorPolicy.DEAD_LETTER else "skipped"
        )
        # The column path (see stream_nb.engine.columns), unless decisions need one
        # dictionary per event; ColumnPath.wanted checks the learner batch by batch.
        self._columns = ColumnPath(column_path and loss_matrix is None)
        # monotonic time of the processing loop's last completed iteration (see progress_age)
        self._heartbeat = time.monotonic()
        if metrics is not None:
            metrics.set_checkpoint_interval(
                checkpoint_interval if checkpointer is not None else None
            )
            # read at every scrape, from the metrics server's thread
            metrics.watch(
                ready=lambda: self.ready,
                progress_age=self.progress_age,
                backlog_bytes=self.backlog_bytes,
            )

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
    def decide(self) -> Callable[[dict[Hashable, float]], Hashable | None] | None:
        """The decision rule of ``loss_matrix`` (minimum Bayes risk) over a log posterior,
        or ``None``: the most probable class."""
        return self._decide

    @property
    def learned(self) -> int:
        """Events learned by the current model (``learner.n_learned``)."""
        return self.learner.n_learned

    @property
    def ready(self) -> bool:
        """Readiness for ``/readyz``: the source can deliver."""
        return bool(self.source.ready)

    def backlog_bytes(self) -> int | None:
        """Bytes of input the source has not handed out yet, when it can tell (a file
        source's ``backlog_bytes()``), else ``None``; ``stream_nb_source_backlog_bytes``."""
        backlog = getattr(self.source, "backlog_bytes", None)
        value = None if backlog is None else backlog()
        return None if value is None else int(value)

    def progress_age(self) -> float:
        """Seconds since the processing loop last completed an iteration (idle polls
        included; before :meth:`run`, since the engine was created). ``/healthz``
        fails when it exceeds the health deadline: the loop is stuck."""
        return time.monotonic() - self._heartbeat

    # ------------------------------------------------------------------ state
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
        snapshot_id = write_snapshot(
            self,
            self.checkpointer,
            columns=self._columns.state(),
            extra=self._extra_providers,
            kept=self._last_snapshot,
        )
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
        found = newest_valid(self)
        if found is None:
            return False
        snapshot_id, body, restored = found
        self.learner = restored.learner
        self.evaluator = restored.evaluator
        self.delayed = restored.delayed
        self.consumed, self.predictions = restored.consumed, restored.predictions
        self.outcomes, self.rejected = restored.outcomes, restored.rejected
        self._columns.restore(*restored.columns)
        self.output.classes = restored.classes
        rewind(self, body)
        extra = body.get("extra") or {}
        for name, consume in self._extra_consumers.items():
            if name in extra:
                consume(extra[name])
        self._restored_from = self._last_snapshot = snapshot_id
        created = snapshot_time(body)
        if self.metrics is not None and created is not None:
            # the restored snapshot is the last checkpoint until the next one
            self.metrics.record_restored_checkpoint(created)
        _log.info(
            "restored snapshot %s: %d events learned, source at %s",
            snapshot_id,
            self.learner.n_learned,
            body.get("source"),
        )
        return True

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
            classes = self.output.classes
            if classes:
                want = min(want, max(1, _MAX_BATCH_CELLS // classes))
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

    def reject(self, record: Record, reason: str, message: str) -> None:
        """Apply the error policy to a record that cannot be used: count it under ``reason``
        (one of :data:`~stream_nb.engine.REASONS`) and, under ``dead_letter``, write it
        with ``message``, its key and headers to the dead-letter sink, if any.

        Raises
        ------
        InvalidEventError
            Under the error policy ``raise``.

        Examples
        --------
        >>> from stream_nb import CategoricalNB
        >>> from stream_nb.connectors.base import Record
        >>> from stream_nb.connectors.memory import ListSource, MemorySink
        >>> letters = MemorySink()
        >>> engine = Engine(CategoricalNB(), ListSource([]), MemorySink(), dead_letters=letters)
        >>> engine.reject(Record(b"{oops", {"line": 1}), "invalid_json", "not JSON")
        >>> engine.rejected, [d["reason"] for d in letters.records()]
        ({'invalid_json': 1}, ['invalid_json'])
        """
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
        if next_block is not None and self._columns.wanted(self):
            # a block source (lines, Kafka): the column path reads it without a Record each
            block = next_block(want, self.poll_timeout)
            if block is None:
                return 0
            if not self._columns.take(self, block):
                self._process_general(block.records())
            return len(block.payloads)
        records = source.next_batch(want, self.poll_timeout)
        if records:
            self._process(records)
        return len(records)

    def _process(self, records: list[Record]) -> None:
        if self._columns.wanted(self) and self._columns.take(self, records):
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
