"""scripts/kafka-local.sh for real: the Kafka quick start of the README, run as it
stands (docs/operations.md holds the same block, checked to be the same text), then
the broker's persistence, a second start, a kill -9, a clean stop, an interrupted
start and the usage errors.

The broker gets a temporary data directory and free ports through the script's
environment variables; the quick start runs in a temporary directory holding a
``scripts`` symlink, so it writes nothing into the repository.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from deploy_helpers import REPO, LocalKafka, accepts_connections, broker_processes, wait_for

README = REPO / "README.md"
OPERATIONS = REPO / "docs" / "operations.md"


def quick_start_block(document: Path) -> str:
    """The bash block after ``<!-- kafka quick start -->`` in ``document``."""
    text = document.read_text()
    match = re.search(r"<!-- kafka quick start -->\n```bash\n(.*?)```", text, re.DOTALL)
    assert match is not None, f"{document.name} lost its Kafka quick start block"
    return match[1]


def test_the_readme_and_operations_quick_starts_are_one_text() -> None:
    """The README's block is the one run below; docs/operations.md repeats it."""
    assert quick_start_block(OPERATIONS) == quick_start_block(README)


def test_the_readme_quick_start_uses_only_user_facing_commands() -> None:
    """Every line is a ``scripts/kafka-local.sh`` or ``stream-nb`` command (or sets the
    address from one): nothing from tests/, no pip package from a registry."""
    lines = [line for line in quick_start_block(README).splitlines() if line.strip()]
    commands = [line for line in lines if not line.startswith("  ")]  # continuations
    for line in commands:
        assert line.startswith(("bash scripts/kafka-local.sh ", "stream-nb ", "KAFKA=")), line
    assert "tests/" not in quick_start_block(README)
    readme = README.read_text()
    assert "pip install '.[kafka]'" in readme
    assert "stream-nb[kafka]" not in readme


@dataclass
class QuickStart:
    workdir: Path
    kafka: LocalKafka
    result: subprocess.CompletedProcess[str]

    @property
    def data_dir(self) -> Path:
        return self.kafka.data_dir

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuickStart]:
    workdir = tmp_path_factory.mktemp("kafka-quick-start")
    (workdir / "scripts").symlink_to(REPO / "scripts")
    (workdir / "tmp").mkdir()
    kafka = LocalKafka(workdir / "kafka-data", workdir, tmpdir=workdir / "tmp")
    try:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", quick_start_block(README)],
            cwd=workdir,
            env=kafka.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        yield QuickStart(workdir, kafka, result)
    finally:
        kafka.kill_leftovers()  # only if a test failed half-way


def test_the_quick_start_runs_as_documented(quick_start: QuickStart) -> None:
    result = quick_start.result
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    # start prints the address; create-topic confirms each topic
    assert lines[0] == quick_start.bootstrap
    assert lines[1:4] == [
        "Created topic events.",
        "Created topic predictions.",
        "Created topic events-dlq.",
    ]
    # consume prints five prediction records, status the address
    predictions = [json.loads(line) for line in lines[4:9]]
    assert all(p["position"]["topic"] == "events" for p in predictions)
    assert all(p["y_pred"] in (0, 1) for p in predictions[1:])  # the first may come untrained
    assert lines[9:] == [quick_start.bootstrap]
    report = json.loads((quick_start.workdir / "report.json").read_text())
    assert (report["consumed"], report["predictions"], report["learned"]) == (1000, 1000, 1000)
    assert "kafka-local.sh: stopped" in result.stderr
    # the broker is gone, no temporary file is left behind
    assert broker_processes(quick_start.data_dir) == []
    assert list((quick_start.workdir / "tmp").iterdir()) == []
    assert (quick_start.data_dir / "data" / "meta.properties").exists()
    assert not (quick_start.data_dir / "broker.pid").exists()


def test_status_of_a_stopped_broker(quick_start: QuickStart) -> None:
    status = quick_start.kafka.script("status")
    assert status.returncode == 3
    assert "not running" in status.stderr


