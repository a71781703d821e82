"""Every ``stream-nb`` command turns hostile input into one line and a non-zero exit, never a
traceback: run, eval, inspect, merge and demo in real processes."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from stream_nb import CategoricalNB, GaussianNB
from stream_nb.engine.checkpoint import encode_snapshot

EXE = shutil.which("stream-nb") or str(Path(sys.executable).parent / "stream-nb")


def cli(*args, stdin=b""):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_NB_")}
    return subprocess.run(
        [EXE, *map(str, args)], input=stdin, capture_output=True, env=env, timeout=120
    )


def failed(proc, *fragments, code=1):
    """The process exited with ``code`` and said so in one line holding every fragment."""
    err = proc.stderr.decode()
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    # (argparse's usage block, printed before its one error line, does not count)
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("usage:", " "))]
    hits = [line for line in lines if all(f in line for f in fragments)]
    assert len(hits) == 1, (fragments, err)
    return hits[0]


def _model(cls=CategoricalNB, n=20):
    model = cls()
    for i in range(n):
        model.learn_one({"a": float(i % 3)} if cls is GaussianNB else {"a": str(i % 3)}, i % 2)
    return model


def _snapshot(path, **changes):
    body = {
        "format": "stream-nb/engine",
        "created": 0.0,
        "learner": _model().to_state(),
        "source": None,
        "sink": None,
        "dead_letters": None,
        "evaluator": None,
        "delayed": None,
        "counters": None,
        "extra": {},
    }
    body.update(changes)
    for key in [k for k, v in changes.items() if v is ...]:
        del body[key]
    path.write_bytes(encode_snapshot(body))
    return path


@pytest.fixture
def events(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(b'{"x": {"a": "%d"}, "y": %d}\n' % (i % 3, i % 2) for i in range(30)))
    return path


# ---------------------------------------------------------------------- run
def test_run_initial_model_without_a_learner_or_with_a_wrong_format(tmp_path, events):
    no_learner = _snapshot(tmp_path / "a.snap", learner=...)
    proc = cli("run", "--model", "CategoricalNB", "--initial-model", no_learner, "--source", events)
    failed(proc, "--initial-model", "a.snap", "has no 'learner' state", code=2)
    wrong = _snapshot(tmp_path / "b.snap", format="stream-nb/engine-v9")
    proc = cli("run", "--model", "CategoricalNB", "--initial-model", wrong, "--source", events)
    failed(proc, "--initial-model", "b.snap", "engine state format 'stream-nb/engine-v9'", code=2)
    bad_state = _snapshot(tmp_path / "c.snap", learner={"learner": "CategoricalNB"})
    proc = cli("run", "--model", "CategoricalNB", "--initial-model", bad_state, "--source", events)
    failed(proc, "--initial-model", "c.snap", "invalid learner state", code=2)
    # another learner class, named by its class whatever parameters --model gives
    good = _snapshot(tmp_path / "d.snap")
    spec = 'GaussianNB:{"var_smoothing": 1e-6}'
    proc = cli("run", "--model", spec, "--initial-model", good, "--source", events)
    message = "--initial-model holds a CategoricalNB, not a GaussianNB; use --model CategoricalNB"
    failed(proc, message, code=2)


def test_run_port_in_use_names_the_flag(tmp_path, events):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = cli("run", "--source", events, "--metrics-address", f"127.0.0.1:{port}")
    failed(proc, f"cannot serve metrics on 127.0.0.1:{port}", "--metrics-address")


def test_run_hostile_paths(tmp_path, events):
    failed(cli("run", "--source", tmp_path / "missing.jsonl"), "cannot open source file")
    afile = tmp_path / "afile"
    afile.write_bytes(b"")
    proc = cli("run", "--source", events, "--checkpoint-dir", afile / "ck")
    failed(proc, "cannot create checkpoint directory")
    proc = cli("run", "--source", events, "--report", tmp_path / "no" / "such" / "report.json")
    failed(proc, "report.json")
    failed(cli("run", "--source", events, "--sink", tmp_path / "no" / "out.jsonl"), "sink file")
    proc = cli("run", "--source", events, "--reset-state")
    failed(proc, "--reset-state needs --checkpoint-dir", code=2)


# ---------------------------------------------------------------------- eval
def test_eval_hostile_inputs(tmp_path, events):
    proc = cli("eval", "--input", events, "--curve", tmp_path / "no" / "curve.csv")
    failed(proc, "curve.csv")
    failed(cli("eval", "--input", tmp_path / "missing.jsonl"), "--input", code=2)
    failed(cli("eval", "--input", events, "--model", "NoSuchNB"), "unknown learner", code=2)


def test_run_and_eval_refuse_a_bad_loss_matrix_the_same_way(events):
    """A usage error (exit code 2) naming the flag and the entry, from both commands."""
    for value in ('{"a": {"b": "x"}}', '{"a": {"b": 1e999}}', '{"a": 3}', "[[1, 2]]"):
        run = cli("run", "--source", events, "--loss-matrix", value)
        evaluate = cli("eval", "--source", events, "--loss-matrix", value)
        message = failed(run, "--loss-matrix", code=2).partition("error: ")[2]
        assert failed(evaluate, "--loss-matrix", code=2).partition("error: ")[2] == message


# ---------------------------------------------------------------------- inspect
def test_inspect_hostile_snapshots(tmp_path):
    failed(cli("inspect", "--snapshot", _snapshot(tmp_path / "a.snap", learner=...)), "'learner'")
    wrong = _snapshot(tmp_path / "b.snap", format="something/else")
    failed(cli("inspect", "--snapshot", wrong), "engine state format 'something/else'")
    state = _model().to_state()
    state["stats"]["class_weight"][0][1] = -1.0  # a negative class weight
    negative = _snapshot(tmp_path / "c.snap", learner=state)
    failed(cli("inspect", "--snapshot", negative), "c.snap")
    empty = tmp_path / "empty"
    empty.mkdir()
    failed(cli("inspect", "--snapshot", empty), "no valid snapshot in directory")
    failed(cli("inspect", "--snapshot", tmp_path / "missing.snap"), "cannot read snapshot")


# ---------------------------------------------------------------------- merge
def test_merge_hostile_inputs(tmp_path):
    good = _snapshot(tmp_path / "good.snap")
    proc = cli("merge", good, good, "-o", tmp_path / "no" / "such" / "merged.snap")
    failed(proc, "merged.snap", "does not exist; create it first")
    assert not (tmp_path / "no").exists()
    proc = cli("merge", good, _snapshot(tmp_path / "a.snap", learner=...), "-o", tmp_path / "m")
    failed(proc, "a.snap", "'learner'")
    other = _snapshot(tmp_path / "g.snap", learner=_model(GaussianNB).to_state())
    failed(cli("merge", good, other, "-o", tmp_path / "m"), "g.snap", "cannot merge a GaussianNB")
    wrong = _snapshot(tmp_path / "w.snap", format=None)
    failed(cli("merge", good, wrong, "-o", tmp_path / "m"), "w.snap", "engine state format None")
    assert not (tmp_path / "m").exists()
    ok = cli("merge", good, good, "-o", tmp_path / "m")
    assert ok.returncode == 0 and orjson.loads(ok.stdout)["n_learned"] == 40


# ---------------------------------------------------------------------- demo
def test_demo_hostile_inputs():
    failed(cli("demo", "--stream", "nosuch"), "--stream", code=2)
    failed(cli("demo", "-n", "-5"), "expected an integer >= 0", code=2)
    with subprocess.Popen(
        [EXE, "demo", "-n", "200000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout.read(100)
        proc.stdout.close()  # a closed pipe ('| head')
        err = proc.stderr.read().decode()
        assert proc.wait(60) == 0 and "Traceback" not in err
