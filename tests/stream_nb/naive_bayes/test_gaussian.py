"""The GaussianNB contract: brute force on every step, scikit-learn, stability, forgetting.

The reference recomputes the documented formulas from the raw list of events::

    σ²_yf      = Σ w (x - μ_yf)² / Σ w  +  ε_f,   μ_yf = Σ w x / Σ w   (class y, feature f)
    ε_f        = var_smoothing × V_f             (var_smoothing_mode="feature", V_f = 0: left out)
    ε_f        = var_smoothing × max_f V_f       ("global"; V_f over all events, floors 1e-90)
    log P(y)   = log(N_y / N)
    log p(x|y) = Σ_f -½ (log(2π σ²_yf) + (x_f - μ_yf)² / σ²_yf)

with two-pass weighted sums (``math.fsum``), so it shares no code or
summation order with the learner's Welford updates. With ``half_life=h``
every past event is weighted by ``γ^(weight learned after it)``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracles import (
    TOLERANCE,
    Event,
    assert_close,
    class_weights,
    decayed_weights,
    gaussian_terms,
    log_prior,
    normalise,
)
from sklearn.naive_bayes import GaussianNB as SkGaussianNB

from stream_nb import ConfigError, GaussianNB, IncompatibleModelError, InvalidEventError, Learner


# ------------------------------------------------------------------ brute force
def reference_log_proba(
    events: Sequence[Event],
    x: Mapping[str, Any],
    var_smoothing: float | None = None,
    class_prior: Mapping[Hashable, float] | None = None,
    half_life: float | None = None,
    var_smoothing_mode: str = "feature",
) -> dict[Hashable, float]:
    """GaussianNB's ``log P(y | x)`` recomputed from the raw events."""
    if not events:
        return {}
    weights = decayed_weights(events, half_life)
    jll = log_prior(class_weights(events, weights), math.fsum(weights), 0.0, True, class_prior)
    terms = gaussian_terms(events, weights, x, list(jll), var_smoothing, None, var_smoothing_mode)
    return normalise({y: jll[y] + terms[y] for y in jll})


