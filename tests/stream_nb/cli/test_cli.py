"""The real ``stream-nb`` process: end to end on stdin and files, delayed labels, flat and
nested events, kill -9 crash safety, a hypothesis fuzz of hostile lines, SIGTERM, corrupt
snapshots, flag/env handling, eval/inspect/merge/demo, and a /metrics scrape."""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_nb import CategoricalNB, PrequentialEvaluator
from stream_nb.cli import build_parser, daemon_params
from stream_nb.datasets import agrawal, categorical_stream
from stream_nb.engine.checkpoint import Checkpointer, read_snapshot
from stream_nb.engine.events import REASONS
from stream_nb.naive_bayes.multinomial import MultinomialNB

EXE = shutil.which("stream-nb") or str(Path(sys.executable).parent / "stream-nb")


def cli(*args, stdin=None, env=None, timeout=120, check=True):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_NB_")}
    full_env.update(env or {})
    proc = subprocess.run(
        [EXE, *map(str, args)], input=stdin, capture_output=True, env=full_env, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr.decode()[-3000:]}")
    return proc


def lines_of(path):
    return [orjson.loads(line) for line in Path(path).read_bytes().splitlines()]


def _keys(d):
    return orjson.loads(orjson.dumps(d, option=orjson.OPT_NON_STR_KEYS))


def reference(events, learner, evaluator=None):
    """The library's own prequential predictions: ``events`` are (x, y, id, position)."""
    out = []
    for x, y, eid, position in events:
        lp = learner.predict_log_proba_one(x)
        y_pred = learner.predict_one(x)
        record = {"id": eid} if eid is not None else {}
        record.update(position=position, y_pred=y_pred)
        if y is not None:
            record["y_true"] = y
        record.update(log_proba=_keys(lp), n_learned=learner.n_learned)
        out.append(record)
        if y is not None:
            if evaluator is not None:
                evaluator.update(y, y_pred, lp)
            learner.learn_one(x, y)
    return out


def write_lines(path, payloads):
    data = b"".join(p + b"\n" for p in payloads)
    Path(path).write_bytes(data)
    positions, offset = [], 0
    for i, p in enumerate(payloads):
        positions.append({"line": i + 1, "offset": offset})
        offset += len(p) + 1
    return positions


# ---------------------------------------------------------------------- end to end
def test_stdin_nested_events_equal_library_predictions():
    events = list(categorical_stream(1, 400))
    payloads = [orjson.dumps({"x": x, "y": y, "id": f"e{i}"}) for i, (x, y) in enumerate(events)]
    payloads[10] = orjson.dumps({"x": events[10][0], "id": "e10"})  # unlabelled
    proc = cli("run", "--model", "CategoricalNB", stdin=b"\n".join(payloads) + b"\n")
    got = [orjson.loads(line) for line in proc.stdout.splitlines()]
    positions = write_lines(os.devnull, payloads)
    expected = reference(
        [(x, None if i == 10 else y, f"e{i}", positions[i]) for i, (x, y) in enumerate(events)],
        CategoricalNB(),
    )
    assert got == expected
    summary = orjson.loads(proc.stderr[proc.stderr.index(b"{") :])
    assert summary["learned"] == 399 and summary["outcomes"] == {"learned": 399, "predicted": 1}


def test_file_flat_events_equal_library_predictions(tmp_path):
    events = list(agrawal(5, 500))
    payloads = [orjson.dumps({**x, "y": y}) for x, y in events]
    positions = write_lines(tmp_path / "in.jsonl", payloads)
    proc = cli(
        "run",
        "--model",
        "CategoricalNB",
        "--source",
        tmp_path / "in.jsonl",
        "--sink",
        f"file:{tmp_path}/out.jsonl",
        "--top-k",
        "5",
    )
    expected = reference(
        [(x, y, None, positions[i]) for i, (x, y) in enumerate(events)], CategoricalNB()
    )
    assert lines_of(tmp_path / "out.jsonl") == expected
    report = orjson.loads(proc.stdout)["report"]
    evaluator = PrequentialEvaluator()
    reference([(x, y, None, None) for x, y in events], CategoricalNB(), evaluator)
    assert report["cumulative"]["accuracy"] == evaluator.report()["cumulative"]["accuracy"]


