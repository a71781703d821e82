"""The NaiveBayes contract: categorical + Gaussian terms under one Lidstone prior.

The reference recomputes from the raw events, on every prequential step::

    kind(f)         = schema[f], else "gaussian" if the first learned value of f is
                      int/float (not bool), else "categorical"
    log P(y)        = log((N_y + α) / (N + Kα))
    categorical f   : log((N_{y,f,v} + α) / (N_{y,f} + S_f α))
    Gaussian f      : -½ (log(2π σ²) + (x - μ)² / σ²) with ε over the Gaussian features

The Gaussian part is the oracles' (test_gaussian's reference), restricted to Gaussian features.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracles import (
    Event,
    assert_close,
    class_weights,
    decayed_weights,
    gaussian_terms,
    log_prior,
    normalise,
)

from stream_nb import (
    CategoricalNB,
    ConfigError,
    GaussianNB,
    IncompatibleModelError,
    InvalidEventError,
    Learner,
    ModelStateError,
    NaiveBayes,
)


# ------------------------------------------------------------------ brute force
def kinds_of(events: Sequence[Event], schema: Mapping[str, str] | None) -> dict[str, str]:
    kinds = dict(schema or {})
    for x, _, _ in events:
        for f, v in x.items():
            if f not in kinds and v is not None:
                numeric = not isinstance(v, bool) and isinstance(v, (int, float))
                kinds[f] = "gaussian" if numeric else "categorical"
    return kinds


def reference_log_proba(
    events: Sequence[Event],
    x: Mapping[str, Any],
    alpha: float = 1.0,
    var_smoothing: float | None = None,
    schema: Mapping[str, str] | None = None,
    fit_prior: bool = True,
    class_prior: Mapping[Hashable, float] | None = None,
    half_life: float | None = None,
    var_smoothing_mode: str = "feature",
) -> dict[Hashable, float]:
    """NaiveBayes' ``log P(y | x)`` recomputed from the raw events."""
    if not events:
        return {}
    weights = decayed_weights(events, half_life)
    jll = log_prior(
        class_weights(events, weights), math.fsum(weights), alpha, fit_prior, class_prior
    )
    kinds = kinds_of(events, schema)
    numeric = {f for f, kind in kinds.items() if kind == "gaussian"}
    known_x = {f: v for f, v in x.items() if f in numeric}
    terms = gaussian_terms(
        events, weights, known_x, list(jll), var_smoothing, numeric, var_smoothing_mode
    )
    for y in jll:
        jll[y] += terms[y]
    for f, value in x.items():
        if value is None or kinds.get(f) != "categorical":
            continue
        learned = [
            (ex[f], y, w)
            for (ex, y, _), w in zip(events, weights, strict=True)
            if ex.get(f) is not None
        ]
        if not learned:
            continue
        s_f = len({v for v, _, _ in learned})
        for y in jll:
            n_yf = math.fsum(w for _, c, w in learned if c == y)
            n_yfv = math.fsum(w for v, c, w in learned if c == y and v == value)
            jll[y] += math.log((n_yfv + alpha) / (n_yf + s_f * alpha))
    return normalise(jll)


