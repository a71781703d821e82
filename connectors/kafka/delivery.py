"""What one sink sent through one producer, and which of it failed (:class:`Deliveries`).

A Kafka sink sends records asynchronously and learns at its next flush whether the
broker took them: a record it rejected as too large is sent again smaller (or dropped
and counted); any other failure ends the daemon, so that nothing is lost silently. The
two clients report deliveries differently:

* kafka-python returns a future per record: :class:`FutureDeliveries` keeps each
  future with its record and reads them after the flush (a future still pending after
  a complete flush counts as a failure);
* librdkafka reports only failed deliveries to Python (``delivery.report.only.error``;
  see :mod:`~stream_nb.connectors.kafka.confluent.producer`): a delivered record costs
  no Python object, a failed one comes back with its value, key and headers.

A producer makes one per sink and topic (``producer.deliveries(topic)``); in
exactly-once mode the prediction and dead-letter sinks share model sync's
transactional producer, each with its own :class:`Deliveries`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError

from stream_nb.connectors.base import Headers

__all__ = ["Deliveries", "Failure", "FutureDeliveries", "KafkaPythonProducer", "Refused"]

#: A record the broker did not take: the error, then the record's value, key and headers.
Failure = tuple[BaseException, bytes, bytes | None, Headers | None]

#: The first record of a :meth:`Deliveries.send_many` call the producer refused at once:
#: its index and the error.
Refused = tuple[int, KafkaError]


class Deliveries(abc.ABC):
    """Records one sink sent to ``topic`` since its last :meth:`settle`, and their fate.

    Parameters
    ----------
    topic
        The sink's topic.
    """

    def __init__(self, topic: str) -> None:
        self.topic = topic

    @property
    @abc.abstractmethod
    def sent(self) -> int:
        """Records sent since the last :meth:`settle` (or :meth:`discard`)."""

    @abc.abstractmethod
    def send(self, value: bytes, key: bytes | None, headers: Headers | None) -> None:
        """Send one record.

        Raises
        ------
        kafka.errors.KafkaError
            If the producer refuses it at once (too large for it, or broken); the
            record is then not counted as sent.
        """

    @abc.abstractmethod
    def send_many(
        self, values: list[bytes], keys: Sequence[bytes | None] | None, start: int = 0
    ) -> Refused | None:
        """Send ``values[start:]`` (each with its key, no headers) in order, stopping at
        the first one the producer refuses at once: its index and the error, else
        ``None``."""

    @abc.abstractmethod
    def failures(self) -> list[Failure]:
        """The failed deliveries known so far (without waiting for the others)."""

    @abc.abstractmethod
    def settle(self) -> tuple[int, list[Failure]]:
        """After a complete flush of the producer: the records sent and those of them
        that failed; then start over."""

    @abc.abstractmethod
    def discard(self) -> None:
        """Forget what was sent (its transaction committed or aborted)."""


class FutureDeliveries(Deliveries):
    """:class:`Deliveries` of a producer that returns a kafka-python future per record.

    Examples
    --------
    >>> from kafka.future import Future
    >>> class Producer:
    ...     def send(self, topic, value, key, headers):
    ...         return Future().success(None) if value else Future().failure(KafkaError())
    >>> deliveries = FutureDeliveries(Producer(), "out")
    >>> deliveries.send_many([b"a", b"", b"c"], None)
    >>> deliveries.settle()
    (3, [(KafkaError(), b'', None, None)])
    """

    def __init__(self, producer: Any, topic: str) -> None:
        super().__init__(topic)
        self._send = producer.send
        # (future, value, key, headers) of every record sent since the last settle
        self._pending: list[tuple[Any, bytes, bytes | None, Headers | None]] = []

    @property
    def sent(self) -> int:
        return len(self._pending)

    def send(self, value: bytes, key: bytes | None, headers: Headers | None) -> None:
        future = self._send(self.topic, value=value, key=key, headers=headers)
        self._pending.append((future, value, key, headers))

    def send_many(
        self, values: list[bytes], keys: Sequence[bytes | None] | None, start: int = 0
    ) -> Refused | None:
        send, topic, add = self._send, self.topic, self._pending.append
        for i in range(start, len(values)):
            value = values[i]
            key = None if keys is None else keys[i]
            try:
                future = send(topic, value=value, key=key, headers=None)
            except KafkaError as exc:
                return i, exc
            add((future, value, key, None))
        return None

    def failures(self) -> list[Failure]:
        return [(f.exception, v, k, h) for f, v, k, h in self._pending if f.failed()]

    def settle(self) -> tuple[int, list[Failure]]:
        pending, self._pending = self._pending, []
        failed: list[Failure] = [
            (
                f.exception if f.is_done else KafkaTimeoutError("not acknowledged after a flush"),
                v,
                k,
                h,
            )
            for f, v, k, h in pending
            if not f.succeeded()
        ]
        return len(pending), failed

    def discard(self) -> None:
        self._pending = []


class KafkaPythonProducer(KafkaProducer):  # type: ignore[misc]  # untyped base
    """kafka-python's ``KafkaProducer``, making the sinks' :class:`FutureDeliveries`."""

    def deliveries(self, topic: str) -> FutureDeliveries:
        """The deliveries of one sink writing to ``topic``."""
        return FutureDeliveries(self, topic)
