"""Tests of stream_nb.evaluation: every metric against an independent brute force,
scikit-learn and river, textbook examples, edge cases, state and properties."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from river import metrics as river_metrics
from river import utils as river_utils
from sklearn.metrics import (
    accuracy_score,
    cohen_kappa_score,
    confusion_matrix,
    f1_score,
    log_loss,
)

from stream_nb import (
    LOG_LOSS_FLOOR,
    ConfigError,
    ModelStateError,
    PrequentialEvaluator,
    bayes_risk_decision,
)
from stream_nb.evaluation.scoreboard import Scoreboard

Event = tuple[Hashable, Hashable | None, dict[Hashable, float]]
MAX_LOSS = -math.log(LOG_LOSS_FLOOR)
NONE = "<no prediction>"  # stands for y_pred=None where sklearn needs a label


# ---------------------------------------------------------------------- streams
def random_stream(
    seed: int,
    n: int,
    classes: Sequence[Hashable] = ("a", "b", "c", "d"),
    *,
    p_none: float = 0.05,
    p_unseen: float = 0.05,
    full_proba: bool = False,
    drift: bool = True,
) -> list[Event]:
    """A seeded sequence of (truth, prediction, log P) with runs (for kappa-T),
    skewed and drifting class frequencies (for kappa-M), no-predictions and
    labels missing from the probabilities."""
    rng = random.Random(seed)
    events: list[Event] = []
    previous = classes[0]
    for i in range(n):
        weights = [
            1.0 + 5.0 * (j == (i * len(classes) // n if drift else 0)) for j in range(len(classes))
        ]
        y = previous if rng.random() < 0.4 else rng.choices(classes, weights)[0]
        previous = y
        raw = [rng.random() + 0.01 for _ in classes]
        total = sum(raw)
        proba = {c: r / total for c, r in zip(classes, raw, strict=True)}
        if full_proba:
            pred = max(proba, key=proba.__getitem__) if rng.random() < 0.5 else y
        else:
            pred = rng.choice(classes) if rng.random() < 0.5 else y
            if rng.random() < p_none:
                pred = None
            if rng.random() < p_unseen:
                del proba[y]
        events.append((y, pred, {c: math.log(p) for c, p in proba.items()}))
    return events


def feed(ev: PrequentialEvaluator, events: Sequence[Event]) -> PrequentialEvaluator:
    for y, p, lp in events:
        ev.update(y, p, lp)
    return ev


# ---------------------------------------------------------------------- brute force
def event_loss(y: Hashable, lp: Mapping[Hashable, float]) -> float:
    p = math.exp(lp[y]) if y in lp else 0.0
    return -math.log(min(max(p, LOG_LOSS_FLOOR), 1.0))


def view_weights(view: str, k: int, *, window: int, lam: float) -> list[float]:
    """Weights of events 0..k in a view ending at event k."""
    if view == "cumulative":
        return [1.0] * (k + 1)
    if view == "window":
        return [1.0 if i > k - window else 0.0 for i in range(k + 1)]
    return [lam ** (k - i) for i in range(k + 1)]


def brute_force(
    events: Sequence[Event],
    view: str,
    *,
    window: int,
    lam: float,
    loss_matrix: Mapping[Any, Mapping[Any, float]] | None = None,
) -> dict[str, Any]:
    """Every metric from its definition, recomputed from scratch (O(N²))."""
    order: dict[Hashable, int] = {}
    majority_ok: list[bool] = []
    for k, (y, _p, _lp) in enumerate(events):
        order.setdefault(y, len(order))
        w = view_weights(view, k, window=window, lam=lam)
        counts: dict[Hashable, float] = {}
        for i in range(k + 1):
            if w[i] > 0:
                counts[events[i][0]] = counts.get(events[i][0], 0.0) + w[i]
        majority = min(counts, key=lambda c: (-counts[c], order[c]))
        majority_ok.append(majority == y)
    nochange_ok = [k > 0 and events[k - 1][0] == events[k][0] for k in range(len(events))]
    k = len(events) - 1
    w = view_weights(view, k, window=window, lam=lam)
    n = sum(w)
    confusion: dict[tuple[Hashable, Hashable], float] = {}
    for wi, (y, p, _lp) in zip(w, events, strict=True):
        if wi > 0:
            confusion[(y, p)] = confusion.get((y, p), 0.0) + wi
    correct = sum(wi for wi, (y, p, _lp) in zip(w, events, strict=True) if p is not None and p == y)
    p0 = correct / n
    truths = {y for (y, _p) in confusion}
    preds = {p for (_y, p) in confusion}
    row = {c: sum(v for (y, _p), v in confusion.items() if y == c) for c in truths | preds}
    col = {c: sum(v for (_y, p), v in confusion.items() if p == c) for c in truths | preds}
    pe = sum(row[c] * col[c] for c in truths) / n**2
    pm = sum(wi for wi, ok in zip(w, majority_ok, strict=True) if ok) / n
    pt = sum(wi for wi, ok in zip(w, nochange_ok, strict=True) if ok) / n
    f1s = []
    for c in (truths | preds) - {None}:
        tp = confusion.get((c, c), 0.0)
        f1s.append(2 * tp / (row[c] + col[c]))
    out = {
        "n": n,
        "accuracy": p0,
        "log_loss": sum(wi * event_loss(y, lp) for wi, (y, _p, lp) in zip(w, events, strict=True))
        / n,
        "kappa": None if pe == 1 else (p0 - pe) / (1 - pe),
        "kappa_m": None if pm == 1 else (p0 - pm) / (1 - pm),
        "kappa_t": None if pt == 1 else (p0 - pt) / (1 - pt),
        "macro_f1": sum(f1s) / len(f1s),
        "confusion": confusion,
    }
    if loss_matrix is not None:

        def cost(i: Hashable, j: Hashable) -> float:
            return loss_matrix.get(i, {}).get(j, 0.0 if i == j else 1.0)

        out["cost"] = sum(wi * cost(p, y) for wi, (y, p, _lp) in zip(w, events, strict=True)) / n
    return out


def assert_view_matches(got: Mapping[str, Any], want: Mapping[str, Any], rel: float) -> None:
    for key, value in want.items():
        if key == "confusion":
            cells = {(t, p): w for t, p, w in got["confusion"]}
            assert set(cells) == set(value)
            for cell, weight in value.items():
                assert cells[cell] == pytest.approx(weight, rel=rel), cell
        elif value is None:
            assert got[key] is None, key
        else:
            assert got[key] == pytest.approx(value, rel=rel, abs=1e-12), key


WINDOW = 40
LAMBDA = 0.97


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("view", ["cumulative", "window", "fading"])
def test_every_metric_matches_brute_force_along_the_stream(seed: int, view: str) -> None:
    events = random_stream(seed, 150)
    matrix = {"a": {"b": 5.0, "c": 0.5}, "b": {"b": 0.25}, None: {"a": 2.0}}
    ev = PrequentialEvaluator(window=WINDOW, fading_factor=LAMBDA, loss_matrix=matrix)
    for k, (y, p, lp) in enumerate(events):
        ev.update(y, p, lp)
        if k % 29 == 0 or k == len(events) - 1:
            want = brute_force(events[: k + 1], view, window=WINDOW, lam=LAMBDA, loss_matrix=matrix)
            assert_view_matches(ev.report()[view], want, rel=1e-9)


def test_fading_survives_many_renormalisations() -> None:
    # λ = 0.5 crosses the 1e-100 renormalisation threshold every ~332 events
    events = random_stream(7, 1500, classes=(0, 1, 2))
    ev = feed(PrequentialEvaluator(window=10, fading_factor=0.5), events)
    want = brute_force(events[-200:], "fading", window=10, lam=0.5)  # 0.5^200 ≈ 6e-61: negligible
    got = ev.report()["fading"]
    for key in ("accuracy", "log_loss", "kappa", "macro_f1"):
        assert got[key] == pytest.approx(want[key], rel=1e-9)
    assert got["n"] == pytest.approx(2.0, rel=1e-12)  # Σ 0.5^k → 1 / (1 - λ)


def test_fading_is_gamas_recursion() -> None:
    """S_i = λ S_{i-1} + loss_i and N_i = λ N_{i-1} + 1 (Gama et al. 2013)."""
    events = random_stream(3, 500)
    ev = PrequentialEvaluator(fading_factor=0.99)
    s_loss = s_hit = n = 0.0
    for y, p, lp in events:
        ev.update(y, p, lp)
        s_loss = 0.99 * s_loss + event_loss(y, lp)
        s_hit = 0.99 * s_hit + (p == y)
        n = 0.99 * n + 1.0
    got = ev.report()["fading"]
    assert got["n"] == pytest.approx(n, rel=1e-12)
    assert got["log_loss"] == pytest.approx(s_loss / n, rel=1e-12)
    assert got["accuracy"] == pytest.approx(s_hit / n, rel=1e-12)


def test_window_float_sums_do_not_drift() -> None:
    events = random_stream(11, 3000, p_unseen=0.3)
    ev = feed(PrequentialEvaluator(window=7), events)
    losses = [event_loss(y, lp) for y, _p, lp in events[-7:]]
    assert ev.report()["window"]["log_loss"] == pytest.approx(math.fsum(losses) / 7, rel=1e-14)


# ---------------------------------------------------------------------- scikit-learn
def sklearn_view(events: Sequence[Event], weights: Sequence[float]) -> dict[str, Any]:
    kept = [(e, w) for e, w in zip(events, weights, strict=True) if w > 0]
    y_true = [e[0] for e, _ in kept]
    y_pred = [NONE if e[1] is None else e[1] for e, _ in kept]
    sw = np.array([w for _, w in kept])
    classes: list[Any] = sorted({*y_true, *y_pred} - {NONE})
    labels = [*classes, NONE]
    proba = np.array([[math.exp(e[2].get(c, -math.inf)) for c in classes] for e, _ in kept])
    cm = confusion_matrix(y_true, y_pred, labels=labels, sample_weight=sw)
    return {
        "n": sw.sum(),
        "accuracy": accuracy_score(y_true, y_pred, sample_weight=sw),
        "log_loss": log_loss(y_true, proba, labels=classes, sample_weight=sw),
        "kappa": cohen_kappa_score(y_true, y_pred, sample_weight=sw),
        "macro_f1": f1_score(
            y_true, y_pred, labels=classes, average="macro", sample_weight=sw, zero_division=0
        ),
        "confusion": {
            (t, None if p == NONE else p): cm[i, j]
            for i, t in enumerate(labels)
            for j, p in enumerate(labels)
            if cm[i, j] > 0
        },
    }


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("view", ["cumulative", "window", "fading"])
def test_agrees_with_sklearn(seed: int, view: str) -> None:
    # full probability rows (sklearn needs them) well above the floor; some no-predictions
    events = random_stream(100 + seed, 300, full_proba=True, classes=("x", "y", "z"))
    events = [(y, None if i % 17 == 0 else p, lp) for i, (y, p, lp) in enumerate(events)]
    ev = feed(PrequentialEvaluator(window=50, fading_factor=0.98), events)
    k = len(events) - 1
    want = sklearn_view(events, view_weights(view, k, window=50, lam=0.98))
    assert_view_matches(ev.report()[view], want, rel=1e-9)


def test_floor_matches_sklearns_former_clipping() -> None:
    # a label with probability 0 costs -log(1e-15), sklearn's eps before 1.3
    ev = PrequentialEvaluator()
    ev.update("a", "b", {"b": 0.0})
    assert ev.report()["cumulative"]["log_loss"] == pytest.approx(-math.log(1e-15))
    assert pytest.approx(34.538776394910684) == MAX_LOSS


# ---------------------------------------------------------------------- river
@pytest.mark.parametrize("seed", range(3))
def test_agrees_with_river(seed: int) -> None:
    events = random_stream(200 + seed, 300, full_proba=True)
    window = 60
    ev = PrequentialEvaluator(window=window)
    cumulative: dict[str, Any] = {
        "accuracy": river_metrics.Accuracy(),
        "kappa": river_metrics.CohenKappa(),
        "macro_f1": river_metrics.MacroF1(),
        "log_loss": river_metrics.CrossEntropy(),
    }
    rolling: dict[str, Any] = {
        "accuracy": river_utils.Rolling(river_metrics.Accuracy, window_size=window),
        "kappa": river_utils.Rolling(river_metrics.CohenKappa, window_size=window),
        "macro_f1": river_utils.Rolling(river_metrics.MacroF1, window_size=window),
        "log_loss": river_utils.Rolling(river_metrics.CrossEntropy, window_size=window),
    }
    cm = river_metrics.ConfusionMatrix()
    for k, (y, p, lp) in enumerate(events):
        ev.update(y, p, lp)
        proba = {c: math.exp(v) for c, v in lp.items()}
        for name, metric in [*cumulative.items(), *rolling.items()]:
            metric.update(y, proba if name == "log_loss" else p)
        cm.update(y, p)
        if k % 50 == 49:
            report = ev.report()
            for name, metric in cumulative.items():
                assert report["cumulative"][name] == pytest.approx(metric.get(), rel=1e-9), name
            for name, metric in rolling.items():
                assert report["window"][name] == pytest.approx(metric.get(), rel=1e-9), name
    cells = {(t, p): w for t, p, w in ev.report()["cumulative"]["confusion"]}
    assert cells == {(t, p): cm[t][p] for t in cm.classes for p in cm.classes if cm[t][p] > 0}


# ---------------------------------------------------------------------- textbook examples
def test_cohens_kappa_textbook_example() -> None:
    # Two raters, 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15 → p0 = .7, pe = .5, κ = .4
    ev = PrequentialEvaluator()
    pairs = [("yes", "yes")] * 20 + [("yes", "no")] * 5 + [("no", "yes")] * 10 + [("no", "no")] * 15
    for truth, pred in pairs:
        ev.update(truth, pred, {})
    r = ev.report()["cumulative"]
    assert r["accuracy"] == 0.7
    assert r["kappa"] == pytest.approx(0.4, abs=1e-15)


def test_kappa_m_and_kappa_t_hand_computed() -> None:
    # truth a a b a, predictions a a a a
    # majority incl. current: a (✓) a (✓) a (✗: a=2 > b=1) a (✓) → pm = 3/4
    # no-change: none (✗) a (✓) a (✗) b (✗) → pt = 1/4
    ev = PrequentialEvaluator()
    for y in "aaba":
        ev.update(y, "a", {})
    r = ev.report()["cumulative"]
    assert r["accuracy"] == 0.75
    assert r["kappa_m"] == 0.0  # no better than the majority class: (3/4 - 3/4) / (1/4)
    assert r["kappa_t"] == pytest.approx((0.75 - 0.25) / 0.75)
    perfect = feed(PrequentialEvaluator(), [(y, y, {}) for y in "aaba"]).report()["cumulative"]
    assert perfect["kappa_m"] == 1.0
    assert perfect["kappa_t"] == 1.0


def test_majority_tie_goes_to_the_class_seen_first() -> None:
    # b then a: after "a" counts tie 1-1 and b (seen first) stays the majority → a is a miss
    ev = PrequentialEvaluator()
    ev.update("b", "b", {})
    ev.update("a", "a", {})
    r = ev.report()["cumulative"]
    # pm = 1/2, p0 = 1 → kappa_m = 1; pt = 0 → kappa_t = 1
    assert r["kappa_m"] == 1.0
    assert r["kappa_t"] == 1.0


def test_macro_f1_hand_computed_with_no_prediction() -> None:
    # truth a a b c, predictions a b b None: F1_a = 2/3, F1_b = 2/3, F1_c = 0 → 4/9
    ev = PrequentialEvaluator()
    for y, p in [("a", "a"), ("a", "b"), ("b", "b"), ("c", None)]:
        ev.update(y, p, {})
    r = ev.report()["cumulative"]
    assert r["macro_f1"] == pytest.approx(4 / 9)
    assert ["c", None, 1] in r["confusion"]


def test_log_loss_hand_computed_and_floor() -> None:
    ev = PrequentialEvaluator()
    ev.update("a", "a", {"a": math.log(0.5), "b": math.log(0.5)})
    ev.update("c", "a", {"a": 0.0})  # never seen: floor
    ev.update("a", "a", {"a": 1e-17})  # rounding above 1: loss 0, never negative
    ev.update("a", "a", {"a": math.nan})  # broken probability: floor
    assert ev.report()["cumulative"]["log_loss"] == pytest.approx((math.log(2) + 2 * MAX_LOSS) / 4)


def test_cost_with_loss_matrix_hand_computed() -> None:
    # λ(pred, true): missing a fraud costs 10, a false alarm 1, missing entries 0-1
    ev = PrequentialEvaluator(loss_matrix={"ok": {"fraud": 10}, "fraud": {"ok": 1}})
    for y, p in [("ok", "ok"), ("fraud", "ok"), ("ok", "fraud"), ("fraud", "fraud"), ("x", "ok")]:
        ev.update(y, p, {})
    assert ev.report()["cumulative"]["cost"] == pytest.approx((0 + 10 + 1 + 0 + 1) / 5)
    assert "cost" not in PrequentialEvaluator().report()["cumulative"]


# ---------------------------------------------------------------------- edge cases
def test_empty_views_report_none() -> None:
    r = PrequentialEvaluator(loss_matrix={}).report()
    for view in ("cumulative", "window", "fading"):
        assert r[view]["n"] == 0
        for key in ("accuracy", "log_loss", "kappa", "kappa_m", "kappa_t", "macro_f1", "cost"):
            assert r[view][key] is None
        assert r[view]["confusion"] == []


def test_single_class_makes_kappa_and_kappa_m_undefined() -> None:
    ev = PrequentialEvaluator(window=3)
    for _ in range(5):
        ev.update("a", "a", {"a": 0.0})
    r = ev.report()
    # pe = 1 and pm = 1: division by zero → None, not NaN
    assert r["cumulative"]["kappa"] is None
    assert r["cumulative"]["kappa_m"] is None
    # the first event has no previous label: pt = 4/5 < 1 cumulatively ...
    assert r["cumulative"]["kappa_t"] == 1.0
    # ... but every event of the window repeats its predecessor: pt = 1 → None
    assert r["window"]["kappa_t"] is None
    assert r["cumulative"]["accuracy"] == 1.0
    assert r["cumulative"]["macro_f1"] == 1.0
    json.dumps(r, allow_nan=False)  # None, never NaN


def test_no_change_baseline_crosses_the_window_edge() -> None:
    ev = PrequentialEvaluator(window=2)
    for y in "aab":
        ev.update(y, y, {})
    # window holds the 2nd and 3rd events; the 2nd repeats the 1st (outside the window)
    r = ev.report()["window"]
    assert r["kappa_t"] == pytest.approx((1 - 0.5) / (1 - 0.5))


def test_faded_weights_that_underflow_to_zero() -> None:
    # λ = 1e-200: a class absent for two events has a faded weight of exactly 0.0
    events: list[Event] = [("a", "a", {}), ("b", "a", {}), ("b", "b", {}), ("b", "b", {})]
    ev = feed(PrequentialEvaluator(fading_factor=1e-200), events)
    r = ev.report()["fading"]
    assert r["macro_f1"] == 1.0  # only "b" is left; "a" (weight 0) is no class of the view
    assert r["accuracy"] == pytest.approx(1.0)


def test_no_prediction_is_never_correct() -> None:
    ev = PrequentialEvaluator()
    ev.update("a", None, {})
    r = ev.report()["cumulative"]
    assert r["accuracy"] == 0.0
    assert r["log_loss"] == pytest.approx(MAX_LOSS)
    assert r["macro_f1"] == 0.0
    assert r["confusion"] == [["a", None, 1]]


def test_window_drops_classes_that_left() -> None:
    ev = PrequentialEvaluator(window=2)
    for y, p in [("a", "z"), ("b", "b"), ("b", "b")]:
        ev.update(y, p, {})
    r = ev.report()["window"]
    assert r["macro_f1"] == 1.0  # a and z left the window: only b remains
    assert r["confusion"] == [["b", "b", 2]]


# ---------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"window": 0}, r"window must be an integer ≥ 1 .*got 0"),
        ({"window": True}, r"window must be an integer"),
        ({"window": 2.5}, r"window must be an integer"),
        ({"fading_factor": 0.0}, r"fading_factor must be in \(0, 1\], got 0.0"),
        ({"fading_factor": 1.5}, r"fading_factor must be in \(0, 1\]"),
        ({"fading_factor": math.nan}, r"fading_factor must be in \(0, 1\]"),
        ({"loss_matrix": [1, 2]}, r"loss_matrix must be a mapping .*got list"),
        ({"loss_matrix": {"a": 3}}, r"loss_matrix\['a'\] must be a mapping"),
        ({"loss_matrix": {"a": {"b": math.inf}}}, r"loss_matrix\['a'\]\['b'\] must be a finite"),
        ({"loss_matrix": {"a": {"b": "1"}}}, r"must be a finite number, got '1'"),
    ],
)
def test_invalid_parameters(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        PrequentialEvaluator(**kwargs)


# ---------------------------------------------------------------------- state
@pytest.mark.parametrize("dumps", [json.dumps, orjson.dumps], ids=["json", "orjson"])
def test_state_round_trip_continues_identically(dumps: Any) -> None:
    # labels of several scalar types, including ones equal as strings
    events = random_stream(5, 400, classes=(0, "0", 2.5, "x", True))
    matrix: dict[Any, dict[Any, float]] = {0: {"0": 3.0}, "x": {2.5: 0.5}}
    a = PrequentialEvaluator(window=33, fading_factor=0.9, loss_matrix=matrix)
    feed(a, events[:250])
    state = json.loads(dumps(a.to_state()))
    b = PrequentialEvaluator.from_state(state)
    assert b.report() == a.report()
    assert b.loss_matrix == a.loss_matrix
    feed(a, events[250:])
    feed(b, events[250:])
    assert b.report() == a.report()
    assert b.to_state() == a.to_state()
    assert {type(t) for t, _p, _w in b.report()["cumulative"]["confusion"]} >= {int, str, float}


def test_state_of_empty_evaluator() -> None:
    ev = PrequentialEvaluator.from_state(json.loads(json.dumps(PrequentialEvaluator().to_state())))
    assert ev.n == 0
    feed(ev, random_stream(1, 10))
    assert ev.n == 10


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda s: s.update(format="x"), r"not a stream-nb evaluator state"),
        (lambda s: s.update(version=99), r"unsupported evaluator state version 99"),
        (lambda s: s.pop("cumulative"), r"malformed evaluator state: missing field 'cumulative'"),
        (lambda s: s.update(window_size=0), r"malformed evaluator state: window must be"),
        (lambda s: s.update(fading_scale=-1.0), r"fading_scale: must be in \(0, 1\], got -1.0"),
        (lambda s: s.update(fading_scale=2.0), r"fading_scale: must be in \(0, 1\], got 2.0"),
        (lambda s: s["cumulative"].update(n="3"), r"cumulative.n: must be a number"),
        (lambda s: s["cumulative"].update(n=-3), r"cumulative.n: must be finite and ≥ 0, got -3"),
        (lambda s: s["cumulative"].update(n=1e308), r"cumulative.n: .* is not the sum of"),
        (lambda s: s["cumulative"].update(correct=10**6), r"cumulative.correct: .* diagonal"),
        (lambda s: s.update(window_evictions=float("inf")), r"window_evictions: must be a finite"),
        (lambda s: s.update(window_evictions=-7), r"window_evictions: must be a finite integer"),
        (lambda s: s.update(classes=s["classes"] * 2), r"classes\[\d+\]: class .* listed twice"),
        (
            lambda s: s["cumulative"].update(true=s["cumulative"]["true"] * 2),
            r"cumulative.true\[\d+\]: label .* listed twice",
        ),
        (
            lambda s: s["cumulative"]["true"][0].__setitem__(1, -1.0),
            r"cumulative.true\[0\]\[1\]: must be finite and ≥ 0, got -1.0",
        ),
        (lambda s: s.update(window_size=1), r"window entries for a window of 1"),
        (lambda s: s["window_entries"].pop(), r"window entries disagree with the window counts"),
        (lambda s: s.update(classes=[]), r"missing from the class order"),
        (
            lambda s: s["cumulative"].update(true=[[[1], 2]]),
            r"cumulative.true\[0\]\[0\]: a label must be",
        ),
    ],
)
def test_malformed_state(mutate: Any, match: str) -> None:
    ev = feed(PrequentialEvaluator(window=5), random_stream(2, 20))
    state = json.loads(json.dumps(ev.to_state()))
    mutate(state)
    with pytest.raises(ModelStateError, match=match):
        PrequentialEvaluator.from_state(state)


def test_not_a_mapping_state() -> None:
    with pytest.raises(ModelStateError, match="not a stream-nb evaluator state"):
        PrequentialEvaluator.from_state([])  # type: ignore[arg-type]


# ---------------------------------------------------------------------- Bayes risk
def test_bayes_risk_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    classes = ["a", "b", "c", "d"]
    for _ in range(200):
        p = rng.dirichlet(np.ones(4))
        costs = rng.uniform(0, 5, size=(4, 4))
        matrix = {
            i: {j: float(costs[a, b]) for b, j in enumerate(classes)} for a, i in enumerate(classes)
        }
        lp = {c: math.log(v) for c, v in zip(classes, p, strict=True)}
        assert bayes_risk_decision(lp, matrix) == classes[int(np.argmin(costs @ p))]


def test_bayes_risk_zero_one_is_argmax_and_extra_actions() -> None:
    lp = {"a": math.log(0.3), "b": math.log(0.7)}
    assert bayes_risk_decision(lp, {}) == "b"
    assert bayes_risk_decision(lp, {"a": {"a": 0, "b": 1}, "b": {"a": 1, "b": 0}}) == "b"
    # abstaining at cost 0.25 beats any guess (risk 0.3 for "b")
    assert bayes_risk_decision(lp, {"abstain": {"a": 0.25, "b": 0.25}}) == "abstain"
    assert bayes_risk_decision({}, {"a": {}}) is None
    # ties go to the first class
    assert bayes_risk_decision({"x": math.log(0.5), "y": math.log(0.5)}, {}) == "x"


# ---------------------------------------------------------------------- properties
labels = st.sampled_from(["a", "b", "c", 1, 2])
events_strategy = st.lists(
    st.tuples(
        labels,
        st.one_of(st.none(), labels),
        st.dictionaries(labels, st.floats(-50, 0), max_size=5),
    ),
    max_size=60,
)


@given(events_strategy, st.integers(1, 10), st.floats(0.5, 1.0))
def test_properties_bounds_and_special_cases(events: list[Event], window: int, lam: float) -> None:
    ev = feed(PrequentialEvaluator(window=window, fading_factor=lam), events)
    r = ev.report()
    assert ev.n == len(events) == r["cumulative"]["n"]
    assert r["window"]["n"] == min(len(events), window)
    for view in r.values():
        if view["n"] == 0:
            continue
        assert 0 <= view["accuracy"] <= 1
        assert 0 <= view["log_loss"] <= MAX_LOSS + 1e-9
        assert 0 <= view["macro_f1"] <= 1
        for key in ("kappa", "kappa_m", "kappa_t"):
            assert view[key] is None or view[key] <= 1 + 1e-12
        assert sum(w for _t, _p, w in view["confusion"]) == pytest.approx(view["n"])
    # a window as long as the stream is the cumulative view; λ = 1 fades nothing
    whole = feed(PrequentialEvaluator(window=max(1, len(events)), fading_factor=1.0), events)
    rw = whole.report()
    assert rw["window"] == rw["cumulative"]
    for key, value in rw["cumulative"].items():
        assert rw["fading"][key] == (pytest.approx(value) if isinstance(value, float) else value)


@given(events_strategy, st.randoms(use_true_random=False))
def test_property_cumulative_scores_ignore_order(events: list[Event], rnd: random.Random) -> None:
    a = feed(PrequentialEvaluator(), events).report()["cumulative"]
    shuffled = events[:]
    rnd.shuffle(shuffled)
    b = feed(PrequentialEvaluator(), shuffled).report()["cumulative"]
    for key in ("n", "accuracy", "log_loss", "kappa", "macro_f1"):
        assert b[key] == (pytest.approx(a[key]) if isinstance(a[key], float) else a[key])
    assert sorted(map(repr, a["confusion"])) == sorted(map(repr, b["confusion"]))


@given(events_strategy, st.integers(0, 60))
def test_property_state_round_trip_at_any_point(events: list[Event], cut: int) -> None:
    cut = min(cut, len(events))
    a = feed(PrequentialEvaluator(window=4, fading_factor=0.8), events[:cut])
    b = PrequentialEvaluator.from_state(json.loads(json.dumps(a.to_state())))
    feed(a, events[cut:])
    feed(b, events[cut:])
    assert a.report() == b.report()


@given(events_strategy, st.integers(1, 8), st.sampled_from([0.5, 0.9, 1.0]))
def test_property_every_view_matches_brute_force(
    events: list[Event], window: int, lam: float
) -> None:
    matrix = {"a": {"b": 2.0}, 1: {"c": 0.5}}
    ev = feed(PrequentialEvaluator(window=window, fading_factor=lam, loss_matrix=matrix), events)
    report = ev.report()
    for view in ("cumulative", "window", "fading"):
        if not events:
            assert report[view]["n"] == 0
            continue
        want = brute_force(events, view, window=window, lam=lam, loss_matrix=matrix)
        assert_view_matches(report[view], want, rel=1e-9)


def test_unhashable_labels_leave_the_evaluator_unchanged() -> None:
    ev = feed(PrequentialEvaluator(window=3), random_stream(4, 10))
    before = ev.to_state()
    with pytest.raises(TypeError):
        ev.update("a", ["a"], {})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ev.update(["a"], "a", {})  # type: ignore[arg-type]
    assert ev.to_state() == before


def test_window_entries_are_bounded() -> None:
    ev = feed(PrequentialEvaluator(window=3), random_stream(4, 50))
    assert len(ev.to_state()["window_entries"]) == 3
    # the evaluator's per-event path, on a scoreboard of its own: the ring never grows
    board = Scoreboard(window_size=3)
    for y, p, lp in random_stream(4, 50):
        board.add(y, p, event_loss(y, lp))
    assert len(board.ring) == 3
    assert len(board.ring.arrays[0]) <= 64


# ---------------------------------------------------------------------- update_many
# (update_arrays and more batch cases: tests/stream_nb/evaluation/test_prequential_batch.py)
def _state_repr(ev: PrequentialEvaluator) -> bytes:
    # repr keeps the float bits and the int/float distinction that == would blur
    return repr((ev.to_state(), ev.report())).encode()


@pytest.mark.parametrize(
    ("window", "lam", "matrix"),
    [(7, 0.5, None), (1, 1.0, {"a": {"b": 2.0}, 1: {"c": 0.5}}), (50, 0.9, None)],
)
def test_update_many_is_update_event_by_event_bit_for_bit(
    window: int, lam: float, matrix: Any
) -> None:
    # λ = 0.5 renormalises every ~332 events; window 7 re-sums every 7 evictions
    events = random_stream(11, 1500, classes=("a", "b", "c", 1))
    one = PrequentialEvaluator(window=window, fading_factor=lam, loss_matrix=matrix)
    many = PrequentialEvaluator(window=window, fading_factor=lam, loss_matrix=matrix)
    rng = random.Random(3)
    i = 0
    while i < len(events):
        chunk = events[i : i + rng.randint(0, 97)]
        for t, p, lp in chunk:
            one.update(t, p, lp)
        many.update_many([e[0] for e in chunk], [e[1] for e in chunk], [e[2] for e in chunk])
        assert _state_repr(many) == _state_repr(one)
        i += len(chunk)


@given(events_strategy, st.integers(1, 8), st.sampled_from([0.5, 0.9, 1.0]))
def test_property_update_many_equals_update(events: list[Event], window: int, lam: float) -> None:
    one = feed(PrequentialEvaluator(window=window, fading_factor=lam), events)
    many = PrequentialEvaluator(window=window, fading_factor=lam)
    many.update_many([e[0] for e in events], [e[1] for e in events], [e[2] for e in events])
    assert _state_repr(many) == _state_repr(one)


def test_update_many_checks_before_changing_anything() -> None:
    ev = PrequentialEvaluator()
    with pytest.raises(TypeError, match="unhashable"):
        ev.update_many(["a", "b"], ["a", ["b"]], [{}, {}])
    with pytest.raises(ValueError, match="as many predictions"):
        ev.update_many(["a", "b"], ["a"], [{}, {}])
    assert ev.n == 0
