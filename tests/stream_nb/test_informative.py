"""stream_nb.informative against brute force: every score recomputed from the raw events.

The references below share no code with the module: they count the events
themselves (with the true, decayed weights when forgetting is on), smooth
with the learner's α, and evaluate each divergence by its definition
(numerical integration for the normals, an explicit sum over the on/off
states for Bernoulli, one term per token for the token learners). The
categorical reference is the measure ``inspect`` had before the module:
ablation through the learner's own joint log-likelihood.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Hashable, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pytest

from stream_nb import (
    AODE,
    KDB,
    SPODE,
    TAN,
    BernoulliNB,
    CategoricalNB,
    ComplementNB,
    ConfigError,
    GaussianNB,
    MultinomialNB,
    NaiveBayes,
)
from stream_nb._state import from_pairs
from stream_nb.informative import (
    bernoulli_divergence,
    gaussian_divergence,
    informative_features,
    structure,
    token_divergence_term,
)
from stream_nb.seminaive._information import class_mutual_information

Event = tuple[dict[str, Any], Hashable, float]

#: Agreement with the references: relative 1e-9 (different summation orders).
REL = 1e-9


def decayed(events: Sequence[Event], half_life: float | None) -> list[float]:
    """True weight of each event after all were learned: ``w_i γ^(Σ_{j>i} w_j)``."""
    if half_life is None:
        return [w for _, _, w in events]
    gamma = 0.5 ** (1.0 / half_life)
    out, later = [], 0.0
    for _, _, w in reversed(events):
        out.append(w * gamma**later)
        later += w
    return out[::-1]


def by_key(entries: list[dict[str, Any]], *keys: str) -> dict[Any, dict[str, Any]]:
    return {tuple(e[k] for k in keys) if len(keys) > 1 else e[keys[0]]: e for e in entries}


def learn(model: Any, events: Sequence[Event]) -> Any:
    for x, y, w in events:
        model.learn_one(x, y, w)
    return model


# ---------------------------------------------------------------------- formulas
def _integrated_divergence(ma: float, va: float, mb: float, vb: float) -> float:
    """½ ∫ (p_a − p_b)(log p_a − log p_b) dx on a fine grid (trapezoid)."""
    lo = min(ma - 12 * math.sqrt(va), mb - 12 * math.sqrt(vb))
    hi = max(ma + 12 * math.sqrt(va), mb + 12 * math.sqrt(vb))
    x = np.linspace(lo, hi, 400_001)
    la = -0.5 * (np.log(2 * np.pi * va) + (x - ma) ** 2 / va)
    lb = -0.5 * (np.log(2 * np.pi * vb) + (x - mb) ** 2 / vb)
    f = 0.5 * (np.exp(la) - np.exp(lb)) * (la - lb)
    return float(np.sum((f[1:] + f[:-1]) * np.diff(x)) / 2)


@pytest.mark.parametrize(
    ("ma", "va", "mb", "vb"),
    [(0.0, 1.0, 1.0, 1.0), (0.0, 1.0, 0.0, 3.0), (2.0, 0.5, -1.0, 2.0), (1e3, 4.0, 1e3 + 1, 9.0)],
)
def test_gaussian_divergence_is_the_integral(ma: float, va: float, mb: float, vb: float) -> None:
    expected = _integrated_divergence(ma, va, mb, vb)
    assert gaussian_divergence(ma, va, mb, vb) == pytest.approx(expected, rel=1e-6)
    assert gaussian_divergence(mb, vb, ma, va) == pytest.approx(expected, rel=1e-6)


def test_gaussian_divergence_extreme_variances_do_not_overflow() -> None:
    d = gaussian_divergence(0.0, 1e300, 0.0, 1e299)
    assert math.isfinite(d) and d == pytest.approx(0.25 * (0.9 / 1.0) * (0.9 / 0.1))


def test_bernoulli_divergence_is_the_sum_over_states() -> None:
    for pa, pb in [(0.9, 0.1), (0.5, 0.5), (0.01, 0.3), (0.999, 0.998)]:
        states = [(pa, pb), (1 - pa, 1 - pb)]
        expected = 0.5 * sum((a - b) * math.log(a / b) for a, b in states)
        assert bernoulli_divergence(pa, pb) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_token_term_sums_to_the_symmetric_kl() -> None:
    a = [0.5, 0.3, 0.2]
    b = [0.2, 0.2, 0.6]
    kl_ab = sum(p * math.log(p / q) for p, q in zip(a, b, strict=True))
    kl_ba = sum(q * math.log(q / p) for p, q in zip(a, b, strict=True))
    terms = sum(token_divergence_term(p, q) for p, q in zip(a, b, strict=True))
    assert terms == pytest.approx(0.5 * (kl_ab + kl_ba), rel=1e-12)


# ---------------------------------------------------------------------- categorical
def categorical_events(seed: int, n: int, labels: Sequence[Hashable]) -> list[Event]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        y = rng.choice(labels)
        x: dict[str, Any] = {
            "signal": y if rng.random() < 0.7 else rng.choice(labels),
            "noise": rng.choice("abcde"),
            "flag": rng.random() < 0.5,
        }
        if rng.random() < 0.2:
            x["sometimes"] = rng.choice("xy")
        out.append((x, y, rng.choice([1.0, 1.0, 0.5, 2.0])))
    return out


def ablation(model: Any) -> dict[tuple[Any, Any], tuple[float, Any, Any]]:
    """The measure inspect used before: ``jll({f: v}) − jll({})`` by class, max − min."""
    base = model.joint_log_likelihood_one({})
    out = {}
    for feature, values in from_pairs(model.to_state()["stats"]["counts"]).items():
        for value in from_pairs(values):
            jll = model.joint_log_likelihood_one({feature: value})
            r = {c: jll[c] - base[c] for c in jll}
            hi, lo = max(r, key=r.__getitem__), min(r, key=r.__getitem__)
            out[(feature, value)] = (r[hi] - r[lo], hi, lo)
    return out


def counted_categorical(
    events: Sequence[Event], weights: Sequence[float], alpha: float, scored: Sequence[Hashable]
) -> dict[tuple[Any, Any], float]:
    """``max − min`` over scored classes of ``log((N_{y,f,v} + α) / (N_{y,f} + S_f α))``."""
    n: dict[Any, float] = defaultdict(float)
    present: dict[Any, float] = defaultdict(float)
    values: dict[str, set[Any]] = defaultdict(set)
    for (x, y, _), w in zip(events, weights, strict=True):
        for f, v in x.items():
            if v is None:
                continue
            n[(f, v, y)] += w
            present[(f, y)] += w
            values[f].add(v)
    out = {}
    for f, vs in values.items():
        for v in vs:
            r = [
                math.log((n[(f, v, y)] + alpha) / (present[(f, y)] + len(vs) * alpha))
                for y in scored
            ]
            out[(f, v)] = max(r) - min(r)
    return out


@pytest.mark.parametrize("half_life", [None, 150.0])
@pytest.mark.parametrize(
    "make",
    [
        lambda h: CategoricalNB(alpha=0.5, half_life=h),
        lambda h: CategoricalNB(class_prior={"a": 1, "c": 2}, half_life=h),
        lambda h: NaiveBayes(alpha=2.0, half_life=h),
    ],
)
def test_categorical_scores_match_counts_and_the_old_ablation(make: Any, half_life: Any) -> None:
    events = categorical_events(3, 600, ["a", "b", "c"])
    model = learn(make(half_life), events)
    entries = informative_features(model, None)
    got = by_key(entries, "feature", "value")
    scored = [y for y in ["a", "b", "c"] if model.class_prior is None or y in model.class_prior]
    expected = counted_categorical(events, decayed(events, half_life), model.alpha, scored)
    assert set(got) == set(expected)
    old = ablation(model)
    for key, e in got.items():
        assert e["kind"] == "categorical" and e["score"] == e["log_ratio"]
        assert e["log_ratio"] == pytest.approx(expected[key], rel=REL, abs=1e-12)
        assert e["log_ratio"] == pytest.approx(old[key][0], rel=REL, abs=1e-12)
        if old[key][0] > 1e-9:
            assert (e["favours"], e["against"]) == old[key][1:]
    assert [e["score"] for e in entries] == sorted((e["score"] for e in entries), reverse=True)


# ---------------------------------------------------------------------- Gaussian
def gaussian_events(seed: int, n: int) -> list[Event]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        y = rng.choice("abc")
        shift = {"a": 0.0, "b": 1.0, "c": 2.5}[y]
        x = {
            "signal": rng.gauss(shift, 1.0),
            "wide": rng.gauss(5.0, 10.0 + 2 * (y == "c")),
            "noise": rng.gauss(0.0, 1.0),
        }
        out.append((x, y, rng.choice([1.0, 0.5, 3.0])))
    return out


def brute_gaussian(
    events: Sequence[Event], weights: Sequence[float], var_smoothing: float, mode: str
) -> dict[str, tuple[float, Any, Any]]:
    """Weighted two-pass moments, the model's ε, the divergence integrated numerically."""
    feats = sorted(events[0][0])
    x_all = np.array([[x[f] for f in feats] for x, _, _ in events])
    w_all = np.array(weights)
    ys = np.array([y for _, y, _ in events])
    mean_all = np.average(x_all, axis=0, weights=w_all)
    var_all = np.average((x_all - mean_all) ** 2, axis=0, weights=w_all)
    out = {}
    for j, f in enumerate(feats):
        scale = var_all[j] if mode == "feature" else var_all.max()
        eps = max(var_smoothing * scale, 1e-300)
        moments = {}
        for y in sorted(set(ys)):
            xs, ws = x_all[ys == y, j], w_all[ys == y]
            m = np.average(xs, weights=ws)
            moments[y] = (m, np.average((xs - m) ** 2, weights=ws) + eps)
        best = max(
            (
                (_integrated_divergence(*moments[a], *moments[b]), a, b)
                for a, b in combinations(sorted(moments), 2)
            ),
            key=lambda t: t[0],
        )
        d, a, b = best
        out[f] = (d, *((a, b) if moments[a][0] > moments[b][0] else (b, a)))
    return out


