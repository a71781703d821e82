"""The batch kernel of TAN and KDB against one event at a time and through the engine.

As for AODE and SPODE (``test_seminaive_kernel``): every event's prediction
equals ``predict_log_proba_one`` after the events before it (to 1e-12), the
model ends up the same (states equal as JSON text), declined batches change
nothing, and the engine's column and general paths write the same bytes. The
stream has a feature that depends on two others, so KDB(k=2) scores it from
family counts, and the rebuild schedule falls inside batches.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Hashable
from typing import Any

import pytest
from _kernel_paths import assert_engine_paths_agree

from stream_nb import KDB, TAN, Learner

TOLERANCE = 1e-12

FACTORIES: dict[str, Callable[..., Learner]] = {
    "TAN": lambda **kw: TAN(rebuild_every=150, **kw),
    "TAN-min2": lambda **kw: TAN(rebuild_every=150, min_parent_count=2.0, **kw),
    "KDB1": lambda **kw: KDB(k=1, rebuild_every=150, **kw),
    "KDB2": lambda **kw: KDB(k=2, rebuild_every=150, **kw),
    "KDB2-min3": lambda **kw: KDB(k=2, rebuild_every=150, min_parent_count=3.0, **kw),
}

Event = tuple[dict[str, Any], Hashable | None, float]


def events(seed: int, n: int, *, none: float = 0.0, unlabelled: float = 0.0) -> list[Event]:
    """f1 copies f0, f2 depends on both; a class and a value of f2 appear late; None; weights."""
    rng = random.Random(seed)
    out: list[Event] = []
    for t in range(n):
        y: Hashable | None = rng.choice(["a", "b"] if t < n // 3 else ["a", "b", 3])
        yi = {"a": 0, "b": 1, 3: 2}[y]
        f0 = (yi + (rng.random() < 0.3)) % 3
        f1 = f0 if rng.random() < 0.7 else rng.randrange(3)
        f2 = (f0 + f1) % 3 if rng.random() < 0.8 else rng.randrange(3 + (t > n // 2))
        x: dict[str, Any] = {"f0": f"v{f0}", "f1": f"u{f1}", "f2": f"p{f2}", "f3": f"w{t % 2}"}
        if rng.random() < none:
            x[rng.choice(["f0", "f1", "f2", "f3"])] = None
        if rng.random() < unlabelled:
            y = None
        out.append((x, y, rng.choice([1.0, 1.0, 0.5, 2.5])))
    return out


def as_columns(batch: list[Event]) -> tuple[tuple[str, ...], list[list[Any]]]:
    names = tuple(batch[0][0])
    return names, [[x[name] for x, _y, _w in batch] for name in names]


def state(model: Learner) -> str:
    return json.dumps(model.to_state())


def _close(got: float, expected: float) -> bool:
    return abs(got - expected) <= TOLERANCE * max(1.0, abs(expected))


@pytest.mark.parametrize(("none", "unlabelled"), [(0.0, 0.0), (0.3, 0.0), (0.1, 0.2)])
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_kernel_equals_one_event_at_a_time(name: str, none: float, unlabelled: float) -> None:
    stream = events(1, 1500, none=none, unlabelled=unlabelled)
    model, ref = FACTORIES[name](), FACTORIES[name]()
    taken = rebuilt_inside = 0
    for start in range(0, len(stream), 100):
        batch = stream[start : start + 100]
        before = state(model)
        due = json.loads(before)["stats"]["next_rebuild"]
        out = model.predict_learn_columns(
            *as_columns(batch), [y for _x, y, _w in batch], [w for _x, _y, w in batch]
        )
        if out is None:
            assert state(model) == before  # declined: nothing changed
            for x, y, w in batch:
                model.predict_log_proba_one(x)
                if y is not None:
                    model.learn_one(x, y, w)
        else:
            taken += 1
            rebuilt_inside += model.to_state()["stats"]["next_rebuild"] != due
            labels, log_proba, best = out
            assert log_proba.shape == (len(batch), len(labels))
        for i, (x, y, w) in enumerate(batch):
            expected = ref.predict_log_proba_one(x)
            if out is not None:
                assert list(expected) == labels
                for j, c in enumerate(labels):
                    assert _close(log_proba[i, j], expected[c]), (start + i, c)
                assert expected[labels[best[i]]] >= max(expected.values()) - TOLERANCE
            if y is not None:
                ref.learn_one(x, y, w)
        assert state(model) == state(ref)
        assert model.n_learned == ref.n_learned
    assert taken >= 10
    assert rebuilt_inside >= 1  # a rebuild inside a batch the kernel took


def test_kdb_scores_a_feature_from_its_family_counts() -> None:
    model = FACTORIES["KDB2"]()
    for x, y, w in events(1, 1500):
        model.learn_one(x, y, w)
    assert model.parents["f2"] == ("f1", "f0")
    ref = KDB.from_state(model.to_state())
    batch = events(7, 200)
    out = model.predict_learn_columns(
        *as_columns(batch), [y for _x, y, _w in batch], [w for _x, _y, w in batch]
    )
    assert out is not None
    labels, log_proba, _best = out
    for i, (x, y, w) in enumerate(batch):
        expected = ref.predict_log_proba_one(x)
        assert all(_close(log_proba[i, j], expected[c]) for j, c in enumerate(labels))
        ref.learn_one(x, y, w)
    assert state(model) == state(ref)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_predict_learn_many_equals_one_event_at_a_time(name: str) -> None:
    stream = events(2, 900, none=0.1, unlabelled=0.1)
    model, ref = FACTORIES[name](), FACTORIES[name]()
    for start in range(0, len(stream), 150):
        batch = stream[start : start + 150]
        lps, preds, errors = model.predict_learn_many(
            [x for x, _y, _w in batch], [y for _x, y, _w in batch], [w for _x, _y, w in batch]
        )
        assert errors == {}
        for (x, y, w), lp, pred in zip(batch, lps, preds, strict=True):
            expected = ref.predict_log_proba_one(x)
            assert lp is not None and list(lp) == list(expected)
            assert all(_close(lp[c], expected[c]) for c in expected)
            if expected:
                assert expected[pred] >= max(expected.values()) - TOLERANCE
            else:  # nothing learned yet
                assert pred is None
            if y is not None:
                ref.learn_one(x, y, w)
        assert state(model) == state(ref)


@pytest.mark.parametrize(
    "change",
    ["new value", "new class", "new feature", "bad weight", "unhashable", "empty event"],
)
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_batches_the_kernel_cannot_take_change_nothing(name: str, change: str) -> None:
    model = FACTORIES[name]()
    for x, y, w in events(3, 400):
        model.learn_one(x, y, w)
    batch = events(4, 50)
    names, columns = as_columns(batch)
    ys: list[Hashable | None] = [y for _x, y, _w in batch]
    ws = [1.0] * len(batch)
    if change == "new value":
        columns[1][30] = "never-seen"
    elif change == "new class":
        ys[20] = "zz"
    elif change == "new feature":
        names, columns = (*names, "extra"), [*columns, ["e"] * len(batch)]
    elif change == "bad weight":
        ws[10] = -1.0
    elif change == "unhashable":
        columns[2][5] = ["a", "list"]
    else:
        columns = [[None if i == 7 else v for i, v in enumerate(c)] for c in columns]
    before = state(model)
    assert model.predict_learn_columns(names, columns, ys, ws) is None
    assert state(model) == before


def test_no_kernel_with_forgetting() -> None:
    """(A tracked delta keeps the kernel: it records the delta, test_seminaive_delta.py.)"""
    batch = events(5, 40)
    names, columns = as_columns(batch)
    ys = [y for _x, y, _w in batch]
    forgetting = TAN(half_life=100.0)
    for x, y, w in events(3, 200):
        forgetting.learn_one(x, y, w)
    before = state(forgetting)
    assert forgetting.predict_learn_columns(names, columns, ys) is None
    assert state(forgetting) == before


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_engine_column_path_equals_general_path(name: str) -> None:
    assert_engine_paths_agree(FACTORIES[name], events(6, 3000, none=0.15, unlabelled=0.05))
