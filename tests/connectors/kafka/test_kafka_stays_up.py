"""The Kafka daemon stays up: poison pills, broker outages, restarts, missing topics,
lost state, keys and headers. Real broker, real ``stream-nb run`` subprocesses."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
from kafka import KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka_broker import KafkaBroker, die_with_parent, free_port
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
from test_kafka_daemon import metric

from stream_nb.connectors.kafka.records import DEAD_LETTER_PAYLOAD_BYTES

PARTITIONS = 3
#: Events of the outage tests: enough that the daemon still holds output it cannot
#: deliver when the broker stops after its first commits (on librdkafka it gets through
#: tens of thousands of events a second; with all of them delivered, a broker outage is
#: only waited out, as it should be, and nothing fails).
OUTAGE_EVENTS = 200_000


def args_for(
    bootstrap: str,
    topic: str,
    group: str,
    out: str,
    dlq: str,
    checkpoints: Path,
    *,
    source_extra: str = "",
    sink_extra: str = "",
) -> list[str]:
    """Daemon flags with the source and sink URLs' extra options."""
    source = f"kafka://{bootstrap}/{topic}?group_id={group}{source_extra}"
    args = daemon_args(bootstrap, source, out, dlq, checkpoints, interval="0.5", batch_size=100)
    for flag in ("--sink", "--dead-letters"):
        i = args.index(flag) + 1
        args[i] += ("?" + sink_extra.lstrip("&")) if sink_extra else ""
    return args