@pytest.mark.parametrize("mode", ["feature", "global"])
@pytest.mark.parametrize("half_life", [None, 400.0])
@pytest.mark.parametrize("cls", [GaussianNB, NaiveBayes])
def test_gaussian_scores_match_integrated_divergence(cls: Any, half_life: Any, mode: str) -> None:
    events = gaussian_events(5, 900)
    model = learn(cls(var_smoothing=1e-3, var_smoothing_mode=mode, half_life=half_life), events)
    entries = informative_features(model, None)
    expected = brute_gaussian(events, decayed(events, half_life), 1e-3, mode)
    got = by_key(entries, "feature")
    assert set(got) == set(expected)
    for f, (d, favours, against) in expected.items():
        e = got[f]
        assert e["kind"] == "gaussian"
        assert e["score"] == pytest.approx(d, rel=1e-6)
        assert (e["favours"], e["against"]) == (favours, against)
        assert e["means"][0] >= e["means"][1]
    assert entries[0]["feature"] == "signal"


def test_gaussian_class_prior_limits_the_pairs() -> None:
    events = gaussian_events(6, 600)
    both = learn(GaussianNB(class_prior={"a": 1.0, "b": 1.0}), events)
    e = by_key(informative_features(both, None), "feature")["signal"]
    assert {e["favours"], e["against"]} == {"a", "b"}
    alone = learn(GaussianNB(class_prior={"a": 1.0}), events)
    assert informative_features(alone) == []