def test_delayed_labels_end_to_end(tmp_path):
    demo = cli(
        "demo", "--stream", "categorical", "-n", "300", "--seed", "3", "--delay-labels", "25"
    ).stdout
    (tmp_path / "in.jsonl").write_bytes(demo)
    proc = cli(
        "run",
        "--model",
        "CategoricalNB",
        "--source",
        tmp_path / "in.jsonl",
        "--sink",
        tmp_path / "out.jsonl",
        "--delayed-labels",
        "--report",
        "-",
    )
    out = lines_of(tmp_path / "out.jsonl")
    summary = orjson.loads(proc.stdout)
    assert summary["outcomes"] == {"delayed": 300, "label_matched": 300}
    model, pending, events = CategoricalNB(), {}, list(categorical_stream(3, 300))
    expected_eval = PrequentialEvaluator()
    items = [orjson.loads(line) for line in demo.splitlines()]
    k = 0
    for item in items:
        if "y" not in item:
            x = {f: v for f, v in item.items() if f != "id"}
            lp = model.predict_log_proba_one(x)
            assert out[k]["id"] == item["id"] and out[k]["log_proba"] == _keys(lp)
            assert out[k]["y_pred"] == model.predict_one(x) and "y_true" not in out[k]
            pending[item["id"]] = (x, model.predict_one(x), lp)
            k += 1
        else:
            x, y_pred, lp = pending.pop(item["id"])
            assert item["y"] == events[item["id"]][1]
            expected_eval.update(item["y"], y_pred, lp)
            model.learn_one(x, item["y"])
    assert k == 300 and summary["report"] == expected_eval.report()


# ---------------------------------------------------------------------- crash safety
def _count_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def test_kill_9_at_random_points_loses_and_duplicates_nothing(tmp_path):
    rng = random.Random(20261122)
    events = list(categorical_stream(8, 12_000, features=8, values=6))
    payloads = [orjson.dumps({**x, "y": y}) for x, y in events]
    bad_at = {777: b"{broken", 4321: b"\xff\xfe", 9000: b"[1,2]"}
    for i, p in bad_at.items():
        payloads[i] = p
    positions = write_lines(tmp_path / "in.jsonl", payloads)
    args = [
        "run",
        "--model",
        "CategoricalNB",
        "--source",
        tmp_path / "in.jsonl",
        "--sink",
        tmp_path / "out.jsonl",
        "--dead-letters",
        tmp_path / "dl.jsonl",
        "--checkpoint-dir",
        tmp_path / "ck",
        "--checkpoint-every",
        "300",
        "--batch-size",
        "64",
        "--report",
        tmp_path / "report.json",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_NB_")}
    targets = sorted(rng.sample(range(200, 11_000), 12))
    kills = 0
    for target in targets:
        proc = subprocess.Popen(
            [EXE, *map(str, args)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 60
        while proc.poll() is None and _count_lines(tmp_path / "out.jsonl") < target:
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.03))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
    assert kills >= 10
    cli(*args)  # the last run goes to the end
    good = [i for i in range(len(events)) if i not in bad_at]
    model, evaluator = CategoricalNB(**daemon_params(CategoricalNB)), PrequentialEvaluator()
    expected = reference([(*events[i], None, positions[i]) for i in good], model, evaluator)
    out = lines_of(tmp_path / "out.jsonl")
    assert len(out) == len(good)
    # exactly one record per good line, in input order; the posteriors of the batch
    # kernel equal the library's per-event ones to rounding (the counts exactly)
    _close(out, expected)
    letters = lines_of(tmp_path / "dl.jsonl")
    assert [d["position"]["line"] - 1 for d in letters] == sorted(bad_at)
    final = Checkpointer(tmp_path / "ck").latest()[1]
    assert final["learner"] == model.to_state()
    assert final["source"] == {
        "line": len(events),
        "offset": (tmp_path / "in.jsonl").stat().st_size,
    }
    report = orjson.loads((tmp_path / "report.json").read_bytes())
    _close(report["report"], orjson.loads(orjson.dumps(evaluator.report())))


def _close(a, b):
    """Equal, floats to 1e-9 (relative or absolute)."""
    if isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for k in a:
            _close(a[k], b[k])
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b)
        for u, v in zip(a, b, strict=True):
            _close(u, v)
    else:
        assert a == b


