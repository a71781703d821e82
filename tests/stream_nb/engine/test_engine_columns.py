"""The engine's column path (whole uniform batches through ``predict_learn_columns``)
against its general path: the same prediction records byte for byte, the same model,
the same evaluation, on every event shape the column path accepts, and a fallback
that changes nothing for the batches it does not accept."""

from __future__ import annotations

import math
import random
from typing import Any, NamedTuple

import orjson
import pytest

from stream_nb import (
    Engine,
    EventDecoder,
    GaussianNB,
    Learner,
    NaiveBayes,
    PrequentialEvaluator,
)
from stream_nb.checks.engine import run_engine
from stream_nb.connectors.base import Headers, Record, Source
from stream_nb.connectors.files import FileSink, FileSource
from stream_nb.connectors.memory import ListSource, MemorySink
from stream_nb.datasets import agrawal, mixed_stream
from stream_nb.engine import columns as columns_module


def _counting(cls: type[Learner]) -> type[Learner]:
    """``cls`` counting the batches its column kernel takes (the kernel itself unchanged)."""

    class _Counting(cls):  # (a leading underscore: not registered as a learner)
        taken = 0

        def predict_learn_columns(self, *args: Any) -> Any:
            out = super().predict_learn_columns(*args)
            self.taken += out is not None
            return out

    return _Counting


def _run(
    lines: list[bytes], make: type[Learner], *, columns: bool, batch_size: int = 200, **kwargs: Any
) -> tuple[Any, ...]:
    learner = _counting(make)()
    run = run_engine(learner, lines, column_path=columns, batch_size=batch_size, **kwargs)
    return run.records, run.state, run.report, run.summary, learner.taken, learner


def _both(lines: list[bytes], make: type[Learner] = NaiveBayes, **kwargs: Any) -> int:
    fast = _run(lines, make, columns=True, **kwargs)
    slow = _run(lines, make, columns=False, **kwargs)
    assert fast[0] == slow[0]  # every prediction record, byte for byte
    assert fast[1] == slow[1]  # the model
    assert fast[2] == slow[2]  # the evaluation
    assert fast[3].outcomes == slow[3].outcomes
    assert fast[3].rejected == slow[3].rejected
    assert slow[4] == 0
    return int(fast[4])


def _agrawal_lines(n: int, seed: int = 1) -> list[bytes]:
    return [orjson.dumps({**x, "y": y}) for x, y in agrawal(seed, n)]


def test_flat_agrawal_takes_the_column_path() -> None:
    assert _both(_agrawal_lines(2000)) >= 8


def test_nested_events_with_ids_weights_and_string_labels() -> None:
    rng = random.Random(4)
    lines = [
        orjson.dumps({"id": f"e{i}", "x": x, "y": f"class-{y}", "w": rng.choice([1, 0.5, 2.0])})
        for i, (x, y) in enumerate(mixed_stream(2, 1500, classes=3))
    ]
    assert _both(lines) >= 5


def _partly_labelled(seed: int, n: int, labelled: Any) -> list[bytes]:
    """Agrawal lines; event ``i`` keeps its label when ``labelled(i)``."""
    lines = []
    for i, (x, y) in enumerate(agrawal(seed, n)):
        event = dict(x)
        if labelled(i):
            event["y"] = y
        lines.append(orjson.dumps(event))
    return lines


def test_unlabelled_events_are_predicted_only() -> None:
    rng = random.Random(5)
    assert _both(_partly_labelled(3, 2000, lambda _: rng.random() > 0.2)) >= 5


def test_batches_parsed_in_chunks_fall_back_whole_when_a_late_chunk_differs() -> None:
    """Batches longer than the parse chunk: uniform ones are transposed chunk by chunk;
    one whose later chunk has an unlabelled event is parsed again as a whole."""
    # unlabelled events late in every batch
    lines = _partly_labelled(13, 4000, lambda i: i % 1000 < 900 or i % 7)
    assert _both(lines, batch_size=1000) >= 2  # the first batch meets new classes


