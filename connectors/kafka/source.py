"""The Kafka source: a consumer group member with rebalances, positions and commits."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from stream_nb._exceptions import ConfigError, SourceError, StreamNBError
from stream_nb.connectors.base import Record, Source
from stream_nb.connectors.kafka.client import (
    ClientAdapter,
    bounded,
    trouble,
)
from stream_nb.connectors.kafka.metrics import _KafkaMetrics, _metrics_for
from stream_nb.connectors.kafka.topics import _admin, _check
from stream_nb.connectors.kafka.url import (
    _INSTANCE_ID,
    CLOSE_SECONDS,
    _check_crc32c,
    _fatal,
    _log,
    _topic_options,
)

try:
    from kafka import (
        AsyncConsumerRebalanceListener,
        KafkaConsumer,
        OffsetAndMetadata,
        TopicPartition,
    )
    from kafka.admin import MemberToRemove
    from kafka.errors import (
        CommitFailedError,
        FencedInstanceIdError,
        KafkaError,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the Kafka connector needs kafka-python; install the 'kafka' extra "
        "(pip install '.[kafka]' in a clone of stream-nb)"
    ) from exc

if TYPE_CHECKING:
    from stream_nb.connectors.kafka.sync import KafkaSync


class _Listener(AsyncConsumerRebalanceListener):
    """Rebalance listener. kafka-python 3.x awaits it on the client's IO thread, inside the
    main thread's ``poll`` (which blocks until the rebalance is done), and keeps sending
    heartbeats while it is suspended; blocking calls from the IO thread raise."""

    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._source.on_revoked_async(set(revoked))

    async def on_partitions_lost(self, lost: Any) -> None:
        self._source.on_revoked(set(lost), "lost", settled=False)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self._source.on_assigned_async(set(assigned))


class KafkaSource(Source):
    """Records from Kafka topics, in a consumer group, resuming from snapshots.

    At construction the topics (and the sync topic) are checked to exist; the
    consumer joins the group on first use (:meth:`position`, :meth:`next_batch`),
    after :meth:`seek` restored the worker id of a snapshot.

    Parameters
    ----------
    bootstrap_servers
        ``host:port`` strings.
    topics
        Topics to subscribe to.
    group_id
        Consumer group; daemons with the same group share the partitions.
    auto_offset_reset
        Where a partition with neither snapshot nor committed offset starts:
        ``earliest`` (default) or ``latest``.
    worker_id
        Names this worker in commit metadata, sync deltas, the transactional id and
        the static group membership (random by default, then kept in snapshots).
    group_instance_id
        The static member id (KIP-345); default ``stream-nb-<worker_id>``, so a
        restarted worker takes its partitions back at once. ``static_membership=false``
        makes the consumer a dynamic member instead (a crashed worker's partitions
        then wait for its ``session_timeout_ms``).
    sync_topic, sync_interval
        Model sync between the group's workers every ``sync_interval`` seconds
        through ``sync_topic`` (see :class:`KafkaSync`; started by
        :meth:`attach_engine`). Offsets are then committed in transactions, and the
        input is read with ``isolation_level="read_committed"`` unless set (so
        committed offsets are fetched stable, KIP-447).
    exactly_once
        Predictions, dead letters, deltas and offsets in one transaction (implies a
        sync topic, ``<group_id>.stream-nb-state`` unless given). ``delivery_timeout_ms``
        then sets the transactional producer's (default 30 s).
    create_topics, topic_partitions, topic_replication_factor
        Create missing topics (with that many partitions and replicas, ``-1`` for the
        broker's defaults; the sync topic gets one partition). Off by default: a
        missing topic is a :class:`~stream_nb.ConfigError` naming it (unless the
        broker creates topics on first use).
    reset_state
        Accept a start without snapshot on a group that already committed offsets:
        the model starts empty at those offsets (``--reset-state``).
    **options
        Any other kafka-python consumer option (security settings included).
        ``enable_auto_commit=True`` is refused.
    """

    seekable = True

    def __init__(
        self,
        bootstrap_servers: list[str] | str,
        topics: list[str] | str,
        *,
        group_id: str = "stream-nb",
        auto_offset_reset: str = "earliest",
        worker_id: str | None = None,
        group_instance_id: str | None = None,
        static_membership: bool = True,
        sync_topic: str | None = None,
        sync_interval: float = 5.0,
        exactly_once: bool = False,
        create_topics: bool = False,
        topic_partitions: int = -1,
        topic_replication_factor: int = -1,
        reset_state: bool = False,
        **options: Any,
    ) -> None:
        if options.get("enable_auto_commit"):
            raise ConfigError(
                "enable_auto_commit=true would commit offsets before the model is "
                "checkpointed; stream-nb commits after each snapshot, drop the option"
            )
        if auto_offset_reset not in ("earliest", "latest"):
            raise ConfigError(
                f"auto_offset_reset must be 'earliest' or 'latest', got {auto_offset_reset!r}"
            )
        if not isinstance(static_membership, bool):
            raise ConfigError(f"static_membership must be true or false, got {static_membership!r}")
        create, partitions, replication = _topic_options(
            {
                "create_topics": create_topics,
                "topic_partitions": topic_partitions,
                "topic_replication_factor": topic_replication_factor,
            }
        )
        options.pop("enable_auto_commit", None)
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        self.group_id = group_id
        #: Names this process in commit metadata and sync deltas; restored from snapshots.
        self.worker_id = worker_id if worker_id is not None else uuid.uuid4().hex[:12]
        self._instance_id = group_instance_id
        self._static = static_membership
        self._reset = auto_offset_reset
        self._reset_state = bool(reset_state)
        if exactly_once and sync_topic is None:
            sync_topic = f"{group_id}.stream-nb-state"
        if sync_topic is not None:
            # Offsets are committed inside transactions: read_committed makes kafka-python
            # fetch committed offsets with require_stable (KIP-447), so a new owner waits
            # for a transaction's offsets instead of reading the previous ones while its
            # commit markers are being written.
            options.setdefault("isolation_level", "read_committed")
        self._sync_config: dict[str, Any] | None = (
            None
            if sync_topic is None
            else {"topic": sync_topic, "interval": sync_interval, "exactly_once": exactly_once}
        )
        delivery = options.pop("delivery_timeout_ms", None)
        if delivery is not None:
            if self._sync_config is None:
                raise ConfigError(
                    "delivery_timeout_ms in a source URL sets the transactional producer of "
                    "sync_topic/exactly_once; without them, set it in the sink URLs"
                )
            self._sync_config["delivery_timeout_ms"] = delivery
        # Reconnect with backoff capped at a few seconds (kafka-python's default cap is 30 s).
        options.setdefault("reconnect_backoff_max_ms", 5000)
        options.setdefault("fetch_max_wait_ms", 100)
        options.setdefault("max_poll_records", 2048)
        _check_crc32c()
        roles = {t: "input topic" for t in self.topics}
        if sync_topic is not None:
            roles[sync_topic] = "model-sync topic"
        #: The topics as found at start (partitions, size limit).
        self.topic_info = _check(
            bootstrap_servers,
            options,
            roles,
            create=create,
            partitions=partitions,
            replication_factor=replication,
            single_partition=() if sync_topic is None else (sync_topic,),
            error=SourceError,
        )
        # Bound for blocking consumer calls (commit, committed offsets, positions).
        self.call_ms = int(options.get("request_timeout_ms", 30_000))
        self._client: Any = None  # the KafkaConsumer, created on first use
        self._lock = threading.Lock()
        # next offset of every partition handed out (or restored from a snapshot)
        self.positions: dict[TopicPartition, int] = {}
        # partitions assigned by the group, and those whose committed offset is unchecked
        self._assigned: set[TopicPartition] = set()
        # partition -> snapshot offset it was positioned at, not yet compared with the commit
        self._unchecked: dict[TopicPartition, int] = {}
        #: ``{"assigned": n, "revoked": n, "lost": n}`` rebalance callbacks seen.
        self.rebalances: dict[str, int] = {"assigned": 0, "revoked": 0, "lost": 0}
        #: Events re-read below the group's committed offset (snapshot older than commit).
        self.replayed = 0
        #: Commits that failed (retried implicitly by the next snapshot's commit).
        self.commit_failures = 0
        self.last_commit_seconds = 0.0
        self.metrics: _KafkaMetrics | None = None
        # transactional mode (model sync / exactly-once): committed offsets win
        self.sync: KafkaSync | None = None
        self._engine: Any = None
        # set while the main thread waits in poll(): rebalances run only then, with the
        # engine between batches (every record handed out is processed)
        self._in_poll = False
        # partitions left without a commit: lost, or (model sync) a failed revoke transaction
        self._needs_rollback = False
        # every record handed out has been processed (a batch hook ran since): a clean stop
        # may publish a last sync delta
        self._clean = True
        # a snapshot was restored (seek() called): its worker id and positions are known
        self._restored = False
        # an error of a rebalance callback's helper thread, raised in the main thread
        self._failure: BaseException | None = None
        self._last_connection_check = 0.0
        self.bootstrap = bootstrap_servers
        self.options = dict(options)

    # ------------------------------------------------------------ the consumer
    def use_sync(self, sync: KafkaSync) -> None:
        """Let ``sync`` (model sync, exactly-once) own the commits and rebalance steps."""
        self.sync = sync

    @property
    def group_instance_id(self) -> str | None:
        """The consumer's static member id (``None`` for a dynamic member)."""
        if not self._static:
            return None
        if self._instance_id is not None:
            return self._instance_id
        return _INSTANCE_ID.sub("_", f"stream-nb-{self.worker_id}")[:249]

    @property
    def consumer(self) -> Any:
        """The consumer, created (and subscribed) on first use."""
        if self._client is None:
            self._start()
        return self._client

    def _start(self) -> None:
        """Create the consumer, refuse a lost model (see :meth:`_refuse_lost_state`), join."""
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group_id,
            group_instance_id=self.group_instance_id,
            enable_auto_commit=False,
            auto_offset_reset=self._reset,
            **self.options,
        )
        try:
            self._refuse_lost_state(consumer)
        except BaseException:
            consumer.close(autocommit=False, timeout_ms=int(CLOSE_SECONDS * 1000))
            raise
        consumer.subscribe(self.topics, listener=_Listener(self))
        self._client = consumer

    def _refuse_lost_state(self, consumer: Any) -> None:
        """With checkpoints but no snapshot restored, refuse a group that has commits.

        The commits say that a model learned the events before them; starting an empty
        one there loses it without a word (an ephemeral checkpoint volume would reset
        the model on every restart). ``reset_state`` accepts it. With model sync the
        model is rebuilt from the sync topic instead, which is refused only once its
        retention deleted deltas.
        """
        engine = self._engine
        if self._reset_state or self._restored or engine is None:
            return
        if getattr(engine, "checkpointer", None) is None:
            return
        if self._sync_config is not None:
            topic = self._sync_config["topic"]
            info = self.topic_info.get(topic)
            count = 1 if info is None or not info.partitions else info.partitions
            tps = [TopicPartition(topic, p) for p in range(count)]
            starts = consumer.beginning_offsets(tps, timeout_ms=self.call_ms)
            deleted = {tp.partition: o for tp, o in starts.items() if o > 0}
            if deleted:
                raise SourceError(
                    f"the checkpoint directory has no snapshot, and model-sync topic "
                    f"{topic!r} of consumer group {self.group_id!r} no longer holds its "
                    f"first deltas (retention deleted offsets below {deleted}): the model "
                    "cannot be rebuilt. Restore the checkpoint directory, or pass "
                    "--reset-state to start a new model from the deltas that are left"
                )
            return
        found: dict[str, int] = {}
        for topic in self.topics:
            info = self.topic_info.get(topic)
            for partition in range(info.partitions if info and info.partitions else 0):
                tp = TopicPartition(topic, partition)
                try:
                    committed = consumer.committed(tp, timeout_ms=self.call_ms)
                except KafkaError as exc:
                    raise SourceError(
                        f"cannot read the committed offsets of consumer group "
                        f"{self.group_id!r} ({exc}); is the broker up?"
                    ) from exc
                if committed is not None:
                    found[f"{topic}[{partition}]"] = committed
        if found:
            shown = ", ".join(f"{k}@{v}" for k, v in sorted(found.items())[:5])
            raise SourceError(
                f"consumer group {self.group_id!r} has committed offsets ({shown}"
                f"{' …' if len(found) > 5 else ''}) but the checkpoint directory has no "
                "snapshot: the model that learned the events before them is lost (a new "
                "or emptied --checkpoint-dir?). Restore the checkpoint directory, or pass "
                "--reset-state to start a new, empty model at the committed offsets"
            )

    def _raise_failure(self) -> None:
        """Raise, in the main thread, what a rebalance callback's helper thread hit."""
        failure, self._failure = self._failure, None
        if failure is not None:
            if isinstance(failure, StreamNBError):
                raise failure
            raise SourceError(
                f"consumer group {self.group_id!r}: {failure!r} during a rebalance; "
                "exiting so that a supervisor restarts from the last snapshot"
            ) from failure

    def _watch_connection(self) -> None:
        """Log (rate-limited) while the consumer has no broker connection; at most once
        a second."""
        now = time.monotonic()
        if now - self._last_connection_check < 1.0:
            return
        self._last_connection_check = now
        connections = ClientAdapter.connections(self._client)
        kind = f"unreachable:{self.group_id}"
        servers = self.bootstrap if isinstance(self.bootstrap, str) else ",".join(self.bootstrap)
        if connections == 0:
            trouble.report(
                kind,
                f"no connection to the Kafka brokers {servers} (group {self.group_id!r}); "
                "reconnecting with backoff, nothing is committed meanwhile",
            )
        elif connections:
            trouble.clear(kind, f"Kafka brokers {servers} reachable again")

    # ------------------------------------------------------------ rebalance (IO thread)
    async def on_revoked_async(self, partitions: set[TopicPartition]) -> None:
        """On revoke, checkpoint and commit what was processed before the partitions move.

        A rebalance runs only inside the main thread's ``poll`` (kafka-python drives the
        group join from there), so the engine is between batches. The blocking work
        (flush, snapshot, commit; or a sync transaction) runs on a helper thread while
        this coroutine waits for it: kafka-python keeps heartbeating meanwhile, and the
        group cannot finish the rebalance, so no other member fetches these partitions'
        committed offsets before the commit is done.
        """
        settled = False
        if partitions and self._in_poll and self._engine is not None:
            settled = await self._in_thread(self._settle)
        self.on_revoked(partitions, "revoked", settled=settled)

    async def _in_thread(self, work: Any) -> bool:
        """Run ``work()`` on a helper thread and wait for it without blocking the IO loop.

        An error there is kept and raised in the main thread after ``poll`` returns: the
        same failure (an undeliverable flush, a snapshot that cannot be written) ends the
        daemon outside a rebalance too.
        """
        try:
            return await ClientAdapter.await_in_thread(self._client, work)
        except Exception as exc:
            _log.error("rebalance work (checkpoint, commit or offset check) failed: %r", exc)
            if self._failure is None:
                self._failure = exc
            return False

    def _settle(self) -> bool:
        """Make everything processed durable and committed (helper thread, main parked).

        Returns whether the assigned partitions' offsets are now committed up to the
        records handed out.
        """
        if self.sync is not None:
            return self.sync.settle()
        engine = self._engine
        if engine is None or engine.checkpointer is None:
            return False
        failures = self.commit_failures
        engine.checkpoint()  # flush sinks, snapshot, then commit (KafkaSource.commit)
        return self.commit_failures == failures

    def on_revoked(self, partitions: set[TopicPartition], event: str, *, settled: bool) -> None:
        with self._lock:
            self._assigned -= partitions
            for tp in partitions:
                self._unchecked.pop(tp, None)
                if settled:
                    # Committed up to here: whoever owns it next (this worker included)
                    # starts from the commit, not from an older snapshot position.
                    self.positions.pop(tp, None)
            self.rebalances[event] += 1
            if partitions and not settled and (self.sync is not None or event == "lost"):
                self._needs_rollback = True
        if self.metrics is not None:
            self.metrics.rebalance(event)

    def _on_assigned(self, partitions: set[TopicPartition]) -> None:
        with self._lock:
            self._assigned |= partitions
            self.rebalances["assigned"] += 1
            for tp in partitions:
                offset = None if self.sync is not None else self.positions.get(tp)
                if offset is not None:
                    self._unchecked[tp] = offset
                    self.consumer.seek(tp, offset)  # local: safe on the IO thread
        if self.metrics is not None:
            self.metrics.rebalance("assigned")

    async def on_assigned_async(self, partitions: set[TopicPartition]) -> None:
        """Position new partitions at the snapshot's offsets, then compare those with the
        group's committed offsets before any record is fetched (helper thread)."""
        self._on_assigned(partitions)
        if self._unchecked and self._in_poll:
            with self._lock:
                pending = dict(self._unchecked)

            def check() -> bool:
                self._check_committed(pending)
                return True

            await self._in_thread(check)

    # ------------------------------------------------------------ main loop
    def _check_committed(self, partitions: dict[TopicPartition, int]) -> None:
        """Compare the snapshot's offsets with the group's (blocking: never on the IO thread).

        Committed offset ahead of the snapshot's: if this worker committed it, its newest
        snapshot was lost and an older one restored — the snapshot wins (the model learned
        exactly up to it) and the re-read events are counted as replayed. If another
        worker committed it, that worker learned those events: continue from its commit.
        """
        for tp, mine in partitions.items():
            try:
                committed = self.consumer.committed(tp, metadata=True, timeout_ms=self.call_ms)
            except KafkaError as exc:
                # Unchecked, the snapshot's offset could re-learn events another worker
                # learned: stop rather than risk it (a restart checks again).
                raise SourceError(
                    f"cannot read the committed offset of {tp.topic}[{tp.partition}] "
                    f"(consumer group {self.group_id!r}): {exc!r}; exiting so that a "
                    "supervisor restarts from the last snapshot"
                ) from exc
            finally:
                with self._lock:
                    if self._unchecked.get(tp, -1) == mine:
                        del self._unchecked[tp]
            if committed is None or committed.offset <= mine:
                continue
            if self._committed_by_me(committed.metadata):
                self.replayed += committed.offset - mine
                if self.metrics is not None:
                    self.metrics.replayed.inc(committed.offset - mine)
            else:
                with self._lock:
                    if tp in self._assigned:
                        self.consumer.seek(tp, committed.offset)
                    if self.positions.get(tp) == mine:
                        del self.positions[tp]

    def _committed_by_me(self, metadata: Any) -> bool:
        """Whether commit metadata (``{"snapshot", "worker"}``) names this worker."""
        try:
            data = orjson.loads(metadata or b"{}")
        except (orjson.JSONDecodeError, TypeError):
            return False
        return isinstance(data, dict) and data.get("worker") == self.worker_id

    def next_batch(self, max_records: int, timeout: float) -> list[Record]:
        """Poll up to ``max_records`` records, waiting at most ``timeout`` seconds."""
        if self.sync is not None:
            self.sync.ensure_tracking()
        if self._unchecked:
            with self._lock:
                pending = dict(self._unchecked)
            self._check_committed(pending)
        consumer = self.consumer
        self._in_poll = True
        try:
            polled = consumer.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
        except KafkaError as exc:
            if _fatal(exc):
                raise SourceError(
                    f"consumer group {self.group_id!r} on {self.topics}: {exc!r}; exiting so "
                    "that a supervisor restarts from the last snapshot (another process with "
                    f"group_instance_id {self.group_instance_id!r}, or missing permissions?)"
                ) from exc
            trouble.report(f"poll:{self.group_id}", f"polling {self.topics} failed: {exc!r}")
            time.sleep(min(timeout, 1.0))  # no busy loop while the error lasts
            polled = {}
        finally:
            self._in_poll = False
        self._raise_failure()
        self._watch_connection()
        if self._needs_rollback:
            with self._lock:
                self._needs_rollback = False
            if self.sync is not None:
                # Partitions left without a commit (lost, or the sync on revoke failed):
                # the work since the last transaction may cover partitions now owned by
                # another worker, who restarts them from the committed offsets. Drop it,
                # and this poll's records too, and resume from the committed offsets.
                self.sync.rollback(reseek=True)
                return []
            if self._return_to_snapshot():
                return []
        out: list[Record] = []
        positions = self.positions
        for tp, messages in polled.items():
            topic, partition = tp.topic, tp.partition
            for m in messages:
                out.append(
                    Record(
                        payload=m.value if m.value is not None else b"",
                        position={"topic": topic, "partition": partition, "offset": m.offset},
                        key=m.key,
                        timestamp=m.timestamp / 1000.0 if m.timestamp is not None else None,
                        headers=tuple((k, v or b"") for k, v in (m.headers or ())),
                    )
                )
            if messages:
                positions[tp] = messages[-1].offset + 1
        if out:
            self._clean = False
        if self.metrics is not None:
            self.metrics.observe_source(self)
        return out

    def position(self) -> dict[str, Any]:
        """``{"offsets": [[topic, partition, next_offset], ...], "worker": id}`` (sorted).

        The first call (the engine's first snapshot) joins the group, so that a start
        that would lose a model is refused before any snapshot is written.
        """
        if self._client is None and self._engine is not None:
            self._start()
        offsets = sorted([tp.topic, tp.partition, o] for tp, o in self.positions.items())
        return {"offsets": offsets, "worker": self.worker_id}

    def seek(self, position: Mapping[str, Any]) -> None:
        """Resume at a snapshot's offsets (applied when each partition is assigned).

        In transactional mode (:class:`KafkaSync`) the group's committed offsets
        win instead, and this does nothing.
        """
        self._restored = True
        if self.sync is not None:
            return
        try:
            offsets = {
                TopicPartition(str(t), int(p)): int(o) for t, p, o in position.get("offsets", [])
            }
        except (TypeError, ValueError) as exc:
            raise SourceError(f"malformed Kafka position in snapshot: {position!r}") from exc
        if isinstance(position.get("worker"), str):
            self.worker_id = position["worker"]  # the worker that committed these offsets
        with self._lock:
            self.positions = offsets
            for tp in self._assigned:
                if tp in offsets:
                    self.consumer.seek(tp, offsets[tp])

    def commit(self, position: Mapping[str, Any], snapshot_id: str) -> None:
        """Commit the assigned partitions' offsets of a durable snapshot.

        Failures (a rebalance in progress, the broker away) are logged and
        counted, not raised: the next snapshot's commit covers them, and until
        then a restart resumes from the snapshot anyway.
        """
        if self.sync is not None:
            return  # offsets are committed inside KafkaSync's transactions
        metadata = orjson.dumps({"snapshot": snapshot_id, "worker": self.worker_id}).decode()
        with self._lock:
            assigned = set(self._assigned)
        offsets = {}
        for t, p, o in position.get("offsets", []):
            tp = TopicPartition(t, p)
            if tp in assigned:
                offsets[tp] = OffsetAndMetadata(o, metadata, -1)
        if not offsets:
            return
        start = time.perf_counter()
        try:
            self.consumer.commit(offsets, timeout_ms=self.call_ms)
        except (CommitFailedError, KafkaError) as exc:
            if _fatal(exc):
                hint = ""
                if isinstance(exc, FencedInstanceIdError):
                    hint = (
                        f" (another process joined as group_instance_id "
                        f"{self.group_instance_id!r}: a copied checkpoint directory, or the "
                        "same worker_id in two URLs?)"
                    )
                raise SourceError(
                    f"committing offsets of consumer group {self.group_id!r} failed: "
                    f"{exc!r}{hint}; exiting so that a supervisor restarts from the last "
                    "snapshot"
                ) from exc
            self.commit_failures += 1
            if self.metrics is not None:
                self.metrics.commit_failures.inc()
            trouble.report(
                f"commit:{self.group_id}",
                f"offset commit for snapshot {snapshot_id} (group {self.group_id!r}) failed: "
                f"{exc!r}; the next snapshot's commit covers it",
            )
            return
        finally:
            self.last_commit_seconds = time.perf_counter() - start
        trouble.clear(
            f"commit:{self.group_id}", f"offset commits of group {self.group_id!r} work again"
        )
        if self.metrics is not None:
            self.metrics.committed(offsets, self.last_commit_seconds)

    @property
    def ready(self) -> bool:
        """True while the consumer has a broker connection (read from its public metrics;
        true if it keeps none)."""
        if self._client is None:
            return False
        connections = ClientAdapter.connections(self._client)
        return connections is None or connections > 0

    def committable(self) -> dict[TopicPartition, int]:
        """Next offsets of the assigned partitions that records were handed out from."""
        with self._lock:
            assigned = set(self._assigned)
        return {tp: o for tp, o in self.positions.items() if tp in assigned}

    def reset_positions(self, *, reseek: bool) -> None:
        """Forget positions; with ``reseek``, go back to the committed offsets (main thread)."""
        self.positions = {}
        if not reseek:
            return
        for tp in self.assignment:
            self._seek_committed(tp)

    def _seek_committed(self, tp: TopicPartition) -> None:
        """Position ``tp`` at the group's committed offset (or the reset policy's end)."""
        try:
            committed = self.consumer.committed(tp, timeout_ms=self.call_ms)
        except KafkaError as exc:
            raise SourceError(
                f"cannot read the committed offset of {tp.topic}[{tp.partition}]: {exc}"
            ) from exc
        if committed is None and self._reset == "latest":
            self.consumer.seek_to_end(tp)
        elif committed is None:
            self.consumer.seek_to_beginning(tp)
        else:
            self.consumer.seek(tp, committed)

    def _return_to_snapshot(self) -> bool:
        """After lost partitions (no model sync): return the engine to its last snapshot.

        The evicted member could not commit, and its partitions' new owners start from the
        committed offsets, which the last snapshot's commit wrote: the events learned since
        would otherwise be in two models. Drops this poll's records; every assigned
        partition is re-positioned (snapshot offset, checked against the commit before the
        next poll; else the committed offset). Returns whether it did so.
        """
        engine = self._engine
        if engine is None or engine.checkpointer is None or not engine.restore():
            return False
        with self._lock:
            assigned = set(self._assigned)
        for tp in assigned:
            mine = self.positions.get(tp)
            if mine is None:
                self._seek_committed(tp)
            else:
                with self._lock:
                    self._unchecked[tp] = mine  # seek() positioned it there
        return True

    @property
    def assignment(self) -> set[TopicPartition]:
        """Partitions currently assigned to this consumer."""
        with self._lock:
            return set(self._assigned)

    def bind_metrics(self, registry: Any) -> None:
        """Publish ``stream_nb_kafka_*`` metrics on a Prometheus registry."""
        self.metrics = _metrics_for(registry)

    def attach_engine(self, engine: Any) -> None:
        """Called by the CLI before ``engine.restore()``: lets a revoke checkpoint the engine
        and commit, and starts model sync / exactly-once (:class:`KafkaSync`) when the URL
        asked for it (``sync_topic``, ``exactly_once``)."""
        if self._engine is not None:
            return
        self._engine = engine
        engine.add_batch_hook(self._after_batch)
        if self._sync_config is not None and self.sync is None:
            from stream_nb.connectors.kafka.sync import KafkaSync  # (it imports this module)

            sync = KafkaSync(self, **self._sync_config)
            sync.attach(engine)

    def _after_batch(self, engine: Any) -> None:
        self._clean = True  # the engine processed every record handed out

    def close(self) -> None:
        """Leave the group without committing (offsets follow snapshots only).

        With model sync, a clean stop (every record handed out processed) first runs a
        last sync transaction, so the other workers get this worker's last delta and
        its partitions move on from the offsets it reached. A static member also asks
        the coordinator to remove it (static members send no LeaveGroup of their own),
        so its partitions move on at once; a crashed worker (no close) keeps them until
        it is back or its session times out. Every step is bounded.
        """
        if self.sync is not None:
            if self._clean:
                self.sync.final_sync()
            self.sync.close()
        consumer, self._client = self._client, None
        if consumer is None:
            return
        reachable = ClientAdapter.connections(consumer) != 0
        try:
            consumer.close(autocommit=False, timeout_ms=int(CLOSE_SECONDS * 1000))
        except KafkaError as exc:
            _log.warning("closing the Kafka consumer failed: %r", exc)
        instance = self.group_instance_id
        if instance is not None and reachable:
            self._leave(instance)

    def _leave(self, instance: str) -> None:
        """Remove static member ``instance`` from the group (best effort, bounded)."""
        try:
            admin = _admin(self.bootstrap, self.options, SourceError, CLOSE_SECONDS)
        except SourceError as exc:
            _log.warning("cannot leave consumer group %r: %s", self.group_id, exc)
            return
        try:
            bounded(
                lambda: admin.remove_group_members(
                    self.group_id,
                    [MemberToRemove(group_instance_id=instance, reason="stream-nb stopped")],
                ),
                CLOSE_SECONDS,
                f"leaving consumer group {self.group_id!r}",
                SourceError,
            )
        except (KafkaError, SourceError) as exc:
            _log.warning(
                "static member %r could not leave consumer group %r (%r); its partitions "
                "move on after session_timeout_ms",
                instance,
                self.group_id,
                exc,
            )
        finally:
            admin.close()
