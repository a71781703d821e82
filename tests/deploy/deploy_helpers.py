"""Real processes for the deployment tests: a ``stream-nb run`` daemon, Debian's
Prometheus server and the local Kafka broker of ``scripts/kafka-local.sh``, plus the
PromQL and metric names found in ``deploy/``.

Used by ``tests/deploy/`` and by ``scripts/dashboard_screenshot.py``. Every child of
the test process is started with ``PR_SET_PDEATHSIG``, so a killed test run leaves no
daemon or Prometheus behind (the broker runs in its own session, as the script starts
it: :class:`LocalKafka` stops it, and kills what is left of it).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DASHBOARD = DEPLOY / "grafana" / "stream-nb.json"
CONSOLES = DEPLOY / "prometheus" / "consoles"
RULE_FILES = (
    DEPLOY / "prometheus" / "stream-nb.rules.yml",
    DEPLOY / "prometheus" / "stream-nb.alerts.yml",
)
KAFKA_SCRIPT = REPO / "scripts" / "kafka-local.sh"
#: The scrape job name the rules and docs/operations.md use.
JOB = "stream-nb"

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn``: SIGKILL the child when the test process dies (Linux)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux/glibc: best effort only
        pass


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``check`` until it returns a truthy value; raise naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def tool(name: str, debian_package: str) -> str:
    """Absolute path of a command-line tool; fails (never skips) when it is missing."""
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if path is None:
        raise AssertionError(
            f"{name} is not installed; scripts/test.sh installs it "
            f"(Debian package {debian_package!r}: apt-get install {debian_package})"
        )
    return path


def stream_nb_command() -> list[str]:
    """The ``stream-nb`` console script of the running interpreter's environment."""
    script = Path(sys.executable).parent / "stream-nb"
    return [str(script)] if script.exists() else [sys.executable, "-m", "stream_nb.cli"]


# ---------------------------------------------------------------------- the daemon
class Daemon:
    """``stream-nb run ARGS --metrics-address 127.0.0.1:0 --log-format json``.

    The metrics port is read from the daemon's own log line, so no port is
    guessed. ``stop()`` sends SIGTERM (a clean stop) and returns the exit code.
    ``metrics_address`` replaces ``127.0.0.1:0`` (keep port 0).
    """

    def __init__(
        self, workdir: Path, args: list[str], metrics_address: str = "127.0.0.1:0"
    ) -> None:
        self.workdir = workdir
        self.args = args
        self.metrics_address = metrics_address
        self.log_path = workdir / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self._log_start = 0

    def start(self, timeout: float = 60.0) -> Daemon:
        command = [
            *stream_nb_command(),
            "run",
            *self.args,
            "--metrics-address",
            self.metrics_address,
            "--log-format",
            "json",
        ]
        # a restarted daemon appends to the same log: read only what this one writes
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                command,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=die_with_parent,
            )
        self.port = wait_for(self._logged_port, "the daemon's metrics port in its log", timeout)
        return self

    def _logged_port(self) -> int | None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"stream-nb run exited early:\n{self.log_tail()}")
        with open(self.log_path, "rb") as log:
            log.seek(self._log_start)
            text = log.read().decode(errors="replace")
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            port = (record.get("data") or {}).get("port") if isinstance(record, dict) else None
            if isinstance(port, int):
                return port
        return None

    @property
    def target(self) -> str:
        """``host:port`` of /metrics, as Prometheus labels the instance."""
        return f"127.0.0.1:{self.port}"

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://{self.target}/metrics", timeout=5) as response:
            return str(response.read().decode())

    def sample(self, name: str, labels: str = "") -> float | None:
        """One sample of the daemon's own exposition (``name{labels}``), or None."""
        wanted = f"{name}{{{labels}}}" if labels else name
        for line in self.metrics().splitlines():
            if line.startswith(wanted + " "):
                return float(line.rsplit(" ", 1)[1])
        return None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 60.0) -> int | None:
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode


