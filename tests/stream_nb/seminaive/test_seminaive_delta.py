"""Model sync on the fast path: the batch kernels of SPODE, AODE, TAN and KDB record what
a batch learned into a tracked delta themselves.

A model whose batches go through the kernel (``predict_learn_columns``, else
``predict_learn_many``) and one that learns them one event at a time (the reference
loop, ``learn_one`` recording every event) must end every delta in the very same
state, JSON for JSON: single and pair counts, the discretiser (frozen cut points,
values still buffered), TAN/KDB structure, family counts and rebuild schedule, over
streams with numbers binned by frozen cut points and a number whose cut points freeze
only while the delta is tracked, values, features and classes new to the model or to
the delta, missing values, weights, unlabelled events, and (TAN, KDB) structure
rebuilds inside batches. The engine keeps its column path while a delta is tracked,
with the same records, model and delta as its general path.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Hashable
from typing import Any

import orjson
import pytest

from stream_nb import AODE, KDB, SPODE, TAN, Engine, Learner
from stream_nb.connectors.memory import ListSource, MemorySink
from stream_nb.engine.sync import DeltaTracker

FACTORIES: dict[str, Callable[[], Learner]] = {
    "SPODE": lambda: SPODE("f0", bin_edges={"num": [-0.5, 0.5, 1.5]}, warmup=60),
    "AODE": lambda: AODE(bin_edges={"num": [-0.5, 0.5, 1.5]}, warmup=60),
    "AODE-min2": lambda: AODE(min_parent_count=2.0, bin_edges={"num": [0.5]}, warmup=60),
    "TAN": lambda: TAN(rebuild_every=45, bin_edges={"num": [-0.5, 0.5, 1.5]}, warmup=60),
    "KDB": lambda: KDB(k=2, rebuild_every=45, bin_edges={"num": [0.5]}, warmup=60),
    # forgetting: the delta decays (and renormalises) on its own, as learn_one has it
    "AODE-forget": lambda: AODE(half_life=0.8, bin_edges={"num": [0.5]}, warmup=60),
    "SPODE-forget": lambda: SPODE("f0", half_life=30.0, bin_edges={"num": [0.5]}, warmup=60),
}

Event = tuple[dict[str, Any], Hashable | None, float]


def events(seed: int, n: int) -> list[Event]:
    """String features (one gaining values as it goes), a number on frozen cut points,
    a number that appears late and warms up, None values, a class that appears late,
    weights and unlabelled events. From event ``n // 2`` on every event has "late"."""
    rng = random.Random(seed)
    out: list[Event] = []
    for t in range(n):
        y: Hashable | None = rng.choice(["a", "b"] if t < n // 3 else ["a", "b", 3])
        k = ["a", "b", 3].index(y)
        x: dict[str, Any] = {
            "f0": f"v{(k + rng.randrange(2)) % 3}",
            "f1": f"u{rng.randrange(2 + t // 250)}",
            "f2": rng.choice(["p", "q", None]) if t % 7 else None,
            "num": rng.gauss(k, 0.7),
        }
        if t >= n // 2:
            x["late"] = rng.gauss(2.0 * k, 1.0) if rng.random() > 0.05 else None
        if rng.random() < 0.06:
            y = None
        w = 1.0 if (t // 100) % 2 else rng.choice([1.0, 0.5, 2.5])
        out.append((x, y, w))
    return out


def state(model: Learner) -> str:
    """The state as JSON text, less the class name (a counting subclass has its own)."""
    return json.dumps({k: v for k, v in model.to_state().items() if k != "learner"})


def _kernel(model: Learner, batch: list[Event]) -> bool:
    """The batch through the kernel path: columns when the keys agree, else
    ``predict_learn_many`` (which hands its runs of known events to the kernel)."""
    names = tuple(batch[0][0])
    ys = [y for _x, y, _w in batch]
    ws = [w for _x, _y, w in batch]
    if all(tuple(x) == names for x, _y, _w in batch):
        columns = [[x[f] for x, _y, _w in batch] for f in names]
        if model.predict_learn_columns(names, columns, ys, ws) is not None:
            return True
    model.predict_learn_many([x for x, _y, _w in batch], ys, ws)
    return False


class _Counting:
    """Counts the batch kernel's runs (``_predict_learn_known`` taking a batch)."""

    @staticmethod
    def wrap(make: Callable[[], Learner]) -> Learner:
        model = make()

        class _Counted(type(model)):  # type: ignore[misc, valid-type]  # "_": not registered
            runs = 0

            def _predict_learn_known(self, *args: Any) -> Any:
                out = super()._predict_learn_known(*args)
                self.runs += out is not None
                return out

        return _Counted(**model.get_params())


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_the_kernel_records_the_delta_learn_one_would(name: str, seed: int) -> None:
    make = FACTORIES[name]
    assert make().capabilities.kernel_records_delta
    stream = events(seed, 1500)
    fast, slow = _Counting.wrap(make), make()
    for x, y, w in stream[:40]:
        if y is not None:
            fast.learn_one(x, y, w)
            slow.learn_one(x, y, w)
    fast.track_delta()
    slow.track_delta()
    assert fast.columns_supported  # (the engine keeps the column path)
    rng = random.Random(seed)
    i, cuts, column_batches = 40, 0, 0
    while i < len(stream):
        batch = stream[i : i + rng.choice([60, 110, 170])]
        column_batches += _kernel(fast, batch)
        Learner.predict_learn_many(slow, *map(list, zip(*batch, strict=True)))
        i += len(batch)
        assert state(fast) == state(slow)
        if rng.random() < 0.4 or i >= len(stream):  # cut: the two deltas are identical
            (fast_delta, fast_weight), (slow_delta, slow_weight) = (
                fast.cut_delta(),
                slow.cut_delta(),
            )
            assert state(fast_delta) == state(slow_delta)
            assert fast_weight == slow_weight
            assert fast_delta.n_learned == slow_delta.n_learned
            cuts += 1
    assert cuts >= 3
    assert column_batches >= 2 and fast.runs >= 8  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["SPODE", "AODE", "SPODE-forget"])
def test_applying_the_recorded_delta_rebuilds_the_model(name: str) -> None:
    """SPODE and AODE merges equal one pass over the union: a model as it was when
    tracking began, decayed and merged with the delta, is the model again."""
    make = FACTORIES[name]
    stream = events(3, 1200)
    model = make()
    for x, y, w in stream[:300]:
        if y is not None:
            model.learn_one(x, y, w)
    base = Learner.from_state(model.to_state())
    model.track_delta()
    for start in range(300, len(stream), 150):
        _kernel(model, stream[start : start + 150])
    base.apply_delta(*model.cut_delta())
    for x, _y, _w in stream[-200:]:
        expected = model.predict_log_proba_one(x)
        got = base.predict_log_proba_one(x)
        assert list(got) == list(expected)
        for c, v in expected.items():
            assert abs(got[c] - v) <= 1e-9 * max(1.0, abs(v))


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_the_delta_learns_values_past_its_cap_as_learn_one_does(name: str) -> None:
    """Values the model knows may be past the delta's cap (it met other values first):
    those events reach the delta through ``learn_one``, into its "other" bucket."""
    params = {**FACTORIES[name]().get_params(), "max_values_per_feature": 4}

    def capped() -> Learner:
        return type(FACTORIES[name]())(**params)

    rng = random.Random(4)

    def event(values: list[str]) -> Event:
        x = {"f0": f"v{rng.randrange(3)}", "f1": rng.choice(values), "num": rng.random()}
        return x, rng.choice("ab"), 1.0

    before = [event(["u0", "u1", "u2", "u3"]) for _ in range(60)]
    # the model puts u4 … u7 in its "other" bucket, the delta gives them its 4 slots; then
    # u0 … u3, known to the model, are past the delta's cap
    after = [event(["u4", "u5", "u6", "u7"]) for _ in range(40)]
    after += [event(["u0", "u1", "u2", "u3"]) for _ in range(600)]
    fast, slow = _Counting.wrap(capped), capped()
    for x, y, w in before:
        fast.learn_one(x, y, w)
        slow.learn_one(x, y, w)
    fast.track_delta()
    slow.track_delta()
    for start in range(0, len(after), 100):
        batch = after[start : start + 100]
        _kernel(fast, batch)
        Learner.predict_learn_many(slow, *map(list, zip(*batch, strict=True)))
    assert fast.runs >= 3  # type: ignore[attr-defined]
    fast_delta = fast.cut_delta()[0]
    assert state(fast_delta) == state(slow.cut_delta()[0])
    assert state(fast) == state(slow)
    value_weight = dict(fast_delta.to_state()["stats"]["store"]["value_weight"])
    assert sorted(v for v, _w in value_weight["f1"] if v is not None) == ["u4", "u5", "u6", "u7"]
    assert None in dict(value_weight["f1"])  # u0 … u3: the delta's "other" bucket


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_the_engine_keeps_its_column_path_under_model_sync(name: str) -> None:
    make = FACTORIES[name]
    stream = events(5, 2400)
    lines = []
    for x, y, w in stream:
        event = dict(x)
        if y is not None:
            event["y"] = y
        if w != 1.0:
            event["w"] = w
        lines.append(orjson.dumps(event))
    results = []
    for columns in (True, False):
        learner = _Counting.wrap(make)
        for x, y, w in stream[:100]:  # a model that knows the classes and values
            if y is not None:
                learner.learn_one(x, y, w)
        tracker = DeltaTracker(learner)
        sink = MemorySink()
        engine = Engine(learner, ListSource(lines), sink, batch_size=200, column_path=columns)
        engine.run()
        delta, weight = tracker.cut()
        results.append((sink.values(), state(learner), state(delta), weight, learner.runs))  # type: ignore[attr-defined]
    fast, slow = results
    assert fast[0] == slow[0]  # every prediction record, byte for byte
    assert fast[1] == slow[1]  # the model
    assert fast[2] == slow[2] and fast[3] == slow[3]  # the delta
    assert fast[4] >= 5


def test_untracked_after_a_cut_less_stop() -> None:
    """``stop_delta`` ends recording: the kernel then learns the model alone."""
    model = AODE()
    stream = events(6, 400)
    for x, y, w in stream[:100]:
        if y is not None:
            model.learn_one(x, y, w)
    model.track_delta()
    delta = model.delta
    model.stop_delta()
    before = copy.deepcopy(delta)
    _kernel(model, stream[100:250])
    assert model.delta is None
    assert state(delta) == state(before)  # type: ignore[arg-type]