def test_gaussian_feature_without_statistics_in_a_class_is_left_out() -> None:
    model = GaussianNB()
    model.learn_one({"a": 1.0, "b": 2.0}, 0)
    model.learn_one({"a": 3.0, "b": 1.0}, 0)
    model.learn_one({"a": 5.0}, 1)
    model.learn_one({"a": 6.0}, 1)
    assert [e["feature"] for e in informative_features(model)] == ["a"]


# ---------------------------------------------------------------------- tokens
def token_events(seed: int, n: int, labels: Sequence[Hashable]) -> list[Event]:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(40)]
    zipf = [1.0 / (i + 1) for i in range(40)]
    out = []
    for i in range(n):
        y = rng.choice(labels)
        x: dict[str, Any] = {}
        for t in rng.choices(vocab, zipf, k=12):
            x[t] = x.get(t, 0) + 1
        if rng.random() < (0.6 if y == labels[0] else 0.05):
            x["signal"] = rng.choice([1, 2])
        if i == 7:
            x["rare"] = 1
        out.append((x, y, rng.choice([1.0, 1.0, 2.0])))
    return out


def token_counts(
    events: Sequence[Event], weights: Sequence[float]
) -> tuple[dict[tuple[str, Any], float], dict[Any, float], list[str]]:
    n: dict[tuple[str, Any], float] = defaultdict(float)
    per_class: dict[Any, float] = defaultdict(float)
    tokens: dict[str, None] = {}
    for (x, y, _), w in zip(events, weights, strict=True):
        for t, c in x.items():
            if c > 0:
                n[(t, y)] += c * w
                per_class[y] += c * w
                tokens[t] = None
    return n, per_class, list(tokens)


def best_pair(theta: dict[Any, float], labels: Sequence[Hashable]) -> tuple[float, Any, Any]:
    """max over pairs of ½ (θ_a − θ_b) log(θ_a/θ_b); ``(score, larger θ, smaller θ)``."""
    best = (-1.0, None, None)
    for a, b in combinations(labels, 2):
        d = 0.5 * (theta[a] - theta[b]) * math.log(theta[a] / theta[b])
        if d > best[0]:
            best = (d, a, b) if theta[a] >= theta[b] else (d, b, a)
    return best