def test_restart_keeps_topics_and_records_and_survives_kill_9(quick_start: QuickStart) -> None:
    """Started again on the same data directory: the topics keep their partitions and
    records. Then SIGKILL: status says so, and a new start recovers the data."""
    from kafka import KafkaConsumer, TopicPartition

    start = quick_start.kafka.script("start")
    assert start.returncode == 0, start.stderr
    assert start.stdout == quick_start.bootstrap + "\n"

    def layout() -> dict[str, int]:
        consumer = KafkaConsumer(bootstrap_servers=quick_start.bootstrap)
        try:
            out = {}
            for topic in ("events", "predictions", "events-dlq"):
                partitions = consumer.partitions_for_topic(topic) or set()
                ends = consumer.end_offsets([TopicPartition(topic, p) for p in partitions])
                out[f"{topic} partitions"] = len(partitions)
                out[f"{topic} records"] = sum(ends.values())
            return out
        finally:
            consumer.close()

    assert layout() == {
        "events partitions": 3,
        "events records": 1000,
        "predictions partitions": 3,
        "predictions records": 1000,
        "events-dlq partitions": 1,
        "events-dlq records": 0,
    }
    topics = quick_start.kafka.script("topics")
    assert {"events", "predictions", "events-dlq"} <= set(topics.stdout.split())

    [pid] = broker_processes(quick_start.data_dir)
    os.kill(pid, signal.SIGKILL)
    # A killed JVM's command line reads empty as soon as its main thread has gone,
    # while its other threads may still hold the listening sockets for a moment.
    ports = [quick_start.kafka.port, quick_start.kafka.controller_port]
    wait_for(
        lambda: (
            broker_processes(quick_start.data_dir) == []
            and not any(accepts_connections(port) for port in ports)
        ),
        "the killed broker to exit and close its ports",
    )
    status = quick_start.kafka.script("status")
    assert status.returncode == 3, status.stderr

    start = quick_start.kafka.script("start")
    assert start.returncode == 0, start.stderr
    # a second start finds it running: the same address, no second broker
    again = quick_start.kafka.script("start")
    assert (again.returncode, again.stdout) == (0, quick_start.bootstrap + "\n")
    assert "already running" in again.stderr
    assert len(broker_processes(quick_start.data_dir)) == 1
    # after the crash: the records are all there, and the broker takes new ones
    assert layout()["events records"] == 1000
    produced = quick_start.kafka.script("produce", "events-dlq", stdin="a\nb\nc\n")
    assert produced.returncode == 0, produced.stderr
    assert layout()["events-dlq records"] == 3
    # a topic that does not exist: an error at once, not a minute of client retries
    typo = quick_start.kafka.script("produce", "event", stdin="x\n", timeout=30)
    assert typo.returncode == 1
    assert "topic 'event' does not exist" in typo.stderr
    assert "create-topic event PARTITIONS" in typo.stderr
    assert "event" not in quick_start.kafka.script("topics").stdout.split()

    stop = quick_start.kafka.script("stop")
    assert stop.returncode == 0, stop.stderr
    assert broker_processes(quick_start.data_dir) == []
    assert "SIGKILL" not in stop.stderr  # SIGTERM was enough


def test_an_interrupted_start_leaves_no_broker(quick_start: QuickStart, tmp_path: Path) -> None:
    """SIGTERM (or Ctrl-C) while ``start`` waits for the broker stops that broker again;
    stop and status then say it is not running. Run from outside the repository with a
    PATH that has no virtualenv (the script needs none) and a TMPDIR that stays empty."""
    (tmp_path / "tmp").mkdir()
    env = quick_start.kafka.env | {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path / "tmp")}
    env.pop("VIRTUAL_ENV", None)
    start = subprocess.Popen(
        ["bash", str(REPO / "scripts" / "kafka-local.sh"), "start"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: broker_processes(quick_start.data_dir), "the broker's JVM to start")
        start.send_signal(signal.SIGTERM)
        out, err = start.communicate(timeout=180)
    finally:
        if start.poll() is None:
            start.kill()
    assert start.returncode == 143, err
    assert out == ""
    assert "start interrupted (SIGTERM); stopping the broker it launched" in err
    assert broker_processes(quick_start.data_dir) == []
    assert not (quick_start.data_dir / "broker.pid").exists()
    status = subprocess.run(
        ["bash", str(REPO / "scripts" / "kafka-local.sh"), "status"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert status.returncode == 3, status.stderr
    stop = quick_start.kafka.script("stop")
    assert (stop.returncode, stop.stderr) == (0, "kafka-local.sh: not running\n")
    assert list((tmp_path / "tmp").iterdir()) == []


def test_usage_errors_name_the_fix(quick_start: QuickStart) -> None:
    wrong_port = quick_start.kafka.script("--port", "1", "start")
    assert wrong_port.returncode == 1
    assert "was formatted for ports" in wrong_port.stderr
    for port in ("0", "65536", "http"):
        invalid = quick_start.kafka.script("--port", port, "status")
        assert invalid.returncode == 1
        assert f"a port must be a number in 1..65535, got '{port}'" in invalid.stderr
    partitions = quick_start.kafka.script("create-topic", "x", "zero")
    assert partitions.returncode == 1
    assert "PARTITIONS must be a positive number" in partitions.stderr
    not_running = quick_start.kafka.script("produce", "events", stdin="x\n")
    assert not_running.returncode == 1
    assert "start it with: bash scripts/kafka-local.sh start" in not_running.stderr
    unknown = quick_start.kafka.script("launch")
    assert unknown.returncode == 1
    assert "unknown command 'launch'" in unknown.stderr
