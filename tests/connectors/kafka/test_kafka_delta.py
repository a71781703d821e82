"""DeltaTracker: deltas cut at arbitrary points rebuild the model, for every learner."""

from __future__ import annotations

import inspect
import math
import random
from typing import Any

import orjson
import pytest
from kafka_helpers import assert_close_tree, assert_same_model, canonical

import stream_nb
import stream_nb.seminaive
from stream_nb.base import Learner
from stream_nb.checks import default_factory, suitable_events
from stream_nb.engine.sync import DeltaTracker


def learners(package: Any) -> list[tuple[str, type[Learner]]]:
    """The learner classes a package exports, by name."""
    found = [(name, getattr(package, name)) for name in package.__all__]
    return sorted(
        (name, obj)
        for name, obj in found
        if isinstance(obj, type) and issubclass(obj, Learner) and not inspect.isabstract(obj)
    )


LEARNERS = learners(stream_nb)

#: Learners whose structure is rebuilt from the data (Chow-Liu tree, k-dependence): a
#: delta's family counts are conditioned on the delta's own structure, and merge adds
#: them only where the structures agree, so only structure-free statistics rebuild exactly.
STRUCTURE_LEARNERS = {"TAN", "KDB"}
STRUCTURE_STATS = {"parents", "families", "next_rebuild"}

#: Learners whose attribute weights are learned by steps that depend on the order of
#: the events (WeightedNB): deltas rebuild their counts exactly, their weights only by
#: the documented merge rule, so only the count statistics are compared.
ORDER_STATS = {"WeightedNB": {"weights", "evidence", "steps"}}


def assert_same_counts(actual: Learner, expected: Learner, skip: set[str]) -> None:
    """Same events learned and equal statistics (to 1e-9) apart from those in ``skip``."""
    a, b = actual.to_state(), expected.to_state()
    assert a["n_learned"] == b["n_learned"]
    assert set(a["stats"]) == set(b["stats"])
    for key in set(a["stats"]) - skip:
        assert_close(a["stats"][key], b["stats"][key], key)


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
        assert_same_counts(rebuilt, model, STRUCTURE_STATS)
        return
    if name in ORDER_STATS:
        assert_same_counts(rebuilt, model, ORDER_STATS[name])
        return
    assert_same_model(rebuilt, model)


@pytest.mark.parametrize(("name", "cls"), LEARNERS, ids=[n for n, _ in LEARNERS])
def test_deltas_rebuild_the_model_with_half_life(name: str, cls: type[Learner]) -> None:
    events = suitable_events(cls, n=150, seed=3)
    model = default_factory(cls, half_life=20.0)()
    rebuilt = rebuild_from_deltas(model, events, seed=4)
    assert rebuilt.n_learned == model.n_learned
    if name in ORDER_STATS:
        assert_same_counts(rebuilt, model, ORDER_STATS[name])
        return
    for x, _ in events[:40]:
        expected = model.predict_log_proba_one(x)
        actual = rebuilt.predict_log_proba_one(x)
        assert actual.keys() == expected.keys()
        for c in expected:
            assert math.isclose(actual[c], expected[c], rel_tol=1e-9, abs_tol=1e-9)


#: The semi-naive learners, which bin numeric features.
SEMI_NAIVE = learners(stream_nb.seminaive)


def numeric_events(n: int, seed: int) -> list:
    """Categorical features f0..f2 and numeric n0, n1 (binned by the semi-naive learners)."""
    rng = random.Random(seed)
    events = []
    for _ in range(n):
        y = rng.choice("pq")
        shift = 1.0 if y == "p" else -1.0
        f0 = rng.choice("ab" if y == "p" else "bc")
        x = {
            "f0": f0,
            "f1": f0 if rng.random() < 0.8 else rng.choice("abc"),  # depends on f0
            "f2": rng.choice("xyz"),
            "n0": rng.gauss(shift, 1.0),
            "n1": rng.gauss(0.0, 2.0),
        }
        events.append((x, y))
    return events


@pytest.mark.parametrize(("name", "cls"), SEMI_NAIVE, ids=[n for n, _ in SEMI_NAIVE])
def test_deltas_rebuild_semi_naive_models_with_numeric_features(
    name: str, cls: type[Learner]
) -> None:
    """A delta bins with the model's frozen cut points and keeps values of features still
    warming up raw, so merging never meets two different sets of cut points."""
    events = numeric_events(400, seed=5)
    model = default_factory(cls)()
    rebuilt = rebuild_from_deltas(model, events, seed=6)
    a, b = rebuilt.to_state(), model.to_state()
    assert a["n_learned"] == b["n_learned"] == len(events)
    for key in set(a["stats"]) - STRUCTURE_STATS:
        assert_close(a["stats"][key], b["stats"][key], key)


