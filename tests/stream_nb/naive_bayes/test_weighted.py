"""WeightedNB: NaiveBayes terms under learned feature weights.

The reference recomputes every term from the raw events (as test_mixed's)::

    score(y)  = log P(y) + Σ_f w_f log P(x_f | y)
    gradient  = log P(x_f | y) − Σ_c P(c | x) log P(x_f | c)
    step      w_f ← clip(w_f + η_t min(ω, 1) clip(g_f − λ (w_f − 1), ±2), 0, 1e6),
              η_t = η0 / (1 + t / τ)

and the learner must agree with it on every event; the weights it learns must
drop copies and noise and lower the prequential log loss.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from oracles import (
    Event,
    assert_close,
    class_weights,
    decayed_weights,
    gaussian_terms,
    log_prior,
    normalise,
)
from test_mixed import kinds_of, mixed_events

from stream_nb import (
    CategoricalNB,
    ConfigError,
    IncompatibleModelError,
    InvalidEventError,
    Learner,
    ModelStateError,
    NaiveBayes,
    WeightedNB,
)
from stream_nb.checks import check_learner, suitable_events
from stream_nb.cli.entry import main
from stream_nb.datasets import mixed_stream
from stream_nb.naive_bayes._weights import event_terms, gradient
from stream_nb.naive_bayes.weighted import GRADIENT_CLIP, MAX_FEATURE_WEIGHT

#: What WeightedNB is exempt from in the generic checks (see test_checks.EXEMPT).
EXEMPT = {
    "merge_union": "weights follow the event order",
    "chunked_learning": "weights follow the event order",
    "weight_repetition": "one gradient step per event",
}
_WEIGHT_KEYS = ("weights", "evidence", "steps")


# ------------------------------------------------------------------ brute force
def reference_terms(
    events: Sequence[Event],
    x: Mapping[str, Any],
    alpha: float = 1.0,
    var_smoothing: float | None = None,
    half_life: float | None = None,
) -> tuple[dict[Hashable, float], dict[str, dict[Hashable, float]]]:
    """``log P(y)`` and ``log P(x_f | y)`` of each contributing feature, from the raw events."""
    weights = decayed_weights(events, half_life)
    prior = log_prior(class_weights(events, weights), math.fsum(weights), alpha)
    kinds = kinds_of(events, None)
    numeric = {f for f, kind in kinds.items() if kind == "gaussian"}
    classes = list(prior)
    terms: dict[str, dict[Hashable, float]] = {}
    for f, value in x.items():
        if value is None or f not in kinds:
            continue
        if kinds[f] == "gaussian":
            if not any(ex.get(f) is not None for ex, _, _ in events):
                continue
            by_class = {
                y: [ex for ex, c, _ in events if c == y and ex.get(f) is not None] for y in classes
            }
            if not all(by_class.values()):
                continue  # some class has no statistics for f: NaiveBayes leaves it out
            term = gaussian_terms(events, weights, {f: value}, classes, var_smoothing, numeric)
            if any(term.values()):  # (all 0: every Gaussian feature constant, left out)
                terms[f] = term
            continue
        learned = [
            (ex[f], y, w)
            for (ex, y, _), w in zip(events, weights, strict=True)
            if ex.get(f) is not None
        ]
        if not learned:
            continue
        s_f = len({v for v, _, _ in learned})
        terms[f] = {}
        for y in classes:
            n_yf = math.fsum(w for _, c, w in learned if c == y)
            n_yfv = math.fsum(w for v, c, w in learned if c == y and v == value)
            terms[f][y] = math.log((n_yfv + alpha) / (n_yf + s_f * alpha))
    return prior, terms


def reference_log_proba(
    prior: Mapping[Hashable, float],
    terms: Mapping[str, Mapping[Hashable, float]],
    weights: Mapping[str, float],
) -> dict[Hashable, float]:
    scores = {
        y: p + math.fsum(weights.get(f, 1.0) * t[y] for f, t in terms.items())
        for y, p in prior.items()
    }
    return normalise(scores)


def with_weights(model: WeightedNB, weights: Mapping[str, float], **params: Any) -> WeightedNB:
    """A copy of ``model`` holding ``weights`` (and other ``params``), through a
    (validated) state."""
    state = orjson.loads(orjson.dumps(model.to_state()))
    state["params"].update(params)
    state["stats"]["weights"] = [[f, w] for f, w in weights.items()]
    state["stats"]["evidence"] = [[f, 1.0] for f in weights]
    copy = Learner.from_state(state)
    assert isinstance(copy, WeightedNB)
    return copy


def learn(model: Learner, events: Sequence[Event]) -> Learner:
    for x, y, w in events:
        model.learn_one(x, y, w)
    return model


def dump(model: Learner) -> bytes:
    return orjson.dumps(model.to_state(), option=orjson.OPT_SORT_KEYS)


def duplicated_stream(seed: int, n: int) -> list[Event]:
    """An informative categorical feature with two exact copies, an informative number
    with one copy, and pure noise of both kinds (30 categories; a standard normal)."""
    rng = random.Random(seed)
    events = []
    for _ in range(n):
        y = rng.choice("abc")
        signal = y if rng.random() < 0.7 else rng.choice("abc")
        level = rng.gauss("abc".index(y), 1.0)
        x = {
            "signal": signal,
            "copy1": signal,
            "copy2": signal,
            "level": level,
            "level_copy": level,
            "noise_cat": f"v{rng.randrange(30)}",
            "noise_num": rng.gauss(0.0, 1.0),
        }
        events.append((x, y, 1.0))
    return events


def prequential_log_loss(model: Learner, events: Sequence[Event]) -> float:
    """Mean ``-log P(y | x)`` before learning each event (a class never seen: 1e-15)."""
    total = 0.0
    for x, y, w in events:
        lp = model.predict_log_proba_one(x)
        if lp:
            total -= max(lp.get(y, -math.inf), math.log(1e-15))
        model.learn_one(x, y, w)
    return total / len(events)


# ------------------------------------------------------------------ the formulas
@pytest.mark.parametrize("half_life", [None, 40.0])
def test_scores_with_given_weights_equal_brute_force(half_life: float | None) -> None:
    rng = random.Random(3)
    events = mixed_events(7, 150)
    model = learn(WeightedNB(eta0=0.0, half_life=half_life), events)
    features = sorted({f for x, _, _ in events for f in x})
    weights = {f: rng.choice([0.0, 0.3, 1.0, 2.5, rng.uniform(0, 3)]) for f in features}
    weighted = with_weights(model, weights)
    for x, _, _ in events + mixed_events(8, 30):
        prior, terms = reference_terms(events, x, half_life=half_life)
        assert_close(weighted.predict_log_proba_one(x), reference_log_proba(prior, terms, weights))


def test_gradient_equals_central_differences() -> None:
    """∂ log P(y | x) / ∂ w_f of the module against finite differences of the model's
    own log posterior (a model rebuilt with each perturbed weight)."""
    rng = random.Random(5)
    events = mixed_events(11, 120, weighted=False)
    model = learn(WeightedNB(), events)
    assert isinstance(model, WeightedNB)
    kinds = model.kinds()
    checked = 0
    for x, y, _ in mixed_events(12, 12, weighted=False):
        numeric = [f for f in x if kinds.get(f) == "gaussian"]
        discrete = [f for f in x if kinds.get(f) == "categorical"]
        terms = event_terms(model.gaussian, model.categorical, x, numeric, discrete, 1.0, 1.0)
        assert terms is not None
        if y not in terms.labels:
            continue
        base = {f: rng.uniform(0.2, 2.0) for f in terms.features}
        grad = gradient(terms, [base[f] for f in terms.features], y)
        assert {f for f in numeric if f in terms.features} and {
            f for f in discrete if f in terms.features
        }, "the event mixes both kinds of term"
        for f, g in zip(terms.features, grad, strict=True):
            h = 1e-5
            up = with_weights(model, {**base, f: base[f] + h}).predict_log_proba_one(x)[y]
            down = with_weights(model, {**base, f: base[f] - h}).predict_log_proba_one(x)[y]
            numeric_g = (up - down) / (2 * h)
            assert abs(numeric_g - g) <= 1e-6 * abs(g) + 1e-9, (f, g, numeric_g)
            checked += 1
    assert checked > 40


def test_unit_weights_without_steps_are_naive_bayes() -> None:
    events = mixed_events(2, 300)
    weighted, plain = WeightedNB(eta0=0.0), NaiveBayes()
    for x, y, w in events:
        assert weighted.predict_one(x) == plain.predict_one(x)
        assert_close(weighted.predict_log_proba_one(x), plain.predict_log_proba_one(x), 1e-12)
        weighted.learn_one(x, y, w)
        plain.learn_one(x, y, w)
    assert weighted.weights == {f: 1.0 for f in weighted.weights}
    stats = weighted.to_state()["stats"]
    assert {k: v for k, v in stats.items() if k not in _WEIGHT_KEYS} == plain.to_state()["stats"]


@pytest.mark.parametrize("half_life", [None, 25.0])
def test_unit_weights_on_categories_are_categorical_nb(half_life: float | None) -> None:
    """On categorical events the terms are CategoricalNB's, under the same prior."""
    weighted, plain = WeightedNB(eta0=0.0, half_life=half_life), CategoricalNB(half_life=half_life)
    for x, y in suitable_events("CategoricalNB", 300, seed=4):
        assert weighted.predict_one(x) == plain.predict_one(x)
        assert_close(weighted.predict_log_proba_one(x), plain.predict_log_proba_one(x), 1e-12)
        weighted.learn_one(x, y)
        plain.learn_one(x, y)


