"""connectors/kafka/records.py: record sizes, dead letters cut to a bounded prefix and
their headers, predictions without log_proba, carried headers (broker-free)."""

from __future__ import annotations

import base64
import hashlib

import orjson
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from stream_nb.connectors.kafka.records import (
    DEAD_LETTER_PAYLOAD_BYTES,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_REASON,
    HEADER_TOPIC,
    MAX_CARRIED_HEADER_BYTES,
    MAX_CARRIED_HEADERS,
    carry_headers,
    dead_letter_headers,
    fit_dead_letter,
    own_headers,
    record_bytes,
    shrink_prediction,
)
from stream_nb.engine.events import dead_letter_record


@pytest.mark.parametrize(
    ("key", "value", "headers"),
    [
        (None, b"", []),
        (b"k", b"x" * 100, [("trace", b"abc")]),
        (b"k" * 300, b"x" * 70_000, [("a" * 200, b"b" * 10_000)] * 3),
        (None, b"x" * 5_000_000, []),
        (b"\xff" * 2, "é".encode() * 1000, [("é" * 10, b"")] * 64),
    ],
)
def test_record_bytes_bounds_kafka_pythons_own_estimate(
    key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]
) -> None:
    exact = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
    assert exact <= record_bytes(key, value, headers) <= exact + 128 + 10 * len(headers)


def test_a_text_payload_is_cut_at_a_character_boundary_with_size_and_hash() -> None:
    payload = ("{" + "é" * 3_000_000 + "}").encode()
    letter = dead_letter_record(payload, {"topic": "t", "partition": 0, "offset": 9}, "x", "e")
    cut = orjson.loads(fit_dead_letter(letter))
    assert cut["payload_truncated"] is True
    assert cut["payload_bytes"] == len(payload)
    assert cut["payload_sha256"] == hashlib.sha256(payload).hexdigest()
    prefix = cut["payload"].encode()
    assert payload.startswith(prefix) and len(prefix) >= DEAD_LETTER_PAYLOAD_BYTES - 1
    assert len(prefix) <= DEAD_LETTER_PAYLOAD_BYTES
    assert cut["position"] == {"topic": "t", "partition": 0, "offset": 9}


def test_a_binary_payload_is_cut_as_base64() -> None:
    payload = b"\xff\xfe" * 100_000
    cut = orjson.loads(fit_dead_letter(dead_letter_record(payload, {}, "invalid_utf8", "e")))
    prefix = base64.b64decode(cut["payload_base64"])
    assert prefix == payload[:DEAD_LETTER_PAYLOAD_BYTES]
    assert cut["payload_bytes"] == len(payload) and "payload" not in cut
    assert cut["payload_sha256"] == hashlib.sha256(payload).hexdigest()


def test_short_payloads_and_non_letters_are_left_alone() -> None:
    letter = dead_letter_record(b"{oops", {"line": 1}, "invalid_json", "bad")
    assert fit_dead_letter(letter) == letter
    assert fit_dead_letter(b"not json" * 20_000) == b"not json" * 20_000
    bare = orjson.loads(fit_dead_letter(letter, keep_payload=False))
    assert bare["payload_omitted"] is True and bare["payload_bytes"] == 5
    assert "payload" not in bare


def test_a_cut_letter_can_lose_its_payload_entirely() -> None:
    payload = b"x" * 200_000
    cut = fit_dead_letter(dead_letter_record(payload, {}, "too_large", "e"))
    bare = orjson.loads(fit_dead_letter(cut, keep_payload=False))
    # size and hash still describe the original payload, not the prefix
    assert bare["payload_bytes"] == len(payload)
    assert bare["payload_sha256"] == hashlib.sha256(payload).hexdigest()
    assert "payload_truncated" not in bare and bare["payload_omitted"] is True
    assert len(orjson.dumps(bare)) < 600


def test_shrink_prediction_keeps_the_decision() -> None:
    record = orjson.dumps(
        {
            "id": 3,
            "position": {"topic": "t", "partition": 1, "offset": 4},
            "y_pred": "a",
            "y_true": "b",
            "log_proba": {f"c{i}": -1.0 for i in range(1000)},
            "n_learned": 10,
            "explain": {"f": 1.0},
        }
    )
    small = orjson.loads(shrink_prediction(record) or b"")
    assert small == {
        "id": 3,
        "position": {"topic": "t", "partition": 1, "offset": 4},
        "y_pred": "a",
        "y_true": "b",
        "n_learned": 10,
        "omitted": ["log_proba", "explain"],
    }
    assert shrink_prediction(orjson.dumps(small)) is None  # nothing left to leave out


def test_carried_headers_are_bounded_in_bytes_and_number() -> None:
    many = [(f"h{i}", b"v") for i in range(10_000)]
    assert carry_headers(many) == many[:MAX_CARRIED_HEADERS]
    big = [("a", b"x" * (MAX_CARRIED_HEADER_BYTES - 2)), ("b", b"y"), ("c", b"")]
    assert carry_headers(big) == [big[0], big[2]]
    own = [("stream_nb.reason", b"spoofed"), ("trace", b"t")]
    assert carry_headers(own, drop_own=True) == [("trace", b"t")]
    assert carry_headers(None) == [] and carry_headers(()) == []


def test_dead_letter_headers_name_the_reason_and_the_source_record() -> None:
    letter = dead_letter_record(b"{oops", {"topic": "t", "partition": 2, "offset": 41}, "x", "e")
    assert dead_letter_headers(letter) == [
        (HEADER_REASON, b"x"),
        (HEADER_TOPIC, b"t"),
        (HEADER_PARTITION, b"2"),
        (HEADER_OFFSET, b"41"),
    ]
    # a file position has no topic, partition or offset: only the reason is named
    assert dead_letter_headers(dead_letter_record(b"{", {"line": 3}, "x", "e")) == [
        (HEADER_REASON, b"x")
    ]
    assert dead_letter_headers(b"not json") == [] and dead_letter_headers(b"[]") == []


def test_own_headers_keep_only_stream_nbs() -> None:
    headers = [("trace", b"t"), (HEADER_REASON, b"r"), ("stream_nb", b"no dot")]
    assert own_headers(headers) == [(HEADER_REASON, b"r")]
    assert own_headers(None) == []
