"""The column kernels of CategoricalNB, GaussianNB and NaiveBayes with forgetting
(``half_life``) against the per-event loop: every prediction to 1e-9, the scale after
every batch to the bit, CategoricalNB's counts exactly; a batch during which the scale
would be renormalised goes to the per-event path unchanged; the engine's column path
gives its general path's bytes."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from kernel_checks import Event, against_the_loop

from stream_nb import CategoricalNB, GaussianNB, NaiveBayes
from stream_nb.base import Learner
from stream_nb.checks.engine import run_engine
from stream_nb.datasets import agrawal
from stream_nb.naive_bayes._arrays import per_event_answers
from stream_nb.naive_bayes._categorical_kernel import columns_of_events


def _kernel(model: Any, xs: Any, ys: Any, ws: Any) -> Any:
    """The learner's column kernel on the batch's columns (absent features as None)."""
    found = columns_of_events(xs)
    out = None if found is None else model.predict_learn_columns(*found, ys, ws)
    return None if out is None else per_event_answers(*out)


def _categorical(seed: int, n: int, *, growing: bool = True) -> list[Event]:
    """Three categorical features whose class dependence flips halfway (a drift), new
    values all along (``growing``; otherwise every value soon seen with every class, as
    maximum likelihood needs to keep to the kernel), missing values, unlabelled events
    and real-valued weights."""
    rng = random.Random(seed)
    events: list[Event] = []
    for i in range(n):
        y = rng.choice(["a", "b", "c"])
        flip = i > n // 2
        favoured = "abc"[("abc".index(y) + flip) % 3]
        x: dict[str, Any] = {
            "colour": f"c{rng.randint(0, 3 + i // 100)}" if growing else rng.choice("rgb"),
            "size": rng.choice("abc" + favoured * 3),
            "shape": None if rng.random() < 0.1 else rng.choice("oxabc"),
        }
        w = rng.choice([1.0, 1.0, 0.3, 2.5]) if (i // 250) % 2 else 1.0
        events.append((x, y if rng.random() > 0.1 else None, w))
    return events


def _numeric(seed: int, n: int, nominal: bool) -> list[Event]:
    rng = random.Random(seed)
    return [
        (x, y if rng.random() > 0.1 else None, rng.choice([1.0, 1.0, 0.5, 2.0]))
        for x, y in agrawal(seed, n, nominal=nominal)
    ]


class _Counting:
    """Counts the batches a model's kernel takes."""

    def __init__(self) -> None:
        self.taken = 0
        self.scales: list[float] = []

    def __call__(self, model: Any, xs: Any, ys: Any, ws: Any) -> Any:
        out = _kernel(model, xs, ys, ws)
        self.taken += out is not None
        self.scales.append(model.to_state()["scale"])
        return out


@pytest.mark.parametrize("half_life", [8.0, 120.0, 5000.0])
@pytest.mark.parametrize("alpha", [1.0, 0.25, 0.0])
def test_categorical_nb_forgets_as_the_loop_does(half_life: float, alpha: float) -> None:
    events = _categorical(int(half_life) + int(alpha * 4), 2600, growing=alpha > 0)
    counting = _Counting()
    used = against_the_loop(
        lambda: CategoricalNB(half_life=half_life, alpha=alpha),
        events,
        3,
        counting,
        exact_state=True,  # counts, scale and class weights to the bit
    )
    assert used >= 4
    if half_life == 8.0:  # the scale renormalises every ~800 units of weight
        assert used < len(counting.scales)  # those batches went to the per-event path


@pytest.mark.parametrize("half_life", [15.0, 400.0])
@pytest.mark.parametrize("make", [GaussianNB, NaiveBayes])
def test_gaussian_learners_forget_as_the_loop_does(make: Any, half_life: float) -> None:
    events = _numeric(int(half_life), 2400, nominal=make is NaiveBayes)
    used = against_the_loop(lambda: make(half_life=half_life), events, 5, _kernel)
    assert used >= 4