@pytest.mark.parametrize(
    ("params", "weight"),
    [
        ({}, 1.0),
        ({"eta0": 0.3, "tau": 7.0, "l2": 0.5}, 0.5),
        ({"eta0": 0.2, "tau": None}, 3.0),  # a step is never larger than one event's
        ({"eta0": 4.0, "half_life": 30.0}, 1.0),  # large steps: projected onto w ≥ 0
    ],
)
def test_each_step_follows_the_schedule(params: dict[str, Any], weight: float) -> None:
    events = [
        (x, y, weight if i % 3 == 0 else w) for i, (x, y, w) in enumerate(mixed_events(4, 160))
    ]
    model = WeightedNB(**params)
    eta0, tau, l2 = model.eta0, model.tau, model.l2
    zeros = 0
    for i, (x, y, w) in enumerate(events):
        before = dict(model.weights)
        steps = model.steps
        prior, terms = reference_terms(events[:i], x, half_life=model.half_life) if i else ({}, {})
        model.learn_one(x, y, w)
        if y not in prior or not terms:
            assert model.weights == before and model.steps == steps
            continue
        assert model.steps == steps + 1
        posterior = {c: math.exp(v) for c, v in reference_log_proba(prior, terms, before).items()}
        rate = eta0 if tau is None else eta0 / (1.0 + steps / tau)
        rate *= min(w, 1.0)
        for f, t in terms.items():
            wf = before.get(f, 1.0)
            g = t[y] - math.fsum(p * t[c] for c, p in posterior.items()) - l2 * (wf - 1.0)
            g = max(-GRADIENT_CLIP, min(GRADIENT_CLIP, g))
            want = min(max(0.0, wf + rate * g), MAX_FEATURE_WEIGHT)
            assert abs(model.weights[f] - want) <= 1e-9 * max(1.0, abs(want)), (i, f)
            zeros += model.weights[f] == 0.0
        # features without a term keep their weight
        assert all(model.weights[f] == v for f, v in before.items() if f not in terms)
    if eta0 > 1:
        assert zeros > 0  # the projection was exercised


