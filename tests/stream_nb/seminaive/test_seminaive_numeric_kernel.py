"""The batch kernels with discretised numeric features, once their cut points are frozen.

During a feature's warm-up the kernels decline (its values are not items
yet); afterwards a number is binned as encoding bins it (NaN missing, ±inf in
the end bins) and the kernel must equal one event at a time (to 1e-12, the
same state), through ``predict_learn_columns``, ``predict_learn_many`` and the engine.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Hashable
from typing import Any

import orjson
import pytest

from stream_nb import AODE, KDB, SPODE, TAN, Learner
from stream_nb.checks.engine import run_engine

TOLERANCE = 1e-12

FACTORIES: dict[str, Callable[[], Learner]] = {
    "AODE": lambda: AODE(warmup=40, n_bins=4),
    "SPODE": lambda: SPODE("n0", warmup=40, n_bins=4),
    "TAN": lambda: TAN(warmup=40, n_bins=4, rebuild_every=150),
    "KDB": lambda: KDB(k=2, warmup=40, n_bins=4, rebuild_every=150, strategy="width"),
}

Event = tuple[dict[str, Any], Hashable | None, float]


def events(seed: int, n: int) -> list[Event]:
    """Two numeric features (a float, an int), a categorical one; NaN, ±inf, None."""
    rng = random.Random(seed)
    out: list[Event] = []
    for _ in range(n):
        y = rng.choice(["a", "b", "c"])
        yi = "abc".index(y)
        n0: Any = rng.gauss(yi, 1.0)
        n1: Any = rng.randrange(10) + 3 * yi
        r = rng.random()
        if r < 0.03:
            n0 = math.nan
        elif r < 0.05:
            n0 = rng.choice([math.inf, -math.inf])
        elif r < 0.08:
            n1 = None
        x = {"n0": n0, "n1": n1, "c": f"v{(yi + (rng.random() < 0.3)) % 3}"}
        out.append((x, y, rng.choice([1.0, 1.0, 0.5])))
    return out


def state(model: Learner) -> str:
    return json.dumps(model.to_state())


def _close(got: float, expected: float) -> bool:
    return abs(got - expected) <= TOLERANCE * max(1.0, abs(expected))


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_kernel_with_numbers_equals_one_event_at_a_time(name: str) -> None:
    stream = events(1, 1500)
    model, ref = FACTORIES[name](), FACTORIES[name]()
    taken = 0
    for start in range(0, len(stream), 100):
        batch = stream[start : start + 100]
        names = tuple(batch[0][0])
        columns = [[x[f] for x, _y, _w in batch] for f in names]
        before = state(model)
        out = model.predict_learn_columns(
            names, columns, [y for _x, y, _w in batch], [w for _x, _y, w in batch]
        )
        if out is None:
            assert state(model) == before
            for x, y, w in batch:
                model.learn_one(x, y, w)
        else:
            taken += 1
        for i, (x, y, w) in enumerate(batch):
            expected = ref.predict_log_proba_one(x)
            if out is not None:
                labels, log_proba, _best = out
                assert list(expected) == labels
                assert all(_close(log_proba[i, j], expected[c]) for j, c in enumerate(labels))
            ref.learn_one(x, y, w)
        assert state(model) == state(ref)
    assert taken >= 10  # every batch after the warm-up (and the first new bins)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_predict_learn_many_with_numbers(name: str) -> None:
    stream = events(2, 900)
    model, ref = FACTORIES[name](), FACTORIES[name]()
    for start in range(0, len(stream), 150):
        batch = stream[start : start + 150]
        lps, _preds, errors = model.predict_learn_many(
            [x for x, _y, _w in batch], [y for _x, y, _w in batch], [w for _x, _y, w in batch]
        )
        assert errors == {}
        for (x, y, w), lp in zip(batch, lps, strict=True):
            expected = ref.predict_log_proba_one(x)
            assert lp is not None and list(lp) == list(expected)
            assert all(_close(lp[c], expected[c]) for c in expected)
            ref.learn_one(x, y, w)
        assert state(model) == state(ref)


@pytest.mark.parametrize("value", ["text", True, 2**60])
def test_numbers_the_kernel_cannot_take_change_nothing(value: Any) -> None:
    model = FACTORIES["TAN"]()
    for x, y, w in events(3, 400):
        model.learn_one(x, y, w)
    batch = events(4, 30)
    column = [x["n1"] for x, _y, _w in batch]
    column[5] = value  # a string or a bool: categorical; an int past 2**53: the general path
    before = state(model)
    out = model.predict_learn_columns(
        ("n0", "n1", "c"),
        [[x["n0"] for x, _y, _w in batch], column, [x["c"] for x, _y, _w in batch]],
        [y for _x, y, _w in batch],
    )
    assert out is None
    assert state(model) == before


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_engine_column_path_equals_general_path_with_numbers(name: str) -> None:
    lines = []
    for i, (x, y, w) in enumerate(events(6, 2000)):
        event = {
            "id": i,
            **{f: (None if isinstance(v, float) and v != v else v) for f, v in x.items()},
        }
        if isinstance(event["n0"], float) and math.isinf(event["n0"]):
            event["n0"] = None  # JSON has no infinity
        lines.append(orjson.dumps({**event, "y": y, "w": w}))
    make = FACTORIES[name]

    class Counting(type(make())):  # type: ignore[misc]
        taken = 0

        def predict_learn_columns(self, *args: Any) -> Any:
            out = super().predict_learn_columns(*args)
            self.taken += out is not None
            return out

    outputs = []
    taken = []
    for columns in (True, False):
        learner = Counting(**make().get_params())
        run = run_engine(learner, lines, column_path=columns)
        outputs.append((run.records, run.state, run.report))
        taken.append(learner.taken)
    assert outputs[0] == outputs[1]
    assert taken[0] >= 10 and taken[1] == 0, taken
