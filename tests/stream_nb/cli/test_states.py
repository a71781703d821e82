"""Untrusted snapshots in every CLI command: a clear error naming the field, never a
traceback (real ``stream-nb`` subprocesses)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_nb import CategoricalNB
from stream_nb.engine.checkpoint import encode_snapshot

EXE = str(Path(sys.executable).with_name("stream-nb"))
ENV = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_NB_")}


def run(*args: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [EXE, *map(str, args)], capture_output=True, env=ENV, timeout=120, check=False
    )


def snapshot(path: Path, learner_state: Any, *, drop_learner: bool = False) -> Path:
    body: dict[str, Any] = {
        "format": "stream-nb/engine",
        "created": 0.0,
        "learner": learner_state,
        "source": None,
        "sink": None,
        "dead_letters": None,
        "evaluator": None,
        "delayed": None,
        "counters": None,
        "extra": {},
    }
    if drop_learner:
        del body["learner"]
    path.write_bytes(encode_snapshot(body))
    return path


def good_state() -> dict[str, Any]:
    model = CategoricalNB()
    for i in range(20):
        model.learn_one({"f": str(i % 3)}, "ab"[i % 2])
    return orjson.loads(orjson.dumps(model.to_state()))


def corrupted(where: tuple[Any, ...], value: Any) -> dict[str, Any]:
    state = good_state()
    node: Any = state
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    return state


CASES = [
    pytest.param(
        corrupted(("stats", "class_weight", 0, 1), -1.0), r"stats.class_weight\[", id="neg"
    ),
    pytest.param(corrupted(("n_learned",), -7), r"n_learned: must be a finite integer", id="n"),
    pytest.param(corrupted(("stats", "total_weight"), 1e308), r"stats.total_weight", id="total"),
    pytest.param(
        {**good_state(), "learner": "BernoulliNB"}, r"malformed BernoulliNB state", id="type"
    ),
]


@pytest.mark.parametrize(("state", "match"), CASES)
def test_inspect_names_the_bad_field(tmp_path: Path, state: Any, match: str) -> None:
    proc = run("inspect", "--snapshot", snapshot(tmp_path / "s.json", state))
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert re.search(match, err), err


@pytest.mark.parametrize(("state", "match"), CASES)
def test_merge_names_the_bad_field(tmp_path: Path, state: Any, match: str) -> None:
    good = snapshot(tmp_path / "good.json", good_state())
    bad = snapshot(tmp_path / "bad.json", state)
    proc = run("merge", good, bad, "-o", tmp_path / "out.json")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert str(bad) in err
    assert not (tmp_path / "out.json").exists()


def test_a_snapshot_without_a_learner_is_an_error_in_every_command(tmp_path: Path) -> None:
    bare = snapshot(tmp_path / "bare.json", None, drop_learner=True)
    for args in (
        ("inspect", "--snapshot", bare),
        ("merge", bare, "-o", tmp_path / "out.json"),
    ):
        proc = run(*args)
        err = proc.stderr.decode()
        assert proc.returncode == 1 and "Traceback" not in err, err
        assert "the snapshot has no 'learner' state object" in err
    (tmp_path / "in.jsonl").write_bytes(b'{"x": {"f": "a"}, "y": "a"}\n')
    proc = run(
        "run",
        "--model",
        "CategoricalNB",
        "--initial-model",
        bare,
        "--source",
        tmp_path / "in.jsonl",
        "--sink",
        tmp_path / "out.jsonl",
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert "--initial-model" in err and "the snapshot has no 'learner' state object" in err


def test_initial_model_with_a_corrupt_state_is_refused(tmp_path: Path) -> None:
    bad = snapshot(tmp_path / "bad.json", corrupted(("stats", "class_weight", 0, 1), -1.0))
    (tmp_path / "in.jsonl").write_bytes(b'{"x": {"f": "a"}, "y": "a"}\n')
    proc = run(
        "run",
        "--model",
        "CategoricalNB",
        "--initial-model",
        bad,
        "--source",
        tmp_path / "in.jsonl",
        "--sink",
        tmp_path / "out.jsonl",
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert "must be finite and ≥ 0, got -1.0" in err


def test_run_applies_and_lifts_the_bounds(tmp_path: Path) -> None:
    lines = b"".join(
        orjson.dumps({"x": {f"w{i}": 1, "common": 1}, "y": i % 2}) + b"\n" for i in range(50)
    )
    (tmp_path / "in.jsonl").write_bytes(lines)
    for flags, vocabulary in (
        (("--max-vocabulary", "10"), 11),  # ten tokens and the overflow token
        (("--max-vocabulary", "0"), 51),
        (("--param", "max_vocabulary=20"), 21),
    ):
        ck = tmp_path / f"ck{vocabulary}"
        proc = run(
            "run",
            "--model",
            "MultinomialNB",
            *flags,
            "--source",
            tmp_path / "in.jsonl",
            "--sink",
            tmp_path / "out.jsonl",
            "--checkpoint-dir",
            ck,
            "--reset-state",  # each run starts a new model over the same output file
        )
        assert proc.returncode == 0, proc.stderr.decode()
        proc = run("inspect", "--snapshot", ck)
        report = orjson.loads(proc.stdout)
        assert report["size"]["features"] == vocabulary
        assert report["params"]["max_classes"] == 10_000
        assert report["learner"] == "MultinomialNB"
