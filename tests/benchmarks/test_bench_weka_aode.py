"""Smoke test of ``python -m benchmarks.bench_weka_aode`` (Weka from Maven, a JVM, a few
events; no timing assertions)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.bench_weka_aode import all_seen_at, led_events, main, write_arff


def test_arff_holds_the_same_events(tmp_path: Path) -> None:
    events = led_events(50)
    write_arff(events, tmp_path / "e.arff")
    lines = (tmp_path / "e.arff").read_text().splitlines()
    data = lines[lines.index("@data") + 1 :]
    assert len(data) == 50
    x, y = events[7]
    assert data[7].split(",") == [*x.values(), str(y)]
    assert 0 < all_seen_at(events) < 50


def test_bench_weka_aode_writes_results(tmp_path: Path) -> None:
    assert main(["--quick", f"--out={tmp_path}"]) == 0
    payload = json.loads((tmp_path / "weka_aode.json").read_text())
    (turn,) = payload["turns"]
    for who in ("weka", "stream-nb"):
        assert turn[who]["events"] == payload["events"] == 300
        assert turn[who]["events_per_cpu_s"] > 0
        assert 0.0 <= payload["accuracy"][who] <= 1.0
    assert payload["median_ratio"] == turn["ratio"] > 0
    # the two AODEs give the same probabilities once every value has been seen
    agreement = payload["agreement"]
    assert agreement["events_compared"] > 200 and agreement["max_abs_diff"] < 1e-9
    assert "| 1 |" in (tmp_path / "weka_aode.md").read_text()
