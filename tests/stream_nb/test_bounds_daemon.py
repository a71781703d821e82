"""The daemon stays bounded on hostile cardinality (real ``stream-nb run`` subprocesses).

Bounds asserted here are those the README documents (Learners → memory bounds): with the
daemon's default bounds, 200,000 events whose one feature takes a new value each, or
which each carry a feature name never seen, keep the process under 100 MB of peak RSS
and the snapshot under 2 MB. The same runs without bounds (measured: ~200 MB, 10 MB)
are not repeated here.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from stream_nb import Learner
from stream_nb.engine.checkpoint import read_snapshot

EXE = str(Path(sys.executable).with_name("stream-nb"))
EVENTS = 200_000
MAX_RSS_MB = 100
MAX_SNAPSHOT_BYTES = 2_000_000

#: Runs one command and prints its peak RSS (kB): the wrapper's only child is the daemon.
_MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.stderr.write(done.stderr.decode(errors="replace"))
"""


def uuid(rng: random.Random) -> str:
    return "%08x-%04x-%04x-%04x-%012x" % (  # noqa: UP031
        rng.getrandbits(32),
        rng.getrandbits(16),
        rng.getrandbits(16),
        rng.getrandbits(16),
        rng.getrandbits(48),
    )


def run_daemon(tmp_path: Path, lines: list[bytes], *flags: str) -> tuple[int, dict]:
    """Peak RSS (bytes) of a daemon over ``lines``, and its last snapshot's body."""
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(lines))
    env_free = {k: v for k, v in __import__("os").environ.items() if not k.startswith("STREAM_NB_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _MEASURE,
            EXE,
            "run",
            "--source",
            str(source),
            "--sink",
            str(tmp_path / "out.jsonl"),
            "--checkpoint-dir",
            str(tmp_path / "ck"),
            *flags,
        ],
        capture_output=True,
        env=env_free,
        timeout=600,
    )
    code, rss_kb = proc.stdout.split()
    assert code == b"0", proc.stderr.decode()[-2000:]
    out = (tmp_path / "out.jsonl").read_bytes().count(b"\n")
    assert out == len(lines)
    return int(rss_kb) * 1024, read_snapshot(tmp_path / "ck")


def snapshot_bytes(tmp_path: Path) -> int:
    return max(p.stat().st_size for p in (tmp_path / "ck").glob("snapshot-*.json"))


def test_one_feature_with_200k_unique_values_stays_bounded(tmp_path: Path) -> None:
    rng = random.Random(7)
    lines = []
    for i in range(EVENTS):
        y = i % 3
        x = {"id": uuid(rng), "a": rng.gauss(y, 1.0), "c": "abc"[y]}
        lines.append(orjson.dumps({"x": x, "y": y}) + b"\n")
    rss, body = run_daemon(tmp_path, lines)  # NaiveBayes, the daemon's default bounds
    model = Learner.from_state(body["learner"])
    assert model.get_params()["max_values_per_feature"] == 10_000
    assert len(model.categorical.counts["id"]) == 10_001  # type: ignore[attr-defined]
    assert model.n_learned == EVENTS
    assert rss < MAX_RSS_MB * 2**20, f"peak RSS {rss / 2**20:.0f} MB"
    assert snapshot_bytes(tmp_path) < MAX_SNAPSHOT_BYTES


@pytest.mark.parametrize("model", ["NaiveBayes", "CategoricalNB"])
def test_a_new_feature_name_in_every_event_stays_bounded(tmp_path: Path, model: str) -> None:
    rng = random.Random(8)
    lines = []
    for i in range(EVENTS):
        y = i % 3
        value = rng.random() if model == "NaiveBayes" else "v"
        x = {f"key-{i:07d}": value, "c": "abc"[y]}
        lines.append(orjson.dumps({"x": x, "y": y}) + b"\n")
    rss, body = run_daemon(tmp_path, lines, "--model", model)
    learner = Learner.from_state(body["learner"])
    assert learner.model_size()["features"] == 10_000
    assert learner.n_learned == EVENTS
    assert rss < MAX_RSS_MB * 2**20, f"peak RSS {rss / 2**20:.0f} MB"
    assert snapshot_bytes(tmp_path) < MAX_SNAPSHOT_BYTES
    # the last events are still predicted with the model (the known feature "c")
    last = json.loads((tmp_path / "out.jsonl").read_bytes().splitlines()[-1])
    assert last["y_pred"] == (EVENTS - 1) % 3


def test_a_new_class_beyond_max_classes_is_dead_lettered(tmp_path: Path) -> None:
    lines = [orjson.dumps({"x": {"c": str(i % 7)}, "y": i % 7}) + b"\n" for i in range(700)]
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(lines))
    proc = subprocess.run(
        [
            EXE,
            "run",
            "--model",
            "CategoricalNB",
            "--max-classes",
            "5",
            "--source",
            str(source),
            "--sink",
            str(tmp_path / "out.jsonl"),
            "--dead-letters",
            str(tmp_path / "dl.jsonl"),
        ],
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    letters = [json.loads(line) for line in (tmp_path / "dl.jsonl").read_bytes().splitlines()]
    assert len(letters) == 200  # labels 5 and 6
    assert {d["reason"] for d in letters} == {"too_many_classes"}
    assert "max_classes=5" in letters[0]["error"]
