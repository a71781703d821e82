"""KafkaSource, KafkaSink and KafkaDeadLetterSink against the real test broker."""

from __future__ import annotations

import subprocess
import sys
import time

import orjson
import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka_helpers import create_topic

from stream_nb import ConfigError
from stream_nb.connectors.kafka import (
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_REASON,
    HEADER_TOPIC,
    KafkaDeadLetterSink,
    KafkaSink,
    KafkaSource,
    parse_kafka_url,
)


def read_all(bootstrap: str, topic: str, n: int, partitions: int = 1) -> list:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=20_000,
    )
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    out = []
    for message in consumer:
        out.append(message)
        if len(out) == n:
            break
    consumer.close()
    return out


def drain(source: KafkaSource, n: int, deadline: float = 60.0) -> list:
    records: list = []
    end = time.monotonic() + deadline
    while len(records) < n and time.monotonic() < end:
        records += source.next_batch(500, 0.2)
    return records


def test_url_parsing_and_errors() -> None:
    servers, topics, options = parse_kafka_url(
        "kafka://a:1,b:2/t1,t2?group_id=g&security_protocol=SASL_SSL&check_crcs=false"
    )
    assert servers == ["a:1", "b:2"] and topics == ["t1", "t2"]
    assert options == {"group_id": "g", "security_protocol": "SASL_SSL", "check_crcs": False}
    with pytest.raises(ConfigError, match="names no topic"):
        parse_kafka_url("kafka://a:1/")
    with pytest.raises(ConfigError, match="not a Kafka URL"):
        parse_kafka_url("file:/tmp/x")


def test_names_in_urls_stay_text() -> None:
    """A group or worker id that reads as a number stays the name it is (a group id
    ``524912e979`` used to become ``inf``, and the static member's leave then failed)."""
    _, _, options = parse_kafka_url(
        "kafka://a:1/t?group_id=524912e979&worker_id=1651342231&sync_topic=7"
        "&group_instance_id=0012&linger_ms=5&acks=1"
    )
    assert options == {
        "group_id": "524912e979",
        "worker_id": "1651342231",
        "sync_topic": "7",
        "group_instance_id": "0012",
        "linger_ms": 5,
        "acks": 1,
    }


def test_auto_commit_refused(kafka_bootstrap: str, kafka_client: str) -> None:
    with pytest.raises(ConfigError, match="enable_auto_commit"):
        KafkaSource(kafka_bootstrap, "t", enable_auto_commit=True, client=kafka_client)


def test_source_positions_seek_commit_and_replay(
    kafka_bootstrap: str, unique: str, kafka_client: str
) -> None:
    topic, group = f"src-{unique}", f"g-{unique}"
    create_topic(kafka_bootstrap, topic, 3)
    sink = KafkaSink(kafka_bootstrap, topic, client=kafka_client)
    for i in range(60):
        sink.write(orjson.dumps({"i": i}), key=str(i).encode())
    sink.flush()
    sink.close()

    source = KafkaSource(
        kafka_bootstrap, topic, group_id=group, worker_id="w1", client=kafka_client
    )
    records = drain(source, 60)
    assert sorted(orjson.loads(r.payload)["i"] for r in records) == list(range(60))
    assert all(r.position["topic"] == topic for r in records)
    position = source.position()
    by_partition = {p: o for _, p, o in position["offsets"]}
    counts = {p: sum(r.position["partition"] == p for r in records) for p in range(3)}
    assert by_partition == counts  # next offset = records read per partition
    assert source.ready
    source.commit(position, "000000000007")
    source.close()

    probe = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group)
    committed = probe.committed(TopicPartition(topic, 0), metadata=True)
    probe.close()
    assert committed.offset == counts[0]
    # (librdkafka's commits end their metadata with a NUL byte, which kafka-python keeps)
    metadata = committed.metadata.rstrip("\x00")
    assert orjson.loads(metadata) == {"snapshot": "000000000007", "worker": "w1"}

    # Restart from an older snapshot (partition 0 at offset 0): the snapshot wins over the
    # committed offsets, and the re-read events are counted as replayed.
    older = {"offsets": [[topic, 0, 0], [topic, 1, counts[1]], [topic, 2, counts[2]]]}
    again = KafkaSource(kafka_bootstrap, topic, group_id=group, worker_id="w1", client=kafka_client)
    again.seek(older)
    replay = drain(again, counts[0])
    replay += again.next_batch(500, 0.5)  # nothing more than partition 0's events
    assert sorted(r.position["offset"] for r in replay) == list(range(counts[0]))
    assert {r.position["partition"] for r in replay} == {0}
    assert again.replayed == counts[0]
    assert again.rebalances["assigned"] >= 1
    again.close()

    # The same older snapshot, but the offsets ahead of it were committed by another
    # worker (its model learned those events): continue from its commit, re-read nothing.
    other = KafkaSource(kafka_bootstrap, topic, group_id=group, worker_id="w2", client=kafka_client)
    deadline = time.monotonic() + 60
    while len(other.assignment) < 3 and time.monotonic() < deadline:
        assert other.next_batch(500, 0.2) == []  # all committed already
    other.commit({"offsets": [[topic, p, counts[p]] for p in range(3)]}, "000000000001")
    other.close()
    third = KafkaSource(kafka_bootstrap, topic, group_id=group, worker_id="w1", client=kafka_client)
    third.seek({**older, "worker": "w1"})
    assert third.next_batch(500, 2.0) == [] and third.replayed == 0
    assert third.position()["offsets"] == older["offsets"][1:]  # partition 0: not restored
    third.close()


