"""The librdkafka producer with the kafka-python methods the connector calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import confluent_kafka as ck
from kafka import OffsetAndMetadata
from kafka import errors as kerrors

from stream_nb.connectors.kafka.confluent.common import (
    Stats,
    client_config,
    translate,
    translated,
    within,
)
from stream_nb.connectors.kafka.url import DELIVERY_TIMEOUT_MS, transaction_call_seconds

__all__ = ["ConfluentProducer"]


#: librdkafka's bound of ``send_offsets_to_transaction`` (seconds); five more, and the
#: call is abandoned (see :meth:`ConfluentProducer.send_offsets_to_transaction`).
SEND_OFFSETS_SECONDS = 20.0

#: Records handed to librdkafka between two servings of its delivery reports.
SERVE_EVERY = 1024

#: Largest record the producer sends unless ``max_request_size`` says otherwise
#: (kafka-python's default, so both clients cut records at the same size).
MAX_REQUEST_BYTES = 1_048_576


class _Delivery:
    """A sent record's delivery (kafka-python's future, as far as the sinks use it)."""

    __slots__ = ("exception", "is_done")

    def __init__(self) -> None:
        self.is_done = False
        self.exception: BaseException | None = None

    def __call__(self, error: ck.KafkaError | None, _message: Any) -> None:
        self.is_done = True
        if error is not None:
            self.exception = translate(error)

    def succeeded(self) -> bool:
        return self.is_done and self.exception is None


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
    ) -> _Delivery:
        """Queue one record; the returned delivery is done after a :meth:`flush`."""
        delivery = _Delivery()
        produce = self._producer.produce
        while True:
            try:
                if headers:
                    produce(topic, value, key, on_delivery=delivery, headers=headers)
                else:
                    produce(topic, value, key, on_delivery=delivery)
                break
            except BufferError:  # the local queue is full: let librdkafka deliver some
                self._producer.poll(0.1)
            except ck.KafkaException as exc:
                raise translate(exc) from exc
        self._unserved += 1
        if self._unserved >= SERVE_EVERY:
            self._unserved = 0
            self._producer.poll(0)
        return delivery

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
