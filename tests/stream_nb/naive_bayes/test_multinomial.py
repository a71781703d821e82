"""The MultinomialNB contract: a brute-force reference, scikit-learn, properties, cost.

The reference recomputes the documented formulas from the raw list of events on
every prequential step::

    log P(y)     = log((N_y + α) / (N + Kα))
    log P(w | y) = log((N_{y,w} + α) / (T_y + αV)),  T_y = Σ_w N_{y,w}
    score(y)     = log P(y) + Σ_{w in x, w in vocabulary} x_w log P(w | y)

with ``V`` the number of distinct tokens learned with a positive count and,
with ``half_life=h``, every past event weighted by ``γ^(weight learned after
it)``, ``γ = 2^(-1/h)``.
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
    class_weights,
    decayed_weights,
    learn_scaled,
    log_prior,
    normalise,
    token_events,
    token_stream,
)
from probes import count_logs, guard_vocabulary

import stream_nb.naive_bayes.multinomial as multinomial_module
from stream_nb import ConfigError, InvalidEventError, MultinomialNB


# ------------------------------------------------------------------ brute force
def reference_log_proba(
    events: Sequence[Event],
    x: Mapping[str, Any],
    alpha: float = 1.0,
    fit_prior: bool = True,
    class_prior: Mapping[Hashable, float] | None = None,
    half_life: float | None = None,
) -> dict[Hashable, float]:
    """``log P(y | x)`` recomputed from scratch from the raw events."""
    if not events:
        return {}
    weights = decayed_weights(events, half_life)
    n_y = class_weights(events, weights)
    n_yw: dict[tuple[Hashable, str], float] = {}
    vocabulary: set[str] = set()
    for (xi, y, _), w in zip(events, weights, strict=True):
        for token, c in xi.items():
            if c > 0:
                vocabulary.add(token)
                n_yw[y, token] = n_yw.get((y, token), 0.0) + c * w
    t_y = {y: math.fsum(v for (c, _), v in n_yw.items() if c == y) for y in n_y}
    v = len(vocabulary)
    prior = log_prior(n_y, math.fsum(n_y.values()), alpha, fit_prior, class_prior)
    scores = {}
    for y, score in prior.items():
        for token, c in x.items():
            if token in vocabulary:
                score += c * math.log((n_yw.get((y, token), 0.0) + alpha) / (t_y[y] + alpha * v))
        scores[y] = score
    return normalise(scores)


# ------------------------------------------------------------------ reference agreement
@pytest.mark.parametrize(
    "params",
    [
        {"alpha": 1.0},
        {"alpha": 0.01},
        {"alpha": 2.5, "fit_prior": False},
        {"alpha": 0.5, "class_prior": {0: 0.2, 1: 0.5, "late": 0.3}},
        {"alpha": 1.0, "class_prior": {0: 1.0, "late": 3.0}},
        {"alpha": 1.0, "half_life": 15.0},
        {"alpha": 0.1, "half_life": 3.0},
    ],
)
def test_matches_brute_force_on_every_prequential_step(params: dict[str, Any]) -> None:
    events = token_stream(seed=len(repr(params)), n=150)
    assert_prequential(MultinomialNB(**params), events, reference_log_proba, **params)


def test_forgetting_across_renormalisation() -> None:
    # half_life=1 drives the global scale below 1e-30 every ~100 events: the
    # raw statistics are renormalised and must still match the reference.
    events = [(x, y, 1.0) for x, y, _ in token_stream(seed=4, n=700, classes=2)]
    model = MultinomialNB(alpha=0.3, half_life=1.0)
    checked = 0
    for i, (x, y, w) in enumerate(events):
        if i % 50 == 0 or i > 690:
            want = reference_log_proba(events[:i], x, alpha=0.3, half_life=1.0)
            assert_close(model.predict_log_proba_one(x), want)
            checked += 1
        model.learn_one(x, y, w)
    assert checked > 10


def test_textbook_example() -> None:
    # Manning, Raghavan & Schütze, Introduction to IR, example 13.1.
    model = MultinomialNB()
    for text, y in [
        ("Chinese Beijing Chinese", "c"),
        ("Chinese Chinese Shanghai", "c"),
        ("Chinese Macao", "c"),
        ("Tokyo Japan Chinese", "j"),
    ]:
        x: dict[str, int] = {}
        for token in text.split():
            x[token] = x.get(token, 0) + 1
        model.learn_one(x, y)
    # P(c | d5) ∝ 3/4 · (3/7)^3 · 1/14 · 1/14 (the book uses the unsmoothed prior 3/4)
    proba = model.predict_proba_one({"Chinese": 3, "Tokyo": 1, "Japan": 1})
    pc = (4 / 6) * (3 / 7) ** 3 * (1 / 14) ** 2
    pj = (2 / 6) * (2 / 9) ** 3 * (2 / 9) ** 2
    assert proba["c"] == pytest.approx(pc / (pc + pj), rel=1e-12)


# ------------------------------------------------------------------ scikit-learn
@pytest.mark.parametrize("alpha", [1.0, 0.05])
def test_matches_sklearn_with_a_fixed_vocabulary(alpha: float) -> None:
    from sklearn.naive_bayes import MultinomialNB as SkMultinomialNB

    rng = np.random.default_rng(3)
    features, classes = 12, [0, 1, 2]
    # Warm-up rows give every column a positive count and show every class,
    # so our growing vocabulary equals scikit-learn's V = column count.
    warm = np.eye(features, dtype=float) + rng.integers(0, 2, size=(features, features))
    warm_y = np.array([i % 3 for i in range(features)])
    stream = rng.integers(0, 4, size=(120, features)).astype(float)
    stream_y = rng.integers(0, 3, size=120)
    ours = MultinomialNB(alpha=alpha)
    sk = SkMultinomialNB(alpha=alpha, force_alpha=True)
    sk.partial_fit(warm, warm_y, classes=classes)
    for row, y in zip(warm, warm_y, strict=True):
        ours.learn_one({f"f{j}": v for j, v in enumerate(row)}, int(y))
    for row, y in zip(stream, stream_y, strict=True):
        x = {f"f{j}": v for j, v in enumerate(row)}
        got = ours.predict_log_proba_one(x)
        # scikit-learn's prior is N_y/N: swap it for ours before normalising.
        jll = sk.predict_joint_log_proba(row[None, :])[0] - sk.class_log_prior_
        n = sum(ours._class_weight.values())
        prior = [math.log((ours._class_weight[c] + alpha) / (n + 3 * alpha)) for c in classes]
        want = normalise({c: jll[i] + prior[i] for i, c in enumerate(classes)})
        assert_close(got, want)
        ours.learn_one(x, int(y))
        sk.partial_fit(row[None, :], [y])


# ------------------------------------------------------------------ numerics & properties
def test_ten_thousand_features_stay_finite() -> None:
    rng = random.Random(1)
    model = MultinomialNB(alpha=1e-3)
    events = []
    for i in range(6):
        x = {f"f{j}": rng.randint(0, 50) for j in range(10_000)}
        events.append((x, i % 2, 1.0))
        model.learn_one(x, i % 2)
    x = {f"f{j}": rng.randint(0, 50) for j in range(10_000)}
    got = model.predict_log_proba_one(x)
    assert all(math.isfinite(v) for v in got.values())
    assert_close(got, reference_log_proba(events, x, alpha=1e-3))


def test_huge_and_tiny_counts() -> None:
    model = MultinomialNB(alpha=1e-10)
    events = [({"a": 1e10, "b": 1e-10}, 0, 1.0), ({"a": 1e-10, "b": 1e10}, 1, 1.0)]
    for x, y, w in events:
        model.learn_one(x, y, w)
    for x in ({"a": 1e10}, {"b": 1e-10, "a": 3}, {"a": 1e-300}):
        got = model.predict_log_proba_one(x)
        assert all(math.isfinite(v) for v in got.values())
        assert_close(got, reference_log_proba(events, x, alpha=1e-10))


@given(events=st.lists(token_events(5, 10), min_size=1, max_size=12), x=token_events(5, 10))
def test_property_matches_reference_and_weight_scaling(events: list[Event], x: Event) -> None:
    model, scaled = learn_scaled(lambda alpha: MultinomialNB(alpha=alpha), events, 0.7)
    got = model.predict_log_proba_one(x[0])
    assert_close(got, reference_log_proba(events, x[0], alpha=0.7))
    assert_close(scaled.predict_log_proba_one(x[0]), got)
    assert math.fsum(model.predict_proba_one(x[0]).values()) == pytest.approx(1.0, abs=1e-12)


# ------------------------------------------------------------------ merge & state
@pytest.mark.parametrize("half_life", [None, 10.0])
def test_merge_equals_union_and_state_round_trip(half_life: float | None) -> None:
    events = token_stream(seed=9, n=120)
    merged, copy = assert_merge_and_copy(
        lambda: MultinomialNB(alpha=0.5, half_life=half_life), events, union=half_life is None
    )
    assert copy.model_size() == merged.model_size()


def test_merge_rebuilds_new_classes_and_tokens() -> None:
    a, b = MultinomialNB(), MultinomialNB()
    a.learn_one({"x": 1}, "only-a")
    b.learn_one({"y": 2, "x": 1}, "only-b")
    b.learn_one({"z": 1}, "only-a")
    a.merge(b)
    events = [
        ({"x": 1}, "only-a", 1.0),
        ({"y": 2, "x": 1}, "only-b", 1.0),
        ({"z": 1}, "only-a", 1.0),
    ]
    for x in ({"x": 1}, {"y": 1, "z": 2}, {"q": 1}):
        assert_close(a.predict_log_proba_one(x), reference_log_proba(events, x))


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("x", "reason", "match"),
    [
        ({"good": 1, "bad": -2}, "negative_count", "token 'bad' has negative count -2"),
        ({"bad": "3"}, "non_numeric", "token 'bad' has count '3'"),
        ({"bad": None}, "non_numeric", "token 'bad' has count None"),
        ({"bad": float("nan")}, "non_numeric", "token 'bad' has count nan"),
        ({"bad": float("inf")}, "non_finite", "token 'bad' has infinite count"),
    ],
)
def test_invalid_counts_are_rejected_and_leave_the_model_unchanged(
    x: dict[str, Any], reason: str, match: str
) -> None:
    model = MultinomialNB()
    model.learn_one({"good": 1}, "a")
    before = model.to_state()
    with pytest.raises(InvalidEventError, match=match) as info:
        model.learn_one(x, "b")
    assert info.value.reason == reason
    assert model.to_state() == before
    with pytest.raises(InvalidEventError, match=match):
        model.predict_log_proba_one(x)


def test_parameters_are_validated() -> None:
    with pytest.raises(ConfigError, match="alpha must be non-negative and finite, got -1"):
        MultinomialNB(alpha=-1)
    with pytest.raises(ConfigError, match="fit_prior must be True or False, got 'no'"):
        MultinomialNB(fit_prior="no")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="class_prior"):
        MultinomialNB(class_prior={"a": 0.0})


def test_zero_counts_and_inputs() -> None:
    model = MultinomialNB()
    x = {"a": 2, "zero": 0, "flag": True}
    frozen = dict(x)
    model.learn_one(x, "y")
    assert x == frozen
    assert "zero" not in model.feature_names()  # a zero count does not enter the vocabulary
    assert model.predict_proba_one({"zero": 5}) == {"y": 1.0}
    assert MultinomialNB().predict_log_proba_one({"a": 1}) == {}
    assert MultinomialNB().predict_one({"a": 1}) is None


# ------------------------------------------------------------------ cost
@pytest.mark.parametrize("half_life", [None, 1e9])
def test_prediction_does_not_scan_the_vocabulary(
    half_life: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = MultinomialNB(half_life=half_life)
    for i in range(0, 100_000, 50):
        model.learn_one({f"w{j}": 1 for j in range(i, i + 50)}, i % 3)
    assert model.model_size()["features"] == 100_000
    guard = guard_vocabulary(model)
    logs = count_logs(monkeypatch, multinomial_module)
    x = {"w5": 2, "w70000": 1, "w99999": 1, "never": 4}
    model.learn_one(x, 1)
    model.predict_log_proba_one(x)
    classes = 3
    # learn: ≤ 1 lookup and 1 log per token; predict: 1 lookup
    # per token, ≤ 1 log per (token, class) plus a few per class.
    assert guard.lookups <= 2 * len(x)
    assert len(logs) <= len(x) * (classes + 1) + 2 * classes + 2
