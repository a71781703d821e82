"""The ComplementNB contract: a brute-force reference, scikit-learn, properties, cost.

The reference recomputes the documented formulas (scikit-learn's semantics) from
the raw list of events on every prequential step::

    C_{y,w}      = Σ_{y'≠y} N_{y',w}
    θ_{y,w}      = (C_{y,w} + α) / (Σ_{w∈V} C_{y,w} + αV)
    weight_{y,w} = log θ_{y,w}   (/ Σ_{w∈V} |log θ_{y,w}| when norm=True)
    score(y)     = −Σ_{w in x, w in V} x_w · weight_{y,w}

with ``V`` the distinct tokens learned with a positive count and, with
``half_life=h``, every past event weighted by ``γ^(weight learned after it)``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracles import (
    Event,
    assert_close,
    assert_merge_and_copy,
    assert_prequential,
    decayed_weights,
    learn_scaled,
    normalise,
    token_events,
    token_stream,
)
from probes import count_logs, guard_vocabulary

import stream_nb.naive_bayes.complement as complement_module
from stream_nb import ComplementNB, ConfigError, InvalidEventError


# ------------------------------------------------------------------ brute force
def reference_log_proba(
    events: Sequence[Event],
    x: Mapping[str, Any],
    alpha: float = 1.0,
    norm: bool = False,
    half_life: float | None = None,
) -> dict[Hashable, float]:
    """``log P(y | x)`` recomputed from scratch from the raw events."""
    if not events:
        return {}
    weights = decayed_weights(events, half_life)
    classes: dict[Hashable, None] = {}
    n_yw: dict[tuple[Hashable, str], float] = {}
    vocabulary: dict[str, None] = {}
    for (xi, y, _), w in zip(events, weights, strict=True):
        classes[y] = None
        for token, c in xi.items():
            if c > 0:
                vocabulary[token] = None
                n_yw[y, token] = n_yw.get((y, token), 0.0) + c * w
    v = len(vocabulary)
    if v <= 1:
        return normalise(dict.fromkeys(classes, 0.0))
    scores = {}
    for y in classes:
        complement = {
            token: math.fsum(n_yw.get((other, token), 0.0) for other in classes if other != y)
            for token in vocabulary
        }
        denominator = math.fsum(complement.values()) + alpha * v
        log_theta = {t: math.log((c + alpha) / denominator) for t, c in complement.items()}
        scale = math.fsum(abs(lt) for lt in log_theta.values()) if norm else 1.0
        scores[y] = -math.fsum(c * log_theta[t] / scale for t, c in x.items() if t in vocabulary)
    return normalise(scores)


# ------------------------------------------------------------------ reference agreement
@pytest.mark.parametrize(
    "params",
    [
        {"alpha": 1.0},
        {"alpha": 1.0, "norm": True},
        {"alpha": 0.01},
        {"alpha": 0.01, "norm": True},
        {"alpha": 2.5, "norm": True},
        {"alpha": 1.0, "half_life": 15.0},
        {"alpha": 0.3, "norm": True, "half_life": 3.0},
    ],
)
def test_matches_brute_force_on_every_prequential_step(params: dict[str, Any]) -> None:
    events = token_stream(seed=len(repr(params)), n=150)
    assert_prequential(ComplementNB(**params), events, reference_log_proba, **params)


@pytest.mark.parametrize("norm", [False, True])
def test_forgetting_across_renormalisation(norm: bool) -> None:
    events = [(x, y, 1.0) for x, y, _ in token_stream(seed=4, n=700, classes=2)]
    model = ComplementNB(alpha=0.3, norm=norm, half_life=1.0)
    for i, (x, y, w) in enumerate(events):
        if i % 50 == 0 or i > 690:
            want = reference_log_proba(events[:i], x, alpha=0.3, norm=norm, half_life=1.0)
            assert_close(model.predict_log_proba_one(x), want)
        model.learn_one(x, y, w)


def test_single_class_and_tiny_vocabularies() -> None:
    model = ComplementNB(norm=True)
    model.learn_one({}, "a")
    assert model.predict_proba_one({"w": 1}) == {"a": 1.0}
    model.learn_one({"w": 2}, "a")
    assert model.predict_proba_one({"w": 1}) == {"a": 1.0}
    model.learn_one({"w": 1}, "b")  # V = 1: every θ is 1, both classes score 0
    assert model.predict_proba_one({"w": 3}) == {"a": 0.5, "b": 0.5}
    model.learn_one({"v": 1}, "b")
    events = [({}, "a", 1.0), ({"w": 2}, "a", 1.0), ({"w": 1}, "b", 1.0), ({"v": 1}, "b", 1.0)]
    for x in ({"w": 3}, {"v": 1, "w": 1}, {"u": 1}):
        assert_close(model.predict_log_proba_one(x), reference_log_proba(events, x, norm=True))


def test_long_stream_drift_of_the_incremental_sums() -> None:
    # norm=True keeps Σ_w log(C_{y,w} + α) per class by differences; measure the
    # drift against an exact recomputation before the periodic refresh resets it.
    rng = random.Random(6)
    model = ComplementNB(alpha=0.5, norm=True)
    events = []
    for _ in range(6000):
        x = {f"w{min(int(rng.expovariate(0.02)), 2999)}": rng.randint(1, 3) for _ in range(8)}
        y = rng.randrange(4)
        w = rng.uniform(0.2, 2.0)
        events.append((x, y, w))
        model.learn_one(x, y, w)
    assert model._updates > 50_000  # incremental updates since the last exact refresh
    h, d = model._sum_log_total, list(model._sum_d)
    model._refresh_sums()
    assert abs(h - model._sum_log_total) <= 1e-9
    assert max(abs(a - b) for a, b in zip(d, model._sum_d, strict=True)) <= 1e-9
    x = events[-1][0]
    assert_close(
        model.predict_log_proba_one(x), reference_log_proba(events, x, alpha=0.5, norm=True)
    )


def test_periodic_refresh_bounds_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(complement_module, "_REFRESH_MIN_UPDATES", 50)
    monkeypatch.setattr(complement_module, "_REFRESH_RATIO", 1)
    model = ComplementNB(norm=True)
    events = token_stream(seed=2, n=200)
    refreshed = 0
    for x, y, w in events:
        before = model._updates
        model.learn_one(x, y, w)
        refreshed += model._updates < before
    assert refreshed > 3
    x = events[0][0]
    assert_close(model.predict_log_proba_one(x), reference_log_proba(events, x, norm=True))


# ------------------------------------------------------------------ scikit-learn
@pytest.mark.parametrize(("alpha", "norm"), [(1.0, False), (1.0, True), (0.05, True)])
def test_matches_sklearn_with_a_fixed_vocabulary(alpha: float, norm: bool) -> None:
    from sklearn.naive_bayes import ComplementNB as SkComplementNB

    rng = np.random.default_rng(5)
    features, classes = 12, [0, 1, 2]
    warm = np.eye(features, dtype=float) + rng.integers(0, 2, size=(features, features))
    warm_y = np.array([i % 3 for i in range(features)])
    stream = rng.integers(0, 4, size=(100, features)).astype(float)
    stream_y = rng.integers(0, 3, size=100)
    ours = ComplementNB(alpha=alpha, norm=norm)
    sk = SkComplementNB(alpha=alpha, norm=norm, force_alpha=True)
    sk.partial_fit(warm, warm_y, classes=classes)
    for row, y in zip(warm, warm_y, strict=True):
        ours.learn_one({f"f{j}": v for j, v in enumerate(row)}, int(y))
    for row, y in zip(stream, stream_y, strict=True):
        x = {f"f{j}": v for j, v in enumerate(row)}
        want = dict(zip(classes, sk.predict_log_proba(row[None, :])[0], strict=True))
        assert_close(ours.predict_log_proba_one(x), want)
        ours.learn_one(x, int(y))
        sk.partial_fit(row[None, :], [y])


# ------------------------------------------------------------------ numerics & properties
@pytest.mark.parametrize("norm", [False, True])
def test_ten_thousand_features_stay_finite(norm: bool) -> None:
    rng = random.Random(1)
    model = ComplementNB(alpha=1e-3, norm=norm)
    events = []
    for i in range(6):
        x = {f"f{j}": rng.randint(0, 50) for j in range(10_000)}
        events.append((x, i % 3, 1.0))
        model.learn_one(x, i % 3)
    x = {f"f{j}": rng.randint(0, 50) for j in range(10_000)}
    got = model.predict_log_proba_one(x)
    assert all(math.isfinite(v) for v in got.values())
    assert_close(got, reference_log_proba(events, x, alpha=1e-3, norm=norm))


@given(
    events=st.lists(token_events(5, 10), min_size=1, max_size=12),
    x=token_events(5, 10),
    norm=st.booleans(),
)
def test_property_matches_reference_and_weight_scaling(
    events: list[Event], x: Event, norm: bool
) -> None:
    model, scaled = learn_scaled(lambda alpha: ComplementNB(alpha=alpha, norm=norm), events, 0.7)
    got = model.predict_log_proba_one(x[0])
    assert_close(got, reference_log_proba(events, x[0], alpha=0.7, norm=norm))
    assert_close(scaled.predict_log_proba_one(x[0]), got)


# ------------------------------------------------------------------ merge & state
@pytest.mark.parametrize(("norm", "half_life"), [(False, None), (True, None), (True, 10.0)])
def test_merge_equals_union_and_state_round_trip(norm: bool, half_life: float | None) -> None:
    events = token_stream(seed=9, n=120)
    merged, copy = assert_merge_and_copy(
        lambda: ComplementNB(alpha=0.5, norm=norm, half_life=half_life),
        events,
        union=half_life is None,
    )
    for x, y, w in events[:20]:
        copy.learn_one(x, y, w)
        merged.learn_one(x, y, w)
        assert copy.predict_log_proba_one(x) == merged.predict_log_proba_one(x)


# ------------------------------------------------------------------ validation
def test_invalid_counts_are_rejected_and_leave_the_model_unchanged() -> None:
    model = ComplementNB()
    model.learn_one({"good": 1}, "a")
    before = model.to_state()
    with pytest.raises(InvalidEventError, match="token 'bad' has negative count -1") as info:
        model.learn_one({"good": 2, "bad": -1}, "b")
    assert info.value.reason == "negative_count"
    with pytest.raises(InvalidEventError, match="token 'bad' has count 'x'"):
        model.learn_one({"bad": "x"}, "b")
    assert model.to_state() == before
    with pytest.raises(InvalidEventError, match="token 'bad' has negative count"):
        model.predict_log_proba_one({"bad": -1})


def test_parameters_are_validated() -> None:
    with pytest.raises(ConfigError, match="alpha must be non-negative and finite, got inf"):
        ComplementNB(alpha=float("inf"))
    with pytest.raises(ConfigError, match="norm must be True or False, got 1"):
        ComplementNB(norm=1)  # type: ignore[arg-type]


def test_zero_counts_and_inputs() -> None:
    model = ComplementNB()
    x = {"a": 2, "zero": 0}
    model.learn_one(x, "y")
    model.learn_one({"b": 1}, "z")
    assert x == {"a": 2, "zero": 0}
    assert "zero" not in model.feature_names()
    assert ComplementNB().predict_log_proba_one({"a": 1}) == {}


# ------------------------------------------------------------------ cost
@pytest.mark.parametrize(("norm", "half_life"), [(False, None), (True, None), (False, 1e9)])
def test_prediction_does_not_scan_the_vocabulary(
    norm: bool, half_life: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ComplementNB(norm=norm, half_life=half_life)
    for i in range(0, 100_000, 50):
        model.learn_one({f"w{j}": 1 for j in range(i, i + 50)}, i % 3)
    model.predict_log_proba_one({"w1": 1})  # norm=True with forgetting would refresh here
    guard = guard_vocabulary(model)
    logs = count_logs(monkeypatch, complement_module)
    x = {"w5": 2, "w70000": 1, "w99999": 1, "never": 4}
    model.learn_one(x, 1)
    model.predict_log_proba_one(x)
    classes = 3
    assert guard.lookups <= 3 * len(x)
    # learn (norm=True): ≤ 1 + classes logs per token; predict: ≤ 1 + classes per
    # token and 1 per class
    assert len(logs) <= 2 * len(x) * (classes + 1) + classes + 1
