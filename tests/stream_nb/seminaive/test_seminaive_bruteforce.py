"""SPODE and AODE against an independent brute-force reference, on every prequential step.

The reference recomputes the documented formulas from the raw event list (with
exponentially decayed weights when ``half_life`` is set) and shares no code
with the learners.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable
from typing import Any

import pytest

from stream_nb import AODE, SPODE

Event = tuple[dict[str, Any], Hashable, float]
TOLERANCE = 1e-9


def make_stream(seed: int, n: int) -> list[Event]:
    """Dependent categorical features, missing values, weights, late features and classes."""
    rng = random.Random(seed)
    events: list[Event] = []
    for t in range(n):
        y = rng.choice(["a", "b", "c"] if t < n // 2 else ["a", "b", "c", 7])
        x: dict[str, Any] = {}
        base = rng.randrange(3)
        x["f0"] = f"v{(base + (y == 'a')) % 3}"
        x["f1"] = x["f0"] if rng.random() < 0.7 else f"v{rng.randrange(4)}"
        x["f2"] = rng.choice([True, False, "u"])
        x["f3"] = f"w{rng.randrange(2 + (y == 'b'))}"
        if t > n // 3:
            x["late"] = f"l{rng.randrange(2)}"
        for k in list(x):
            if rng.random() < 0.2:
                del x[k]
            elif rng.random() < 0.05:
                x[k] = None  # None is missing too
        w = rng.choice([1.0, 1.0, 0.5, 2.5])
        events.append((x, y, w))
    return events


def probes(x: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    unseen = dict(x)
    if unseen:
        unseen[rng.choice(list(unseen))] = "never-seen"
    return [x, unseen, {**x, "ghost": "g"}, {}]


class BruteForce:
    """The formulas of docs/seminaive.md recomputed from scratch from the raw events."""

    def __init__(self, alpha: float, half_life: float | None) -> None:
        self.alpha = alpha
        self.gamma = None if half_life is None else 0.5 ** (1.0 / half_life)
        self.events: list[Event] = []

    def weights(self) -> list[float]:
        out = []
        later = 0.0
        for _x, _y, w in reversed(self.events):
            out.append(w if self.gamma is None else w * self.gamma**later)
            later += w
        return out[::-1]

    def scores(self, x: dict[str, Any], parents_rule: Any, m: float) -> dict[Hashable, float]:
        ev = [
            ({k: v for k, v in e.items() if v is not None}, y, w)
            for (e, y, _), w in zip(self.events, self.weights(), strict=True)
        ]
        if not ev:
            return {}
        a = self.alpha
        classes: list[Hashable] = []
        for _e, y, _w in ev:
            if y not in classes:
                classes.append(y)
        k = len(classes)
        values: dict[str, set[Any]] = {}
        for e, _y, _w in ev:
            for f, v in e.items():
                values.setdefault(f, set()).add(v)
        xp = {f: v for f, v in x.items() if v is not None and f in values}

        def total(pred: Any) -> float:
            return sum(w for e, y, w in ev if pred(e, y))

        def spode(i: str, y: Hashable) -> float:
            vi = xp[i]
            n_i = total(lambda e, _y: i in e)
            s = math.log(
                (total(lambda e, yy: yy == y and e.get(i) == vi) + a)
                / (n_i + a * k * len(values[i]))
            )
            for j, vj in xp.items():
                if j == i:
                    continue
                num = total(lambda e, yy, j=j, vj=vj: yy == y and e.get(i) == vi and e.get(j) == vj)
                den = total(lambda e, yy, j=j: yy == y and e.get(i) == vi and j in e)
                s += math.log((num + a) / (den + a * len(values[j])))
            return s

        def naive(y: Hashable) -> float:
            n_y = total(lambda _e, yy: yy == y)
            s = math.log((n_y + a) / (total(lambda _e, _y: True) + k * a))
            for j, vj in xp.items():
                num = total(lambda e, yy, j=j, vj=vj: yy == y and e.get(j) == vj)
                den = total(lambda e, yy, j=j: yy == y and j in e)
                s += math.log((num + a) / (den + a * len(values[j])))
            return s

        parents = [
            i
            for i in parents_rule(xp)
            if total(lambda e, _y, i=i: e.get(i) == xp[i]) >= m * (1 - 1e-12)
        ]
        if not parents:
            jll = {y: naive(y) for y in classes}
        else:
            jll = {}
            for y in classes:
                terms = [spode(i, y) for i in parents]
                top = max(terms)
                jll[y] = top + math.log(sum(math.exp(t - top) for t in terms))
        top = max(jll.values())
        lse = top + math.log(sum(math.exp(v - top) for v in jll.values()))
        return {y: v - lse for y, v in jll.items()}


def assert_close(got: dict[Hashable, float], want: dict[Hashable, float], where: str) -> None:
    assert got.keys() == want.keys(), where
    for c in want:
        assert abs(got[c] - want[c]) <= TOLERANCE * max(1.0, abs(want[c])), (where, c, got, want)


CASES = [
    pytest.param(1.0, 1.0, None, id="alpha1-m1"),
    pytest.param(0.3, 3.0, None, id="alpha0.3-m3"),
    pytest.param(1.0, 2.0, 15.0, id="alpha1-m2-half_life15"),
    # ratios down to 1e-102: products of children are folded every 2 (no underflow)
    pytest.param(1e-100, 1.0, None, id="alpha1e-100-m1"),
]


@pytest.mark.parametrize(("alpha", "m", "half_life"), CASES)
def test_aode_matches_brute_force_every_step(
    alpha: float, m: float, half_life: float | None
) -> None:
    events = make_stream(seed=3, n=90)
    model = AODE(alpha=alpha, min_parent_count=m, half_life=half_life)
    ref = BruteForce(alpha, half_life)
    rng = random.Random(0)
    for t, (x, y, w) in enumerate(events):
        for probe in probes(x, rng):
            want = ref.scores(probe, lambda xp: list(xp), m)
            assert_close(model.predict_log_proba_one(probe), want, f"step {t} x={probe}")
        model.learn_one(x, y, w)
        ref.events.append((x, y, w))


@pytest.mark.parametrize(("alpha", "m", "half_life"), CASES)
@pytest.mark.parametrize("parent", ["f0", "f3"])
def test_spode_matches_brute_force_every_step(
    alpha: float, m: float, half_life: float | None, parent: str
) -> None:
    events = make_stream(seed=5, n=70)
    model = SPODE(parent, alpha=alpha, min_parent_count=m, half_life=half_life)
    ref = BruteForce(alpha, half_life)
    rng = random.Random(1)
    for t, (x, y, w) in enumerate(events):
        for probe in probes(x, rng):
            want = ref.scores(probe, lambda xp: [parent] if parent in xp else [], m)
            assert_close(model.predict_log_proba_one(probe), want, f"step {t} x={probe}")
        model.learn_one(x, y, w)
        ref.events.append((x, y, w))


def test_aode_with_one_parent_equals_spode() -> None:
    events = make_stream(seed=8, n=60)
    aode, spode = AODE(), SPODE("f0")
    for x, y, w in events:
        aode.learn_one(x, y, w)
        spode.learn_one(x, y, w)
    probe = {"f0": "v1", "f1": "never-seen-value"}  # only f0 qualifies as a parent
    got, want = aode.predict_log_proba_one(probe), spode.predict_log_proba_one(probe)
    assert_close(got, want, "single parent")


def test_spode_default_parent_is_most_informative_feature() -> None:
    auto, explicit = SPODE(), SPODE("signal")
    rng = random.Random(2)
    for _ in range(200):
        y = rng.choice("ab")
        x = {"noise": str(rng.random() < 0.5), "signal": y + str(rng.random() < 0.1)}
        auto.learn_one(x, y)
        explicit.learn_one(x, y)
    probe = {"noise": "True", "signal": "aFalse"}
    got, want = auto.predict_log_proba_one(probe), explicit.predict_log_proba_one(probe)
    assert_close(got, want, "auto parent")
