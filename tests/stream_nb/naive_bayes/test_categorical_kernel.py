"""The exact batch kernel of CategoricalNB against the per-event path: every prediction to
1e-9 and the model after each batch exactly (same counts, same order), on streams with
new classes, new values, missing features (None and absent) and weights; the engine's
column path against its general path, byte for byte; and every batch it leaves alone."""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

import orjson
import pytest
from kernel_checks import Event, against_the_loop

from stream_nb import CategoricalNB, Engine
from stream_nb.base import Learner
from stream_nb.checks.engine import run_engine
from stream_nb.naive_bayes._arrays import MIN_BATCH, per_event_answers
from stream_nb.naive_bayes._categorical_kernel import columns_of_events


def _kernel(model: Any, xs: Any, ys: Any, ws: Any) -> Any:
    """The learner's column kernel on the batch's columns (absent features as None)."""
    found = columns_of_events(xs)
    out = None if found is None else model.predict_learn_columns(*found, ys, ws)
    return None if out is None else per_event_answers(*out)


def _stream(seed: int, n: int, *, weights: bool, uniform: float = 0.5) -> list[Event]:
    """Categorical events: values that keep appearing, a fourth class from event 700 on,
    missing values (None, or the feature left out except in a share ``uniform`` of the
    stretches of 200 events), unlabelled events, and (``weights``) real-valued weights
    in some stretches, unit weights in others."""
    missing = 0.15
    rng = random.Random(seed)
    events: list[Event] = []
    for i in range(n):
        y = rng.choice(["a", "b", "c"] + (["d"] if i > 700 and rng.random() < 0.3 else []))
        x: dict[str, Any] = {}
        for f in ("colour", "size", "shape", "flag"):
            r = rng.random()
            if r < missing / 2:
                continue  # absent
            if r < missing:
                x[f] = None
            elif f == "colour":
                x[f] = f"c{rng.randint(0, 3 + i // 40)}"  # new values all along
            elif f == "flag":
                x[f] = rng.random() < (0.8 if y == "a" else 0.3)
            else:
                x[f] = rng.choice({"size": "sml", "shape": "ox"}[f] + y)
        if (i // 200) % 4 < 4 * uniform:  # stretches without absent features (uniform keys)
            x = {f: x.get(f) for f in ("colour", "size", "shape", "flag")}
        w = 1.0
        if weights and (i // 300) % 2:
            w = rng.choice([0.3, 1.0, 2.5, 0.1])
        events.append((x, y if rng.random() > 0.1 else None, w))
    return events


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"alpha": 0.5, "fit_prior": False},
        {"max_values_per_feature": 6},  # the "other" bucket
        {"max_features": 3},  # a fourth feature is never learned
        {"class_prior": {"a": 0.5, "b": 2.0, "c": 1.0, "d": 0.1}},
    ],
)
def test_the_kernel_equals_the_per_event_loop(seed: int, params: dict[str, Any]) -> None:
    events = _stream(seed, 2500, weights=seed % 2 == 1)
    used = against_the_loop(
        lambda: CategoricalNB(**params), events, seed, _kernel, exact_state=True
    )
    assert used >= 4  # (of about ten batches: a new class or values past the cap fall back)


def test_the_learners_method_uses_the_kernel() -> None:
    events = _stream(7, 1500, weights=True)
    a, b = CategoricalNB(), CategoricalNB()
    for x, y, w in events[:50]:
        if y is not None:
            a.learn_one(x, y, w)
            b.learn_one(x, y, w)
    xs = [x for x, _, _ in events[50:700]]
    ys = [y for _, y, _ in events[50:700]]
    ws = [w for _, _, w in events[50:700]]
    got = a.predict_learn_many(xs, ys, ws)
    want = _kernel(b, xs, ys, ws)
    assert want is not None and got == want and a.to_state() == b.to_state()

    class _OtherFormulas(CategoricalNB):  # "_": not registered
        capabilities = dataclasses.replace(CategoricalNB.capabilities, column_kernel=False)

    other, ref = _OtherFormulas(), CategoricalNB()
    for x, y, w in events[:50]:
        if y is not None:
            other.learn_one(x, y, w)
            ref.learn_one(x, y, w)
    loop = Learner.predict_learn_many(ref, xs, ys, ws)
    # a subclass that declares no kernel (its formulas differ): the per-event loop
    assert other.predict_learn_many(xs, ys, ws) == loop
    assert other.predict_learn_columns(("colour",), [["c1"] * 100], ["a"] * 100) is None


