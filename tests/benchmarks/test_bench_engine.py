"""Smoke test of benchmarks/bench_engine.py: it runs end to end on a tiny input (no timing
assertions; the figures belong to the benchmark's own results)."""

from __future__ import annotations

import json

from benchmarks import bench_engine


def test_bench_engine_runs_and_writes_results(tmp_path, capsys):
    assert bench_engine.main(["--events", "300", "--repeats", "1", "--output", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "engine.json").read_text())
    assert result["events"] == 300 and len(result["rows"]) == 6
    assert all(row["events_per_s_cpu"] > 0 for row in result["rows"])
    assert "ceiling" in (tmp_path / "engine.md").read_text()
    assert "target 35%" in capsys.readouterr().out
