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

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, TypeVar

import confluent_kafka as ck
import orjson
from kafka import OffsetAndMetadata, TopicPartition
from kafka import errors as kerrors

from stream_nb.connectors.base import Record
from stream_nb.connectors.kafka.client import ClientAdapter, ClientFatalError, trouble
from stream_nb.connectors.kafka.url import (
    DELIVERY_TIMEOUT_MS,
    is_fatal,
    log,
    transaction_call_seconds,
)
from stream_nb.engine.runtime import abandon

__all__ = [
    "DROPPED_OPTIONS",
    "OPTION_NAMES",
    "ConfluentAdapter",
    "ConfluentConsumer",
    "ConfluentProducer",
    "librdkafka_config",
    "translate",
]

T = TypeVar("T")

#: kafka-python option names and their librdkafka names, where they differ beyond
#: ``_`` → ``.``.
OPTION_NAMES = {
    "delivery_timeout_ms": "message.timeout.ms",
    "fetch_max_wait_ms": "fetch.wait.max.ms",
    "max_request_size": "message.max.bytes",
    "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
}

#: kafka-python options without a librdkafka counterpart (librdkafka sizes its polls,
#: versions and metrics itself).
DROPPED_OPTIONS = frozenset(
    {"api_version", "bootstrap_timeout_ms", "max_block_ms", "max_poll_records", "metrics_enabled"}
)

#: Seconds between two librdkafka statistics (broker connections for readiness).
STATS_MS = 1000

#: librdkafka's bound of ``send_offsets_to_transaction`` (seconds); five more, and the
#: call is abandoned (see :meth:`ConfluentProducer.send_offsets_to_transaction`).
SEND_OFFSETS_SECONDS = 20.0

#: Records handed to librdkafka between two servings of its delivery reports.
_SERVE_EVERY = 1024

#: Largest record the producer sends unless ``max_request_size`` says otherwise
#: (kafka-python's default, so both clients cut records at the same size).
_MAX_REQUEST_BYTES = 1_048_576

#: librdkafka error codes and the kafka-python errors they are raised as (codes above
#: zero are the broker's, which kafka-python numbers the same).
_LOCAL_ERRORS: dict[int, type[kerrors.KafkaError]] = {
    ck.KafkaError._MSG_TIMED_OUT: kerrors.KafkaTimeoutError,
    ck.KafkaError._TIMED_OUT: kerrors.KafkaTimeoutError,
    ck.KafkaError._TIMED_OUT_QUEUE: kerrors.KafkaTimeoutError,
    ck.KafkaError._TRANSPORT: kerrors.KafkaConnectionError,
    ck.KafkaError._ALL_BROKERS_DOWN: kerrors.KafkaConnectionError,
    ck.KafkaError._FENCED: kerrors.ProducerFencedError,
    ck.KafkaError._STATE: kerrors.IllegalStateError,
    ck.KafkaError._NOT_IMPLEMENTED: kerrors.UnsupportedVersionError,
}

#: Errors of a fenced producer (another instance with its transactional id, or its
#: transaction aborted by the coordinator).
_FENCED = frozenset(
    {
        ck.KafkaError._FENCED,
        ck.KafkaError.PRODUCER_FENCED,
        ck.KafkaError.INVALID_PRODUCER_EPOCH,
        ck.KafkaError.TRANSACTION_COORDINATOR_FENCED,
    }
)


def translate(error: ck.KafkaError | ck.KafkaException | BaseException) -> kerrors.KafkaError:
    """librdkafka's error as the kafka-python error the connector handles.

    A fatal error (the client cannot go on) becomes one that
    :func:`~stream_nb.connectors.kafka.url.is_fatal` recognises; a fenced producer a
    ``ProducerFencedError``.

    Examples
    --------
    >>> translate(ck.KafkaError(ck.KafkaError.MSG_SIZE_TOO_LARGE))
    MessageSizeTooLargeError('Broker: Message size too large')
    >>> type(translate(ck.KafkaError(ck.KafkaError._MSG_TIMED_OUT))).__name__
    'KafkaTimeoutError'
    """
    if isinstance(error, ck.KafkaException):
        error = error.args[0] if error.args else ck.KafkaError(ck.KafkaError._FAIL)
    if not isinstance(error, ck.KafkaError):
        return kerrors.KafkaError(repr(error))
    code = error.code()
    if code in _FENCED:
        cls: type[kerrors.KafkaError] = kerrors.ProducerFencedError
    elif code in _LOCAL_ERRORS:
        cls = _LOCAL_ERRORS[code]
    elif code > 0:
        cls = kerrors.for_code(code)
    else:
        cls = kerrors.KafkaError
    exc = cls(error.str())
    if (error.fatal() or code == ck.KafkaError._FATAL) and not is_fatal(exc):
        return ClientFatalError(f"fatal librdkafka error: {error.str()}")
    return exc