def fold_two_workers(cls: type[Learner], params: dict, events: list, seed: int) -> tuple:
    """Two workers as :class:`KafkaSync` runs them, without a broker: each learns its share
    of the events and publishes deltas at random points to one ordered "sync topic"; after
    publishing it folds the topic so far into its base and continues from a copy of it.
    Returns both bases and the events in topic order."""
    from stream_nb.engine.sync import defer_binning

    rng = random.Random(seed)
    topic: list = []  # (delta, weight, its events)
    workers: list[dict[str, Any]] = []
    for share in (events[0::2], events[1::2]):
        main = default_factory(cls, **params)()
        defer_binning(main)
        workers.append(
            {"todo": list(share), "main": main, "tracker": DeltaTracker(main), "learned": []}
        )
        workers[-1]["base"] = main.clone()
        workers[-1]["folded"] = 0

    def publish(w: dict) -> None:
        delta, weight = w["tracker"].cut()
        if delta.n_learned:
            topic.append((delta, weight, w["learned"]))
        w["learned"] = []
        for delta, weight, _ in topic[w["folded"] :]:
            DeltaTracker.apply(w["base"], Learner.from_state(delta.to_state()), weight)
        w["folded"] = len(topic)
        main = Learner.from_state(w["base"].to_state())
        defer_binning(main)
        w["tracker"].adopt(main)
        w["main"] = main

    while any(w["todo"] for w in workers):
        w = rng.choice([w for w in workers if w["todo"]])
        for _ in range(rng.randint(1, 30)):
            if w["todo"]:
                x, y = w["todo"].pop(0)
                w["main"].learn_one(x, y)
                w["learned"].append((x, y))
        if rng.random() < 0.3:
            publish(w)
    for w in workers:
        publish(w)
    publish(workers[0])  # the first also folds the second's last delta
    order = [event for _, _, learned in topic for event in learned]
    return workers[0]["base"], workers[1]["base"], order


@pytest.mark.parametrize("half_life", [None, 30.0], ids=["plain", "half_life"])
@pytest.mark.parametrize(("name", "cls"), LEARNERS, ids=[n for n, _ in LEARNERS])
def test_workers_fold_to_the_same_model_of_the_topic_order(
    name: str, cls: type[Learner], half_life: float | None
) -> None:
    """Every worker ends with the same base, bit for bit (the same fold of the same
    sequence), equal to one learner that learned the events in sync-topic order; TAN/KDB
    structures are those rebuilt from the merged statistics."""
    semi = (name, cls) in SEMI_NAIVE
    events = numeric_events(300, seed=7) if semi else suitable_events(cls, n=300, seed=7)
    params = {} if half_life is None else {"half_life": half_life}
    a: Any
    a, b, order = fold_two_workers(cls, params, events, seed=8)
    assert orjson.dumps(a.to_state(), option=orjson.OPT_NON_STR_KEYS) == orjson.dumps(
        b.to_state(), option=orjson.OPT_NON_STR_KEYS
    )
    assert sorted(map(repr, order)) == sorted(map(repr, events))  # each event once
    reference: Any = default_factory(cls, **params)()
    for x, y in order:
        reference.learn_one(x, y)
    assert a.n_learned == reference.n_learned == len(events)
    if name in STRUCTURE_LEARNERS:
        reference.rebuild()  # the structure a single daemon would build from these counts
        assert a.parents == reference.parents
        assert any(a.parents.values())  # f1 depends on f0: the structure is not empty
        mine, theirs = a.to_state()["stats"], reference.to_state()["stats"]
        for key in set(mine) - STRUCTURE_STATS:
            assert_close(mine[key], theirs[key], key)
        return
    if name in ORDER_STATS:
        assert_same_counts(a, reference, ORDER_STATS[name])
        return
    if half_life is None:
        assert_same_model(a, reference)
        return
    for x, _ in events[:40]:
        expected = reference.predict_log_proba_one(x)
        actual = a.predict_log_proba_one(x)
        assert actual.keys() == expected.keys()
        for c in expected:
            assert math.isclose(actual[c], expected[c], rel_tol=1e-9, abs_tol=1e-9)
