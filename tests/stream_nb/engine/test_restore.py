"""Restore and checkpoint defences in process: fall back past invalid snapshots, never
start over silently, never write a snapshot that would not restore, count failures;
restarts that reproduce the uninterrupted run bit for bit; exact ids; many classes."""

from __future__ import annotations

import json
import logging
import os

import orjson
import pytest

from stream_nb import (
    CategoricalNB,
    CheckpointError,
    DelayedLabelCache,
    Engine,
    EngineMetrics,
    NaiveBayes,
    NewerSnapshotError,
    PrequentialEvaluator,
    SinkError,
)
from stream_nb.connectors.base import Sink
from stream_nb.connectors.files import FileSink, FileSource
from stream_nb.connectors.memory import ListSource, MemorySink
from stream_nb.datasets import agrawal, categorical_stream
from stream_nb.engine.checkpoint import Checkpointer, encode_snapshot
from stream_nb.engine.settings import _MAX_BATCH_CELLS


def _events(n, seed=3):
    return [{"x": x, "y": y} for x, y in categorical_stream(seed, n)]


def _engine(directory, items, sink=None, **kw):
    return Engine(
        CategoricalNB(),
        ListSource(items),
        MemorySink() if sink is None else sink,
        checkpointer=Checkpointer(directory),
        evaluator=PrequentialEvaluator(),
        batch_size=20,
        checkpoint_every=50,
        **kw,
    )


def _two_snapshots(tmp_path):
    """A directory whose newest snapshot (after 100 events) can be spoiled; the older
    one holds 50 events."""
    sink = MemorySink()
    items = _events(300)
    engine = _engine(tmp_path, items, sink)
    engine.run(max_events=100)
    ids = [i for i, _ in engine.checkpointer.snapshots()]
    return items, sink, ids


def _spoil(body):
    """Ways a checksum-valid snapshot can still be invalid."""
    cases = {}
    learner = orjson.loads(orjson.dumps(body["learner"]))
    learner["stats"]["class_weight"][0][1] = None  # what orjson makes of a NaN
    cases["learner statistic"] = {**body, "learner": learner}
    cases["no source key"] = {k: v for k, v in body.items() if k != "source"}
    cases["engine format"] = {**body, "format": "stream-nb/engine-v0"}
    cases["evaluator"] = {**body, "evaluator": {"format": "nonsense"}}
    cases["counters"] = {**body, "counters": {**body["counters"], "consumed": -7}}
    cases["no learner key"] = {k: v for k, v in body.items() if k != "learner"}
    return cases


@pytest.mark.parametrize(
    "case",
    [
        "learner statistic",
        "no source key",
        "engine format",
        "evaluator",
        "counters",
        "no learner key",
    ],
)
def test_an_invalid_newest_snapshot_falls_back_to_the_older_one(tmp_path, caplog, case):
    items, sink, ids = _two_snapshots(tmp_path)
    cp = Checkpointer(tmp_path)
    newest_path = tmp_path / f"snapshot-{ids[0]}.json"
    body = cp.read(newest_path)
    os.remove(newest_path)
    cp.write_encoded(encode_snapshot(_spoil(body)[case]))
    spoiled = cp.snapshots()[0][1]
    caplog.set_level(logging.WARNING, logger="stream_nb")
    engine = _engine(tmp_path, items, sink)
    assert engine.restore()
    assert engine.learner.n_learned == 60  # the older snapshot (batches of 20, every 50)
    assert not spoiled.exists()
    assert (tmp_path / (spoiled.name + ".rejected")).exists()  # moved aside, not deleted
    assert f"skipping invalid snapshot {spoiled.name}" in caplog.text
    engine.run()
    model = CategoricalNB()
    for e in items:
        model.learn_one(e["x"], e["y"])
    assert engine.learner.to_state() == model.to_state()
    assert len(sink.records()) == len(items)  # truncated back, re-read: once per event


