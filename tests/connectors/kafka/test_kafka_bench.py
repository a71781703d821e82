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
    monkeypatch.setenv("STREAM_NB_KAFKA_BOOTSTRAP", kafka_bootstrap)
    assert bench_kafka.main(["--events", "300", "--output", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "kafka.json").read_text())
    assert result["events"] == 300 and [r["workers"] for r in result["rows"]] == [1, 1, 2]
    assert all(row["events_per_s"] > 0 for row in result["rows"])
    assert "2 daemons in one group" in (tmp_path / "kafka.md").read_text()