def test_weights_stay_within_their_bounds() -> None:
    model = learn(WeightedNB(eta0=0.0), mixed_events(1, 100))
    assert isinstance(model, WeightedNB)
    top = with_weights(model, {"amount": MAX_FEATURE_WEIGHT, "colour": 0.0}, eta0=1e3)
    assert top.eta0 == 1e3
    for x, y, _ in mixed_events(2, 50):
        top.learn_one(x, y)
        assert all(0.0 <= w <= MAX_FEATURE_WEIGHT for w in top.weights.values())
        assert all(math.isfinite(v) for v in top.predict_log_proba_one(x).values())


# ------------------------------------------------------------------ what it learns
@pytest.mark.parametrize("seed", [1, 2])
def test_copies_and_noise_lose_weight_and_log_loss_drops(seed: int) -> None:
    events = duplicated_stream(seed, 3000)
    plain_loss = prequential_log_loss(NaiveBayes(), events)
    for params in ({}, {"eta0": 0.1}):
        model = WeightedNB(**params)
        weighted_loss = prequential_log_loss(model, events)
        w = model.weights
        assert w["signal"] == w["copy1"] == w["copy2"] < 0.7  # three copies share the evidence
        assert w["level"] == w["level_copy"] < 0.8
        assert weighted_loss < 0.8 * plain_loss
        if params:  # larger steps: the noise is (nearly) removed
            assert w["noise_num"] < 0.2 and w["noise_cat"] < 0.2
        else:
            assert w["noise_num"] < 0.9 and w["noise_cat"] < 0.8