def test_every_snapshot_invalid_refuses_to_start_over(tmp_path):
    items, sink, ids = _two_snapshots(tmp_path)
    for i in ids:
        path = tmp_path / f"snapshot-{i}.json"
        path.write_bytes(path.read_bytes()[:-5])  # truncated: checksum mismatch
    before = sorted(os.listdir(tmp_path))
    engine = _engine(tmp_path, items, sink)
    with pytest.raises(CheckpointError, match=r"refusing to start a new model: 2 snapshot\(s\)"):
        engine.restore()
    with pytest.raises(CheckpointError, match="--reset-state"):
        engine.restore()
    assert sorted(os.listdir(tmp_path)) == before  # nothing moved, nothing deleted
    assert sink.existing_output() is not None  # nothing truncated either


def test_reset_state_moves_invalid_snapshots_aside_and_empties_the_output(tmp_path):
    items, sink, ids = _two_snapshots(tmp_path)
    for i in ids:
        (tmp_path / f"snapshot-{i}.json").write_bytes(b"not a snapshot")
    engine = _engine(tmp_path, items, sink, reset_state=True)
    assert engine.restore() is False
    assert sorted(n for n in os.listdir(tmp_path) if n.endswith(".rejected")) == [
        f"snapshot-{i}.json.rejected" for i in sorted(ids)
    ]
    assert sink.records() == []
    engine.run()
    assert len(sink.records()) == len(items)  # one record per event, none twice
    assert engine.learner.n_learned == len(items)


def test_output_without_a_snapshot_refuses_unless_reset(tmp_path):
    items = _events(40)
    sink = MemorySink()
    sink.write(b'{"earlier": 1}')
    sink.flush()
    engine = _engine(tmp_path / "ck", items, sink)
    with pytest.raises(CheckpointError, match=r"no snapshot in .* output already holds records"):
        engine.restore()
    assert sink.records() == [{"earlier": 1}]
    engine = _engine(tmp_path / "ck", items, sink, reset_state=True)
    assert engine.restore() is False
    engine.run()
    assert len(sink.records()) == 40 and "earlier" not in sink.records()[0]


def test_a_first_start_needs_no_flag_and_a_valid_snapshot_always_wins(tmp_path):
    items = _events(120)
    sink = MemorySink()
    first = _engine(tmp_path, items, sink, reset_state=True)
    assert first.restore() is False  # empty directory, empty output
    first.run(max_events=60)
    again = _engine(tmp_path, items, sink, reset_state=True)
    assert again.restore() is True  # --reset-state never discards a valid snapshot
    assert again.learner.n_learned == 60


def test_another_learner_class_stops_without_moving_anything(tmp_path):
    _two_snapshots(tmp_path)
    before = sorted(os.listdir(tmp_path))
    engine = Engine(NaiveBayes(), ListSource([]), MemorySink(), checkpointer=Checkpointer(tmp_path))
    with pytest.raises(CheckpointError, match="holds a CategoricalNB, but the engine runs a"):
        engine.restore()
    assert sorted(os.listdir(tmp_path)) == before


class PoisonedCategoricalNB(CategoricalNB):
    """Writes a state its own from_state rejects (a NaN count, written as null)."""

    def _stats_to_state(self):
        stats = super()._stats_to_state()
        if self.n_learned > 30:
            stats["class_weight"][0][1] = float("nan")
        return stats


def test_a_snapshot_that_would_not_restore_is_never_written(tmp_path):
    metrics = EngineMetrics()
    sink = MemorySink()
    engine = Engine(
        PoisonedCategoricalNB(),
        ListSource(_events(100)),
        sink,
        checkpointer=Checkpointer(tmp_path),
        metrics=metrics,
        batch_size=10,
        checkpoint_every=20,
    )
    with pytest.raises(CheckpointError, match="refusing to write a snapshot that would not"):
        engine.run()
    cp = Checkpointer(tmp_path)
    _, newest = cp.latest()
    assert newest["learner"]["n_learned"] == 20  # the previous one stays the newest
    assert cp.corrupt == [] and not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    value = metrics.registry.get_sample_value
    assert value("stream_nb_checkpoint_failures_total", {"reason": "invalid_state"}) == 1
    assert value("stream_nb_checkpoints_total", {"result": "failure"}) == 1


