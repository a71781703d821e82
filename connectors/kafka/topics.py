"""Checking (and optionally creating) the topics a daemon uses, at start."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stream_nb._exceptions import StreamNBError
from stream_nb.connectors.kafka.client import (
    TopicInfo,
    bounded,
    check_topics,
)
from stream_nb.connectors.kafka.url import CALL_SECONDS, _client_options

try:
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the Kafka connector needs kafka-python; install the 'kafka' extra "
        "(pip install '.[kafka]' in a clone of stream-nb)"
    ) from exc


def _admin(
    servers: list[str] | str,
    options: Mapping[str, Any],
    error: type[StreamNBError],
    seconds: float = CALL_SECONDS,
) -> Any:
    """An admin client with the connectors' connection/security options, or ``error``
    naming the servers if none answers within ``seconds``."""
    try:
        return KafkaAdminClient(
            bootstrap_servers=servers,
            bootstrap_timeout_ms=int(seconds * 1000),
            **_client_options(options),
        )
    except KafkaError as exc:
        shown = servers if isinstance(servers, str) else ",".join(servers)
        raise error(
            f"cannot reach the Kafka brokers {shown} within {seconds:g} s ({exc!r}); "
            "check the host:port in the URL and that the brokers are up"
        ) from exc


def _check(
    servers: list[str] | str,
    options: Mapping[str, Any],
    roles: Mapping[str, str],
    *,
    create: bool,
    partitions: int,
    replication_factor: int,
    single_partition: tuple[str, ...] = (),
    error: type[StreamNBError],
) -> dict[str, TopicInfo]:
    """:func:`~stream_nb.connectors.kafka.client.check_topics` with a fresh admin client, bounded.

    A missing topic is a :class:`~stream_nb.ConfigError`; brokers that cannot be
    reached, or answer too slowly, are an ``error``.
    """
    admin = _admin(servers, options, error)
    try:
        return bounded(
            lambda: check_topics(
                admin,
                [servers] if isinstance(servers, str) else servers,
                roles,
                create=create,
                partitions=partitions,
                replication_factor=replication_factor,
                single_partition=single_partition,
            ),
            CALL_SECONDS,
            f"checking Kafka topics {sorted(roles)}",
            error,
        )
    except KafkaError as exc:
        raise error(f"cannot check Kafka topics {sorted(roles)}: {exc!r}") from exc
    finally:
        admin.close()
