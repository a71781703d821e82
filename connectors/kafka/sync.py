"""Model sync and exactly-once: deltas over a sync topic, and transactions."""

from __future__ import annotations

import time
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson
from kafka import OffsetAndMetadata, TopicPartition
from kafka.errors import InvalidProducerEpochError, KafkaError, ProducerFencedError

from stream_nb._exceptions import ConfigError, SourceError
from stream_nb.base import Learner
from stream_nb.connectors.base import EngineHooks
from stream_nb.connectors.kafka.client import ClientFatalError, bounded, trouble
from stream_nb.connectors.kafka.records import record_bytes
from stream_nb.connectors.kafka.sink import KafkaSink
from stream_nb.connectors.kafka.url import (
    BATCH_BYTES,
    CLOSE_SECONDS,
    DELIVERY_TIMEOUT_MS,
    SYNC_READ_SECONDS,
    client_options,
    is_fatal,
    log,
    producer_defaults,
    transaction_call_seconds,
    transaction_timeout_ms,
)
from stream_nb.engine.sync import DeltaTracker, defer_binning

if TYPE_CHECKING:
    from stream_nb.connectors.kafka.source import KafkaSource

__all__ = ["SYNC_FORMAT", "KafkaSync"]

#: The ``format`` of the model-sync state kept in snapshots.
SYNC_FORMAT = "stream-nb/kafka-sync"


