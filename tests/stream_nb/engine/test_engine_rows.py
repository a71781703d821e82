"""The engine's row path (token events through ``predict_learn_rows``) against its
general path (``Engine(column_path=False)``): the same prediction records and dead
letters byte for byte, the same model, evaluation and outcomes, for each text
learner, on seeded Zipf streams with new classes, new tokens, unlabelled events,
ids, weights, negative counts and empty events."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from stream_nb import (
    BernoulliNB,
    ComplementNB,
    Engine,
    EventDecoder,
    Learner,
    MultinomialNB,
)
from stream_nb.checks.engine import run_engine
from stream_nb.connectors.files import FileSink, FileSource
from stream_nb.connectors.memory import ListSource, MemorySink
from stream_nb.datasets import zipf_text
from stream_nb.engine.rows import rows_of

LEARNERS: dict[str, Callable[[], Learner]] = {
    "multinomial": MultinomialNB,
    "complement": ComplementNB,
    "complement-norm": lambda: ComplementNB(norm=True),
    "bernoulli": BernoulliNB,
    "multinomial-forgetting": lambda: MultinomialNB(half_life=300),
    "complement-norm-forgetting": lambda: ComplementNB(norm=True, half_life=300),
    "bernoulli-forgetting": lambda: BernoulliNB(half_life=300),
    "multinomial-prior": lambda: MultinomialNB(class_prior={0: 1, 1: 2, 2: 3, "late": 0.5}),
    "bernoulli-prior": lambda: BernoulliNB(class_prior={0: 1, 1: 2, 2: 3, "late": 0.5}),
}


def _lines(
    n: int,
    *,
    seed: int,
    nested: bool = True,
    ids: bool = False,
    weights: bool = False,
    bad: float = 0.0,
) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i, (x, y) in enumerate(zipf_text(seed, n, vocabulary=1500, length=(1, 20), classes=3)):
        label: Any = y if rng.random() > 0.1 else None
        if i > n // 2 and label is not None and rng.random() < 0.05:
            label = "late"  # a class first met mid-stream
        if rng.random() < bad:
            x = dict(x)
            x[next(iter(x))] = -2  # a negative count: a dead letter for the count learners
        if rng.random() < bad / 2:
            x = {}  # no features: rejected as missing_features
        obj: dict[str, Any] = {"x": x} if nested else dict(x)
        if label is not None:
            obj["y"] = label
        if ids and rng.random() < 0.5:
            obj["id"] = f"e{i}"
        if weights and rng.random() < 0.3:
            obj["w"] = rng.choice([2, 3, 0.5])
        out.append(orjson.dumps(obj))
    return out


def _counting(make: Callable[[], Learner]) -> Learner:
    learner = make()

    class _Counting(type(learner)):  # type: ignore[misc] # (not registered: leading "_")
        taken = 0

        def predict_learn_rows(self, *args: Any) -> Any:
            out = super().predict_learn_rows(*args)
            self.taken += out is not None
            return out

    counting = _Counting(**learner.get_params())
    return counting


def _run(lines: list[bytes], make: Callable[[], Learner], *, rows: bool, **kwargs: Any) -> Any:
    learner = _counting(make)
    decoder = EventDecoder(nonnegative=type(learner).capabilities.nonnegative_counts)
    run = run_engine(learner, lines, column_path=rows, batch_size=150, decoder=decoder, **kwargs)
    return run.records, run.dead_letters, run.state, run.report, run.summary, learner


def _both(lines: list[bytes], make: Callable[[], Learner], **kwargs: Any) -> int:
    fast = _run(lines, make, rows=True, **kwargs)
    slow = _run(lines, make, rows=False, **kwargs)
    assert fast[0] == slow[0]  # every prediction record, byte for byte
    assert fast[1] == slow[1]  # every dead letter
    assert fast[2] == slow[2]  # the model
    assert fast[3] == slow[3]  # the evaluation
    assert fast[4].outcomes == slow[4].outcomes
    assert fast[4].rejected == slow[4].rejected
    assert slow[5].taken == 0
    return int(fast[5].taken)


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_both_paths_agree(name: str) -> None:
    taken = _both(_lines(3000, seed=1, ids=True, weights=True, bad=0.003), LEARNERS[name])
    assert taken >= 3  # (forgetting and real weights included)


@pytest.mark.parametrize("name", ["multinomial", "complement-norm", "bernoulli"])
def test_flat_events_unit_weights(name: str) -> None:
    assert _both(_lines(2500, seed=2, nested=False), LEARNERS[name]) >= 8


def test_negative_counts_are_dead_letters_on_both_paths() -> None:
    lines = _lines(2000, seed=3, bad=0.002)
    fast = _run(lines, MultinomialNB, rows=True)
    assert fast[4].rejected.get("negative_count", 0) > 0
    assert _both(lines, MultinomialNB) >= 3


def test_bernoulli_under_a_nonnegative_decoder() -> None:
    """A learner without the non-negative capability: the engine makes the decoder's check."""
    lines = _lines(1500, seed=4, bad=0.01)
    fast = _run(lines, BernoulliNB, rows=True)
    assert "negative_count" not in fast[4].rejected  # (its own decoder accepts them)
    for rows in (True, False):
        learner = _counting(BernoulliNB)
        dead = MemorySink()
        Engine(
            learner,
            ListSource(lines),
            MemorySink(),
            dead_letters=dead,
            decoder=EventDecoder(nonnegative=True),
            batch_size=150,
            column_path=rows,
        ).run()
        assert len(dead.values()) > 0
        if rows:
            fast_state, fast_dead = learner.to_state(), dead.values()
        else:
            assert learner.to_state() == fast_state
            assert dead.values() == fast_dead


