"""The metrics an engine wires into its EngineMetrics, scraped over real HTTP: the
checkpoint interval, the last checkpoint time after a restore, and the gauges read at
scrape time (readiness, the processing loop's progress age, a file source's backlog),
which stay right while the loop is blocked."""

from __future__ import annotations

import os
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stream_nb import CategoricalNB, Checkpointer, ConfigError, Engine, EngineMetrics
from stream_nb.connectors.base import Record, Source
from stream_nb.connectors.files import FileSource
from stream_nb.connectors.memory import ListSource, MemorySink
from stream_nb.engine.server import serve_metrics

EVENT = b'{"x": {"f": "a"}, "y": 1}'


def scrape(metrics: EngineMetrics) -> dict[str, float]:
    """``{sample name: value}`` of the unlabelled samples, as served over HTTP."""
    with (
        serve_metrics(metrics, port=0) as server,
        urllib.request.urlopen(server.url + "/metrics", timeout=10) as response,
    ):
        assert response.status == 200
        text = response.read().decode()
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.labels
    }


def wait_until(check, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# ---------------------------------------------------------------------- checkpoint interval
@pytest.mark.parametrize(
    ("checkpoints", "every", "interval", "expected"),
    [
        (True, None, 30.0, 30.0),
        (True, 100, 2.5, 2.5),  # both: the time-based one is what an alert can scale with
        (True, 100, None, 0.0),  # count-based only
        (False, None, None, 0.0),  # no checkpoints at all
    ],
)
def test_the_checkpoint_interval_is_exported(
    tmp_path: Path, checkpoints: bool, every: int | None, interval: float | None, expected: float
) -> None:
    metrics = EngineMetrics()
    Engine(
        CategoricalNB(),
        ListSource([]),
        MemorySink(),
        checkpointer=Checkpointer(tmp_path) if checkpoints else None,
        checkpoint_every=every,
        checkpoint_interval=interval,
        metrics=metrics,
    )
    assert scrape(metrics)["stream_nb_checkpoint_interval_seconds"] == expected


def test_a_new_registry_exports_no_interval() -> None:
    metrics = EngineMetrics()
    assert scrape(metrics)["stream_nb_checkpoint_interval_seconds"] == 0.0
    metrics.set_checkpoint_interval(60)
    assert scrape(metrics)["stream_nb_checkpoint_interval_seconds"] == 60.0
    with pytest.raises(ConfigError, match="seconds must be a non-negative, finite number"):
        metrics.set_checkpoint_interval(-1.0)


# ---------------------------------------------------------------------- restore
def test_a_restore_sets_the_last_checkpoint_time_to_the_snapshots(tmp_path: Path) -> None:
    """A restarted daemon's checkpoint age is the age of the snapshot it restored, not
    undefined until its first new checkpoint."""
    sink = MemorySink()  # (the output a restart truncates back to the snapshot's)
    first = Engine(
        CategoricalNB(),
        ListSource([EVENT] * 5),
        sink,
        checkpointer=Checkpointer(tmp_path),
        metrics=EngineMetrics(),
    )
    first.run()
    snapshot_id, body = Checkpointer(tmp_path).latest()  # type: ignore[misc]
    assert first.summary().last_snapshot == snapshot_id
    created = body["created"]
    assert 0 < created <= time.time()

    metrics = EngineMetrics()
    assert scrape(metrics)["stream_nb_checkpoint_last_success_timestamp_seconds"] == 0
    second = Engine(
        CategoricalNB(),
        ListSource([EVENT] * 5),
        sink,
        checkpointer=Checkpointer(tmp_path),
        metrics=metrics,
    )
    assert second.restore()
    assert scrape(metrics)["stream_nb_checkpoint_last_success_timestamp_seconds"] == created
    # a new checkpoint moves it on
    second.checkpoint()
    assert scrape(metrics)["stream_nb_checkpoint_last_success_timestamp_seconds"] > created


def test_an_older_restored_time_never_moves_the_last_checkpoint_back() -> None:
    metrics = EngineMetrics()
    metrics.record_checkpoint(result="success", seconds=0.01)
    last = scrape(metrics)["stream_nb_checkpoint_last_success_timestamp_seconds"]
    metrics.record_restored_checkpoint(last - 30)
    assert scrape(metrics)["stream_nb_checkpoint_last_success_timestamp_seconds"] == last
    for bad in (0, -5.0, float("nan"), float("inf"), True, "now"):
        with pytest.raises(ConfigError, match="created must be a positive, finite Unix time"):
            metrics.record_restored_checkpoint(bad)  # type: ignore[arg-type]


def test_a_snapshot_without_its_time_still_restores(tmp_path: Path) -> None:
    """``created`` is informational: a snapshot that lacks it (or holds nonsense) restores,
    and the last checkpoint time is then left alone."""
    sink = MemorySink()
    first = Engine(
        CategoricalNB(), ListSource([EVENT] * 3), sink, checkpointer=Checkpointer(tmp_path)
    )
    first.run()
    checkpointer = Checkpointer(tmp_path)
    _, body = checkpointer.latest()  # type: ignore[misc]
    body["created"] = "yesterday"
    checkpointer.write(body)
    metrics = EngineMetrics()
    engine = Engine(
        CategoricalNB(),
        ListSource([EVENT] * 3),
        sink,
        checkpointer=Checkpointer(tmp_path),
        metrics=metrics,
    )
    assert engine.restore() and engine.learner.n_learned == 3
    assert scrape(metrics)["stream_nb_checkpoint_last_success_timestamp_seconds"] == 0


# ---------------------------------------------------------------------- read at scrape time
class GatedSource(Source):
    """Delivers one event, then idles; while the gate is closed, ``next_batch`` blocks
    (a client call that hangs). ``ready`` is whatever the test sets."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.open.set()
        self.blocked = threading.Event()
        self.done = False
        self.sent = False
        self.connected = True

    def next_batch(self, max_records: int, timeout: float) -> list[Record]:
        if not self.open.is_set():
            self.blocked.set()
            self.open.wait()
        if not self.sent:
            self.sent = True
            return [Record(EVENT, {"index": 0})]
        time.sleep(min(timeout, 0.02))
        return []

    @property
    def ready(self) -> bool:
        return self.connected

    @property
    def exhausted(self) -> bool:
        return self.done

    def position(self) -> dict:
        return {"index": 1 if self.sent else 0}

    def close(self) -> None:
        pass


def test_readiness_and_progress_age_are_read_at_scrape_time() -> None:
    """The gauges follow the engine while its loop idles, while it is blocked inside its
    source (the scrape is answered by the server's thread), and after it resumes."""
    source = GatedSource()
    metrics = EngineMetrics()
    engine = Engine(CategoricalNB(), source, MemorySink(), metrics=metrics, poll_timeout=0.05)
    runner = threading.Thread(target=engine.run, daemon=True)
    try:
        runner.start()
        wait_until(lambda: engine.learner.n_learned == 1, "the first event")
        values = scrape(metrics)
        assert values["stream_nb_ready"] == 1.0
        assert 0 <= values["stream_nb_progress_age_seconds"] < 30
        source.connected = False
        assert scrape(metrics)["stream_nb_ready"] == 0.0
        source.connected = True
        source.open.clear()
        assert source.blocked.wait(30)
        time.sleep(1.0)
        stuck = scrape(metrics)
        assert stuck["stream_nb_progress_age_seconds"] >= 1.0
        assert stuck["stream_nb_ready"] == 1.0  # readiness keeps its own meaning
        later = scrape(metrics)["stream_nb_progress_age_seconds"]
        assert later >= stuck["stream_nb_progress_age_seconds"]  # still growing
        source.open.set()
        wait_until(
            lambda: scrape(metrics)["stream_nb_progress_age_seconds"] < 1.0, "the loop to resume"
        )
    finally:
        source.open.set()
        source.done = True
        runner.join(30)
    assert not runner.is_alive()


def test_a_failing_callback_never_fails_the_scrape() -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    metrics = EngineMetrics()
    metrics.watch(ready=broken, progress_age=broken, backlog_bytes=broken)  # type: ignore[arg-type]
    values = scrape(metrics)
    assert values["stream_nb_ready"] == 0.0  # as /readyz: a failing check is "not ready"
    assert "stream_nb_progress_age_seconds" not in values
    assert "stream_nb_source_backlog_bytes" not in values
    assert values["stream_nb_events_consumed_total"] == 0  # the rest is served


def test_without_an_engine_the_scrape_time_gauges_have_no_sample() -> None:
    values = scrape(EngineMetrics())
    for name in (
        "stream_nb_ready",
        "stream_nb_progress_age_seconds",
        "stream_nb_source_backlog_bytes",
    ):
        assert name not in values


def test_a_file_sources_backlog_is_read_at_scrape_time(tmp_path: Path) -> None:
    """Bytes after what the source handed out: all of the file at first, what is left
    after part of it was processed, and what was appended since, without the loop
    running (it is read at the scrape, not per batch)."""
    path = tmp_path / "events.jsonl"
    line = EVENT + b"\n"
    path.write_bytes(line * 10)
    metrics = EngineMetrics()
    source = FileSource(path, follow=True)
    engine = Engine(CategoricalNB(), source, MemorySink(), metrics=metrics, batch_size=4)
    assert scrape(metrics)["stream_nb_source_backlog_bytes"] == 10 * len(line)
    engine.run(max_events=4)
    assert engine.consumed == 4
    assert scrape(metrics)["stream_nb_source_backlog_bytes"] == 6 * len(line)
    with open(path, "ab") as f:
        f.write(line * 3 + b'{"x": {"f"')  # three lines, and the start of a fourth
    assert scrape(metrics)["stream_nb_source_backlog_bytes"] == 9 * len(line) + 10
    engine.run(max_events=9)
    # the start of the last line was read and waits for its newline: nothing to process
    assert engine.consumed == 13
    assert scrape(metrics)["stream_nb_source_backlog_bytes"] == 0
    with open(path, "ab") as f:
        f.write(b': "b"}, "y": 2}\n')
    assert scrape(metrics)["stream_nb_source_backlog_bytes"] == len(b': "b"}, "y": 2}\n')
    source.close()
    assert "stream_nb_source_backlog_bytes" not in scrape(metrics)


def test_a_fifo_or_a_list_source_has_no_backlog(tmp_path: Path) -> None:
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # so that opening it to read returns
    try:
        source = FileSource(fifo, follow=True)
        metrics = EngineMetrics()
        Engine(CategoricalNB(), source, MemorySink(), metrics=metrics)
        assert "stream_nb_source_backlog_bytes" not in scrape(metrics)
        source.close()
    finally:
        os.close(writer)
    metrics = EngineMetrics()
    Engine(CategoricalNB(), ListSource([EVENT]), MemorySink(), metrics=metrics)
    assert "stream_nb_source_backlog_bytes" not in scrape(metrics)
