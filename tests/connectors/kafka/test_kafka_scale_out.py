"""Two ``stream-nb run`` daemons in one consumer group, with model sync, on a real broker."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import orjson
from kafka_broker import free_port
from kafka_helpers import (
    Daemon,
    assert_same_model,
    committed_offsets,
    create_topic,
    daemon_args,
    group_members_with_partitions,
    make_events,
    model_of,
    predictions,
    produce,
    read_topic,
    reference_model,
    snapshot,
    wait_committed,
    wait_for,
)
from prometheus_client.parser import text_string_to_metric_families

PARTITIONS = 4
SYNC_INTERVAL = 0.5


def worker_args(
    bootstrap: str, unique: str, worker: str, checkpoints: Path, extra: str = ""
) -> list:
    source = (
        f"kafka://{bootstrap}/events-{unique}?group_id=g-{unique}&sync_topic=sync-{unique}"
        f"&sync_interval={SYNC_INTERVAL}&worker_id={worker}"
        f"&session_timeout_ms=6000&heartbeat_interval_ms=1000{extra}"
    )
    return daemon_args(
        bootstrap,
        source,
        f"out-{unique}",
        f"dlq-{unique}",
        checkpoints,
        interval="1",
        batch_size=50,
    )


def learned(directory: Path) -> int:
    try:
        return model_of(directory).n_learned
    except AssertionError:  # no snapshot yet
        return -1


def test_two_workers_converge_to_the_single_daemon_model(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    topic = f"events-{unique}"
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    events = make_events(2000, seed=4)
    reference = reference_model(events)
    port = free_port()
    a_args = worker_args(kafka_bootstrap, unique, "a", tmp_path / "a")
    a = Daemon(tmp_path, "a", [*a_args, "--metrics-address", f"127.0.0.1:{port}"]).start()
    b = Daemon(tmp_path, "b", worker_args(kafka_bootstrap, unique, "b", tmp_path / "b")).start()
    try:
        wait_for(
            lambda: group_members_with_partitions(kafka_bootstrap, f"g-{unique}") == 2,
            60,
            "both workers to hold partitions",
            daemons=[a, b],
        )
        produce(kafka_bootstrap, topic, [orjson.dumps(e) for e in events], PARTITIONS)
        wait_committed(kafka_bootstrap, f"g-{unique}", topic, PARTITIONS, 120, daemons=[a, b])
        # after all events and a sync interval, both models hold every event
        wait_for(
            lambda: learned(tmp_path / "a") == learned(tmp_path / "b") == len(events),
            60,
            "both workers to merge each other's deltas",
            daemons=[a, b],
        )
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            families = {
                s.name: s.value
                for f in text_string_to_metric_families(response.read().decode())
                for s in f.samples
            }
        assert families["stream_nb_kafka_sync_deltas_sent_total"] >= 1
        assert families["stream_nb_kafka_sync_deltas_merged_total"] >= 1
        assert families["stream_nb_kafka_sync_lag"] >= 0
    finally:
        assert a.stop() == 0, a.log()
        assert b.stop() == 0, b.log()
    for worker, other in (("a", "b"), ("b", "a")):
        assert_same_model(model_of(tmp_path / worker), reference)
        sync = snapshot(tmp_path / worker)["extra"]["kafka_sync"]
        assert sync["seq"] >= 1 and sync["merged"][other] >= 1  # both learned, both merged
    ids = {p["id"] for p in predictions(read_topic(kafka_bootstrap, f"out-{unique}", 1))}
    assert ids == {e["id"] for e in events}


def test_killed_worker_partitions_move_and_the_model_stays_exact(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    topic, group = f"events-{unique}", f"g-{unique}"
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    events = make_events(2000, seed=5)
    reference = reference_model(events)
    a = Daemon(tmp_path, "a", worker_args(kafka_bootstrap, unique, "a", tmp_path / "a")).start()
    b = Daemon(tmp_path, "b", worker_args(kafka_bootstrap, unique, "b", tmp_path / "b")).start()
    try:
        wait_for(
            lambda: group_members_with_partitions(kafka_bootstrap, group) == 2,
            60,
            "both workers to hold partitions",
            daemons=[a, b],
        )
        produce(kafka_bootstrap, topic, [orjson.dumps(e) for e in events[:1000]], PARTITIONS)
        wait_for(
            lambda: len(committed_offsets(kafka_bootstrap, group, topic)) == PARTITIONS,
            60,
            "both workers to commit",
            daemons=[a, b],
        )
        b.kill()  # mid-stream: its uncommitted work is redone by a
        produce(
            kafka_bootstrap,
            topic,
            [orjson.dumps(e) for e in events[1000:]],
            PARTITIONS,
            first=1000,
        )
        wait_committed(kafka_bootstrap, group, topic, PARTITIONS, 120, daemons=[a])
        wait_for(lambda: learned(tmp_path / "a") == len(events), 60, "a's model", daemons=[a])
    finally:
        if b.alive():
            b.kill()
        assert a.stop() == 0, a.log()
    assert_same_model(model_of(tmp_path / "a"), reference)


def test_two_workers_exactly_once_with_a_kill(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """Exactly-once in a group of two: one worker is killed mid-stream, the other takes its
    partitions; read_committed sees each prediction once and the model is exact."""
    topic, group = f"events-{unique}", f"g-{unique}"
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    events = make_events(2000, seed=8)
    extra = "&exactly_once=true"
    a = Daemon(tmp_path, "a", worker_args(kafka_bootstrap, unique, "a", tmp_path / "a", extra))
    b = Daemon(tmp_path, "b", worker_args(kafka_bootstrap, unique, "b", tmp_path / "b", extra))
    a.start()
    b.start()
    try:
        wait_for(
            lambda: group_members_with_partitions(kafka_bootstrap, group) == 2,
            60,
            "both workers to hold partitions",
            daemons=[a, b],
        )
        produce(kafka_bootstrap, topic, [orjson.dumps(e) for e in events[:1000]], PARTITIONS)
        wait_for(
            lambda: len(committed_offsets(kafka_bootstrap, group, topic)) == PARTITIONS,
            60,
            "both workers to commit",
            daemons=[a, b],
        )
        b.kill()
        produce(kafka_bootstrap, topic, [orjson.dumps(e) for e in events[1000:]], PARTITIONS, 1000)
        wait_committed(kafka_bootstrap, group, topic, PARTITIONS, 120, daemons=[a])
        wait_for(lambda: learned(tmp_path / "a") == len(events), 60, "a's model", daemons=[a])
    finally:
        if b.alive():
            b.kill()
        assert a.stop() == 0, a.log()
    assert_same_model(model_of(tmp_path / "a"), reference_model(events))
    # b's transaction open at the kill holds back read_committed readers until the broker
    # aborts it (transaction timeout, 10 s here): read until every event is answered.
    seen: list = []

    def answered() -> bool:
        seen[:] = predictions(read_topic(kafka_bootstrap, f"out-{unique}", 1, read_committed=True))
        return len(seen) >= len(events)

    wait_for(answered, 90, "read_committed predictions of every event", interval=1.0)
    assert sorted(p["id"] for p in seen) == [e["id"] for e in events]  # exactly once


def test_two_workers_hold_the_same_tan_model_with_half_life(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """TAN with forgetting and a numeric feature: both workers fold the same deltas in the
    sync topic's order, so their models are identical, bit for bit (structure, bins and
    decayed counts)."""
    topic, group = f"events-{unique}", f"g-{unique}"
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    events = make_events(1500, seed=9)
    daemons = []
    for worker in ("a", "b"):
        args = worker_args(kafka_bootstrap, unique, worker, tmp_path / worker)
        args[args.index("--model") + 1] = "TAN"
        args += ["--params", '{"half_life": 400, "rebuild_every": 200, "warmup": 50}']
        daemons.append(Daemon(tmp_path, worker, args).start())
    a, b = daemons
    try:
        wait_for(
            lambda: group_members_with_partitions(kafka_bootstrap, group) == 2,
            60,
            "both workers to hold partitions",
            daemons=daemons,
        )
        produce(kafka_bootstrap, topic, [orjson.dumps(e) for e in events], PARTITIONS)
        wait_committed(kafka_bootstrap, group, topic, PARTITIONS, 120, daemons=daemons)
        wait_for(
            lambda: learned(tmp_path / "a") == learned(tmp_path / "b") == len(events),
            60,
            "both workers to fold every delta",
            daemons=daemons,
        )
    finally:
        assert a.stop() == 0, a.log()
        assert b.stop() == 0, b.log()
    models = [model_of(tmp_path / w) for w in ("a", "b")]
    assert models[0].n_learned == len(events)
    assert orjson.dumps(models[0].to_state()) == orjson.dumps(models[1].to_state())
    assert models[0].to_state()["stats"]["discretiser"]["edges"]  # "size" was binned


def test_a_stop_leaves_the_last_sync_in_the_snapshot(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """The last transaction of a clean stop comes after the engine's final snapshot: a
    snapshot written after it holds that transaction's delta in its sync base."""
    topic = f"events-{unique}"
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    events = make_events(300, seed=8)
    source = (
        f"kafka://{kafka_bootstrap}/{topic}?group_id=g-{unique}&sync_topic=sync-{unique}"
        "&sync_interval=600&worker_id=solo"  # no periodic sync: only the stop's
    )
    args = daemon_args(
        kafka_bootstrap,
        source,
        f"out-{unique}",
        f"dlq-{unique}",
        tmp_path / "cp",
        interval="1",
        batch_size=50,
    )
    daemon = Daemon(tmp_path, "solo", args).start().wait_running()
    try:
        produce(kafka_bootstrap, topic, [orjson.dumps(e) for e in events], PARTITIONS)
        wait_for(
            lambda: len(read_topic(kafka_bootstrap, f"out-{unique}", 1)) == len(events),
            60,
            "every prediction",
            daemons=[daemon],
        )
    finally:
        assert daemon.stop() == 0, daemon.log()
    assert committed_offsets(kafka_bootstrap, f"g-{unique}", topic) == {
        p: sum(1 for e in range(len(events)) if e % PARTITIONS == p) for p in range(PARTITIONS)
    }
    assert_same_model(model_of(tmp_path / "cp"), reference_model(events))
