"""``stream-nb run`` on Kafka end to end: real broker, real daemon subprocesses."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest
from kafka_helpers import (
    MODEL,
    Daemon,
    assert_same_model,
    committed_offsets,
    create_topic,
    end_offsets,
    make_events,
    model_of,
    predictions,
    produce,
    read_topic,
    reference_model,
    wait_committed,
)

from stream_nb import CategoricalNB

PARTITIONS = 3
#: Fast failure detection and restarts in tests (the broker's minimum session timeout).
GROUP_OPTIONS = "session_timeout_ms=6000&heartbeat_interval_ms=1000"


def daemon_args(
    bootstrap: str, topic: str, group: str, out: str, dlq: str, checkpoints: Path, extra: str = ""
) -> list[str]:
    return [
        "--source",
        f"kafka://{bootstrap}/{topic}?group_id={group}&{GROUP_OPTIONS}{extra}",
        "--sink",
        f"kafka://{bootstrap}/{out}",
        "--dead-letters",
        f"kafka://{bootstrap}/{dlq}",
        "--model",
        MODEL,
        "--id-field",
        "id",
        "--checkpoint-dir",
        str(checkpoints),
        "--checkpoint-interval",
        "0.5",
        "--batch-size",
        "100",
        "--log-level",
        "INFO",
    ]


@pytest.fixture(scope="module")
def round_trip(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One clean daemon run over good and bad records on a 3-partition topic."""
    tag = random.Random().getrandbits(40)
    topic, out, dlq, group = f"rt-{tag}", f"rt-out-{tag}", f"rt-dlq-{tag}", f"rt-g-{tag}"
    workdir = tmp_path_factory.mktemp("round-trip")
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    events = make_events(1500, seed=1)
    payloads = [orjson.dumps(e) for e in events]
    bad = {
        100: b"{not json",
        700: b"[1, 2]",
        1200: b'{"id": 99999, "x": {"colour": [1]}, "y": "a"}',
    }
    for index, payload in sorted(bad.items()):
        payloads.insert(index, payload)
    produce(kafka_bootstrap, topic, payloads, PARTITIONS)
    daemon = Daemon(
        workdir, "daemon", daemon_args(kafka_bootstrap, topic, group, out, dlq, workdir / "cp")
    ).start()
    try:
        wait_committed(kafka_bootstrap, group, topic, PARTITIONS, timeout=120, daemons=[daemon])
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()
    return {
        "events": events,
        "bad": bad,
        "topic": topic,
        "predictions": read_topic(kafka_bootstrap, out, 1),
        "dead": read_topic(kafka_bootstrap, dlq, 1),
        "model": model_of(workdir / "cp"),
        "committed": committed_offsets(kafka_bootstrap, group, topic),
        "ends": end_offsets(kafka_bootstrap, topic, PARTITIONS),
    }


def test_round_trip_one_prediction_per_event_and_same_model(round_trip: dict) -> None:
    events = round_trip["events"]
    records = round_trip["predictions"]
    preds = predictions(records)
    assert sorted(p["id"] for p in preds) == [e["id"] for e in events]  # one per event
    for record, pred in zip(records, preds, strict=True):
        assert record.key == str(pred["id"]).encode()  # keyed by event id
        position = pred["position"]
        assert position["topic"] == round_trip["topic"]
        assert 0 <= position["partition"] < PARTITIONS and position["offset"] >= 0
    assert round_trip["committed"] == round_trip["ends"]
    assert_same_model(round_trip["model"], reference_model(CategoricalNB(), events))


def test_bad_records_reach_the_dead_letter_topic_with_headers(round_trip: dict) -> None:
    dead = round_trip["dead"]
    assert len(dead) == len(round_trip["bad"])
    reasons = set()
    for record in dead:
        headers = dict(record.headers)
        reasons.add(headers["stream_nb.reason"].decode())
        assert headers["stream_nb.source.topic"] == round_trip["topic"].encode()
        letter = orjson.loads(record.value)
        assert int(headers["stream_nb.source.partition"]) == letter["position"]["partition"]
        assert int(headers["stream_nb.source.offset"]) == letter["position"]["offset"]
        assert letter["payload"].encode() in round_trip["bad"].values()
    assert reasons == {"invalid_json", "not_object", "invalid_features"}
