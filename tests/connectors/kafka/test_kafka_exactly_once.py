"""Exactly-once: predictions, model deltas and offsets in one Kafka transaction."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import orjson
from kafka_broker import KafkaBroker
from kafka_helpers import (
    MODEL,
    Daemon,
    assert_same_model,
    committed_offsets,
    create_topic,
    make_events,
    model_of,
    predictions,
    produce,
    read_topic,
    reference_model,
    wait_committed,
    wait_for,
)

PARTITIONS = 3


def test_read_committed_sees_each_prediction_once_across_kill_9(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    topic, out, dlq, group = f"eos-{unique}", f"eos-out-{unique}", f"eos-dlq-{unique}", unique
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    events = make_events(2000, seed=6)
    bad = [b"{broken", b"42"]
    args = [
        "--source",
        f"kafka://{kafka_bootstrap}/{topic}?group_id={group}&exactly_once=true"
        "&sync_interval=0.2&worker_id=eos-1&group_instance_id=eos-1"
        "&session_timeout_ms=6000&heartbeat_interval_ms=1000",
        "--sink",
        f"kafka://{kafka_bootstrap}/{out}",
        "--dead-letters",
        f"kafka://{kafka_bootstrap}/{dlq}",
        "--model",
        MODEL,
        "--id-field",
        "id",
        "--checkpoint-dir",
        str(tmp_path / "cp"),
        "--checkpoint-interval",
        "1",
        "--batch-size",
        "25",
    ]
    rng = random.Random(11)
    chunk = 500
    for first in range(0, len(events), chunk):
        daemon = Daemon(tmp_path, "daemon", args).start()
        payloads = [orjson.dumps(e) for e in events[first : first + chunk]]
        if first == 0:
            payloads[10:10] = bad
        feeder = threading.Thread(
            target=produce, args=(kafka_bootstrap, topic, payloads, PARTITIONS, first)
        )
        feeder.start()
        time.sleep(rng.uniform(1.5, 4.0))
        assert daemon.alive(), daemon.log()
        daemon.kill()
        feeder.join()
    daemon = Daemon(tmp_path, "daemon", args).start().wait_running()
    try:
        wait_committed(kafka_bootstrap, group, topic, PARTITIONS, 120, daemons=[daemon])
    finally:
        assert daemon.stop() == 0, daemon.log()
    committed = predictions(read_topic(kafka_bootstrap, out, 1, read_committed=True))
    assert sorted(p["id"] for p in committed) == [e["id"] for e in events]  # exactly once
    dead = read_topic(kafka_bootstrap, dlq, 1, read_committed=True)
    assert sorted(orjson.loads(d.value)["payload"].encode() for d in dead) == sorted(bad)
    assert_same_model(model_of(tmp_path / "cp"), reference_model(events))


def test_broker_restart_mid_stream_exactly_once(
    own_broker: KafkaBroker, tmp_path: Path, kafka_client: str
) -> None:
    """Exactly-once while the broker stops and comes back: a read_committed consumer sees
    each prediction once, and the model is exact.

    On librdkafka the daemon may instead exit non-zero once the broker is back: when its
    group session expired during the outage, librdkafka rejoins as a new member of its
    static instance id and the broker fences the old one, which is librdkafka's own
    consumer (a fatal error); or, when the outage outlasts the transaction timeout (10 s
    here: librdkafka caps a transactional producer's message timeout to it), the
    transaction's records are not delivered, which ends the daemon like any delivery
    timeout. The test then restarts it once, as a supervisor would.
    """
    bootstrap = own_broker.bootstrap
    topic, group = "events", "restart-eos"
    create_topic(bootstrap, topic, PARTITIONS)
    events = make_events(2000, seed=12)
    args = [
        "--source",
        f"kafka://{bootstrap}/{topic}?group_id={group}&exactly_once=true&sync_interval=0.2"
        "&worker_id=eos-r&session_timeout_ms=6000&heartbeat_interval_ms=1000",
        "--sink",
        f"kafka://{bootstrap}/out",
        "--dead-letters",
        f"kafka://{bootstrap}/dlq",
        "--model",
        MODEL,
        "--id-field",
        "id",
        "--checkpoint-dir",
        str(tmp_path / "cp"),
        "--checkpoint-interval",
        "1",
        "--batch-size",
        "20",
        "--log-level",
        "INFO",
    ]
    daemon = Daemon(tmp_path, "daemon", args).start().wait_running()

    def feed() -> None:  # 40 slices over about 4 s; sends wait while the broker is away
        for first in range(0, len(events), 50):
            payloads = [orjson.dumps(e) for e in events[first : first + 50]]
            produce(bootstrap, topic, payloads, PARTITIONS, first)
            time.sleep(0.1)

    feeder = threading.Thread(target=feed)
    try:
        feeder.start()
        wait_for(
            lambda: sum(committed_offsets(bootstrap, group, topic).values()) > 0,
            60,
            "first commits",
            daemons=[daemon],
        )
        own_broker.stop()  # mid-stream: inside an open transaction with predictions in it
        time.sleep(3)
        assert daemon.alive(), daemon.log()
        own_broker.start()
        feeder.join()
        if kafka_client == "confluent":
            try:
                wait_committed(bootstrap, group, topic, PARTITIONS, 60, daemons=[daemon])
            except AssertionError:
                if daemon.alive():
                    raise
                log = daemon.log()
                assert (
                    "Static consumer fenced" in log
                    or "were not delivered within delivery_timeout_ms" in log
                ), log
                daemon.start().wait_running()
        wait_committed(bootstrap, group, topic, PARTITIONS, 180, daemons=[daemon])
    finally:
        feeder.join()
        assert daemon.stop() == 0, daemon.log()
    committed = predictions(read_topic(bootstrap, "out", 1, read_committed=True))
    assert sorted(p["id"] for p in committed) == [e["id"] for e in events]  # exactly once
    assert_same_model(model_of(tmp_path / "cp"), reference_model(events))
