"""Run a single-node Apache Kafka (KRaft) broker from the Maven Central jars.

Used by the Kafka tests' session fixture and by ``benchmarks/bench_kafka.py``.
The jars come from ``scripts/kafka_jars.sh`` (cached under ``.cache/kafka/``).
The broker listens on free 127.0.0.1 ports chosen at start, keeps its logs in a
temporary directory and runs with a small heap.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

__all__ = ["KafkaBroker", "die_with_parent", "free_port", "jar_dir"]

_REPO = Path(__file__).resolve().parents[3]

#: Seconds to wait for the broker to start (2 shared cores: usually 5-15 s).
START_TIMEOUT = 120.0

_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka.server.KafkaRaftServer
logger.kafka.level = INFO
logger.broker.name = kafka.server.BrokerServer
logger.broker.level = INFO
"""


def die_with_parent() -> None:
    """``preexec_fn`` for children: SIGKILL them when the process that started them dies
    (Linux ``PR_SET_PDEATHSIG``), so a crashed test run leaves no broker or daemon behind."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux/glibc: best effort only
        pass


_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def jar_dir() -> Path:
    """The directory of broker jars, fetched by ``scripts/kafka_jars.sh`` if missing."""
    out = subprocess.run(
        ["bash", str(_REPO / "scripts" / "kafka_jars.sh")],
        check=True,
        capture_output=True,
        text=True,
        cwd=_REPO,
    ).stdout.strip()
    path = Path(out)
    return path if path.is_absolute() else _REPO / path


class KafkaBroker:
    """A KRaft broker+controller in a temporary directory on free ports.

    ``start()`` formats the storage (first time only) and starts the JVM;
    ``stop()`` terminates it; a stopped broker can be started again on the same
    ports with its data intact (for broker-restart tests). ``config`` overrides
    ``server.properties`` entries (e.g. ``{"auto.create.topics.enable": "false"}``).
    """

    def __init__(
        self, jars: Path | None = None, heap: str = "512m", config: dict[str, str] | None = None
    ) -> None:
        self.jars = jars if jars is not None else jar_dir()
        self.heap = heap
        self.config = dict(config or {})
        self.port = free_port()
        self.controller_port = free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="stream-nb-kafka-"))
        self.log_path = self.workdir / "broker.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._formatted = False
        self._started_once = False  # started successfully once: keep its ports and data

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            "log.flush.interval.messages": "1",
            **self.config,
        }
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.workdir / "log4j2.properties").write_text(_LOG4J2)
        return config

    def _java(self, *args: str, heap: str) -> list[str]:
        return [
            "java",
            f"-Xms{heap}" if heap == self.heap else "-Xms64m",
            f"-Xmx{heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Xshare:auto",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            "-cp",
            f"{self.jars}/*",
            *args,
        ]

    def start(self, attempts: int = 3) -> None:
        """Format (once), start, and wait until the broker answers metadata requests.

        A first start that fails (e.g. a port taken between choosing and binding
        it) is retried on fresh ports.
        """
        for attempt in range(attempts):
            try:
                self._start()
                return
            except (RuntimeError, subprocess.CalledProcessError) as exc:
                self.stop()
                if self._started_once or attempt == attempts - 1:
                    detail = getattr(exc, "stderr", None) or b""
                    raise RuntimeError(
                        f"cannot start the Kafka broker ({exc}):\n"
                        f"{detail.decode(errors='replace')[-3000:]}\n{self.log_tail()}"
                    ) from exc
                shutil.rmtree(self.workdir / "data", ignore_errors=True)
                self._formatted = False
                self.port, self.controller_port = free_port(), free_port()

    def _start(self) -> None:
        config = self._write_config()
        if not self._formatted:
            subprocess.run(
                self._java(
                    "kafka.tools.StorageTool",
                    "format",
                    "--standalone",
                    "--ignore-formatted",
                    "-t",
                    str(_cluster_id()),
                    "-c",
                    str(config),
                    heap="256m",
                ),
                check=True,
                capture_output=True,
            )
            self._formatted = True
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child process
        self._proc = subprocess.Popen(
            self._java("kafka.Kafka", str(config), heap=self.heap),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        log.close()
        self.wait_ready()
        self._started_once = True

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Block until a metadata request succeeds, or raise with the broker log tail."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"Kafka broker exited early:\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    pass
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000)
                try:
                    admin.describe_cluster()
                finally:
                    admin.close()
                return
            except (OSError, KafkaError):
                time.sleep(0.3)
        raise RuntimeError(f"Kafka broker not ready after {timeout} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> None:
        """Terminate the broker (SIGTERM, then SIGKILL after ``timeout``)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        """Stop the broker and delete its directory."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _cluster_id() -> str:
    # A Kafka cluster id is a base64url-encoded (no padding) random 16-byte UUID.
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


if __name__ == "__main__":  # manual use: python tests/connectors/kafka/kafka_broker.py
    broker = KafkaBroker()
    t0 = time.monotonic()
    broker.start()
    print(f"broker ready at {broker.bootstrap} in {time.monotonic() - t0:.1f} s", flush=True)
    try:
        if os.environ.get("HOLD"):
            time.sleep(float(os.environ["HOLD"]))
    finally:
        broker.close()