def random_stream(seed: int, n: int, weighted: bool = True, dense: bool = False) -> list[Event]:
    """Numeric events: class-dependent Gaussians, ints and floats, missing features, a late
    class and a late feature, optional weights. ``dense``: every feature, same order."""
    rng = random.Random(seed)
    labels: list[Hashable] = ["a", "b", 3, "late"]
    centre = {y: [rng.uniform(-5, 5) for _ in range(4)] for y in labels}
    spread = [0.1, 1.0, 30.0, 1e3]  # different scales: the max variance matters
    events = []
    for i in range(n):
        y = rng.choice(labels[: 3 if i < n * 2 // 3 else 4])
        x: dict[str, Any] = {}
        for j in range(4):
            if not dense and rng.random() < 0.15:
                if rng.random() < 0.3:
                    x[f"f{j}"] = None  # explicitly missing
                continue
            v = rng.gauss(centre[y][j] * spread[j], spread[j])
            x[f"f{j}"] = round(v) if j == 2 else v  # f2 holds ints
        if not dense and i > n // 2 and rng.random() < 0.5:
            x["late"] = rng.expovariate(1.0)  # a feature that appears late
        w = rng.choice([1.0, 1.0, 0.5, 2.5, 0.01]) if weighted else 1.0
        events.append((x, y, w))
    return events


def run_prequential(
    model: Learner,
    events: Sequence[Event],
    reference: Any,
    extra_probes: bool = True,
    **ref_kwargs: Any,
) -> int:
    """Predict then learn every event, comparing each prediction with the reference."""
    checked = 0
    for i, (x, y, w) in enumerate(events):
        probes = [x]
        if extra_probes:
            probes += [{k: v for k, v in x.items() if k != "f1"}, {}, {"f3": 1.0, "nope": 2.0}]
        for probe in probes:
            assert_close(
                model.predict_log_proba_one(probe), reference(events[:i], probe, **ref_kwargs)
            )
            checked += 1
        model.learn_one(x, y, w)
    return checked


# ------------------------------------------------------------------ the formulas
MODES = ["feature", "global"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("var_smoothing", [1e-9, 1e-3, 0.5])
@pytest.mark.parametrize("weighted", [False, True])
def test_every_prequential_step_matches_brute_force(
    var_smoothing: float, weighted: bool, mode: str
) -> None:
    events = random_stream(seed=int(var_smoothing * 1e9) % 97 + weighted, n=120, weighted=weighted)
    model = GaussianNB(var_smoothing=var_smoothing, var_smoothing_mode=mode)
    run_prequential(
        model, events, reference_log_proba, var_smoothing=var_smoothing, var_smoothing_mode=mode
    )


@pytest.mark.parametrize("mode", MODES)
def test_dense_stream_matches_brute_force(mode: str) -> None:
    # every event has every feature in the same order: the fast path throughout
    events = random_stream(seed=5, n=150, weighted=True, dense=True)
    run_prequential(
        GaussianNB(var_smoothing_mode=mode),
        events,
        reference_log_proba,
        extra_probes=False,
        var_smoothing_mode=mode,
    )


@pytest.mark.parametrize("dense", [True, False])
def test_per_feature_rule_leaves_out_constant_features(dense: bool) -> None:
    # "k" is constant overall (left out), "c" constant within class a only (ε_c > 0),
    # "late" constant until late: the dense path filters, the general path skips
    rng = random.Random(4)
    events: list[Event] = []
    for i in range(120):
        y = rng.choice("ab")
        x: dict[str, Any] = {"k": 7.0, "c": 2.0 if y == "a" else rng.gauss(3.0, 1.0)}
        x["f"] = rng.gauss(1.0 if y == "a" else -1.0, 1.0)
        x["late"] = 0.0 if i < 60 else rng.gauss(0.0, 1e6)
        if not dense and rng.random() < 0.3:
            del x["f"]
        events.append((x, y, rng.choice([1.0, 0.5])))
    model = GaussianNB(var_smoothing=1e-3)
    checked = run_prequential(
        model, events, reference_log_proba, extra_probes=False, var_smoothing=1e-3
    )
    assert checked == len(events)
    probe = {"k": 1e9, "c": 2.0, "f": 0.0, "late": 3.0}  # k's odd value changes nothing
    assert_close(
        model.predict_log_proba_one(probe),
        model.predict_log_proba_one({**probe, "k": 7.0}),
        1e-12,
    )
    assert model.predict_proba_one({**probe, "c": 2.5})["b"] > 0.99  # ε_c: 1e-3 × V_c


def test_per_feature_rule_is_invariant_to_one_features_scale() -> None:
    # an Agrawal-like pair: a feature in the 1e5 range cannot swamp one in the units
    # range under the per-feature rule; the global rule's ε = 1e-9 × 1e10 does
    rng = random.Random(6)
    events = []
    for _ in range(400):
        y = rng.choice("ab")
        small = rng.gauss(0.0 if y == "a" else 1.0, 0.3)
        events.append(({"small": small, "big": rng.gauss(5e4, 1e5)}, y))
    feature, scaled, glob = GaussianNB(), GaussianNB(), GaussianNB(var_smoothing_mode="global")
    for x, y in events:
        feature.learn_one(x, y)
        scaled.learn_one({"small": x["small"], "big": x["big"] * 1e-6}, y)
        glob.learn_one(x, y)
    probe = {"small": 0.1, "big": 5e4}
    assert_close(
        feature.predict_log_proba_one(probe),
        scaled.predict_log_proba_one({"small": 0.1, "big": 5e4 * 1e-6}),
        1e-9,
    )
    assert feature.predict_proba_one(probe)["a"] > 0.9
    assert glob.predict_proba_one(probe)["a"] < 0.7  # ε ≈ 10 ≫ Var(small | y) = 0.09


def test_class_prior_scores_only_its_classes() -> None:
    prior = {"a": 0.2, "b": 0.5, "late": 0.3}  # class 3 is never scored
    events = random_stream(seed=11, n=100)
    run_prequential(GaussianNB(class_prior=prior), events, reference_log_proba, class_prior=prior)


def test_feature_counts_only_when_every_scored_class_has_it() -> None:
    model = GaussianNB()
    model.learn_one({"a": 1.0, "b": 5.0}, "x")
    model.learn_one({"a": 2.0, "b": 7.0}, "x")
    model.learn_one({"a": 10.0}, "y")
    model.learn_one({"a": 12.0}, "y")
    # "b" has no statistics for class y: it must not change the answer
    assert_close(
        model.predict_log_proba_one({"a": 6.0, "b": 100.0}),
        model.predict_log_proba_one({"a": 6.0}),
        1e-12,
    )
    # with class_prior restricted to x, b counts again
    only_x = GaussianNB(class_prior={"x": 1.0})
    only_x.learn_one({"a": 1.0, "b": 5.0}, "x")
    assert only_x.predict_log_proba_one({"b": 5.0}) == {"x": 0.0}


def test_class_prior_without_any_learned_class_predicts_nothing() -> None:
    model = GaussianNB(class_prior={"z": 1.0})
    model.learn_one({"a": 1.0}, "a")
    model.learn_one({"a": 2.0}, "a")
    assert model.predict_log_proba_one({"a": 1.5}) == {}
    assert model.predict_log_proba_one({"b": 1.5}) == {}  # general path too
    assert model.predict_one({"a": 1.5}) is None


def test_hand_computed_example() -> None:
    model = GaussianNB(var_smoothing=0.0)
    for v, y in [(1.0, "a"), (3.0, "a"), (10.0, "b"), (14.0, "b")]:
        model.learn_one({"f": v}, y)
    # a: μ=2, σ²=1; b: μ=12, σ²=4; priors ½ each
    la = -0.5 * (math.log(2 * math.pi * 1.0) + (5.0 - 2.0) ** 2 / 1.0)
    lb = -0.5 * (math.log(2 * math.pi * 4.0) + (5.0 - 12.0) ** 2 / 4.0)
    assert_close(
        model._joint_log_likelihood({"f": 5.0}),
        {"a": math.log(0.5) + la, "b": math.log(0.5) + lb},
        1e-14,
    )


def test_zero_var_smoothing_uses_the_floor() -> None:
    # without smoothing a class of constant values has σ² = MIN_VARIANCE: certain, finite
    model = GaussianNB(var_smoothing=0.0)
    for v, y in [(1.0, "a"), (1.0, "a"), (5.0, "b"), (7.0, "b")]:
        model.learn_one({"f": v}, y)
    proba = model.predict_proba_one({"f": 1.0})
    assert proba["a"] == 1.0 and 0.0 < proba["b"] < 1e-40  # log σ²_a = log 1e-90
    lp = model.predict_log_proba_one({"f": 6.0})
    assert lp["b"] == 0.0 and -math.inf < lp["a"] < -1e90  # -(6 - 1)² / (2 × 1e-90)


def test_constant_features_give_the_prior() -> None:
    model = GaussianNB()
    for y in ["a", "a", "b"]:
        model.learn_one({"f": 3.0, "g": -1}, y)
    got = model.predict_proba_one({"f": 1e10, "g": 5.0})
    assert got == pytest.approx({"a": 2 / 3, "b": 1 / 3}, rel=1e-12)


def test_max_variance_tracked_when_the_largest_feature_shrinks() -> None:
    # the feature of largest variance changes several times, sparse events take the
    # incremental path and its rescans; a large var_smoothing makes ε visible
    rng = random.Random(3)
    events: list[Event] = []
    for i in range(160):
        phase = i // 40
        x = {"p": rng.gauss(0, 100.0 if phase in (0, 2) else 0.01)}
        x["q"] = rng.gauss(5, 50.0 if phase != 2 else 0.01)
        if rng.random() < 0.5:
            del x["p" if i % 2 else "q"]
        events.append((x, rng.choice("ab"), 1.0))
    run_prequential(
        GaussianNB(var_smoothing=0.3, var_smoothing_mode="global"),
        events,
        reference_log_proba,
        extra_probes=False,
        var_smoothing=0.3,
        var_smoothing_mode="global",
    )


# ------------------------------------------------------------------ scikit-learn
@pytest.mark.parametrize("var_smoothing", [1e-9, 1e-2])
def test_agrees_with_scikit_learn(var_smoothing: float) -> None:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 5)) * np.array([1e-3, 1.0, 10.0, 1e3, 1e5]) + rng.integers(
        -3, 3, size=(300, 5)
    )
    y = rng.integers(0, 3, size=300)
    sk = SkGaussianNB(var_smoothing=var_smoothing).fit(X, y)
    model = GaussianNB(var_smoothing=var_smoothing, var_smoothing_mode="global")
    for row, label in zip(X, y, strict=True):
        model.learn_one({f"f{j}": float(v) for j, v in enumerate(row)}, int(label))
    want = sk.predict_log_proba(X[:50])
    for row, expected in zip(X[:50], want, strict=True):
        got = model.predict_log_proba_one({f"f{j}": float(v) for j, v in enumerate(row)})
        assert_close(got, {int(c): float(v) for c, v in zip(sk.classes_, expected, strict=True)})


def test_agrees_with_scikit_learn_class_prior() -> None:
    rng = np.random.default_rng(8)
    X = rng.normal(size=(200, 3))
    y = rng.integers(0, 2, size=200)
    sk = SkGaussianNB(priors=[0.9, 0.1]).fit(X, y)
    model = GaussianNB(var_smoothing_mode="global", class_prior={0: 0.9, 1: 0.1})
    for row, label in zip(X, y, strict=True):
        model.learn_one({f"f{j}": float(v) for j, v in enumerate(row)}, int(label))
    for row, expected in zip(X[:30], sk.predict_log_proba(X[:30]), strict=True):
        got = model.predict_log_proba_one({f"f{j}": float(v) for j, v in enumerate(row)})
        assert_close(got, {0: float(expected[0]), 1: float(expected[1])})


# ------------------------------------------------------------------ numerics
def test_ten_thousand_features_and_extreme_values_stay_finite() -> None:
    rng = random.Random(0)
    width = 10_000
    scales = [10.0 ** rng.uniform(-10, 10) for _ in range(width)]
    model = GaussianNB()
    for i in range(12):
        y = i % 2
        x = {f"f{j}": s * (1.0 + 0.5 * y + 0.1 * rng.random()) for j, s in enumerate(scales)}
        if i >= 8:  # sparse events too (general path)
            x = {k: v for k, v in x.items() if rng.random() < 0.5}
        model.learn_one(x, y)
    for probe in (
        {f"f{j}": s * rng.uniform(0.5, 2.0) for j, s in enumerate(scales)},
        {f"f{j}": s * 1e3 for j, s in enumerate(scales)},
        {f"f{j}": 1e10 for j in range(width)},
        {f"f{j}": 1e-10 for j in range(0, width, 7)},
    ):
        lp = model.predict_log_proba_one(probe)
        assert lp and all(math.isfinite(v) and v <= 0.0 for v in lp.values())
        assert math.fsum(math.exp(v) for v in lp.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("c", [1e-10, 1e-4, 3.0, 1e6, 1e10])
def test_scale_invariance(c: float) -> None:
    events = random_stream(seed=21, n=80, weighted=True)
    base, scaled = GaussianNB(), GaussianNB()
    for x, y, w in events:
        probe = x
        scaled_probe = {k: None if v is None else v * c for k, v in probe.items()}
        assert_close(scaled.predict_log_proba_one(scaled_probe), base.predict_log_proba_one(probe))
        base.learn_one(x, y, w)
        scaled.learn_one(scaled_probe, y, w)


# ------------------------------------------------------------------ forgetting
@pytest.mark.parametrize("half_life", [3.0, 40.0])
def test_half_life_matches_exponential_weights(half_life: float) -> None:
    events = random_stream(seed=31, n=90, weighted=True)
    run_prequential(
        GaussianNB(half_life=half_life),
        events,
        reference_log_proba,
        extra_probes=False,
        half_life=half_life,
    )


def test_half_life_across_renormalisation() -> None:
    # γ = 2^-1: the global scale passes 1e-30 (renormalisation) every ~100 events
    events = random_stream(seed=32, n=1300, weighted=False, dense=True)
    model = GaussianNB(half_life=1.0)
    for x, y, w in events:
        model.learn_one(x, y, w)
    assert model._scale > 1e-30  # renormalised at least once (scale reset to 1)
    # events older than ~80 half-lives weigh < 1e-24: the reference needs only the tail
    tail = events[-120:]
    for probe, _, _ in events[:5]:
        assert_close(
            model.predict_log_proba_one(probe), reference_log_proba(tail, probe, half_life=1.0)
        )


# ------------------------------------------------------------------ merge and state
def test_merge_equals_learning_the_union() -> None:
    events = random_stream(seed=41, n=160)
    first, second = events[:70], events[70:]
    a, b, union = GaussianNB(), GaussianNB(), GaussianNB()
    for x, y, w in first:
        a.learn_one(x, y, w)
    for x, y, w in second:
        b.learn_one(x, y, w)
    for x, y, w in events:
        union.learn_one(x, y, w)
    a.merge(b)
    assert a.n_learned == union.n_learned
    for x, _, _ in events[:40]:
        assert_close(a.predict_log_proba_one(x), union.predict_log_proba_one(x), 1e-11)
        assert_close(a.predict_log_proba_one(x), reference_log_proba(events, x), TOLERANCE)


def test_merge_refuses_another_var_smoothing_mode() -> None:
    a, b = GaussianNB(), GaussianNB(var_smoothing=1e-2, var_smoothing_mode="global")
    a.learn_one({"f": 1.0}, "x")
    b.learn_one({"f": 2.0}, "x")
    with pytest.raises(IncompatibleModelError, match=r"\['var_smoothing_mode'\]"):
        a.merge(b)


@pytest.mark.parametrize("mode", MODES)
def test_merge_equals_learning_the_union_in_either_mode(mode: str) -> None:
    events = random_stream(seed=43, n=120)
    a, b = GaussianNB(var_smoothing_mode=mode), GaussianNB(var_smoothing_mode=mode)
    for i, (x, y, w) in enumerate(events):
        (a if i < 50 else b).learn_one(x, y, w)
    a.merge(b)
    for x, _, _ in events[:30]:
        assert_close(
            a.predict_log_proba_one(x),
            reference_log_proba(events, x, var_smoothing_mode=mode),
        )


def test_state_without_a_mode_keeps_the_global_rule() -> None:
    # a state written before var_smoothing_mode existed: its model used scikit-learn's rule
    model = GaussianNB(var_smoothing=1e-9, var_smoothing_mode="global")
    for x, y, w in random_stream(seed=52, n=60):
        model.learn_one(x, y, w)
    state = model.to_state()
    del state["params"]["var_smoothing_mode"]
    copy = Learner.from_state(state)
    assert isinstance(copy, GaussianNB) and copy.var_smoothing_mode == "global"
    probe = {"f0": 0.3, "f1": -2.0, "f2": 40, "f3": 900.0}
    assert copy.predict_log_proba_one(probe) == model.predict_log_proba_one(probe)


def test_state_round_trip_predicts_identically() -> None:
    events = random_stream(seed=51, n=200)
    for params in (
        {},
        {"var_smoothing_mode": "global"},
        {"half_life": 5.0},
        {"class_prior": {"a": 1.0, "b": 2.0}},
    ):
        model = GaussianNB(**params)
        for i, (x, y, w) in enumerate(events):
            model.learn_one(x, y, w)
            if i % 50 == 49:
                copy = Learner.from_state(orjson.loads(orjson.dumps(model.to_state())))
                assert isinstance(copy, GaussianNB)
                for probe, _, _ in events[i - 20 : i + 5]:
                    assert copy.predict_log_proba_one(probe) == model.predict_log_proba_one(probe)
                # and they keep agreeing while learning further
                for x2, y2, w2 in events[i + 1 : i + 4]:
                    copy.learn_one(x2, y2, w2)
                    model.learn_one(x2, y2, w2)
                    assert copy.predict_log_proba_one(x2) == model.predict_log_proba_one(x2)
                model = copy


def test_model_size_counts_statistics() -> None:
    model = GaussianNB()
    model.learn_one({"a": 1.0, "b": 2.0}, "x")
    model.learn_one({"a": 1.0}, "y")
    size = model.model_size()
    assert (size["classes"], size["features"]) == (2, 2)
    assert size["stored_counts"] == 3 * 2 * 2 + 3 * 2 + 2 + 1


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("3.5", "non_numeric"),
        (True, "non_numeric"),
        ([1.0], "non_numeric"),
        (math.nan, "non_finite"),
        (-math.inf, "non_finite"),
    ],
)
def test_bad_values_are_rejected_and_change_nothing(value: Any, reason: str) -> None:
    model = GaussianNB()
    model.learn_one({"height": 1.8, "weight": 80.0}, "m")
    model.learn_one({"height": 1.6, "weight": 55.0}, "f")
    before = model.to_state()
    for x in ({"height": 1.7, "weight": value}, {"weight": value, "height": 1.7}):
        with pytest.raises(InvalidEventError, match="'weight'") as info:
            model.learn_one(x, "m")
        assert info.value.reason == reason
        with pytest.raises(InvalidEventError, match="'weight'"):
            model.predict_log_proba_one(x)
    assert model.to_state()["stats"] == before["stats"]


