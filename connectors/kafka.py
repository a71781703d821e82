"""Apache Kafka source and sinks (kafka-python 3.x): crash-safe, consumer-group aware.

Needs the ``kafka`` extra: ``pip install 'stream-nb[kafka]'``.

URLs
----
``kafka://host:port[,host:port]/topic[,topic][?option=value&...]``. Options are
stream-nb's own (``group_id``, ``auto_offset_reset``, ``worker_id``,
``create_topics`` …, see :class:`KafkaSource` and :class:`KafkaSink`) or any
kafka-python consumer/producer option (``security_protocol=SASL_SSL``,
``sasl_mechanism=PLAIN``, ``fetch_max_wait_ms=100`` …), passed through with
numbers and ``true``/``false`` converted.

At start every connector checks that its topics exist (input, predictions, dead
letters, model sync) and fails at once naming a missing one, unless
``create_topics=true`` asks to create it (:func:`~stream_nb.connectors.kafka_client.check_topics`).

Delivery (see :mod:`stream_nb.connectors.base`)
-------------------------------------
* The consumer never auto-commits (``enable_auto_commit=False``) and its reset
  policy is explicit (``auto_offset_reset``, default ``earliest``).
* :meth:`KafkaSource.position` is the *next* offset of every partition this
  process has handed out records from, and the worker id (``{"offsets":
  [[topic, partition, offset], ...], "worker": id}``); the engine stores it in
  the snapshot with the model.
* :meth:`KafkaSource.seek` loads a snapshot's offsets; whenever a partition is
  assigned (at start or in a rebalance) the consumer is positioned there and,
  before anything is fetched, the offset is compared with the group's commit:
  a commit ahead made by this worker means a lost newer snapshot — the snapshot
  wins (the model learned exactly up to it) and the re-read events are counted
  as replayed; one made by another worker wins (that worker learned them).
* A daemon with checkpoints but no snapshot on a group that already committed
  offsets refuses to start (its model would be lost without a word) unless
  ``reset_state`` is set.
* :meth:`KafkaSource.commit` commits the group offsets of the assigned
  partitions only after the engine made the snapshot durable, with the snapshot
  id in the commit metadata.
* Rebalances follow kafka-python 3.x's rules: the listener
  (``AsyncConsumerRebalanceListener``) runs on the client's IO thread, inside
  the main thread's ``poll``, and never blocks it. On revoke it awaits a helper
  thread that checkpoints the engine and commits (or runs a sync transaction)
  before the partitions move; on *lost* nothing is committed and the engine
  returns to its last snapshot (or, with model sync, to its base).
* The consumer is a static group member (``group_instance_id`` from the worker
  id, which the snapshot keeps): a daemon restarted after a crash takes its
  partitions back at once instead of waiting for the session timeout; a clean
  stop leaves the group, so its partitions move on at once.
* Predictions go to a topic through :class:`KafkaSink`, keyed by the event key
  (or id), with the event's headers; each carries the source topic/partition/offset
  so consumers can drop the duplicates at-least-once delivery allows.
  :class:`KafkaDeadLetterSink` keeps the event's key and headers and adds headers
  naming the reason and the source topic/partition/offset.

Staying up
----------
* No single record can stop a partition: a dead letter carries at most a 64 KiB
  prefix of the rejected payload (with its size and SHA-256); a record that still
  exceeds its topic's limit is sent in a smaller form (a dead letter without its
  payload, a prediction without ``log_proba``), else dropped, counted and logged.
* Every blocking client call has a bound: a sink ``flush`` waits up to
  ``delivery_timeout_ms`` (default 30 s) and then raises
  :class:`~stream_nb.SinkError`; commits, offset reads, transactions and closes
  time out likewise. Such an error ends the daemon with a non-zero exit so that
  its supervisor restarts it from the last snapshot: nothing is acknowledged
  (committed) before it is durable, so no event is lost or learned twice.
* Broker trouble is logged at most once per kind every 30 s, with a count
  (:data:`~stream_nb.connectors.kafka_client.trouble`); while no broker connection is up
  :attr:`KafkaSource.ready` is false.

Examples
--------
>>> parse_kafka_url("kafka://127.0.0.1:9092,127.0.0.1:9093/events,more?group_id=g&linger_ms=5")
(['127.0.0.1:9092', '127.0.0.1:9093'], ['events', 'more'], {'group_id': 'g', 'linger_ms': 5})
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
import uuid
import weakref
import zlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import orjson

from stream_nb._exceptions import ConfigError, SinkError, SourceError, StreamNBError
from stream_nb.connectors.base import Record, Sink, Source
from stream_nb.connectors.kafka_client import (
    ClientAdapter,
    TopicInfo,
    bounded,
    carry_headers,
    check_topics,
    fit_dead_letter,
    is_too_large,
    record_bytes,
    shrink_prediction,
    trouble,
)
from stream_nb.engine.sync import DeltaTracker, defer_binning

try:
    from kafka import (
        AsyncConsumerRebalanceListener,
        KafkaConsumer,
        KafkaProducer,
        OffsetAndMetadata,
        TopicPartition,
    )
    from kafka.admin import KafkaAdminClient, MemberToRemove
    from kafka.errors import (
        AuthorizationError,
        CommitFailedError,
        FencedInstanceIdError,
        IllegalStateError,
        InvalidProducerEpochError,
        KafkaError,
        KafkaTimeoutError,
        ProducerFencedError,
        UnsupportedVersionError,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the Kafka connector needs kafka-python; install the 'kafka' extra: "
        "pip install 'stream-nb[kafka]'"
    ) from exc

__all__ = [
    "KafkaDeadLetterSink",
    "KafkaSink",
    "KafkaSource",
    "KafkaSync",
    "parse_kafka_url",
]

_log = logging.getLogger("stream_nb.kafka")

#: Header names written on dead letters.
HEADER_REASON = "stream_nb.reason"
HEADER_TOPIC = "stream_nb.source.topic"
HEADER_PARTITION = "stream_nb.source.partition"
HEADER_OFFSET = "stream_nb.source.offset"

_BOOL = {"true": True, "false": False}

#: Producer batch size (kafka-python's default is 16 KiB).
_BATCH_BYTES = 512 * 1024

#: Producer ``delivery_timeout_ms`` of the sinks: how long records are retried while
#: the broker is away before the daemon gives up and exits for its supervisor.
DELIVERY_TIMEOUT_MS = 30_000

#: Longest wait for a blocking client call that has no timeout of its own or a longer
#: one (seconds): commits, committed-offset reads, transactional calls, admin requests.
CALL_SECONDS = 30.0

#: Longest wait for a connector's close (seconds).
CLOSE_SECONDS = 10.0

#: A flush still waiting after this many seconds logs the broker trouble (then every 30 s).
_FLUSH_SLICE = 5.0

#: Client errors after which retrying cannot help: this process was replaced by another
#: with the same transactional or group instance id, or it is not allowed to act.
_FATAL = (
    AuthorizationError,
    FencedInstanceIdError,
    IllegalStateError,
    InvalidProducerEpochError,
    ProducerFencedError,
    UnsupportedVersionError,
)


def _fatal(exc: BaseException) -> bool:
    """Whether an error ends the daemon (see :data:`_FATAL`; stream-nb's own errors too)."""
    return isinstance(exc, (*_FATAL, StreamNBError))


@functools.cache
def _check_crc32c() -> None:
    """Warn once when kafka-python must compute CRC32C in pure Python."""
    try:
        from kafka.record import util
    except ImportError:  # pragma: no cover - other kafka-python layouts
        return
    if getattr(util, "crc32c_c", True) is None:
        _log.warning(
            "kafka-python computes record-batch CRC32C in pure Python (about 40% of the "
            "daemon's CPU); install the 'kafka' extra or 'pip install crc32c'"
        )


def _convert(value: str) -> Any:
    """Option value from a URL query: bool, int, float or the string itself."""
    low = value.lower()
    if low in _BOOL:
        return _BOOL[low]
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def parse_kafka_url(url: str) -> tuple[list[str], list[str], dict[str, Any]]:
    """Split ``kafka://h:p[,h:p]/topic[,topic][?k=v&...]`` into servers, topics, options.

    Raises
    ------
    ConfigError
        If the scheme is not ``kafka``, or servers or topics are missing.
    """
    parts = urlsplit(url)
    if parts.scheme != "kafka":
        raise ConfigError(f"not a Kafka URL: {url!r}; expected kafka://host:port/topic")
    servers = [s for s in parts.netloc.split(",") if s]
    topics = [unquote(t) for t in parts.path.lstrip("/").split(",") if t]
    if not servers:
        raise ConfigError(f"Kafka URL {url!r} names no broker; expected kafka://host:port/topic")
    if not topics:
        raise ConfigError(f"Kafka URL {url!r} names no topic; expected kafka://host:port/topic")
    options = {k: _convert(v) for k, v in parse_qsl(parts.query, keep_blank_values=True)}
    return servers, topics, options


def _admin(
    servers: list[str] | str,
    options: Mapping[str, Any],
    error: type[StreamNBError],
    seconds: float = CALL_SECONDS,
) -> Any:
    """An admin client with the connectors' connection/security options, or ``error``
    naming the servers if none answers within ``seconds``."""
    try:
        return KafkaAdminClient(
            bootstrap_servers=servers,
            bootstrap_timeout_ms=int(seconds * 1000),
            **_client_options(options),
        )
    except KafkaError as exc:
        shown = servers if isinstance(servers, str) else ",".join(servers)
        raise error(
            f"cannot reach the Kafka brokers {shown} within {seconds:g} s ({exc!r}); "
            "check the host:port in the URL and that the brokers are up"
        ) from exc


def _check(
    servers: list[str] | str,
    options: Mapping[str, Any],
    roles: Mapping[str, str],
    *,
    create: bool,
    partitions: int,
    replication_factor: int,
    single_partition: tuple[str, ...] = (),
    error: type[StreamNBError],
) -> dict[str, TopicInfo]:
    """:func:`~stream_nb.connectors.kafka_client.check_topics` with a fresh admin client, bounded.

    A missing topic is a :class:`~stream_nb.ConfigError`; brokers that cannot be
    reached, or answer too slowly, are an ``error``.
    """
    admin = _admin(servers, options, error)
    try:
        return bounded(
            lambda: check_topics(
                admin,
                [servers] if isinstance(servers, str) else servers,
                roles,
                create=create,
                partitions=partitions,
                replication_factor=replication_factor,
                single_partition=single_partition,
            ),
            CALL_SECONDS,
            f"checking Kafka topics {sorted(roles)}",
            error,
        )
    except KafkaError as exc:
        raise error(f"cannot check Kafka topics {sorted(roles)}: {exc!r}") from exc
    finally:
        admin.close()


def _topic_options(options: dict[str, Any]) -> tuple[bool, int, int]:
    """Pop ``create_topics``, ``topic_partitions``, ``topic_replication_factor``."""
    create = options.pop("create_topics", False)
    partitions = options.pop("topic_partitions", -1)
    replication = options.pop("topic_replication_factor", -1)
    if not isinstance(create, bool):
        raise ConfigError(f"create_topics must be true or false, got {create!r}")
    for name, value in (
        ("topic_partitions", partitions),
        ("topic_replication_factor", replication),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not (value > 0 or value == -1):
            raise ConfigError(
                f"{name} must be a positive integer (or -1 for the broker's default), got {value!r}"
            )
    return create, partitions, replication


#: Characters a ``group_instance_id`` may hold (the broker's rule).
_INSTANCE_ID = re.compile(r"[^A-Za-z0-9._-]")


class _Listener(AsyncConsumerRebalanceListener):
    """Rebalance listener. kafka-python 3.x awaits it on the client's IO thread, inside the
    main thread's ``poll`` (which blocks until the rebalance is done), and keeps sending
    heartbeats while it is suspended; blocking calls from the IO thread raise."""

    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._source._on_revoked_async(set(revoked))

    async def on_partitions_lost(self, lost: Any) -> None:
        self._source._on_revoked(set(lost), "lost", settled=False)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self._source._on_assigned_async(set(assigned))


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
        self._call_ms = int(options.get("request_timeout_ms", 30_000))
        self._client: Any = None  # the KafkaConsumer, created on first use
        self._lock = threading.Lock()
        # next offset of every partition handed out (or restored from a snapshot)
        self._positions: dict[TopicPartition, int] = {}
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
        self._metrics: _KafkaMetrics | None = None
        # transactional mode (model sync / exactly-once): committed offsets win
        self._sync: KafkaSync | None = None
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
        self._bootstrap = bootstrap_servers
        self._options = dict(options)

    # ------------------------------------------------------------ the consumer
    @property
    def group_instance_id(self) -> str | None:
        """The consumer's static member id (``None`` for a dynamic member)."""
        if not self._static:
            return None
        if self._instance_id is not None:
            return self._instance_id
        return _INSTANCE_ID.sub("_", f"stream-nb-{self.worker_id}")[:249]

    @property
    def _consumer(self) -> Any:
        """The consumer, created (and subscribed) on first use."""
        if self._client is None:
            self._start()
        return self._client

    def _start(self) -> None:
        """Create the consumer, refuse a lost model (see :meth:`_refuse_lost_state`), join."""
        consumer = KafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=self.group_id,
            group_instance_id=self.group_instance_id,
            enable_auto_commit=False,
            auto_offset_reset=self._reset,
            **self._options,
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
            starts = consumer.beginning_offsets(tps, timeout_ms=self._call_ms)
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
                    committed = consumer.committed(tp, timeout_ms=self._call_ms)
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
        servers = self._bootstrap if isinstance(self._bootstrap, str) else ",".join(self._bootstrap)
        if connections == 0:
            trouble.report(
                kind,
                f"no connection to the Kafka brokers {servers} (group {self.group_id!r}); "
                "reconnecting with backoff, nothing is committed meanwhile",
            )
        elif connections:
            trouble.clear(kind, f"Kafka brokers {servers} reachable again")

    # ------------------------------------------------------------ rebalance (IO thread)
    async def _on_revoked_async(self, partitions: set[TopicPartition]) -> None:
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
        self._on_revoked(partitions, "revoked", settled=settled)

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
        if self._sync is not None:
            return self._sync.settle()
        engine = self._engine
        if engine is None or engine.checkpointer is None:
            return False
        failures = self.commit_failures
        engine.checkpoint()  # flush sinks, snapshot, then commit (KafkaSource.commit)
        return self.commit_failures == failures

    def _on_revoked(self, partitions: set[TopicPartition], event: str, *, settled: bool) -> None:
        with self._lock:
            self._assigned -= partitions
            for tp in partitions:
                self._unchecked.pop(tp, None)
                if settled:
                    # Committed up to here: whoever owns it next (this worker included)
                    # starts from the commit, not from an older snapshot position.
                    self._positions.pop(tp, None)
            self.rebalances[event] += 1
            if partitions and not settled and (self._sync is not None or event == "lost"):
                self._needs_rollback = True
        if self._metrics is not None:
            self._metrics.rebalance(event)

    def _on_assigned(self, partitions: set[TopicPartition]) -> None:
        with self._lock:
            self._assigned |= partitions
            self.rebalances["assigned"] += 1
            for tp in partitions:
                offset = None if self._sync is not None else self._positions.get(tp)
                if offset is not None:
                    self._unchecked[tp] = offset
                    self._consumer.seek(tp, offset)  # local: safe on the IO thread
        if self._metrics is not None:
            self._metrics.rebalance("assigned")

    async def _on_assigned_async(self, partitions: set[TopicPartition]) -> None:
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
                committed = self._consumer.committed(tp, metadata=True, timeout_ms=self._call_ms)
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
                if self._metrics is not None:
                    self._metrics.replayed.inc(committed.offset - mine)
            else:
                with self._lock:
                    if tp in self._assigned:
                        self._consumer.seek(tp, committed.offset)
                    if self._positions.get(tp) == mine:
                        del self._positions[tp]

    def _committed_by_me(self, metadata: Any) -> bool:
        """Whether commit metadata (``{"snapshot", "worker"}``) names this worker."""
        try:
            data = orjson.loads(metadata or b"{}")
        except (orjson.JSONDecodeError, TypeError):
            return False
        return isinstance(data, dict) and data.get("worker") == self.worker_id

    def next_batch(self, max_records: int, timeout: float) -> list[Record]:
        """Poll up to ``max_records`` records, waiting at most ``timeout`` seconds."""
        if self._sync is not None:
            self._sync.ensure_tracking()
        if self._unchecked:
            with self._lock:
                pending = dict(self._unchecked)
            self._check_committed(pending)
        consumer = self._consumer
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
            if self._sync is not None:
                # Partitions left without a commit (lost, or the sync on revoke failed):
                # the work since the last transaction may cover partitions now owned by
                # another worker, who restarts them from the committed offsets. Drop it,
                # and this poll's records too, and resume from the committed offsets.
                self._sync.rollback(reseek=True)
                return []
            if self._return_to_snapshot():
                return []
        out: list[Record] = []
        positions = self._positions
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
        if self._metrics is not None:
            self._metrics.observe_source(self)
        return out

    def position(self) -> dict[str, Any]:
        """``{"offsets": [[topic, partition, next_offset], ...], "worker": id}`` (sorted).

        The first call (the engine's first snapshot) joins the group, so that a start
        that would lose a model is refused before any snapshot is written.
        """
        if self._client is None and self._engine is not None:
            self._start()
        offsets = sorted([tp.topic, tp.partition, o] for tp, o in self._positions.items())
        return {"offsets": offsets, "worker": self.worker_id}

    def seek(self, position: Mapping[str, Any]) -> None:
        """Resume at a snapshot's offsets (applied when each partition is assigned).

        In transactional mode (:class:`KafkaSync`) the group's committed offsets
        win instead, and this does nothing.
        """
        self._restored = True
        if self._sync is not None:
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
            self._positions = offsets
            for tp in self._assigned:
                if tp in offsets:
                    self._consumer.seek(tp, offsets[tp])

    def commit(self, position: Mapping[str, Any], snapshot_id: str) -> None:
        """Commit the assigned partitions' offsets of a durable snapshot.

        Failures (a rebalance in progress, the broker away) are logged and
        counted, not raised: the next snapshot's commit covers them, and until
        then a restart resumes from the snapshot anyway.
        """
        if self._sync is not None:
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
            self._consumer.commit(offsets, timeout_ms=self._call_ms)
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
            if self._metrics is not None:
                self._metrics.commit_failures.inc()
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
        if self._metrics is not None:
            self._metrics.committed(offsets, self.last_commit_seconds)

    @property
    def ready(self) -> bool:
        """True while the consumer has a broker connection (read from its public metrics;
        true if it keeps none)."""
        if self._client is None:
            return False
        connections = ClientAdapter.connections(self._client)
        return connections is None or connections > 0

    def _committable(self) -> dict[TopicPartition, int]:
        """Next offsets of the assigned partitions that records were handed out from."""
        with self._lock:
            assigned = set(self._assigned)
        return {tp: o for tp, o in self._positions.items() if tp in assigned}

    def _reset_positions(self, *, reseek: bool) -> None:
        """Forget positions; with ``reseek``, go back to the committed offsets (main thread)."""
        self._positions = {}
        if not reseek:
            return
        for tp in self.assignment:
            self._seek_committed(tp)

    def _seek_committed(self, tp: TopicPartition) -> None:
        """Position ``tp`` at the group's committed offset (or the reset policy's end)."""
        try:
            committed = self._consumer.committed(tp, timeout_ms=self._call_ms)
        except KafkaError as exc:
            raise SourceError(
                f"cannot read the committed offset of {tp.topic}[{tp.partition}]: {exc}"
            ) from exc
        if committed is None and self._reset == "latest":
            self._consumer.seek_to_end(tp)
        elif committed is None:
            self._consumer.seek_to_beginning(tp)
        else:
            self._consumer.seek(tp, committed)

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
            mine = self._positions.get(tp)
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
        self._metrics = _metrics_for(registry)

    def attach_engine(self, engine: Any) -> None:
        """Called by the CLI before ``engine.restore()``: lets a revoke checkpoint the engine
        and commit, and starts model sync / exactly-once (:class:`KafkaSync`) when the URL
        asked for it (``sync_topic``, ``exactly_once``)."""
        if self._engine is not None:
            return
        self._engine = engine
        engine.add_batch_hook(self._after_batch)
        if self._sync_config is not None and self._sync is None:
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
        if self._sync is not None:
            if self._clean:
                self._sync.final_sync()
            self._sync.close()
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
            admin = _admin(self._bootstrap, self._options, SourceError, CLOSE_SECONDS)
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


class KafkaSink(Sink):
    """Records to one Kafka topic; ``flush`` waits until every record is acknowledged.

    At construction the topic is checked to exist (see :class:`KafkaSource`'s
    ``create_topics``) and its record size limit read: the smaller of its
    ``max.message.bytes`` and the producer's ``max_request_size``. A record above it
    is sent in a smaller form (:meth:`_smaller`: a prediction without ``log_proba``
    and ``explain``, listed under ``omitted``; then without the carried headers); if
    none fits, or the broker still rejects it as too large, it is dropped, counted
    (``stream_nb_kafka_records_dropped_total``) and logged. The event's headers are
    carried up to :data:`~stream_nb.connectors.kafka_client.MAX_CARRIED_HEADER_BYTES`.

    Parameters
    ----------
    bootstrap_servers
        ``host:port`` strings.
    topic
        Destination topic.
    create_topics, topic_partitions, topic_replication_factor
        Create the topic if it is missing (``-1``: the broker's defaults).
    **options
        Any kafka-python producer option. Defaults: ``acks="all"``,
        ``linger_ms=5``, ``delivery_timeout_ms=30000``: records are retried that
        long (a broker restart), then ``flush`` raises :class:`~stream_nb.SinkError`
        and the daemon exits for its supervisor.
    """

    #: What the records are, in messages and metric labels.
    role = "predictions"

    def __init__(
        self,
        bootstrap_servers: list[str] | str,
        topic: str,
        *,
        create_topics: bool = False,
        topic_partitions: int = -1,
        topic_replication_factor: int = -1,
        **options: Any,
    ) -> None:
        create, partitions, replication = _topic_options(
            {
                "create_topics": create_topics,
                "topic_partitions": topic_partitions,
                "topic_replication_factor": topic_replication_factor,
            }
        )
        self.topic = topic
        options.setdefault("acks", "all")
        options.setdefault("linger_ms", 5)
        options.setdefault("delivery_timeout_ms", DELIVERY_TIMEOUT_MS)
        options.setdefault("request_timeout_ms", min(30_000, options["delivery_timeout_ms"] // 2))
        options.setdefault("reconnect_backoff_max_ms", 5000)
        info = _check(
            bootstrap_servers,
            options,
            {topic: "prediction topic" if self.role == "predictions" else "dead-letter topic"},
            create=create,
            partitions=partitions,
            replication_factor=replication,
            error=SinkError,
        )[topic]
        #: Largest record (as :func:`~stream_nb.connectors.kafka_client.record_bytes` counts) sent
        #: as it is.
        self.limit = int(options.get("max_request_size", 1_048_576))
        if info.max_message_bytes is not None:
            self.limit = min(self.limit, info.max_message_bytes)
        # One engine batch of predictions fits in one producer batch: the producer then
        # wakes its IO thread once per batch instead of once per record. A batch never
        # exceeds what the topic accepts.
        options.setdefault("batch_size", min(_BATCH_BYTES, self.limit))
        self._flush_timeout = options["delivery_timeout_ms"] / 1000.0 + 5.0
        self._bootstrap = bootstrap_servers
        try:
            self._producer = KafkaProducer(bootstrap_servers=bootstrap_servers, **options)
        except KafkaError as exc:
            raise SinkError(f"cannot create a producer for Kafka topic {topic!r}: {exc!r}") from exc
        # (future, value, key, headers) of every record sent since the last flush
        self._pending: list[tuple[Any, bytes, bytes | None, list[tuple[str, bytes]] | None]] = []
        self.written = 0
        #: Records sent in a smaller form / dropped because none fitted.
        self.shrunk = 0
        self.dropped = 0
        self._metrics: _KafkaMetrics | None = None
        # exactly-once: records go through KafkaSync's transactional producer
        self._sync: KafkaSync | None = None
        # a delivery failed: the daemon is ending, close() does not wait
        self._broken = False

    def bind_metrics(self, registry: Any) -> None:
        """Count shrunk and dropped records on a Prometheus registry."""
        self._metrics = _metrics_for(registry)

    def _producer_now(self) -> Any:
        return self._producer if self._sync is None else self._sync.producer

    def _carry(self, headers: Any) -> list[tuple[str, bytes]] | None:
        return carry_headers(headers) or None

    def _smaller(
        self, value: bytes, headers: list[tuple[str, bytes]] | None
    ) -> list[tuple[bytes, list[tuple[str, bytes]] | None]]:
        """Smaller forms of a record, in order: without ``log_proba``/``explain``, then
        also without the carried headers."""
        shrunk = shrink_prediction(value)
        if shrunk is None:
            return [(value, None)] if headers else []
        return [(shrunk, headers), (shrunk, None)] if headers else [(shrunk, None)]

    def write(
        self,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Any = None,
    ) -> None:
        """Send one record (asynchronously; :meth:`flush` waits for it).

        ``headers`` (the event's) are carried up to the documented bound.
        """
        carried = self._carry(headers) if headers else None
        if len(value) + (0 if key is None else len(key)) + 256 > self.limit and (
            record_bytes(key, value, carried) > self.limit
        ):
            self._send_fitting(value, key, carried)
            return
        # the common case inline (once per prediction): see _send
        producer = self._producer if self._sync is None else self._sync.producer
        try:
            future = producer.send(self.topic, value=value, key=key, headers=carried)
        except KafkaError as exc:
            self._send_failed(exc, value, key, carried)
            return
        self._pending.append((future, value, key, carried))

    def _send(
        self, value: bytes, key: bytes | None, headers: list[tuple[str, bytes]] | None
    ) -> None:
        try:
            future = self._producer_now().send(self.topic, value=value, key=key, headers=headers)
        except KafkaError as exc:
            self._send_failed(exc, value, key, headers)
            return
        self._pending.append((future, value, key, headers))

    def _send_failed(
        self,
        exc: KafkaError,
        value: bytes,
        key: bytes | None,
        headers: list[tuple[str, bytes]] | None,
    ) -> None:
        """A send refused at once: too large for the producer (fit it), else fatal."""
        if is_too_large(exc):  # the producer's own limit, below the estimate's
            self.limit = min(self.limit, record_bytes(key, value, headers) - 1)
            self._send_fitting(value, key, headers)
            return
        raise SinkError(
            f"cannot send to Kafka topic {self.topic!r}: {exc!r}; is the broker "
            "reachable? (exiting so that a supervisor restarts from the last snapshot)"
        ) from exc

    def _send_fitting(
        self, value: bytes, key: bytes | None, headers: list[tuple[str, bytes]] | None
    ) -> None:
        """Send the first smaller form within :attr:`limit`, or drop the record."""
        for smaller, kept in self._smaller(value, headers):
            if record_bytes(key, smaller, kept) <= self.limit:
                self.shrunk += 1
                if self._metrics is not None:
                    self._metrics.shrunk.labels(role=self.role).inc()
                trouble.report(
                    f"shrunk:{self.topic}",
                    f"a {self.role} record of {len(value)} bytes exceeds the {self.limit}-byte "
                    f"limit of Kafka topic {self.topic!r}; sent in a smaller form of "
                    f"{len(smaller)} bytes",
                )
                self._send(smaller, key, kept)
                return
        self._drop(value, f"no smaller form fits its {self.limit}-byte limit")

    def _drop(self, value: bytes, why: str) -> None:
        self.dropped += 1
        if self._metrics is not None:
            self._metrics.dropped.labels(role=self.role).inc()
        trouble.report(
            f"dropped:{self.topic}",
            f"dropped a {self.role} record of {len(value)} bytes for Kafka topic "
            f"{self.topic!r}: {why} (counted in stream_nb_kafka_records_dropped_total)",
            level=logging.ERROR,
        )

    def flush(self) -> None:
        """Wait for every sent record's acknowledgement.

        Records the broker rejected as too large are sent again in a smaller form
        (or dropped, counted and logged). While the broker does not answer, the wait
        logs the trouble (rate-limited) and lasts at most ``delivery_timeout_ms``
        plus a few seconds.

        Raises
        ------
        SinkError
            Naming the topic, if a record could not be delivered within the
            producer's ``delivery_timeout_ms``.
        """
        for attempt in range(4):
            pending, self._pending = self._pending, []
            if not pending:
                return
            self._await(len(pending))
            failure: BaseException | None = None
            unsent = [p for p in pending if not p[0].succeeded()]
            self.written += len(pending) - len(unsent)
            for future, value, key, headers in unsent:
                if not future.is_done:
                    failure = failure or KafkaTimeoutError("not acknowledged after a flush")
                elif not is_too_large(future.exception):
                    failure = failure or future.exception
                elif attempt == 3:
                    self._drop(value, "the broker rejected every smaller form as too large")
                else:
                    # The broker's limit is below this record (lowered after the start?):
                    # later records are fitted below it too.
                    self.limit = min(self.limit, record_bytes(key, value, headers) - 1)
                    self._send_fitting(value, key, headers)
            if failure is not None:
                raise self._failed(
                    f"records to Kafka topic {self.topic!r} were not delivered within "
                    f"delivery_timeout_ms: {failure!r}; is the broker reachable? (exiting so "
                    "that a supervisor restarts from the last snapshot; nothing is lost)"
                ) from failure

    def _await(self, count: int) -> None:
        """``producer.flush`` in slices, logging the wait, at most the flush timeout."""
        producer = self._producer_now()
        start = time.monotonic()
        deadline = start + self._flush_timeout
        kind = f"flush:{self.topic}"
        while True:
            left = deadline - time.monotonic()
            try:
                producer.flush(timeout=max(0.0, min(left, _FLUSH_SLICE)))
            except KafkaTimeoutError:
                if time.monotonic() >= deadline:
                    raise self._failed(
                        f"{count} records to Kafka topic {self.topic!r} not acknowledged "
                        f"within {self._flush_timeout:g} s; is the broker reachable? (exiting "
                        "so that a supervisor restarts from the last snapshot)"
                    ) from None
                trouble.report(
                    kind,
                    f"{count} records to Kafka topic {self.topic!r} not acknowledged after "
                    f"{time.monotonic() - start:.0f} s; the producer retries for up to "
                    f"{self._flush_timeout - 5:g} s",
                )
                continue
            except KafkaError as exc:
                raise self._failed(
                    f"flushing records to Kafka topic {self.topic!r} failed: {exc!r}"
                ) from exc
            if trouble.active(kind):
                trouble.clear(kind, f"records to Kafka topic {self.topic!r} acknowledged again")
            return

    def _failed(self, message: str) -> SinkError:
        """A delivery failure: logged now (the daemon's own error line comes after the
        connectors closed), and :meth:`close` no longer waits for the producer."""
        self._broken = True
        _log.error("%s", message)
        return SinkError(message)

    def _discard_pending(self) -> None:
        """Forget sent records (exactly-once: their transaction committed or aborted)."""
        self._pending = []

    def _learn_limits(self) -> None:
        """Exactly-once, after a failed transaction: lower :attr:`limit` below every record
        the broker rejected as too large, so the redone work sends them smaller."""
        for future, value, key, headers in self._pending:
            if future.is_done and is_too_large(future.exception):
                self.limit = min(self.limit, record_bytes(key, value, headers) - 1)

    def close(self) -> None:
        """Flush what is pending and close the producer, within a bounded time.

        A close after a failure (the broker away) does not wait for undeliverable
        records: the restart redoes their work from the last snapshot.
        """
        try:
            if self._pending and not self._broken:
                self._flush_timeout = min(self._flush_timeout, CLOSE_SECONDS)
                self.flush()
        finally:
            try:
                self._producer.close(timeout=0.0 if self._broken else CLOSE_SECONDS)
            except KafkaError as exc:  # records still pending
                _log.warning("closing the producer of Kafka topic %r: %r", self.topic, exc)


class KafkaDeadLetterSink(KafkaSink):
    """Dead letters to a DLQ topic, with the event's key and headers, and headers naming
    the reason and the source record.

    Each record written is a dead letter as encoded by the engine (a JSON object
    with ``reason`` and ``position``); the sink adds the headers
    ``stream_nb.reason``, ``stream_nb.source.topic``,
    ``stream_nb.source.partition`` and ``stream_nb.source.offset`` (source headers
    of those names are dropped). A rejected payload longer than
    :data:`~stream_nb.connectors.kafka_client.DEAD_LETTER_PAYLOAD_BYTES` is cut to that prefix,
    with its size and SHA-256 (:func:`~stream_nb.connectors.kafka_client.fit_dead_letter`); a
    letter still too large for the topic is sent without its payload, then without
    the event's headers; one that fits in no form is dropped, counted and logged.
    """

    role = "dead_letters"

    def write(
        self,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Any = None,
    ) -> None:
        own: list[tuple[str, bytes]] = []
        try:
            letter = orjson.loads(value)
        except orjson.JSONDecodeError:
            letter = {}
        if isinstance(letter, dict):
            position = letter.get("position")
            found: list[tuple[str, Any]] = [(HEADER_REASON, letter.get("reason"))]
            if isinstance(position, dict):
                found += [
                    (HEADER_TOPIC, position.get("topic")),
                    (HEADER_PARTITION, position.get("partition")),
                    (HEADER_OFFSET, position.get("offset")),
                ]
            own = [(name, str(item).encode()) for name, item in found if item is not None]
        carried = own + carry_headers(headers, drop_own=True)
        super().write(fit_dead_letter(value), key=key, headers=carried)

    def _carry(self, headers: Any) -> list[tuple[str, bytes]] | None:
        return list(headers) or None  # write() carried the event's already

    def _smaller(
        self, value: bytes, headers: list[tuple[str, bytes]] | None
    ) -> list[tuple[bytes, list[tuple[str, bytes]] | None]]:
        """Smaller forms of a dead letter: without the payload (size and hash kept), then
        with only stream-nb's own headers."""
        bare = fit_dead_letter(value, keep_payload=False)
        own = [(n, v) for n, v in headers or () if n.startswith("stream_nb.")] or None
        forms = [(bare, headers)]
        if headers != own:
            forms.append((bare, own))
        return forms


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
        self.base: Any = None
        self._base_state: dict[str, Any] | None = None
        # own deltas published but not read back yet: (seq, delta, weight)
        self._pending: list[tuple[int, Any, float]] = []
        #: Deltas published / merged from other workers (for metrics and tests).
        self.sent = 0
        self.merged_deltas = 0
        self.rollbacks = 0
        self._engine: Any = None
        self._main: Any = None
        self._tracker: DeltaTracker | None = None
        self._caught_up = False
        self._last = time.monotonic()
        self._committed: dict[TopicPartition, int] = {}
        self._sinks: list[KafkaSink] = []
        self._txn_seconds = _transaction_call_seconds(DELIVERY_TIMEOUT_MS)
        # the current producer committed a transaction (see _recoverable)
        self._txn_ok = False
        # the sync topic was checked (or created) with the source's topics
        info = source.topic_info.get(topic)
        count = info.partitions if info is not None and info.partitions else 1
        #: Largest delta record the sync topic accepts (``max.message.bytes``), if known.
        self.delta_limit = None if info is None else info.max_message_bytes
        self._call_ms = source._call_ms
        self._consumer = KafkaConsumer(
            bootstrap_servers=source._bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            **_client_options(source._options),
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
            options = {**_client_options(self.source._options), **self._producer_options}
            # Deltas are compressed on their own (zlib, see sync()); predictions in
            # exactly-once mode stay uncompressed like the at-least-once sink's
            # (kafka-python's gzip runs at level 9: 16,200 -> 18,600 events/CPU-s without).
            options.setdefault("acks", "all")
            # a batch of predictions or dead letters never exceeds what their topic accepts
            options.setdefault("batch_size", min([_BATCH_BYTES, *(s.limit for s in self._sinks)]))
            options.setdefault("delivery_timeout_ms", DELIVERY_TIMEOUT_MS)
            options.setdefault(
                "request_timeout_ms", min(30_000, options["delivery_timeout_ms"] // 2)
            )
            options.setdefault("reconnect_backoff_max_ms", 5000)
            # a delta is one record: allow large ones (the broker limits the compressed
            # batch: max.message.bytes of the sync topic, 1 MiB by default)
            options.setdefault("max_request_size", 16 * 1024 * 1024)
            # A worker killed inside a transaction holds back read_committed readers of
            # the sync topic until the broker aborts it: keep that short.
            options.setdefault("transaction_timeout_ms", _transaction_timeout_ms(self.interval))
            self._txn_seconds = _transaction_call_seconds(options["delivery_timeout_ms"])
            transactional_id = f"stream-nb.{self.source.group_id}.{self.worker_id}"
            try:
                producer = KafkaProducer(
                    bootstrap_servers=self.source._bootstrap,
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

    def attach(self, engine: Any) -> None:
        """Hook into an :class:`~stream_nb.engine.Engine` (before ``engine.restore()``)."""
        self._engine = engine
        self.source._sync = self
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
                sink._sync = self
                # the sink waits for the transactional producer's deliveries
                delivery = self._producer_options.get("delivery_timeout_ms", DELIVERY_TIMEOUT_MS)
                sink._flush_timeout = delivery / 1000.0 + 5.0
                self._sinks.append(sink)

    def _adopt(self, learner: Any, *, keep_delta: bool = False) -> None:
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
            self._base_state = self.base.to_state()
        return self._base_state

    def _set_base(self, state: dict[str, Any]) -> None:
        from stream_nb.base import Learner

        self.base = Learner.from_state(state)
        self._base_state = state

    def _refresh_main(self, *, keep_local: bool) -> None:
        """main := base + own deltas not read back yet (+ the local delta, kept)."""
        from stream_nb.base import Learner

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
        from stream_nb.base import Learner

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
        self._engine.learner = learner
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

    def _on_batch(self, engine: Any) -> None:
        self.ensure_tracking()
        if not self._caught_up:
            self._catch_up()
        if time.monotonic() - self._last >= self.interval:
            self.sync()

    def _catch_up(self, timeout: float | None = None) -> None:
        """Read the sync topic to its end before publishing (own newer deltas included)."""
        if timeout is None:  # an open transaction of a dead worker is aborted by then
            timeout = _transaction_timeout_ms(self.interval) / 1000.0 + 60.0
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
        from stream_nb.base import Learner

        folded = False
        for tp, messages in polled.items():
            for m in messages:
                self.sync_offsets[tp.partition] = m.offset + 1
                try:
                    raw = m.value if m.value[:1] == b"{" else zlib.decompress(m.value)
                    item = orjson.loads(raw)
                    worker, seq = str(item["worker"]), int(item["seq"])
                except (orjson.JSONDecodeError, zlib.error, KeyError, TypeError, ValueError):
                    _log.warning("skipping malformed sync record at %s[%d]@%d", *tp, m.offset)
                    continue
                if seq <= self.merged.get(worker, 0):
                    continue  # folded already (e.g. before a restart)
                DeltaTracker.apply(
                    self.base, Learner.from_state(item["delta"]), float(item.get("weight", 0.0))
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
        offsets = source._committable()
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
                    group = source._consumer.group_metadata()
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
                elif _fatal(exc):
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
                    sink._learn_limits()
                self.rollback(reseek=reseek)
                return False
            self._txn_ok = True
            source.last_commit_seconds = time.perf_counter() - start
            if source._metrics is not None:
                source._metrics.committed(
                    {tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()},
                    source.last_commit_seconds,
                )
            producer.begin_transaction()
            for sink in self._sinks:
                sink._discard_pending()
            self._committed = dict(offsets)
            if has_delta:
                self.seq += 1
                self.sent += 1
                self._pending.append((self.seq, *tracker.cut()))
                if source._metrics is not None:
                    source._metrics.sync_sent.inc()
        before = self.merged_deltas
        folded = self._read_to_end(_SYNC_READ_SECONDS, strict=False)
        if folded:
            self._refresh_main(keep_local=True)
        metrics = source._metrics
        if metrics is not None:
            metrics.sync_merged.inc(self.merged_deltas - before)
            lag = 0
            for tp in self._partitions:
                high = self._consumer.highwater(tp)
                if high is not None:
                    lag += max(0, high - self._consumer.position(tp, timeout_ms=self._call_ms))
            metrics.sync_lag.set(lag)
        engine = self._engine
        durable = engine is not None and engine.checkpointer is not None
        if durable and (has_delta or changed or folded):
            engine.checkpoint()
        return True

    def settle(self) -> bool:
        """On revoke (helper thread, main thread parked in ``poll``): commit everything
        processed in one sync transaction before the partitions move."""
        if not self._caught_up or self._engine is None:
            return False
        return self.sync(reseek=False)

    def final_sync(self) -> None:
        """On a clean stop: publish the last delta and commit its offsets."""
        if not self._caught_up or self._engine is None:
            return
        try:
            self.sync(reseek=False)
        except Exception as exc:  # closing: the restart or the next owner redoes the work
            _log.warning("last sync on stop failed: %s", exc)

    def _recoverable(self, exc: KafkaError) -> bool:
        """Whether a fenced producer may be replaced instead of ending the daemon.

        The coordinator fences a producer whose transaction it aborted after
        ``transaction_timeout_ms`` (a long broker outage), as it fences one replaced by
        another process with the same transactional id. A producer that has committed a
        transaction was working: it is replaced once. One fenced before its first commit
        is not: another process holds the id, and this one stops (so two processes
        with one worker id cannot fence each other in turn for ever).
        """
        if not isinstance(exc, (ProducerFencedError, InvalidProducerEpochError)):
            return False
        if not self._txn_ok:
            return False
        trouble.report(
            f"fenced:{self.worker_id}",
            f"the transactional producer of worker {self.worker_id!r} was fenced ({exc!r}): "
            "the coordinator aborted its transaction (an outage longer than "
            "transaction_timeout_ms?); rolling back and starting a new producer",
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
            _log.warning("closing the transactional producer: %r", exc)

    def rollback(self, *, reseek: bool) -> None:
        """Drop everything since the last committed transaction: model, outputs, positions."""
        self.rollbacks += 1
        if self.source._metrics is not None:
            self.source._metrics.rollbacks.inc()
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
                if _fatal(exc) and not self._recoverable(exc):
                    raise SourceError(
                        f"aborting the transaction of worker {self.worker_id!r} failed for "
                        f"good: {exc!r}; exiting so that a supervisor restarts from the last "
                        "snapshot"
                    ) from exc
                _log.warning("aborting the transaction failed (%r); a new producer fences it", exc)
                self._drop_producer()
        for sink in self._sinks:
            sink._discard_pending()
        if self._engine is not None and self._tracker is not None:
            self._refresh_main(keep_local=False)
        self._committed = {}
        self.source._reset_positions(reseek=reseek)

    def close(self) -> None:
        """Close the sync consumer and the producer (an open transaction is aborted by the
        broker, or fenced by the next instance), each within a bounded time."""
        try:
            self._consumer.close(autocommit=False, timeout_ms=int(CLOSE_SECONDS * 1000))
        except KafkaError as exc:
            _log.warning("closing the sync consumer: %r", exc)
        if self._producer is not None:
            producer, self._producer = self._producer, None
            try:
                producer.close(timeout=5)
            except KafkaError as exc:
                _log.warning("closing the transactional producer: %r", exc)


#: Longest a sync waits to read the sync topic back to its end (its own delta included).
_SYNC_READ_SECONDS = 2.0


def _transaction_call_seconds(delivery_timeout_ms: int) -> float:
    """Bound of a transactional call: ``commit_transaction`` first flushes the records
    (up to the delivery timeout), and a coordinator restarting with its broker needs
    time to load the transaction log; at least a minute."""
    return max(delivery_timeout_ms / 1000.0 + 10.0, 60.0)


def _transaction_timeout_ms(interval: float) -> int:
    """Transaction timeout for a sync interval: ten intervals, at least 10 s, at most the
    broker's default ``transaction.max.timeout.ms`` (15 minutes)."""
    return min(900_000, max(10_000, int(10 * interval * 1000)))


def _client_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Connection/security options of a consumer's options that other clients share."""
    keys = ("client_id", "security_protocol", "ssl_", "sasl_", "request_timeout_ms", "api_version")
    return {k: v for k, v in options.items() if k.startswith(keys) and k != "client_id"}


class _KafkaMetrics:
    """``stream_nb_kafka_*`` metrics on a Prometheus registry."""

    def __init__(self, registry: Any) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        labels = ("topic", "partition")
        self.lag = Gauge(
            "stream_nb_kafka_consumer_lag",
            "Records between the consumer's position and the partition's high watermark.",
            labels,
            registry=registry,
        )
        self.committed_offset = Gauge(
            "stream_nb_kafka_committed_offset",
            "Group offset last committed after a durable snapshot.",
            labels,
            registry=registry,
        )
        self.assigned = Gauge(
            "stream_nb_kafka_assigned_partitions",
            "Partitions currently assigned to this consumer.",
            registry=registry,
        )
        self.rebalances = Counter(
            "stream_nb_kafka_rebalances_total",
            "Rebalance callbacks by event (assigned, revoked, lost).",
            ("event",),
            registry=registry,
        )
        self.replayed = Counter(
            "stream_nb_kafka_replayed_events_total",
            "Events re-read below the committed offset because the snapshot was older.",
            registry=registry,
        )
        self.commit_seconds = Histogram(
            "stream_nb_kafka_commit_duration_seconds",
            "Time to commit group offsets after a snapshot.",
            registry=registry,
        )
        self.sync_sent = Counter(
            "stream_nb_kafka_sync_deltas_sent_total",
            "Model deltas this worker committed to the sync topic.",
            registry=registry,
        )
        self.sync_merged = Counter(
            "stream_nb_kafka_sync_deltas_merged_total",
            "Model deltas of other workers merged into this worker's model.",
            registry=registry,
        )
        self.sync_lag = Gauge(
            "stream_nb_kafka_sync_lag",
            "Sync-topic records not yet read by this worker.",
            registry=registry,
        )
        self.rollbacks = Counter(
            "stream_nb_kafka_rollbacks_total",
            "Returns to the last committed transaction (rebalance or failed transaction).",
            registry=registry,
        )
        self.commit_failures = Counter(
            "stream_nb_kafka_commit_failures_total",
            "Offset commits that failed (the next snapshot's commit covers them).",
            registry=registry,
        )
        roles = ("role",)
        self.shrunk = Counter(
            "stream_nb_kafka_records_shrunk_total",
            "Records too large for their topic sent in a smaller form (a dead letter with "
            "a payload prefix or none, a prediction without log_proba), by role.",
            roles,
            registry=registry,
        )
        self.dropped = Counter(
            "stream_nb_kafka_records_dropped_total",
            "Records too large for their topic in every form, dropped, by role.",
            roles,
            registry=registry,
        )
        for role in ("predictions", "dead_letters"):
            self.shrunk.labels(role=role)
            self.dropped.labels(role=role)
        for event in ("assigned", "revoked", "lost"):
            self.rebalances.labels(event=event)

    def rebalance(self, event: str) -> None:
        self.rebalances.labels(event=event).inc()

    def committed(self, offsets: Mapping[Any, Any], seconds: float) -> None:
        self.commit_seconds.observe(seconds)
        for tp, om in offsets.items():
            self.committed_offset.labels(topic=tp.topic, partition=str(tp.partition)).set(om.offset)

    def observe_source(self, source: KafkaSource) -> None:
        consumer = source._consumer
        assigned = source.assignment
        self.assigned.set(len(assigned))
        for tp in assigned:
            try:
                high = consumer.highwater(tp)
            except KafkaError:
                continue
            position = source._positions.get(tp)
            if high is not None and position is not None:
                self.lag.labels(topic=tp.topic, partition=str(tp.partition)).set(
                    max(0, high - position)
                )


#: The metrics of each registry, shared by the connectors that publish on it.
_REGISTRIES: weakref.WeakKeyDictionary[Any, _KafkaMetrics] = weakref.WeakKeyDictionary()


def _metrics_for(registry: Any) -> _KafkaMetrics:
    """The ``stream_nb_kafka_*`` metrics on ``registry`` (registered once)."""
    metrics = _REGISTRIES.get(registry)
    if metrics is None:
        metrics = _REGISTRIES[registry] = _KafkaMetrics(registry)
    return metrics


# ---------------------------------------------------------------- URL factories
def _bind(connector: Any, options: Mapping[str, Any]) -> None:
    metrics = options.get("metrics")
    if metrics is not None and hasattr(connector, "bind_metrics"):
        connector.bind_metrics(metrics.registry)


def open_kafka_source(url: str, options: Mapping[str, Any]) -> KafkaSource:
    """``kafka://h:p/topic[,topic]?group_id=...`` as a :class:`KafkaSource`."""
    servers, topics, query = parse_kafka_url(url)
    if options.get("reset_state"):
        query.setdefault("reset_state", True)
    source = KafkaSource(servers, topics, **query)
    _bind(source, options)
    return source


def open_kafka_sink(url: str, options: Mapping[str, Any]) -> KafkaSink:
    """``kafka://h:p/topic`` as a :class:`KafkaSink` (a :class:`KafkaDeadLetterSink`
    for the dead-letter role)."""
    servers, topics, query = parse_kafka_url(url)
    if len(topics) != 1:
        raise ConfigError(f"a Kafka sink writes one topic, got {topics} in {url!r}")
    cls = KafkaDeadLetterSink if options.get("role") == "dead_letters" else KafkaSink
    sink = cls(servers, topics[0], **query)
    _bind(sink, options)
    return sink


def _register() -> None:
    from stream_nb.connectors.registry import register

    register("kafka", source=open_kafka_source, sink=open_kafka_sink)


_register()
