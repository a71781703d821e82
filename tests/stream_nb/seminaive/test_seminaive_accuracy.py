"""Prequential accuracy: clearly above Naive Bayes with dependencies, not below without.

Baselines: :class:`~stream_nb.NaiveBayes` (categorical and Gaussian terms by
type) always; on categorical streams also :class:`~stream_nb.CategoricalNB`;
on numeric streams also CategoricalNB over the *same* discretised values (an
AODE whose ``min_parent_count`` no value reaches always falls back to exactly
that), which isolates the dependence modelling from the discretisation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest
from _bn import bn_stream
from river.datasets import synth

from stream_nb import AODE, KDB, TAN, CategoricalNB, Learner, NaiveBayes
from stream_nb.datasets import agrawal, categorical_stream

NEVER = 1e300  # min_parent_count no value reaches: the CategoricalNB fallback


def discretised_nb() -> Learner:
    return AODE(min_parent_count=NEVER)


def prequential_accuracy(model: Learner, events: Iterable[tuple]) -> float:
    hits = n = 0
    for x, y in events:
        hits += model.predict_one(x) == y
        model.learn_one(x, y)
        n += 1
    return hits / n


def led(n: int) -> list[tuple]:
    stream = synth.LED(seed=7, noise_percentage=0.1, irrelevant_features=True)
    return [({k: str(v) for k, v in x.items()}, y) for x, y in stream.take(n)]


DEPENDENT: dict[str, tuple[Callable[[], list[tuple]], Callable[[], Learner]]] = {
    "tree-bn": (lambda: list(bn_stream(seed=5, n=2000)), CategoricalNB),
    "agrawal-f2": (
        lambda: list(agrawal(seed=3, n=2000, function=2, nominal=False)),
        discretised_nb,
    ),
    "river-agrawal-f2": (
        lambda: list(synth.Agrawal(classification_function=2, seed=3).take(2000)),
        discretised_nb,
    ),
}
BASELINES: tuple[Callable[[], Learner], ...] = (NaiveBayes,)


@pytest.mark.parametrize("stream", sorted(DEPENDENT))
@pytest.mark.parametrize("learner", [AODE, TAN])
def test_clearly_above_naive_bayes_with_dependencies(
    stream: str, learner: Callable[[], Learner]
) -> None:
    make_events, baseline = DEPENDENT[stream]
    events = make_events()
    nb = max(prequential_accuracy(b(), events) for b in (baseline, *BASELINES))
    semi = prequential_accuracy(learner(), events)
    assert semi >= nb + 0.03, (stream, learner, semi, nb)


INDEPENDENT = {
    "nb-model": lambda: list(categorical_stream(seed=2, n=1500, features=8, values=4)),
    "river-led": lambda: led(800),  # LED segments are independent given the digit
}


@pytest.mark.parametrize("stream", sorted(INDEPENDENT))
@pytest.mark.parametrize("learner", [AODE, TAN, KDB])
def test_never_meaningfully_below_on_independent_data(
    stream: str, learner: Callable[[], Learner]
) -> None:
    events = INDEPENDENT[stream]()
    nb = max(prequential_accuracy(b(), events) for b in (CategoricalNB, *BASELINES))
    semi = prequential_accuracy(learner(), events)
    assert semi >= nb - 0.03, (stream, learner, semi, nb)
