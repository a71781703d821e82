"""Smoke test of the documented benchmark command on a few hundred events (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_learners_writes_the_table(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "benchmarks.bench_learners",
        "--agrawal-events=300",
        "--text-events=200",
        "--text-slow-events=50",
        "--categorical-events=200",
        "--categorical-slow-events=50",
        "--accuracy-events=100",
        "--repeats=1",
        f"--out={tmp_path}",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "learners.md").read_text()
    assert table == done.stdout
    for learner in ("GaussianNB", "MultinomialNB", "BernoulliNB", "ComplementNB", "CategoricalNB"):
        assert f"| {learner} |" in table
    assert "| learner | stream | stream-nb events/s |" in table
    assert "NOT measured here" in table  # MOA's figure is the quoted reference without --moa-jar
    results = json.loads((tmp_path / "learners.json").read_text())
    assert results["machine"]["cores"] >= 1
    by_name = {row["learner"]: row for row in results["rows"]}
    multinomial = by_name["MultinomialNB"]
    assert multinomial["events_ours"] == 200 and multinomial["events_baseline"] == 200
    assert by_name["BernoulliNB"]["events_baseline"] == 50
    assert multinomial["ours_per_s"] > 0 and multinomial["baseline_per_s"] > 0
    assert multinomial["ratio"] == multinomial["ours_per_s"] / multinomial["baseline_per_s"]


def test_bench_learners_rejects_bad_sizes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_learners", "--repeats=0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--repeats must be at least 1" in done.stderr


def test_bench_learners_moa_without_a_jar_names_the_fix(tmp_path: Path) -> None:
    # A capymoa package without its jar shadows the installed one, so no moa.jar is found.
    (tmp_path / "capymoa").mkdir()
    (tmp_path / "capymoa" / "__init__.py").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "MOA_JAR"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_learners", "--moa"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 2
    assert "--moa needs moa.jar: pass --moa-jar PATH, set MOA_JAR" in done.stderr


def test_bench_learners_finds_the_jar_of_the_installed_capymoa() -> None:
    from benchmarks.bench_learners import find_capymoa_jar

    jar = find_capymoa_jar()
    assert jar is not None and jar.endswith("moa.jar") and Path(jar).is_file()