@pytest.mark.parametrize("name", ["multinomial", "bernoulli"])
def test_values_the_kernels_refuse(name: str) -> None:
    """Values that are not counts (a list, a string, a boolean): the general path's
    rejections, on both paths."""
    lines = _lines(1200, seed=7)
    lines[100] = b'{"x": {"a": [1], "b": 1}, "y": 0}'
    lines[400] = b'{"x": {"a": "text", "b": 1}, "y": 1}'
    lines[700] = b'{"x": {"a": true, "b": 1}, "y": 1}'
    assert _both(lines, LEARNERS[name]) >= 1


def test_top_k_and_a_loss_matrix() -> None:
    lines = _lines(1500, seed=5)
    assert _both(lines, MultinomialNB, top_k=1) >= 3
    loss = {0: {0: 0, 1: 1, 2: 1}, 1: {0: 5, 1: 0, 2: 1}, 2: {0: 1, 1: 1, 2: 0}}
    assert _both(lines[:700], MultinomialNB, loss_matrix=loss) == 0  # decisions per event


def test_a_tracked_delta_keeps_the_row_path() -> None:
    """Model sync records every learned event into the delta on both paths."""
    lines = _lines(1500, seed=8)
    deltas = []
    for rows in (True, False):
        learner = _counting(MultinomialNB)
        learner.track_delta()
        sink = MemorySink()
        Engine(
            learner,
            ListSource(lines),
            sink,
            decoder=EventDecoder(nonnegative=True),
            batch_size=150,
            column_path=rows,
        ).run()
        assert learner.delta is not None
        deltas.append((sink.values(), learner.delta.to_state(), learner.delta_weight))
        if rows:
            assert learner.taken >= 3
    assert deltas[0] == deltas[1]


def test_file_to_file(tmp_path: Any) -> None:
    """A line source's blocks (records from the line template) and file positions."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(_lines(2000, seed=6)) + b"\n")
    outputs = []
    for rows in (True, False):
        dst = tmp_path / f"out-{rows}.jsonl"
        learner = _counting(ComplementNB)
        engine = Engine(
            learner,
            FileSource(src),
            FileSink(dst),
            decoder=EventDecoder(nonnegative=True),
            batch_size=300,
            column_path=rows,
        )
        engine.run()
        outputs.append((dst.read_bytes(), learner.to_state()))
    assert outputs[0] == outputs[1]
    records = [orjson.loads(line) for line in outputs[0][0].splitlines()]
    assert [r["position"]["line"] for r in records] == list(range(1, 2001))


def test_rows_of_mirrors_the_decoder() -> None:
    decoder = EventDecoder()
    objs = [{"x": {"a": 1}, "y": "p", "id": 3}, {"x": {"b": 2}, "w": 2}]
    assert rows_of(decoder, objs) == ([{"a": 1}, {"b": 2}], ["p", None], [3, None], [1.0, 2.0])
    flat = [{"a": 1, "y": "p"}, {"b": 2, "x": 5}]  # "x" not an object: a flat feature
    assert rows_of(decoder, flat) == ([{"a": 1}, {"b": 2, "x": 5}], ["p", None], None, None)
    assert rows_of(decoder, [{"x": {"a": 1}, "extra": 1}]) is None  # another top-level key
    assert rows_of(decoder, [{"x": {}, "y": 1}]) is None  # no features
    assert rows_of(decoder, [{"x": {"a": [1]}}], check_nonnegative=True) is None  # not a scalar
    assert rows_of(decoder, [{"x": {"a": 1}, "w": -1}]) is None  # a bad weight
    assert rows_of(decoder, [{"x": {"a": -1}}], check_nonnegative=True) is None
    assert rows_of(EventDecoder(shape="nested"), [{"a": 1}]) is None
    columns = ({"x": {"a": 1}, "y": 1}, [[{"a": 1}, {"b": 1}], [1, 2]])
    assert rows_of(decoder, [], columns) == ([{"a": 1}, {"b": 1}], [1, 2], None, None)
    assert rows_of(decoder, [], ({"a": 1, "y": 1}, [[1, 2], [1, 2]])) is None  # flat, uniform
