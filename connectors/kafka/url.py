"""``kafka://`` URLs, their options, and the client settings derived from them."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from stream_nb._exceptions import ConfigError, StreamNBError

try:
    from kafka.errors import (
        AuthorizationError,
        FencedInstanceIdError,
        IllegalStateError,
        InvalidProducerEpochError,
        ProducerFencedError,
        UnsupportedVersionError,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the Kafka connector needs kafka-python; install the 'kafka' extra "
        "(pip install '.[kafka]' in a clone of stream-nb)"
    ) from exc


_log = logging.getLogger("stream_nb.kafka")


#: Header names written on dead letters.
HEADER_REASON = "stream_nb.reason"


HEADER_TOPIC = "stream_nb.source.topic"


HEADER_PARTITION = "stream_nb.source.partition"


HEADER_OFFSET = "stream_nb.source.offset"


_BOOL = {"true": True, "false": False}


#: Producer batch size (kafka-python's default is 16 KiB).
_BATCH_BYTES = 512 * 1024


#: Producer ``delivery_timeout_ms`` of the sinks: how long records are retried while
#: the broker is away before the daemon gives up and exits for its supervisor.
DELIVERY_TIMEOUT_MS = 30_000


#: Longest wait for a blocking client call that has no timeout of its own or a longer
#: one (seconds): commits, committed-offset reads, transactional calls, admin requests.
CALL_SECONDS = 30.0


#: Longest wait for a connector's close (seconds).
CLOSE_SECONDS = 10.0


#: A flush still waiting after this many seconds logs the broker trouble (then every 30 s).
_FLUSH_SLICE = 5.0


#: Client errors after which retrying cannot help: this process was replaced by another
#: with the same transactional or group instance id, or it is not allowed to act.
_FATAL = (
    AuthorizationError,
    FencedInstanceIdError,
    IllegalStateError,
    InvalidProducerEpochError,
    ProducerFencedError,
    UnsupportedVersionError,
)


def _fatal(exc: BaseException) -> bool:
    """Whether an error ends the daemon (see :data:`_FATAL`; stream-nb's own errors too)."""
    return isinstance(exc, (*_FATAL, StreamNBError))


@functools.cache
def _check_crc32c() -> None:
    """Warn once when kafka-python must compute CRC32C in pure Python."""
    try:
        from kafka.record import util
    except ImportError:  # pragma: no cover - other kafka-python layouts
        return
    if getattr(util, "crc32c_c", True) is None:
        _log.warning(
            "kafka-python computes record-batch CRC32C in pure Python (about 40% of the "
            "daemon's CPU); install the 'kafka' extra or 'pip install crc32c'"
        )


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

    Raises
    ------
    ConfigError
        If the scheme is not ``kafka``, or servers or topics are missing.
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
    options = {k: _convert(v) for k, v in parse_qsl(parts.query, keep_blank_values=True)}
    return servers, topics, options


def _topic_options(options: dict[str, Any]) -> tuple[bool, int, int]:
    """Pop ``create_topics``, ``topic_partitions``, ``topic_replication_factor``."""
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


#: Characters a ``group_instance_id`` may hold (the broker's rule).
_INSTANCE_ID = re.compile(r"[^A-Za-z0-9._-]")


#: Longest a sync waits to read the sync topic back to its end (its own delta included).
_SYNC_READ_SECONDS = 2.0


def _transaction_call_seconds(delivery_timeout_ms: int) -> float:
    """Bound of a transactional call: ``commit_transaction`` first flushes the records
    (up to the delivery timeout), and a coordinator restarting with its broker needs
    time to load the transaction log; at least a minute."""
    return max(delivery_timeout_ms / 1000.0 + 10.0, 60.0)


def _transaction_timeout_ms(interval: float) -> int:
    """Transaction timeout for a sync interval: ten intervals, at least 10 s, at most the
    broker's default ``transaction.max.timeout.ms`` (15 minutes)."""
    return min(900_000, max(10_000, int(10 * interval * 1000)))


def _client_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Connection/security options of a consumer's options that other clients share."""
    keys = ("client_id", "security_protocol", "ssl_", "sasl_", "request_timeout_ms", "api_version")
    return {k: v for k, v in options.items() if k.startswith(keys) and k != "client_id"}
