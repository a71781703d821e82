"""The CategoricalNB contract: a brute-force reference, scikit-learn, properties, forgetting.

The reference recomputes the documented formulas from the raw list of events on
every prequential step::

    log P(y)         = log((N_y + α) / (N + Kα))
    log P(x_i=v | y) = log((N_{y,i,v} + α) / (N_{y,i} + S_i α))

and, with ``half_life=h``, weights every past event by ``γ^(weight learned
after it)``, ``γ = 2^(-1/h)``.
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
from oracles import Event, decayed_weights, normalise

from stream_nb import CategoricalNB, ConfigError, InvalidEventError, Learner

#: Agreement required between the learner and the brute-force reference.
TOLERANCE = 1e-9


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
    n_y: dict[Hashable, float] = {}
    for (_, y, _), w in zip(events, weights, strict=True):
        n_y[y] = n_y.get(y, 0.0) + w
    n = sum(weights)
    k = len(n_y)
    if class_prior is not None:
        jll = {y: math.log(class_prior[y]) for y in n_y if y in class_prior}
    elif not fit_prior:
        jll = {y: -math.log(k) for y in n_y}
    else:
        jll = {y: math.log((n_y[y] + alpha) / (n + k * alpha)) for y in n_y}
    for feature, value in x.items():
        if value is None:
            continue
        learned = [
            (ex[feature], y, w)
            for (ex, y, _), w in zip(events, weights, strict=True)
            if ex.get(feature) is not None
        ]
        if not learned:
            continue  # a feature never learned contributes nothing
        s_i = len({v for v, _, _ in learned})
        for y in jll:
            n_yi = sum(w for _, c, w in learned if c == y)
            n_yiv = sum(w for v, c, w in learned if c == y and v == value)
            jll[y] += math.log((n_yiv + alpha) / (n_yi + s_i * alpha))
    return normalise(jll)


def assert_close(got: Mapping[Hashable, float], want: Mapping[Hashable, float]) -> None:
    assert got.keys() == want.keys()
    for c in want:
        assert abs(got[c] - want[c]) <= TOLERANCE, (c, got[c], want[c])


def random_stream(seed: int, n: int, weighted: bool = True) -> list[Event]:
    """Features present or absent (or None), growing value sets, classes appearing late."""
    rng = random.Random(seed)
    labels = ["a", "b", "c", 7, True]  # mixed label types; 7 and True arrive late
    events = []
    for i in range(n):
        y = rng.choice(labels[: 2 + min(3, i * 3 // n)])
        x: dict[str, Any] = {}
        if rng.random() < 0.85:
            x["colour"] = rng.choice(["red", "green", "blue", f"new{i // 40}"])
        if rng.random() < 0.7:
            x["size"] = rng.randint(0, 2 + i // 50)  # int values, the set grows
        if rng.random() < 0.6:
            x["flag"] = rng.random() < (0.8 if y == "a" else 0.3)
        if rng.random() < 0.1:
            x["colour"] = None  # explicitly missing
        if i > n // 2 and rng.random() < 0.5:
            x["late"] = rng.choice("xyz")  # a feature that appears late
        w = rng.choice([1.0, 1.0, 0.5, 2.5, 0.01]) if weighted else 1.0
        events.append((x, y, w))
    return events


def probes(events: Sequence[Event], i: int) -> list[dict[str, Any]]:
    x = events[i][0]
    return [
        x,
        {**x, "colour": "never-seen", "unknown": 1},  # unseen value, unknown feature
        {},
    ]


PARAMS = [
    pytest.param({}, id="laplace"),
    pytest.param({"alpha": 0.1}, id="alpha0.1"),
    pytest.param({"alpha": 3.7}, id="alpha3.7"),
    pytest.param({"alpha": 1e-8}, id="alpha1e-8"),
    pytest.param({"fit_prior": False}, id="uniform-prior"),
    pytest.param({"class_prior": {"a": 0.2, "b": 0.5, "c": 0.3, 7: 1.0}}, id="class-prior"),
    pytest.param({"half_life": 7.0}, id="half-life7"),
    pytest.param({"alpha": 0.5, "half_life": 30.0}, id="half-life30"),
]


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_brute_force_on_every_prequential_step(params: dict[str, Any], seed: int) -> None:
    events = random_stream(seed, 160)
    model = CategoricalNB(**params)
    for i, (x, y, w) in enumerate(events):
        for probe in probes(events, i):
            want = reference_log_proba(events[:i], probe, **params)
            assert_close(model.predict_log_proba_one(probe), want)
        model.learn_one(x, y, w)


def test_class_prior_leaves_out_classes_it_does_not_name() -> None:
    model = CategoricalNB(class_prior={"a": 1.0})
    model.learn_one({"f": 1}, "a")
    model.learn_one({"f": 2}, "b")
    assert model.predict_proba_one({"f": 2}) == {"a": 1.0}


def test_textbook_example_by_hand() -> None:
    # 3 events; sky: sunny/rain (S=2), wind: weak/strong (S=2); α = 1.
    model = CategoricalNB()
    model.learn_one({"sky": "sunny", "wind": "weak"}, "play")
    model.learn_one({"sky": "rain", "wind": "strong"}, "stay")
    model.learn_one({"sky": "sunny", "wind": "strong"}, "play")
    # play: prior (2+1)/(3+2) = 3/5, P(sunny|play) = (2+1)/(2+2) = 3/4
    # stay: prior (1+1)/(3+2) = 2/5, P(sunny|stay) = (0+1)/(1+2) = 1/3
    play, stay = 3 / 5 * 3 / 4, 2 / 5 * 1 / 3
    proba = model.predict_proba_one({"sky": "sunny"})
    assert proba["play"] == pytest.approx(play / (play + stay), abs=1e-15)
    assert model.predict_one({"sky": "sunny", "wind": "strong"}) == "play"


# ------------------------------------------------------------------ forgetting
@pytest.mark.parametrize("half_life", [0.05, 1.0])
def test_half_life_matches_brute_force_across_renormalisation(half_life: float) -> None:
    """A tiny half-life drives the scale below 1e-30: raw counts are renormalised."""
    events = random_stream(7, 520 if half_life == 1.0 else 120)
    model = CategoricalNB(alpha=0.01, half_life=half_life)
    renormalised = 0
    for i, (x, y, w) in enumerate(events):
        if i % 4 == 0 or i > len(events) - 20:
            for probe in probes(events, i)[:2]:
                want = reference_log_proba(events[:i], probe, alpha=0.01, half_life=half_life)
                assert_close(model.predict_log_proba_one(probe), want)
        before = model._scale
        model.learn_one(x, y, w)
        renormalised += model._scale > before
    assert renormalised >= 1


def test_half_life_state_round_trip_keeps_the_scale() -> None:
    events = random_stream(3, 200)
    model = CategoricalNB(half_life=5.0)
    for x, y, w in events[:100]:
        model.learn_one(x, y, w)
    copy = Learner.from_state(orjson.loads(orjson.dumps(model.to_state())))
    for x, y, w in events[100:]:
        model.learn_one(x, y, w)
        copy.learn_one(x, y, w)
        assert copy.predict_log_proba_one(x) == model.predict_log_proba_one(x)


# ------------------------------------------------------------------ scikit-learn
@pytest.mark.parametrize("alpha", [1.0, 0.3])
@pytest.mark.parametrize("fit_prior", [True, False])
def test_agrees_with_sklearn_when_categories_are_known(alpha: float, fit_prior: bool) -> None:
    """Same semantics when every feature is always present and every category seen.

    scikit-learn's prior is ``N_y / N`` (not smoothed); it is given ours through
    ``class_prior``. ``S_i`` equals sklearn's ``n_categories_`` because each
    category appears in the first events and ``min_categories`` is set.
    """
    from sklearn.naive_bayes import CategoricalNB as SkCategoricalNB

    rng = np.random.default_rng(42)
    n_categories = [3, 5, 2, 4]
    n, classes = 300, np.array([0, 1, 2])
    columns = []
    for k in n_categories:
        column = rng.integers(0, k, size=n)
        column[:k] = np.arange(k)  # every category occurs
        columns.append(column)
    data = np.stack(columns, axis=1)
    labels = rng.choice(classes, size=n, p=[0.5, 0.3, 0.2])
    labels[:3] = classes
    weights = rng.choice([0.5, 1.0, 2.0], size=n)

    ours = CategoricalNB(alpha=alpha, fit_prior=fit_prior)
    for row, y, w in zip(data, labels, weights, strict=True):
        ours.learn_one({f"f{i}": int(v) for i, v in enumerate(row)}, int(y), float(w))

    total = weights.sum()
    if fit_prior:
        prior = [
            (weights[labels == c].sum() + alpha) / (total + len(classes) * alpha) for c in classes
        ]
    else:
        prior = [1 / len(classes)] * len(classes)
    theirs = SkCategoricalNB(alpha=alpha, class_prior=prior, min_categories=n_categories)
    theirs.fit(data, labels, sample_weight=weights)

    expected = theirs.predict_log_proba(data)
    for row, want in zip(data, expected, strict=True):
        got = ours.predict_log_proba_one({f"f{i}": int(v) for i, v in enumerate(row)})
        assert [got[int(c)] for c in theirs.classes_] == pytest.approx(want, abs=TOLERANCE)


# ------------------------------------------------------------------ properties
values = st.one_of(st.sampled_from(["r", "g", "b"]), st.integers(-2, 2), st.none())
xs = st.dictionaries(st.sampled_from(["f0", "f1", "f2", "f3"]), values, max_size=4)
event_lists = st.lists(
    st.tuples(xs, st.sampled_from(["a", "b", 3]), st.sampled_from([1.0, 0.5, 3.0])),
    min_size=1,
    max_size=25,
)
alphas = st.sampled_from([1e-6, 0.5, 1.0, 10.0])


@given(events=event_lists, alpha=alphas, probe=xs)
def test_property_matches_reference(events: list[Event], alpha: float, probe: dict) -> None:
    model = CategoricalNB(alpha=alpha)
    for x, y, w in events:
        model.learn_one(x, y, w)
    assert_close(model.predict_log_proba_one(probe), reference_log_proba(events, probe, alpha))
    proba = model.predict_proba_one(probe)
    assert math.fsum(proba.values()) == pytest.approx(1.0, abs=1e-12)


@given(events=event_lists, seed=st.integers(0, 2**16), probe=xs)
def test_property_event_order_does_not_matter(events: list[Event], seed: int, probe: dict) -> None:
    shuffled = events[:]
    random.Random(seed).shuffle(shuffled)
    a, b = CategoricalNB(), CategoricalNB()
    for x, y, w in events:
        a.learn_one(x, y, w)
    for x, y, w in shuffled:
        b.learn_one(x, y, w)
    want = a.predict_log_proba_one(probe)
    assert b.predict_log_proba_one(probe) == pytest.approx(want, abs=TOLERANCE)


@given(events=event_lists, cut=st.integers(0, 25), probe=xs)
def test_property_merge_and_state(events: list[Event], cut: int, probe: dict) -> None:
    a, b, union = CategoricalNB(alpha=0.5), CategoricalNB(alpha=0.5), CategoricalNB(alpha=0.5)
    for i, (x, y, w) in enumerate(events):
        (a if i < cut else b).learn_one(x, y, w)
        union.learn_one(x, y, w)
    restored = Learner.from_state(orjson.loads(orjson.dumps(a.merge(b).to_state())))
    want = union.predict_log_proba_one(probe)
    assert restored.predict_log_proba_one(probe) == pytest.approx(want, abs=TOLERANCE)


@given(events=event_lists)
def test_property_unseen_values_and_features_give_the_prior(events: list[Event]) -> None:
    """Only an unseen value of a learned feature moves the posterior; unknown features don't."""
    model = CategoricalNB()
    for x, y, w in events:
        model.learn_one(x, y, w)
    prior = model.predict_log_proba_one({})
    assert model.predict_log_proba_one({"never": "x", "f0": None}) == prior


