"""Adding features costs O(1) each and restores cost O(size), for every learner, without
measuring time.

Two deterministic counts guard the complexity:

- the Python lines executed (``sys.settrace``) to learn one event of ``N`` new
  features, to predict it, to restore a model of ``N`` features from its state
  and to rank its informative features (``stream-nb inspect``) grow linearly in
  ``N``: doubling ``N`` at most doubles them (plus a small slack);
- work done in C that a line count cannot see: the Gaussian learners' key tuple
  of dense events (``_order``) is rebuilt once per event or load, so the
  elements copied into it grow linearly too (one copy per new feature used to
  copy the whole tuple: quadratic).

The wall-clock figures are in docs/benchmarks.md (benchmarks/bench_scaling.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable
from typing import Any

import orjson
import pytest
from learner_classes import learner_params

from stream_nb import GaussianNB, Learner, NaiveBayes
from stream_nb.informative import informative_features
from stream_nb.naive_bayes._gaussian_stats import GaussianStatistics

#: Doubling N may multiply the lines run by at most this (2 for a linear cost, plus
#: constant work that does not halve).
SLACK = 2.2
N = 1500
SEMI_NAIVE = {"AODE", "KDB", "SPODE", "TAN"}


def make(cls: type[Learner]) -> Learner:
    params: dict[str, Any] = {}
    if cls.__name__ == "SPODE":
        params["parent"] = "f0"
    if cls.__name__ in SEMI_NAIVE:
        # pair counts are d(d − 1) per event by design, over the first
        # max_pair_features features only: a small bound keeps the test quick
        params.update(warmup=1, max_pair_features=20)
    return cls(**params)


def wide(cls: type[Learner], n: int, k: int, prefix: str = "f") -> dict[Hashable, Any]:
    """An event of ``n`` features named ``prefix0…``: counts for the token learners,
    numbers for the Gaussian ones and strings for the others."""
    name = cls.__name__
    if name in ("MultinomialNB", "ComplementNB", "BernoulliNB"):
        return {f"{prefix}{i}": 1 + (i + k) % 3 for i in range(n)}
    if name in ("GaussianNB", "NaiveBayes"):
        return {f"{prefix}{i}": float((7 * i + 3 * k) % 11) for i in range(n)}
    return {f"{prefix}{i}": f"v{(i + k) % 3}" for i in range(n)}


def lines_run(action: Callable[[], Any]) -> int:
    """Python lines executed by ``action()`` (every frame, comprehensions included)."""
    count = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        action()
    finally:
        sys.settrace(None)
    return count


def trained(cls: type[Learner], n: int) -> Learner:
    model = make(cls)
    model.learn_one(wide(cls, 3, 0), 0)
    model.learn_one(wide(cls, 3, 1), 1)
    return model


def costs(cls: type[Learner], n: int) -> dict[str, int]:
    """Lines run to learn and predict an event of ``n`` new features, and to restore
    and inspect the model that learned it."""
    model = trained(cls, n)
    x = wide(cls, n, 2, prefix="new")
    out = {"learn": lines_run(lambda: model.learn_one(x, 0))}
    out["predict"] = lines_run(lambda: model.predict_log_proba_one(x))
    model.learn_one(wide(cls, n, 3, prefix="new"), 1)
    state = orjson.loads(orjson.dumps(model.to_state()))
    restored: list[Learner] = []
    out["restore"] = lines_run(lambda: restored.append(Learner.from_state(state)))
    assert restored[0].to_state() == model.to_state()
    out["inspect"] = lines_run(lambda: informative_features(restored[0], top=10))
    return out


@pytest.mark.parametrize("cls", learner_params())
def test_new_features_and_restores_cost_linear_work(cls: type[Learner]) -> None:
    small, large = costs(cls, N), costs(cls, 2 * N)
    for step in small:
        assert large[step] <= SLACK * small[step], (
            f"{cls.__name__}: {step} of {2 * N} features ran {large[step]} lines, "
            f"{large[step] / small[step]:.2f}x those of {N}"
        )


class _CountedStatistics(GaussianStatistics):
    """Counts the elements copied into ``order`` (the key tuple of dense events)."""

    __slots__ = ()
    copied = 0

    @property  # type: ignore[override]
    def order(self) -> tuple[Hashable, ...]:
        return GaussianStatistics.order.__get__(self)  # type: ignore[attr-defined,no-any-return]

    @order.setter
    def order(self, value: tuple[Hashable, ...]) -> None:
        _CountedStatistics.copied += len(value)
        GaussianStatistics.order.__set__(self, value)  # type: ignore[attr-defined]


_OrderCounter = _CountedStatistics


def _counted(cls: type[Learner]) -> Callable[[], Any]:
    """``cls()`` whose Gaussian component counts its key-tuple copies."""

    def make() -> Any:
        model: Any = cls()
        model.gaussian.__class__ = _CountedStatistics  # same slots: only the counting differs
        return model

    return make


_CountedGaussianNB = _counted(GaussianNB)
_CountedNaiveBayes = _counted(NaiveBayes)


@pytest.mark.parametrize(
    "cls", [_CountedGaussianNB, _CountedNaiveBayes], ids=["GaussianNB", "NaiveBayes"]
)
@pytest.mark.parametrize("n", [1_000, 20_000])
def test_the_key_tuple_is_rebuilt_once_per_event_and_per_load(cls: Any, n: int) -> None:
    model = cls()
    model.learn_one({"a": 1.0, "b": 2.0}, 0)
    _OrderCounter.copied = 0
    model.learn_one({f"new{i}": float(i % 5) for i in range(n)}, 1)  # n new features at once
    assert _OrderCounter.copied <= n + 2  # one rebuild (it was 1 + 2 + … + n copies)
    model.learn_one({"late": 1.0}, 0)
    assert _OrderCounter.copied <= 2 * n + 5
    state = model.to_state()
    _OrderCounter.copied = 0
    restored = cls()
    restored._stats_from_state(state["stats"])
    assert _OrderCounter.copied <= n + 3
    assert restored.to_state()["stats"] == state["stats"]
    _OrderCounter.copied = 0
    other = cls()
    other.learn_one({f"other{i}": 1.0 for i in range(n)}, 2)
    _OrderCounter.copied = 0
    restored.merge(other)  # n features new to it, added at once
    assert _OrderCounter.copied <= 2 * n + 3