def test_sink_keys_and_dead_letter_headers(
    kafka_bootstrap: str, unique: str, kafka_client: str
) -> None:
    out, dlq = f"out-{unique}", f"dlq-{unique}"
    sink = KafkaSink(kafka_bootstrap, out, client=kafka_client)
    sink.write(b'{"prediction": 1}', key=b"event-7")
    sink.flush()
    sink.close()
    (message,) = read_all(kafka_bootstrap, out, 1)
    assert message.key == b"event-7" and message.value == b'{"prediction": 1}'

    letters = KafkaDeadLetterSink(kafka_bootstrap, dlq, client=kafka_client)
    letter = orjson.dumps(
        {
            "reason": "invalid_json",
            "position": {"topic": "events", "partition": 2, "offset": 41},
            "error": "bad",
            "payload": "{oops",
        }
    )
    letters.write(letter)
    letters.flush()
    letters.close()
    (dead,) = read_all(kafka_bootstrap, dlq, 1)
    headers = dict(dead.headers)
    assert headers[HEADER_REASON] == b"invalid_json"
    assert headers[HEADER_TOPIC] == b"events"
    assert headers[HEADER_PARTITION] == b"2"
    assert headers[HEADER_OFFSET] == b"41"
    assert orjson.loads(dead.value)["payload"] == "{oops"


def test_missing_kafka_python_names_the_extra() -> None:
    """Without kafka-python the connector says which extra to install (checked in a fresh
    interpreter where importing ``kafka`` fails)."""
    code = (
        "import sys; sys.modules['kafka'] = None\n"
        "try:\n"
        "    import stream_nb.connectors.kafka\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "from stream_nb.connectors.registry import open_source\n"
        "try:\n"
        "    open_source('kafka://127.0.0.1:9/t')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "pip install '.[kafka]'" in out.splitlines()[0]
    assert out.splitlines()[1].startswith("ConfigError") and "pip install '.[kafka]'" in out


def test_missing_confluent_kafka_names_the_extra() -> None:
    """``client=confluent`` without confluent-kafka is a ConfigError naming the
    ``kafka-fast`` extra, from the URL and from the CLI flag (checked in a fresh
    interpreter where importing ``confluent_kafka`` fails); an unknown client names both."""
    code = (
        "import sys; sys.modules['confluent_kafka'] = None\n"
        "from stream_nb.connectors.registry import open_sink, open_source\n"
        "for call in (lambda: open_source('kafka://127.0.0.1:9/t?client=confluent'),\n"
        "             lambda: open_sink('kafka://127.0.0.1:9/t', {'kafka_client': 'confluent'}),\n"
        "             lambda: open_sink('kafka://127.0.0.1:9/t?client=rdkafka')):\n"
        "    try:\n"
        "        call()\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(out) == 3, out
    for line in out[:2]:
        assert line.startswith("ConfigError") and "pip install 'stream-nb[kafka-fast]'" in line
    assert out[2] == (
        "ConfigError unknown Kafka client 'rdkafka'; expected kafka-python or confluent"
    )