@pytest.mark.parametrize("half_life", [None, 300.0])
def test_multinomial_scores_match_counts(half_life: Any) -> None:
    labels = ["spam", "ham", "news"]
    events = token_events(8, 700, labels)
    alpha = 0.01
    model = learn(MultinomialNB(alpha=alpha, half_life=half_life), events)
    n, t, tokens = token_counts(events, decayed(events, half_life))
    got = by_key(informative_features(model, None), "feature")
    assert set(got) == set(tokens)
    for tok in tokens:
        theta = {y: (n[(tok, y)] + alpha) / (t[y] + alpha * len(tokens)) for y in labels}
        d, hi, lo = best_pair(theta, labels)
        e = got[tok]
        assert e["kind"] == "token"
        assert e["score"] == pytest.approx(d, rel=REL)
        assert (e["favours"], e["against"]) == (hi, lo)
        assert e["log_ratio"] == pytest.approx(math.log(theta[hi] / theta[lo]), rel=REL)
        assert e["support"] == pytest.approx(sum(n[(tok, y)] for y in labels), rel=REL)


def test_rare_token_has_a_larger_ratio_but_ranks_below_the_signal() -> None:
    events = token_events(9, 800, ["spam", "ham"])
    model = learn(MultinomialNB(alpha=0.01), events)
    entries = informative_features(model, None)
    got = by_key(entries, "feature")
    assert got["rare"]["log_ratio"] > got["signal"]["log_ratio"]
    assert entries[0]["feature"] == "signal" and got["signal"]["favours"] == "spam"
    assert got["rare"]["score"] < 0.05 * got["signal"]["score"]


@pytest.mark.parametrize("norm", [False, True])
def test_complement_scores_match_complement_counts(norm: bool) -> None:
    labels = ["spam", "ham", "news"]
    events = token_events(10, 600, labels)
    alpha = 0.5
    model = learn(ComplementNB(alpha=alpha, norm=norm), events)
    n, t, tokens = token_counts(events, decayed(events, None))
    total = sum(t.values())
    got = by_key(informative_features(model, None), "feature")
    assert set(got) == set(tokens)
    for tok in tokens:
        n_w = sum(n[(tok, y)] for y in labels)
        theta = {
            y: (n_w - n[(tok, y)] + alpha) / (total - t[y] + alpha * len(tokens)) for y in labels
        }
        d, hi, lo = best_pair(theta, labels)
        e = got[tok]
        assert e["score"] == pytest.approx(d, rel=REL)
        # the class with the smaller complement rate is favoured
        assert (e["favours"], e["against"]) == (lo, hi)
        assert e["log_ratio"] == pytest.approx(math.log(theta[hi] / theta[lo]), rel=REL)
    assert got["signal"]["favours"] == "spam"


@pytest.mark.parametrize("half_life", [None, 250.0])
def test_bernoulli_scores_match_on_off_counts(half_life: Any) -> None:
    labels = ["spam", "ham"]
    events = token_events(11, 600, labels)
    alpha = 0.3
    model = learn(BernoulliNB(alpha=alpha, binarize=1.0, half_life=half_life), events)
    weights = decayed(events, half_life)
    on: dict[tuple[str, Any], float] = defaultdict(float)
    n_y: dict[Any, float] = defaultdict(float)
    features: dict[str, None] = {}
    for (x, y, _), w in zip(events, weights, strict=True):
        n_y[y] += w
        for f, v in x.items():
            features[f] = None
            if v > 1.0:
                on[(f, y)] += w
    got = by_key(informative_features(model, None), "feature")
    assert set(got) == set(features)  # features never on (count 1 only) included
    for f in features:
        p = {y: (on[(f, y)] + alpha) / (n_y[y] + 2 * alpha) for y in labels}
        states = [(p["spam"], p["ham"]), (1 - p["spam"], 1 - p["ham"])]
        d = 0.5 * sum((a - b) * math.log(a / b) for a, b in states)
        e = got[f]
        assert e["kind"] == "binary"
        assert e["score"] == pytest.approx(d, rel=1e-7, abs=1e-15)
        hi = max(labels, key=p.__getitem__)
        if abs(p["spam"] - p["ham"]) > 1e-12:
            assert e["favours"] == hi
            assert e["log_ratio"] == pytest.approx(abs(math.log(p["spam"] / p["ham"])), rel=1e-9)
        assert e["support"] == pytest.approx(sum(on[(f, y)] for y in labels), rel=REL)


