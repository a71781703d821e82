"""Checking (and optionally creating) the topics a daemon uses, at start.

Every Kafka connector calls :func:`check_topics` when it is created: a missing topic
fails at once, naming it and both fixes, unless ``create_topics=true`` asks to create
it; the answer also gives each topic's partition count and record size limit
(``max.message.bytes``), which the sinks and model sync respect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from stream_nb._exceptions import ConfigError, StreamNBError
from stream_nb.connectors.kafka.client import bounded
from stream_nb.connectors.kafka.url import CALL_SECONDS, client_options, log

__all__ = ["TopicInfo", "admin_client", "check_topics"]

#: Kafka protocol error codes of a topic description.
_UNKNOWN_TOPIC_OR_PARTITION = 3
_TOPIC_AUTHORIZATION_FAILED = 29


@dataclass(frozen=True)
class TopicInfo:
    """A topic as found (or created) at start.

    Attributes
    ----------
    name
        The topic.
    partitions
        Its partition count (``None`` when the broker creates it on first use).
    max_message_bytes
        Its ``max.message.bytes`` (largest record batch the broker accepts), or
        ``None`` when it could not be read.
    """

    name: str
    partitions: int | None
    max_message_bytes: int | None


def admin_client(
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
            **client_options(options),
        )
    except KafkaError as exc:
        shown = servers if isinstance(servers, str) else ",".join(servers)
        raise error(
            f"cannot reach the Kafka brokers {shown} within {seconds:g} s ({exc!r}); "
            "check the host:port in the URL and that the brokers are up"
        ) from exc


def check_topics(
    servers: list[str] | str,
    options: Mapping[str, Any],
    roles: Mapping[str, str],
    *,
    create: bool,
    partitions: int = -1,
    replication_factor: int = -1,
    single_partition: Sequence[str] = (),
    error: type[StreamNBError],
) -> dict[str, TopicInfo]:
    """Check that every topic of ``roles`` (topic → what it is for) exists, with a fresh
    admin client, within :data:`~stream_nb.connectors.kafka.url.CALL_SECONDS`.

    A missing topic is created when ``create`` is true (``partitions`` and
    ``replication_factor``, ``-1`` for the broker's defaults; the topics of
    ``single_partition`` get one partition). Otherwise, if the broker creates topics
    on first use (``auto.create.topics.enable=true``), a missing topic is logged and
    left to the broker, except the ``single_partition`` ones, which are created here
    with one partition. Otherwise it is an error naming the topic and both fixes.

    Raises
    ------
    ConfigError
        Naming a missing topic, or one the client may not describe.
    StreamNBError
        ``error``, if the brokers cannot be reached or answer too slowly.
    """
    admin = admin_client(servers, options, error)
    try:
        return bounded(
            lambda: _check_with(
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


def _check_with(
    admin: Any,
    servers: Sequence[str],
    roles: Mapping[str, str],
    *,
    create: bool,
    partitions: int,
    replication_factor: int,
    single_partition: Sequence[str],
) -> dict[str, TopicInfo]:
    """:func:`check_topics` with an admin client."""
    names = list(roles)
    found = {t["name"]: t for t in admin.describe_topics(names)}
    missing: list[str] = []
    for name in names:
        code = int(found.get(name, {}).get("error_code", _UNKNOWN_TOPIC_OR_PARTITION))
        if code == _UNKNOWN_TOPIC_OR_PARTITION:
            missing.append(name)
        elif code == _TOPIC_AUTHORIZATION_FAILED:
            raise ConfigError(
                f"not authorized to describe Kafka topic {name!r} ({roles[name]}) on "
                f"{','.join(servers)}; grant this client DESCRIBE, READ/WRITE on it"
            )
        elif code != 0:
            raise ConfigError(
                f"cannot describe Kafka topic {name!r} ({roles[name]}): error code {code}"
            )
    to_create: list[str] = []
    left_to_broker: list[str] = []
    if missing:
        if create:
            to_create = missing
        elif _broker_auto_creates(admin):
            to_create = [n for n in missing if n in single_partition]
            left_to_broker = [n for n in missing if n not in single_partition]
        else:
            name = missing[0]
            hint = " --partitions 1" if name in single_partition else ""
            raise ConfigError(
                f"Kafka topic {name!r} ({roles[name]}) does not exist on "
                f"{','.join(servers)}; create it (kafka-topics.sh --bootstrap-server "
                f"{servers[0]} --create --topic {name}{hint}) or set create_topics=true "
                "in the URL"
            )
    if to_create:
        _create(admin, to_create, partitions, replication_factor, single_partition, roles)
        found.update({t["name"]: t for t in admin.describe_topics(to_create)})
    for name in left_to_broker:
        log.warning(
            "Kafka topic %r (%s) does not exist; the broker will create it with its "
            "defaults on first use (auto.create.topics.enable=true)",
            name,
            roles[name],
        )
    limits = _max_message_bytes(admin, [n for n in names if n not in left_to_broker])
    return {
        name: TopicInfo(
            name,
            None if name in left_to_broker else len(found[name].get("partitions") or []),
            limits.get(name),
        )
        for name in names
    }


def _create(
    admin: Any,
    names: list[str],
    partitions: int,
    replication_factor: int,
    single_partition: Sequence[str],
    roles: Mapping[str, str],
) -> None:
    for name in names:
        count = 1 if name in single_partition else partitions
        try:
            admin.create_topics([NewTopic(name, count, replication_factor)])
        except TopicAlreadyExistsError:  # another daemon created it meanwhile
            continue
        log.info(
            "created Kafka topic %r (%s) with %s partition(s)",
            name,
            roles[name],
            "the broker's default" if count < 0 else count,
        )


def _broker_auto_creates(admin: Any) -> bool:
    """Whether the broker creates topics on first use (``False`` when unknown)."""
    try:
        brokers = admin.describe_cluster()["brokers"]
        broker = str(brokers[0]["broker_id"])
        found = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, broker, ["auto.create.topics.enable"])],
            config_filter="all",
        )
        value = found["broker"][broker]["auto.create.topics.enable"]["value"]
    except (KafkaError, KeyError, IndexError, TypeError):
        return False
    return str(value).lower() == "true"


def _max_message_bytes(admin: Any, names: list[str]) -> dict[str, int]:
    """``max.message.bytes`` of each topic that has it readable."""
    if not names:
        return {}
    try:
        found = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, n, ["max.message.bytes"]) for n in names],
            config_filter="all",
        )["topic"]
    except (KafkaError, KeyError, TypeError):
        return {}
    out: dict[str, int] = {}
    for name in names:
        try:
            out[name] = int(found[name]["max.message.bytes"]["value"])
        except (KeyError, TypeError, ValueError):
            continue
    return out