def test_none_means_missing() -> None:
    model = GaussianNB()
    model.learn_one({"a": 1.0, "b": None}, "x")
    model.learn_one({"a": 3.0, "b": 2.0}, "y")
    assert model.predict_log_proba_one({"a": 2.0, "b": None}) == model.predict_log_proba_one(
        {"a": 2.0}
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"var_smoothing": -1e-9}, "var_smoothing must be non-negative"),
        ({"var_smoothing": True}, "var_smoothing must be a non-negative number"),
        ({"var_smoothing": math.inf}, "var_smoothing must be non-negative and finite"),
        ({"var_smoothing_mode": "max"}, "var_smoothing_mode must be 'feature' .* got 'max'"),
        ({"class_prior": {"a": 0.0}}, "class_prior"),
        ({"half_life": 0}, "half_life"),
    ],
)
def test_invalid_parameters(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        GaussianNB(**kwargs)


# ------------------------------------------------------------------ properties
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).filter(
    lambda v: abs(v) > 1e-6 or v == 0
)
events_strategy = st.lists(
    st.tuples(
        st.dictionaries(
            st.sampled_from(["a", "b", "c"]), finite | st.integers(-1000, 1000), max_size=3
        ),
        st.sampled_from(["x", "y", "z"]),
        st.sampled_from([1.0, 0.5, 3.0]),
    ),
    min_size=1,
    max_size=25,
)