#: Errors of a coordinator that moves, loads or is briefly away: retried until the call's
#: timeout, as kafka-python retries them.
_RETRIED = frozenset(
    {
        ck.KafkaError.NOT_COORDINATOR,
        ck.KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        ck.KafkaError.COORDINATOR_NOT_AVAILABLE,
        ck.KafkaError.UNSTABLE_OFFSET_COMMIT,
        ck.KafkaError._TRANSPORT,
        ck.KafkaError._WAIT_COORD,
    }
)


def _retriable(error: Any) -> bool:
    return isinstance(error, ck.KafkaError) and (
        error.code() in _RETRIED or (error.retriable() and not error.fatal())
    )


def _call(call: Callable[[], T]) -> T:
    """``call()``, with librdkafka's exceptions raised as kafka-python's."""
    try:
        return call()
    except ck.KafkaException as exc:
        raise translate(exc) from exc


def _within(call: Callable[[], T], seconds: float, what: str) -> T:
    """``call()`` on a helper thread, waited for at most ``seconds`` (librdkafka's
    synchronous commit takes no timeout): ``KafkaTimeoutError`` after that."""
    value: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            value.append(_call(call))
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"stream-nb {what}", daemon=True).start()
    if not done.wait(seconds):
        abandon(what)
        raise kerrors.KafkaTimeoutError(f"{what} did not finish within {seconds:g} s")
    if failure:
        raise failure[0]
    return value[0]