# ---------------------------------------------------------------------- fuzz
_TOKENS = [f"t{i}" for i in range(6)]
_no_newline = st.characters(blacklist_characters="\n", blacklist_categories=("Cs",))
good_event = st.builds(
    lambda counts, y, nested: orjson.dumps({"x": counts, "y": y} if nested else {**counts, "y": y}),
    st.dictionaries(st.sampled_from(_TOKENS), st.integers(0, 5), min_size=1, max_size=4),
    st.sampled_from(["spam", "ham", 3]),
    st.booleans(),
)
junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
bad_line = st.one_of(
    st.text(_no_newline, max_size=30).map(lambda t: ("#" + t).encode()),  # invalid JSON
    st.binary(max_size=30).map(lambda b: b"\xff" + b.replace(b"\n", b"")),  # invalid UTF-8
    st.one_of(
        st.integers(), st.lists(st.integers(), max_size=3), st.text(max_size=5), st.none()
    ).map(orjson.dumps),  # not an object
    st.integers(400, 3000).map(
        lambda n: b'{"x": {"t0": 1}, "y": "ham", "pad": "' + b"a" * n + b'"}'
    ),
    st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"1e999"]).map(
        lambda v: b'{"x": {"t0": ' + v + b'}, "y": "ham"}'
    ),
    junk.filter(lambda j: isinstance(j, (list, dict))).map(
        lambda j: orjson.dumps({"x": {"t1": j}, "y": "ham"})
    ),  # nested junk
    st.integers(1, 9).map(lambda k: orjson.dumps({"x": {"t2": -k}, "y": "spam"})),  # negative
    st.lists(st.integers(), max_size=2).map(lambda v: orjson.dumps({"t0": 1, "y": v})),  # label
)


