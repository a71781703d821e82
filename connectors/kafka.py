"""Apache Kafka source and sinks (kafka-python 3.x): crash-safe, consumer-group aware.

Needs the ``kafka`` extra: ``pip install 'stream-nb[kafka]'``.

URLs
----
``kafka://host:port[,host:port]/topic[,topic][?option=value&...]``. Options are
stream-nb's own (``group_id``, ``auto_offset_reset``, ``client_id``) or any
kafka-python consumer/producer option (``security_protocol=SASL_SSL``,
``sasl_mechanism=PLAIN``, ``fetch_max_wait_ms=100`` …), passed through with
numbers and ``true``/``false`` converted.

Delivery (see :mod:`connectors.base`)
-------------------------------------
* The consumer never auto-commits (``enable_auto_commit=False``) and its reset
  policy is explicit (``auto_offset_reset``, default ``earliest``).
* :meth:`KafkaSource.position` is the *next* offset of every partition this
  process has handed out records from (``{"offsets": [[topic, partition,
  offset], ...]}``); the engine stores it in the snapshot with the model.
* :meth:`KafkaSource.seek` loads a snapshot's offsets; whenever a partition is
  assigned (at start or in a rebalance) the consumer is positioned there, so the
  snapshot wins over the group's committed offset (the model learned exactly up
  to it). Events re-read below the committed offset are counted as replayed.
* :meth:`KafkaSource.commit` commits the group offsets of the assigned
  partitions only after the engine made the snapshot durable, with the snapshot
  id in the commit metadata.
* Rebalances follow kafka-python 3.x's rules: the listener runs on the client's
  IO thread, so it only does local work (``seek``, bookkeeping); blocking calls
  (``committed``) are deferred to the main loop. Offsets are committed after
  every snapshot, so a revoke needs no extra commit; on *lost* nothing is
  committed.
* Predictions go to a topic through :class:`KafkaSink`, keyed by the event key
  (or id); each carries the source topic/partition/offset so consumers can drop
  the duplicates at-least-once delivery allows. :class:`KafkaDeadLetterSink`
  adds headers naming the reason and the source topic/partition/offset.

Broker trouble: the clients reconnect with backoff by themselves; while no
broker connection is up :attr:`KafkaSource.ready` is false; a sink ``flush``
waits up to ``delivery_timeout_ms`` and then raises :class:`~stream_nb.SinkError`
naming the topic. Nothing is acknowledged (committed) before it is durable, so
no event is lost.

Examples
--------
>>> parse_kafka_url("kafka://127.0.0.1:9092,127.0.0.1:9093/events,more?group_id=g&linger_ms=5")
(['127.0.0.1:9092', '127.0.0.1:9093'], ['events', 'more'], {'group_id': 'g', 'linger_ms': 5})
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import orjson

from connectors.base import Record, Sink, Source
from stream_nb._exceptions import ConfigError, SinkError, SourceError

try:
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.errors import CommitFailedError, KafkaError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the Kafka connector needs kafka-python; install the 'kafka' extra: "
        "pip install 'stream-nb[kafka]'"
    ) from exc

__all__ = [
    "KafkaDeadLetterSink",
    "KafkaSink",
    "KafkaSource",
    "parse_kafka_url",
]

_log = logging.getLogger("stream_nb.kafka")

#: Header names written on dead letters.
HEADER_REASON = "stream_nb.reason"
HEADER_TOPIC = "stream_nb.source.topic"
HEADER_PARTITION = "stream_nb.source.partition"
HEADER_OFFSET = "stream_nb.source.offset"

_BOOL = {"true": True, "false": False}


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


def _connected(client: Any) -> bool:
    """Whether a kafka-python 3.x client holds at least one live broker connection."""
    try:
        conns = client._client._manager._conns  # no public API for this in kafka-python 3.0
        return any(conn.connected for conn in list(conns.values()))
    except AttributeError:  # pragma: no cover - other kafka-python layouts
        return True


class _Listener(ConsumerRebalanceListener):
    """Rebalance listener: local work only (it runs on the client's IO thread)."""

    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    def on_partitions_revoked(self, revoked: Any) -> None:
        self._source._on_revoked(set(revoked), "revoked")

    def on_partitions_lost(self, lost: Any) -> None:
        self._source._on_revoked(set(lost), "lost")

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._source._on_assigned(set(assigned))


class KafkaSource(Source):
    """Records from Kafka topics, in a consumer group, resuming from snapshots.

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
        Written in the commit metadata with the snapshot id.
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
        worker_id: str = "stream-nb",
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
        options.pop("enable_auto_commit", None)
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        self.group_id = group_id
        self.worker_id = worker_id
        options.setdefault("fetch_max_wait_ms", 100)
        options.setdefault("max_poll_records", 2048)
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            group_id=group_id,
            enable_auto_commit=False,
            auto_offset_reset=auto_offset_reset,
            **options,
        )
        self._lock = threading.Lock()
        # next offset of every partition handed out (or restored from a snapshot)
        self._positions: dict[TopicPartition, int] = {}
        # partitions assigned by the group, and those whose committed offset is unchecked
        self._assigned: set[TopicPartition] = set()
        # partition -> snapshot offset it was positioned at (None: committed/reset)
        self._unchecked: dict[TopicPartition, int | None] = {}
        #: ``{"assigned": n, "revoked": n, "lost": n}`` rebalance callbacks seen.
        self.rebalances: dict[str, int] = {"assigned": 0, "revoked": 0, "lost": 0}
        #: Events re-read below the group's committed offset (snapshot older than commit).
        self.replayed = 0
        #: Commits that failed (retried implicitly by the next snapshot's commit).
        self.commit_failures = 0
        self.last_commit_seconds = 0.0
        self._metrics: _KafkaMetrics | None = None
        self._consumer.subscribe(self.topics, listener=_Listener(self))

    # ------------------------------------------------------------ rebalance (IO thread)
    def _on_revoked(self, partitions: set[TopicPartition], event: str) -> None:
        with self._lock:
            self._assigned -= partitions
            for tp in partitions:
                self._unchecked.pop(tp, None)
            self.rebalances[event] += 1
        if self._metrics is not None:
            self._metrics.rebalance(event)

    def _on_assigned(self, partitions: set[TopicPartition]) -> None:
        with self._lock:
            self._assigned |= partitions
            self.rebalances["assigned"] += 1
            for tp in partitions:
                offset = self._positions.get(tp)
                self._unchecked[tp] = offset
                if offset is not None:
                    self._consumer.seek(tp, offset)  # local: safe on the IO thread
        if self._metrics is not None:
            self._metrics.rebalance("assigned")

    # ------------------------------------------------------------ main loop
    def _check_committed(self, partitions: dict[TopicPartition, int | None]) -> None:
        """Compare the snapshot's offsets with the group's (blocking: main thread only)."""
        for tp, mine in partitions.items():
            try:
                committed = self._consumer.committed(tp, metadata=True)
            except KafkaError as exc:
                _log.warning("cannot read committed offset of %s[%d]: %s", *tp, exc)
                continue
            finally:
                with self._lock:
                    if self._unchecked.get(tp, -1) == mine:
                        del self._unchecked[tp]
            if committed is None or mine is None:
                continue
            if committed.offset > mine:
                # The snapshot wins: the model learned exactly up to ``mine``.
                self.replayed += committed.offset - mine
                if self._metrics is not None:
                    self._metrics.replayed.inc(committed.offset - mine)

    def next_batch(self, max_records: int, timeout: float) -> list[Record]:
        """Poll up to ``max_records`` records, waiting at most ``timeout`` seconds."""
        if self._unchecked:
            with self._lock:
                pending = dict(self._unchecked)
            self._check_committed(pending)
        polled = self._consumer.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
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
        if self._metrics is not None:
            self._metrics.observe_source(self)
        return out

    def position(self) -> dict[str, Any]:
        """``{"offsets": [[topic, partition, next_offset], ...]}`` (sorted)."""
        return {"offsets": sorted([tp.topic, tp.partition, o] for tp, o in self._positions.items())}

    def seek(self, position: Mapping[str, Any]) -> None:
        """Resume at a snapshot's offsets (applied when each partition is assigned)."""
        try:
            offsets = {
                TopicPartition(str(t), int(p)): int(o) for t, p, o in position.get("offsets", [])
            }
        except (TypeError, ValueError) as exc:
            raise SourceError(f"malformed Kafka position in snapshot: {position!r}") from exc
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
            self._consumer.commit(offsets)
        except (CommitFailedError, KafkaError) as exc:
            self.commit_failures += 1
            _log.warning("offset commit for snapshot %s failed: %s", snapshot_id, exc)
            return
        finally:
            self.last_commit_seconds = time.perf_counter() - start
        if self._metrics is not None:
            self._metrics.committed(offsets, self.last_commit_seconds)

    @property
    def ready(self) -> bool:
        """True while a broker connection is up."""
        return _connected(self._consumer)

    @property
    def assignment(self) -> set[TopicPartition]:
        """Partitions currently assigned to this consumer."""
        with self._lock:
            return set(self._assigned)

    def bind_metrics(self, registry: Any) -> None:
        """Publish ``stream_nb_kafka_*`` metrics on a Prometheus registry."""
        self._metrics = _KafkaMetrics(registry)

    def close(self) -> None:
        """Leave the group without committing (offsets follow snapshots only)."""
        try:
            self._consumer.close(autocommit=False)
        except KafkaError as exc:  # pragma: no cover - best effort
            _log.warning("closing the Kafka consumer failed: %s", exc)


class KafkaSink(Sink):
    """Records to one Kafka topic; ``flush`` waits until every record is acknowledged.

    Parameters
    ----------
    bootstrap_servers
        ``host:port`` strings.
    topic
        Destination topic.
    **options
        Any kafka-python producer option. Defaults: ``acks="all"``,
        ``linger_ms=5``, ``delivery_timeout_ms=120000`` (retries ride out a
        broker restart of up to two minutes).
    """

    def __init__(self, bootstrap_servers: list[str] | str, topic: str, **options: Any) -> None:
        self.topic = topic
        options.setdefault("acks", "all")
        options.setdefault("linger_ms", 5)
        options.setdefault("delivery_timeout_ms", 120_000)
        options.setdefault("request_timeout_ms", 30_000)
        self._flush_timeout = options["delivery_timeout_ms"] / 1000.0 + 5.0
        self._producer = KafkaProducer(bootstrap_servers=bootstrap_servers, **options)
        self._futures: list[Any] = []
        self.written = 0

    def write(
        self,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Send one record (asynchronously; :meth:`flush` waits for it)."""
        try:
            future = self._producer.send(self.topic, value=value, key=key, headers=headers or None)
        except KafkaError as exc:
            raise SinkError(f"cannot send to Kafka topic {self.topic!r}: {exc}") from exc
        self._futures.append(future)

    def flush(self) -> None:
        """Wait for every sent record's acknowledgement.

        Raises
        ------
        SinkError
            Naming the topic, if a record could not be delivered within the
            producer's ``delivery_timeout_ms``.
        """
        futures, self._futures = self._futures, []
        try:
            self._producer.flush(timeout=self._flush_timeout)
            for future in futures:
                future.get(timeout=0)
        except KafkaError as exc:
            raise SinkError(
                f"records to Kafka topic {self.topic!r} were not acknowledged: {exc}; "
                "is the broker reachable?"
            ) from exc
        self.written += len(futures)

    def close(self) -> None:
        """Flush and close the producer."""
        try:
            self.flush()
        finally:
            self._producer.close()


class KafkaDeadLetterSink(KafkaSink):
    """Dead letters to a DLQ topic, with headers naming the reason and the source record.

    Each record written is a dead letter as encoded by the engine (a JSON object
    with ``reason`` and ``position``); the sink adds the headers
    ``stream_nb.reason``, ``stream_nb.source.topic``,
    ``stream_nb.source.partition`` and ``stream_nb.source.offset``.
    """

    def write(
        self,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        extra = list(headers or ())
        names = {name for name, _ in extra}
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
            for name, item in found:
                if item is not None and name not in names:
                    extra.append((name, str(item).encode()))
        super().write(value, key=key, headers=extra)


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