def test_gaussian_nb_with_top_k() -> None:
    lines = [
        orjson.dumps({"a": rng_value, "b": (i * 7919) % 113 / 7.0, "y": i % 3})
        for i, rng_value in enumerate(random.Random(6).gauss(0, 1) for _ in range(1500))
    ]
    assert _both(lines, GaussianNB, top_k=2) >= 5


def test_a_bad_line_sends_its_batch_to_the_general_path() -> None:
    lines = _agrawal_lines(2000, seed=2)
    lines[900] = b'{"salary": "not json'
    lines[1300] = b'{"salary": [1, 2], "y": 0}'
    lines[1700] = b""
    assert _both(lines) >= 2  # the batches without a bad line (after the retry back-off)


def test_events_whose_features_differ_use_the_general_path() -> None:
    lines = []
    for i, (x, y) in enumerate(agrawal(4, 1000)):
        event = {**x, "y": y}
        if i % 2:
            event["extra"] = "z"  # another feature set in every other event
        lines.append(orjson.dumps(event))
    assert _both(lines) == 0


def test_key_order_does_not_matter() -> None:
    """Objects with the same keys in another order are read in the first one's order."""
    lines = []
    for i, (x, y) in enumerate(agrawal(9, 1500)):
        event = {**x, "y": y}
        if i % 2:
            event = dict(reversed(event.items()))
        lines.append(orjson.dumps(event))
    fast = _run(lines, NaiveBayes, columns=True)
    slow = _run(lines, NaiveBayes, columns=False)
    assert fast[4] >= 5
    for a, b in zip(fast[0], slow[0], strict=True):
        ra, rb = orjson.loads(a), orjson.loads(b)
        assert ra["position"] == rb["position"] and ra["n_learned"] == rb["n_learned"]
        for label, value in rb["log_proba"].items():
            assert math.isclose(ra["log_proba"][label], value, rel_tol=1e-9, abs_tol=1e-9)
    model_fast, model_slow = fast[5], slow[5]  # the same statistics (sum order aside)
    probe = dict(next(iter(agrawal(10, 1)))[0])
    for label, value in model_slow.predict_log_proba_one(probe).items():
        got = model_fast.predict_log_proba_one(probe)[label]
        assert math.isclose(got, value, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("shape", ["flat", "nested"])
def test_decoder_shapes(shape: str) -> None:
    if shape == "flat":
        lines = _agrawal_lines(1000, seed=5)
    else:
        lines = [orjson.dumps({"x": x, "y": y}) for x, y in agrawal(5, 1000)]
    decoder = EventDecoder(shape=shape)  # type: ignore[arg-type]
    assert _both(lines, decoder=decoder) >= 3


def test_file_to_file(tmp_path: Any) -> None:
    """The unkeyed sink (one write_many per batch) and file positions."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(_agrawal_lines(3000, seed=6)) + b"\n")
    outputs = []
    for columns in (True, False):
        dst = tmp_path / f"out-{columns}.jsonl"
        engine = Engine(
            NaiveBayes(), FileSource(src), FileSink(dst), batch_size=500, column_path=columns
        )
        engine.run()
        outputs.append(dst.read_bytes())
    assert outputs[0] == outputs[1]
    records = [orjson.loads(line) for line in outputs[0].splitlines()]
    assert [r["position"]["line"] for r in records] == list(range(1, 3001))
    assert records[-1]["n_learned"] == 2999


class _DictEvaluator:
    """An evaluator without ``update_arrays``: the column path hands it dictionaries."""

    def __init__(self) -> None:
        self.inner = PrequentialEvaluator(window=50)
        self.calls = 0

    def update(self, y: Any, y_pred: Any, log_proba: Any) -> None:
        self.inner.update(y, y_pred, log_proba)

    def update_many(self, ys: Any, preds: Any, log_probas: Any) -> None:
        self.calls += 1
        for y, p, lp in zip(ys, preds, log_probas, strict=True):
            self.inner.update(y, p, lp)

    def report(self) -> Any:
        return self.inner.report()

    def to_state(self) -> Any:
        return self.inner.to_state()

    def from_state(self, state: Any) -> None:
        self.inner.from_state(state)


def test_an_evaluator_without_update_arrays_gets_the_same_events() -> None:
    rng = random.Random(8)
    lines = _partly_labelled(7, 1500, lambda _: rng.random() > 0.1)
    reports = []
    for columns in (True, False):
        evaluator = _DictEvaluator()
        engine = Engine(
            NaiveBayes(),
            ListSource(lines),
            MemorySink(),
            evaluator=evaluator,
            batch_size=300,
            column_path=columns,
        )
        engine.run()
        reports.append(evaluator.report())
    assert reports[0] == reports[1]
    assert reports[0]["cumulative"]["n"] == sum(b'"y"' in line for line in lines)


@pytest.mark.parametrize(
    ("classes", "templated"),
    [
        ([0, 1], True),
        (["no %d", 'say "yes"', "é\u2028"], True),  # '%', quotes, escapes in keys and values
        ([False, True], True),
        ([3, 1, 2], True),
        ([0, "zero"], False),  # mixed types: the records' dicts
        ([1, "1"], False),  # the same object key twice: the records' dicts
    ],
)
def test_file_records_from_the_line_template(
    tmp_path: Any, classes: list[Any], templated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """File blocks build their records from one template per batch: byte for byte the
    dicts' JSON, for every label type, and the dicts where the template cannot say it."""
    rng = random.Random(9)
    src = tmp_path / "in.jsonl"
    events = [{**x, "y": classes[rng.randrange(len(classes))]} for x, _ in agrawal(9, 2500)]
    src.write_bytes(b"\n".join(map(orjson.dumps, events)) + b"\n")
    outputs, used = [], []
    for columns in (True, False):
        dst = tmp_path / f"out-{columns}.jsonl"
        engine = Engine(
            NaiveBayes(), FileSource(src), FileSink(dst), batch_size=500, column_path=columns
        )
        block_lines = columns_module.ColumnPath.block_lines
        texts: list[list[bytes] | None] = []

        def spy(*args: Any, _inner: Any = block_lines, _texts: Any = texts) -> Any:
            _texts.append(_inner(*args))
            return _texts[-1]

        monkeypatch.setattr(columns_module.ColumnPath, "block_lines", spy)
        engine.run()
        monkeypatch.undo()
        outputs.append(dst.read_bytes())
        used.append(sum(t is not None for t in texts))
    assert outputs[0] == outputs[1]
    assert (used[0] >= 3) is templated and used[1] == 0
    records = [orjson.loads(line) for line in outputs[0].splitlines()]
    assert [r["y_true"] for r in records] == [e["y"] for e in events]


def test_orjson_writes_float64_arrays_as_python_floats() -> None:
    """The line template cuts each class's log-probabilities out of one numpy-serialised
    array: orjson must write every float64 exactly as it writes the Python float."""
    import struct

    import numpy as np

    rng = random.Random(11)
    values = [0.0, -0.0, 1e-5, 1e16, 5e-324, -1.7976931348623157e308, math.inf, -math.inf]
    values += [math.nan, -5393605223.684329, 1e22, 0.1]
    values += [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    values += [math.log(rng.random()) for _ in range(20000)]
    as_array = orjson.dumps(np.array(values), option=orjson.OPT_SERIALIZE_NUMPY)
    assert as_array == orjson.dumps(values)


class _KeyedBlock(NamedTuple):
    """A source's block with keys, headers and a position format of its own (a Kafka
    block's shape, without a broker)."""

    payloads: list[bytes]
    first: int
    message_keys: list[bytes | None]
    message_headers: list[Headers | None]

    def positions(self) -> list[dict[str, Any]]:
        return [{"part": "a%b", "seq": self.first + i} for i in range(len(self.payloads))]

    def position_format(self) -> tuple[bytes, list[Any]]:
        # ('%' in the JSON text doubled in the format)
        return b'{"part":"a%%b","seq":%d}', [range(self.first, self.first + len(self.payloads))]

    def keys(self) -> list[bytes | None] | None:
        return None if self.message_keys.count(None) == len(self.payloads) else self.message_keys

    def headers(self) -> list[Headers | None] | None:
        return self.message_headers if any(self.message_headers) else None

    def last_timestamp(self) -> float | None:
        return None

    def records(self) -> list[Record]:
        return [
            Record(p, pos, k, None, tuple(h) if h else ())
            for p, pos, k, h in zip(
                self.payloads,
                self.positions(),
                self.message_keys,
                self.message_headers,
                strict=True,
            )
        ]


class _BlockSource(Source):
    """Payloads with keys and headers, handed out as :class:`_KeyedBlock` s."""

    def __init__(self, lines: list[bytes], keys: list[bytes | None], headers: list[Any]) -> None:
        self.lines, self.message_keys, self.message_headers = lines, keys, headers
        self.index = 0

    def next_block(self, max_records: int, timeout: float) -> _KeyedBlock | None:
        start, stop = self.index, min(self.index + max_records, len(self.lines))
        if start == stop:
            return None
        self.index = stop
        return _KeyedBlock(
            self.lines[start:stop],
            start,
            self.message_keys[start:stop],
            self.message_headers[start:stop],
        )

    def next_batch(self, max_records: int, timeout: float) -> list[Record]:
        block = self.next_block(max_records, timeout)
        return [] if block is None else block.records()

    @property
    def exhausted(self) -> bool:
        return self.index >= len(self.lines)

    def position(self) -> dict[str, Any]:
        return {"index": self.index}

    def close(self) -> None:
        pass


@pytest.mark.parametrize("ids", [True, False])
@pytest.mark.parametrize("headers", [True, False])
def test_keyed_blocks_from_the_line_template(ids: bool, headers: bool) -> None:
    """A block source's records go to a keyed sink from the line template (with ids when
    every event has one, the block's own position format), with each record's key (its
    source key, else its id's text) and headers: byte for byte the general path's."""
    rng = random.Random(12)
    events = [{**x, "y": y} for x, y in agrawal(12, 2400)]
    if ids:
        events = [{"id": i if i % 3 else f"e{i}", **e} for i, e in enumerate(events)]
    lines = [orjson.dumps(e) for e in events]
    keys = [None if rng.random() < 0.3 else b"k%d" % i for i in range(len(lines))]
    carried: list[Any] = [
        [("trace", b"t%d" % i)] if headers and rng.random() < 0.2 else None
        for i in range(len(lines))
    ]
    runs = []
    for columns in (True, False):
        sink = MemorySink()
        learner = _counting(NaiveBayes)()
        engine = Engine(
            learner,
            _BlockSource(lines, keys, carried),
            sink,
            decoder=EventDecoder(id_field="id"),
            batch_size=400,
            column_path=columns,
        )
        engine.run()
        runs.append((sink.values(), sink.calls, learner.to_state(), learner.taken))
    (fast, fast_calls, fast_state, taken), (slow, slow_calls, slow_state, _) = runs
    assert fast == slow and fast_calls == slow_calls and fast_state == slow_state
    assert taken >= 4
    records = [orjson.loads(v) for v in fast]
    assert [r["position"]["seq"] for r in records] == list(range(len(lines)))
    assert [r.get("id") for r in records] == [e.get("id") for e in events]
    expected = [
        k if k is not None else (None if not ids else str(events[i]["id"]).encode())
        for i, k in enumerate(keys)
    ]
    got = {v: (k, h) for v, k, h in fast_calls}
    assert [got.get(v, (None, None))[0] for v in fast] == expected
    assert [got.get(v, (None, None))[1] for v in fast] == carried
