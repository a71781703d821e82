"""The ``kafka://`` URL factories and their registration in :mod:`stream_nb.connectors.registry`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stream_nb._exceptions import ConfigError
from stream_nb.connectors.kafka.sink import KafkaDeadLetterSink, KafkaSink
from stream_nb.connectors.kafka.source import KafkaSource
from stream_nb.connectors.kafka.url import parse_kafka_url
from stream_nb.connectors.registry import register

__all__ = ["open_kafka_sink", "open_kafka_source"]


def _bind_metrics(connector: KafkaSource | KafkaSink, options: Mapping[str, Any]) -> None:
    """Publish the connector's metrics on the engine's registry (``options["metrics"]``)."""
    metrics = options.get("metrics")
    if metrics is not None:
        connector.bind_metrics(metrics.registry)


def _choose_client(query: dict[str, Any], options: Mapping[str, Any]) -> None:
    """The client of a connector: the URL's ``client=``, else ``options["kafka_client"]``
    (``--kafka-client``), else kafka-python."""
    if options.get("kafka_client") is not None:
        query.setdefault("client", options["kafka_client"])


def open_kafka_source(url: str, options: Mapping[str, Any]) -> KafkaSource:
    """``kafka://h:p/topic[,topic]?group_id=...`` as a :class:`KafkaSource`
    (``client=confluent`` for librdkafka)."""
    servers, topics, query = parse_kafka_url(url)
    _choose_client(query, options)
    if options.get("reset_state"):
        query.setdefault("reset_state", True)
    source = KafkaSource(servers, topics, **query)
    _bind_metrics(source, options)
    return source


def open_kafka_sink(url: str, options: Mapping[str, Any]) -> KafkaSink:
    """``kafka://h:p/topic`` as a :class:`KafkaSink` (a :class:`KafkaDeadLetterSink`
    for the dead-letter role)."""
    servers, topics, query = parse_kafka_url(url)
    _choose_client(query, options)
    if len(topics) != 1:
        raise ConfigError(f"a Kafka sink writes one topic, got {topics} in {url!r}")
    cls = KafkaDeadLetterSink if options.get("role") == "dead_letters" else KafkaSink
    sink = cls(servers, topics[0], **query)
    _bind_metrics(sink, options)
    return sink


register("kafka", source=open_kafka_source, sink=open_kafka_sink)
