"""Smoke test of benchmarks/bench_engine.py: it runs end to end on tiny streams, for every
learner family (no timing assertions; the figures belong to the benchmark's own results)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import bench_engine


def test_bench_engine_runs_every_family_and_writes_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plot = tmp_path / "engine.png"
    argv = ["--events", "400", "--turns", "1", "--output", str(tmp_path), "--plot", str(plot)]
    assert bench_engine.main(argv) == 0
    result = json.loads((tmp_path / "engine.json").read_text())
    rows = {row["model"]: row for row in result["families"]}
    assert list(rows) == [family.name for family in bench_engine.FAMILIES]
    assert "NaiveBayes, numeric=bins" in rows and "CategoricalNB, half_life=10000" in rows
    assert {row["stream"] for row in rows.values()} == {
        "agrawal",
        "agrawal, nominal=False",
        "categorical",
        "zipf_text",
    }
    assert rows["CategoricalNB"]["events"] == 400 and rows["AODE"]["events"] == 40
    for row in rows.values():
        assert row["run_events_per_cpu_s"]["median"] > 0
        assert len(row["turn_ratios_cpu"]) == 1
        assert row["ratio_to_ceiling_cpu"]["best"] == row["turn_ratios_cpu"][0]
    assert result["breakdown"] == []
    table = (tmp_path / "engine.md").read_text()
    assert "| CategoricalNB | categorical | 400 |" in table and "| 30%" in table
    assert "| CategoricalNB, half_life=10000 | categorical | 400 |" in table and "| — |" in table
    assert table in capsys.readouterr().out
    assert plot.stat().st_size > 0


def test_bench_engine_breakdown_for_one_family(tmp_path: Path) -> None:
    argv = ["--events", "300", "--turns", "1", "--repeats", "1", "--model", "CategoricalNB"]
    argv += ["--breakdown", "--output", str(tmp_path), "--plot", ""]
    assert bench_engine.main(argv) == 0
    result = json.loads((tmp_path / "engine.json").read_text())
    assert [row["model"] for row in result["families"]] == [
        "CategoricalNB",
        "CategoricalNB, half_life=10000",
    ]
    assert len(result["breakdown"]) == 8
    assert all(row["events_per_s_cpu"] > 0 for row in result["breakdown"])
    assert not (tmp_path / "engine.png").exists()


def test_bench_engine_with_a_baseline_checkout(tmp_path: Path) -> None:
    """The same checkout as its own baseline: both run in every turn, side by side."""
    here = Path(bench_engine.__file__).resolve().parents[1]
    argv = ["--events", "300", "--turns", "1", "--model", "GaussianNB", "--plot", ""]
    argv += ["--output", str(tmp_path), "--baseline", str(here)]
    assert bench_engine.main(argv) == 0
    result = json.loads((tmp_path / "engine.json").read_text())
    (row,) = result["families"]
    assert row["baseline"]["run_events_per_cpu_s_median"] > 0
    assert row["baseline"]["speedup_median"] > 0
    assert "this checkout's speed-up" in (tmp_path / "engine.md").read_text()
