"""Blocks in, batches out: the source's message blocks and the sink's keyed batches
(``KafkaSource.next_block``, ``KafkaSink.write_keyed``) on the real broker, with both
clients; delivery failures still fail the flush when only failures are reported."""

from __future__ import annotations

import time

import orjson
import pytest
from kafka import KafkaProducer
from kafka_helpers import read_topic
from test_kafka_stays_up import create_topics, set_topic_config

from stream_nb import SinkError
from stream_nb.connectors.kafka import (
    HEADER_OFFSET,
    HEADER_REASON,
    KafkaDeadLetterSink,
    KafkaSink,
    KafkaSource,
)
from stream_nb.connectors.kafka.block import MessageBlock


def _blocks(source: KafkaSource, n: int, deadline: float = 60.0) -> list[MessageBlock]:
    blocks: list[MessageBlock] = []
    end = time.monotonic() + deadline
    while sum(len(b) for b in blocks) < n and time.monotonic() < end:
        block = source.next_block(500, 0.2)
        if block is not None:
            blocks.append(block)
    return blocks


def test_blocks_carry_payloads_positions_keys_and_headers(
    kafka_bootstrap: str, unique: str, kafka_client: str
) -> None:
    """Messages of two topics, some without key, some with headers (a header without a
    value among them), tombstones: each block's records are the messages, its position
    format writes each position's JSON, and the source's positions follow the blocks."""
    topics = [f"blk-a-{unique}", f"blk-b-{unique}"]
    create_topics(kafka_bootstrap, {topic: {} for topic in topics}, partitions=2)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    sent = {}
    for i in range(240):
        topic, partition = topics[i % 2], (i // 2) % 2
        key = None if i % 3 == 0 else b"k%d" % i
        # (tombstones: only with a key)
        value = None if i % 17 == 1 and key is not None else orjson.dumps({"i": i})
        headers = [("trace", b"t%d" % i), ("empty", b"")] if i % 5 == 0 else None
        meta = producer.send(topic, value=value, key=key, headers=headers, partition=partition).get(
            timeout=30
        )
        sent[topic, partition, meta.offset] = (value or b"", key, headers)
    producer.close()

    source = KafkaSource(kafka_bootstrap, topics, group_id=f"g-{unique}", client=kafka_client)
    try:
        blocks = _blocks(source, len(sent))
        seen = {}
        for block in blocks:
            records = block.records()
            assert block.payloads == [r.payload for r in records]
            assert block.positions() == [r.position for r in records]
            fmt, columns = block.position_format()
            assert [fmt % row for row in zip(*columns, strict=True)] == [
                orjson.dumps(r.position) for r in records
            ]
            keys = block.keys()
            assert keys is None or keys == [r.key for r in records]
            headers = block.headers()
            assert (headers is None) == all(not r.headers for r in records)
            if headers is not None:
                assert headers == [list(r.headers) if r.headers else None for r in records]
            assert all(r.timestamp is not None for r in records)
            assert block.last_timestamp() == records[-1].timestamp
            for r in records:
                where = r.position["topic"], r.position["partition"], r.position["offset"]
                seen[where] = (r.payload, r.key, [(k, v or b"") for k, v in r.headers] or None)
        expected = {
            where: (value, key, None if h is None else [(k, v or b"") for k, v in h])
            for where, (value, key, h) in sent.items()
        }
        assert seen == expected
        ends = {(t, p): o + 1 for t, p, o in sorted(sent)}  # (the last offset's wins)
        assert {(t, p): o for t, p, o in source.position()["offsets"]} == ends
    finally:
        source.close()


def _predictions(n: int, classes: int = 2) -> list[bytes]:
    return [
        orjson.dumps(
            {
                "id": i,
                "position": {"topic": "t", "partition": 0, "offset": i},
                "y_pred": "c0",
                "log_proba": {f"c{k}": -float(k) for k in range(classes)},
            }
        )
        for i in range(n)
    ]


def test_a_keyed_batch_arrives_in_order_with_keys_and_headers(
    kafka_bootstrap: str, unique: str, kafka_client: str
) -> None:
    out = f"kb-{unique}"
    create_topics(kafka_bootstrap, {out: {}})
    values = _predictions(1500)
    keys = [None if i % 4 == 0 else b"k%d" % i for i in range(1500)]
    sink = KafkaSink(kafka_bootstrap, out, client=kafka_client)
    sink.write_keyed(values[:700], keys[:700], None)  # the one-loop path
    carried = [[("trace", b"t%d" % i)] if i % 9 == 0 else None for i in range(700, 1500)]
    sink.write_keyed(values[700:], keys[700:], carried)  # with headers: record by record
    sink.flush()
    assert sink.written == 1500
    sink.close()
    got = read_topic(kafka_bootstrap, out, 1)
    assert [m.value for m in got] == values
    assert [m.key for m in got] == keys
    assert [list(m.headers) or None for m in got] == [None] * 700 + carried


def test_a_record_above_the_limit_in_a_keyed_batch_is_sent_smaller(
    kafka_bootstrap: str, unique: str, kafka_client: str
) -> None:
    """One prediction of eighty classes in a batch for a 700-byte topic: it goes without
    ``log_proba``, the others as they are."""
    out = f"kb-big-{unique}"
    create_topics(kafka_bootstrap, {out: {"max.message.bytes": "700"}})
    values = _predictions(300)
    values[120] = _predictions(121, classes=80)[120]
    sink = KafkaSink(kafka_bootstrap, out, client=kafka_client)
    sink.write_keyed(values, [b"k"] * 300, None)
    sink.flush()
    assert (sink.written, sink.shrunk, sink.dropped) == (300, 1, 0)
    sink.close()
    got = [orjson.loads(m.value) for m in read_topic(kafka_bootstrap, out, 1)]
    assert [p["id"] for p in got] == list(range(300))
    assert got[120]["omitted"] == ["log_proba"] and "log_proba" not in got[120]
    assert [orjson.dumps(p) for i, p in enumerate(got) if i != 120] == values[:120] + values[121:]


def test_records_the_broker_rejects_as_too_large_are_sent_again_smaller(
    kafka_bootstrap: str, unique: str, kafka_client: str
) -> None:
    """The topic's limit drops below some records after the sink read it: the broker
    rejects them (a failed delivery, reported back with its record), and the flush
    sends each again without ``log_proba``, or drops and counts one that still does
    not fit. (Producer batches of at most 600 bytes: the broker takes or rejects a
    whole batch, and a record above that goes alone.)"""
    out = f"kb-late-{unique}"
    create_topics(kafka_bootstrap, {out: {}})
    sink = KafkaSink(kafka_bootstrap, out, client=kafka_client, batch_size=600)
    set_topic_config(kafka_bootstrap, out, {"max.message.bytes": "700"})
    time.sleep(1)  # the broker applies topic configs asynchronously
    values = _predictions(40)
    values[10] = _predictions(11, classes=80)[10]  # fits without log_proba
    values[30] = orjson.dumps({"id": 30, "y_pred": "x" * 2000})  # fits in no form
    sink.write_keyed(values, None, None)
    sink.flush()
    sink.close()
    got = [orjson.loads(m.value) for m in read_topic(kafka_bootstrap, out, 1)]
    ids = [p["id"] for p in got]
    # nothing lost silently: each record delivered (maybe smaller) or dropped and counted
    assert len(set(ids)) == len(ids) == sink.written and sink.written + sink.dropped == 40
    assert all(p["omitted"] == ["log_proba"] for p in got if "omitted" in p)
    if kafka_client == "confluent":
        assert (sink.written, sink.shrunk, sink.dropped) == (39, 1, 1)
        assert sorted(ids) == [i for i in range(40) if i != 30]
        (shrunk,) = [p for p in got if "omitted" in p]
        assert shrunk["id"] == 10
    # (kafka-python's idempotent producer fails every batch in flight once the broker
    # rejects one: those records are sent again smaller too, or dropped and counted)


def test_a_failed_delivery_fails_the_flush(
    kafka_bootstrap: str, unique: str, kafka_client: str
) -> None:
    """A compacted topic takes no record without a key (the broker answers
    ``INVALID_RECORD``): the flush raises, naming the topic, instead of losing the
    records silently."""
    out = f"kb-fail-{unique}"
    create_topics(kafka_bootstrap, {out: {"cleanup.policy": "compact"}})
    sink = KafkaSink(kafka_bootstrap, out, client=kafka_client)
    sink.write_keyed(_predictions(200), None, None)
    with pytest.raises(SinkError, match=out):
        sink.flush()
    assert sink.written == 0
    sink.close()  # (after a failure: without waiting)


def test_dead_letters_in_a_keyed_batch_name_their_reason_and_source(
    kafka_bootstrap: str, unique: str, kafka_client: str
) -> None:
    """A dead-letter sink given a batch prepares each letter as ``write`` does."""
    dlq = f"kb-dlq-{unique}"
    create_topics(kafka_bootstrap, {dlq: {}})
    letter = orjson.dumps(
        {
            "reason": "invalid_json",
            "position": {"topic": "events", "partition": 2, "offset": 41},
            "error": "bad",
            "payload": "{oops",
        }
    )
    letters = KafkaDeadLetterSink(kafka_bootstrap, dlq, client=kafka_client)
    letters.write_keyed([letter, letter], [b"k1", None], None)
    letters.flush()
    letters.close()
    got = read_topic(kafka_bootstrap, dlq, 1)
    assert [m.key for m in got] == [b"k1", None]
    for message in got:
        headers = dict(message.headers)
        assert headers[HEADER_REASON] == b"invalid_json" and headers[HEADER_OFFSET] == b"41"
