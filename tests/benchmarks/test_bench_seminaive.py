"""Smoke test of ``python -m benchmarks.bench_seminaive`` on a few events (no timing assertions)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.bench_seminaive import main


def test_bench_seminaive_writes_results(tmp_path: Path) -> None:
    assert main(["--quick", "--profile", f"--out={tmp_path}"]) == 0
    payload = json.loads((tmp_path / "seminaive.json").read_text())
    learners = {row["learner"] for row in payload["rows"]}
    assert {"AODE", "TAN", "KDB(k=2)"} <= learners
    streams = {(row["stream"], row["features"]) for row in payload["rows"]}
    assert {("led24", 24), ("tree-d10", 10), ("tree-d20", 20), ("tree-d40", 40)} <= streams
    for row in payload["rows"]:
        assert (
            row["events_per_s"] > 0
            and row["events_per_cpu_s"] > 0
            and 0.0 <= row["accuracy"] <= 1.0
        )
        assert row["stored_counts"] > 0 and row["tracemalloc_peak_bytes"] > 0
    table = (tmp_path / "seminaive.md").read_text()
    assert "| led24 | 24 |" in table and "seminaive/_dense.py" in table  # the AODE profile


def test_bench_seminaive_engine_writes_results(tmp_path: Path) -> None:
    assert main(["--engine", "--quick", "--models", "AODE;TAN", f"--out={tmp_path}"]) == 0
    payload = json.loads((tmp_path / "seminaive_engine.json").read_text())
    assert [(r["model"], r["checkout"]) for r in payload["rows"]] == [
        ("AODE", "this"),
        ("TAN", "this"),
    ]
    for row in payload["rows"]:
        assert row["events_per_cpu_s"] > 0 and row["share_best"] > 0
        assert row["startup_cpu_seconds"] > 0 and row["share_less_startup_median"] > 0
        assert len(row["cpu_seconds"]) == len(row["ceiling_cpu_seconds"]) == 1
    assert "| AODE | this |" in (tmp_path / "seminaive_engine.md").read_text()
