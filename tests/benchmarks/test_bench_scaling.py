"""Smoke test of ``python -m benchmarks.bench_scaling`` on small models (no timing assertions)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.bench_scaling import main


def test_bench_scaling_writes_results(tmp_path: Path) -> None:
    assert (
        main(["--features=300", "--snapshot-features=500", "--repeats=1", f"--out={tmp_path}"]) == 0
    )
    payload = json.loads((tmp_path / "scaling.json").read_text())
    rows = {row["learner"]: row for row in payload["rows"]}
    assert set(rows) == {"GaussianNB", "NaiveBayes", "CategoricalNB"}
    for row in rows.values():
        assert row["features"] == 300 and row["snapshot_features"] == 500
        assert row["snapshot_bytes"] > 0 and row["restore_s"] >= 0 and row["inspect_wall_s"] > 0
    table = (tmp_path / "scaling.md").read_text()
    assert "| GaussianNB | N = 300:" in table and "M = 500" in table