# ------------------------------------------------------------------ state, merge, forgetting
@pytest.mark.parametrize("params", [{}, {"half_life": 0.2, "l2": 0.1}, {"tau": None}])
def test_state_round_trip_is_exact(params: dict[str, Any]) -> None:
    events = mixed_events(5, 200)
    model = learn(WeightedNB(**params), events[:100])
    copy = Learner.from_state(orjson.loads(orjson.dumps(model.to_state())))
    assert dump(copy) == dump(model) and copy.get_params() == model.get_params()
    learn(model, events[100:])
    learn(copy, events[100:])
    assert dump(copy) == dump(model)
    for x, _, _ in events:
        assert copy.predict_log_proba_one(x) == model.predict_log_proba_one(x)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("weights", [["amount", -1.0]], r"stats\.weights.*≥ 0"),
        ("weights", [["amount", 2e6]], r"stats\.weights.*at most 1e\+06"),
        ("weights", "x", r"stats\.weights.*list"),
        ("evidence", [["nowhere", 1.0]], r"stats\.evidence: feature 'nowhere' has no weight"),
        ("steps", -3, r"stats\.steps"),
        ("steps", 1.5, r"stats\.steps"),
    ],
)
def test_invalid_weight_state_is_rejected(field: str, value: Any, message: str) -> None:
    state = learn(WeightedNB(), mixed_events(5, 50)).to_state()
    state["stats"][field] = value
    with pytest.raises(ModelStateError, match=message):
        Learner.from_state(state)
    del state["stats"][field]
    with pytest.raises(ModelStateError, match=f"missing field '{field}'"):
        Learner.from_state(state)


