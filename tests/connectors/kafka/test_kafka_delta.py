"""DeltaTracker: deltas cut at arbitrary points rebuild the model, for every learner."""

from __future__ import annotations

import math
import random

import pytest
from kafka_helpers import assert_close_tree, assert_same_model, canonical

from connectors.kafka import DeltaTracker
from stream_nb.base import Learner
from stream_nb.checks import default_factory, suitable_events

LEARNERS = sorted(Learner._registry.items())

#: Learners whose structure is rebuilt from the data (Chow-Liu tree, k-dependence): a
#: delta's family counts are conditioned on the delta's own structure, and merge adds
#: them only where the structures agree, so only structure-free statistics rebuild exactly.
STRUCTURE_LEARNERS = {"TAN", "KDB"}
STRUCTURE_STATS = {"parents", "families", "next_rebuild"}


def assert_close(a: object, b: object, path: str) -> None:
    assert_close_tree(canonical(a), canonical(b), 1e-9, path)


def rebuild_from_deltas(learner: Learner, events: list, seed: int) -> Learner:
    """Learn ``events`` into ``learner`` while cutting deltas at random points; replay them."""
    rng = random.Random(seed)
    tracker = DeltaTracker(learner)
    rebuilt = learner.clone()
    batch = getattr(learner, "predict_learn_many", None)  # the engine's batch path
    i = 0
    while i < len(events):
        if batch is not None and rng.random() < 0.5:
            chunk = events[i : i + rng.randint(1, 12)]
            ws = [2.0 if rng.random() < 0.2 else 1.0 for _ in chunk]
            learner.predict_learn_many([x for x, _ in chunk], [y for _, y in chunk], ws)
            i += len(chunk)
        else:
            x, y = events[i]
            learner.learn_one(x, y, 2.0 if rng.random() < 0.2 else 1.0)
            i += 1
        if rng.random() < 0.1:
            DeltaTracker.apply(rebuilt, *tracker.cut())
    DeltaTracker.apply(rebuilt, *tracker.cut())
    return rebuilt


@pytest.mark.parametrize(("name", "cls"), LEARNERS, ids=[n for n, _ in LEARNERS])
def test_deltas_rebuild_the_model_exactly(name: str, cls: type[Learner]) -> None:
    events = suitable_events(cls, n=150, seed=1)
    model = default_factory(cls)()
    rebuilt = rebuild_from_deltas(model, events, seed=2)
    if name in STRUCTURE_LEARNERS:
        a, b = rebuilt.to_state(), model.to_state()
        assert a["n_learned"] == b["n_learned"]
        for key in set(a["stats"]) - STRUCTURE_STATS:
            assert_close(a["stats"][key], b["stats"][key], key)
        return
    assert_same_model(rebuilt, model)


@pytest.mark.parametrize(("name", "cls"), LEARNERS, ids=[n for n, _ in LEARNERS])
def test_deltas_rebuild_the_model_with_half_life(name: str, cls: type[Learner]) -> None:
    events = suitable_events(cls, n=150, seed=3)
    model = default_factory(cls, half_life=20.0)()
    rebuilt = rebuild_from_deltas(model, events, seed=4)
    assert rebuilt.n_learned == model.n_learned
    for x, _ in events[:40]:
        expected = model.predict_log_proba_one(x)
        actual = rebuilt.predict_log_proba_one(x)
        assert actual.keys() == expected.keys()
        for c in expected:
            assert math.isclose(actual[c], expected[c], rel_tol=1e-9, abs_tol=1e-9)
