"""The numpy batch kernel of GaussianNB / NaiveBayes against the per-event path:
every prediction to 1e-9 and the model after each batch (counts exactly)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from kernel_checks import against_the_loop

from stream_nb import GaussianNB, NaiveBayes
from stream_nb.base import Learner
from stream_nb.datasets import agrawal
from stream_nb.naive_bayes._vectorised import MIN_BATCH, gaussian_predict_learn_many


def _gaussian_kernel(model: Any, xs: Any, ys: Any, ws: Any) -> Any:
    return gaussian_predict_learn_many(model.predict_learn_columns, xs, ys, ws)


def _run(make: Any, events: list[tuple[dict[str, Any], Any, float]], seed: int) -> None:
    """Warm up on a prefix, then batches of random sizes: kernel vs per-event loop."""
    assert against_the_loop(make, events, seed, _gaussian_kernel) >= 3  # the kernel really ran


@pytest.mark.parametrize("seed", [1, 2])
def test_naive_bayes_on_agrawal_equals_the_per_event_path(seed: int) -> None:
    rng = random.Random(seed)
    events = [
        (x, y if rng.random() > 0.1 else None, 1.0) for x, y in agrawal(seed, 2500, nominal=True)
    ]
    _run(NaiveBayes, events, seed)


@pytest.mark.parametrize("mode", ["feature", "global"])
def test_gaussian_nb_with_weights_equals_the_per_event_path(mode: str) -> None:
    rng = random.Random(5)
    events = [
        (x, y if rng.random() > 0.2 else None, rng.choice([1.0, 0.25, 3.0]))
        for x, y in agrawal(5, 2000, nominal=False)
    ]
    _run(lambda: GaussianNB(var_smoothing_mode=mode), events, 5)


@pytest.mark.parametrize("make", [GaussianNB, NaiveBayes])
def test_fixed_class_priors_equal_the_per_event_path(make: Any) -> None:
    rng = random.Random(6)
    events = [
        (x, y if rng.random() > 0.1 else None, rng.choice([1.0, 1.0, 2.0]))
        for x, y in agrawal(6, 1500, nominal=make is NaiveBayes)
    ]
    _run(lambda: make(class_prior={0: 0.2, 1: 3.0}), events, 6)


@pytest.mark.parametrize("make", [GaussianNB, NaiveBayes])
def test_per_feature_rule_with_constant_features_equals_the_per_event_path(make: Any) -> None:
    # "k" constant throughout (left out), "late" constant for the first 700 events
    # (left out until then, inside a batch too), "c" constant within class 0 only
    rng = random.Random(12)
    events = []
    for i, (x, y) in enumerate(agrawal(12, 1800, nominal=make is NaiveBayes)):
        x = dict(x)
        x["k"] = 4.0
        x["late"] = 1.0 if i < 700 else rng.gauss(1.0, 3.0)
        x["c"] = 2.0 if y == 0 else rng.gauss(2.0, 0.5)
        events.append((x, y if rng.random() > 0.1 else None, rng.choice([1.0, 1.0, 2.0])))
    _run(lambda: make(var_smoothing=1e-3), events, 12)


def test_new_categories_mid_batch_and_three_classes() -> None:
    rng = random.Random(9)
    events = []
    for i in range(1500):
        y = rng.choice("abc")
        x = {
            "u": rng.gauss({"a": 0.0, "b": 1.0, "c": 3.0}[y], 1.0 + (y == "c")),
            "v": rng.randint(0, 1000) * 1e-3,
            # new values keep appearing (some first in unlabelled events)
            "colour": f"c{rng.randint(0, 4 + i // 20)}",
            "size": rng.choice(["s", "m", "l", None]),  # (None: missing)
        }
        events.append((x, y if rng.random() > 0.3 else None, rng.choice([1.0, 1.0, 2.5])))
    _run(lambda: NaiveBayes(alpha=0.5, var_smoothing=1e-6), events, 9)


def test_unusual_batches_fall_back() -> None:
    model = NaiveBayes()
    xs = [{"a": float(i % 7), "b": "x"} for i in range(MIN_BATCH)]
    ys = ["p", "q"] * (MIN_BATCH // 2)
    ws = [1.0] * MIN_BATCH
    step = model.predict_learn_columns
    assert gaussian_predict_learn_many(step, xs, ys, ws) is None  # nothing learned yet
    model.learn_one(xs[0], "p")
    model.learn_one(xs[1], "q")
    assert gaussian_predict_learn_many(step, xs, ["r", *ys[1:]], ws) is None  # new class
    assert gaussian_predict_learn_many(step, [{"a": 1.0}, *xs[1:]], ys, ws) is None  # keys
    assert gaussian_predict_learn_many(step, [{"a": None, "b": "x"}, *xs[1:]], ys, ws) is None
    assert gaussian_predict_learn_many(step, [{"a": True, "b": "x"}, *xs[1:]], ys, ws) is None
    # categorical: a new value and then an unhashable one
    odd = [{"a": 1.0, "b": "new"}, {"a": 2.0, "b": ["unhashable"]}, *xs[2:]]
    assert gaussian_predict_learn_many(step, odd, ys, ws) is None
    assert gaussian_predict_learn_many(step, xs[:10], ys[:10], ws[:10]) is None  # small
    huge = [{"a": 10**400, "b": "x"}, *xs[1:]]
    assert gaussian_predict_learn_many(step, huge, ys, ws) is None  # not a float
    # a class without a fixed prior: the per-event path leaves it out of its answers
    fixed = NaiveBayes(class_prior={"p": 1.0})
    fixed.learn_one(xs[0], "p")
    fixed.learn_one(xs[1], "q")
    assert gaussian_predict_learn_many(fixed.predict_learn_columns, xs, ys, ws) is None
    assert model.n_learned == 2
    # the learner's method still answers, through the per-event loop
    lps, _preds, errors = model.predict_learn_many(xs[:10], ys[:10], ws[:10])
    assert len(lps) == 10 and not errors and model.n_learned == 12


@pytest.mark.parametrize("make", [GaussianNB, NaiveBayes])
def test_the_learners_method_uses_the_kernel(make: Any) -> None:
    events = list(agrawal(3, 700, nominal=make is NaiveBayes))
    a, b = make(), make()
    for x, y in events[:50]:
        a.learn_one(x, y)
        b.learn_one(x, y)
    xs = [x for x, _ in events[50:]]
    ys = [y for _, y in events[50:]]
    got = a.predict_learn_many(xs, ys, [1.0] * len(xs))
    want = gaussian_predict_learn_many(
        b.predict_learn_columns, [dict(x) for x in xs], ys, [1.0] * len(xs)
    )
    assert want is not None and got == want and a.to_state() == b.to_state()

    class _Sub(make):  # type: ignore[misc, valid-type]  # "_": not registered
        pass

    class _OtherFormulas(make):  # type: ignore[misc, valid-type]
        capabilities = dataclasses.replace(make.capabilities, column_kernel=False)

    sub, other, ref = _Sub(), _OtherFormulas(), make()
    for x, y in events[:50]:
        for model in (sub, other, ref):
            model.learn_one(x, y)
    loop = Learner.predict_learn_many(ref, xs, ys, [1.0] * len(xs))
    assert loop != want  # (the kernel rounds differently)
    assert sub.predict_learn_many(xs, ys, [1.0] * len(xs)) == want  # the declared kernel
    # a subclass that declares no kernel (its formulas differ): the per-event loop
    assert other.predict_learn_many(xs, ys, [1.0] * len(xs)) == loop
    assert other.predict_learn_columns(("a",), [[1.0] * 100], [0] * 100) is None
