"""The Kafka connector's Prometheus metrics."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

try:
    from kafka.errors import KafkaError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the Kafka connector needs kafka-python; install the 'kafka' extra "
        "(pip install '.[kafka]' in a clone of stream-nb)"
    ) from exc

if TYPE_CHECKING:
    from stream_nb.connectors.kafka.source import KafkaSource


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
        consumer = source.consumer
        assigned = source.assignment
        self.assigned.set(len(assigned))
        for tp in assigned:
            try:
                high = consumer.highwater(tp)
            except KafkaError:
                continue
            position = source.positions.get(tp)
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
