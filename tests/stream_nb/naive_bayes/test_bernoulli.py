"""The BernoulliNB contract: a brute-force reference, scikit-learn, properties, cost.

The reference recomputes the documented formulas from the raw list of events on
every prequential step, scanning the whole vocabulary as the formula reads::

    b_w      = 1 if x_w > binarize else 0 (absent: 0)
    p_{y,w}  = (N_{y,w} + α) / (N_y + 2α)
    score(y) = log P(y) + Σ_{w∈V} [b_w log p_{y,w} + (1 − b_w) log(1 − p_{y,w})]

with ``V`` every feature name ever learned and, with ``half_life=h``, every
past event weighted by ``γ^(weight learned after it)``, ``γ = 2^(-1/h)``.
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
)
from probes import count_logs, guard_vocabulary

import stream_nb.naive_bayes.bernoulli as bernoulli_module
from stream_nb import BernoulliNB, ConfigError, InvalidEventError, Learner
from stream_nb._state import from_pairs


# ------------------------------------------------------------------ brute force
def is_on(value: Any, binarize: float | None) -> bool:
    return bool(value == 1) if binarize is None else value > binarize


def reference_log_proba(
    events: Sequence[Event],
    x: Mapping[str, Any],
    alpha: float = 1.0,
    binarize: float | None = 0.0,
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
        for feature, value in xi.items():
            vocabulary.add(feature)
            if is_on(value, binarize):
                n_yw[y, feature] = n_yw.get((y, feature), 0.0) + w
    prior = log_prior(n_y, math.fsum(n_y.values()), alpha, fit_prior, class_prior)
    scores = {}
    for y, lp in prior.items():
        terms = [lp]
        for feature in vocabulary:
            count = n_yw.get((y, feature), 0.0)
            if feature in x and is_on(x[feature], binarize):
                terms.append(math.log((count + alpha) / (n_y[y] + 2 * alpha)))
            else:
                terms.append(math.log((n_y[y] - count + alpha) / (n_y[y] + 2 * alpha)))
        scores[y] = math.fsum(terms)
    return normalise(scores)


def feature_stream(
    seed: int, n: int, binary: bool = False, vocabulary: int = 30, classes: int = 3
) -> list[Event]:
    """Random events: zero values, thresholds, weights, a class that starts late."""
    rng = random.Random(seed)
    values = [0, 1, True, False] if binary else [0, 1, 2, 3, 0.5, 1.5, 0.0]
    events = []
    for i in range(n):
        x = {
            f"f{min(int(rng.expovariate(0.2)), vocabulary - 1)}": rng.choice(values)
            for _ in range(rng.randint(0, 7))
        }
        late = i > n * 0.6 and rng.random() < 0.3
        y: Hashable = "late" if late else rng.randrange(classes - 1)
        events.append((x, y, rng.choice([1.0, 1.0, 0.5, 2.0, 0.1])))
    return events


# ------------------------------------------------------------------ reference agreement
@pytest.mark.parametrize(
    "params",
    [
        {"alpha": 1.0},
        {"alpha": 0.01, "binarize": 1.0},
        {"alpha": 2.5, "binarize": 0.7, "fit_prior": False},
        {"alpha": 1e-9, "binarize": 0.0},
        {"alpha": 0.5, "binarize": None},
        {"alpha": 0.5, "class_prior": {0: 0.2, 1: 0.5, "late": 0.3}},
        {"alpha": 1.0, "class_prior": {0: 1.0, "late": 3.0}},
        {"alpha": 1.0, "half_life": 15.0},
        {"alpha": 0.2, "binarize": 1.0, "half_life": 3.0},
    ],
)
def test_matches_brute_force_on_every_prequential_step(params: dict[str, Any]) -> None:
    binary = "binarize" in params and params["binarize"] is None
    events = feature_stream(seed=len(repr(params)), n=150, binary=binary)
    assert_prequential(BernoulliNB(**params), events, reference_log_proba, binary=binary, **params)


def test_forgetting_across_renormalisation() -> None:
    events = [(x, y, 1.0) for x, y, _ in feature_stream(seed=4, n=700, classes=2)]
    model = BernoulliNB(alpha=0.3, half_life=1.0)
    for i, (x, y, w) in enumerate(events):
        if i % 50 == 0 or i > 690:
            want = reference_log_proba(events[:i], x, alpha=0.3, half_life=1.0)
            assert_close(model.predict_log_proba_one(x), want)
        model.learn_one(x, y, w)


def test_long_stream_has_no_drift() -> None:
    # The count-grouped aggregates are recomputed exactly (math.fsum) for every
    # class that changed, so nothing accumulates: compare after a long stream
    # of real-valued weights (every raw count distinct).
    rng = random.Random(8)
    events = [
        (
            {f"f{rng.randrange(60)}": 1 for _ in range(rng.randint(1, 8))},
            rng.randrange(3),
            rng.uniform(0.1, 3),
        )
        for _ in range(20_000)
    ]
    model = BernoulliNB(alpha=0.05)
    for i, (x, y, w) in enumerate(events):
        if i % 2000 == 0:
            model.predict_log_proba_one(x)
        model.learn_one(x, y, w)
    for x in ({"f1": 1, "f2": 1}, {"f59": 1}, {}):
        assert_close(model.predict_log_proba_one(x), reference_log_proba(events, x, alpha=0.05))


def test_textbook_example() -> None:
    # Manning, Raghavan & Schütze, Introduction to IR, example 13.2, with our Laplace
    # prior (3+1)/(4+2) and (1+1)/(4+2) instead of the book's 3/4 and 1/4.
    model = BernoulliNB()
    for text, y in [
        ("Chinese Beijing Chinese", "c"),
        ("Chinese Chinese Shanghai", "c"),
        ("Chinese Macao", "c"),
        ("Tokyo Japan Chinese", "j"),
    ]:
        model.learn_one(dict.fromkeys(text.split(), 1), y)
    pc = (4 / 6) * (4 / 5) * (1 / 5) * (1 / 5) * (1 - 2 / 5) * (1 - 2 / 5) * (1 - 2 / 5)
    pj = (2 / 6) * (2 / 3) * (2 / 3) * (2 / 3) * (1 - 1 / 3) * (1 - 1 / 3) * (1 - 1 / 3)
    proba = model.predict_proba_one({"Chinese": 1, "Tokyo": 1, "Japan": 1})
    assert proba["c"] == pytest.approx(pc / (pc + pj), rel=1e-12)


# ------------------------------------------------------------------ scikit-learn
@pytest.mark.parametrize(("alpha", "binarize"), [(1.0, 0.0), (0.05, 1.5)])
def test_matches_sklearn_with_a_fixed_vocabulary(alpha: float, binarize: float) -> None:
    from sklearn.naive_bayes import BernoulliNB as SkBernoulliNB

    rng = np.random.default_rng(4)
    features, classes = 15, [0, 1, 2]
    X = rng.integers(0, 4, size=(150, features)).astype(float)
    Y = np.array([i % 3 if i < 3 else int(rng.integers(0, 3)) for i in range(150)])
    ours = BernoulliNB(alpha=alpha, binarize=binarize)
    sk = SkBernoulliNB(alpha=alpha, binarize=binarize, force_alpha=True)
    # Every event names every column (zeros included), so V = column count from the
    # first event on, as in scikit-learn; classes are all shown in the first batch.
    sk.partial_fit(X[:3], Y[:3], classes=classes)
    for row, y in zip(X[:3], Y[:3], strict=True):
        ours.learn_one({f"f{j}": v for j, v in enumerate(row)}, int(y))
    for row, y in zip(X[3:], Y[3:], strict=True):
        x = {f"f{j}": v for j, v in enumerate(row)}
        jll = sk.predict_joint_log_proba(row[None, :])[0] - sk.class_log_prior_
        n = sum(ours._class_weight.values())
        prior = [math.log((ours._class_weight[c] + alpha) / (n + 3 * alpha)) for c in classes]
        assert_close(
            ours.predict_log_proba_one(x),
            normalise({c: jll[i] + prior[i] for i, c in enumerate(classes)}),
        )
        ours.learn_one(x, int(y))
        sk.partial_fit(row[None, :], [y])


# ------------------------------------------------------------------ numerics & properties
def test_ten_thousand_features_stay_finite() -> None:
    rng = random.Random(2)
    events = []
    model = BernoulliNB(alpha=1e-6)
    for i in range(8):
        x = {f"f{j}": rng.random() < 0.3 for j in range(10_000)}
        events.append((x, i % 2, 1.0))
        model.learn_one(x, i % 2)
    x = {f"f{j}": rng.random() < 0.3 for j in range(10_000)}
    got = model.predict_log_proba_one(x)
    assert all(math.isfinite(v) for v in got.values())
    assert_close(got, reference_log_proba(events, x, alpha=1e-6))


@given(events=st.lists(token_events(3, 3), min_size=1, max_size=12), x=token_events(3, 3))
def test_property_matches_reference_and_weight_scaling(events: list[Event], x: Event) -> None:
    model, scaled = learn_scaled(lambda alpha: BernoulliNB(alpha=alpha, binarize=1.0), events, 0.7)
    got = model.predict_log_proba_one(x[0])
    assert_close(got, reference_log_proba(events, x[0], alpha=0.7, binarize=1.0))
    assert_close(scaled.predict_log_proba_one(x[0]), got)


# ------------------------------------------------------------------ merge & state
@pytest.mark.parametrize("half_life", [None, 10.0])
def test_merge_equals_union_and_state_round_trip(half_life: float | None) -> None:
    events = feature_stream(seed=9, n=120)
    merged, copy = assert_merge_and_copy(
        lambda: BernoulliNB(alpha=0.5, half_life=half_life), events, union=half_life is None
    )
    # the vocabulary includes features that were never on
    assert set(copy.feature_names()) == set(merged.feature_names())


def test_features_never_on_are_in_the_vocabulary() -> None:
    model = BernoulliNB()
    model.learn_one({"a": 1, "b": 0}, "y")
    model.learn_one({"a": 0}, "z")
    state = Learner.from_state(orjson.loads(orjson.dumps(model.to_state())))
    events = [({"a": 1, "b": 0}, "y", 1.0), ({"a": 0}, "z", 1.0)]
    for m in (model, state):
        assert m.model_size()["features"] == 2
        assert_close(m.predict_log_proba_one({"b": 1}), reference_log_proba(events, {"b": 1}))


# ------------------------------------------------------------------ validation
def test_invalid_values_are_rejected_and_leave_the_model_unchanged() -> None:
    model = BernoulliNB()
    model.learn_one({"a": 1}, "y")
    before = model.to_state()
    with pytest.raises(InvalidEventError, match="feature 'bad' has value 'x'") as info:
        model.learn_one({"a": 2, "bad": "x"}, "y")
    assert info.value.reason == "non_numeric"
    with pytest.raises(InvalidEventError, match="feature 'bad' has value nan"):
        model.learn_one({"a": 2, "bad": float("nan")}, "y")
    assert model.to_state() == before
    binary = BernoulliNB(binarize=None)
    with pytest.raises(InvalidEventError, match="with binarize=None values must be") as info:
        binary.learn_one({"a": True, "b": 2}, "y")
    assert info.value.reason == "non_binary"
    with pytest.raises(InvalidEventError, match="feature 'a' has value 'x'"):
        model.predict_log_proba_one({"a": "x"})


def test_parameters_are_validated() -> None:
    with pytest.raises(ConfigError, match="alpha must be non-negative and finite, got -1"):
        BernoulliNB(alpha=-1)
    with pytest.raises(ConfigError, match="binarize must be a finite number"):
        BernoulliNB(binarize=float("nan"))
    with pytest.raises(ConfigError, match="binarize must be a finite number"):
        BernoulliNB(binarize="0")  # type: ignore[arg-type]


def test_inputs_are_not_mutated_and_cold_start() -> None:
    model = BernoulliNB()
    x = {"a": 2, "b": 0}
    model.learn_one(x, "y")
    assert x == {"a": 2, "b": 0}
    assert BernoulliNB().predict_log_proba_one({"a": 1}) == {}


# ------------------------------------------------------------------ cost
def distinct_counts(model: BernoulliNB) -> dict[Hashable, set[float]]:
    """The distinct counts ``N_{y,w} > 0`` of each class, from the model's state."""
    out: dict[Hashable, set[float]] = {}
    for by_class in from_pairs(model.to_state()["stats"]["counts"]).values():
        for y, n in from_pairs(by_class).items():
            out.setdefault(y, set()).add(n)
    return out


def test_prediction_does_not_scan_the_vocabulary(monkeypatch: pytest.MonkeyPatch) -> None:
    model = BernoulliNB()
    # 100,000 words in 3 classes; counts 1..4, so each class has few distinct counts.
    for i in range(0, 100_000, 100):
        x = dict.fromkeys((f"w{j}" for j in range(i, i + 100)), 1)
        for repeat in range(1 + i // 100 % 4):
            model.learn_one(x, (i + repeat) % 3)
    assert model.model_size()["features"] == 100_000
    distinct = max(map(len, distinct_counts(model).values()))
    assert distinct <= 4
    guard = guard_vocabulary(model)
    logs = count_logs(monkeypatch, bernoulli_module)
    x = {"w5": 1, "w70000": 1, "w99999": 0, "never": 1}
    model.learn_one(x, 1)
    model.predict_log_proba_one(x)
    classes = 3
    assert guard.lookups <= 2 * len(x)
    # per (on-feature, class) one log, per class a few, plus one per distinct count
    # of every class whose aggregate was stale (all of them on the first prediction)
    assert len(logs) <= len(x) * classes + 3 * classes + classes * (distinct + 1)