def test_batches_the_kernel_leaves_to_the_per_event_path_change_nothing() -> None:
    model = CategoricalNB(max_values_per_feature=3)
    xs = [{"a": f"v{i % 3}", "b": "x"} for i in range(MIN_BATCH)]
    ys = ["p", "q"] * (MIN_BATCH // 2)
    columns = [[x["a"] for x in xs], [x["b"] for x in xs]]
    step = model.predict_learn_columns
    assert step(("a", "b"), columns, ys) is None  # nothing learned yet
    model.learn_one(xs[0], "p")
    model.learn_one(xs[1], "q")
    model.learn_one({"a": "v2", "b": "y", "c": "z"}, "q")
    before = model.to_state()
    assert step(("a", "b"), columns, ["r", *ys[1:]]) is None  # a new class
    assert step(("a", "b"), [c[:10] for c in columns], ys[:10]) is None  # short
    assert step(("a", "b"), columns, ys, [1.0] * (MIN_BATCH - 1) + [math.inf]) is None
    assert step(("a", "b"), columns, ys, ["heavy"] * MIN_BATCH) is None  # not weights
    assert step(("a", "b", "d"), [*columns, ["new"] * MIN_BATCH], ys) is None  # a new feature
    assert step(("a", "b", ("t",)), [*columns, [None] * MIN_BATCH], ys) is None  # its name
    for bad in (["u"], math.nan, b"bytes", 1e400):
        odd = [[bad, *columns[0][1:]], columns[1]]
        assert step(("a", "b"), odd, ys) is None  # a value per event rejects
    # b holds two values of three: two more in one batch are past the cap
    assert step(("a", "b"), [columns[0], ["y", "z", "t", *columns[1][3:]]], ys) is None
    assert model.to_state() == before and model.n_learned == 3
    # a feature the model never saw but holds no value for: read as missing
    assert step(("a", "b", "d"), [*columns, [None] * MIN_BATCH], ys) is not None
    # a class without a fixed prior: the per-event path leaves it out of its answers
    fixed = CategoricalNB(class_prior={"p": 1})
    fixed.learn_one(xs[0], "p")
    fixed.learn_one(xs[1], "q")
    assert fixed.predict_learn_columns(("a", "b"), columns, ys) is None


class _Counting(CategoricalNB):  # (a leading underscore: not registered as a learner)
    """CategoricalNB counting the batches its column kernel takes (the kernel unchanged)."""

    taken = 0

    def predict_learn_columns(self, *args: Any) -> Any:
        out = super().predict_learn_columns(*args)
        self.taken += out is not None
        return out


def _engine(lines: list[bytes], columns: bool, **params: Any) -> tuple[Any, ...]:
    learner = _Counting(**params)
    run = run_engine(learner, lines, column_path=columns, batch_size=200)
    return run.records, run.state, run.report, run.outcomes, learner.taken


@pytest.mark.parametrize("params", [{}, {"max_values_per_feature": 6, "alpha": 0.5}])
def test_the_engines_column_path_equals_its_general_path(params: dict[str, Any]) -> None:
    rng = random.Random(3)
    lines = []
    for i, (x, y, w) in enumerate(_stream(3, 3000, weights=True, uniform=0.75)):
        event: dict[str, Any] = {"id": i, **x} if rng.random() < 0.2 else dict(x)
        if y is not None:
            event["y"] = y
        if w != 1.0:
            event["w"] = w
        lines.append(orjson.dumps(event))
    fast = _engine(lines, True, **params)
    slow = _engine(lines, False, **params)
    assert fast[0] == slow[0]  # every prediction record, byte for byte
    assert fast[1] == slow[1]  # the model
    assert fast[2] == slow[2]  # the evaluation
    assert fast[3] == slow[3]
    assert slow[4] == 0 and fast[4] >= 3


def test_file_to_file_with_the_line_template(tmp_path: Any) -> None:
    """A file source's line blocks (records written from one template per batch) on the
    ``stream-nb demo`` categorical stream: the column path's bytes are the general path's."""
    from stream_nb.connectors.files import FileSink, FileSource
    from stream_nb.datasets import categorical_stream

    src = tmp_path / "in.jsonl"
    lines = [orjson.dumps({**x, "y": y}) for x, y in categorical_stream(4, 3000)]
    src.write_bytes(b"\n".join(lines) + b"\n")
    outputs, states, taken = [], [], []
    for columns in (True, False):
        dst = tmp_path / f"out-{columns}.jsonl"
        learner = _Counting()
        Engine(learner, FileSource(src), FileSink(dst), batch_size=500, column_path=columns).run()
        outputs.append(dst.read_bytes())
        states.append(learner.to_state())
        taken.append(learner.taken)
    assert outputs[0] == outputs[1] and states[0] == states[1]
    assert taken[0] >= 4 and taken[1] == 0
    records = [orjson.loads(line) for line in outputs[0].splitlines()]
    assert [r["n_learned"] for r in records] == list(range(3000))
