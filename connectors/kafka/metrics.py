"""The Kafka connector's Prometheus metrics (``stream_nb_kafka_*``).

One :class:`KafkaMetrics` per registry (:func:`metrics_for`), shared by the source, the
sinks and model sync of a daemon. Labels are bounded: a topic and partition the daemon
reads, a rebalance event, or the role of a sink. A partition's series exist while it is
assigned to this daemon: they are removed when it is revoked or lost.

The consumer lag of every assigned partition is refreshed after each poll
(:meth:`KafkaMetrics.observe_source`): the high watermark minus the next offset the
source hands out. What the source does not hold is looked up, for all such partitions
at once and at most every :data:`LOOKUP_EVERY` seconds (the values in between are the
last ones): the consumer's position of a partition the source handed out nothing from
(a local call, but one that walks every assigned partition), and the broker's end offset
of a partition the consumer does not fetch (not fetched yet, or paused; a request
bounded by :data:`END_OFFSETS_MS`).
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kafka.errors import KafkaError
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

if TYPE_CHECKING:
    from stream_nb.connectors.kafka.source import KafkaSource

__all__ = ["END_OFFSETS_MS", "LOOKUP_EVERY", "KafkaMetrics", "metrics_for"]

#: Seconds between two look-ups of what the lag needs and the source does not hold.
LOOKUP_EVERY = 5.0
#: Bound of one end-offset request (it runs in the processing loop, after a poll).
END_OFFSETS_MS = 1000

#: Labels of the per-partition series, the rebalance counter and the record counters.
_PARTITION = ("topic", "partition")
_EVENT = ("event",)
_ROLE = ("role",)


class KafkaMetrics:
    """``stream_nb_kafka_*`` metrics on a Prometheus registry.

    Examples
    --------
    >>> registry = CollectorRegistry()
    >>> metrics = KafkaMetrics(registry)
    >>> metrics.rebalance("assigned")
    >>> registry.get_sample_value("stream_nb_kafka_rebalances_total", {"event": "assigned"})
    1.0
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, labels, registry=registry)

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        self.lag = gauge(
            "stream_nb_kafka_consumer_lag",
            "Records between the consumer's position and the partition's high watermark.",
            _PARTITION,
        )
        self.committed_offset = gauge(
            "stream_nb_kafka_committed_offset",
            "Group offset last committed after a durable snapshot.",
            _PARTITION,
        )
        self.assigned = gauge(
            "stream_nb_kafka_assigned_partitions", "Partitions currently assigned to this consumer."
        )
        self.rebalances = counter(
            "stream_nb_kafka_rebalances_total",
            "Rebalance callbacks by event (assigned, revoked, lost).",
            _EVENT,
        )
        self.replayed = counter(
            "stream_nb_kafka_replayed_events_total",
            "Events re-read below the committed offset because the snapshot was older.",
        )
        self.commit_seconds = Histogram(
            "stream_nb_kafka_commit_duration_seconds",
            "Time to commit group offsets after a snapshot.",
            registry=registry,
        )
        self.sync_sent = counter(
            "stream_nb_kafka_sync_deltas_sent_total",
            "Model deltas this worker committed to the sync topic.",
        )
        self.sync_merged = counter(
            "stream_nb_kafka_sync_deltas_merged_total",
            "Model deltas of other workers merged into this worker's model.",
        )
        self.sync_lag = gauge(
            "stream_nb_kafka_sync_lag", "Sync-topic records not yet read by this worker."
        )
        self.rollbacks = counter(
            "stream_nb_kafka_rollbacks_total",
            "Returns to the last committed transaction (rebalance or failed transaction).",
        )
        self.commit_failures = counter(
            "stream_nb_kafka_commit_failures_total",
            "Offset commits that failed (the next snapshot's commit covers them).",
        )
        self.shrunk = counter(
            "stream_nb_kafka_records_shrunk_total",
            "Records too large for their topic sent in a smaller form (a dead letter with "
            "a payload prefix or none, a prediction without log_proba), by role.",
            _ROLE,
        )
        self.dropped = counter(
            "stream_nb_kafka_records_dropped_total",
            "Records too large for their topic in every form, dropped, by role.",
            _ROLE,
        )
        for role in ("predictions", "dead_letters"):
            self.shrunk.labels(role=role)
            self.dropped.labels(role=role)
        for event in ("assigned", "revoked", "lost"):
            self.rebalances.labels(event=event)
        # looked up for the lag (see the module docstring): the consumer's positions of
        # partitions the source handed out nothing from, the broker's end offsets of
        # partitions the consumer does not fetch, and when
        self._positions: dict[Any, int] = {}
        self._end_offsets: dict[Any, int] = {}
        self._looked_up = -LOOKUP_EVERY

    def rebalance(self, event: str) -> None:
        """Count a rebalance callback (``assigned``, ``revoked`` or ``lost``)."""
        self.rebalances.labels(event=event).inc()

    def committed(self, offsets: Mapping[Any, int], seconds: float) -> None:
        """A commit of ``{TopicPartition: next offset}`` that took ``seconds``."""
        self.commit_seconds.observe(seconds)
        for tp, offset in offsets.items():
            self.committed_offset.labels(topic=tp.topic, partition=str(tp.partition)).set(offset)

    def forget(self, partitions: Iterable[Any]) -> None:
        """Remove the lag and committed-offset series of partitions this daemon no longer
        owns (revoked or lost): their new owner publishes its own."""
        for tp in partitions:
            labels = (tp.topic, str(tp.partition))
            for gauge in (self.lag, self.committed_offset):
                # (older prometheus-client releases raise KeyError for a series never set)
                with contextlib.suppress(KeyError):
                    gauge.remove(*labels)
            self._positions.pop(tp, None)
            self._end_offsets.pop(tp, None)

    def observe_source(self, source: KafkaSource) -> None:
        """The source's assigned partitions and the lag of each (after each poll, in the
        main thread).

        The lag is the high watermark minus the next offset the source hands out. For a
        partition it handed out nothing from yet (an empty partition, or records no poll
        returned so far) that offset is the consumer's position. The high watermark is
        the one of the consumer's last fetch, unless the consumer does not fetch the
        partition (not fetched yet, or paused): then it is the broker's end offset. Both
        are looked up as the module docstring says; a partition without either has no
        lag series until it has.
        """
        consumer = source.consumer
        assigned = source.assignment
        self.assigned.set(len(assigned))
        positions = source.positions
        try:
            paused = consumer.paused()
        except KafkaError:
            paused = set()
        found: list[tuple[Any, int | None, int | None]] = []
        for tp in assigned:
            try:
                high = None if tp in paused else consumer.highwater(tp)
            except KafkaError:  # e.g. revoked in the meantime
                continue
            found.append((tp, positions.get(tp), high))
        unread = [tp for tp, position, _ in found if position is None]
        unfetched = [tp for tp, _, high in found if high is None]
        if (unread or unfetched) and time.monotonic() - self._looked_up >= LOOKUP_EVERY:
            self._look_up(consumer, unread, unfetched)
        for tp, position, high in found:
            if position is None:
                position = self._positions.get(tp)
            else:  # the source's own position from now on
                self._positions.pop(tp, None)
            if high is None:
                high = self._end_offsets.get(tp)
            if position is not None and high is not None:
                self.lag.labels(topic=tp.topic, partition=str(tp.partition)).set(
                    max(0, high - position)
                )

    def _look_up(self, consumer: Any, unread: list[Any], unfetched: list[Any]) -> None:
        """The consumer's positions of ``unread`` (known locally once a partition is
        positioned: no broker round trip) and the broker's end offsets of ``unfetched``
        (one bounded request)."""
        self._looked_up = time.monotonic()
        for tp in unread:
            try:
                position = consumer.position(tp, timeout_ms=0)
            except KafkaError:  # e.g. revoked in the meantime
                continue
            if position is not None:
                self._positions[tp] = int(position)
        if not unfetched:
            return
        try:
            ends = consumer.end_offsets(unfetched, timeout_ms=END_OFFSETS_MS)
        except KafkaError:  # the broker is away: the next look-up tries again
            return
        for tp, end in ends.items():
            if end is not None:
                self._end_offsets[tp] = int(end)


#: The metrics of each registry, shared by the connectors that publish on it.
_REGISTRIES: weakref.WeakKeyDictionary[CollectorRegistry, KafkaMetrics] = (
    weakref.WeakKeyDictionary()
)


def metrics_for(registry: CollectorRegistry) -> KafkaMetrics:
    """The ``stream_nb_kafka_*`` metrics on ``registry`` (registered once).

    Examples
    --------
    >>> registry = CollectorRegistry()
    >>> metrics_for(registry) is metrics_for(registry)
    True
    """
    metrics = _REGISTRIES.get(registry)
    if metrics is None:
        metrics = _REGISTRIES[registry] = KafkaMetrics(registry)
    return metrics