# ------------------------------------------------------------------ stability
def test_ten_thousand_features_stay_finite() -> None:
    rng = random.Random(0)
    model = CategoricalNB(alpha=1e-3)
    features = [f"f{i}" for i in range(10_000)]
    for i in range(30):
        y = i % 3
        model.learn_one({f: rng.choice("abc") if y else "a" for f in features}, y)
    x = {f: rng.choice("abcd") for f in features}
    log_proba = model.predict_log_proba_one(x)
    assert len(log_proba) == 3
    assert all(math.isfinite(v) and v <= 0.0 for v in log_proba.values())
    assert math.fsum(model.predict_proba_one(x).values()) == pytest.approx(1.0)
    assert min(log_proba.values()) < -1000  # far beyond what linear space could hold


def test_extreme_weights_stay_finite() -> None:
    model = CategoricalNB()
    model.learn_one({"f": "a"}, 0, 1e-50)  # the bounds of stream_nb.limits
    model.learn_one({"f": "b"}, 1, 1e50)
    log_proba = model.predict_log_proba_one({"f": "a"})
    assert all(math.isfinite(v) for v in log_proba.values())
    assert math.fsum(model.predict_proba_one({"f": "a"}).values()) == pytest.approx(1.0)
    state = model.to_state()
    for w in (1e-300, 1e300, 1.7976931348623157e308, 5e-324):  # beyond them: rejected
        with pytest.raises(InvalidEventError, match=r"sample weight w=.* is outside") as exc:
            model.learn_one({"f": "a"}, 0, w)
        assert exc.value.reason == "out_of_range"
    assert model.to_state() == state


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"alpha": -1.0}, r"alpha must be non-negative and finite, got -1.0.*alpha=0 \(maximum"),
        ({"alpha": math.inf}, r"alpha must be non-negative and finite, got inf"),
        ({"alpha": math.nan}, r"alpha must be non-negative and finite, got nan"),
        ({"alpha": 1e-101}, r"alpha must be in \[1e-100, 1e\+10\] or exactly 0"),
        ({"alpha": "1"}, r"alpha must be a non-negative number, got '1'"),
        ({"alpha": True}, r"alpha must be a non-negative number, got True"),
        ({"fit_prior": "false"}, r"fit_prior must be True or False, got 'false'"),
        ({"fit_prior": 0}, r"fit_prior must be True or False, got 0"),
        ({"class_prior": {}}, r"class_prior must be a non-empty mapping"),
        ({"class_prior": [0.5, 0.5]}, r"class_prior must be a non-empty mapping"),
        (
            {"class_prior": {"a": 0.0}},
            r"class_prior\['a'\] must be a positive probability, got 0.0",
        ),
        ({"class_prior": {"a": -1}}, r"class_prior\['a'\] must be a positive probability"),
        ({"class_prior": {"a": "x"}}, r"class_prior\['a'\] must be a positive probability"),
        ({"half_life": 0}, r"half_life must be a positive, finite number of events, got 0"),
        ({"half_life": -3.0}, r"half_life must be a positive, finite number"),
        ({"half_life": math.inf}, r"half_life must be a positive, finite number.*None"),
        ({"half_life": "10"}, r"half_life must be a positive number of events or None, got '10'"),
        ({"half_life": True}, r"half_life must be a positive number of events or None"),
    ],
)
def test_invalid_parameters_are_rejected(params: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        CategoricalNB(**params)


def test_parameters_and_size() -> None:
    model = CategoricalNB(alpha=0.5, class_prior={"a": 1.0}, half_life=10)
    assert model.get_params() == {
        "alpha": 0.5,
        "fit_prior": True,
        "class_prior": {"a": 1.0},
        "max_values_per_feature": None,
        "feature_weights": None,
        "max_classes": None,
        "max_features": None,
        "half_life": 10,
    }
    assert repr(model) == (
        "CategoricalNB(alpha=0.5, fit_prior=True, class_prior={'a': 1.0}, "
        "max_values_per_feature=None, feature_weights=None, max_classes=None, "
        "max_features=None, half_life=10)"
    )
    model.learn_one({"f": "x", "g": 1}, "a")
    model.learn_one({"f": "y"}, "b")
    # 2 class weights + present (f: a, b; g: a) + counts (f/x/a, f/y/b, g/1/a)
    assert model.model_size() == {"classes": 2, "features": 2, "stored_counts": 8, "bytes": 800}
