"""BatchDecay: the forgetting scale across a batch is learn_one's, to the bit."""

from __future__ import annotations

import math
import random

import pytest

from stream_nb import CategoricalNB
from stream_nb._decay import BatchDecay
from stream_nb.limits import RENORMALISE_BELOW


@pytest.mark.parametrize("half_life", [0.1, 3.0, 250.0, 1e9])
@pytest.mark.parametrize("weights", [False, True])
def test_scales_and_raw_weights_are_learn_ones(half_life: float, weights: bool) -> None:
    rng = random.Random(int(half_life * 10) + weights)
    n = 40
    ys = [None if rng.random() < 0.2 else rng.choice(["p", "q"]) for _ in range(n)]
    ws = [rng.choice([1.0, 0.3, 2.5, 1e-6]) if weights else 1.0 for _ in range(n)]
    model = CategoricalNB(half_life=half_life)
    model.learn_one({"a": "warm"}, "p")
    scale = model.to_state()["scale"]
    decay = BatchDecay.of(scale, 0.5 ** (1.0 / half_life), ys, ws if weights else None)
    loop_model = CategoricalNB(half_life=half_life)
    loop_model.learn_one({"a": "warm"}, "p")
    before, raw = [], []
    renormalised = False
    for y, w in zip(ys, ws, strict=True):
        before.append(loop_model.to_state()["scale"])
        if y is None:
            raw.append(w)
        else:
            loop_model.learn_one({"a": "x"}, y, w)
            raw.append(w / loop_model.to_state()["scale"])
            renormalised |= loop_model.to_state()["scale"] > before[-1]
    end = loop_model.to_state()["scale"]
    if renormalised:  # the loop renormalised: no kernel takes that batch
        assert decay is None
        assert half_life < 1  # (the only case where 40 events reach 1e-30)
        return
    assert decay is not None
    assert decay.before.tolist() == before  # to the bit
    assert decay.raw.tolist() == raw
    assert decay.end == end
    assert decay.smoothing(0.5).tolist() == [0.5 / s for s in before]


def test_a_batch_that_would_renormalise_is_not_taken() -> None:
    gamma = 0.5  # half_life 1: the scale halves per unit of weight
    assert BatchDecay.of(RENORMALISE_BELOW * 4, gamma, ["p", "p"], None) is not None
    assert BatchDecay.of(RENORMALISE_BELOW * 4, gamma, ["p", "p", "p"], None) is None
    assert BatchDecay.of(RENORMALISE_BELOW * 4, gamma, ["p", "p", None, None], None) is not None
    assert BatchDecay.of(1.0, gamma, ["p"], [200.0]) is None  # one heavy event
    assert BatchDecay.of(1.0, gamma, ["p", "p"], [1.0, math.nan]) is None
    assert BatchDecay.of(1.0, gamma, ["p"], ["heavy"]) is None  # type: ignore[list-item]
    assert BatchDecay.of(1.0, gamma, ["p"], [1.0, 2.0]) is None  # lengths differ
