"""The Kafka source: a consumer group member with positions, commits and a clean leave.

The partitions it owns and their offsets (rebalances, snapshot offsets reconciled with
the group's commits) are :mod:`stream_nb.connectors.kafka.rebalance`'s.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson
from kafka import OffsetAndMetadata, TopicPartition
from kafka.admin import MemberToRemove
from kafka.errors import CommitFailedError, FencedInstanceIdError, KafkaError
from prometheus_client import CollectorRegistry

from stream_nb._exceptions import ConfigError, SourceError
from stream_nb.connectors.base import EngineHooks, Record, Source
from stream_nb.connectors.kafka.block import MessageBlock
from stream_nb.connectors.kafka.client import (
    bounded,
    client_adapter,
    trouble,
    warn_without_crc32c,
)
from stream_nb.connectors.kafka.metrics import KafkaMetrics, metrics_for
from stream_nb.connectors.kafka.rebalance import Partitions, RebalanceListener, refuse_lost_model
from stream_nb.connectors.kafka.topics import admin_client, check_topics
from stream_nb.connectors.kafka.url import (
    CLOSE_SECONDS,
    instance_id,
    is_fatal,
    log,
    topic_options,
)

if TYPE_CHECKING:
    from stream_nb.connectors.kafka.sync import KafkaSync

__all__ = ["KafkaSource"]


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
    client
        The Kafka client: ``kafka-python`` (default) or ``confluent`` (librdkafka, the
        ``kafka-fast`` extra; see :mod:`~stream_nb.connectors.kafka.confluent`). Model
        sync and the sinks of a daemon use each their own URL's client.
    **options
        Any other kafka-python consumer option (security settings included; with
        ``client=confluent`` renamed for librdkafka, or librdkafka's own).
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
        client: str | None = None,
        **options: Any,
    ) -> None:
        #: The Kafka client's adapter (:func:`~stream_nb.connectors.kafka.client.client_adapter`).
        self.adapter = client_adapter(client)
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
        create, partitions, replication = topic_options(
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
        if self.adapter.name == "kafka-python":
            warn_without_crc32c()
        roles = {t: "input topic" for t in self.topics}
        if sync_topic is not None:
            roles[sync_topic] = "model-sync topic"
        #: The topics as found at start (partitions, size limit).
        self.topic_info = check_topics(
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
        #: The assigned partitions and where this member reads them.
        self.partitions = Partitions(
            lambda: self.consumer,
            group_id=group_id,
            call_ms=self.call_ms,
            auto_offset_reset=auto_offset_reset,
        )
        self._listener = RebalanceListener(self)
        #: Commits that failed (retried implicitly by the next snapshot's commit).
        self.commit_failures = 0
        self.last_commit_seconds = 0.0
        self.metrics: KafkaMetrics | None = None
        # transactional mode (model sync / exactly-once): committed offsets win
        self.sync: KafkaSync | None = None
        self._engine: EngineHooks | None = None
        # every record handed out has been processed (a batch hook ran since): a clean stop
        # may publish a last sync delta
        self._clean = True
        # a snapshot was restored (seek() called): its worker id and positions are known
        self._restored = False
        self._last_connection_check = 0.0
        self.bootstrap = bootstrap_servers
        self.options = dict(options)

    # ------------------------------------------------------------ wiring
    def use_sync(self, sync: KafkaSync) -> None:
        """Let ``sync`` (model sync, exactly-once) own the commits and rebalance steps:
        the group's committed offsets then win over the snapshot's."""
        self.sync = sync
        self.partitions.transactional = True

    def bind_metrics(self, registry: CollectorRegistry) -> None:
        """Publish ``stream_nb_kafka_*`` metrics on a Prometheus registry."""
        self.metrics = self.partitions.metrics = metrics_for(registry)

    def attach_engine(self, engine: EngineHooks) -> None:
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

    @property
    def engine(self) -> EngineHooks | None:
        """The engine this source is attached to (:meth:`attach_engine`), if any."""
        return self._engine

    def _after_batch(self, engine: EngineHooks) -> None:
        self._clean = True  # the engine processed every record handed out

    # ------------------------------------------------------------ the partitions
    @property
    def positions(self) -> dict[TopicPartition, int]:
        """Next offset of every partition handed out (or restored from a snapshot)."""
        return self.partitions.positions

    @property
    def assignment(self) -> set[TopicPartition]:
        """Partitions currently assigned to this consumer."""
        return self.partitions.assigned()

    @property
    def rebalances(self) -> dict[str, int]:
        """``{"assigned": n, "revoked": n, "lost": n}`` rebalance callbacks seen."""
        return self.partitions.rebalances

    @property
    def replayed(self) -> int:
        """Events re-read below the group's committed offset (snapshot older than commit)."""
        return self.partitions.replayed

    def committable(self) -> dict[TopicPartition, int]:
        """Next offsets of the assigned partitions that records were handed out from."""
        return self.partitions.committable()

    def reset_positions(self, *, reseek: bool) -> None:
        """Forget positions; with ``reseek``, go back to the committed offsets (main thread)."""
        self.partitions.reset(reseek=reseek)

    # ------------------------------------------------------------ the consumer
    @property
    def group_instance_id(self) -> str | None:
        """The consumer's static member id (``None`` for a dynamic member)."""
        if not self._static:
            return None
        if self._instance_id is not None:
            return self._instance_id
        return instance_id(self.worker_id)

    @property
    def consumer(self) -> Any:
        """The consumer, created (and subscribed) on first use."""
        if self._client is None:
            self._start()
        return self._client

    def _start(self) -> None:
        """Create the consumer, refuse a lost model (see :meth:`_refuse_lost_state`), join."""
        consumer = self.adapter.consumer(
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
        self._client = consumer
        self.adapter.subscribe(consumer, self.topics, self._listener)

    def _refuse_lost_state(self, consumer: Any) -> None:
        """With checkpoints but no snapshot restored, refuse a group that has commits
        (:func:`~stream_nb.connectors.kafka.rebalance.refuse_lost_model`); ``reset_state``
        accepts it."""
        engine = self._engine
        if self._reset_state or self._restored or engine is None or engine.checkpointer is None:
            return
        refuse_lost_model(
            consumer,
            group_id=self.group_id,
            topics=self.topics,
            topic_info=self.topic_info,
            sync_topic=None if self._sync_config is None else self._sync_config["topic"],
            call_ms=self.call_ms,
        )

    def _watch_connection(self) -> None:
        """Log (rate-limited) while the consumer has no broker connection; at most once
        a second."""
        now = time.monotonic()
        if now - self._last_connection_check < 1.0:
            return
        self._last_connection_check = now
        connections = self.adapter.connections(self._client)
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

    # ------------------------------------------------------------ Source
    def next_batch(self, max_records: int, timeout: float) -> list[Record]:
        """Poll up to ``max_records`` records, waiting at most ``timeout`` seconds."""
        block = self.next_block(max_records, timeout)
        return [] if block is None else block.records()

    def next_block(self, max_records: int, timeout: float) -> MessageBlock | None:
        """:meth:`next_batch` as one :class:`~stream_nb.connectors.kafka.block.MessageBlock`
        (no :class:`~stream_nb.connectors.base.Record` per message), or ``None`` when
        nothing came."""
        polled = self._poll(max_records, timeout)
        if polled is None:
            return None
        block = self.adapter.block(polled, self.positions) if polled else None
        if block is not None and len(block):
            self._clean = False
        else:
            block = None
        if self.metrics is not None:
            self.metrics.observe_source(self)
        return block

    def _poll(self, max_records: int, timeout: float) -> Any:
        """The client's messages of one poll (nothing if it failed), or ``None`` when its
        records were dropped (partitions lost)."""
        if self.sync is not None:
            self.sync.ensure_tracking()
        pending = self.partitions.unchecked()
        if pending:
            self.partitions.check_committed(pending, self.worker_id)
        consumer = self.consumer
        with self._listener.polling():
            try:
                polled = self.adapter.poll(consumer, max_records, int(timeout * 1000))
            except KafkaError as exc:
                if is_fatal(exc):
                    raise SourceError(
                        f"consumer group {self.group_id!r} on {self.topics}: {exc!r}; exiting "
                        "so that a supervisor restarts from the last snapshot (another process "
                        f"with group_instance_id {self.group_instance_id!r}, or missing "
                        "permissions?)"
                    ) from exc
                trouble.report(f"poll:{self.group_id}", f"polling {self.topics} failed: {exc!r}")
                time.sleep(min(timeout, 1.0))  # no busy loop while the error lasts
                polled = ()
        self._listener.raise_failure()
        self._watch_connection()
        if self.partitions.take_rollback():
            if self.sync is not None:
                # Partitions left without a commit (lost, or the sync on revoke failed):
                # the work since the last transaction may cover partitions now owned by
                # another worker, who restarts them from the committed offsets. Drop it,
                # and this poll's records too, and resume from the committed offsets.
                self.sync.rollback(reseek=True)
                return None
            if self._return_to_snapshot():
                return None
        return polled

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
        self.partitions.restore(offsets)

    def commit(self, position: Mapping[str, Any], snapshot_id: str) -> None:
        """Commit the assigned partitions' offsets of a durable snapshot.

        Failures (a rebalance in progress, the broker away) are logged and
        counted, not raised: the next snapshot's commit covers them, and until
        then a restart resumes from the snapshot anyway.
        """
        if self.sync is not None:
            return  # offsets are committed inside KafkaSync's transactions
        metadata = orjson.dumps({"snapshot": snapshot_id, "worker": self.worker_id}).decode()
        assigned = self.partitions.assigned()
        offsets: dict[TopicPartition, int] = {}
        for t, p, o in position.get("offsets", []):
            tp = TopicPartition(t, p)
            if tp in assigned:
                offsets[tp] = o
        if not offsets:
            return
        start = time.perf_counter()
        try:
            self.consumer.commit(
                {tp: OffsetAndMetadata(o, metadata, -1) for tp, o in offsets.items()},
                timeout_ms=self.call_ms,
            )
        except (CommitFailedError, KafkaError) as exc:
            if is_fatal(exc):
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
        self.record_commit(offsets, self.last_commit_seconds)

    def record_commit(self, offsets: Mapping[TopicPartition, int], seconds: float) -> None:
        """Record a commit of ``offsets`` that took ``seconds`` (by :meth:`commit`, or by
        model sync's transaction)."""
        self.last_commit_seconds = seconds
        if self.metrics is not None:
            self.metrics.committed(offsets, seconds)

    @property
    def ready(self) -> bool:
        """True while the consumer has a broker connection (read from its public metrics;
        true if it keeps none)."""
        if self._client is None:
            return False
        connections = self.adapter.connections(self._client)
        return connections is None or connections > 0

    # ------------------------------------------------------------ rebalances
    def settle(self) -> bool:
        """On revoke (a helper thread, the main thread parked in ``poll``): make everything
        processed durable and committed.

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
        self.partitions.reposition()
        return True

    # ------------------------------------------------------------ stopping
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
        reachable = self.adapter.connections(consumer) != 0
        try:
            consumer.close(autocommit=False, timeout_ms=int(CLOSE_SECONDS * 1000))
        except KafkaError as exc:
            log.warning("closing the Kafka consumer failed: %r", exc)
        instance = self.group_instance_id
        if instance is not None and reachable:
            self._leave(instance)

    def _leave(self, instance: str) -> None:
        """Remove static member ``instance`` from the group (best effort, bounded)."""
        try:
            admin = admin_client(self.bootstrap, self.options, SourceError, CLOSE_SECONDS)
        except SourceError as exc:
            log.warning("cannot leave consumer group %r: %s", self.group_id, exc)
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
        except Exception as exc:  # best effort: the stop is complete and durable already
            log.warning(
                "static member %r could not leave consumer group %r (%r); its partitions "
                "move on after session_timeout_ms",
                instance,
                self.group_id,
                exc,
            )
        finally:
            admin.close()
