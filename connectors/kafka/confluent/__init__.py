"""librdkafka (confluent-kafka) behind the Kafka connector: ``client=confluent``.

Needs the ``kafka-fast`` extra (``pip install 'stream-nb[kafka-fast]'``).

:class:`ConfluentAdapter` offers what
:class:`~stream_nb.connectors.kafka.client.ClientAdapter` offers for kafka-python, and
its consumer and producer (:class:`ConfluentConsumer`, :class:`ConfluentProducer`) offer
the kafka-python methods the connector calls, with kafka-python's vocabulary:
``kafka.TopicPartition`` keys, ``kafka.OffsetAndMetadata`` commits, and librdkafka's
errors raised as the matching ``kafka.errors`` classes (:func:`translate`), so that the
connector's error policy (:func:`~stream_nb.connectors.kafka.url.is_fatal`,
:func:`~stream_nb.connectors.kafka.records.is_too_large`) is one code path. Admin
requests (topic checks, a static member's leave) stay with kafka-python, the
connector's named dependency.

Options. URL options keep kafka-python's names: the ones librdkafka spells otherwise
are renamed (:data:`OPTION_NAMES`: ``linger_ms`` → ``linger.ms``,
``delivery_timeout_ms`` → ``message.timeout.ms``, ``max_request_size`` →
``message.max.bytes`` …), those without a librdkafka counterpart are dropped
(:data:`DROPPED_OPTIONS`), and any other passes through with ``_`` read as ``.``
(``queue_buffering_max_ms=1`` or ``queue.buffering.max.ms=1``).

Rebalances. librdkafka runs the rebalance callbacks on the thread that calls
``consume`` (the main thread, between engine batches), where blocking calls are
allowed: the connector's listener coroutines are driven to their end there
(:meth:`ConfluentAdapter.await_in_thread` runs the work at once). A partition can be
positioned only in the ``assign`` call that ends an assignment, so seeks made while
the listener handles it are collected and passed to that call.

Readiness. Broker connections come from librdkafka's statistics (every second): the
brokers whose state is ``UP``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import confluent_kafka as ck
from kafka import TopicPartition

from stream_nb.connectors.kafka.block import MessageBlock
from stream_nb.connectors.kafka.client import ClientAdapter
from stream_nb.connectors.kafka.confluent.common import (
    DROPPED_OPTIONS,
    OPTION_NAMES,
    librdkafka_config,
    translate,
)
from stream_nb.connectors.kafka.confluent.consumer import ConfluentConsumer
from stream_nb.connectors.kafka.confluent.producer import ConfluentProducer
from stream_nb.connectors.kafka.url import log

__all__ = [
    "DROPPED_OPTIONS",
    "OPTION_NAMES",
    "ConfluentAdapter",
    "ConfluentConsumer",
    "ConfluentProducer",
    "librdkafka_config",
    "translate",
]


class ConfluentAdapter(ClientAdapter):
    """librdkafka for the connector: :class:`ConfluentConsumer`, :class:`ConfluentProducer`,
    and blocks straight from librdkafka's messages."""

    name = "confluent"

    @staticmethod
    def consumer(**options: Any) -> Any:
        return ConfluentConsumer(**options)

    @staticmethod
    def producer(**options: Any) -> Any:
        return ConfluentProducer(**options)

    @staticmethod
    def subscribe(consumer: Any, topics: list[str], listener: Any) -> None:
        consumer.subscribe(topics, listener)

    @staticmethod
    def poll(consumer: Any, max_records: int, timeout_ms: int) -> Any:
        return consumer.consume(max_records, timeout_ms / 1000.0)

    @staticmethod
    def block(polled: Any, positions: dict[Any, int]) -> MessageBlock:
        message = ck.Message  # (handed out messages have a topic, partition and offset)
        topics: list[Any] = list(map(message.topic, polled))
        partitions: list[Any] = list(map(message.partition, polled))
        offsets: list[Any] = list(map(message.offset, polled))
        payloads: list[Any] = list(map(message.value, polled))
        if None in payloads:
            payloads = [b"" if v is None else v for v in payloads]
        block = MessageBlock(
            polled,
            payloads,
            topics,
            partitions,
            offsets,
            list(map(message.key, polled)),
            list(map(message.headers, polled)),
            _timestamp,
        )
        for (topic, partition), offset in block.next_offsets().items():
            positions[TopicPartition(topic, partition)] = offset
        return block

    @staticmethod
    def connections(client: Any) -> int | None:
        try:
            return client.connections()  # type: ignore[no-any-return]
        except AttributeError:  # a closed source's client (None)
            return None

    @staticmethod
    async def await_in_thread(consumer: Any, work: Callable[[], bool]) -> bool:
        """Run ``work()`` now: librdkafka's callbacks run on the polling thread, where
        blocking calls are allowed."""
        return bool(work())

    @staticmethod
    def native_crc32c() -> bool | None:
        return True  # librdkafka checksums in C


def _timestamp(message: Any) -> float | None:
    """A librdkafka message's timestamp in seconds."""
    kind, stamp = message.timestamp()
    return None if kind == ck.TIMESTAMP_NOT_AVAILABLE else stamp / 1000.0


log.debug("librdkafka %s (confluent-kafka %s)", ck.libversion()[0], ck.version()[0])