# ---------------------------------------------------------------------- Prometheus
class PrometheusServer:
    """Debian's ``prometheus`` on 127.0.0.1 with a temporary data directory.

    Parameters
    ----------
    workdir
        Holds the generated ``prometheus.yml``, the TSDB and the server's log.
    targets
        ``host:port`` of the daemons, scraped as job :data:`JOB`.
    rule_files
        Rule files to load.
    interval
        Scrape and rule evaluation interval.
    consoles
        Directory of console templates served at ``/consoles/`` (default: none).
    config_text
        A whole ``prometheus.yml`` to use instead of the generated one (then
        ``targets``, ``rule_files`` and ``interval`` are not used).
    """

    def __init__(
        self,
        workdir: Path,
        targets: list[str],
        rule_files: tuple[Path, ...] = RULE_FILES,
        interval: str = "1s",
        consoles: Path | None = None,
        config_text: str | None = None,
    ) -> None:
        self.workdir = workdir
        self.targets = targets
        self.rule_files = rule_files
        self.interval = interval
        self.consoles = consoles
        self.config_text = config_text
        self.binary = tool("prometheus", "prometheus")
        self.config = workdir / "prometheus.yml"
        self.log_path = workdir / "prometheus.log"
        self.port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_config(self) -> None:
        if self.config_text is not None:
            self.config.write_text(self.config_text)
            return
        # JSON is YAML: the config needs no YAML library.
        config = {
            "global": {"scrape_interval": self.interval, "evaluation_interval": self.interval},
            "rule_files": [str(path) for path in self.rule_files],
            "scrape_configs": [
                {
                    "job_name": JOB,
                    "scrape_timeout": self.interval,
                    "static_configs": [{"targets": self.targets}],
                }
            ],
        }
        self.config.write_text(json.dumps(config, indent=2) + "\n")

    def start(self, attempts: int = 3, timeout: float = 60.0) -> PrometheusServer:
        """Start the server and wait for /-/ready; a port lost to a race is retried."""
        self.write_config()
        for attempt in range(attempts):
            self.port = free_port()
            data = self.workdir / "data"
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    [
                        self.binary,
                        f"--config.file={self.config}",
                        f"--storage.tsdb.path={data}",
                        f"--web.listen-address=127.0.0.1:{self.port}",
                        "--log.level=warn",
                        *self._console_flags(),
                    ],
                    cwd=self.workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    preexec_fn=die_with_parent,
                )
            try:
                wait_for(self._ready, "Prometheus /-/ready", timeout)
                return self
            except AssertionError:
                self.stop()
                if attempt == attempts - 1:
                    raise
        return self

    def _console_flags(self) -> list[str]:
        if self.consoles is None:
            return []
        return [
            f"--web.console.templates={self.consoles}",
            f"--web.console.libraries={self.consoles}",
        ]

    def get(self, path: str) -> tuple[int, str]:
        """Status and body of a GET on the server (any path)."""
        try:
            with urllib.request.urlopen(f"{self.url}{path}", timeout=30) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode(errors="replace")

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited early:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def api(self, path: str, **params: str) -> Any:
        """GET (or POST, for ``query``) an ``/api/v1`` endpoint; returns ``data``.

        Raises AssertionError with Prometheus's error type and message when the
        answer is not ``"status": "success"``.
        """
        body = urllib.parse.urlencode(params).encode() if params else None
        request = urllib.request.Request(f"{self.url}/api/v1/{path}", data=body)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            answer = json.loads(exc.read() or b"{}")
        if answer.get("status") != "success":
            raise AssertionError(
                f"/api/v1/{path} {params}: {answer.get('errorType')}: {answer.get('error')}"
            )
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; the result as a list of ``{"metric", "value"}`` (vectors)."""
        data = self.api("query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def values(self, expr: str, label: str) -> dict[str, float]:
        """``{label value: sample value}`` of an instant query."""
        return {r["metric"].get(label, ""): float(r["value"][1]) for r in self.query(expr)}

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------------- PromQL in deploy/
def load_dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def dashboard_panels(dashboard: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Every non-row panel, including those inside collapsed rows."""
    dashboard = load_dashboard() if dashboard is None else dashboard
    for panel in dashboard["panels"]:
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def dashboard_variable_queries(dashboard: dict[str, Any] | None = None) -> dict[str, str]:
    """``{variable name: query}`` of the dashboard's query variables."""
    dashboard = load_dashboard() if dashboard is None else dashboard
    out = {}
    for variable in dashboard["templating"]["list"]:
        if variable.get("type") == "query":
            query = variable["query"]
            out[variable["name"]] = query["query"] if isinstance(query, dict) else query
    return out


_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")


def variable_selector(query: str) -> tuple[str, str]:
    """Grafana's ``label_values(selector, label)`` as ``(selector, label)``."""
    match = _LABEL_VALUES.match(query.strip())
    if match is None:
        raise AssertionError(f"not a label_values(selector, label) query: {query!r}")
    return match["selector"], match["label"]