@given(events_strategy, st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), finite, max_size=4))
def test_property_matches_reference_and_normalises(
    events: list[Event], probe: dict[str, float]
) -> None:
    model = GaussianNB(var_smoothing=1e-3)
    for x, y, w in events:
        model.learn_one(x, y, w)
    got = model.predict_log_proba_one(probe)
    assert math.fsum(math.exp(v) for v in got.values()) == pytest.approx(1.0, abs=1e-9)
    assert_close(got, reference_log_proba(events, probe, var_smoothing=1e-3), 1e-7)


@given(events_strategy, st.randoms(use_true_random=False))
def test_property_order_and_chunking_do_not_matter(events: list[Event], rnd: random.Random) -> None:
    shuffled = events[:]
    rnd.shuffle(shuffled)
    one, other = GaussianNB(var_smoothing=1e-3), GaussianNB(var_smoothing=1e-3)
    for x, y, w in events:
        one.learn_one(x, y, w)
    cut = rnd.randrange(len(shuffled) + 1)
    part = GaussianNB(var_smoothing=1e-3)
    for x, y, w in shuffled[:cut]:
        other.learn_one(x, y, w)
    for x, y, w in shuffled[cut:]:
        part.learn_one(x, y, w)
    other.merge(part)
    for x, _, _ in events:
        assert_close(other.predict_log_proba_one(x), one.predict_log_proba_one(x), 1e-7)


@given(events_strategy)
def test_property_weight_two_equals_learning_twice(events: list[Event]) -> None:
    doubled, twice = GaussianNB(), GaussianNB()
    for x, y, w in events:
        doubled.learn_one(x, y, 2 * w)
        twice.learn_one(x, y, w)
        twice.learn_one(x, y, w)
    for x, _, _ in events:
        assert_close(doubled.predict_log_proba_one(x), twice.predict_log_proba_one(x), 1e-7)