def create_topics(bootstrap: str, topics: dict[str, dict[str, str]], partitions: int = 1) -> None:
    """Create ``{name: topic configs}``."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(
            [NewTopic(t, partitions, 1, topic_configs=cfg) for t, cfg in topics.items()]
        )
    finally:
        admin.close()


def set_topic_config(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)])
    finally:
        admin.close()


def send(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None, list[Any]]]
) -> None:
    """Send ``(key, value, headers)`` records to partition 0, in order."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", max_request_size=16 * 1024 * 1024
    )
    for key, value, headers in records:
        producer.send(topic, key=key, value=value, headers=headers or None, partition=0)
    producer.flush()
    producer.close()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def wait_exit(daemon: Daemon, timeout: float) -> int | None:
    """The daemon's exit code, or ``None`` if it still runs after ``timeout`` seconds."""
    assert daemon.proc is not None
    try:
        return daemon.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def run_until_exit(args: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``stream-nb run`` that must exit by itself, with stdout and stderr apart."""
    return subprocess.run(
        [sys.executable, "-m", "stream_nb.cli", "run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        preexec_fn=die_with_parent,
    )


# ---------------------------------------------------------------- poison pills
def test_a_5_mb_record_is_dead_lettered_with_a_bounded_prefix_and_the_daemon_goes_on(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """A 5 MB event on a topic that accepts 10 MB: its dead letter carries a 64 KiB prefix,
    the size and the SHA-256; the partition goes on, and a restart re-emits nothing."""
    topic, out, dlq = f"pill-{unique}", f"pill-out-{unique}", f"pill-dlq-{unique}"
    create_topics(kafka_bootstrap, {topic: {"max.message.bytes": str(10 * 1024 * 1024)}})
    events = make_events(400, seed=11)
    pill = orjson.dumps({"id": -1, "x": {"blob": "é" * 2_500_000}, "y": "a"})
    assert len(pill) > 5_000_000
    records: list[tuple[bytes | None, bytes | None, list[Any]]] = [
        (str(e["id"]).encode(), orjson.dumps(e), []) for e in events[:200]
    ]
    records.append((b"pill", pill, [("trace-id", b"t-pill")]))
    records += [(str(e["id"]).encode(), orjson.dumps(e), []) for e in events[200:]]
    send(kafka_bootstrap, topic, records)
    args = args_for(kafka_bootstrap, topic, unique, out, dlq, tmp_path / "cp")
    daemon = Daemon(tmp_path, "daemon", args).start()
    try:
        wait_committed(kafka_bootstrap, unique, topic, 1, timeout=120, daemons=[daemon])
    finally:
        assert daemon.stop() == 0, daemon.log()
    (letter_record,) = read_topic(kafka_bootstrap, dlq, 1)
    letter = orjson.loads(letter_record.value)
    assert letter["reason"] == "too_large"
    assert letter["payload_truncated"] is True
    assert letter["payload_bytes"] == len(pill)
    assert letter["payload_sha256"] == hashlib.sha256(pill).hexdigest()
    assert pill.startswith(letter["payload"].encode())
    assert len(letter["payload"].encode()) <= DEAD_LETTER_PAYLOAD_BYTES
    assert letter_record.key == b"pill"
    assert (b"trace-id", b"t-pill") in [(k.encode(), v) for k, v in letter_record.headers]
    ids = sorted(p["id"] for p in predictions(read_topic(kafka_bootstrap, out, 1)))
    assert ids == [e["id"] for e in events]
    assert_same_model(model_of(tmp_path / "cp"), reference_model(events))
    # A restart finds everything done: no new prediction, no new dead letter.
    daemon = Daemon(tmp_path, "daemon", args).start().wait_running()
    time.sleep(3)
    assert daemon.stop() == 0, daemon.log()
    assert len(read_topic(kafka_bootstrap, dlq, 1)) == 1
    assert len(read_topic(kafka_bootstrap, out, 1)) == len(events)


def test_dead_letters_too_large_for_their_topic_are_sent_smaller_then_dropped_and_counted(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """A DLQ topic with a 3,000-byte limit: a 50 KB bad record's letter goes without its
    payload (size and hash kept). Its limit then drops to 300 bytes while the daemon runs:
    the broker rejects the next letter, no smaller form fits, and it is dropped and
    counted; the daemon goes on."""
    topic, out, dlq = f"dl-{unique}", f"dl-out-{unique}", f"dl-dlq-{unique}"
    create_topics(kafka_bootstrap, {topic: {}, out: {}, dlq: {"max.message.bytes": "3000"}})
    events = make_events(300, seed=12)
    bad = b"{not json " + b"x" * 50_000
    send(
        kafka_bootstrap,
        topic,
        [(str(e["id"]).encode(), orjson.dumps(e), []) for e in events[:100]]
        + [(b"bad-1", bad, [])],
    )
    port = free_port()
    args = args_for(kafka_bootstrap, topic, unique, out, dlq, tmp_path / "cp")
    args += ["--metrics-address", f"127.0.0.1:{port}"]
    daemon = Daemon(tmp_path, "daemon", args).start()
    try:
        wait_committed(kafka_bootstrap, unique, topic, 1, timeout=120, daemons=[daemon])
        set_topic_config(kafka_bootstrap, dlq, {"max.message.bytes": "300"})
        time.sleep(1)  # the broker applies topic configs asynchronously
        send(
            kafka_bootstrap,
            topic,
            [(b"bad-2", b"[1, 2]", [])]
            + [(str(e["id"]).encode(), orjson.dumps(e), []) for e in events[100:]],
        )
        wait_committed(kafka_bootstrap, unique, topic, 1, timeout=120, daemons=[daemon])
        text = scrape(port)
    finally:
        assert daemon.stop() == 0, daemon.log()
    (first,) = read_topic(kafka_bootstrap, dlq, 1)  # the second was dropped
    letter = orjson.loads(first.value)
    assert letter["reason"] == "invalid_json" and letter["payload_omitted"] is True
    assert "payload" not in letter and letter["payload_bytes"] == len(bad)
    assert letter["payload_sha256"] == hashlib.sha256(bad).hexdigest()
    assert metric(text, "stream_nb_kafka_records_shrunk_total", role="dead_letters") == 1
    assert metric(text, "stream_nb_kafka_records_dropped_total", role="dead_letters") == 1
    assert "dropped a dead_letters record" in daemon.log()
    ids = sorted(p["id"] for p in predictions(read_topic(kafka_bootstrap, out, 1)))
    assert ids == [e["id"] for e in events]


def test_predictions_too_large_for_their_topic_go_without_log_proba(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """Forty classes make a prediction larger than its topic's 700-byte limit: it is sent
    without ``log_proba`` (listed under ``omitted``), one per event."""
    topic, out, dlq = f"pp-{unique}", f"pp-out-{unique}", f"pp-dlq-{unique}"
    create_topics(kafka_bootstrap, {topic: {}, out: {"max.message.bytes": "700"}, dlq: {}})
    events = [{"id": i, "x": {"f": f"v{i % 7}"}, "y": f"class-{i % 40}"} for i in range(400)]
    send(kafka_bootstrap, topic, [(None, orjson.dumps(e), []) for e in events])
    port = free_port()
    args = args_for(kafka_bootstrap, topic, unique, out, dlq, tmp_path / "cp")
    args += ["--metrics-address", f"127.0.0.1:{port}"]
    daemon = Daemon(tmp_path, "daemon", args).start()
    try:
        wait_committed(kafka_bootstrap, unique, topic, 1, timeout=120, daemons=[daemon])
        text = scrape(port)
    finally:
        assert daemon.stop() == 0, daemon.log()
    preds = predictions(read_topic(kafka_bootstrap, out, 1))
    assert sorted(p["id"] for p in preds) == [e["id"] for e in events]
    shrunk = [p for p in preds if "omitted" in p]
    assert shrunk and all(p["omitted"] == ["log_proba"] and "log_proba" not in p for p in shrunk)
    assert all(p["y_pred"] is not None for p in shrunk)
    assert metric(text, "stream_nb_kafka_records_shrunk_total", role="predictions") == len(shrunk)
    assert metric(text, "stream_nb_kafka_records_dropped_total", role="predictions") == 0


# ---------------------------------------------------------------- broker outages
def outage(
    broker: KafkaBroker, tmp_path: Path, *, source_extra: str, sink_extra: str
) -> tuple[list[dict[str, Any]], str, Daemon]:
    """Run a daemon, stop the broker mid-stream and keep it away: the daemon must exit
    non-zero within a bound (no hang). Then restart both and run to the end."""
    bootstrap = broker.bootstrap
    topic, group = "events", "outage"
    create_topic(bootstrap, topic, PARTITIONS)
    create_topics(bootstrap, {"out": {}, "dlq": {}})
    events = make_events(OUTAGE_EVENTS, seed=21)
    produce(bootstrap, topic, [orjson.dumps(e) for e in events], PARTITIONS)
    args = args_for(
        bootstrap,
        topic,
        group,
        "out",
        "dlq",
        tmp_path / "cp",
        source_extra=source_extra,
        sink_extra=sink_extra,
    )
    daemon = Daemon(tmp_path, "daemon", args).start().wait_running()
    wait_for(
        lambda: sum(committed_offsets(bootstrap, group, topic).values()) > 0,
        60,
        "first commits",
        daemons=[daemon],
    )
    broker.stop()  # the daemon still holds fetched events: its output cannot be delivered
    code = wait_exit(daemon, 120)
    log = daemon.log()
    assert code is not None, f"the daemon hangs with the broker away:\n{log}"
    assert code != 0, log
    broker.start()
    again = Daemon(tmp_path, "daemon", args).start().wait_running()
    try:
        wait_committed(bootstrap, group, topic, PARTITIONS, timeout=180, daemons=[again])
    finally:
        assert again.stop() == 0, again.log()
    return events, log, again


def test_broker_away_past_the_delivery_timeout_ends_the_daemon_then_a_restart_completes(
    own_broker: KafkaBroker, tmp_path: Path
) -> None:
    """At-least-once: the flush fails after ``delivery_timeout_ms``, the daemon logs it and
    exits non-zero (it used to hang in ``close``); restarted, every event has a prediction
    and the model is exactly the model of the stream."""
    events, log, _ = outage(
        own_broker,
        tmp_path,
        source_extra="&request_timeout_ms=3000",
        sink_extra="delivery_timeout_ms=4000&request_timeout_ms=2000",
    )
    assert "not acknowledged" in log or "not delivered" in log, log
    assert "ERROR" in log, log
    preds = predictions(read_topic(own_broker.bootstrap, "out", 1))
    assert {p["id"] for p in preds} == {e["id"] for e in events}
    by_position = {}
    for p in preds:  # duplicates (at-least-once) are the same event's prediction
        key = tuple(p["position"].values())
        assert by_position.setdefault(key, p["id"]) == p["id"]
    assert len(by_position) == len(events)
    assert_same_model(model_of(tmp_path / "cp"), reference_model(events))


def test_broker_away_in_exactly_once_mode_ends_the_daemon_and_a_restart_emits_each_once(
    own_broker: KafkaBroker, tmp_path: Path
) -> None:
    """Exactly-once: the transaction cannot complete, the daemon exits non-zero within a
    bound; restarted, a ``read_committed`` consumer sees exactly one prediction per event."""
    events, log, _ = outage(
        own_broker,
        tmp_path,
        source_extra=(
            "&exactly_once=true&sync_interval=1&delivery_timeout_ms=4000&request_timeout_ms=2000"
        ),
        sink_extra="",
    )
    assert "ERROR" in log, log
    preds = predictions(read_topic(own_broker.bootstrap, "out", 1, read_committed=True))
    assert sorted(p["id"] for p in preds) == sorted(e["id"] for e in events)
    assert_same_model(model_of(tmp_path / "cp"), reference_model(events))


# ---------------------------------------------------------------- restarts
def test_a_restart_after_kill_9_resumes_without_waiting_for_the_session_timeout(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """Default options (session timeout 45 s): after a kill -9 the restarted daemon, a
    static member with the same instance id, resumes within seconds."""
    topic, out, dlq = f"fast-{unique}", f"fast-out-{unique}", f"fast-dlq-{unique}"
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    events = make_events(400, seed=31)
    produce(kafka_bootstrap, topic, [orjson.dumps(e) for e in events[:200]], PARTITIONS)
    args = args_for(kafka_bootstrap, topic, unique, out, dlq, tmp_path / "cp")
    daemon = Daemon(tmp_path, "daemon", args).start()
    wait_committed(kafka_bootstrap, unique, topic, PARTITIONS, timeout=120, daemons=[daemon])
    daemon.kill()
    produce(kafka_bootstrap, topic, [orjson.dumps(e) for e in events[200:]], PARTITIONS, 200)
    daemon = Daemon(tmp_path, "daemon", args).start().wait_running()
    try:
        # A dynamic member would wait ~45 s for the killed one to leave the group.
        wait_committed(kafka_bootstrap, unique, topic, PARTITIONS, timeout=25, daemons=[daemon])
    finally:
        assert daemon.stop() == 0, daemon.log()
    ids = {p["id"] for p in predictions(read_topic(kafka_bootstrap, out, 1))}
    assert ids == {e["id"] for e in events}
    assert_same_model(model_of(tmp_path / "cp"), reference_model(events))


# ---------------------------------------------------------------- missing topics
def test_missing_topics_fail_fast_naming_the_topic_unless_create_topics(
    strict_broker: KafkaBroker, tmp_path: Path
) -> None:
    """A broker that creates no topic on first use: a missing input, prediction,
    dead-letter or sync topic ends the start with a message naming it (the input used to
    idle silently, the sink to fail after 60 s); ``create_topics=true`` creates them."""
    bootstrap = strict_broker.bootstrap

    def start(extra: str = "", sink_extra: str = "", cp: str = "cp", out: str = "out") -> Any:
        args = args_for(
            bootstrap,
            "events",
            "g",
            out,
            "dlq",
            tmp_path / cp,
            source_extra=extra,
            sink_extra=sink_extra,
        )
        return run_until_exit([*args, "--limit", "50"], timeout=90)

    for missing, role, make in (
        ("events", "input topic", "events"),
        ("out", "prediction topic", "out"),
        ("dlq", "dead-letter topic", "dlq"),
    ):
        proc = start()
        assert proc.returncode != 0
        assert f"Kafka topic {missing!r} ({role}) does not exist" in proc.stderr, proc.stderr
        assert "create_topics=true" in proc.stderr
        create_topic(bootstrap, make, 1)
    proc = start("&exactly_once=true")
    assert proc.returncode != 0
    assert "Kafka topic 'g.stream-nb-state' (model-sync topic) does not exist" in proc.stderr
    assert "--partitions 1" in proc.stderr

    # create_topics=true: the sync topic (one partition) and a new prediction topic
    events = make_events(50, seed=41)
    produce(bootstrap, "events", [orjson.dumps(e) for e in events], 1)
    proc = start(
        "&exactly_once=true&create_topics=true",
        sink_extra="create_topics=true",
        cp="cp2",
        out="created",
    )
    assert proc.returncode == 0, proc.stderr
    assert "created Kafka topic 'g.stream-nb-state' (model-sync topic) with 1" in proc.stderr
    assert "created Kafka topic 'created' (prediction topic)" in proc.stderr
    preds = predictions(read_topic(bootstrap, "created", 1, read_committed=True))
    assert sorted(p["id"] for p in preds) == [e["id"] for e in events]


# ---------------------------------------------------------------- lost state
def test_an_empty_checkpoint_dir_on_a_group_with_commits_is_refused_unless_reset_state(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """The group committed offsets for a model whose snapshots are gone (a new volume):
    the start is refused, naming the group and ``--reset-state``; with the flag a new,
    empty model starts at the committed offsets."""
    topic, out, dlq = f"lost-{unique}", f"lost-out-{unique}", f"lost-dlq-{unique}"
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    events = make_events(400, seed=51)
    produce(kafka_bootstrap, topic, [orjson.dumps(e) for e in events[:300]], PARTITIONS)
    first = args_for(kafka_bootstrap, topic, unique, out, dlq, tmp_path / "cp")
    daemon = Daemon(tmp_path, "first", first).start()
    try:
        wait_committed(kafka_bootstrap, unique, topic, PARTITIONS, timeout=120, daemons=[daemon])
    finally:
        assert daemon.stop() == 0, daemon.log()

    fresh = args_for(kafka_bootstrap, topic, unique, out, dlq, tmp_path / "empty")
    proc = run_until_exit(fresh)
    assert proc.returncode != 0
    assert f"consumer group {unique!r} has committed offsets" in proc.stderr, proc.stderr
    assert "--reset-state" in proc.stderr
    assert not any((tmp_path / "empty").glob("*snapshot-*")), "a refused start wrote a snapshot"
    assert run_until_exit(fresh).returncode != 0  # refused again: nothing was written

    produce(kafka_bootstrap, topic, [orjson.dumps(e) for e in events[300:]], PARTITIONS, 300)
    daemon = Daemon(tmp_path, "reset", [*fresh, "--reset-state"]).start()
    try:
        wait_committed(kafka_bootstrap, unique, topic, PARTITIONS, timeout=120, daemons=[daemon])
    finally:
        assert daemon.stop() == 0, daemon.log()
    # the new model learned exactly the events after the committed offsets
    assert_same_model(model_of(tmp_path / "empty"), reference_model(events[300:]))


# ---------------------------------------------------------------- keys, headers, blanks
def test_keys_and_headers_reach_predictions_and_dead_letters_blanks_are_counted(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """Events keyed and with a trace header: predictions and dead letters keep both;
    a tombstone and an empty value count as ``blank`` in the report and the metric; the
    final report goes to stderr (the predictions go to Kafka)."""
    topic, out, dlq = f"kh-{unique}", f"kh-out-{unique}", f"kh-dlq-{unique}"
    create_topics(kafka_bootstrap, {topic: {}, out: {}, dlq: {}})
    events = make_events(100, seed=61)
    records: list[tuple[bytes | None, bytes | None, list[Any]]] = [
        (f"k{e['id']}".encode(), orjson.dumps(e), [("trace-id", f"t{e['id']}".encode())])
        for e in events
    ]
    records[10:10] = [
        (b"gone", None, []),  # a tombstone
        (b"empty", b"", []),
        (b"bad", b"{oops", [("trace-id", b"t-bad"), ("stream_nb.reason", b"spoofed")]),
    ]
    send(kafka_bootstrap, topic, records)
    port = free_port()
    args = args_for(kafka_bootstrap, topic, unique, out, dlq, tmp_path / "cp")
    args += ["--metrics-address", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stream_nb.cli", "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        preexec_fn=die_with_parent,
    )
    try:
        ends = end_offsets(kafka_bootstrap, topic, 1)
        deadline = time.monotonic() + 120
        while committed_offsets(kafka_bootstrap, unique, topic) != ends:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.3)
        text = scrape(port)
    finally:
        proc.terminate()
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert stdout == b""
    report = orjson.loads(stderr[stderr.index(b"\n{") + 1 :])
    assert report["outcomes"]["blank"] == 2
    assert metric(text, "stream_nb_events_processed_total", outcome="blank") == 2

    preds = read_topic(kafka_bootstrap, out, 1)
    assert len(preds) == len(events)
    for record in preds:
        event_id = orjson.loads(record.value)["id"]
        assert record.key == f"k{event_id}".encode()
        assert record.headers == [("trace-id", f"t{event_id}".encode())]
    (dead,) = read_topic(kafka_bootstrap, dlq, 1)
    headers = dict(dead.headers)
    assert dead.key == b"bad"
    assert headers["trace-id"] == b"t-bad"
    assert headers["stream_nb.reason"] == b"invalid_json"  # not the event's spoofed one
    assert [v for k, v in dead.headers if k == "stream_nb.reason"] == [b"invalid_json"]
