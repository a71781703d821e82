"""``stream-nb run`` on Kafka end to end: real broker, real daemon subprocesses."""

from __future__ import annotations

import random
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest
from kafka_broker import KafkaBroker, free_port
from kafka_helpers import (
    Daemon,
    assert_same_model,
    committed_offsets,
    create_topic,
    daemon_args,
    end_offsets,
    make_events,
    model_of,
    predictions,
    produce,
    read_topic,
    reference_model,
    wait_committed,
    wait_for,
)
from prometheus_client.parser import text_string_to_metric_families

PARTITIONS = 3
#: Fast failure detection and restarts in tests (the broker's minimum session timeout).
GROUP_OPTIONS = "session_timeout_ms=6000&heartbeat_interval_ms=1000"


def readyz(port: int) -> int:
    """HTTP status of the daemon's /readyz (0 when it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def run_args(
    bootstrap: str, topic: str, group: str, out: str, dlq: str, checkpoints: Path, extra: str = ""
) -> list[str]:
    source = f"kafka://{bootstrap}/{topic}?group_id={group}&{GROUP_OPTIONS}{extra}"
    return daemon_args(bootstrap, source, out, dlq, checkpoints, interval="0.5", batch_size=100)


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
    port = free_port()
    args = run_args(kafka_bootstrap, topic, group, out, dlq, workdir / "cp")
    daemon = Daemon(workdir, "daemon", [*args, "--metrics-address", f"127.0.0.1:{port}"]).start()
    try:
        wait_committed(kafka_bootstrap, group, topic, PARTITIONS, timeout=120, daemons=[daemon])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            exposition = response.read().decode()
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
        "metrics": exposition,
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
    assert_same_model(round_trip["model"], reference_model(events))


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


def produce_slowly(bootstrap: str, topic: str, events: list, first: int) -> None:
    """Send events in ten slices over about two seconds."""
    step = max(1, len(events) // 10)
    for i in range(0, len(events), step):
        payloads = [orjson.dumps(e) for e in events[i : i + step]]
        produce(bootstrap, topic, payloads, PARTITIONS, first=first + i)
        time.sleep(0.2)


def metric(exposition: str, name: str, **labels: str) -> float:
    """The value of one sample in a Prometheus text exposition."""
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    raise AssertionError(f"no sample {name}{labels} in the exposition")


def test_kafka_metrics_on_the_engine_registry(round_trip: dict) -> None:
    text = round_trip["metrics"]
    topic = round_trip["topic"]
    assert metric(text, "stream_nb_kafka_assigned_partitions") == PARTITIONS
    assert metric(text, "stream_nb_kafka_rebalances_total", event="assigned") >= 1
    for partition, end in round_trip["ends"].items():
        labels = {"topic": topic, "partition": str(partition)}
        assert metric(text, "stream_nb_kafka_committed_offset", **labels) == end
        assert metric(text, "stream_nb_kafka_consumer_lag", **labels) == 0
    assert metric(text, "stream_nb_kafka_commit_duration_seconds_count") >= 1
    assert metric(text, "stream_nb_kafka_replayed_events_total") == 0
    checked = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_crash_safety_kill_9_at_random_points(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """Six kill -9s at random moments, a restart each time: the model is exactly the model
    of one uninterrupted pass (nothing lost, nothing learned twice)."""
    topic, out, dlq, group = f"crash-{unique}", f"crash-out-{unique}", f"crash-dlq-{unique}", unique
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    events = make_events(3000, seed=2)
    rng = random.Random(7)
    # Static membership: a restarted daemon takes its partitions back without waiting
    # for the killed one's session to expire.
    args = run_args(
        kafka_bootstrap, topic, group, out, dlq, tmp_path / "cp", "&group_instance_id=worker-1"
    )
    args[args.index("--batch-size") + 1] = "25"
    args[args.index("--checkpoint-interval") + 1] = "0.1"
    kills = 0
    chunk = 500
    for first in range(0, len(events), chunk):
        daemon = Daemon(tmp_path, "daemon", args).start()
        # Events keep arriving while the daemon starts, runs and is killed.
        feeder = threading.Thread(
            target=produce_slowly,
            args=(kafka_bootstrap, topic, events[first : first + chunk], first),
        )
        feeder.start()
        time.sleep(rng.uniform(1.0, 4.0))
        assert daemon.alive(), daemon.log()
        daemon.kill()
        kills += 1
        feeder.join()
    assert kills >= 5
    daemon = Daemon(tmp_path, "daemon", args).start().wait_running()
    try:
        wait_committed(kafka_bootstrap, group, topic, PARTITIONS, timeout=120, daemons=[daemon])
    finally:
        assert daemon.stop() == 0, daemon.log()
    assert_same_model(model_of(tmp_path / "cp"), reference_model(events))
    ids = {p["id"] for p in predictions(read_topic(kafka_bootstrap, out, 1))}
    assert ids == {e["id"] for e in events}  # at least one prediction per event


def test_broker_restart_mid_stream_loses_nothing(
    own_broker: KafkaBroker, tmp_path: Path, kafka_client: str
) -> None:
    """The broker stops and comes back: readiness drops meanwhile, and no event is lost.

    The sinks retry for two minutes: a restart of the test broker on a loaded machine can
    outlast the default 30 s, after which the daemon exits by design (tested in
    test_kafka_stays_up.py). On librdkafka the daemon may exit once the broker is back:
    its static member, whose session expired during the outage, is fenced by its own
    rejoin (a fatal error); the test then restarts it once, as a supervisor would."""
    bootstrap = own_broker.bootstrap
    topic, group = "events", "restart"
    create_topic(bootstrap, topic, PARTITIONS)
    events = make_events(2000, seed=3)
    produce(bootstrap, topic, [orjson.dumps(e) for e in events[:1000]], PARTITIONS)
    port = free_port()
    args = run_args(bootstrap, topic, group, "out", "dlq", tmp_path / "cp")
    for flag in ("--sink", "--dead-letters"):
        args[args.index(flag) + 1] += "?delivery_timeout_ms=120000"
    args += ["--metrics-address", f"127.0.0.1:{port}"]
    args[args.index("--batch-size") + 1] = "50"
    daemon = Daemon(tmp_path, "daemon", args).start().wait_running()
    try:
        wait_for(
            lambda: sum(committed_offsets(bootstrap, group, topic).values()) > 0,
            60,
            "first commits",
            daemons=[daemon],
        )
        assert readyz(port) == 200
        own_broker.stop()
        wait_for(lambda: readyz(port) == 503, 60, "readiness to turn false", daemons=[daemon])
        own_broker.start()
        produce(bootstrap, topic, [orjson.dumps(e) for e in events[1000:]], PARTITIONS, 1000)
        if kafka_client == "confluent":
            try:
                wait_committed(bootstrap, group, topic, PARTITIONS, timeout=60, daemons=[daemon])
            except AssertionError:
                if daemon.alive():
                    raise
                assert "Static consumer fenced" in daemon.log(), daemon.log()
                daemon.start().wait_running()
        wait_committed(bootstrap, group, topic, PARTITIONS, timeout=120, daemons=[daemon])
        assert readyz(port) == 200
    finally:
        assert daemon.stop() == 0, daemon.log()
    assert_same_model(model_of(tmp_path / "cp"), reference_model(events))