@settings(max_examples=15)
@given(st.lists(st.tuples(st.booleans(), good_event, bad_line), min_size=1, max_size=25))
def test_fuzz_hostile_lines_never_kill_the_process(tmp_path_factory, mix):
    tmp = tmp_path_factory.mktemp("fuzz")
    payloads = [good if is_good else bad for is_good, good, bad in mix]
    positions = write_lines(tmp / "in.jsonl", payloads)
    proc = cli(
        "run",
        "--model",
        "MultinomialNB",
        "--source",
        tmp / "in.jsonl",
        "--sink",
        tmp / "out.jsonl",
        "--dead-letters",
        tmp / "dl.jsonl",
        "--max-line-bytes",
        "300",
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    good = [i for i, (is_good, _, _) in enumerate(mix) if is_good]
    bad = [i for i, (is_good, _, _) in enumerate(mix) if not is_good]
    letters = lines_of(tmp / "dl.jsonl") if (tmp / "dl.jsonl").exists() else []
    assert [d["position"]["line"] - 1 for d in letters] == bad
    assert all(d["reason"] in REASONS for d in letters)
    events = []
    for i in good:
        obj = orjson.loads(payloads[i])
        y = obj.pop("y")
        events.append((obj.get("x", obj), y, None, positions[i]))
    assert lines_of(tmp / "out.jsonl") == reference(events, MultinomialNB())


# ---------------------------------------------------------------------- signals, snapshots
def _wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_checkpoints_and_exits_0(tmp_path, signum):
    payloads = [orjson.dumps({**x, "y": y}) for x, y in categorical_stream(4, 2000)]
    write_lines(tmp_path / "in.jsonl", payloads)
    proc = subprocess.Popen(
        [
            EXE,
            "run",
            "--model",
            "CategoricalNB",
            "--source",
            str(tmp_path / "in.jsonl"),
            "--follow",
            "--sink",
            str(tmp_path / "out.jsonl"),
            "--checkpoint-dir",
            str(tmp_path / "ck"),
            "--checkpoint-interval",
            "3600",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _wait_for(lambda: _count_lines(tmp_path / "out.jsonl") == 2000)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()
    body = read_snapshot(tmp_path / "ck")
    assert body["learner"]["n_learned"] == 2000
    assert body["source"]["line"] == 2000
    assert body["sink"] == {"bytes": (tmp_path / "out.jsonl").stat().st_size}
    assert f"signal {int(signum)}".encode() in err


def test_a_stop_that_hangs_ends_with_stacks_and_status_1(tmp_path):
    # stdout is a pipe nobody reads: once its buffer is full the daemon blocks in a
    # write, and the stop (which must flush that sink) cannot finish
    payloads = [orjson.dumps({**x, "y": y}) for x, y in categorical_stream(4, 5000)]
    write_lines(tmp_path / "in.jsonl", payloads)
    err_path = tmp_path / "err.log"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [
                EXE,
                "run",
                "--model",
                "CategoricalNB",
                "--source",
                str(tmp_path / "in.jsonl"),
                "--follow",
                "--sink",
                "-",
                "--stop-timeout",
                "2",
            ],
            stdout=subprocess.PIPE,
            stderr=err,
        )
    try:
        _wait_for(lambda: b"running CategoricalNB" in err_path.read_bytes())
        time.sleep(0.5)  # the pipe fills
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 1
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    text = err_path.read_text()
    assert "signal 15: finishing the batch, flushing and checkpointing (at most 2 s)" in text
    assert "Timeout (0:00:02)!" in text  # faulthandler's dump of every thread
    assert "most recent call first" in text


def test_corrupt_newest_snapshot_falls_back_to_previous(tmp_path):
    events = list(categorical_stream(6, 1000))
    payloads = [orjson.dumps({**x, "y": y}) for x, y in events]
    positions = write_lines(tmp_path / "in.jsonl", payloads[:600])
    base = [
        "run",
        "--model",
        "CategoricalNB",
        "--source",
        tmp_path / "in.jsonl",
        "--sink",
        tmp_path / "out.jsonl",
        "--checkpoint-dir",
        tmp_path / "ck",
        "--checkpoint-every",
        "250",
        "--batch-size",
        "50",
    ]
    cli(*base)
    ck = Checkpointer(tmp_path / "ck")
    newest_id, newest = ck.latest()
    assert newest["learner"]["n_learned"] == 600
    newest_path = tmp_path / "ck" / f"snapshot-{newest_id}.json"
    newest_path.write_bytes(newest_path.read_bytes()[:-10])
    positions = write_lines(tmp_path / "in.jsonl", payloads)  # more events arrive
    proc = cli(*base)
    # the warning names the damaged snapshot and why (the size check catches the cut,
    # before any checksum), then the fallback to the older one
    assert b"skipping invalid snapshot" in proc.stderr
    assert f"snapshot-{newest_id}.json: body is".encode() in proc.stderr
    assert b"(truncated write?)" in proc.stderr
    assert b"restoring the older snapshot" in proc.stderr
    expected = reference([(*events[i], None, positions[i]) for i in range(1000)], CategoricalNB())
    assert lines_of(tmp_path / "out.jsonl") == expected


# ---------------------------------------------------------------------- flags and env
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--demo", "agrawal", "--source", "x.jsonl"],
            "--demo and --source are mutually exclusive",
        ),
        (["--follow"], "--follow needs a file --source, not stdin ('-')"),
        (["--checkpoint-every", "10"], "--checkpoint-every needs --checkpoint-dir"),
        (["--checkpoint-interval", "5"], "--checkpoint-interval needs --checkpoint-dir"),
        (["--delayed-max-size", "10"], "--delayed-max-size needs --delayed-labels"),
        (["--delayed-max-age", "10"], "--delayed-max-age needs --delayed-labels"),
        (["--delayed-labels", "--id-field", ""], "--delayed-labels needs an --id-field"),
        (
            ["--error-policy", "skip", "--dead-letters", "dl.jsonl"],
            "--dead-letters has no effect with --error-policy skip",
        ),
        (["--metrics-address", "localhost"], "--metrics-address must be [HOST:]PORT"),
        (["--metrics-address", "70000"], "--metrics-address must be [HOST:]PORT"),
        (["--model", "NoSuchNB"], "--model: unknown learner 'NoSuchNB'"),
        (["--params", "[1]"], "--params must be a JSON object"),
        (["--param", "alpha=-1"], "--params: alpha must be non-negative"),
        (["--model", 'CategoricalNB:{"alpha": -1}'], "--model: alpha must be non-negative"),
        (["--model", "CategoricalNB:{"], "parameters are not valid JSON"),
        (["--model", "CategoricalNB:[1]"], "parameters must be a JSON object"),
        (
            ["--model", 'CategoricalNB:{"alpha": 2}', "--param", "alpha=2"],
            "--model 'CategoricalNB:{\"alpha\": 2}' and --params/--param both set 'alpha'",
        ),
        (
            ["--model", 'CategoricalNB:{"alpha": 2}', "--params", '{"fit_prior": 3}'],
            "--model or --params/--param: fit_prior must be",
        ),
        (["--model", 'CategoricalNB:{"nope": 1}'], "--model: invalid parameters for CategoricalNB"),
        (["--loss-matrix", "[1, 2]"], "--loss-matrix must be {predicted: {true: cost}}"),
        (["--loss-matrix", '{"a": {"b": "x"}}'], "--loss-matrix: loss_matrix['a']['b'] must be"),
        (["--top-k", "0"], "argument --top-k: expected a positive integer, got '0'"),
        (["--source", "nope://x"], "no source connector for 'nope://x'"),
    ],
)
def test_flag_errors_name_the_flag(args, message):
    proc = cli("run", "--model", "CategoricalNB", *args, check=False, stdin=b"")
    assert proc.returncode == 2
    assert message in proc.stderr.decode()
    assert "usage: stream-nb run" in proc.stderr.decode()