def test_checkpoint_failures_are_counted_by_reason(tmp_path):
    metrics = EngineMetrics()
    directory = tmp_path / "ck"
    engine = Engine(
        CategoricalNB(),
        ListSource(_events(50)),
        MemorySink(),
        checkpointer=Checkpointer(directory),
        metrics=metrics,
        batch_size=10,
        checkpoint_every=20,
    )
    engine.run(max_events=10)
    newest = int(engine.checkpointer.snapshots()[0][0])
    (directory / f".snapshot-{newest + 1:012d}.tmp").mkdir()  # the next write fails
    with pytest.raises(CheckpointError, match=r"cannot write snapshot .* Is a directory"):
        engine.checkpoint()

    class BrokenSink(Sink):
        def write(self, value, *, key=None, headers=None):
            pass

        def flush(self):
            raise SinkError("cannot write to the sink: disk full")

        def close(self):
            pass

    engine.sink = BrokenSink()
    with pytest.raises(SinkError, match="disk full"):
        engine.checkpoint()
    value = metrics.registry.get_sample_value
    assert value("stream_nb_checkpoint_failures_total", {"reason": "io"}) == 1
    assert value("stream_nb_checkpoint_failures_total", {"reason": "sink"}) == 1
    assert value("stream_nb_checkpoint_failures_total", {"reason": "invalid_state"}) == 0


# ---------------------------------------------------------------------- reproducibility
def _agrawal_file(path, n, bad_every):
    lines = []
    for i, (x, y) in enumerate(agrawal(7, n)):
        lines.append(orjson.dumps({**x, "y": y}))
        if i % bad_every == bad_every - 1:
            lines.append(b"{not json")  # a column-path miss: the next batches skip it
    path.write_bytes(b"\n".join(lines) + b"\n")


class _Crash(Exception):
    pass


def _file_engine(directory, source_path):
    return Engine(
        NaiveBayes(),
        FileSource(source_path),
        FileSink(directory / "out.jsonl"),
        dead_letters=FileSink(directory / "dead.jsonl"),
        checkpointer=Checkpointer(directory / "ck"),
        evaluator=PrequentialEvaluator(),
        batch_size=256,
        checkpoint_every=1000,
    )


def test_a_restart_reproduces_the_uninterrupted_run_bit_for_bit(tmp_path):
    source = tmp_path / "in.jsonl"
    _agrawal_file(source, 12_000, bad_every=700)
    whole = tmp_path / "whole"
    whole.mkdir()
    _file_engine(whole, source).run()
    crashy = tmp_path / "crashy"
    crashy.mkdir()
    for n in (1_500, 4_100, 7_000, 9_999):
        engine = _file_engine(crashy, source)
        engine.restore()

        def crash(e, n=n):
            if e.consumed >= n:
                raise _Crash

        engine.add_batch_hook(crash)
        with pytest.raises(_Crash):
            engine.run()
        engine.sink.flush()  # output after the snapshot: truncated away on restore
    last = _file_engine(crashy, source)
    assert last.restore()
    last.run()
    for name in ("out.jsonl", "dead.jsonl"):
        assert (crashy / name).read_bytes() == (whole / name).read_bytes(), name
    ours = Checkpointer(crashy / "ck").latest()[1]
    theirs = Checkpointer(whole / "ck").latest()[1]
    assert ours["learner"] == theirs["learner"]
    assert ours["evaluator"] == theirs["evaluator"]


# ---------------------------------------------------------------------- exact ids
def test_ids_and_labels_beyond_64_bits_stay_exact_with_delayed_labels():
    big_label = 2**70
    items = []
    for _ in range(30):
        items.append({"x": {"f": "u"}, "y": "left"})
        items.append({"x": {"f": "v"}, "y": big_label})
    lines = [json.dumps(e).encode() for e in items]  # orjson cannot write 2**70
    lines.append(b'{"x": {"f": "u"}, "id": 18446744073709551617}')
    lines.append(b'{"x": {"f": "v"}, "id": 18446744073709551618}')
    lines.append(b'{"id": 18446744073709551618, "y": 1180591620717411303424}')
    lines.append(b'{"id": 18446744073709551617, "y": "left"}')
    sink = MemorySink()
    engine = Engine(
        CategoricalNB(),
        ListSource(lines),
        sink,
        dead_letters=MemorySink(),
        evaluator=PrequentialEvaluator(),
        delayed=DelayedLabelCache(max_age=None),
    )
    summary = engine.run()
    assert summary.rejected == {} and summary.outcomes["label_matched"] == 2
    values = sink.values()
    assert len(values) == 62
    first, second = values[-2:]
    assert first.startswith(b'{"id":18446744073709551617,') and b'"y_pred":"left"' in first
    assert second.startswith(b'{"id":18446744073709551618,')
    assert b'"y_pred":1180591620717411303424' in second
    assert json.loads(values[1])["y_true"] == big_label
    # each label went to its own event's features: f=u learned "left", f=v learned 2**70
    model = CategoricalNB()
    for e in items:
        model.learn_one(e["x"], e["y"])
    model.learn_one({"f": "v"}, big_label)
    model.learn_one({"f": "u"}, "left")
    assert engine.learner.to_state() == model.to_state()
    assert engine.learner.predict_one({"f": "v"}) == big_label
    assert type(engine.learner.predict_one({"f": "v"})) is int


