"""The batch kernel of AODE and SPODE against one event at a time and through the engine.

The kernel (``predict_learn_columns``, and ``predict_learn_many``) must give each
event the prediction ``predict_log_proba_one`` gives it after the events
before it (to 1e-12), leave the very same model (states equal as JSON text),
and decline, changing nothing, every batch it cannot take. Through the engine
its column path and its general path write the same records byte for byte.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Hashable
from typing import Any

import pytest
from _kernel_paths import assert_engine_paths_agree

from stream_nb import AODE, SPODE, Learner
from stream_nb.seminaive import _products

TOLERANCE = 1e-12

FACTORIES: dict[str, Callable[..., Learner]] = {
    "AODE": AODE,
    "AODE-min2": lambda **kw: AODE(min_parent_count=2.0, **kw),
    "SPODE": lambda **kw: SPODE("f0", **kw),
    # forgetting: α / scale per event; half_life=0.7 renormalises every ~70 units of weight
    "AODE-forget": lambda **kw: AODE(half_life=25.0, **kw),
    "AODE-min2-forget": lambda **kw: AODE(min_parent_count=2.0, half_life=0.7, **kw),
    "SPODE-forget": lambda **kw: SPODE("f0", half_life=0.7, **kw),
}

Event = tuple[dict[str, Any], Hashable | None, float]


def events(seed: int, n: int, *, none: float = 0.0, unlabelled: float = 0.0) -> list[Event]:
    """String features; a value and a class that appear late; None values; weights."""
    rng = random.Random(seed)
    out: list[Event] = []
    for t in range(n):
        y: Hashable | None = rng.choice(["a", "b"] if t < n // 3 else ["a", "b", 3])
        base = rng.randrange(3)
        x: dict[str, Any] = {
            "f0": f"v{(base + (y == 'a')) % 3}",
            "f1": f"u{rng.randrange(2 + (t > n // 2))}",
            "f2": rng.choice(["p", "q"]) if y != 3 else "q",
            "f3": f"w{(base + rng.randrange(2)) % 3}",
        }
        if rng.random() < none:
            x[rng.choice(["f1", "f2", "f3"])] = None
        if rng.random() < unlabelled:
            y = None
        out.append((x, y, rng.choice([1.0, 1.0, 0.5, 2.5])))
    return out


def as_columns(batch: list[Event]) -> tuple[tuple[str, ...], list[list[Any]]]:
    names = tuple(batch[0][0])
    return names, [[x[name] for x, _y, _w in batch] for name in names]


def state(model: Learner) -> str:
    return json.dumps(model.to_state())


@pytest.mark.parametrize(
    ("none", "unlabelled", "variant"),
    [
        (0.0, 0.0, "plain"),
        (0.3, 0.0, "plain"),
        (0.1, 0.2, "plain"),
        (0.0, 0.0, "chunked"),
        (0.1, 0.2, "chunked"),
        (0.1, 0.0, "one event per buffer"),
    ],
)
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_kernel_equals_one_event_at_a_time(
    name: str, none: float, unlabelled: float, variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if variant == "chunked":  # products of 2 or 3 ratios, as for wide events: logs added
        monkeypatch.setattr(_products, "_LOG_TINY", -15.0)
    elif variant == "one event per buffer":
        monkeypatch.setattr(_products, "BUFFER_BYTES", 1)
    stream = events(1, 1200, none=none, unlabelled=unlabelled)
    model, ref = FACTORIES[name](), FACTORIES[name]()
    taken = 0
    for start in range(0, len(stream), 100):
        batch = stream[start : start + 100]
        before = state(model)
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
            labels, log_proba, best = out
            assert log_proba.shape == (len(batch), len(labels))
        for i, (x, y, w) in enumerate(batch):
            expected = ref.predict_log_proba_one(x)
            if out is not None:
                assert list(expected) == labels
                for j, c in enumerate(labels):
                    assert abs(log_proba[i, j] - expected[c]) <= TOLERANCE * max(
                        1.0, abs(expected[c])
                    ), (start + i, c)
                top = max(expected.values())
                assert expected[labels[best[i]]] >= top - TOLERANCE
            if y is not None:
                ref.learn_one(x, y, w)
        assert state(model) == state(ref)
        assert model.n_learned == ref.n_learned
    assert taken >= 6


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_predict_learn_many_equals_one_event_at_a_time(name: str) -> None:
    stream = events(2, 600, none=0.1, unlabelled=0.1)
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
            for c in expected:
                assert abs(lp[c] - expected[c]) <= TOLERANCE * max(1.0, abs(expected[c]))
            if expected:
                assert expected[pred] >= max(expected.values()) - TOLERANCE
            else:  # nothing learned yet
                assert pred is None
            if y is not None:
                ref.learn_one(x, y, w)
        assert state(model) == state(ref)


def _learned(name: str) -> Learner:
    model = FACTORIES[name]()
    for x, y, w in events(3, 300):
        model.learn_one(x, y, w)
    return model


@pytest.mark.parametrize(
    "change",
    ["new value", "new class", "new feature", "bad weight", "unhashable", "empty event"],
)
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_batches_the_kernel_cannot_take_change_nothing(name: str, change: str) -> None:
    model = _learned(name)
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


def test_no_kernel_with_a_best_parent() -> None:
    """SPODE(parent=None) may change its parent with every event: one event at a time.
    (Forgetting and a tracked delta keep the kernel: see above and test_seminaive_delta.py.)"""
    batch = events(5, 40)
    names, columns = as_columns(batch)
    ys = [y for _x, y, _w in batch]
    best_parent = SPODE()
    for x, y, w in events(3, 200):
        best_parent.learn_one(x, y, w)
    before = state(best_parent)
    assert best_parent.predict_learn_columns(names, columns, ys) is None
    assert state(best_parent) == before


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_engine_column_path_equals_general_path(name: str) -> None:
    assert_engine_paths_agree(FACTORIES[name], events(6, 3000, none=0.15, unlabelled=0.05))