def test_naive_bayes_with_laplace_and_uniform_prior_forgets_as_the_loop_does() -> None:
    events = _numeric(9, 1500, nominal=True)
    used = against_the_loop(
        lambda: NaiveBayes(half_life=60.0, alpha=0.5, fit_prior=False), events, 9, _kernel
    )
    assert used >= 4


def test_a_batch_that_renormalises_changes_nothing() -> None:
    model = CategoricalNB(half_life=0.5)  # the scale halves twice per event
    model.learn_one({"a": "x"}, "p")
    model.learn_one({"a": "y"}, "q")
    before = model.to_state()
    xs = [{"a": "xy"[i % 2]} for i in range(200)]  # 200 events: 2^-400 < 1e-30
    ys = ["pq"[i % 2] for i in range(200)]
    assert model.predict_learn_columns(("a",), [[x["a"] for x in xs]], ys) is None
    assert model.to_state() == before
    # the learner's method runs the loop, which renormalises, as learn_one does
    loop = CategoricalNB(half_life=0.5)
    loop.learn_one({"a": "x"}, "p")
    loop.learn_one({"a": "y"}, "q")
    assert model.predict_learn_many(xs, ys, [1.0] * 200) == Learner.predict_learn_many(
        loop, xs, ys, [1.0] * 200
    )
    assert model.to_state() == loop.to_state()


def test_a_tracked_delta_with_forgetting_is_recorded_per_event() -> None:
    model = CategoricalNB(half_life=50.0)
    model.learn_one({"a": "x"}, "p")
    model.learn_one({"a": "y"}, "q")
    model.track_delta()
    xs = [{"a": "xy"[i % 2]} for i in range(100)]
    ys = ["pq"[i % 2] for i in range(100)]
    assert model.predict_learn_columns(("a",), [[x["a"] for x in xs]], ys) is None
    model.predict_learn_many(xs, ys, [1.0] * 100)
    delta, weight = model.cut_delta()
    assert weight == 100.0 and delta.n_learned == 100


def _lines(events: list[Event]) -> list[bytes]:
    out = []
    for x, y, w in events:
        event: dict[str, Any] = dict(x)
        if y is not None:
            event["y"] = y
        if w != 1.0:
            event["w"] = w
        out.append(orjson.dumps(event))
    return out


def _counted(cls: type[Learner], **params: Any) -> Any:
    """An instance of ``cls`` that counts the batches its column kernel takes (a leading
    underscore: not registered as a learner)."""

    def predict_learn_columns(self: Any, *args: Any) -> Any:
        out = cls.predict_learn_columns(self, *args)
        self.taken += out is not None
        return out

    counted = type(f"_Counted{cls.__name__}", (cls,), {"taken": 0})
    counted.predict_learn_columns = predict_learn_columns  # type: ignore[attr-defined]
    return counted(**params)


@pytest.mark.parametrize(
    ("cls", "params", "events"),
    [
        (CategoricalNB, {"half_life": 30.0}, lambda: _categorical(11, 3000)),
        (
            CategoricalNB,
            {"half_life": 900.0, "alpha": 0.0},
            lambda: _categorical(12, 2000, growing=False),
        ),
        (GaussianNB, {"half_life": 200.0}, lambda: _numeric(13, 3000, nominal=False)),
        (NaiveBayes, {"half_life": 20.0}, lambda: _numeric(14, 3000, nominal=True)),
    ],
)
def test_the_engines_column_path_equals_its_general_path(
    cls: type[Learner], params: dict[str, Any], events: Any
) -> None:
    lines = _lines(events())
    fast_model, slow_model = _counted(cls, **params), _counted(cls, **params)
    fast = run_engine(fast_model, lines, column_path=True, batch_size=250)
    slow = run_engine(slow_model, lines, column_path=False, batch_size=250)
    assert fast == slow  # records byte for byte, the model, the evaluation, the outcomes
    assert fast_model.taken >= 5 and slow_model.taken == 0
    # the scale is learn_one's to the bit
    loop = cls(**params)
    for x, y, w in events():
        if y is not None:
            loop.learn_one(x, y, w)
    assert loop.to_state()["scale"] == fast.state["scale"]
