"""``feature_weights`` of CategoricalNB and the token learners, against a brute force.

``score(y) = log P(y) + Σ_j w_j log P(x_j | y)`` (per token for MultinomialNB,
ComplementNB and BernoulliNB): the references of :mod:`test_alpha_zero`
multiply each term by its weight and leave weight-0 terms out, so with
``alpha = 0`` a weight-0 term that is ``-inf`` is not a zero-probability term.
Every prequential step of random streams, with and without forgetting, with
``alpha`` 0 and 0.5, to ``1e-12``; the batch paths take the per-event path
while weights are set, so they equal it to the byte.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import orjson
import pytest

from stream_nb import (
    BernoulliNB,
    CategoricalNB,
    ComplementNB,
    IncompatibleModelError,
    Learner,
    MultinomialNB,
)
from stream_nb._exceptions import ConfigError
from tests.stream_nb.naive_bayes.oracles import Event, token_stream
from tests.stream_nb.naive_bayes.test_alpha_zero import (
    bernoulli_reference,
    categorical_probe,
    categorical_reference,
    categorical_stream,
    complement_reference,
    multinomial_reference,
    prequential,
    token_probe,
)

pytestmark = pytest.mark.filterwarnings("error")

CATEGORICAL_WEIGHTS = {"a": 0.0, "b": 2.5, "c": 0.25}
TOKEN_WEIGHTS = {"t0": 0.0, "t1": 3.0, "t2": 0.5, "t5": 0.0, "unseen1": 0.0}


@pytest.fixture(autouse=True)
def _numpy_raises() -> Iterator[None]:
    with np.errstate(all="raise"):
        yield


Reference = Callable[..., dict[Hashable, float]]

CASES: list[tuple[str, Callable[..., Learner], Reference, dict[str, Any]]] = [
    ("categorical", CategoricalNB, categorical_reference, {}),
    ("multinomial", MultinomialNB, multinomial_reference, {}),
    ("complement", ComplementNB, complement_reference, {"norm": False}),
    ("complement-norm", ComplementNB, complement_reference, {"norm": True}),
    ("bernoulli", BernoulliNB, bernoulli_reference, {}),
]


@pytest.mark.parametrize("alpha", [0.0, 0.5])
@pytest.mark.parametrize("half_life", [None, 40.0])
@pytest.mark.parametrize(("name", "cls", "reference", "extra"), CASES, ids=[c[0] for c in CASES])
def test_weighted_scores_match_brute_force(
    name: str,
    cls: Callable[..., Learner],
    reference: Reference,
    extra: dict[str, Any],
    half_life: float | None,
    alpha: float,
) -> None:
    categorical = name == "categorical"
    weights = CATEGORICAL_WEIGHTS if categorical else TOKEN_WEIGHTS
    events = categorical_stream(2, 150) if categorical else token_stream(2, 150)
    model = cls(alpha=alpha, half_life=half_life, feature_weights=weights, **extra)

    def want(ev: Sequence[Event], x: Mapping[str, Any]) -> dict[Hashable, float]:
        return reference(ev, x, half_life, alpha=alpha, feature_weights=weights, **extra)

    prequential(model, events, want, categorical_probe if categorical else token_probe)


def test_weight_zero_removes_a_feature_but_keeps_learning_it() -> None:
    model = CategoricalNB(alpha=0, feature_weights={"id": 0})
    plain = CategoricalNB(alpha=0)
    for x, y in [
        ({"id": 1, "sky": "sun"}, "play"),
        ({"id": 2, "sky": "sun"}, "stay"),
        ({"id": 3, "sky": "rain"}, "stay"),
    ]:
        model.learn_one(x, y)
        plain.learn_one(x, y)
    # id 2, never seen with "play", rules it out of the plain model, not of the weighted
    # one: 1/3 × P(sun | play) = 1/3 against 2/3 × P(sun | stay) = 1/3
    assert plain.predict_proba_one({"id": 2, "sky": "sun"}) == {"stay": 1.0}
    weighted = model.predict_proba_one({"id": 2, "sky": "sun"})
    assert weighted == pytest.approx({"play": 0.5, "stay": 0.5}, abs=1e-15)
    assert model.categorical.counts["id"] == plain.categorical.counts["id"]  # still learned


@pytest.mark.parametrize("cls", [MultinomialNB, ComplementNB, BernoulliNB])
def test_token_weight_zero_is_not_a_zero_probability_term(cls: Callable[..., Learner]) -> None:
    model = cls(alpha=0, feature_weights={"rare": 0})
    plain = cls(alpha=0)
    for x, y in [
        ({"spam": 1, "rare": 1}, "junk"),
        ({"spam": 1}, "junk"),
        ({"meeting": 1, "spam": 1}, "work"),
        ({"spam": 1}, "work"),
    ]:
        model.learn_one(x, y)
        plain.learn_one(x, y)
    x = {"rare": 1, "spam": 1}
    assert plain.predict_log_proba_one(x).keys() == {"junk"}  # "rare": never in "work"
    lp = model.predict_log_proba_one(x)
    assert lp.keys() == {"junk", "work"}
    assert all(math.isfinite(v) for v in lp.values())


@pytest.mark.parametrize(
    ("make", "stream", "probe"),
    [
        (lambda **k: CategoricalNB(**k), categorical_stream, categorical_probe),
        (lambda **k: MultinomialNB(**k), token_stream, token_probe),
        (lambda **k: ComplementNB(norm=True, **k), token_stream, token_probe),
        (lambda **k: BernoulliNB(**k), token_stream, token_probe),
    ],
)
def test_state_merge_and_batch_paths(
    make: Callable[..., Learner],
    stream: Callable[[int, int], list[Event]],
    probe: Callable[[Mapping[str, Any], random.Random], dict[str, Any]],
) -> None:
    weights = {"a": 0.0, "b": 2.0, "t0": 0.0, "t1": 2.0, 3: 0.5}
    events = stream(4, 300)
    model = make(alpha=0.5, feature_weights=weights)
    for x, y, w in events[:150]:
        model.learn_one(x, y, w)
    state = orjson.loads(orjson.dumps(model.to_state()))
    copy = Learner.from_state(state)
    assert copy.get_params()["feature_weights"] == {k: float(v) for k, v in weights.items()}
    rng = random.Random(0)
    for x, _, _ in events[150:200]:
        x_probe = probe(x, rng)
        assert copy.predict_log_proba_one(x_probe) == model.predict_log_proba_one(x_probe)
    other = make(alpha=0.5, feature_weights=weights)
    for x, y, w in events[150:]:
        other.learn_one(x, y, w)
    copy.merge(other)
    with pytest.raises(IncompatibleModelError, match=r"parameters differ: \['feature_weights'\]"):
        copy.merge(make(alpha=0.5, feature_weights={"a": 1.0}))
    with pytest.raises(IncompatibleModelError, match="feature_weights"):
        copy.merge(make(alpha=0.5))
    # batches: every kernel weights its terms (predictions to 1e-9, the counts to the bit)
    fast, slow = make(alpha=0.5, feature_weights=weights), make(alpha=0.5, feature_weights=weights)
    for start in range(0, len(events), 100):
        batch = events[start : start + 100]
        xs, ys, ws = [e[0] for e in batch], [e[1] for e in batch], [e[2] for e in batch]
        got = fast.predict_learn_many(xs, ys, ws)
        want = Learner.predict_learn_many(slow, xs, ys, ws)
        assert got[1:] == want[1:]
        for lp, want_lp in zip(got[0], want[0], strict=True):
            assert lp is not None and want_lp is not None and lp.keys() == want_lp.keys()
            for y, v in lp.items():
                assert math.isclose(v, want_lp[y], rel_tol=1e-9, abs_tol=1e-9)
    assert fast.to_state() == slow.to_state()
    if isinstance(fast, CategoricalNB):  # (the kernel does take them)
        assert fast.predict_learn_columns(("a", "b"), [["x"] * 100, ["y"] * 100], ys) is not None
    else:
        assert fast.predict_learn_rows([x for x, _, _ in events[:100]], ys) is not None


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ({"a": -1}, r"feature_weights\['a'\] must be non-negative and finite, got -1"),
        ({"a": math.inf}, r"feature_weights\['a'\] must be non-negative and finite"),
        ({"a": 1e7}, r"feature_weights\['a'\] must be at most 1e\+06"),
        ({"a": "1"}, r"feature_weights\['a'\] must be a non-negative number"),
        ({("a", "b"): 1}, r"feature_weights: feature name \('a', 'b'\)"),
        ([("a", 1)], r"feature_weights must be a mapping"),
    ],
)
@pytest.mark.parametrize("cls", [CategoricalNB, MultinomialNB, ComplementNB, BernoulliNB])
def test_invalid_weights_are_refused(cls: Callable[..., Learner], weights: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        cls(feature_weights=weights)


def test_empty_weights_are_no_weights() -> None:
    assert CategoricalNB(feature_weights={}).feature_weights is None
    assert MultinomialNB(feature_weights={}).get_params()["feature_weights"] is None


@pytest.mark.parametrize("cls", [CategoricalNB, MultinomialNB, ComplementNB, BernoulliNB])
def test_a_state_saved_before_feature_weights_still_loads(cls: Callable[..., Learner]) -> None:
    model = cls()
    model.learn_one({"a": 1}, "x")
    state = model.to_state()
    del state["params"]["feature_weights"]  # (states written before the parameter existed)
    assert Learner.from_state(state).to_state() == model.to_state()