def test_environment_variables_set_flags_and_are_validated():
    env = {
        "STREAM_NB_DEMO": "agrawal",
        "STREAM_NB_LIMIT": "7",
        "STREAM_NB_MODEL": "CategoricalNB",
        "STREAM_NB_EXPLAIN": "yes",
        "STREAM_NB_DEAD_LETTERS": "stderr",
    }
    proc = cli("run", env=env)
    records = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert len(records) == 7 and "explain" in records[-1]
    # the command line wins over the environment
    assert len(cli("run", "--limit", "3", env=env).stdout.splitlines()) == 3
    bad = cli("run", env={"STREAM_NB_LIMIT": "many"}, check=False)
    assert bad.returncode == 2 and "STREAM_NB_LIMIT='many' (for --limit)" in bad.stderr.decode()
    bad = cli("run", env={"STREAM_NB_FOLLOW": "maybe"}, check=False)
    assert bad.returncode == 2 and "STREAM_NB_FOLLOW='maybe' (for --follow)" in bad.stderr.decode()


def test_every_flag_has_an_environment_variable_in_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, subparser in sub.choices.items():
        for action in subparser._actions:
            hidden = action.help == argparse.SUPPRESS  # old spellings kept as aliases
            if action.option_strings and action.dest not in ("help",) and not hidden:
                flag = max(action.option_strings, key=len)
                env = "STREAM_NB_" + flag.lstrip("-").upper().replace("-", "_")
                assert f"env {env}" in action.help, (name, flag)
                assert "default:" in action.help, (name, flag)
    text = " ".join(cli("run", "--help").stdout.decode().split())
    assert "STREAM_NB_CHECKPOINT_DIR" in text and "default: 1024" in text


# ---------------------------------------------------------------------- other commands
def test_demo_prints_the_seeded_generator():
    out = cli("demo", "--stream", "agrawal", "--seed", "9", "-n", "20").stdout
    assert [orjson.loads(line) for line in out.splitlines()] == [
        {**x, "y": y} for x, y in agrawal(9, 20)
    ]


