"""/healthz follows the processing loop: real HTTP requests to the real metrics server while
the engine's loop idles, is really blocked inside its source, and runs again."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest

from stream_nb import CategoricalNB, ConfigError, Engine, EngineMetrics
from stream_nb.connectors.base import Record, Source
from stream_nb.connectors.memory import MemorySink
from stream_nb.engine.server import progress_check, serve_metrics


class GatedSource(Source):
    """Idles (empty polls) while open; inside ``next_batch`` it blocks, without a
    timeout, while the gate is closed (a client call that hangs)."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.open.set()
        self.blocked = threading.Event()
        self.done = False
        self.sent = False

    def next_batch(self, max_records: int, timeout: float) -> list[Record]:
        if not self.open.is_set():
            self.blocked.set()
            self.open.wait()
        if not self.sent:
            self.sent = True
            return [Record(b'{"x": {"f": "a"}, "y": 1}', {"index": 0})]
        time.sleep(min(timeout, 0.02))
        return []

    @property
    def exhausted(self) -> bool:
        return self.done

    def position(self) -> dict:
        return {"index": 1 if self.sent else 0}

    def close(self) -> None:
        pass


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _wait_for_status(url: str, status: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while _status(url) != status:
        assert time.monotonic() < deadline, f"{url} never answered {status}"
        time.sleep(0.02)


def test_healthz_fails_while_the_loop_is_blocked_and_recovers():
    source = GatedSource()
    engine = Engine(CategoricalNB(), source, MemorySink(), poll_timeout=0.05)
    deadline = 2.0  # generous: a loaded machine must not make an idle loop look stuck
    server = serve_metrics(
        EngineMetrics(), port=0, live=progress_check(engine.progress_age, deadline)
    )
    runner = threading.Thread(target=engine.run, daemon=True)
    try:
        runner.start()
        healthz = server.url + "/healthz"
        _wait_for_status(healthz, 200)  # idle polls count as progress
        time.sleep(1.5 * deadline)
        assert _status(healthz) == 200  # still idle, still alive
        source.open.clear()
        assert source.blocked.wait(30)
        _wait_for_status(healthz, 503)  # stuck inside the source for longer than the deadline
        assert engine.progress_age() > deadline
        assert _status(server.url + "/readyz") == 200  # readiness keeps its own meaning
        source.open.set()
        _wait_for_status(healthz, 200)
    finally:
        source.open.set()
        source.done = True
        runner.join(30)
        server.close()
    assert not runner.is_alive() and engine.learner.n_learned == 1


def test_progress_check_rejects_a_bad_deadline():
    with pytest.raises(ConfigError, match="health deadline must be positive seconds"):
        progress_check(lambda: 0.0, 0.0)