@pytest.mark.parametrize("half_life", [None, 50.0])
def test_merge_averages_weights_by_evidence(half_life: float | None) -> None:
    first, second = mixed_events(6, 150), mixed_events(9, 90)
    a = learn(WeightedNB(half_life=half_life), first)
    b = learn(WeightedNB(half_life=half_life), second)
    b.learn_one({"only_b": "z", "amount": 1.0}, "a")
    b.learn_one({"only_b": "z", "amount": 2.0}, "b")
    assert isinstance(a, WeightedNB) and isinstance(b, WeightedNB)

    def true_evidence(model: WeightedNB) -> dict[Hashable, float]:
        state = model.to_state()
        return {f: e * state["scale"] for f, e in state["stats"]["evidence"]}

    ea, eb = true_evidence(a), true_evidence(b)
    wa, wb = dict(a.weights), dict(b.weights)
    merged = Learner.from_state(a.to_state()).merge(b)
    assert isinstance(merged, WeightedNB)
    assert merged.steps == max(a.steps, b.steps)
    assert set(merged.weights) == set(wa) | set(wb)
    assert "only_b" in wb and "only_b" not in wa
    for f, w in merged.weights.items():
        if f not in wb:
            assert w == wa[f]
        elif f not in wa:
            assert w == wb[f]
        else:
            want = (ea[f] * wa[f] + eb[f] * wb[f]) / (ea[f] + eb[f])
            assert abs(w - want) <= 1e-12 * want
    got = true_evidence(merged)
    for f in got:
        assert abs(got[f] - ea.get(f, 0.0) - eb.get(f, 0.0)) <= 1e-12 * got[f]
    # the counts merge as NaiveBayes's
    pa = learn(NaiveBayes(half_life=half_life), first)
    pb = learn(NaiveBayes(half_life=half_life), second)
    pb.learn_one({"only_b": "z", "amount": 1.0}, "a")
    pb.learn_one({"only_b": "z", "amount": 2.0}, "b")
    plain = pa.merge(pb).to_state()
    stats = merged.to_state()["stats"]
    assert {k: v for k, v in stats.items() if k not in _WEIGHT_KEYS} == plain["stats"]


def test_merge_with_an_untrained_model_keeps_the_weights_exactly() -> None:
    model = learn(WeightedNB(), mixed_events(6, 120))
    assert isinstance(model, WeightedNB)
    assert WeightedNB().merge(model).weights == model.weights
    before = dict(model.weights)
    assert model.merge(WeightedNB()).weights == before  # (merge returns self)
    with pytest.raises(IncompatibleModelError, match=r"\['eta0'\]"):
        model.merge(WeightedNB(eta0=0.1))


def test_a_delta_starts_from_the_model_weights() -> None:
    events = mixed_events(6, 160)
    model = learn(WeightedNB(half_life=200.0), events[:100])
    assert isinstance(model, WeightedNB)
    base = Learner.from_state(model.to_state())
    model.track_delta()
    delta = model.delta
    assert isinstance(delta, WeightedNB)
    assert delta.weights == model.weights and delta.steps == model.steps
    Learner.from_state(orjson.loads(orjson.dumps(delta.to_state())))  # a delta state loads
    learn(model, events[100:])
    steps = delta.steps  # its own steps, from the model's count at the cut
    assert steps > model.steps - 10
    base.apply_delta(*model.cut_delta())
    # the counts are rebuilt (to rounding); the weights move toward the model's
    assert isinstance(base, WeightedNB)
    assert base.class_weights().keys() == model.class_weights().keys()
    for y, n in model.class_weights().items():
        assert abs(base.class_weights()[y] - n) <= 1e-9 * n
    assert base.steps == steps


def test_forgetting_decays_the_counts_not_the_weights() -> None:
    model = learn(WeightedNB(half_life=5.0, eta0=0.0), mixed_events(3, 60))
    assert isinstance(model, WeightedNB)
    model = with_weights(model, {"amount": 0.25})
    model.decay(100.0)
    assert model.weights == {"amount": 0.25}