def test_run_demo_with_a_limit(tmp_path):
    proc = cli(
        "run",
        "--model",
        "CategoricalNB",
        "--demo",
        "agrawal",
        "--limit",
        "300",
        "--sink",
        tmp_path / "out.jsonl",
    )
    assert len(lines_of(tmp_path / "out.jsonl")) == 300
    assert orjson.loads(proc.stdout)["learned"] == 300


def test_eval_two_models_curve_and_plot(tmp_path):
    (tmp_path / "in.jsonl").write_bytes(cli("demo", "--stream", "categorical", "-n", "500").stdout)
    proc = cli(
        "eval",
        "-i",
        tmp_path / "in.jsonl",
        "--model",
        "CategoricalNB",
        "--model",
        'CategoricalNB:{"alpha": 0.1}',
        "--every",
        "100",
        "--curve",
        tmp_path / "curve.csv",
        "--plot",
        tmp_path / "curve.png",
    )
    report = orjson.loads(proc.stdout)
    assert set(report["models"]) == {"CategoricalNB", 'CategoricalNB:{"alpha": 0.1}'}
    evaluator = PrequentialEvaluator()
    reference(
        [(x, y, None, None) for x, y in categorical_stream(42, 500)], CategoricalNB(), evaluator
    )
    assert report["models"]["CategoricalNB"]["report"] == orjson.loads(
        orjson.dumps(evaluator.report())
    )
    rows = (tmp_path / "curve.csv").read_text().splitlines()
    assert rows[0].startswith("events,model,accuracy") and len(rows) == 1 + 5 * 2
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_inspect_and_merge(tmp_path):
    events = list(categorical_stream(2, 600))
    halves = (
        [orjson.dumps({**x, "y": y}) for x, y in events[:300]],
        [orjson.dumps({**x, "y": y}) for x, y in events[300:]],
    )
    for k, half in enumerate(halves):
        write_lines(tmp_path / f"in{k}.jsonl", half)
        cli(
            "run",
            "--model",
            "CategoricalNB",
            "--source",
            tmp_path / f"in{k}.jsonl",
            "--sink",
            tmp_path / f"out{k}.jsonl",
            "--checkpoint-dir",
            tmp_path / f"ck{k}",
        )
    proc = cli("merge", tmp_path / "ck0", tmp_path / "ck1", "-o", tmp_path / "merged.snap")
    assert orjson.loads(proc.stdout)["n_learned"] == 600
    whole = CategoricalNB(**daemon_params(CategoricalNB))
    for x, y in events:
        whole.learn_one(x, y)
    assert read_snapshot(tmp_path / "merged.snap")["learner"] == whole.to_state()
    info = orjson.loads(cli("inspect", "--snapshot", tmp_path / "merged.snap", "--top", "3").stdout)
    assert info["learner"] == "CategoricalNB" and info["n_learned"] == 600
    assert sum(c["count"] for c in info["classes"]) == 600
    assert info["features"] == sorted(events[0][0])
    assert len(info["most_informative_features"]) == 3
    top = info["most_informative_features"][0]
    assert top["log_ratio"] >= info["most_informative_features"][1]["log_ratio"] > 0
    # a merged snapshot seeds a new run
    proc = cli(
        "run",
        "--model",
        "CategoricalNB",
        "--initial-model",
        tmp_path / "merged.snap",
        "--source",
        tmp_path / "in0.jsonl",
        "--sink",
        tmp_path / "again.jsonl",
    )
    assert lines_of(tmp_path / "again.jsonl")[0]["n_learned"] == 600
    bad = cli("inspect", "--snapshot", tmp_path / "in0.jsonl", check=False)
    assert bad.returncode == 1 and "not a stream-nb snapshot" in bad.stderr.decode()


