"""``kafka://`` URLs, their options, and the client settings derived from them.

Besides :func:`parse_kafka_url`, the settings every Kafka connector shares: the bounds
of blocking calls (:data:`CALL_SECONDS`, :data:`CLOSE_SECONDS`), the producer defaults
(:func:`producer_defaults`), the options other clients inherit from a consumer's
(:func:`client_options`) and which client errors end the daemon (:func:`is_fatal`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from kafka import errors

from stream_nb._exceptions import ConfigError, StreamNBError

__all__ = [
    "BATCH_BYTES",
    "CALL_SECONDS",
    "CLOSE_SECONDS",
    "DELIVERY_TIMEOUT_MS",
    "FLUSH_SLICE_SECONDS",
    "SYNC_READ_SECONDS",
    "client_options",
    "instance_id",
    "is_fatal",
    "log",
    "parse_kafka_url",
    "producer_defaults",
    "topic_options",
    "transaction_call_seconds",
    "transaction_timeout_ms",
]

#: The logger of every Kafka connector.
log = logging.getLogger("stream_nb.kafka")

_BOOL = {"true": True, "false": False}

#: Options whose values are names or secrets: kept as text even when they look like
#: numbers (a group ``1651342231``, a worker ``5e3``).
_TEXT_OPTIONS = frozenset(
    {
        "client_id",
        "group_id",
        "group_instance_id",
        "sasl_plain_password",
        "sasl_plain_username",
        "sync_topic",
        "transactional_id",
        "worker_id",
    }
)

#: Producer batch size (kafka-python's default is 16 KiB).
BATCH_BYTES = 512 * 1024

#: Producer ``delivery_timeout_ms`` of the sinks: how long records are retried while
#: the broker is away before the daemon gives up and exits for its supervisor.
DELIVERY_TIMEOUT_MS = 30_000

#: Longest wait for a blocking client call that has no timeout of its own or a longer
#: one (seconds): commits, committed-offset reads, transactional calls, admin requests.
CALL_SECONDS = 30.0

#: Longest wait for a connector's close (seconds).
CLOSE_SECONDS = 10.0

#: A flush still waiting after this many seconds logs the broker trouble (then every 30 s).
FLUSH_SLICE_SECONDS = 5.0

#: Longest a sync waits to read the sync topic back to its end (its own delta included).
SYNC_READ_SECONDS = 2.0

#: Client errors after which retrying cannot help: this process was replaced by another
#: with the same transactional or group instance id, or it is not allowed to act.
_FATAL: tuple[type[BaseException], ...] = (
    errors.AuthorizationError,
    errors.FencedInstanceIdError,
    errors.IllegalStateError,
    errors.InvalidProducerEpochError,
    errors.ProducerFencedError,
    errors.UnsupportedVersionError,
)

#: Characters a ``group_instance_id`` may not hold (the broker's rule).
_NOT_IN_INSTANCE_ID = re.compile(r"[^A-Za-z0-9._-]")


def is_fatal(exc: BaseException) -> bool:
    """Whether an error ends the daemon: a fenced or unauthorised client (retrying cannot
    help), or one of stream-nb's own errors.

    Examples
    --------
    >>> is_fatal(errors.ProducerFencedError()), is_fatal(errors.KafkaTimeoutError())
    (True, False)
    """
    return isinstance(exc, (*_FATAL, StreamNBError))


def _convert(value: str) -> Any:
    """Option value from a URL query: bool, int, float or the string itself."""
    low = value.lower()
    if low in _BOOL:
        return _BOOL[low]
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def parse_kafka_url(url: str) -> tuple[list[str], list[str], dict[str, Any]]:
    """Split ``kafka://h:p[,h:p]/topic[,topic][?k=v&...]`` into servers, topics, options.

    Option values become numbers and booleans where they read as such, except those of
    options that name something (``group_id``, ``worker_id``, ``sync_topic`` …).

    Raises
    ------
    ConfigError
        If the scheme is not ``kafka``, or servers or topics are missing.

    Examples
    --------
    >>> parse_kafka_url("kafka://h:9092/events?group_id=g&linger_ms=5&check_crcs=false")
    (['h:9092'], ['events'], {'group_id': 'g', 'linger_ms': 5, 'check_crcs': False})
    >>> parse_kafka_url("kafka://h:9092/events?group_id=1651342231&worker_id=5e3")[2]
    {'group_id': '1651342231', 'worker_id': '5e3'}
    """
    parts = urlsplit(url)
    if parts.scheme != "kafka":
        raise ConfigError(f"not a Kafka URL: {url!r}; expected kafka://host:port/topic")
    servers = [s for s in parts.netloc.split(",") if s]
    topics = [unquote(t) for t in parts.path.lstrip("/").split(",") if t]
    if not servers:
        raise ConfigError(f"Kafka URL {url!r} names no broker; expected kafka://host:port/topic")
    if not topics:
        raise ConfigError(f"Kafka URL {url!r} names no topic; expected kafka://host:port/topic")
    options = {
        k: v if k in _TEXT_OPTIONS else _convert(v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    }
    return servers, topics, options


def topic_options(options: dict[str, Any]) -> tuple[bool, int, int]:
    """Pop ``create_topics``, ``topic_partitions``, ``topic_replication_factor``, checked.

    Examples
    --------
    >>> topic_options({"create_topics": True, "topic_partitions": 3})
    (True, 3, -1)
    """
    create = options.pop("create_topics", False)
    partitions = options.pop("topic_partitions", -1)
    replication = options.pop("topic_replication_factor", -1)
    if not isinstance(create, bool):
        raise ConfigError(f"create_topics must be true or false, got {create!r}")
    for name, value in (
        ("topic_partitions", partitions),
        ("topic_replication_factor", replication),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not (value > 0 or value == -1):
            raise ConfigError(
                f"{name} must be a positive integer (or -1 for the broker's default), got {value!r}"
            )
    return create, partitions, replication


def instance_id(worker_id: str) -> str:
    """The static group member id of a worker: ``stream-nb-<worker_id>``, in the
    characters and length the broker accepts.

    Examples
    --------
    >>> instance_id("host 7/a")
    'stream-nb-host_7_a'
    """
    return _NOT_IN_INSTANCE_ID.sub("_", f"stream-nb-{worker_id}")[:249]


def producer_defaults(options: dict[str, Any]) -> None:
    """Set the defaults of stream-nb's producers in ``options`` (where not given): every
    replica acknowledges, records are retried for :data:`DELIVERY_TIMEOUT_MS`, a request
    waits half of that (at most 30 s), reconnects back off at most 5 s."""
    options.setdefault("acks", "all")
    options.setdefault("delivery_timeout_ms", DELIVERY_TIMEOUT_MS)
    options.setdefault("request_timeout_ms", min(30_000, options["delivery_timeout_ms"] // 2))
    options.setdefault("reconnect_backoff_max_ms", 5000)


def transaction_call_seconds(delivery_timeout_ms: int) -> float:
    """Bound of a transactional call: ``commit_transaction`` first flushes the records
    (up to the delivery timeout), and a coordinator restarting with its broker needs
    time to load the transaction log; at least a minute."""
    return max(delivery_timeout_ms / 1000.0 + 10.0, 60.0)


def transaction_timeout_ms(interval: float) -> int:
    """Transaction timeout for a sync interval: ten intervals, at least 10 s, at most the
    broker's default ``transaction.max.timeout.ms`` (15 minutes)."""
    return min(900_000, max(10_000, int(10 * interval * 1000)))


def client_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Connection/security options of a consumer's options that other clients share.

    Examples
    --------
    >>> client_options({"security_protocol": "SSL", "group_id": "g", "client_id": "c"})
    {'security_protocol': 'SSL'}
    """
    keys = ("client_id", "security_protocol", "ssl_", "sasl_", "request_timeout_ms", "api_version")
    return {k: v for k, v in options.items() if k.startswith(keys) and k != "client_id"}
