"""The ``kafka://`` URL factories and their registration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stream_nb._exceptions import ConfigError
from stream_nb.connectors.kafka.sink import KafkaDeadLetterSink, KafkaSink
from stream_nb.connectors.kafka.source import KafkaSource
from stream_nb.connectors.kafka.url import parse_kafka_url

try:
    import kafka  # noqa: F401 (the extra must be installed)
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the Kafka connector needs kafka-python; install the 'kafka' extra "
        "(pip install '.[kafka]' in a clone of stream-nb)"
    ) from exc


# ---------------------------------------------------------------- URL factories
def _bind(connector: Any, options: Mapping[str, Any]) -> None:
    metrics = options.get("metrics")
    if metrics is not None and hasattr(connector, "bind_metrics"):
        connector.bind_metrics(metrics.registry)


def open_kafka_source(url: str, options: Mapping[str, Any]) -> KafkaSource:
    """``kafka://h:p/topic[,topic]?group_id=...`` as a :class:`KafkaSource`."""
    servers, topics, query = parse_kafka_url(url)
    if options.get("reset_state"):
        query.setdefault("reset_state", True)
    source = KafkaSource(servers, topics, **query)
    _bind(source, options)
    return source


def open_kafka_sink(url: str, options: Mapping[str, Any]) -> KafkaSink:
    """``kafka://h:p/topic`` as a :class:`KafkaSink` (a :class:`KafkaDeadLetterSink`
    for the dead-letter role)."""
    servers, topics, query = parse_kafka_url(url)
    if len(topics) != 1:
        raise ConfigError(f"a Kafka sink writes one topic, got {topics} in {url!r}")
    cls = KafkaDeadLetterSink if options.get("role") == "dead_letters" else KafkaSink
    sink = cls(servers, topics[0], **query)
    _bind(sink, options)
    return sink


def _register() -> None:
    from stream_nb.connectors.registry import register

    register("kafka", source=open_kafka_source, sink=open_kafka_sink)


_register()
