"""scripts/kafka-local.sh for real: the Kafka quick start of the README, run as it
stands (docs/operations.md holds the same block, checked to be the same text), then
the broker's persistence, a kill -9 and a clean stop.

The broker gets a temporary data directory and free ports through the script's
environment variables; the quick start runs in a temporary directory holding a
``scripts`` symlink, so it writes nothing into the repository.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from deploy_helpers import REPO, environment_with_venv, wait_for

SCRIPT = REPO / "scripts" / "kafka-local.sh"
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
    data_dir: Path
    env: dict[str, str]
    result: subprocess.CompletedProcess[str]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.env['STREAM_NB_KAFKA_PORT']}"

    def script(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPT), *args],
            cwd=self.workdir,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )


def fixed_port(rng: random.Random) -> int:
    """A free port below the ephemeral range: the broker keeps its ports across
    restarts, and a port the kernel hands out for outgoing connections (as ``bind``
    to port 0 does) may be taken by another program between them."""
    low = 20000
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        high = min(int(f.read().split()[0]), 32768)
    for _ in range(100):
        port = rng.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {low}..{high}")


def accepts_connections(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def broker_processes(data_dir: Path) -> list[int]:
    """Pids of processes whose command line names the data directory."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if str(data_dir).encode() in cmdline and b"kafka.Kafka" in cmdline:
                pids.append(int(proc.name))
    return pids


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuickStart]:
    workdir = tmp_path_factory.mktemp("kafka-quick-start")
    (workdir / "scripts").symlink_to(REPO / "scripts")
    (workdir / "tmp").mkdir()
    data_dir = workdir / "kafka-data"
    rng = random.Random()
    port = fixed_port(rng)
    controller_port = fixed_port(rng)
    while controller_port == port:
        controller_port = fixed_port(rng)
    env = environment_with_venv() | {
        "STREAM_NB_KAFKA_DATA_DIR": str(data_dir),
        "STREAM_NB_KAFKA_PORT": str(port),
        "STREAM_NB_KAFKA_CONTROLLER_PORT": str(controller_port),
        "TMPDIR": str(workdir / "tmp"),
    }
    try:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", quick_start_block(README)],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        yield QuickStart(workdir, data_dir, env, result)
    finally:
        for pid in broker_processes(data_dir):  # only if a test failed half-way
            os.kill(pid, signal.SIGKILL)


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
    status = quick_start.script("status")
    assert status.returncode == 3
    assert "not running" in status.stderr


def test_restart_keeps_topics_and_records_and_survives_kill_9(quick_start: QuickStart) -> None:
    """Started again on the same data directory: the topics keep their partitions and
    records. Then SIGKILL: status says so, and a new start recovers the data."""
    from kafka import KafkaConsumer, TopicPartition

    start = quick_start.script("start")
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
    topics = quick_start.script("topics")
    assert {"events", "predictions", "events-dlq"} <= set(topics.stdout.split())

    [pid] = broker_processes(quick_start.data_dir)
    os.kill(pid, signal.SIGKILL)
    # A killed JVM's command line reads empty as soon as its main thread has gone,
    # while its other threads may still hold the listening sockets for a moment.
    ports = [int(quick_start.env[f"STREAM_NB_KAFKA_{p}PORT"]) for p in ("", "CONTROLLER_")]
    wait_for(
        lambda: (
            broker_processes(quick_start.data_dir) == []
            and not any(accepts_connections(port) for port in ports)
        ),
        "the killed broker to exit and close its ports",
    )
    status = quick_start.script("status")
    assert status.returncode == 3, status.stderr

    start = quick_start.script("start")
    assert start.returncode == 0, start.stderr
    # after the crash: the records are all there, and the broker takes new ones
    assert layout()["events records"] == 1000
    produced = quick_start.script("produce", "events-dlq", stdin="a\nb\nc\n")
    assert produced.returncode == 0, produced.stderr
    assert layout()["events-dlq records"] == 3

    stop = quick_start.script("stop")
    assert stop.returncode == 0, stop.stderr
    assert broker_processes(quick_start.data_dir) == []
    assert "SIGKILL" not in stop.stderr  # SIGTERM was enough


def test_usage_errors_name_the_fix(quick_start: QuickStart) -> None:
    wrong_port = quick_start.script("--port", "1", "start")
    assert wrong_port.returncode == 1
    assert "was formatted for ports" in wrong_port.stderr
    partitions = quick_start.script("create-topic", "x", "zero")
    assert partitions.returncode == 1
    assert "PARTITIONS must be a positive number" in partitions.stderr
    not_running = quick_start.script("produce", "events", stdin="x\n")
    assert not_running.returncode == 1
    assert "start it with: bash scripts/kafka-local.sh start" in not_running.stderr
    unknown = quick_start.script("launch")
    assert unknown.returncode == 1
    assert "unknown command 'launch'" in unknown.stderr
