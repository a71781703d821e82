"""The librdkafka producer with the kafka-python methods the connector calls."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import Any

import confluent_kafka as ck
from kafka import OffsetAndMetadata
from kafka import errors as kerrors

from stream_nb.connectors.base import Headers
from stream_nb.connectors.kafka.confluent.common import (
    Stats,
    client_config,
    translate,
    translated,
    within,
)
from stream_nb.connectors.kafka.delivery import Deliveries, Failure, Refused
from stream_nb.connectors.kafka.url import DELIVERY_TIMEOUT_MS, transaction_call_seconds

__all__ = ["ConfluentProducer", "ReportedDeliveries"]


#: librdkafka's bound of ``send_offsets_to_transaction`` (seconds); five more, and the
#: call is abandoned (see :meth:`ConfluentProducer.send_offsets_to_transaction`).
SEND_OFFSETS_SECONDS = 20.0

#: Records handed to librdkafka between two servings of its delivery reports (only
#: failed ones reach Python, but librdkafka holds every report until served).
SERVE_EVERY = 1024

#: Largest record the producer sends unless ``max_request_size`` says otherwise
#: (kafka-python's default, so both clients cut records at the same size).
MAX_REQUEST_BYTES = 1_048_576


class ReportedDeliveries(Deliveries):
    """:class:`~stream_nb.connectors.kafka.delivery.Deliveries` on librdkafka, which
    reports only the failed ones (``delivery.report.only.error``): one callback, bound
    once, gets each failed record back with its error; a delivered record costs no
    Python call. After a flush that left nothing queued, every record sent and not
    reported failed was delivered."""

    def __init__(self, producer: ConfluentProducer, topic: str) -> None:
        super().__init__(topic)
        self._producer = producer
        self._sent = 0
        self._failed: list[Failure] = []
        self._report = self._on_delivery  # one bound method for every record

    def _on_delivery(self, error: ck.KafkaError | None, message: Any) -> None:
        if error is not None:
            headers = message.headers()
            self._failed.append(
                (
                    translate(error),
                    message.value() or b"",
                    message.key(),
                    [(k, v or b"") for k, v in headers] if headers else None,
                )
            )

    @property
    def sent(self) -> int:
        return self._sent

    def send(self, value: bytes, key: bytes | None, headers: Headers | None) -> None:
        self._producer.produce(self.topic, value, key, headers, self._report)
        self._sent += 1

    def send_many(
        self, values: list[bytes], keys: Sequence[bytes | None] | None, start: int = 0
    ) -> Refused | None:
        done, error = self._producer.produce_many(self.topic, values, keys, start, self._report)
        self._sent += done - start
        return None if error is None else (done, error)

    def failures(self) -> list[Failure]:
        return list(self._failed)

    def settle(self) -> tuple[int, list[Failure]]:
        sent, failed = self._sent, self._failed
        self.discard()
        return sent, failed

    def discard(self) -> None:
        self._sent = 0
        self._failed = []


class ConfluentProducer:
    """A librdkafka producer with the kafka-python methods the connector calls.

    Parameters
    ----------
    **options
        kafka-python-style producer options (see the module docstring).
    """

    def __init__(self, **options: Any) -> None:
        options.setdefault("max_request_size", MAX_REQUEST_BYTES)
        self._stats = Stats()
        config = client_config(options, self._stats)
        # librdkafka's own bound of a transactional call, inside the connector's
        # (bounded(): transaction_call_seconds), so that librdkafka's error comes first
        delivery = options.get("delivery_timeout_ms", DELIVERY_TIMEOUT_MS)
        self._txn_seconds = transaction_call_seconds(delivery) - 5.0
        txn_ms = config.get("transaction.timeout.ms")
        if txn_ms is not None and config.get("message.timeout.ms", 0) > txn_ms:
            # librdkafka refuses a delivery timeout beyond the transaction's
            config["message.timeout.ms"] = txn_ms
        # the sinks flush at checkpoints: room for every record sent in between
        config.setdefault("queue.buffering.max.messages", 1_000_000)
        # only failed deliveries call back into Python (see ReportedDeliveries)
        config.setdefault("delivery.report.only.error", True)
        try:
            self._producer = ck.Producer(config)
        except (ck.KafkaException, ValueError) as exc:
            raise translate(exc) from exc
        self._unserved = 0

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: Any = None,
    ) -> None:
        """Queue one record; a failed delivery shows in the transaction's commit (the
        sinks send through :meth:`deliveries`)."""
        self.produce(topic, value, key, headers, None)

    def deliveries(self, topic: str) -> ReportedDeliveries:
        """The deliveries of one sink writing to ``topic``."""
        return ReportedDeliveries(self, topic)

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: Any,
        report: Callable[[Any, Any], None] | None,
    ) -> None:
        """Queue one record, ``report`` called if its delivery fails; waits for room
        while librdkafka's queue is full.

        Raises
        ------
        kafka.errors.KafkaError
            If librdkafka refuses the record (too large, a broken producer).
        """
        produce = self._producer.produce
        while True:
            try:
                if headers:
                    produce(topic, value, key, on_delivery=report, headers=headers)
                else:
                    # (positional: no keyword dictionary; partition -1 is librdkafka's
                    # "any partition")
                    produce(topic, value, key, -1, report)
                break
            except BufferError:  # the local queue is full: let librdkafka deliver some
                self._producer.poll(0.1)
            except ck.KafkaException as exc:
                raise translate(exc) from exc
        self._served(1)

    def produce_many(
        self,
        topic: str,
        values: list[bytes],
        keys: Sequence[bytes | None] | None,
        start: int,
        report: Callable[[Any, Any], None],
    ) -> tuple[int, kerrors.KafkaError | None]:
        """Queue ``values[start:]`` with their keys, in order (see :meth:`produce`);
        stops at the first one librdkafka refuses. Returns the index it stopped at
        (``len(values)`` when all were queued) and the error, if any."""
        produce = self._producer.produce
        i = start
        end = len(values)
        while i < end:
            try:
                if keys is None:
                    for value in islice(values, i, None):
                        produce(topic, value, None, -1, report)
                        i += 1
                else:
                    for value, key in zip(islice(values, i, None), islice(keys, i, None)):  # noqa: B905
                        produce(topic, value, key, -1, report)
                        i += 1
            except BufferError:  # the local queue is full: let librdkafka deliver some
                self._producer.poll(0.1)
            except ck.KafkaException as exc:
                self._served(i - start)
                return i, translate(exc)
        self._served(end - start)
        return end, None

    def _served(self, count: int) -> None:
        """Serve librdkafka's delivery reports now and then (a failed one calls back)."""
        self._unserved += count
        if self._unserved >= SERVE_EVERY:
            self._unserved = 0
            self._producer.poll(0)

    def flush(self, timeout: float | None = None) -> None:
        """Wait for every queued record's delivery report.

        Raises
        ------
        kafka.errors.KafkaTimeoutError
            If some are still undelivered after ``timeout`` seconds.
        """
        try:
            left = self._producer.flush(-1 if timeout is None else timeout)
        except (ck.KafkaException, SystemError, RuntimeError) as exc:  # a failed producer
            raise translate(exc) from exc
        self._unserved = 0
        if left:
            raise kerrors.KafkaTimeoutError(f"{left} records not delivered after {timeout} s")

    def init_transactions(self, timeout: float | None = None) -> None:
        translated(lambda: self._producer.init_transactions(timeout or self._txn_seconds))

    def begin_transaction(self) -> None:
        translated(self._producer.begin_transaction)

    def send_offsets_to_transaction(
        self, offsets: Mapping[Any, OffsetAndMetadata], group: Any, timeout: float | None = None
    ) -> None:
        listed = [
            ck.TopicPartition(tp.topic, tp.partition, om.offset, metadata=om.metadata)
            for tp, om in offsets.items()
        ]
        seconds = timeout or SEND_OFFSETS_SECONDS
        # librdkafka may not return from this call once its cached group coordinator went
        # away (librdkafka issues 5456 and 5511): bounded here, so that the caller rolls
        # back and replaces this producer (the new one fences its transaction)
        within(
            lambda: self._producer.send_offsets_to_transaction(listed, group, seconds),
            seconds + 5.0,
            "adding offsets to a transaction",
        )

    def commit_transaction(self, timeout: float | None = None) -> None:
        translated(lambda: self._producer.commit_transaction(timeout or self._txn_seconds))

    def abort_transaction(self, timeout: float | None = None) -> None:
        translated(lambda: self._producer.abort_transaction(timeout or self._txn_seconds))

    def connections(self) -> int | None:
        """Brokers connected at the last statistics (``None`` before the first)."""
        return self._stats.up

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued for at most ``timeout`` seconds, then drop the rest."""
        try:
            self._producer.flush(5.0 if timeout is None else timeout)
            self._producer.purge()
            self._producer.flush(0)
        except (ck.KafkaException, SystemError, RuntimeError) as exc:
            raise translate(exc) from exc