def mixed_events(seed: int, n: int, weighted: bool = True) -> list[Event]:
    """str, bool, int and float features; missing and None; a late class and late features."""
    rng = random.Random(seed)
    labels: list[Hashable] = ["a", "b", 7, "late"]
    mu = {y: [rng.uniform(-3, 3) for _ in range(3)] for y in labels}
    events = []
    for i in range(n):
        y = rng.choice(labels[: 3 if i < n * 2 // 3 else 4])
        c = labels.index(y)
        x: dict[str, Any] = {
            "colour": rng.choice([*["red", "green", "blue"][: 2 + c % 2], f"new{i // 40}"]),
            "paid": rng.random() < (0.8 if c == 0 else 0.3),
            "amount": rng.gauss(mu[y][0] * 10, 5.0),
            "visits": rng.randint(0, 5 + 3 * c),  # int: Gaussian
            "ratio": rng.gauss(mu[y][1], 0.2),
        }
        for f in list(x):
            r = rng.random()
            if r < 0.1:
                del x[f]
            elif r < 0.13:
                x[f] = None
        if i > n // 2 and rng.random() < 0.5:
            x["late_num"] = rng.gauss(mu[y][2], 1.0)
        if i > n // 3 and rng.random() < 0.5:
            x["late_cat"] = rng.choice("xyz")
        keys = list(x)
        rng.shuffle(keys)
        x = {f: x[f] for f in keys} if rng.random() < 0.3 else x
        w = rng.choice([1.0, 1.0, 0.5, 2.5, 0.1]) if weighted else 1.0
        events.append((x, y, w))
    return events


def prequential(model: Learner, events: Sequence[Event], **kwargs: Any) -> None:
    for i, (x, y, w) in enumerate(events):
        for probe in (x, {f: v for f, v in x.items() if f != "amount"}, {"colour": "red"}):
            assert_close(
                model.predict_log_proba_one(probe), reference_log_proba(events[:i], probe, **kwargs)
            )
        model.learn_one(x, y, w)


# ------------------------------------------------------------------ the formulas
@pytest.mark.parametrize("mode", ["feature", "global"])
@pytest.mark.parametrize(("alpha", "var_smoothing"), [(1.0, 1e-9), (0.3, 1e-2), (2.0, 0.5)])
@pytest.mark.parametrize("weighted", [False, True])
def test_every_prequential_step_matches_brute_force(
    alpha: float, var_smoothing: float, weighted: bool, mode: str
) -> None:
    events = mixed_events(seed=int(alpha * 10) + weighted, n=110, weighted=weighted)
    model = NaiveBayes(alpha=alpha, var_smoothing=var_smoothing, var_smoothing_mode=mode)
    prequential(model, events, alpha=alpha, var_smoothing=var_smoothing, var_smoothing_mode=mode)


def test_default_var_smoothing_is_the_modes() -> None:
    assert NaiveBayes().get_params()["var_smoothing"] == 1e-2
    assert NaiveBayes().var_smoothing_mode == "feature"
    assert NaiveBayes(var_smoothing_mode="global").var_smoothing == 1e-9
    assert NaiveBayes(var_smoothing=0.0, var_smoothing_mode="global").var_smoothing == 0.0


@pytest.mark.parametrize(
    "params",
    [{"fit_prior": False}, {"class_prior": {"a": 0.5, 7: 0.25, "late": 0.25}}],
)
def test_prior_options_match_brute_force(params: dict[str, Any]) -> None:
    events = mixed_events(seed=3, n=80)
    prequential(NaiveBayes(**params), events, **params)


def test_schema_overrides_the_type() -> None:
    schema = {"visits": "categorical", "amount": "gaussian"}
    events = mixed_events(seed=4, n=90)
    model = NaiveBayes(schema=schema)
    prequential(model, events, schema=schema)
    kinds = model.kinds()
    assert kinds["visits"] == "categorical" and kinds["amount"] == "gaussian"
    assert kinds["colour"] == "categorical" and kinds["paid"] == "categorical"
    assert kinds["ratio"] == "gaussian"


def test_half_life_matches_exponential_weights() -> None:
    events = mixed_events(seed=5, n=80)
    prequential(NaiveBayes(half_life=10.0), events, half_life=10.0)


def test_only_categorical_features_equal_categorical_nb() -> None:
    events = [
        ({f: v for f, v in x.items() if f in ("colour", "paid", "late_cat")}, y, w)
        for x, y, w in mixed_events(6, 120)
    ]
    nb, cat = NaiveBayes(alpha=0.5), CategoricalNB(alpha=0.5)
    for x, y, w in events:
        assert_close(nb.predict_log_proba_one(x), cat.predict_log_proba_one(x), 1e-12)
        nb.learn_one(x, y, w)
        cat.learn_one(x, y, w)


def test_only_numeric_features_equal_gaussian_nb_up_to_the_prior() -> None:
    # GaussianNB's prior is log(N_y/N); NaiveBayes' is Lidstone: remove both priors
    events = [
        ({f: v for f, v in x.items() if f in ("amount", "ratio")}, y, w)
        for x, y, w in mixed_events(7, 120)
    ]
    nb, gauss = NaiveBayes(fit_prior=False), GaussianNB()
    for x, y, w in events:
        got = nb._joint_log_likelihood(x)
        want = gauss._joint_log_likelihood(x)
        prior = {
            c: math.log(
                gauss.gaussian.class_weight[gauss.gaussian.class_index[c]]
                / gauss.gaussian.total_weight
            )
            for c in want
        }
        uniform = -math.log(len(want)) if want else 0.0
        assert_close(
            {c: v - uniform for c, v in got.items()},
            {c: v - prior[c] for c, v in want.items()},
            1e-12,
        )
        nb.learn_one(x, y, w)
        gauss.learn_one(x, y, w)


def test_dense_numeric_events_take_the_same_answer_in_any_order() -> None:
    rng = random.Random(8)
    model = NaiveBayes()
    for i in range(300):
        y = i % 2
        model.learn_one(
            {"a": rng.gauss(y, 1), "b": rng.randint(0, 9 + y), "c": rng.gauss(5 * y, 2)}, y
        )
    x = {"a": 0.3, "b": 4, "c": 2.0}
    assert_close(
        model.predict_log_proba_one(dict(reversed(x.items()))),
        model.predict_log_proba_one(x),
        1e-12,
    )


# ------------------------------------------------------------------ types
def test_numeric_feature_given_a_string_is_rejected_with_the_schema_fix() -> None:
    model = NaiveBayes()
    model.learn_one({"size": 3.0, "colour": "red"}, "a")
    model.learn_one({"size": 5.0, "colour": "blue"}, "b")
    before = model.to_state()["stats"]
    with pytest.raises(InvalidEventError, match=r"schema=\{'size': 'categorical'\}") as info:
        model.learn_one({"size": "large", "colour": "red"}, "a")
    assert info.value.reason == "non_numeric"
    with pytest.raises(InvalidEventError, match="'size'"):
        model.learn_one({"size": True}, "a")  # bools are not numbers
    with pytest.raises(InvalidEventError, match="'size'"):
        model.predict_log_proba_one({"size": "large"})
    assert model.to_state()["stats"] == before
    # a categorical feature takes numbers as further categories
    model.learn_one({"colour": 3}, "a")
    assert set(model.categorical.counts["colour"]) == {"red", "blue", 3}


def test_unhashable_categorical_value_is_rejected() -> None:
    model = NaiveBayes()
    model.learn_one({"tags": "x"}, "a")
    with pytest.raises(InvalidEventError, match="'tags'") as info:
        model.learn_one({"tags": ["x", "y"]}, "a")
    assert info.value.reason == "invalid_features"
    with pytest.raises(InvalidEventError, match="unhashable"):
        model.predict_log_proba_one({"tags": ["x"]})


def test_unknown_features_are_ignored_when_predicting() -> None:
    model = NaiveBayes()
    model.learn_one({"a": 1.0, "c": "x"}, "p")
    model.learn_one({"a": 3.0, "c": "y"}, "q")
    base = model.predict_log_proba_one({"a": 2.0, "c": "x"})
    assert model.predict_log_proba_one({"a": 2.0, "c": "x", "new": "z", "new2": 5.0}) == base


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"schema": {"a": "number"}},
            "must be 'categorical', 'numeric' \\(alias 'gaussian'\\) or 'bins'",
        ),
        ({"schema": ["a"]}, "schema must be a mapping"),
        ({"alpha": -1}, "alpha must be non-negative"),
        ({"var_smoothing": -1.0}, "var_smoothing"),
        ({"fit_prior": "yes"}, "fit_prior"),
    ],
)
def test_invalid_parameters(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        NaiveBayes(**kwargs)


# ------------------------------------------------------------------ merge and state
def test_merge_equals_learning_the_union() -> None:
    events = mixed_events(seed=9, n=150)
    a, b, union = NaiveBayes(), NaiveBayes(), NaiveBayes()
    for x, y, w in events[:60]:
        a.learn_one(x, y, w)
    for x, y, w in events[60:]:
        b.learn_one(x, y, w)
    for x, y, w in events:
        union.learn_one(x, y, w)
    a.merge(b)
    for x, _, _ in events[:40]:
        assert_close(a.predict_log_proba_one(x), union.predict_log_proba_one(x), 1e-11)
        assert_close(a.predict_log_proba_one(x), reference_log_proba(events, x))


def test_merge_refuses_conflicting_kinds() -> None:
    a, b = NaiveBayes(), NaiveBayes()
    a.learn_one({"f": 1.0}, "y")
    b.learn_one({"f": "one"}, "y")
    with pytest.raises(IncompatibleModelError, match="different kinds"):
        a.merge(b)


def test_state_round_trip_predicts_identically() -> None:
    events = mixed_events(seed=10, n=160)
    for params in ({}, {"half_life": 4.0, "schema": {"visits": "categorical"}}):
        model = NaiveBayes(**params)
        for i, (x, y, w) in enumerate(events):
            model.learn_one(x, y, w)
            if i % 40 == 39:
                copy = Learner.from_state(orjson.loads(orjson.dumps(model.to_state())))
                assert isinstance(copy, NaiveBayes) and copy.kinds() == model.kinds()
                for probe, _, _ in events[i - 20 : i + 5]:
                    assert copy.predict_log_proba_one(probe) == model.predict_log_proba_one(probe)
                model = copy


def test_state_with_inconsistent_kinds_is_refused() -> None:
    model = NaiveBayes()
    model.learn_one({"f": 1.0, "g": "x"}, "y")
    state = model.to_state()
    state["stats"]["kinds"] = [["f", "categorical"], ["g", "categorical"]]
    with pytest.raises(ModelStateError, match="kinds"):
        Learner.from_state(state)
    state["stats"]["kinds"] = [["f", "ordinal"], ["g", "categorical"]]
    with pytest.raises(ModelStateError, match="kinds"):
        Learner.from_state(state)


def test_model_size() -> None:
    model = NaiveBayes()
    model.learn_one({"f": 1.0, "g": "x"}, "y")
    size = model.model_size()
    assert (size["classes"], size["features"]) == (1, 2)
    # Gaussian: 3 per (class, feature) + 3 global + 1 class weight + total; categorical: 2
    assert size["stored_counts"] == 3 + 3 + 1 + 1 + 2


# ------------------------------------------------------------------ properties
value = st.one_of(
    st.sampled_from(["r", "g", "b"]),
    st.booleans(),
    st.floats(min_value=-1e4, max_value=1e4, allow_nan=False),
    st.integers(-50, 50),
    st.none(),
)


@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from(["p", "q", "r", "s"]), value, max_size=4),
            st.sampled_from(["x", "y", 3]),
            st.sampled_from([1.0, 0.5, 2.0]),
        ),
        min_size=1,
        max_size=20,
    ),
    st.dictionaries(st.sampled_from(["p", "q", "r", "s", "t"]), value, max_size=5),
)
def test_property_matches_reference(events: list[Event], probe: dict[str, Any]) -> None:
    model = NaiveBayes(var_smoothing=1e-3)
    learned: list[Event] = []
    for x, y, w in events:
        try:
            model.learn_one(x, y, w)
        except InvalidEventError:
            continue  # a value of the other type for a Gaussian feature: refused, as designed
        learned.append((x, y, w))
    try:
        got = model.predict_log_proba_one(probe)
    except InvalidEventError:
        kinds = kinds_of(learned, None)
        assert any(
            kinds.get(f) == "gaussian" and v is not None and (isinstance(v, (bool, str)))
            for f, v in probe.items()
        )
        return
    if learned:
        assert math.fsum(math.exp(v) for v in got.values()) == pytest.approx(1.0, abs=1e-9)
    assert_close(got, reference_log_proba(learned, probe, var_smoothing=1e-3), 1e-7)


def test_schema_says_numeric_like_the_seminaive_learners_and_gaussian_stays_an_alias():
    from stream_nb import Learner, NaiveBayes

    events = [({"n": float(i % 7), "c": str(i % 3)}, i % 2) for i in range(60)]
    models = {
        word: NaiveBayes(schema={"n": word, "c": "categorical"}) for word in ("numeric", "gaussian")
    }
    for model in models.values():
        for x, y in events:
            model.learn_one(x, y)
    numeric, gaussian = models["numeric"], models["gaussian"]
    assert numeric.kinds() == gaussian.kinds() == {"n": "gaussian", "c": "categorical"}
    assert numeric.predict_log_proba_one({"n": 2.5, "c": "1"}) == gaussian.predict_log_proba_one(
        {"n": 2.5, "c": "1"}
    )
    # each keeps the word it was given, and its state round-trips unchanged
    for word, model in models.items():
        state = model.to_state()
        assert model.schema["n"] == word
        assert Learner.from_state(state).to_state() == state
    # an unknown kind names every word
    with pytest.raises(ConfigError, match="'categorical', 'numeric'"):
        NaiveBayes(schema={"n": "number"})