def substitute(expr: str, variables: dict[str, str]) -> str:
    """Replace Grafana variables (``$name``, ``${name}``) and fail on any left over."""
    names = sorted(variables, key=len, reverse=True)  # $__rate_interval before $__range...
    for name in names:
        expr = expr.replace("${" + name + "}", variables[name]).replace("$" + name, variables[name])
    left = re.findall(r"\$\{?\w+", expr)
    if left:
        raise AssertionError(f"unknown Grafana variable(s) {left} in {expr!r}")
    return expr


def grafana_variables(target: str, model: str) -> dict[str, str]:
    """Values of the dashboard's variables that select one daemon, as Grafana would
    put them into a regex matcher, plus Grafana's built-in interval variables."""
    return {
        "job": JOB,
        # a regex inside a PromQL string: its backslashes are escaped once more
        "instance": re.escape(target).replace("\\", "\\\\"),
        "model": model,
        # the built-ins, with values Grafana could pick for a 1 s scrape interval
        "__rate_interval": "5m",
        "__interval": "15s",
        "__range": "1h",
    }


def environment_with_venv() -> dict[str, str]:
    """os.environ with this interpreter's bin directory first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


# ---------------------------------------------------------------------- metric names
#: A metric name in PromQL: stream-nb's own, the process collector's, or a recorded one.
_NAME = re.compile(r"\b((?:\w+:)?(?:stream_nb|process|python)_\w+(?::\w+)?)\b")


def recorded_names() -> set[str]:
    """The names the recording rules define."""
    rules = "\n".join(path.read_text() for path in RULE_FILES)
    return set(re.findall(r"^      - record: (\S+)$", rules, re.MULTILINE))


def names_used_in_deploy() -> set[str]:
    """Every metric name the dashboard and the rule files read (recorded ones included)."""
    text = json.dumps(load_dashboard()) + "\n".join(path.read_text() for path in RULE_FILES)
    return {name for name in _NAME.findall(text) if not name.startswith("stream_nb_alerts")}


def exposition_names(text: str) -> set[str]:
    """The names an exposition (``/metrics``) can carry, from its ``# TYPE`` lines: a
    counter's ``_total``; a histogram's ``_bucket``, ``_count`` and ``_sum``, and its
    family name (which panel descriptions use)."""
    suffixes = {"counter": ("_total",), "histogram": ("", "_bucket", "_count", "_sum")}
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\w+)$", text, re.MULTILINE):
        base = name.removesuffix("_total") if kind == "counter" else name
        names.update(base + suffix for suffix in suffixes.get(kind, ("",)))
    return names


# ---------------------------------------------------------------------- local Kafka
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
    """Pids of Kafka brokers whose command line names ``data_dir``."""
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


class LocalKafka:
    """``scripts/kafka-local.sh`` on a data directory and ports of its own.

    The settings go through the script's environment variables
    (``STREAM_NB_KAFKA_DATA_DIR``, ``..._PORT``, ``..._CONTROLLER_PORT``), so the
    commands run are the documented ones; ``PATH`` starts with this interpreter's
    virtualenv, as for a user who activated it.

    Parameters
    ----------
    data_dir
        The broker's data directory (created by ``start``).
    cwd
        Working directory of the commands.
    tmpdir
        ``TMPDIR`` of the commands (default: inherited).
    """

    def __init__(self, data_dir: Path, cwd: Path, tmpdir: Path | None = None) -> None:
        rng = random.Random()
        port = fixed_port(rng)
        controller_port = fixed_port(rng)
        while controller_port == port:
            controller_port = fixed_port(rng)
        self.data_dir = data_dir
        self.cwd = cwd
        self.port = port
        self.controller_port = controller_port
        self.env = environment_with_venv() | {
            "STREAM_NB_KAFKA_DATA_DIR": str(data_dir),
            "STREAM_NB_KAFKA_PORT": str(port),
            "STREAM_NB_KAFKA_CONTROLLER_PORT": str(controller_port),
        }
        if tmpdir is not None:
            self.env["TMPDIR"] = str(tmpdir)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def script(
        self, *args: str, stdin: str | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """``bash scripts/kafka-local.sh ARGS`` (text in and out, never raises on exit)."""
        return subprocess.run(
            ["bash", str(KAFKA_SCRIPT), *args],
            cwd=self.cwd,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self) -> LocalKafka:
        result = self.script("start")
        if result.returncode != 0:
            raise AssertionError(f"kafka-local.sh start failed:\n{result.stderr}")
        return self

    def kill_leftovers(self) -> None:
        """SIGKILL brokers of this data directory that are still running."""
        for pid in broker_processes(self.data_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """``kafka-local.sh stop``, then SIGKILL for anything it left running."""
        try:
            self.script("stop")
        finally:
            self.kill_leftovers()
