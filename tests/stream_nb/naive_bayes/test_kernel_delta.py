"""Model sync on the fast path: the batch kernels of GaussianNB, NaiveBayes and
CategoricalNB record what a batch learned into a tracked delta themselves. The delta
equals (to 1e-12) the one ``learn_one`` records event by event, applying it to a copy
of the model as it was rebuilds the model, and the engine keeps its column path while a
delta is tracked, with the same records, model and delta as its general path."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from kernel_checks import Event, close

from stream_nb import CategoricalNB, Engine, GaussianNB, NaiveBayes
from stream_nb.base import Learner
from stream_nb.connectors.memory import ListSource, MemorySink
from stream_nb.datasets import agrawal
from stream_nb.engine.sync import DeltaTracker
from stream_nb.naive_bayes._arrays import per_event_answers
from stream_nb.naive_bayes._categorical_kernel import columns_of_events

DELTA_TOL = 1e-12


def _agrawal(seed: int, n: int, nominal: bool) -> list[Event]:
    rng = random.Random(seed)
    return [
        (x, y if rng.random() > 0.1 else None, rng.choice([1.0, 1.0, 0.5, 3.0]))
        for x, y in agrawal(seed, n, nominal=nominal)
    ]


def _categorical(seed: int, n: int) -> list[Event]:
    rng = random.Random(seed)
    events: list[Event] = []
    for i in range(n):
        y = rng.choice("pqr" if i > 400 else "pq")
        x = {
            "colour": f"c{rng.randint(0, 3 + i // 50)}",
            "size": rng.choice(["s", "m", "l", None]),
            "flag": rng.random() < (0.7 if y == "p" else 0.2),
        }
        w = 1.0 if (i // 250) % 2 else rng.choice([0.5, 1.0, 2.0])
        events.append((x, y if rng.random() > 0.1 else None, w))
    return events


CASES: list[tuple[Callable[[], Learner], Callable[[int, int], list[Event]]]] = [
    (GaussianNB, lambda seed, n: _agrawal(seed, n, nominal=False)),
    (NaiveBayes, lambda seed, n: _agrawal(seed, n, nominal=True)),
    (CategoricalNB, _categorical),
]
#: binned numbers: the bins freeze within the first 60 events, learned one at a time
BINNED = (lambda: NaiveBayes(numeric="bins", warmup=30), lambda s, n: _agrawal(s, n, True))


def _kernel(model: Learner, xs: Any, ys: Any, ws: Any) -> Any:
    found = columns_of_events(xs)
    out = None if found is None else model.predict_learn_columns(*found, ys, ws)
    return None if out is None else per_event_answers(*out)


@pytest.mark.parametrize(("make", "stream"), [*CASES, BINNED])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_kernel_records_the_delta_learn_one_would(make: Any, stream: Any, seed: int) -> None:
    events = stream(seed, 2400)
    fast, slow = make(), make()
    assert type(fast).capabilities.kernel_records_delta
    for x, y, w in events[:60]:
        if y is not None:
            fast.learn_one(x, y, w)
            slow.learn_one(x, y, w)
    base = Learner.from_state(fast.to_state())  # the model as it was when tracking began
    fast.track_delta()
    slow.track_delta()
    assert fast.columns_supported  # (the engine keeps the column path)
    rng = random.Random(seed)
    i, used = 60, 0
    while i < len(events):
        batch = events[i : i + rng.choice([64, 150, 400])]
        xs = [dict(x) for x, _, _ in batch]
        ys = [y for _, y, _ in batch]
        ws = [w for _, _, w in batch]
        if _kernel(fast, xs, ys, ws) is None:
            Learner.predict_learn_many(fast, xs, ys, ws)  # learn_one records it
        else:
            used += 1
        Learner.predict_learn_many(slow, xs, ys, ws)
        i += len(batch)
    assert used >= 4
    (fast_delta, fast_weight), (slow_delta, slow_weight) = fast.cut_delta(), slow.cut_delta()
    assert (
        fast_delta.n_learned
        == slow_delta.n_learned
        == sum(y is not None for _, y, _ in events[60:])
    )
    assert abs(fast_weight - slow_weight) <= DELTA_TOL * slow_weight
    close(_normal(fast_delta), _normal(slow_delta), tol=DELTA_TOL)
    base.apply_delta(fast_delta, fast_weight)
    close(_normal(base), _normal(fast), tol=DELTA_TOL)


@pytest.mark.parametrize("make", [NaiveBayes, CategoricalNB])
def test_with_a_value_cap_the_delta_is_recorded_event_by_event(make: Any) -> None:
    """A delta applies ``max_values_per_feature`` to the values it learns itself: while
    one is tracked, the kernel leaves a batch whose values may meet the cap to the
    per-event path."""
    rng = random.Random(3)
    events = [({**x, "num": rng.gauss(0.0, 1.0)}, y, w) for x, y, w in _categorical(3, 600)]
    model, loop = make(max_values_per_feature=4), make(max_values_per_feature=4)
    for x, y, w in events[:60]:
        if y is not None:
            model.learn_one(x, y, w)
            loop.learn_one(x, y, w)
    xs = [dict(x) for x, _, _ in events[60:]]
    ys = [y for _, y, _ in events[60:]]
    ws = [w for _, _, w in events[60:]]
    untracked = copy.deepcopy(model)
    assert _kernel(untracked, xs[:100], ys[:100], ws[:100]) is not None
    model.track_delta()
    loop.track_delta()
    assert _kernel(model, xs, ys, ws) is None
    model.predict_learn_many(xs, ys, ws)
    Learner.predict_learn_many(loop, xs, ys, ws)
    assert model.cut_delta()[0].to_state() == loop.cut_delta()[0].to_state()


@pytest.mark.parametrize("make", [NaiveBayes, CategoricalNB])
def test_the_kernel_records_the_delta_while_the_cap_cannot_bind(make: Any) -> None:
    """With a cap (the daemon bounds every feature to 10,000 values), the kernel keeps
    recording the delta itself for the batches whose values meet the cap neither in the
    model nor in the delta, and leaves the others to the per-event path: the delta and
    the model are those ``learn_one`` gives."""
    rng = random.Random(5)
    events = _categorical(5, 1500)
    if make is NaiveBayes:
        events = [({**x, "num": rng.gauss(0.0, 1.0)}, y, w) for x, y, w in events]
    fast, slow = make(max_values_per_feature=12), make(max_values_per_feature=12)
    for x, y, w in events[:60]:
        if y is not None:
            fast.learn_one(x, y, w)
            slow.learn_one(x, y, w)
    fast.track_delta()
    slow.track_delta()
    used = declined = 0
    for i in range(60, len(events), 120):
        batch = events[i : i + 120]
        xs = [dict(x) for x, _, _ in batch]
        ys = [y for _, y, _ in batch]
        ws = [w for _, _, w in batch]
        if _kernel(fast, xs, ys, ws) is None:
            declined += 1
            Learner.predict_learn_many(fast, xs, ys, ws)  # learn_one records it
        else:
            used += 1
        Learner.predict_learn_many(slow, xs, ys, ws)
    assert used >= 2 and declined >= 2  # (the colours outgrow the cap part way)
    (fast_delta, fast_weight), (slow_delta, slow_weight) = fast.cut_delta(), slow.cut_delta()
    assert fast_delta.n_learned == slow_delta.n_learned
    assert abs(fast_weight - slow_weight) <= DELTA_TOL * slow_weight
    close(_normal(fast_delta), _normal(slow_delta), tol=DELTA_TOL)
    close(_normal(fast), _normal(slow), tol=DELTA_TOL)


def _normal(model: Learner) -> dict[str, Any]:
    """The state with every ``[key, value]`` pair list as a dict (order aside: a delta
    merged from a batch meets features by name, not in the order learning met them)."""

    def walk(value: Any) -> Any:
        if (
            isinstance(value, list)
            and value
            and all(
                isinstance(p, list) and len(p) == 2 and not isinstance(p[0], (list, dict))
                for p in value
            )
        ):
            keys = [orjson.dumps(p[0]) for p in value]
            if len(set(keys)) == len(keys):
                return {k: walk(p[1]) for k, p in zip(keys, value, strict=True)}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    state: dict[str, Any] = walk(model.to_state())
    return state


@pytest.mark.parametrize(("make", "stream"), CASES)
def test_the_engine_keeps_its_column_path_under_model_sync(make: Any, stream: Any) -> None:
    lines = []
    for x, y, w in stream(5, 3000):
        event = dict(x)
        if y is not None:
            event["y"] = y
        if w != 1.0:
            event["w"] = w
        lines.append(orjson.dumps(event))
    results = []
    for columns in (True, False):

        class _Counting(make):  # type: ignore[misc, valid-type]  # "_": not registered
            taken = 0

            def predict_learn_columns(self, *args: Any) -> Any:
                out = super().predict_learn_columns(*args)
                self.taken += out is not None
                return out

        learner = _Counting()
        for x, y, w in stream(4, 100):  # a model that knows the classes (no first batch)
            if y is not None:
                learner.learn_one(x, y, w)
        tracker = DeltaTracker(learner)
        base = copy.deepcopy(learner)  # the model as it was when tracking began
        sink = MemorySink()
        engine = Engine(learner, ListSource(lines), sink, batch_size=250, column_path=columns)
        engine.run()
        delta, weight = tracker.cut()
        base.apply_delta(delta, weight)
        close(_normal(base), _normal(learner), tol=DELTA_TOL)  # the delta rebuilds the model
        results.append((sink.values(), learner.to_state(), delta.to_state(), weight, learner.taken))
    fast, slow = results
    assert fast[0] == slow[0]  # every prediction record, byte for byte
    assert fast[1] == slow[1]  # the model
    assert fast[2] == slow[2] and fast[3] == slow[3]  # the delta
    assert fast[4] >= 4 and slow[4] == 0
