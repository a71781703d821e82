"""The librdkafka consumer with the kafka-python methods the connector calls."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

import confluent_kafka as ck
from kafka import OffsetAndMetadata, TopicPartition
from kafka import errors as kerrors

from stream_nb.connectors.kafka.client import trouble
from stream_nb.connectors.kafka.confluent.common import (
    Stats,
    client_config,
    retriable,
    to_partition,
    translate,
    translated,
    within,
)
from stream_nb.connectors.kafka.url import is_fatal

__all__ = ["ConfluentConsumer"]


class _Message:
    """A polled message with kafka-python's attribute names (model sync reads these)."""

    __slots__ = ("headers", "key", "offset", "timestamp", "value")

    def __init__(self, m: Any) -> None:
        self.value: bytes | None = m.value()
        self.key: bytes | None = m.key()
        self.offset: int = m.offset()
        kind, stamp = m.timestamp()
        self.timestamp: int | None = None if kind == ck.TIMESTAMP_NOT_AVAILABLE else stamp
        self.headers: list[tuple[str, bytes]] | None = m.headers()


class ConfluentConsumer:
    """A librdkafka consumer with the kafka-python methods the connector calls.

    Parameters
    ----------
    **options
        kafka-python-style consumer options (see the module docstring).
    """

    def __init__(self, **options: Any) -> None:
        self._stats = Stats()
        config = client_config(options, self._stats)
        # librdkafka wants a group even for a consumer that only reads assigned partitions
        # (model sync's); it never joins or commits to it
        self._joined = "group.id" in config
        config.setdefault("group.id", "stream-nb.unjoined")
        # an event at each partition's end: the position past its transaction markers
        config.setdefault("enable.partition.eof", True)
        latest = str(config.get("auto.offset.reset", "latest")) in ("latest", "end", "largest")
        self._reset_key = "hi_offset" if latest else "lo_offset"
        cooperative = "cooperative" in str(config.get("partition.assignment.strategy", ""))
        self._incremental = cooperative
        try:
            self._consumer = ck.Consumer(config)
        except (ck.KafkaException, ValueError) as exc:
            raise translate(exc) from exc
        self._paused: set[TopicPartition] = set()
        # while a listener handles an assignment: offsets it positioned partitions at
        self._assigning: dict[TopicPartition, int] | None = None
        # inside a rebalance callback (on the thread that called consume)
        self._in_callback = False
        # partitions positioned (seek, assign) that nothing was fetched from since, and
        # where (librdkafka's position says where the application is only once it is)
        self._sought: dict[TopicPartition, int] = {}
        self._closed = False

    # ------------------------------------------------------------ group membership
    def subscribe(self, topics: list[str], listener: Any) -> None:
        """Subscribe, with ``listener``'s coroutines driven in librdkafka's callbacks."""

        def on_assign(_consumer: Any, partitions: list[Any]) -> None:
            if self._closed:
                # A rebalance that completes while the consumer closes: decline it.
                # librdkafka accepts an unassign during close, but an assign there
                # never returns (librdkafka issue 4884), holding the interpreter lock.
                self._consumer.unassign()
                return
            tps = {TopicPartition(p.topic, p.partition) for p in partitions}
            self._assigning = {}
            try:
                self._in_callback = True
                _drive(listener.on_partitions_assigned(tps))
            finally:
                self._in_callback = False
                chosen, self._assigning = self._assigning, None
                for tp in tps:
                    self._sought.pop(tp, None)
                self._sought.update(chosen)
                listed = [
                    ck.TopicPartition(tp.topic, tp.partition, chosen.get(tp, ck.OFFSET_INVALID))
                    for tp in tps
                ]
                if self._incremental:
                    self._consumer.incremental_assign(listed)
                else:
                    self._consumer.assign(listed)

        def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
            tps = {TopicPartition(p.topic, p.partition) for p in partitions}
            try:
                self._in_callback = True
                _drive(listener.on_partitions_revoked(tps))
            finally:
                self._in_callback = False
                self._paused -= tps

        def on_lost(_consumer: Any, partitions: list[Any]) -> None:
            tps = {TopicPartition(p.topic, p.partition) for p in partitions}
            try:
                self._in_callback = True
                _drive(listener.on_partitions_lost(tps))
            finally:
                self._in_callback = False
                self._paused -= tps

        translated(
            lambda: self._consumer.subscribe(
                list(topics), on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost
            )
        )

    def assign(self, partitions: Iterable[Any]) -> None:
        """Read ``partitions`` (no group membership): from the committed offsets, or for a
        consumer without group, the reset policy's end."""
        start = ck.OFFSET_INVALID
        if not self._joined:
            start = ck.OFFSET_END if self._reset_key == "hi_offset" else ck.OFFSET_BEGINNING
        translated(
            lambda: self._consumer.assign(
                [ck.TopicPartition(tp.topic, tp.partition, start) for tp in partitions]
            )
        )

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(p.topic, p.partition) for p in self._consumer.assignment()}

    def group_metadata(self) -> Any:
        """The group metadata a transaction's offsets are sent with."""
        return translated(self._consumer.consumer_group_metadata)

    # ------------------------------------------------------------ fetching
    def consume(self, max_records: int, timeout: float) -> list[Any]:
        """librdkafka's messages (rebalance callbacks run inside); failed fetches are
        logged (rate-limited), a fatal one raised."""
        try:
            messages: list[Any] = self._consumer.consume(max_records, timeout)
        except ck.KafkaException as exc:
            raise translate(exc) from exc
        sought = self._sought
        if sought or any(m.error() is not None for m in messages):
            good = []
            for m in messages:
                error = m.error()
                if error is None:
                    good.append(m)
                    if sought:  # (a TopicPartition equals the plain tuple)
                        sought.pop((m.topic(), m.partition()), None)
                elif error.code() == ck.KafkaError._PARTITION_EOF:
                    # the end of the partition, past any trailing transaction markers
                    # (librdkafka's position stops at the last record handed out)
                    sought[TopicPartition(m.topic(), m.partition())] = m.offset()
                else:
                    failure = translate(error)
                    if is_fatal(failure):
                        raise failure
                    trouble.report(
                        f"fetch:{m.topic()}",
                        f"fetching from Kafka topic {m.topic()!r} [{m.partition()}] failed: "
                        f"{failure!r}",
                    )
            messages = good
        return messages

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[_Message]]:
        """kafka-python's ``poll``: messages by partition."""
        out: dict[TopicPartition, list[_Message]] = {}
        for m in self.consume(max_records or 500, timeout_ms / 1000.0):
            out.setdefault(TopicPartition(m.topic(), m.partition()), []).append(_Message(m))
        return out

    def pause(self, *partitions: Any) -> None:
        translated(lambda: self._consumer.pause([to_partition(tp) for tp in partitions]))
        self._paused.update(TopicPartition(tp.topic, tp.partition) for tp in partitions)

    def resume(self, *partitions: Any) -> None:
        translated(lambda: self._consumer.resume([to_partition(tp) for tp in partitions]))
        self._paused.difference_update(TopicPartition(tp.topic, tp.partition) for tp in partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    # ------------------------------------------------------------ positions
    def seek(self, tp: Any, offset: int) -> None:
        """Position ``tp`` at ``offset`` (during an assignment: in its ``assign`` call)."""
        key = TopicPartition(tp.topic, tp.partition)
        if self._assigning is not None:
            self._assigning[key] = offset
            return
        self._sought[key] = offset
        target = ck.TopicPartition(tp.topic, tp.partition, offset)
        try:
            self._consumer.seek(target)
        except ck.KafkaException as exc:
            if exc.args[0].code() != ck.KafkaError._STATE:
                raise translate(exc) from exc
            # assigned but not fetched yet: position it by assigning it again
            kept = [
                ck.TopicPartition(p.topic, p.partition, p.offset)
                for p in self._consumer.position(self._consumer.assignment())
                if (p.topic, p.partition) != (tp.topic, tp.partition)
            ]
            translated(lambda: self._consumer.assign([*kept, target]))

    def seek_to_beginning(self, *partitions: Any) -> None:
        for tp in partitions:
            self.seek(tp, ck.OFFSET_BEGINNING)

    def seek_to_end(self, *partitions: Any) -> None:
        for tp in partitions:
            self.seek(tp, ck.OFFSET_END)

    def position(self, tp: Any, timeout_ms: int | None = None) -> int | None:
        """The offset of the next record handed out from ``tp``.

        Where nothing was handed out since the partition was positioned, it is where
        librdkafka starts fetching: the seek's offset, else the committed offset, else
        the reset policy's end. With ``timeout_ms=0`` those come from librdkafka's
        statistics only (``None`` while unknown), else from the broker.
        """
        key = TopicPartition(tp.topic, tp.partition)
        if self._assigning is not None and key in self._assigning:
            offset = self._assigning[key]
            return offset if offset >= 0 else None
        sought = self._sought.get(key)
        if sought is not None and sought >= 0:
            return sought
        if sought is None:
            (found,) = translated(lambda: self._consumer.position([to_partition(tp)]))
            if found.offset >= 0:
                return int(found.offset)
        if timeout_ms == 0:
            stats = self._stats.partitions.get((tp.topic, tp.partition))
            if stats is None or stats.get("fetch_state") != "active":
                return None
            for name in ("committed_offset", self._reset_key):
                offset = stats.get(name, -1)
                if isinstance(offset, int) and offset >= 0:
                    return offset
            return None
        if sought is None:
            committed = self.committed(tp, timeout_ms=timeout_ms)
            if committed is not None:
                self._sought[key] = int(committed)
                return int(committed)
            latest = self._reset_key == "hi_offset"
        else:
            latest = sought == ck.OFFSET_END
        ends = (self.end_offsets if latest else self.beginning_offsets)([tp], timeout_ms)
        self._sought[key] = int(ends[tp])  # where the fetch starts: no need to ask again
        return int(ends[tp])

    def highwater(self, tp: Any) -> int | None:
        """The high watermark of ``tp`` as of the last fetch (``None`` before one)."""
        try:
            _low, high = self._consumer.get_watermark_offsets(to_partition(tp), cached=True)
        except (ck.KafkaException, TypeError):
            return None
        if high < 0:
            high = self._stats.partitions.get((tp.topic, tp.partition), {}).get("hi_offset", -1)
        return int(high) if high >= 0 else None

    def _watermarks(
        self, partitions: Iterable[Any], timeout_ms: int | None, index: int
    ) -> dict[Any, int]:
        timeout = 30.0 if timeout_ms is None else timeout_ms / 1000.0
        out: dict[Any, int] = {}
        for tp in partitions:
            found = translated(
                partial(self._consumer.get_watermark_offsets, to_partition(tp), timeout)
            )
            if found is None:
                raise kerrors.KafkaTimeoutError(f"no offsets of {tp.topic}[{tp.partition}]")
            out[tp] = int(found[index])
        return out

    def beginning_offsets(
        self, partitions: Iterable[Any], timeout_ms: int | None = None
    ) -> dict[Any, int]:
        return self._watermarks(partitions, timeout_ms, 0)

    def end_offsets(
        self, partitions: Iterable[Any], timeout_ms: int | None = None
    ) -> dict[Any, int]:
        return self._watermarks(partitions, timeout_ms, 1)

    # ------------------------------------------------------------ commits
    def committed(self, tp: Any, metadata: bool = False, timeout_ms: int | None = None) -> Any:
        """The group's committed offset of ``tp`` (with ``metadata``, an
        ``OffsetAndMetadata``), or ``None``."""
        timeout = 30.0 if timeout_ms is None else timeout_ms / 1000.0
        deadline = time.monotonic() + timeout
        while True:  # kafka-python retries a coordinator that moves or loads; so does this
            try:
                (found,) = self._consumer.committed([to_partition(tp)], max(0.1, timeout))
                error = found.error
            except ck.KafkaException as exc:
                error = exc.args[0]
            if error is None:
                break
            timeout = deadline - time.monotonic()
            if not (retriable(error) and timeout > 0.2):
                raise translate(error)
            time.sleep(0.2)
        if found.offset < 0:
            return None
        if metadata:
            return OffsetAndMetadata(int(found.offset), found.metadata or "", -1)
        return int(found.offset)

    def commit(
        self, offsets: Mapping[Any, OffsetAndMetadata], timeout_ms: int | None = None
    ) -> None:
        """Commit ``offsets`` synchronously, waiting at most ``timeout_ms``."""
        listed = [
            ck.TopicPartition(tp.topic, tp.partition, om.offset, metadata=om.metadata)
            for tp, om in offsets.items()
        ]
        seconds = 30.0 if timeout_ms is None else timeout_ms / 1000.0
        commit = partial(self._consumer.commit, offsets=listed, asynchronous=False)
        # A commit on revoke runs on the callback's own thread: librdkafka serves it only
        # there (from a helper thread it waits for the callback to return); the group
        # session bounds it, as it bounds the rebalance.
        in_callback = self._in_callback
        done = translated(commit) if in_callback else within(commit, seconds, "an offset commit")
        results: list[Any] = done or []
        for p in results:
            if p.error is not None:
                raise translate(p.error)

    # ------------------------------------------------------------ the rest
    def connections(self) -> int | None:
        """Brokers connected at the last statistics (``None`` before the first)."""
        return self._stats.up

    def close(self, autocommit: bool = False, timeout_ms: int | None = None) -> None:
        """Leave the group (without committing), waiting at most ``timeout_ms``."""
        if self._closed:
            return
        self._closed = True
        seconds = 30.0 if timeout_ms is None else timeout_ms / 1000.0
        with contextlib.suppress(RuntimeError):  # closed already
            within(self._consumer.close, seconds, "closing the consumer")


def _drive(coroutine: Any) -> Any:
    """Run a listener coroutine to its end (it awaits nothing that suspends it here:
    :meth:`ConfluentAdapter.await_in_thread` runs the work at once)."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    coroutine.close()
    raise RuntimeError("a rebalance listener suspended inside a librdkafka callback")