# ---------------------------------------------------------------------- metrics
def test_metrics_endpoint_of_a_running_daemon(tmp_path):
    payloads = [orjson.dumps({**x, "y": y}) for x, y in categorical_stream(4, 500)]
    write_lines(tmp_path / "in.jsonl", [*payloads, b"{bad"])
    err_path = tmp_path / "err.log"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [
                EXE,
                "run",
                "--model",
                'CategoricalNB:{"alpha": 0.5}',  # build info names the class only
                "--source",
                str(tmp_path / "in.jsonl"),
                "--follow",
                "--sink",
                str(tmp_path / "out.jsonl"),
                "--dead-letters",
                str(tmp_path / "dl.jsonl"),
                "--metrics-address",
                "127.0.0.1:0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            _wait_for(lambda: re.search(rb"127\.0\.0\.1:(\d+)", err_path.read_bytes()))
            port = re.search(rb"127\.0\.0\.1:(\d+)", err_path.read_bytes()).group(1).decode()
            _wait_for(lambda: _count_lines(tmp_path / "out.jsonl") == 500)
            base = f"http://127.0.0.1:{port}"
            text = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
            assert urllib.request.urlopen(f"{base}/healthz", timeout=10).status == 200
            assert urllib.request.urlopen(f"{base}/readyz", timeout=10).status == 200
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    assert proc.returncode == 0

    def value(name):
        m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        assert m, name
        return float(m.group(1))

    assert value("stream_nb_events_consumed_total") == 501
    assert value('stream_nb_events_processed_total{outcome="learned"}') == 500
    assert value('stream_nb_dead_letters_total{reason="invalid_json"}') == 1
    assert value("stream_nb_predictions_emitted_total") == 500
    assert value("stream_nb_prequential_evaluated_total") == 500
    assert value('stream_nb_build_info{learner="CategoricalNB",version="0.1.0"}') == 1


def test_progress_line_only_on_a_terminal():
    import pty

    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_NB_")}
    proc = subprocess.Popen(
        [
            EXE,
            "run",
            "--model",
            "CategoricalNB",
            "--demo",
            "agrawal",
            "--limit",
            "2000",
            "--sink",
            os.devnull,
        ],
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO once the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=60) == 0
    tty_err = b"".join(chunks)
    assert re.search(rb"\r[\d,]+ events  [\d,]+/s", tty_err)
    piped = cli(
        "run",
        "--model",
        "CategoricalNB",
        "--demo",
        "agrawal",
        "--limit",
        "2000",
        "--sink",
        os.devnull,
    )
    assert b"\r" not in piped.stderr and b"events  " not in piped.stderr


def test_json_logs_and_periodic_reports():
    proc = cli(
        "run",
        "--model",
        "CategoricalNB",
        "--demo",
        "agrawal",
        "--limit",
        "600",
        "--batch-size",
        "100",
        "--sink",
        os.devnull,
        "--log-format",
        "json",
        "--report-interval",
        "1e-9",
        "--report",
        os.devnull,
    )
    logs = [orjson.loads(line) for line in proc.stderr.splitlines()]
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in logs)
    reports = [entry["data"] for entry in logs if entry["message"].startswith("report ")]
    assert [r["consumed"] for r in reports] == [100, 200, 300, 400, 500, 600]
    assert reports[-1]["cumulative"]["n"] == 600


def test_interactive_stdin_answers_each_event_while_input_stays_open():
    import select

    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_NB_")}
    proc = subprocess.Popen(
        [EXE, "run", "--model", "CategoricalNB"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    answers = []
    for event in ({"x": {"sky": "sun"}, "y": "play"}, {"x": {"sky": "sun"}}):
        proc.stdin.write(orjson.dumps(event) + b"\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no prediction while stdin is open"
        answers.append(orjson.loads(proc.stdout.readline()))
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert [a["y_pred"] for a in answers] == [None, "play"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9108", ("127.0.0.1", 9108)),
        (":9108", ("127.0.0.1", 9108)),
        ("0.0.0.0:9108", ("0.0.0.0", 9108)),
        ("[::1]:9108", ("::1", 9108)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_metrics_address_without_host_binds_loopback(text, expected):
    from stream_nb.cli import parse_metrics_address

    assert parse_metrics_address(text) == expected
