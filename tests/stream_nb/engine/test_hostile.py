"""The daemon against hostile but plausible situations, in real ``stream-nb run`` processes on
files and stdin: two daemons on one checkpoint directory, snapshots that are invalid or gone,
output without a snapshot, integers beyond 64 bits with delayed labels, a last line without
a newline, 5,000 classes, a full disk; and a crash loop mixing kill -9, an extreme value, a
second instance and removed snapshots, which must end as an uninterrupted run does."""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from stream_nb import CategoricalNB, Learner
from stream_nb.cli import daemon_params
from stream_nb.datasets import agrawal, categorical_stream
from stream_nb.engine.checkpoint import Checkpointer, encode_snapshot

EXE = shutil.which("stream-nb") or str(Path(sys.executable).parent / "stream-nb")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_NB_")}
    env.update(extra)
    return env


def run(*args, stdin=b"", env=None, timeout=180, preexec_fn=None):
    return subprocess.run(
        [EXE, *map(str, args)],
        input=stdin,
        capture_output=True,
        env=_env(**(env or {})),
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


def start(*args, **kw):
    return subprocess.Popen([EXE, *map(str, args)], env=_env(), **kw)


def ok(proc):
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return proc


def refused(proc, *fragments):
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


def count_lines(path):
    try:
        return Path(path).read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _lock_holder(directory):
    """The pid written in a checkpoint directory's lock file (``None`` before any)."""
    try:
        return int((directory / "stream-nb.lock").read_text())
    except (FileNotFoundError, ValueError):
        return None


def categorical_lines(n, seed=5):
    return [orjson.dumps({**x, "y": y}) for x, y in categorical_stream(seed, n)]


def daemon(tmp, source, *extra, model="CategoricalNB"):
    return [
        "run",
        "--model",
        model,
        "--source",
        source,
        "--sink",
        tmp / "out.jsonl",
        "--dead-letters",
        tmp / "dead.jsonl",
        "--checkpoint-dir",
        tmp / "ck",
        *extra,
    ]


# ---------------------------------------------------------------------- one owner
def test_a_second_instance_exits_at_once_without_harming_the_first(tmp_path):
    source = tmp_path / "in.jsonl"
    lines = categorical_lines(3000)
    source.write_bytes(b"\n".join(lines[:1000]) + b"\n")
    first = start(
        *daemon(tmp_path, source, "--follow", "--checkpoint-interval", "0.2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: count_lines(tmp_path / "out.jsonl") == 1000)
        second = run(*daemon(tmp_path, source), timeout=30)
        refused(second, "is in use by another stream-nb run", f"(pid {first.pid})", "ck")
        # ... and a second one on stdin, with another output, is refused the same way
        other = tmp_path / "other"
        other.mkdir()
        third = run(
            "run", "--source", "-", "--sink", other / "out.jsonl", "--checkpoint-dir",
            tmp_path / "ck", stdin=lines[0] + b"\n", timeout=30,
        )  # fmt: skip
        refused(third, f"(pid {first.pid})")
        assert not (other / "out.jsonl").exists()
        with open(source, "ab") as f:
            f.write(b"\n".join(lines[1000:]) + b"\n")
        wait_for(lambda: count_lines(tmp_path / "out.jsonl") == 3000)
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err.decode()[-2000:]
    out = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [r["position"]["line"] for r in out] == list(range(1, 3001))
    assert (tmp_path / "ck" / "stream-nb.lock").read_text().strip() == str(first.pid)


# ---------------------------------------------------------------------- lost state
def test_every_snapshot_invalid_refuses_then_reset_state_starts_over(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(categorical_lines(2000)) + b"\n")
    args = daemon(tmp_path, source, "--checkpoint-every", "500")
    ok(run(*args))
    fresh = (tmp_path / "out.jsonl").read_bytes()
    ck = Checkpointer(tmp_path / "ck")
    names = [path.name for _, path in ck.snapshots()]
    for _, path in ck.snapshots():
        path.write_bytes(path.read_bytes()[:-3])
    err = refused(
        run(*args),
        "refusing to start a new model: 2 snapshot(s)",
        "none valid",
        "truncated write?",
        "bytes in",
        "--reset-state (STREAM_NB_RESET_STATE=1)",
    )
    assert len([line for line in err.splitlines() if "refusing" in line]) == 1
    assert (tmp_path / "out.jsonl").read_bytes() == fresh  # nothing appended, nothing cut
    ok(run(*args, "--reset-state"))
    assert (tmp_path / "out.jsonl").read_bytes() == fresh  # one record per line, again
    assert sorted(n for n in os.listdir(tmp_path / "ck") if n.endswith(".rejected")) == sorted(
        f"{n}.rejected" for n in names
    )


def test_deleted_snapshots_with_existing_output_refuse_then_reset_by_env(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(categorical_lines(800)) + b"\n")
    args = daemon(tmp_path, source)
    ok(run(*args))
    fresh = (tmp_path / "out.jsonl").read_bytes()
    for _, path in Checkpointer(tmp_path / "ck").snapshots():
        path.unlink()  # an emptied volume, a wrong mount, an over-eager cleanup
    refused(run(*args), "no snapshot in", "output already holds records", "--reset-state")
    assert (tmp_path / "out.jsonl").read_bytes() == fresh
    ok(run(*args, env={"STREAM_NB_RESET_STATE": "1"}))
    assert (tmp_path / "out.jsonl").read_bytes() == fresh


def test_an_invalid_newest_snapshot_falls_back_and_rereads_from_the_older_one(tmp_path):
    source = tmp_path / "in.jsonl"
    lines = categorical_lines(3000)
    source.write_bytes(b"\n".join(lines[:2000]) + b"\n")
    args = daemon(tmp_path, source, "--checkpoint-every", "400", "--batch-size", "100")
    ok(run(*args))
    ck = Checkpointer(tmp_path / "ck")
    (newest_id, newest_path), (older_id, _) = ck.snapshots()
    body = ck.read(newest_path)
    body["learner"]["stats"]["class_weight"][0][1] = None  # "statistic must be a finite number"
    newest_path.write_bytes(encode_snapshot(body))
    with open(source, "ab") as f:
        f.write(b"\n".join(lines[2000:]) + b"\n")
    proc = ok(run(*args))
    err = proc.stderr.decode()
    assert f"skipping invalid snapshot snapshot-{newest_id}.json" in err
    assert f"restoring the older snapshot {older_id}" in err
    assert (tmp_path / "ck" / f"snapshot-{newest_id}.json.rejected").exists()
    out = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [r["position"]["line"] for r in out] == list(range(1, 3001))
    model = CategoricalNB(**daemon_params(CategoricalNB))
    for line in lines:
        event = orjson.loads(line)
        model.learn_one({k: v for k, v in event.items() if k != "y"}, event["y"])
    assert Checkpointer(tmp_path / "ck").latest()[1]["learner"] == model.to_state()
    # a snapshot without its source position is invalid too
    newest_path = Checkpointer(tmp_path / "ck").snapshots()[0][1]
    body = Checkpointer(tmp_path / "ck").read(newest_path)
    del body["source"]
    newest_path.write_bytes(encode_snapshot(body))
    err = ok(run(*args)).stderr.decode()
    assert "no 'source' key" in err and "restoring the older snapshot" in err


# ---------------------------------------------------------------------- exact ids
def _big_id_lines():
    """Labels arrive later, by id; the ids differ only beyond 64 bits, one label is 2**70."""
    lines = []
    for _ in range(40):
        lines.append(json.dumps({"x": {"f": "u"}, "y": "u-class"}))
        lines.append(json.dumps({"x": {"f": "v"}, "y": 2**70}))
    lines.append('{"x": {"f": "u"}, "id": 18446744073709551617}')
    lines.append('{"x": {"f": "v"}, "id": 18446744073709551618}')
    lines.append('{"x": {"f": "v"}, "id": -18446744073709551618}')
    lines.append('{"id": 18446744073709551618, "y": 1180591620717411303424}')
    lines.append('{"id": -18446744073709551618, "y": 1180591620717411303424}')
    lines.append('{"id": 18446744073709551617, "y": "u-class"}')
    return [line.encode() for line in lines]


def _big_id_model():
    model = CategoricalNB(**daemon_params(CategoricalNB))
    for _ in range(40):
        model.learn_one({"f": "u"}, "u-class")
        model.learn_one({"f": "v"}, 2**70)
    model.learn_one({"f": "v"}, 2**70)
    model.learn_one({"f": "v"}, 2**70)
    model.learn_one({"f": "u"}, "u-class")
    return model


@pytest.mark.parametrize("via", ["stdin", "file, restarted while the ids wait"])
def test_ids_beyond_64_bits_keep_their_delayed_labels_apart(tmp_path, via):
    lines = _big_id_lines()
    common = ["--model", "CategoricalNB", "--delayed-labels", "--checkpoint-dir", tmp_path / "ck"]
    if via == "stdin":
        proc = ok(run("run", *common, stdin=b"\n".join(lines) + b"\n"))
        out = proc.stdout.splitlines()
    else:
        source = tmp_path / "in.jsonl"
        source.write_bytes(b"\n".join(lines) + b"\n")
        files = ["--source", source, "--sink", tmp_path / "out.jsonl"]
        ok(run("run", *common, *files, "--limit", "83"))  # the three ids wait in the cache
        body = Checkpointer(tmp_path / "ck").latest()[1]
        assert {e[0] for e in body["delayed"]["entries"]} == {
            18446744073709551617,
            18446744073709551618,
            -18446744073709551618,
        }
        ok(run("run", *common, *files))
        out = (tmp_path / "out.jsonl").read_bytes().splitlines()
    assert len(out) == 83
    assert out[-3].startswith(b'{"id":18446744073709551617,')
    assert out[-2].startswith(b'{"id":18446744073709551618,')
    assert out[-1].startswith(b'{"id":-18446744073709551618,')
    assert b'"y_true":1180591620717411303424' in out[1]
    final = Learner.from_state(Checkpointer(tmp_path / "ck").latest()[1]["learner"])
    assert final.to_state() == _big_id_model().to_state()
    assert final.predict_one({"f": "v"}) == 2**70


# ---------------------------------------------------------------------- files
def test_a_last_line_without_newline_is_one_event_and_never_two(tmp_path):
    source = tmp_path / "in.jsonl"
    lines = categorical_lines(300)
    source.write_bytes(b"\n".join(lines[:200]) + b"\n" + lines[200][:25])  # mid-write
    args = daemon(tmp_path, source)
    ok(run(*args))
    dead = [orjson.loads(line) for line in (tmp_path / "dead.jsonl").read_bytes().splitlines()]
    assert [(d["reason"], d["position"]["line"]) for d in dead] == [("invalid_json", 201)]
    with open(source, "ab") as f:
        f.write(lines[200][25:] + b"\n" + b"\n".join(lines[201:]) + b"\n")
    err = ok(run(*args)).stderr.decode()
    assert "line 201 of" in err and "appended to it since are skipped" in err
    out = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [r["position"]["line"] for r in out] == [*range(1, 201), *range(202, 301)]
    offsets = [0]
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len(line) + 1)
    assert [r["position"]["offset"] for r in out] == offsets[:200] + offsets[201:]
    assert len((tmp_path / "dead.jsonl").read_bytes().splitlines()) == 1  # no half line twice


def test_a_followed_file_written_in_pieces_gives_whole_events(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"")
    lines = categorical_lines(50)
    proc = start(
        *daemon(tmp_path, source, "--follow"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        for line in lines:
            for piece in (line[:7], line[7:], b"\n"):
                with open(source, "ab") as f:
                    f.write(piece)
                time.sleep(0.002)
        wait_for(lambda: count_lines(tmp_path / "out.jsonl") == 50)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert count_lines(tmp_path / "dead.jsonl") == 0


# ---------------------------------------------------------------------- many classes
#: Documented bound (README): a daemon with 5,000 classes and --top-k stays under it
#: (batches of 1,024 events × 5,000 classes as Python objects take about 800 MiB).
_MANY_CLASSES_MIB = 200


def test_5000_classes_with_top_k_stay_in_bounded_memory(tmp_path):
    rng = random.Random(4)
    source = tmp_path / "in.jsonl"
    with open(source, "wb") as f:
        for i in range(5500):
            y = i if i < 5000 else rng.randrange(5000)
            x = {"a": rng.gauss(y % 50, 1.0), "c": str(y % 13)}
            f.write(orjson.dumps({**x, "y": y}) + b"\n")
    # a fresh parent whose only child is the daemon: its RUSAGE_CHILDREN maximum is the
    # daemon's peak resident set (VmHWM)
    probe = (
        "import resource, subprocess, sys\n"
        "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
        "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    args = ["run", "--source", source, "--sink", tmp_path / "out.jsonl", "--top-k", "3"]
    proc = subprocess.run(
        [sys.executable, "-c", probe, EXE, *map(str, args), "--report", tmp_path / "r.json"],
        capture_output=True,
        env=_env(),
        timeout=600,
    )
    code, max_rss_kib = proc.stdout.split()
    assert code == b"0", proc.stderr.decode()[-2000:]
    assert int(max_rss_kib) < _MANY_CLASSES_MIB * 1024, int(max_rss_kib) // 1024
    tail = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert len(tail) == 5500 and all(len(r["log_proba"]) == 3 for r in tail[3:])


# ---------------------------------------------------------------------- full disk
def _file_size_limit(limit):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_snapshot_that_cannot_be_written_stops_cleanly_and_resumes(tmp_path):
    source = tmp_path / "in.jsonl"
    lines = [orjson.dumps({"x": {"id": f"value-{i}"}, "y": i % 3}) for i in range(3000)]
    source.write_bytes(b"\n".join(lines) + b"\n")
    args = [
        "run",
        "--model",
        "CategoricalNB",
        "--source",
        source,
        "--sink",
        "/dev/null",
        "--checkpoint-dir",
        tmp_path / "ck",
        "--checkpoint-every",
        "500",
        "--batch-size",
        "100",
    ]
    proc = run(*args, preexec_fn=_file_size_limit(64 << 10))  # snapshots outgrow 64 KiB
    err = refused(proc, "cannot write snapshot", "File too large")
    assert len([line for line in err.splitlines() if "cannot write snapshot" in line]) == 1
    ck = Checkpointer(tmp_path / "ck")
    assert not [n for n in os.listdir(tmp_path / "ck") if n.endswith(".tmp")]
    _, body = ck.latest()
    assert ck.corrupt == [] and 0 < body["learner"]["n_learned"] < 3000
    ok(run(*args))  # room again: resumes from the newest snapshot
    model = CategoricalNB(**daemon_params(CategoricalNB))
    for i in range(3000):
        model.learn_one({"id": f"value-{i}"}, i % 3)
    assert Checkpointer(tmp_path / "ck").latest()[1]["learner"] == model.to_state()


# ---------------------------------------------------------------------- crash loop
def _crash_loop_input(path):
    lines = [orjson.dumps({**x, "y": y}) for x, y in agrawal(11, 60_000)]
    for i in (1_234, 20_000, 47_001):
        lines[i] = b"{not json"
    extreme = orjson.loads(lines[42_000])
    extreme["salary"] = 1e200  # valid JSON, far beyond any salary
    lines[42_000] = orjson.dumps(extreme)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return len(lines)


def _outcome(directory, proc):
    ck = Checkpointer(directory / "ck").latest()
    return (
        proc.returncode,
        (directory / "out.jsonl").read_bytes(),
        (directory / "dead.jsonl").read_bytes(),
        None if ck is None else ck[1]["learner"],
    )


def test_crash_loop_ends_as_the_uninterrupted_run(tmp_path):
    """kill -9 at random moments, a second instance mid-run, the newest snapshot removed,
    every snapshot removed (refused, then --reset-state): the end is the uninterrupted
    run's, byte for byte, whatever the learners do with the extreme value."""
    source = tmp_path / "in.jsonl"
    n = _crash_loop_input(source)
    flags = ["--checkpoint-every", "2500", "--batch-size", "128", "--model", "NaiveBayes"]

    def args(directory):
        return [
            "run", "--source", source, "--sink", directory / "out.jsonl", "--dead-letters",
            directory / "dead.jsonl", "--checkpoint-dir", directory / "ck", *flags,
        ]  # fmt: skip

    whole = tmp_path / "whole"
    whole.mkdir()
    expected = _outcome(whole, run(*args(whole)))
    crashy = tmp_path / "crashy"
    crashy.mkdir()
    rng = random.Random(20261123)
    targets = sorted(rng.sample(range(2_000, n - 2_000), 9))
    kills = seconds = 0
    reset = False
    for step, target in enumerate(targets):
        extra = ["--reset-state"] if reset else []
        reset = False
        proc = start(*args(crashy), *extra, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while proc.poll() is None and count_lines(crashy / "out.jsonl") < target:
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.002)
        if step == 2:
            wait_for(lambda pid=proc.pid: _lock_holder(crashy / "ck") == pid)
            proc.send_signal(signal.SIGSTOP)  # frozen mid-run, lock held: no race to the end
            second = run(*args(crashy), timeout=60)
            proc.send_signal(signal.SIGCONT)
            refused(second, f"(pid {proc.pid})")
            seconds += 1
        time.sleep(rng.uniform(0, 0.05))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=60)
        snapshots = Checkpointer(crashy / "ck").snapshots()
        if step == 4 and len(snapshots) > 1:
            snapshots[0][1].unlink()  # the newest one lost: fall back to the older one
        if step == 6:
            for _, path in snapshots:
                path.unlink()  # every one lost: refused until --reset-state
            refused(run(*args(crashy), timeout=60), "refusing to start a new model")
            reset = True
    assert kills >= 5 and seconds == 1
    final = run(*args(crashy), *(["--reset-state"] if reset else []))
    assert _outcome(crashy, final) == expected
    if expected[0] == 0:  # (an uninterrupted run that refuses poison stops there too)
        records = count_lines(crashy / "out.jsonl") + count_lines(crashy / "dead.jsonl")
        assert records == n