# ---------------------------------------------------------------------- semi-naive
def seminaive_events(seed: int, n: int) -> list[Event]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        y = rng.choice("ab")
        s = y if rng.random() < 0.85 else rng.choice("ab")
        x = {
            "signal": s,
            "copy": s if rng.random() < 0.9 else rng.choice("ab"),
            "noise": rng.choice("pqrs"),
            "level": rng.gauss(0.0, 1.0),
        }
        out.append((x, y, 1.0))
    return out


def brute_mutual_information(rows: Sequence[tuple[dict[str, Any], Any]]) -> dict[str, float]:
    """``I(X_f; Y)`` over events with ``f`` present, times their fraction (ML estimate)."""
    total = len(rows)
    out = {}
    for f in rows[0][0]:
        joint: dict[tuple[Any, Any], int] = defaultdict(int)
        for x, y in rows:
            joint[(x[f], y)] += 1
        px: dict[Any, int] = defaultdict(int)
        py: dict[Any, int] = defaultdict(int)
        for (v, y), c in joint.items():
            px[v] += c
            py[y] += c
        m = sum(c for c in joint.values())
        out[f] = (m / total) * sum(
            c / m * math.log(c * m / (px[v] * py[y])) for (v, y), c in joint.items()
        )
    return out


@pytest.mark.parametrize("cls", [SPODE, AODE, TAN, KDB])
def test_seminaive_scores_from_binned_counts(cls: Any) -> None:
    events = seminaive_events(12, 700)
    model = learn(cls(alpha=0.7, warmup=50, n_bins=4), events)
    edges = model._disc.edges["level"]
    rows = [({**x, "level": bisect_right(edges, x["level"])}, y) for x, y, _ in events]
    binned = [(x, y, 1.0) for x, y in rows]
    expected = counted_categorical(binned, [1.0] * len(binned), 0.7, ["a", "b"])
    mi = brute_mutual_information(rows)
    entries = informative_features(model, None)
    got = by_key(entries, "feature", "value")
    assert set(got) == set(expected)
    for (f, v), e in got.items():
        assert e["log_ratio"] == pytest.approx(expected[(f, v)], rel=REL, abs=1e-12)
        assert e["mutual_information"] == pytest.approx(mi[f], rel=REL)
        if f == "level":
            lo, hi = e["interval"]
            assert lo == (edges[v - 1] if v > 0 else None)
            assert hi == (edges[v] if v < len(edges) else None)
        else:
            assert "interval" not in e
    store_mi = class_mutual_information(model._store)
    assert {f: mi[f] for f in store_mi} == pytest.approx(store_mi, rel=REL)
    assert entries[0]["feature"] == "signal"


def test_structure_reports_the_models_own_parents() -> None:
    events = seminaive_events(13, 800)
    tan = learn(TAN(rebuild_every=200), events)
    kdb = learn(KDB(k=2, rebuild_every=200), events)
    for model in (tan, kdb):
        s = structure(model)
        assert s is not None
        assert {d["feature"]: tuple(d["parents"]) for d in s["parents"]} == model.parents
    auto = learn(SPODE(), events)
    s = structure(auto)
    assert s is not None and s["super_parent"] == auto._best_parent() == "signal"
    assert {d["feature"]: d["parents"] for d in s["parents"]} == {
        "signal": [],
        "copy": ["signal"],
        "noise": ["signal"],
        "level": ["signal"],
    }
    fixed = learn(SPODE(parent="noise"), events)
    assert structure(fixed)["super_parent"] == "noise"
    assert structure(learn(AODE(), events)) is None
    assert structure(CategoricalNB()) is None


# ---------------------------------------------------------------------- edge cases
def test_top_and_untrained_models() -> None:
    events = categorical_events(14, 200, ["a", "b"])
    model = learn(CategoricalNB(), events)
    assert informative_features(model, 0) == []
    assert len(informative_features(model, 3)) == 3
    assert len(informative_features(model, None)) == len(informative_features(model, 10_000))
    with pytest.raises(ConfigError, match="top must be an integer >= 0"):
        informative_features(model, -1)
    for cls in (CategoricalNB, GaussianNB, NaiveBayes, MultinomialNB, ComplementNB, BernoulliNB):
        assert informative_features(cls()) == []
    for cls in (SPODE, AODE, TAN, KDB):
        assert informative_features(cls()) == []
    one_class = CategoricalNB()
    one_class.learn_one({"a": 1}, "only")
    assert informative_features(one_class) == []
