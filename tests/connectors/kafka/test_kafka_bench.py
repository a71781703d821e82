"""Smoke test of benchmarks/bench_kafka.py on the test broker: it runs end to end on a tiny
input (no timing assertions; the figures belong to the benchmark's own results)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import bench_kafka


def test_bench_kafka_runs_and_writes_results(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both clients' raw loops and daemons, and the model-sync pair, one turn each (the
    benchmark sets each scenario's client itself)."""
    monkeypatch.setenv("STREAM_NB_KAFKA_BOOTSTRAP", kafka_bootstrap)
    argv = ["--events", "300", "--repeats", "1", "--sync", "--output", str(tmp_path)]
    assert bench_kafka.main(argv) == 0
    result = json.loads((tmp_path / "kafka.json").read_text())
    rows = result["rows"]
    assert result["events"] == 300 and [r["workers"] for r in rows] == [1] * 6 + [2]
    assert [(r["client"], r["kind"]) for r in rows[:6]] == [
        (client, kind)
        for client in ("kafka-python", "confluent")
        for kind in ("raw", "daemon", "daemon")
    ]
    assert all(len(row["runs"]) == 1 and row["runs"][0]["events_per_s"] > 0 for row in rows)
    daemons = [r for r in rows if r["kind"] == "daemon" and r["workers"] == 1]
    assert all("share_events_per_s_cpu_median" in r for r in daemons)
    assert "2 daemons in one group" in (tmp_path / "kafka.md").read_text()