class KafkaSync:
    """Model sync between workers of a group, and exactly-once, via Kafka transactions.

    Every ``interval`` seconds (checked after each engine batch) one transaction
    carries the statistics this worker learned since its previous transaction
    (a *delta*, keyed by worker id and a sequence number) to the sync topic,
    together with the group offsets of those events (``send_offsets_to_transaction``)
    and, with ``exactly_once``, the predictions and dead letters of the same events.
    Then the worker reads the sync topic to its end and folds every delta it has not
    folded yet — its own included — into its *base* model, in the topic's order
    (counts add; Welford moments combine by Chan's formula; :meth:`Learner.merge`).

    The base is therefore the same fold of the same sequence on every worker: all
    workers hold the same base statistics (bit for bit, as the same operations run in
    the same order), TAN/KDB the same structure (rebuilt from the merged statistics
    at every fold step), and with ``half_life`` the same decayed model — the model of
    the stream taken in sync-topic order. The engine's model (*main*) is the base plus
    this worker's own deltas not read back yet plus what it learned since its last
    transaction; it is rebuilt that way after every fold.

    The delta is kept generically: a second learner of the same class
    (``learner.clone()``) learns the same events (:class:`DeltaTracker`). The snapshot
    stores, besides the engine's model, the base, the sync-topic offsets and the last
    sequence number folded from every worker; restoring loads the base, so no delta
    is folded twice and no event is learned twice:

    * the group's committed offsets win over the snapshot's (an event's offset is
      committed exactly when its delta is), so uncommitted work is redone from
      the committed offsets, by whichever worker owns the partition then;
    * a worker that crashed after a transaction but before its snapshot finds its
      own newer deltas in the sync topic and folds them;
    * on revoke the worker runs a sync transaction before the partitions move
      (:meth:`settle`); on lost partitions, or when that transaction fails, it drops
      its uncommitted work and returns to the base (:meth:`rollback`);
    * a clean stop runs a last transaction (:meth:`final_sync`).

    Parameters
    ----------
    source
        The group's :class:`KafkaSource`.
    topic
        The sync topic (one partition, so every worker reads the same order; created
        if missing).
    interval
        Seconds between transactions (the sync interval T).
    exactly_once
        Also send predictions and dead letters in the transactions, so a
        ``read_committed`` consumer sees each prediction exactly once.
    **producer_options
        Extra kafka-python producer options (security settings …).
    """

    def __init__(
        self,
        source: KafkaSource,
        *,
        topic: str,
        interval: float = 5.0,
        exactly_once: bool = False,
        **producer_options: Any,
    ) -> None:
        if not interval > 0:
            raise ConfigError(f"sync interval must be positive seconds, got {interval!r}")
        self.source = source
        self.topic = topic
        self.interval = float(interval)
        self.exactly_once = exactly_once
        self._producer_options = producer_options
        self._producer: Any = None
        #: Last sequence number this worker published.
        self.seq = 0
        #: Last sequence number folded into the base, by worker (this one included).
        self.merged: dict[str, int] = {}
        self.sync_offsets: dict[int, int] = {}
        #: The fold of the sync topic up to :attr:`sync_offsets`.
        self.base: Learner | None = None
        self._base_state: dict[str, Any] | None = None
        # own deltas published but not read back yet: (seq, delta, weight)
        self._pending: list[tuple[int, Learner, float]] = []
        #: Deltas published / merged from other workers (for metrics and tests).
        self.sent = 0
        self.merged_deltas = 0
        self.rollbacks = 0
        self._engine: EngineHooks | None = None
        self._main: Learner | None = None
        self._tracker: DeltaTracker | None = None
        self._caught_up = False
        self._last = time.monotonic()
        self._committed: dict[TopicPartition, int] = {}
        self._sinks: list[KafkaSink] = []
        self._txn_seconds = transaction_call_seconds(DELIVERY_TIMEOUT_MS)
        # the current producer committed a transaction (see _recoverable)
        self._txn_ok = False
        # the sync topic was checked (or created) with the source's topics
        info = source.topic_info.get(topic)
        count = info.partitions if info is not None and info.partitions else 1
        #: Largest delta record the sync topic accepts (``max.message.bytes``), if known.
        self.delta_limit = None if info is None else info.max_message_bytes
        self._call_ms = source.call_ms
        self._consumer = source.adapter.consumer(
            bootstrap_servers=source.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            **client_options(source.options),
        )
        self._partitions = [TopicPartition(topic, p) for p in range(count)]
        self._consumer.assign(self._partitions)

    # ------------------------------------------------------------ wiring

    @property
    def worker_id(self) -> str:
        return self.source.worker_id

    @property
    def producer(self) -> Any:
        """The transactional producer (created on first use, after restore set the worker id)."""
        if self._producer is None:
            options = {**client_options(self.source.options), **self._producer_options}
            # Deltas are compressed on their own (zlib, see sync()); predictions in
            # exactly-once mode stay uncompressed like the at-least-once sink's
            # (kafka-python's gzip runs at level 9: 16,200 -> 18,600 events/CPU-s without).
            producer_defaults(options)
            # a batch of predictions or dead letters never exceeds what their topic accepts
            options.setdefault("batch_size", min([BATCH_BYTES, *(s.limit for s in self._sinks)]))
            # a delta is one record: allow large ones (the broker limits the compressed
            # batch: max.message.bytes of the sync topic, 1 MiB by default)
            options.setdefault("max_request_size", 16 * 1024 * 1024)
            # A worker killed inside a transaction holds back read_committed readers of
            # the sync topic until the broker aborts it: keep that short.
            options.setdefault("transaction_timeout_ms", transaction_timeout_ms(self.interval))
            self._txn_seconds = transaction_call_seconds(options["delivery_timeout_ms"])
            transactional_id = f"stream-nb.{self.source.group_id}.{self.worker_id}"
            try:
                producer = self.source.adapter.producer(
                    bootstrap_servers=self.source.bootstrap,
                    transactional_id=transactional_id,
                    **options,
                )
                # fences and aborts an earlier instance's transaction (bounded by max_block_ms)
                producer.init_transactions()
                producer.begin_transaction()
            except KafkaError as exc:
                raise SourceError(
                    f"cannot start the transactional producer {transactional_id!r}: {exc!r}; "
                    "exiting so that a supervisor restarts from the last snapshot"
                ) from exc
            self._producer = producer
            self._txn_ok = False
        return self._producer

    def attach(self, engine: EngineHooks) -> None:
        """Hook into an :class:`~stream_nb.engine.Engine` (before ``engine.restore()``)."""
        self._engine = engine
        self.source.use_sync(self)
        engine.add_extra_state("kafka_sync", self._provide, self._restore)
        engine.add_batch_hook(self._on_batch)
        self._adopt(engine.learner)
        self._set_base(engine.learner.to_state())
        if self.exactly_once:
            for sink in (engine.sink, engine.dead_letters):
                if sink is None:
                    continue
                if not isinstance(sink, KafkaSink):
                    raise ConfigError(
                        f"exactly_once needs Kafka sinks for predictions and dead letters, "
                        f"got {type(sink).__name__}; use kafka:// URLs or drop exactly_once"
                    )
                delivery = self._producer_options.get("delivery_timeout_ms", DELIVERY_TIMEOUT_MS)
                sink.use_sync(self, delivery)
                self._sinks.append(sink)

    def _adopt(self, learner: Learner, *, keep_delta: bool = False) -> None:
        """Make ``learner`` the main model, teeing each learned event into the delta."""
        defer_binning(learner)
        if self._tracker is None:
            self._tracker = DeltaTracker(learner)
        else:
            self._tracker.adopt(learner, keep_delta=keep_delta)
        self._main = learner

    @property
    def base_state(self) -> dict[str, Any]:
        """The base as state (cached until the next fold)."""
        if self._base_state is None:
            assert self.base is not None, "attach() first"
            self._base_state = self.base.to_state()
        return self._base_state

    def _set_base(self, state: dict[str, Any]) -> None:
        self.base = Learner.from_state(state)
        self._base_state = state

    def _refresh_main(self, *, keep_local: bool) -> None:
        """main := base + own deltas not read back yet (+ the local delta, kept)."""
        tracker = self._tracker
        assert tracker is not None, "attach() first"
        main = Learner.from_state(self.base_state)
        for _seq, delta, weight in self._pending:
            DeltaTracker.apply(main, delta, weight)
        if keep_local and tracker.delta.n_learned:
            DeltaTracker.apply(main, tracker.delta, tracker.weight)
        self._adopt(main, keep_delta=keep_local)
        if self._engine is not None:
            self._engine.learner = main

    # ------------------------------------------------------------ snapshot state
    def _provide(self) -> dict[str, Any]:
        self.ensure_tracking()  # e.g. snapshot 0, written before the first batch
        return {
            "format": SYNC_FORMAT,
            "worker": self.worker_id,
            "seq": self.seq,
            # this worker's entry always, 0 before its first fold: a restore then folds
            # its own published deltas the snapshot's base lacks (see _restore)
            "merged": {self.worker_id: 0, **self.merged},
            "offsets": sorted([p, o] for p, o in self.sync_offsets.items()),
            "base": self.base_state,
        }

    def _restore(self, state: Mapping[str, Any]) -> None:
        engine = self._engine
        assert engine is not None, "attach() first"
        if not isinstance(state, Mapping) or state.get("format") != SYNC_FORMAT:
            raise SourceError(f"snapshot's kafka_sync state is not {SYNC_FORMAT!r}")
        self.source.worker_id = str(state["worker"])
        self.seq = int(state["seq"])
        self.merged = {str(k): int(v) for k, v in state["merged"].items()}
        # snapshots from before own deltas were folded on read-back held them in the base
        self.merged.setdefault(self.worker_id, self.seq)
        self.sync_offsets = {int(p): int(o) for p, o in state["offsets"]}
        self._set_base(state["base"])
        self._pending = []
        learner = Learner.from_state(self.base_state)
        engine.learner = learner
        self._adopt(learner)
        for tp in self._partitions:
            if tp.partition in self.sync_offsets:
                self._consumer.seek(tp, self.sync_offsets[tp.partition])

    # ------------------------------------------------------------ the loop
    def ensure_tracking(self) -> None:
        """Track the engine's current learner (it is replaced when a snapshot without sync
        state is restored, or by ``--initial-model``); called before every batch."""
        engine = self._engine
        if engine is not None and engine.learner is not self._main:
            self._adopt(engine.learner)
            self._set_base(engine.learner.to_state())
            self._pending = []

    def _on_batch(self, engine: EngineHooks) -> None:
        self.ensure_tracking()
        if not self._caught_up:
            self._catch_up()
        if time.monotonic() - self._last >= self.interval:
            self.sync()

    def _catch_up(self, timeout: float | None = None) -> None:
        """Read the sync topic to its end before publishing (own newer deltas included)."""
        if timeout is None:  # an open transaction of a dead worker is aborted by then
            timeout = transaction_timeout_ms(self.interval) / 1000.0 + 60.0
        if self._read_to_end(timeout, strict=True):
            self._refresh_main(keep_local=True)
        self._caught_up = True

    def _read_to_end(self, timeout: float, *, strict: bool) -> bool:
        """Fold the sync topic up to its (last stable) end; whether anything was folded."""
        consumer, call_ms = self._consumer, self._call_ms
        try:
            end = consumer.end_offsets(self._partitions, timeout_ms=call_ms)
        except KafkaError as exc:
            if strict:
                raise SourceError(
                    f"cannot read the end of sync topic {self.topic!r}: {exc!r}"
                ) from exc
            trouble.report(
                f"sync-read:{self.topic}", f"cannot read sync topic {self.topic!r}: {exc!r}"
            )
            return False
        deadline = time.monotonic() + timeout
        folded = False
        while any(consumer.position(tp, timeout_ms=call_ms) < end[tp] for tp in self._partitions):
            if time.monotonic() > deadline:
                if strict:
                    raise SourceError(f"cannot read sync topic {self.topic!r} to its end")
                break
            folded = self._fold(self._consumer.poll(timeout_ms=100)) or folded
        return folded

    def _fold(self, polled: Mapping[Any, Any]) -> bool:
        """Fold the deltas in ``polled`` into the base, in topic order, each once."""
        base = self.base
        assert base is not None, "attach() first"
        folded = False
        for tp, messages in polled.items():
            for m in messages:
                self.sync_offsets[tp.partition] = m.offset + 1
                try:
                    raw = m.value if m.value[:1] == b"{" else zlib.decompress(m.value)
                    item = orjson.loads(raw)
                    worker, seq = str(item["worker"]), int(item["seq"])
                except (orjson.JSONDecodeError, zlib.error, KeyError, TypeError, ValueError):
                    log.warning("skipping malformed sync record at %s[%d]@%d", *tp, m.offset)
                    continue
                if seq <= self.merged.get(worker, 0):
                    continue  # folded already (e.g. before a restart)
                DeltaTracker.apply(
                    base, Learner.from_state(item["delta"]), float(item.get("weight", 0.0))
                )
                self.merged[worker] = seq
                if worker == self.worker_id:
                    self.seq = max(self.seq, seq)  # may be newer than a lost snapshot's
                    self._pending = [p for p in self._pending if p[0] > seq]
                else:
                    self.merged_deltas += 1
                folded = True
        if folded:
            self._base_state = None
        return folded

    def sync(self, *, reseek: bool = True) -> bool:
        """One transaction (own delta + offsets [+ outputs]), then fold the sync topic.

        Returns ``False`` when the transaction failed; the uncommitted work is then
        dropped (:meth:`rollback`, re-seeking the consumer with ``reseek``).
        """
        self._last = time.monotonic()
        source = self.source
        offsets = source.committable()
        changed = {tp: o for tp, o in offsets.items() if self._committed.get(tp) != o}
        tracker = self._tracker
        assert tracker is not None, "attach() first"
        has_delta = tracker.delta.n_learned > 0
        if has_delta or changed:
            if not self.exactly_once and self._engine is not None:
                # at-least-once: predictions acknowledged before their offsets commit
                self._engine.sink.flush()
                if self._engine.dead_letters is not None:
                    self._engine.dead_letters.flush()
            producer = self.producer
            metadata = orjson.dumps({"worker": self.worker_id, "seq": self.seq + 1}).decode()
            start = time.perf_counter()
            try:
                if has_delta:
                    record = {
                        "worker": self.worker_id,
                        "seq": self.seq + 1,
                        "delta": tracker.delta.to_state(),
                        "weight": tracker.weight,
                    }
                    value = zlib.compress(orjson.dumps(record))
                    key = self.worker_id.encode()
                    size = record_bytes(key, value, None)
                    if self.delta_limit is not None and size > self.delta_limit:
                        raise SourceError(
                            f"this worker's model delta ({size} bytes compressed) exceeds "
                            f"max.message.bytes={self.delta_limit} of sync topic "
                            f"{self.topic!r}; raise the topic's max.message.bytes or "
                            "shorten sync_interval"
                        )
                    producer.send(self.topic, value=value, key=key)
                if offsets:
                    group = source.consumer.group_metadata()
                    bounded(
                        lambda: producer.send_offsets_to_transaction(
                            {tp: OffsetAndMetadata(o, metadata, -1) for tp, o in offsets.items()},
                            group,
                        ),
                        self._txn_seconds,
                        f"adding offsets to the transaction of worker {self.worker_id!r}",
                        SourceError,
                    )
                bounded(
                    producer.commit_transaction,
                    self._txn_seconds,
                    f"committing the transaction of worker {self.worker_id!r}",
                    SourceError,
                )
            except KafkaError as exc:
                if self._recoverable(exc):
                    self._drop_producer()
                elif is_fatal(exc):
                    raise SourceError(
                        f"sync transaction of worker {self.worker_id!r} failed for good: "
                        f"{exc!r} (another process with this worker id, or missing "
                        "permissions); exiting so that a supervisor restarts from the last "
                        "snapshot"
                    ) from exc
                trouble.report(
                    f"sync:{self.topic}",
                    f"sync transaction failed, dropping uncommitted work: {exc!r}",
                )
                for sink in self._sinks:
                    sink.learn_limits()
                self.rollback(reseek=reseek)
                return False
            self._txn_ok = True
            source.record_commit(offsets, time.perf_counter() - start)
            producer.begin_transaction()
            for sink in self._sinks:
                sink.discard_pending()
            self._committed = dict(offsets)
            if has_delta:
                self.seq += 1
                self.sent += 1
                self._pending.append((self.seq, *tracker.cut()))
                if source.metrics is not None:
                    source.metrics.sync_sent.inc()
        before = self.merged_deltas
        folded = self._read_to_end(SYNC_READ_SECONDS, strict=False)
        if folded:
            self._refresh_main(keep_local=True)
        metrics = source.metrics
        if metrics is not None:
            metrics.sync_merged.inc(self.merged_deltas - before)
            lag = 0
            for tp in self._partitions:
                high = self._consumer.highwater(tp)
                if high is not None:
                    lag += max(0, high - self._consumer.position(tp, timeout_ms=self._call_ms))
            metrics.sync_lag.set(lag)
        engine = self._engine
        if (
            engine is not None
            and engine.checkpointer is not None
            and (has_delta or changed or folded)
        ):
            engine.checkpoint()
        return True

    def settle(self) -> bool:
        """On revoke (helper thread, main thread parked in ``poll``): commit everything
        processed in one sync transaction before the partitions move."""
        if not self._caught_up or self._engine is None:
            return False
        return self.sync(reseek=False)

    def final_sync(self) -> None:
        """On a clean stop: publish the last delta and commit its offsets, read this
        worker's published deltas back into the base (bounded), and when either changed
        anything write a last snapshot (the engine's own final snapshot came before),
        so the snapshot's base is the whole committed model."""
        engine = self._engine
        if not self._caught_up or engine is None:
            return
        # a stop is bounded: the transactional calls (and a rollback's abort) wait at
        # most CLOSE_SECONDS each here, instead of the minute they may take while running
        self._txn_seconds = min(self._txn_seconds, CLOSE_SECONDS)
        before = (self.seq, dict(self._committed))
        try:
            committed = self.sync(reseek=False) and (self.seq, self._committed) != before
            # the base holds this worker's deltas once read back from the topic: a
            # snapshot after that read holds the whole committed model
            folded = self._read_own_deltas(CLOSE_SECONDS)
            if folded:
                self._refresh_main(keep_local=True)
            if (committed or folded) and engine.checkpointer is not None:
                engine.checkpoint()
        except Exception as exc:  # closing: the restart or the next owner redoes the work
            log.warning("last sync on stop failed: %s", exc)

    def _read_own_deltas(self, seconds: float) -> bool:
        """Fold the sync topic until this worker's last published delta is in the base,
        for at most ``seconds``; whether anything was folded."""
        deadline = time.monotonic() + seconds
        folded = False
        while self.merged.get(self.worker_id, 0) < self.seq and time.monotonic() < deadline:
            folded = self._fold(self._consumer.poll(timeout_ms=100)) or folded
        return folded

    def _recoverable(self, exc: KafkaError) -> bool:
        """Whether a fenced or broken producer may be replaced instead of ending the daemon.

        The coordinator fences a producer whose transaction it aborted after
        ``transaction_timeout_ms`` (a long broker outage), as it fences one replaced by
        another process with the same transactional id; librdkafka puts a producer in a
        fatal state when the broker refuses to end its transaction after a restart
        (``INVALID_TXN_STATE``). A producer that has committed a transaction was
        working: it is replaced once (the new one fences whatever the old one left
        open). One that fails before its first commit is not: another process holds
        the id, and this one stops (so two processes with one worker id cannot fence
        each other in turn for ever).
        """
        if not isinstance(exc, (ProducerFencedError, InvalidProducerEpochError, ClientFatalError)):
            return False
        if not self._txn_ok:
            return False
        trouble.report(
            f"fenced:{self.worker_id}",
            f"the transactional producer of worker {self.worker_id!r} cannot go on ({exc!r}): "
            "the coordinator aborted its transaction (an outage longer than "
            "transaction_timeout_ms?) or refused it after a broker restart; rolling back "
            "and starting a new producer",
        )
        return True

    def _drop_producer(self) -> None:
        """Close the producer (bounded) and forget it: the next use creates a new one."""
        producer, self._producer = self._producer, None
        if producer is None:
            return
        try:
            producer.close(timeout=5)
        except KafkaError as exc:
            log.warning("closing the transactional producer: %r", exc)

    def rollback(self, *, reseek: bool) -> None:
        """Drop everything since the last committed transaction: model, outputs, positions."""
        self.rollbacks += 1
        if self.source.metrics is not None:
            self.source.metrics.rollbacks.inc()
        if self._producer is not None:
            producer = self._producer
            try:
                bounded(
                    producer.abort_transaction,
                    self._txn_seconds,
                    f"aborting the transaction of worker {self.worker_id!r}",
                    SourceError,
                )
                producer.begin_transaction()
            except KafkaError as exc:
                if is_fatal(exc) and not self._recoverable(exc):
                    raise SourceError(
                        f"aborting the transaction of worker {self.worker_id!r} failed for "
                        f"good: {exc!r}; exiting so that a supervisor restarts from the last "
                        "snapshot"
                    ) from exc
                log.warning("aborting the transaction failed (%r); a new producer fences it", exc)
                self._drop_producer()
        for sink in self._sinks:
            sink.discard_pending()
        if self._engine is not None and self._tracker is not None:
            self._refresh_main(keep_local=False)
        self._committed = {}
        self.source.reset_positions(reseek=reseek)

    def close(self) -> None:
        """Close the sync consumer and the producer (an open transaction is aborted by the
        broker, or fenced by the next instance), each within a bounded time."""
        try:
            self._consumer.close(autocommit=False, timeout_ms=int(CLOSE_SECONDS * 1000))
        except KafkaError as exc:
            log.warning("closing the sync consumer: %r", exc)
        if self._producer is not None:
            producer, self._producer = self._producer, None
            try:
                producer.close(timeout=5)
            except KafkaError as exc:
                log.warning("closing the transactional producer: %r", exc)
