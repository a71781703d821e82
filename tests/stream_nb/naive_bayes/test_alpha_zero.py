"""``alpha = 0`` (maximum likelihood) for every discrete learner, against a brute force.

The references below compute every term from the raw events (decayed weights
when forgetting), then apply the zero-probability rule on their own (not with
:mod:`stream_nb._mle`): per class count the ``-inf`` terms, keep the classes
with the fewest, drop those terms and let the finite ones decide (ComplementNB:
mirrored, see :func:`complement_reference`). Every prequential step of random
streams with zero counts, unseen values, unseen tokens and classes never seen
with a value is compared to ``1e-12``, with numpy raising on any floating-point
event and every warning an error. scikit-learn is compared where its answer is
finite: with ``alpha=0`` it gives ``-inf`` or NaN (``0 × -inf`` in its matrix
products) as soon as one count is 0, so its comparisons fit data where every
count is positive.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from stream_nb import (
    BernoulliNB,
    CategoricalNB,
    ComplementNB,
    Learner,
    MultinomialNB,
    NaiveBayes,
    datasets,
)
from stream_nb.checks.engine import run_engine
from stream_nb.naive_bayes._arrays import per_event_answers
from stream_nb.naive_bayes._categorical_kernel import columns_of_events
from tests.stream_nb.naive_bayes.kernel_checks import against_the_loop
from tests.stream_nb.naive_bayes.oracles import (
    Event,
    class_weights,
    decayed_weights,
    log_prior,
    token_stream,
)

pytestmark = pytest.mark.filterwarnings("error")

TOL = 1e-12
_NEG_INF = -math.inf


@pytest.fixture(autouse=True)
def _numpy_raises() -> Iterator[None]:
    with np.errstate(all="raise"):
        yield


# ------------------------------------------------------------------ the rule, brute force
def resolve(
    terms: Mapping[Hashable, list[float]], *, mirrored: bool = False
) -> dict[Hashable, float]:
    """The log posterior of classes given their terms: the classes with the fewest
    ``-inf`` terms (``mirrored``: the most ``+inf`` terms) stay, their infinite terms
    left out; the others have probability 0 and are not listed."""
    if not terms:
        return {}
    bad = math.inf if mirrored else _NEG_INF
    counts = {y: sum(t == bad for t in ts) for y, ts in terms.items()}
    keep = (max if mirrored else min)(counts.values())
    scores = {
        y: math.fsum(t for t in ts if t != bad) for y, ts in terms.items() if counts[y] == keep
    }
    top = max(scores.values())
    lse = top + math.log(math.fsum(math.exp(v - top) for v in scores.values()))
    return {y: v - lse for y, v in scores.items()}


def _log_or_zero(n: float, d: float, alpha: float = 0.0, s: float = 0.0) -> float:
    """``log((n + α) / (d + sα))``; ``-inf`` for ``n = α = 0``."""
    return math.log((n + alpha) / (d + s * alpha)) if n + alpha > 0 else _NEG_INF


#: Feature (token) weights: ``{name: w}``, 1 for the others.
Weights = Mapping[Hashable, float]


# ------------------------------------------------------------------ references
def categorical_terms(
    events: Sequence[Event],
    weights: Sequence[float],
    x: Mapping[str, Any],
    classes: Sequence[Hashable],
    alpha: float = 0.0,
    feature_weights: Weights | None = None,
) -> dict[Hashable, list[float]]:
    """``w_f log((N_{y,f,v} + α) / (N_{y,f} + S_f α))`` of every feature of ``x`` learned
    before (features of weight 0 left out)."""
    fw = feature_weights or {}
    terms: dict[Hashable, list[float]] = {y: [] for y in classes}
    for f, v in x.items():
        if v is None or fw.get(f, 1.0) == 0:
            continue
        present: dict[Hashable, float] = {}
        count: dict[Hashable, float] = {}
        values = set()
        for (ex, y, _), w in zip(events, weights, strict=True):
            u = ex.get(f)
            if u is None:
                continue
            values.add(u)
            present[y] = present.get(y, 0.0) + w
            if u == v:
                count[y] = count.get(y, 0.0) + w
        if not present:
            continue  # never learned: no term
        for y in classes:
            term = _log_or_zero(count.get(y, 0.0), present.get(y, 0.0), alpha, len(values))
            terms[y].append(term * fw.get(f, 1.0) if term != _NEG_INF else term)
    return terms


def categorical_reference(
    events: Sequence[Event],
    x: Mapping[str, Any],
    half_life: float | None = None,
    alpha: float = 0.0,
    feature_weights: Weights | None = None,
    fit_prior: bool = True,
    class_prior: Mapping[Hashable, float] | None = None,
) -> dict[Hashable, float]:
    weights = decayed_weights(events, half_life)
    n_y = class_weights(events, weights)
    prior = log_prior(n_y, sum(weights), alpha, fit_prior, class_prior)
    terms = categorical_terms(events, weights, x, list(prior), alpha, feature_weights)
    return resolve({y: [prior[y], *terms[y]] for y in prior})


def _token_counts(
    events: Sequence[Event], weights: Sequence[float]
) -> tuple[dict[Hashable, float], dict[str, dict[Hashable, float]], dict[Hashable, float]]:
    """``N_y``, ``N_{y,w}`` (positive counts only) and ``T_y``."""
    n_y = class_weights(events, weights)
    counts: dict[str, dict[Hashable, float]] = {}
    t_y = dict.fromkeys(n_y, 0.0)
    for (ex, y, _), w in zip(events, weights, strict=True):
        t_y[y] += sum(ex.values()) * w
        for t, c in ex.items():
            if c > 0:
                row = counts.setdefault(t, {})
                row[y] = row.get(y, 0.0) + c * w
    return n_y, counts, t_y


def _weighted(x: Mapping[str, Any], feature_weights: Weights | None) -> dict[str, Any]:
    fw = feature_weights or {}
    return {t: c * fw.get(t, 1.0) for t, c in x.items()}


def multinomial_reference(
    events: Sequence[Event],
    x: Mapping[str, Any],
    half_life: float | None = None,
    alpha: float = 0.0,
    feature_weights: Weights | None = None,
) -> dict[Hashable, float]:
    weights = decayed_weights(events, half_life)
    n_y, counts, t_y = _token_counts(events, weights)
    prior = log_prior(n_y, sum(weights), alpha)
    terms = {y: [prior[y]] for y in n_y}
    for t, c in _weighted(x, feature_weights).items():
        if c > 0 and t in counts:
            for y in n_y:
                term = _log_or_zero(counts[t].get(y, 0.0), t_y[y], alpha, len(counts))
                terms[y].append(c * term if term != _NEG_INF else term)
    return resolve(terms)


def complement_reference(
    events: Sequence[Event],
    x: Mapping[str, Any],
    half_life: float | None = None,
    norm: bool = False,
    alpha: float = 0.0,
    feature_weights: Weights | None = None,
) -> dict[Hashable, float]:
    """``θ_{y,w} = (C_{y,w} + α) / (Σ_w C_{y,w} + αV)`` (complement counts), score
    ``−Σ x_w log θ``: with ``α = 0`` a token never seen outside ``y`` is a ``+inf``
    term, and the classes with the most of them stay (the rule on the complement
    likelihood, whose sign is flipped)."""
    weights = decayed_weights(events, half_life)
    n_y, counts, t_y = _token_counts(events, weights)
    if not n_y:
        return {}
    if len(counts) <= 1:
        return resolve({y: [0.0] for y in n_y})
    labels = list(n_y)
    v = len(counts)
    comp = {
        t: {y: sum(row.get(o, 0.0) for o in labels if o != y) for y in labels}
        for t, row in counts.items()
    }
    total = {y: sum(t_y[o] for o in labels if o != y) for y in labels}
    norms = {
        y: math.fsum(
            -math.log((comp[t][y] + alpha) / (total[y] + v * alpha))
            for t in counts
            if comp[t][y] + alpha > 0
        )
        for y in labels
    }
    terms: dict[Hashable, list[float]] = {y: [] for y in labels}
    for t, c in _weighted(x, feature_weights).items():
        if c > 0 and t in counts:
            for y in labels:
                theta = comp[t][y] + alpha
                if theta > 0:
                    term = -c * math.log(theta / (total[y] + v * alpha))
                    terms[y].append(term / norms[y] if norm and norms[y] else term)
                else:
                    terms[y].append(math.inf)
    return resolve({y: ts or [0.0] for y, ts in terms.items()}, mirrored=True)


def bernoulli_reference(
    events: Sequence[Event],
    x: Mapping[str, Any],
    half_life: float | None = None,
    alpha: float = 0.0,
    feature_weights: Weights | None = None,
) -> dict[Hashable, float]:
    """``p_{y,w} = (N_{y,w} + α) / (N_y + 2α)`` over every feature ever learned (on or
    off), each term times the feature's weight (weight 0: left out)."""
    fw = feature_weights or {}
    weights = decayed_weights(events, half_life)
    n_y = class_weights(events, weights)
    prior = log_prior(n_y, sum(weights), alpha)
    vocabulary: dict[str, dict[Hashable, float]] = {}
    for (ex, y, _), w in zip(events, weights, strict=True):
        for t, value in ex.items():
            row = vocabulary.setdefault(t, {})
            if value > 0:
                row[y] = row.get(y, 0.0) + w
    terms = {y: [prior[y]] for y in n_y}
    for t, row in vocabulary.items():
        weight = fw.get(t, 1.0)
        if weight == 0:
            continue
        on = x.get(t, 0) > 0
        for y, n in n_y.items():
            c = row.get(y, 0.0)
            term = _log_or_zero(c if on else n - c, n, alpha, 2.0)
            terms[y].append(term * weight if term != _NEG_INF else term)
    return resolve(terms)


