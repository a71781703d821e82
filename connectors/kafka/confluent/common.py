"""What the librdkafka consumer and producer share: options in librdkafka's names,
its errors as kafka-python's, bounded calls, statistics and logs."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import confluent_kafka as ck
import orjson
from kafka import errors as kerrors

from stream_nb.connectors.kafka.client import ClientFatalError, trouble
from stream_nb.connectors.kafka.url import is_fatal, log
from stream_nb.engine.runtime import CallTimeout, call_within

__all__ = [
    "DROPPED_OPTIONS",
    "OPTION_NAMES",
    "STATS_MS",
    "Stats",
    "client_config",
    "librdkafka_config",
    "retriable",
    "to_partition",
    "translate",
    "translated",
    "within",
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


def retriable(error: Any) -> bool:
    return isinstance(error, ck.KafkaError) and (
        error.code() in _RETRIED or (error.retriable() and not error.fatal())
    )


def translated(fn: Callable[[], T]) -> T:
    """``fn()``, with librdkafka's exceptions raised as kafka-python's."""
    try:
        return fn()
    except ck.KafkaException as exc:
        raise translate(exc) from exc


def within(fn: Callable[[], T], seconds: float, what: str) -> T:
    """``translated(fn)`` on a helper thread, waited for at most ``seconds``
    (librdkafka's synchronous commit takes no timeout): ``KafkaTimeoutError`` after
    that (see :func:`~stream_nb.engine.runtime.call_within`)."""
    try:
        return call_within(lambda: translated(fn), seconds, what)
    except CallTimeout as exc:
        raise kerrors.KafkaTimeoutError(str(exc)) from None


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


def to_partition(tp: Any) -> ck.TopicPartition:
    return ck.TopicPartition(tp.topic, tp.partition)


class Stats:
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


def client_config(options: Mapping[str, Any], stats: Stats) -> dict[str, Any]:
    config = librdkafka_config(options)
    config.setdefault("statistics.interval.ms", STATS_MS)
    config["stats_cb"] = stats
    config["error_cb"] = _error_cb
    config["logger"] = _LOG
    return config
