"""The Kafka sinks: prediction records and dead letters."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kafka.errors import KafkaError, KafkaTimeoutError
from prometheus_client import CollectorRegistry

from stream_nb._exceptions import SinkError
from stream_nb.connectors.base import Headers, Sink
from stream_nb.connectors.kafka.client import client_adapter, trouble
from stream_nb.connectors.kafka.delivery import Deliveries
from stream_nb.connectors.kafka.metrics import KafkaMetrics, metrics_for
from stream_nb.connectors.kafka.records import (
    carry_headers,
    dead_letter_headers,
    fit_dead_letter,
    is_too_large,
    own_headers,
    record_bytes,
    shrink_prediction,
)
from stream_nb.connectors.kafka.topics import check_topics
from stream_nb.connectors.kafka.url import (
    BATCH_BYTES,
    CLOSE_SECONDS,
    FLUSH_SLICE_SECONDS,
    log,
    producer_defaults,
    topic_options,
)

if TYPE_CHECKING:
    from stream_nb.connectors.kafka.sync import KafkaSync

__all__ = ["KafkaDeadLetterSink", "KafkaSink"]

#: A record as sent: its value and the headers it carries.
_Form = tuple[bytes, Headers | None]


class KafkaSink(Sink):
    """Records to one Kafka topic; ``flush`` waits until every record is acknowledged.

    At construction the topic is checked to exist (see :class:`KafkaSource`'s
    ``create_topics``) and its record size limit read: the smaller of its
    ``max.message.bytes`` and the producer's ``max_request_size``. A record above it
    is sent in a smaller form (:meth:`_smaller`: a prediction without ``log_proba``
    and ``explain``, listed under ``omitted``; then without the carried headers); if
    none fits, or the broker still rejects it as too large, it is dropped, counted
    (``stream_nb_kafka_records_dropped_total``) and logged. The event's headers are
    carried up to :data:`~stream_nb.connectors.kafka.records.MAX_CARRIED_HEADER_BYTES`.

    Parameters
    ----------
    bootstrap_servers
        ``host:port`` strings.
    topic
        Destination topic.
    create_topics, topic_partitions, topic_replication_factor
        Create the topic if it is missing (``-1``: the broker's defaults).
    client
        The Kafka client: ``kafka-python`` (default) or ``confluent`` (librdkafka, the
        ``kafka-fast`` extra). With ``exactly_once`` the records go through model sync's
        producer, which uses the source's client.
    **options
        Any kafka-python producer option (with ``client=confluent`` renamed for
        librdkafka, or librdkafka's own). Defaults: ``acks="all"``,
        ``linger_ms=5``, ``delivery_timeout_ms=30000``: records are retried that
        long (a broker restart), then ``flush`` raises :class:`~stream_nb.SinkError`
        and the daemon exits for its supervisor.
    """

    #: What the records are, in messages and metric labels.
    role = "predictions"
    #: Whether :meth:`write_keyed` may send a batch as it is (records within the limit,
    #: no headers): a record is then sent as given, without :meth:`_prepare`.
    batched = True

    def __init__(
        self,
        bootstrap_servers: list[str] | str,
        topic: str,
        *,
        create_topics: bool = False,
        topic_partitions: int = -1,
        topic_replication_factor: int = -1,
        client: str | None = None,
        **options: Any,
    ) -> None:
        adapter = client_adapter(client)
        create, partitions, replication = topic_options(
            {
                "create_topics": create_topics,
                "topic_partitions": topic_partitions,
                "topic_replication_factor": topic_replication_factor,
            }
        )
        self.topic = topic
        options.setdefault("linger_ms", 5)
        producer_defaults(options)
        info = check_topics(
            bootstrap_servers,
            options,
            {topic: "prediction topic" if self.role == "predictions" else "dead-letter topic"},
            create=create,
            partitions=partitions,
            replication_factor=replication,
            error=SinkError,
        )[topic]
        #: Largest record (as :func:`~stream_nb.connectors.kafka.records.record_bytes` counts) sent
        #: as it is.
        self.limit = int(options.get("max_request_size", 1_048_576))
        if info.max_message_bytes is not None:
            self.limit = min(self.limit, info.max_message_bytes)
        # One engine batch of predictions fits in one producer batch: the producer then
        # wakes its IO thread once per batch instead of once per record. A batch never
        # exceeds what the topic accepts.
        options.setdefault("batch_size", min(BATCH_BYTES, self.limit))
        self.flush_timeout = options["delivery_timeout_ms"] / 1000.0 + 5.0
        self._bootstrap = bootstrap_servers
        try:
            self._producer = adapter.producer(bootstrap_servers=bootstrap_servers, **options)
        except KafkaError as exc:
            raise SinkError(f"cannot create a producer for Kafka topic {topic!r}: {exc!r}") from exc
        # what was sent since the last flush, on the producer it went through
        self._deliveries: Deliveries | None = None
        self._deliveries_producer: Any = None
        self.written = 0
        #: Records sent in a smaller form / dropped because none fitted.
        self.shrunk = 0
        self.dropped = 0
        self._metrics: KafkaMetrics | None = None
        # exactly-once: records go through KafkaSync's transactional producer
        self.sync: KafkaSync | None = None
        # a delivery failed: the daemon is ending, close() does not wait
        self._broken = False

    def use_sync(self, sync: KafkaSync, delivery_timeout_ms: int) -> None:
        """Send through ``sync``'s transactional producer (exactly-once), waiting up to
        its delivery timeout (plus 5 s) when flushing."""
        self.sync = sync
        self.flush_timeout = delivery_timeout_ms / 1000.0 + 5.0

    def bind_metrics(self, registry: CollectorRegistry) -> None:
        """Count shrunk and dropped records on a Prometheus registry."""
        self._metrics = metrics_for(registry)

    def _producer_now(self) -> Any:
        return self._producer if self.sync is None else self.sync.producer

    def _outbox(self) -> Deliveries:
        """This sink's deliveries on the current producer (model sync replaces its
        producer after a failed transaction, whose records are discarded)."""
        producer = self._producer_now()
        if self._deliveries is None or self._deliveries_producer is not producer:
            self._deliveries = producer.deliveries(self.topic)
            self._deliveries_producer = producer
        return self._deliveries

    def write(
        self, value: bytes, *, key: bytes | None = None, headers: Headers | None = None
    ) -> None:
        """Send one record (asynchronously; :meth:`flush` waits for it).

        ``headers`` (the event's) are carried up to the documented bound.
        """
        value, carried = self._prepare(value, headers)
        if len(value) + (0 if key is None else len(key)) + 256 > self.limit and (
            record_bytes(key, value, carried) > self.limit
        ):
            self._send_fitting(value, key, carried)
        else:
            self._send(value, key, carried)

    def write_keyed(
        self,
        values: list[bytes],
        keys: Sequence[bytes | None] | None,
        headers: Sequence[Headers | None] | None,
    ) -> None:
        """Send several records in order, each with its key and the event's headers
        (the same as :meth:`write` on each).

        A batch without headers whose records are all well within :attr:`limit` goes
        to the producer in one loop; any other takes :meth:`write` record by record.
        """
        if not values:
            return
        longest = max(map(len, values))
        if keys is not None:
            longest += max(map(len, filter(None, keys)), default=0)
        if not self.batched or (headers is not None and any(headers)) or longest + 256 > self.limit:
            for i, value in enumerate(values):
                self.write(
                    value,
                    key=None if keys is None else keys[i],
                    headers=None if headers is None else headers[i],
                )
            return
        outbox = self._outbox()
        start = 0
        while True:
            refused = outbox.send_many(values, keys, start)
            if refused is None:
                return
            index, exc = refused
            self._send_failed(exc, values[index], None if keys is None else keys[index], None)
            start = index + 1

    def _prepare(self, value: bytes, headers: Headers | None) -> _Form:
        """The record as sent: the value, and the event's headers up to the bound."""
        return value, (carry_headers(headers) or None) if headers else None

    def _smaller(self, value: bytes, headers: Headers | None) -> list[_Form]:
        """Smaller forms of a record, in order: without ``log_proba``/``explain``, then
        also without the carried headers."""
        shrunk = shrink_prediction(value)
        if shrunk is None:
            return [(value, None)] if headers else []
        return [(shrunk, headers), (shrunk, None)] if headers else [(shrunk, None)]

    def _send(self, value: bytes, key: bytes | None, headers: Headers | None) -> None:
        try:
            self._outbox().send(value, key, headers)
        except KafkaError as exc:
            self._send_failed(exc, value, key, headers)

    def _send_failed(
        self, exc: KafkaError, value: bytes, key: bytes | None, headers: Headers | None
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

    def _send_fitting(self, value: bytes, key: bytes | None, headers: Headers | None) -> None:
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
            outbox = self._deliveries
            if outbox is None or not outbox.sent:
                return
            self._await(outbox.sent)
            failure: BaseException | None = None
            sent, failed = outbox.settle()
            self.written += sent - len(failed)
            for exc, value, key, headers in failed:
                if not is_too_large(exc):
                    failure = failure or exc
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
        deadline = start + self.flush_timeout
        kind = f"flush:{self.topic}"
        while True:
            left = deadline - time.monotonic()
            try:
                producer.flush(timeout=max(0.0, min(left, FLUSH_SLICE_SECONDS)))
            except KafkaTimeoutError:
                if time.monotonic() >= deadline:
                    raise self._failed(
                        f"{count} records to Kafka topic {self.topic!r} not acknowledged "
                        f"within {self.flush_timeout:g} s; is the broker reachable? (exiting "
                        "so that a supervisor restarts from the last snapshot)"
                    ) from None
                trouble.report(
                    kind,
                    f"{count} records to Kafka topic {self.topic!r} not acknowledged after "
                    f"{time.monotonic() - start:.0f} s; the producer retries for up to "
                    f"{self.flush_timeout - 5:g} s",
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
        log.error("%s", message)
        return SinkError(message)

    def discard_pending(self) -> None:
        """Forget sent records (exactly-once: their transaction committed or aborted)."""
        if self._deliveries is not None:
            self._deliveries.discard()

    def learn_limits(self) -> None:
        """Exactly-once, after a failed transaction: lower :attr:`limit` below every record
        the broker rejected as too large, so the redone work sends them smaller."""
        if self._deliveries is None:
            return
        for exc, value, key, headers in self._deliveries.failures():
            if is_too_large(exc):
                self.limit = min(self.limit, record_bytes(key, value, headers) - 1)

    def close(self) -> None:
        """Flush what is pending and close the producer, within a bounded time.

        A close after a failure (the broker away) does not wait for undeliverable
        records: the restart redoes their work from the last snapshot.
        """
        try:
            if self._deliveries is not None and self._deliveries.sent and not self._broken:
                self.flush_timeout = min(self.flush_timeout, CLOSE_SECONDS)
                self.flush()
        finally:
            try:
                self._producer.close(timeout=0.0 if self._broken else CLOSE_SECONDS)
            except KafkaError as exc:  # records still pending
                log.warning("closing the producer of Kafka topic %r: %r", self.topic, exc)


class KafkaDeadLetterSink(KafkaSink):
    """Dead letters to a DLQ topic, with the event's key and headers, and headers naming
    the reason and the source record.

    Each record written is a dead letter as encoded by the engine (a JSON object
    with ``reason`` and ``position``); the sink adds the headers
    ``stream_nb.reason``, ``stream_nb.source.topic``,
    ``stream_nb.source.partition`` and ``stream_nb.source.offset`` (source headers
    of those names are dropped). A rejected payload longer than
    :data:`~stream_nb.connectors.kafka.records.DEAD_LETTER_PAYLOAD_BYTES` is cut to that prefix,
    with its size and SHA-256 (:func:`~stream_nb.connectors.kafka.records.fit_dead_letter`); a
    letter still too large for the topic is sent without its payload, then without
    the event's headers; one that fits in no form is dropped, counted and logged.
    """

    role = "dead_letters"
    batched = False  # (every letter gets its own headers and a bounded payload)

    def _prepare(self, value: bytes, headers: Headers | None) -> _Form:
        """The letter with its payload cut to the bound, and headers: stream-nb's own
        (reason and source record), then the event's (without ``stream_nb.*`` ones)."""
        carried = dead_letter_headers(value) + carry_headers(headers, drop_own=True)
        return fit_dead_letter(value), carried or None

    def _smaller(self, value: bytes, headers: Headers | None) -> list[_Form]:
        """Smaller forms of a dead letter: without the payload (size and hash kept), then
        with only stream-nb's own headers."""
        bare = fit_dead_letter(value, keep_payload=False)
        own = own_headers(headers) or None
        forms: list[_Form] = [(bare, headers)]
        if headers != own:
            forms.append((bare, own))
        return forms