# ------------------------------------------------------------------ streams
def categorical_stream(seed: int, n: int) -> list[Event]:
    """Small alphabets (zero counts are common), missing values, absent features, weights,
    and a class first met late."""
    rng = random.Random(seed)
    alphabet = {"a": ["u", "v"], "b": ["p", "q", "r", "s"], "c": ["x", "y", "z"], "d": ["k"]}
    events = []
    for i in range(n):
        x: dict[str, Any] = {}
        for f, values in alphabet.items():
            r = rng.random()
            if r < 0.1:
                x[f] = None
            elif r < 0.85:
                x[f] = rng.choice(values)
        y: Hashable = "late" if i > n * 0.6 and rng.random() < 0.3 else rng.randrange(2)
        events.append((x, y, rng.choice([1.0, 1.0, 0.5, 2.0, 0.1])))
    return events


def categorical_probe(x: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """The event with a value never learned, or a feature never learned."""
    out = dict(x)
    if rng.random() < 0.5:
        out[rng.choice("abc")] = "never"
    else:
        out["new"] = "w"
    return out


def token_probe(x: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    out = dict(x)
    out[f"unseen{rng.randrange(3)}"] = rng.randint(0, 2)
    if rng.random() < 0.3:
        out[f"t{rng.randrange(25)}"] = 1  # a token perhaps never seen with some class
    return out


def assert_close(got: Mapping[Hashable, float], want: Mapping[Hashable, float]) -> None:
    """The same classes (those with probability > 0), each within ``TOL`` relative."""
    assert got.keys() == want.keys(), (got, want)
    for c, v in want.items():
        assert math.isfinite(got[c])
        assert abs(got[c] - v) <= TOL * max(1.0, abs(v)), (c, got[c], v)


def prequential(
    model: Learner,
    events: Sequence[Event],
    reference: Callable[[Sequence[Event], Mapping[str, Any]], dict[Hashable, float]],
    probe: Callable[[Mapping[str, Any], random.Random], dict[str, Any]],
) -> int:
    """Every step: the model's log posterior of a probe of the event against the reference;
    returns how many steps had a class of probability 0 (the rule at work)."""
    rng = random.Random(1)
    dropped = 0
    for i, (x, y, w) in enumerate(events):
        x_probe = probe(x, rng)
        want = reference(events[:i], x_probe)
        got = model.predict_log_proba_one(x_probe)
        assert_close(got, want)
        proba = model.predict_proba_one(x_probe)
        assert proba.keys() == got.keys()
        dropped += len(want) < len({e[1] for e in events[:i]})
        model.learn_one(x, y, w)
    return dropped


# ------------------------------------------------------------------ per-event, brute force
@pytest.mark.parametrize("half_life", [None, 40.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_categorical_matches_brute_force(seed: int, half_life: float | None) -> None:
    events = categorical_stream(seed, 160)
    model = CategoricalNB(alpha=0, half_life=half_life)
    dropped = prequential(
        model, events, lambda ev, x: categorical_reference(ev, x, half_life), categorical_probe
    )
    assert dropped > 10  # the stream does produce zero-probability classes


@pytest.mark.parametrize(
    "priors",
    [{"fit_prior": False}, {"class_prior": {0: 0.2, 1: 0.5}}, {"class_prior": {0: 1, "late": 3}}],
)
def test_categorical_priors_match_brute_force(priors: dict[str, Any]) -> None:
    events = categorical_stream(3, 160)
    model = CategoricalNB(alpha=0, **priors)
    prequential(
        model,
        events,
        lambda ev, x: categorical_reference(ev, x, **priors),
        categorical_probe,
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: CategoricalNB(alpha=0, max_values_per_feature=2),
        lambda: CategoricalNB(alpha=0, max_features=2),
        lambda: MultinomialNB(alpha=0, max_vocabulary=5),
        lambda: ComplementNB(alpha=0, norm=True, max_vocabulary=5),
        lambda: BernoulliNB(alpha=0, max_vocabulary=5, binarize=0.5),
    ],
)
def test_bounded_models_stay_finite(make: Callable[[], Learner]) -> None:
    categorical = isinstance(make(), CategoricalNB)
    events = categorical_stream(6, 400) if categorical else token_stream(6, 400)
    model = make()
    rng = random.Random(0)
    for x, y, w in events:
        x_probe = (categorical_probe if categorical else token_probe)(x, rng)
        lp = model.predict_log_proba_one(x_probe)
        assert all(math.isfinite(v) for v in lp.values())
        assert not lp or math.isclose(math.fsum(map(math.exp, lp.values())), 1.0, rel_tol=1e-12)
        model.learn_one(x, y, w)
    assert model.n_learned == len(events)


@pytest.mark.parametrize("seed", [0, 1])
def test_naive_bayes_categorical_features_match_brute_force(seed: int) -> None:
    events = categorical_stream(seed, 160)
    model = NaiveBayes(alpha=0, schema=dict.fromkeys(["a", "b", "c", "d", "new"], "categorical"))
    dropped = prequential(model, events, categorical_reference, categorical_probe)
    assert dropped > 10


@pytest.mark.parametrize("half_life", [None, 40.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_multinomial_matches_brute_force(seed: int, half_life: float | None) -> None:
    events = token_stream(seed, 150)
    model = MultinomialNB(alpha=0, half_life=half_life)
    dropped = prequential(
        model, events, lambda ev, x: multinomial_reference(ev, x, half_life), token_probe
    )
    assert dropped > 10


@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("half_life", [None, 40.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_complement_matches_brute_force(seed: int, half_life: float | None, norm: bool) -> None:
    events = token_stream(seed, 150)
    model = ComplementNB(alpha=0, half_life=half_life, norm=norm)
    dropped = prequential(
        model,
        events,
        lambda ev, x: complement_reference(ev, x, half_life, norm),
        token_probe,
    )
    assert dropped > 10


@pytest.mark.parametrize("half_life", [None, 40.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_bernoulli_matches_brute_force(seed: int, half_life: float | None) -> None:
    events = token_stream(seed, 150)
    model = BernoulliNB(alpha=0, half_life=half_life)
    dropped = prequential(
        model, events, lambda ev, x: bernoulli_reference(ev, x, half_life), token_probe
    )
    assert dropped > 10


# ------------------------------------------------------------------ the hard cases
def test_every_class_zero_drops_the_term_that_is_zero_for_all() -> None:
    model = CategoricalNB(alpha=0)
    model.learn_one({"sky": "sun", "wind": "weak"}, "play")
    model.learn_one({"sky": "rain", "wind": "strong"}, "stay")
    model.learn_one({"sky": "rain", "wind": "weak"}, "stay")
    # "fog" was never seen: -inf for both classes, so only "wind" decides
    lp = model.predict_log_proba_one({"sky": "fog", "wind": "weak"})
    assert lp == pytest.approx(model.predict_log_proba_one({"wind": "weak"}), abs=1e-15)
    assert lp.keys() == {"play", "stay"}
    # "sun" and "strong": one zero term each, so the priors and the other terms decide:
    # play 1/3 × P(sun | play) = 1/3, stay 2/3 × P(strong | stay) = 1/3
    both = model.predict_log_proba_one({"sky": "sun", "wind": "strong"})
    assert both == pytest.approx({"play": math.log(0.5), "stay": math.log(0.5)}, abs=1e-15)
    # "sun" alone: "stay" never saw it, probability 0
    assert model.predict_proba_one({"sky": "sun"}) == {"play": 1.0}
    assert model.predict_one({"sky": "sun"}) == "play"


@pytest.mark.parametrize(
    "make",
    [
        lambda: CategoricalNB(alpha=0),
        lambda: NaiveBayes(alpha=0),
        lambda: MultinomialNB(alpha=0),
        lambda: ComplementNB(alpha=0),
        lambda: ComplementNB(alpha=0, norm=True),
        lambda: BernoulliNB(alpha=0),
    ],
)
def test_a_single_class_and_unseen_inputs_stay_finite(make: Callable[[], Learner]) -> None:
    model = make()
    assert model.predict_log_proba_one({"a": 1}) == {}
    model.learn_one({"a": 1, "b": 2}, "only", 0.5)
    for x in [{"a": 1}, {"a": 3, "zz": 1}, {"zz": 2}, {}, {"b": 1, "a": 0}]:
        assert model.predict_proba_one(x) == {"only": 1.0}
        assert model.predict_one(x) == "only"
    model.learn_one({"c": 1}, "other", 2.0)
    for x in [{"a": 1, "c": 1}, {"b": 5}, {"zz": 1}, {"a": 2, "b": 1, "c": 1}]:
        lp = model.predict_log_proba_one(x)
        assert lp and all(math.isfinite(v) for v in lp.values())
        assert math.isclose(math.fsum(map(math.exp, lp.values())), 1.0, rel_tol=1e-12)


def test_complement_evidence_never_seen_outside_a_class_decides() -> None:
    model = ComplementNB(alpha=0)
    model.learn_one({"ball": 2, "goal": 1}, "sport")
    model.learn_one({"vote": 2, "goal": 1}, "politics")
    model.learn_one({"vote": 1, "tax": 1}, "economy")
    # "ball" only in sport: +inf evidence for sport, the only class with such a term
    assert model.predict_proba_one({"ball": 1, "vote": 3}) == {"sport": 1.0}
    # one such token each for sport and economy: their finite terms decide, politics is out
    lp = model.predict_log_proba_one({"ball": 1, "tax": 1, "goal": 1})
    assert lp.keys() == {"sport", "economy"}


# ------------------------------------------------------------------ scikit-learn
def test_categorical_and_multinomial_match_sklearn_where_it_is_finite() -> None:
    from sklearn.naive_bayes import CategoricalNB as SkCategoricalNB
    from sklearn.naive_bayes import MultinomialNB as SkMultinomialNB

    rng = np.random.default_rng(3)
    # every value seen with every class, every token counted in every class: finite
    x_cat = rng.integers(0, 3, size=(300, 4))
    x_cat[:18] = np.array([[v] * 4 for v in range(3)] * 6)
    y = np.array([0, 1] * 150)
    w = rng.choice([1.0, 0.5, 2.0], size=300)
    with np.errstate(all="ignore"):  # (sklearn's own log(0) elsewhere is not ours to judge)
        sk = SkCategoricalNB(alpha=0, force_alpha=True).fit(x_cat, y, sample_weight=w)
        want = sk.predict_log_proba(x_cat[:50])
    ours = CategoricalNB(alpha=0)
    for row, label, weight in zip(x_cat.tolist(), y.tolist(), w.tolist(), strict=True):
        ours.learn_one({f"f{j}": v for j, v in enumerate(row)}, label, weight)
    assert np.isfinite(want).all()
    for row, expected in zip(x_cat[:50].tolist(), want, strict=True):
        lp = ours.predict_log_proba_one({f"f{j}": v for j, v in enumerate(row)})
        assert [lp[0], lp[1]] == pytest.approx(expected.tolist(), rel=1e-12, abs=1e-12)

    x_tok = rng.integers(1, 4, size=(200, 5)).astype(float)
    y_tok = np.array([0, 1, 2, 3] * 50)
    with np.errstate(all="ignore"):
        sk_m = SkMultinomialNB(alpha=0, force_alpha=True).fit(x_tok, y_tok)
        probe = rng.integers(0, 3, size=(40, 5)).astype(float)  # zeros in the events are fine
        want_m = sk_m.predict_log_proba(probe)
    multi = MultinomialNB(alpha=0)
    for row, label in zip(x_tok.tolist(), y_tok.tolist(), strict=True):
        multi.learn_one({f"t{j}": c for j, c in enumerate(row)}, label)
    assert np.isfinite(want_m).all()
    for row, expected in zip(probe.tolist(), want_m, strict=True):
        lp = multi.predict_log_proba_one({f"t{j}": c for j, c in enumerate(row)})
        assert [lp[k] for k in range(4)] == pytest.approx(expected.tolist(), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("norm", [False, True])
def test_complement_and_bernoulli_match_sklearn_where_it_is_finite(norm: bool) -> None:
    from sklearn.naive_bayes import BernoulliNB as SkBernoulliNB
    from sklearn.naive_bayes import ComplementNB as SkComplementNB

    rng = np.random.default_rng(4)
    x_tok = rng.integers(1, 4, size=(120, 6)).astype(float)
    y = np.array([0, 1, 2] * 40)
    probe = rng.integers(0, 3, size=(30, 6)).astype(float)
    with np.errstate(all="ignore"):
        sk = SkComplementNB(alpha=0, force_alpha=True, norm=norm).fit(x_tok, y)
        want = sk.predict_log_proba(probe)
    ours = ComplementNB(alpha=0, norm=norm)
    for row, label in zip(x_tok.tolist(), y.tolist(), strict=True):
        ours.learn_one({f"t{j}": c for j, c in enumerate(row)}, label)
    assert np.isfinite(want).all()
    for row, expected in zip(probe.tolist(), want, strict=True):
        lp = ours.predict_log_proba_one({f"t{j}": c for j, c in enumerate(row)})
        assert [lp[k] for k in range(3)] == pytest.approx(expected.tolist(), rel=1e-12, abs=1e-12)

    # on in some but not all events of every class: 0 < p < 1 everywhere
    x_bin = (rng.random((300, 5)) < 0.5).astype(float)
    x_bin[:12] = np.array([[1.0] * 5, [0.0] * 5] * 6)
    y_bin = np.array([0, 0, 1, 1] * 75)
    with np.errstate(all="ignore"):
        sk_b = SkBernoulliNB(alpha=0, force_alpha=True).fit(x_bin, y_bin)
        want_b = sk_b.predict_log_proba(x_bin[:40])
    bern = BernoulliNB(alpha=0)
    for row, label in zip(x_bin.tolist(), y_bin.tolist(), strict=True):
        bern.learn_one({f"t{j}": c for j, c in enumerate(row)}, label)
    assert np.isfinite(want_b).all()
    for row, expected in zip(x_bin[:40].tolist(), want_b, strict=True):
        lp = bern.predict_log_proba_one({f"t{j}": c for j, c in enumerate(row)})
        assert [lp[0], lp[1]] == pytest.approx(expected.tolist(), rel=1e-12, abs=1e-12)


# ------------------------------------------------------------------ state and merge
@pytest.mark.parametrize(
    ("make", "stream", "probe"),
    [
        (lambda: CategoricalNB(alpha=0), categorical_stream, categorical_probe),
        (lambda: NaiveBayes(alpha=0), categorical_stream, categorical_probe),
        (lambda: MultinomialNB(alpha=0), token_stream, token_probe),
        (lambda: ComplementNB(alpha=0, norm=True), token_stream, token_probe),
        (lambda: BernoulliNB(alpha=0), token_stream, token_probe),
    ],
)
def test_state_round_trip_and_merge(
    make: Callable[[], Learner],
    stream: Callable[[int, int], list[Event]],
    probe: Callable[[Mapping[str, Any], random.Random], dict[str, Any]],
) -> None:
    events = stream(5, 120)
    odd, even, whole = make(), make(), make()
    for i, (x, y, w) in enumerate(events):
        (odd if i % 2 else even).learn_one(x, y, w)
    for x, y, w in [e for i, e in enumerate(events) if i % 2] + events[::2]:
        whole.learn_one(x, y, w)
    state = orjson.loads(orjson.dumps(odd.to_state()))
    assert state["params"]["alpha"] == 0
    restored = Learner.from_state(state)
    merged = Learner.from_state(orjson.loads(orjson.dumps(restored.to_state())))
    merged.merge(even)
    rng = random.Random(0)
    for x, _, _ in events[:40]:
        x_probe = probe(x, rng)
        assert restored.predict_log_proba_one(x_probe) == odd.predict_log_proba_one(x_probe)
        got, want = merged.predict_log_proba_one(x_probe), whole.predict_log_proba_one(x_probe)
        assert got.keys() == want.keys()
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
    with pytest.raises(Exception, match="alpha"):
        merged.merge(type(merged)(alpha=1.0))


# ------------------------------------------------------------------ batch paths and the engine
def _engine_run(lines: list[bytes], learner: Learner, *, column_path: bool) -> tuple[Any, ...]:
    run = run_engine(learner, lines, column_path=column_path, batch_size=150)
    return run.records, run.dead_letters, run.state, run.report, run.outcomes


def _zero_lines(stream: list[Event]) -> list[bytes]:
    """Events as JSON lines; in the categorical streams every tenth has a value no class
    has seen (the all-zero case; the token streams meet it on their own)."""
    out = []
    for i, (x, y, w) in enumerate(stream):
        x = {k: v for k, v in x.items() if v is not None}
        if i % 10 == 5 and "a" in x:
            x["a"] = "brand-new"
        out.append(orjson.dumps({**x, "y": y, "w": w}))
    return out


@pytest.mark.parametrize(
    ("make", "stream"),
    [
        (lambda: CategoricalNB(alpha=0), categorical_stream),
        (lambda: NaiveBayes(alpha=0), categorical_stream),
        (lambda: MultinomialNB(alpha=0), token_stream),
        (lambda: ComplementNB(alpha=0), token_stream),
        (lambda: ComplementNB(alpha=0, norm=True), token_stream),
        (lambda: BernoulliNB(alpha=0), token_stream),
    ],
)
def test_engine_batch_paths_equal_the_per_event_path_and_records_are_finite(
    make: Callable[[], Learner], stream: Callable[[int, int], list[Event]]
) -> None:
    lines = _zero_lines(stream(7, 700))
    fast = _engine_run(lines, make(), column_path=True)
    slow = _engine_run(lines, make(), column_path=False)
    assert fast == slow  # records byte for byte, model, evaluation, outcomes
    records, dead, _, report, _ = fast
    assert len(records) + len(dead) == len(lines)  # (events with no token are dead letters)
    assert len(dead) < 0.2 * len(lines)
    for record in records:
        assert b"NaN" not in record and b"Infinity" not in record
        decoded = orjson.loads(record)
        lp = decoded["log_proba"]
        assert all(math.isfinite(v) for v in lp.values())
        assert lp or decoded["n_learned"] == 0
    # the true class had probability 0 for some events: the log-loss floor keeps it finite
    impossible = 0
    for record in map(orjson.loads, records):
        lp = record["log_proba"]
        impossible += bool(lp) and "y_true" in record and str(record["y_true"]) not in lp
    assert impossible > 0
    assert math.isfinite(report["cumulative"]["log_loss"])
    assert math.isfinite(report["window"]["log_loss"])


def _column_kernel(model: Any, xs: Any, ys: Any, ws: Any) -> Any:
    """The learner's column kernel on the batch's columns (absent features as None)."""
    found = columns_of_events(xs)
    out = None if found is None else model.predict_learn_columns(*found, ys, ws)
    return None if out is None else per_event_answers(*out)


def _dense(seed: int, n: int, weights: bool) -> list[Event]:
    """Every value soon seen with every class: batches with no class of probability 0."""
    rng = random.Random(seed)
    return [
        (x, y, rng.choice([0.5, 1.0, 2.0]) if weights else 1.0)
        for x, y in datasets.categorical_stream(seed, n, features=6, values=3)
    ]


def _mixed(seed: int, n: int, weights: bool) -> list[Event]:
    rng = random.Random(seed)
    return [
        (x, y, rng.choice([0.5, 1.0, 2.0]) if weights else 1.0)
        for x, y in datasets.mixed_stream(seed, n)
    ]


@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize(
    ("make", "stream"),
    [
        (lambda: CategoricalNB(alpha=0), _dense),
        (lambda: NaiveBayes(alpha=0), _mixed),
    ],
)
def test_the_column_kernels_apply_the_rule_as_the_per_event_loop(
    make: Callable[[], Learner], stream: Callable[[int, int, bool], list[Event]], weights: bool
) -> None:
    # the kernel takes the batches in which no class has probability 0 (the others go to
    # the per-event path), and agrees with the per-event loop on every one
    used = against_the_loop(make, stream(3, 2500, weights), 3, _column_kernel, warm=300)
    assert used >= 3


@pytest.mark.parametrize(
    "make",
    [
        lambda: CategoricalNB(alpha=0),
        lambda: NaiveBayes(alpha=0, schema=dict.fromkeys("abcd", "categorical")),
    ],
)
def test_the_column_kernels_hand_batches_with_impossible_classes_to_the_loop(
    make: Callable[[], Learner],
) -> None:
    against_the_loop(make, categorical_stream(4, 1500), 4, _column_kernel, exact_state=True)


def _row_kernel(model: Any, xs: Any, ys: Any, ws: Any) -> Any:
    out = model.predict_learn_rows(xs, ys, ws)
    return None if out is None else per_event_answers(*out)


def _dense_tokens(seed: int, n: int) -> list[Event]:
    """Eight tokens, soon counted in every class: batches with no class of probability 0."""
    rng = random.Random(seed)
    events: list[Event] = []
    for _ in range(n):
        y = rng.randrange(3)
        tokens = rng.sample([f"w{j}" for j in range(8)], 4)
        x = {t: rng.randint(1, 3) + (2 if t == f"w{y}" else 0) for t in tokens}
        events.append((x, y, rng.choice([1.0, 1.0, 0.5, 2.0])))
    return events


@pytest.mark.parametrize("stream", [_dense_tokens, token_stream])
def test_the_multinomial_row_kernel_applies_the_rule_as_the_per_event_loop(
    stream: Callable[[int, int], list[Event]],
) -> None:
    used = against_the_loop(lambda: MultinomialNB(alpha=0), stream(5, 2500), 5, _row_kernel)
    if stream is _dense_tokens:
        assert used >= 3


@pytest.mark.parametrize(
    "make",
    [
        lambda: ComplementNB(alpha=0, norm=True),
        lambda: BernoulliNB(alpha=0),
    ],
)
def test_the_token_learners_take_the_per_event_path(make: Callable[[], Learner]) -> None:
    events = token_stream(8, 400)
    fast, slow = make(), make()
    for start in range(0, len(events), 100):
        batch = events[start : start + 100]
        xs, ys, ws = [e[0] for e in batch], [e[1] for e in batch], [e[2] for e in batch]
        assert fast.predict_learn_many(xs, ys, ws) == Learner.predict_learn_many(slow, xs, ys, ws)
        assert fast.to_state() == slow.to_state()
        assert fast.predict_learn_rows(xs, ys, ws) is None  # (nothing learned)


def test_cli_run_with_alpha_zero_emits_finite_records_equal_to_the_library() -> None:
    exe = shutil.which("stream-nb") or str(Path(sys.executable).parent / "stream-nb")
    events = categorical_stream(9, 300)
    payloads = []
    for i, (x, y, _) in enumerate(events):
        x = {k: v for k, v in x.items() if v is not None} or {"a": "u"}
        if i % 10 == 5:
            x["a"] = "brand-new"  # no class has seen it
        payloads.append((x, y))
    stdin = b"".join(orjson.dumps({"x": x, "y": y}) + b"\n" for x, y in payloads)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_NB_")}
    for flags in (
        ["--model", 'CategoricalNB:{"alpha": 0}'],
        ["--model", "NaiveBayes", "--param", "alpha=0"],
    ):
        proc = subprocess.run(
            [exe, "run", *flags], input=stdin, capture_output=True, env=env, timeout=120, check=True
        )
        assert b"NaN" not in proc.stdout and b"Infinity" not in proc.stdout
        got = [orjson.loads(line) for line in proc.stdout.splitlines()]
        model = CategoricalNB(alpha=0) if "CategoricalNB" in flags[1] else NaiveBayes(alpha=0)
        impossible = 0
        for record, (x, y) in zip(got, payloads, strict=True):
            want = model.predict_log_proba_one(x)
            assert record["log_proba"] == pytest.approx({str(k): v for k, v in want.items()})
            impossible += bool(want) and y not in want
            model.learn_one(x, y)
        assert impossible > 0
        summary = orjson.loads(proc.stderr[proc.stderr.index(b"{") :])
        assert math.isfinite(summary["report"]["cumulative"]["log_loss"])


@pytest.mark.parametrize(
    "make",
    [
        lambda: CategoricalNB(alpha=0),
        lambda: MultinomialNB(alpha=0),
        lambda: ComplementNB(alpha=0),
        lambda: BernoulliNB(alpha=0),
    ],
)
def test_informative_features_are_not_listed_with_alpha_zero(make: Callable[[], Learner]) -> None:
    model = make()
    model.learn_one({"a": 1, "b": 1}, "x")
    model.learn_one({"c": 1, "b": 1}, "y")
    assert model.informative_features() == []  # (log-ratios of MLE estimates are infinite)


def test_naive_bayes_lists_only_its_gaussian_features_with_alpha_zero() -> None:
    model = NaiveBayes(alpha=0)
    for i in range(6):
        model.learn_one({"sky": "sun" if i % 2 else "rain", "t": float(i % 2) + 0.1 * i}, i % 2)
    assert [e["feature"] for e in model.informative_features()] == ["t"]


def test_weighted_nb_still_needs_a_positive_alpha() -> None:
    from stream_nb import WeightedNB
    from stream_nb._exceptions import ConfigError

    with pytest.raises(ConfigError, match="alpha must be positive and finite, got 0"):
        WeightedNB(alpha=0)