@pytest.mark.parametrize("path", ["column", "per-event (--explain)"])
def test_wide_ids_and_labels_leave_the_column_path_and_stay_exact(path):
    lines = []
    for i in range(300):
        label = 2**70 if i % 2 else 5
        event = {"a": float(i % 7) + (i % 2), "b": str(i % 3), "y": label, "id": i}
        if i >= 200:
            event["id"] = 18446744073709551617 + i  # beyond 64 bits from here on
        lines.append(json.dumps(event).encode())
    sink = MemorySink()
    engine = Engine(
        NaiveBayes(),
        ListSource(lines),
        sink,
        evaluator=PrequentialEvaluator(),
        batch_size=100,
        explain=path != "column",
    )
    engine.run()
    records = [json.loads(v) for v in sink.values()]
    assert [r["id"] for r in records] == [
        *range(200),
        *(18446744073709551617 + i for i in range(200, 300)),
    ]
    assert [r["y_true"] for r in records] == [2**70 if i % 2 else 5 for i in range(300)]
    assert all(type(r["id"]) is int for r in records)
    assert {r["y_pred"] for r in records[2:]} <= {5, 2**70}


# ---------------------------------------------------------------------- many classes
def test_batches_shrink_with_many_classes_and_top_k_keeps_k():
    n_classes = 1_000
    lines = [orjson.dumps({"x": {"f": str(i % 7)}, "y": i % n_classes}) for i in range(3_000)]
    sizes = []
    sink = MemorySink()
    engine = Engine(CategoricalNB(), ListSource(lines), sink, batch_size=1024, top_k=3)
    last = [0]

    def record(e):
        sizes.append(e.consumed - last[0])
        last[0] = e.consumed

    engine.add_batch_hook(record)
    engine.run()
    assert sizes[0] == 1024  # no class known yet
    assert max(sizes[2:]) <= _MAX_BATCH_CELLS // n_classes
    records = sink.records()
    assert all(len(r["log_proba"]) == 3 for r in records[n_classes:])
    values = list(records[-1]["log_proba"].values())
    assert values == sorted(values, reverse=True)


@pytest.mark.parametrize("part", ["header", "learner", "evaluator"])
def test_a_snapshot_of_a_newer_stream_nb_stops_the_daemon_and_moves_nothing(tmp_path, part):
    items, sink, ids = _two_snapshots(tmp_path)
    cp = Checkpointer(tmp_path)
    newest_path = tmp_path / f"snapshot-{ids[0]}.json"
    body = cp.read(newest_path)
    if part == "header":
        data = encode_snapshot(body)
        newline = data.index(b"\n")
        header = orjson.loads(data[:newline])
        header["version"] = 2
        newest_path.write_bytes(orjson.dumps(header) + data[newline:])
    else:
        body[part] = {**body[part], "version": 2}
        newest_path.write_bytes(encode_snapshot(body))
    before = sorted(os.listdir(tmp_path))
    engine = _engine(tmp_path, items, sink)
    with pytest.raises(NewerSnapshotError, match=r"written by a newer stream-nb .* version 2"):
        engine.restore()
    assert sorted(os.listdir(tmp_path)) == before  # no fallback, nothing moved aside
    assert sink.existing_output() is not None
