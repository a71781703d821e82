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
from collections.abc import Hashable, KeysView, Mapping, Sequence
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracles import Event, decayed_weights, normalise

import stream_nb.naive_bayes.bernoulli as bernoulli_module
from stream_nb import BernoulliNB, ConfigError, InvalidEventError, Learner

#: Agreement required between the learner and the brute-force reference.
TOLERANCE = 1e-9


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
    n_y: dict[Hashable, float] = {}
    n_yw: dict[tuple[Hashable, str], float] = {}
    vocabulary: set[str] = set()
    for (xi, y, _), w in zip(events, weights, strict=True):
        n_y[y] = n_y.get(y, 0.0) + w
        for feature, value in xi.items():
            vocabulary.add(feature)
            if is_on(value, binarize):
                n_yw[y, feature] = n_yw.get((y, feature), 0.0) + w
    n, k = math.fsum(n_y.values()), len(n_y)
    scores = {}
    for y in n_y:
        if class_prior is not None:
            if y not in class_prior:
                continue
            terms = [math.log(class_prior[y])]
        elif fit_prior:
            terms = [math.log((n_y[y] + alpha) / (n + k * alpha))]
        else:
            terms = [-math.log(k)]
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


def probe(x: Mapping[str, Any], rng: random.Random, binary: bool) -> dict[str, Any]:
    """The event plus a feature never learned."""
    out = dict(x)
    out[f"unseen{rng.randrange(3)}"] = 1 if binary else rng.randint(0, 2)
    return out


def assert_close(got: Mapping[Hashable, float], want: Mapping[Hashable, float]) -> None:
    assert got.keys() == want.keys()
    for c, v in want.items():
        assert abs(got[c] - v) <= TOLERANCE * max(1.0, abs(v)), (c, got[c], v)


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
    rng = random.Random(0)
    model = BernoulliNB(**params)
    for i, (x, y, w) in enumerate(events):
        x_probe = probe(x, rng, binary)
        want = reference_log_proba(events[:i], x_probe, **params)
        assert_close(model.predict_log_proba_one(x_probe), want)
        model.learn_one(x, y, w)


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


event_strategy = st.tuples(
    st.dictionaries(
        st.sampled_from([f"w{i}" for i in range(8)]),
        st.one_of(st.integers(0, 3), st.floats(0, 3, allow_nan=False)),
        max_size=5,
    ),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([1.0, 0.5, 3.0]),
)


@given(events=st.lists(event_strategy, min_size=1, max_size=12), x=event_strategy)
def test_property_matches_reference_and_weight_scaling(
    events: list[Event], x: tuple[dict[str, Any], str, float]
) -> None:
    model = BernoulliNB(alpha=0.7, binarize=1.0)
    scaled = BernoulliNB(alpha=0.7 * 4.0, binarize=1.0)
    for xi, y, w in events:
        model.learn_one(xi, y, w)
        scaled.learn_one(xi, y, w * 4.0)
    got = model.predict_log_proba_one(x[0])
    assert_close(got, reference_log_proba(events, x[0], alpha=0.7, binarize=1.0))
    assert_close(scaled.predict_log_proba_one(x[0]), got)


# ------------------------------------------------------------------ merge & state
@pytest.mark.parametrize("half_life", [None, 10.0])
def test_merge_equals_union_and_state_round_trip(half_life: float | None) -> None:
    events = feature_stream(seed=9, n=120)
    a, b, union = (BernoulliNB(alpha=0.5, half_life=half_life) for _ in range(3))
    for i, (x, y, w) in enumerate(events):
        (a if i % 2 else b).learn_one(x, y, w)
    for x, y, w in [e for i, e in enumerate(events) if i % 2] + [
        e for i, e in enumerate(events) if not i % 2
    ]:
        union.learn_one(x, y, w)
    merged = Learner.from_state(orjson.loads(orjson.dumps(a.to_state())))
    merged.merge(b)
    copy = Learner.from_state(orjson.loads(orjson.dumps(merged.to_state())))
    for x, _, _ in events[:30]:
        if half_life is None:
            assert_close(merged.predict_log_proba_one(x), union.predict_log_proba_one(x))
        assert copy.predict_log_proba_one(x) == merged.predict_log_proba_one(x)
    # the vocabulary includes features that were never on
    assert set(copy._counts) == set(merged._counts)


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
    with pytest.raises(ConfigError, match="alpha must be positive and finite, got -1"):
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
class ScanGuard(dict):  # type: ignore[type-arg]
    """A dict that counts lookups and fails on any scan of its contents."""

    lookups = 0

    def get(self, key: Any, default: Any = None) -> Any:
        ScanGuard.lookups += 1
        return super().get(key, default)

    def _scan(self, *args: Any) -> Any:
        raise AssertionError("the vocabulary was scanned")

    items = values = __iter__ = _scan  # type: ignore[assignment]

    def keys(self) -> Any:  # type: ignore[override]
        """A view that answers membership (O(1)) but fails if iterated."""
        return _GuardedKeys(self)


class _GuardedKeys(KeysView):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        raise AssertionError("the vocabulary was scanned")


def test_prediction_does_not_scan_the_vocabulary(monkeypatch: pytest.MonkeyPatch) -> None:
    model = BernoulliNB()
    # 100,000 words in 3 classes; counts 1..4, so each class has few distinct counts.
    for i in range(0, 100_000, 100):
        x = dict.fromkeys((f"w{j}" for j in range(i, i + 100)), 1)
        for repeat in range(1 + i // 100 % 4):
            model.learn_one(x, (i + repeat) % 3)
    assert len(model._counts) == 100_000
    distinct = max(len(h) for h in model._hist)
    assert distinct <= 4
    model._counts = ScanGuard(model._counts)
    logs = []

    def counting_log(v: float) -> float:
        logs.append(v)
        return math.log(v)

    monkeypatch.setattr(bernoulli_module, "_log", counting_log)
    monkeypatch.setattr(bernoulli_module, "_log1p", lambda v: counting_log(1.0 + v))
    x = {"w5": 1, "w70000": 1, "w99999": 0, "never": 1}
    ScanGuard.lookups = 0
    model.learn_one(x, 1)
    model.predict_log_proba_one(x)
    classes = 3
    assert ScanGuard.lookups <= 2 * len(x)
    # per (on-feature, class) one log, per class a few, plus one per distinct count
    # of every class whose aggregate was stale (all of them on the first prediction)
    assert len(logs) <= len(x) * classes + 3 * classes + classes * (distinct + 1)