def librdkafka_config(options: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka configuration from kafka-python-style options (see the module
    docstring).

    Examples
    --------
    >>> librdkafka_config({"bootstrap_servers": ["a:1", "b:2"], "linger_ms": 5,
    ...                    "max_poll_records": 10, "queue.buffering.max.ms": 1})
    {'bootstrap.servers': 'a:1,b:2', 'linger.ms': 5, 'queue.buffering.max.ms': 1}
    """
    config: dict[str, Any] = {}
    for name, value in options.items():
        if name in DROPPED_OPTIONS or value is None:
            continue
        key = OPTION_NAMES.get(name, name.replace("_", "."))
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        config[key] = value
    return config


def _tp(tp: Any) -> ck.TopicPartition:
    return ck.TopicPartition(tp.topic, tp.partition)


class _Stats:
    """What librdkafka's statistics (``stats_cb``, every :data:`STATS_MS`) tell: broker
    connections, and per assigned partition its offsets (``committed_offset``,
    ``lo_offset``, ``hi_offset`` …)."""

    def __init__(self) -> None:
        self.up: int | None = None
        self.partitions: dict[tuple[str, int], dict[str, Any]] = {}

    def __call__(self, raw: str) -> None:
        try:
            stats = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        brokers = stats.get("brokers") or {}
        self.up = sum(1 for b in brokers.values() if b.get("state") == "UP")
        partitions: dict[tuple[str, int], dict[str, Any]] = {}
        for name, topic in (stats.get("topics") or {}).items():
            for number, partition in (topic.get("partitions") or {}).items():
                if int(number) >= 0:
                    partitions[name, int(number)] = partition
        self.partitions = partitions


def _error_cb(error: ck.KafkaError) -> None:
    """librdkafka's own errors (outside any call): logged through the trouble log."""
    trouble.report(f"librdkafka:{error.name()}", f"librdkafka: {error.str()} ({error.name()})")


class _Log:
    """librdkafka's log lines (served in ``poll``/``consume``/``flush``): warnings and
    errors through the trouble log, one per facility every 30 s (a broker away makes
    librdkafka log every reconnect attempt), the rest at debug level."""

    def log(self, level: int, fmt: str, *args: Any) -> None:
        message = fmt % args
        if level < logging.WARNING:
            log.debug("librdkafka: %s", message)
            return
        facility = str(args[0]) if args else "log"
        trouble.report(f"librdkafka-log:{facility}", f"librdkafka: {message}", level=level)


_LOG = _Log()


def _config(options: Mapping[str, Any], stats: _Stats) -> dict[str, Any]:
    config = librdkafka_config(options)
    config.setdefault("statistics.interval.ms", STATS_MS)
    config["stats_cb"] = stats
    config["error_cb"] = _error_cb
    config["logger"] = _LOG
    return config


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
        options.setdefault("max_request_size", _MAX_REQUEST_BYTES)
        self._stats = _Stats()
        config = _config(options, self._stats)
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
        if self._unserved >= _SERVE_EVERY:
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
        _call(lambda: self._producer.init_transactions(timeout or self._txn_seconds))

    def begin_transaction(self) -> None:
        _call(self._producer.begin_transaction)

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
        _within(
            lambda: self._producer.send_offsets_to_transaction(listed, group, seconds),
            seconds + 5.0,
            "adding offsets to a transaction",
        )

    def commit_transaction(self, timeout: float | None = None) -> None:
        _call(lambda: self._producer.commit_transaction(timeout or self._txn_seconds))

    def abort_transaction(self, timeout: float | None = None) -> None:
        _call(lambda: self._producer.abort_transaction(timeout or self._txn_seconds))

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
        self._stats = _Stats()
        config = _config(options, self._stats)
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

        _call(
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
        _call(
            lambda: self._consumer.assign(
                [ck.TopicPartition(tp.topic, tp.partition, start) for tp in partitions]
            )
        )

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(p.topic, p.partition) for p in self._consumer.assignment()}

    def group_metadata(self) -> Any:
        """The group metadata a transaction's offsets are sent with."""
        return _call(self._consumer.consumer_group_metadata)

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
        _call(lambda: self._consumer.pause([_tp(tp) for tp in partitions]))
        self._paused.update(TopicPartition(tp.topic, tp.partition) for tp in partitions)

    def resume(self, *partitions: Any) -> None:
        _call(lambda: self._consumer.resume([_tp(tp) for tp in partitions]))
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
            _call(lambda: self._consumer.assign([*kept, target]))

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
            (found,) = _call(lambda: self._consumer.position([_tp(tp)]))
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
            _low, high = self._consumer.get_watermark_offsets(_tp(tp), cached=True)
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
            found = _call(partial(self._consumer.get_watermark_offsets, _tp(tp), timeout))
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
                (found,) = self._consumer.committed([_tp(tp)], max(0.1, timeout))
                error = found.error
            except ck.KafkaException as exc:
                error = exc.args[0]
            if error is None:
                break
            timeout = deadline - time.monotonic()
            if not (_retriable(error) and timeout > 0.2):
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
        done = _call(commit) if in_callback else _within(commit, seconds, "an offset commit")
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
            _within(self._consumer.close, seconds, "closing the consumer")


def _drive(coroutine: Any) -> Any:
    """Run a listener coroutine to its end (it awaits nothing that suspends it here:
    :meth:`ConfluentAdapter.await_in_thread` runs the work at once)."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    coroutine.close()
    raise RuntimeError("a rebalance listener suspended inside a librdkafka callback")


class ConfluentAdapter(ClientAdapter):
    """librdkafka for the connector: :class:`ConfluentConsumer`, :class:`ConfluentProducer`,
    and records straight from librdkafka's messages."""

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
    def records(polled: Any, positions: dict[Any, int]) -> list[Record]:
        out: list[Record] = []
        append = out.append
        last: dict[tuple[str, int], int] = {}
        for m in polled:
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            kind, stamp = m.timestamp()
            headers = m.headers()
            value = m.value()
            append(
                Record(
                    payload=value if value is not None else b"",
                    position={"topic": topic, "partition": partition, "offset": offset},
                    key=m.key(),
                    timestamp=None if kind == ck.TIMESTAMP_NOT_AVAILABLE else stamp / 1000.0,
                    headers=tuple((k, v or b"") for k, v in headers) if headers else (),
                )
            )
            last[topic, partition] = offset + 1
        for (topic, partition), offset in last.items():
            positions[TopicPartition(topic, partition)] = offset
        return out

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


log.debug("librdkafka %s (confluent-kafka %s)", ck.libversion()[0], ck.version()[0])