# ------------------------------------------------------------------ protocol and surface
@pytest.mark.parametrize(
    ("kind", "params"),
    [
        ("NaiveBayes", {}),
        ("GaussianNB", {"l2": 0.5, "tau": None}),
        ("NaiveBayes", {"half_life": 20.0, "eta0": 0.5}),
    ],
)
def test_generic_checks(kind: str, params: dict[str, Any]) -> None:
    """Mixed and numeric events (test_checks runs the categorical ones)."""
    exempt = dict(EXEMPT)
    if "half_life" in params:
        exempt["weight_repetition"] = "forgetting: see test_checks.HALF_LIFE_EXEMPT"
    check_learner(lambda: WeightedNB(**params), suitable_events(kind, 120, seed=3), exempt=exempt)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"eta0": -0.1}, "eta0 must be non-negative"),
        ({"eta0": math.inf}, "eta0 must be non-negative and finite"),
        ({"tau": 0}, "tau must be > 0"),
        ({"tau": -1.0}, "tau must be non-negative"),
        ({"l2": "x"}, "l2 must be a non-negative number"),
    ],
)
def test_invalid_parameters(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        WeightedNB(**params)


def test_informative_features_report_the_weights() -> None:
    events = duplicated_stream(3, 600)
    model = learn(WeightedNB(), events)
    plain = learn(NaiveBayes(), events)
    assert isinstance(model, WeightedNB)
    weighted = {(e["feature"], e.get("value")): e for e in model.informative_features(None)}
    unweighted = {(e["feature"], e.get("value")): e for e in plain.informative_features(None)}
    assert weighted.keys() == unweighted.keys()
    for key, entry in weighted.items():
        w = model.weights[key[0]]
        assert entry["weight"] == w
        assert entry["score"] == pytest.approx(w * unweighted[key]["score"], rel=1e-12)
    top = model.informative_features(1)[0]
    assert top["feature"] not in ("noise_cat", "noise_num")


def test_rejected_event_changes_nothing() -> None:
    model = learn(WeightedNB(), mixed_events(5, 80))
    before = dump(model)
    for bad in ({"amount": "text"}, {"amount": math.nan}, {"colour": [1]}, {"amount": 1e300}):
        with pytest.raises(InvalidEventError, match=r"amount|colour"):
            model.learn_one(bad, "a")
        assert dump(model) == before


def test_the_daemon_runs_it_by_name(tmp_path: Path) -> None:
    """``stream-nb run --model WeightedNB:{…}`` emits the library's own predictions."""
    events = list(mixed_stream(4, 300, missing=0.1))
    (tmp_path / "in.jsonl").write_bytes(
        b"".join(orjson.dumps({**x, "y": y}) + b"\n" for x, y in events)
    )
    params = '{"eta0": 0.1, "tau": null}'
    argv = ["run", "--model", f"WeightedNB:{params}", "--source", str(tmp_path / "in.jsonl")]
    assert main([*argv, "--sink", f"file:{tmp_path}/out.jsonl"]) == 0
    records = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    model = WeightedNB(eta0=0.1, tau=None)
    assert len(records) == len(events)
    for record, (x, y) in zip(records, events, strict=True):
        assert record["log_proba"] == model.predict_log_proba_one(x)
        assert record["y_pred"] == model.predict_one(x)
        model.learn_one(x, y)
    assert model.weights and any(w != 1.0 for w in model.weights.values())


def test_a_state_whose_stats_are_not_an_object_is_rejected() -> None:
    state = learn(WeightedNB(), mixed_events(5, 20)).to_state()
    state["stats"] = [1, 2]
    with pytest.raises(ModelStateError, match="stats: must be a JSON object"):
        Learner.from_state(state)


def test_predicting_first_changes_no_step() -> None:
    """learn_one reuses the terms the prediction of the same event computed, never stale
    ones: predicting (then decaying, merging or reloading) before learning gives the
    same model as learning alone."""
    events = mixed_events(8, 200)
    other = learn(WeightedNB(half_life=60.0), mixed_events(9, 30))
    plain, predicting = WeightedNB(half_life=60.0), WeightedNB(half_life=60.0)
    for i, (x, y, w) in enumerate(events):
        predicting.predict_log_proba_one(x)
        predicting.predict_one({**x})  # an equal event: the same terms again
        if i % 50 == 10:
            for model in (plain, predicting):
                model.decay(3.0)
        if i % 50 == 20:
            for model in (plain, predicting):
                model.merge(other)
        if i % 50 == 30:
            predicting = Learner.from_state(predicting.to_state())  # type: ignore[assignment]
        plain.learn_one(x, y, w)
        predicting.learn_one(x, y, w)
        assert dump(predicting) == dump(plain), i
    # an event whose values do not compare with the last one's is rejected as before
    predicting.predict_log_proba_one({"amount": 1.0, "colour": "red"})
    with pytest.raises(InvalidEventError, match="colour"):
        predicting.learn_one({"amount": 1.0, "colour": np.array([1, 2])}, "a")
