"""Weighted AODE (``weighting="mutual_information"``) against an independent brute force.

The reference recomputes, from the raw event list, every SPODE score, the weight
``I(X_i; Y)`` of the smoothed joint ``P̂(y, x_i)`` and the weighted mixture, on
every prequential step; the learner's normalised log-probabilities agree to
1e-12. The batch paths decline (the per-event path is taken), and state, merge
and round trips keep the option.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Hashable
from typing import Any

import pytest

from stream_nb import AODE, ConfigError, IncompatibleModelError, Learner
from stream_nb.datasets import mixed_stream
from stream_nb.seminaive._weights import dense_mutual_information, smoothed_mutual_information

Event = tuple[dict[str, Any], Hashable, float]
TOLERANCE = 1e-12


def make_stream(seed: int, n: int) -> list[Event]:
    """Categorical features of varied relevance, missing values, weights, a late class."""
    rng = random.Random(seed)
    events: list[Event] = []
    for t in range(n):
        y: Hashable = rng.choice(["a", "b", "c"] if t < n // 2 else ["a", "b", "c", 7])
        base = rng.randrange(3)
        x: dict[str, Any] = {
            "f0": f"v{(base + (y == 'a')) % 3}",
            "f1": f"u{rng.randrange(4)}",  # noise
            "f2": "p" if y == "b" and rng.random() < 0.8 else rng.choice("pq"),
            "f3": f"w{rng.randrange(2 + (y == 'c'))}",
        }
        if t > n // 3:
            x["late"] = f"l{rng.randrange(2)}"
        for k in list(x):
            if rng.random() < 0.15:
                del x[k]
            elif rng.random() < 0.05:
                x[k] = None
        events.append((x, y, rng.choice([1.0, 1.0, 0.5, 2.5])))
    return events


def brute_force(
    events: list[Event], x: dict[str, Any], alpha: float, m: float, gamma: float | None
) -> dict[Hashable, float]:
    """``log P(y | x)`` of weighted AODE from the raw events (see docs/seminaive.md)."""
    weights, later = [], 0.0
    for _e, _y, w in reversed(events):
        weights.append(w if gamma is None else w * gamma**later)
        later += w
    ev = [
        ({k: v for k, v in e.items() if v is not None}, y, w)
        for (e, y, _), w in zip(events, weights[::-1], strict=True)
    ]
    if not ev:
        return {}
    classes = list(dict.fromkeys(y for _e, y, _w in ev))
    values: dict[str, list[Any]] = {}
    for e, _y, _w in ev:
        for f, v in e.items():
            values.setdefault(f, [])
            if v not in values[f]:
                values[f].append(v)
    xp = {f: v for f, v in x.items() if v is not None and f in values}
    k = len(classes)

    def total(pred: Any) -> float:
        return sum(w for e, y, w in ev if pred(e, y))

    def joint(i: str, vi: Any, y: Hashable) -> float:
        n_i = total(lambda e, _y: i in e)
        n = total(lambda e, yy: yy == y and e.get(i) == vi)
        return (n + alpha) / (n_i + alpha * k * len(values[i]))

    def cond(j: str, vj: Any, y: Hashable, given: dict[str, Any]) -> float:
        """``(N(y, given, x_j) + α) / (N(y, given, j) + α S_j)``."""

        def match(e: dict[str, Any], yy: Hashable) -> bool:
            return yy == y and all(e.get(f) == v for f, v in given.items())

        num = total(lambda e, yy: match(e, yy) and e.get(j) == vj)
        den = total(lambda e, yy: match(e, yy) and j in e)
        return (num + alpha) / (den + alpha * len(values[j]))

    def spode(i: str, y: Hashable) -> float:
        s = math.log(joint(i, xp[i], y))
        for j, vj in xp.items():
            if j != i:
                s += math.log(cond(j, vj, y, {i: xp[i]}))
        return s

    def naive(y: Hashable) -> float:
        n_y = total(lambda _e, yy: yy == y)
        s = math.log((n_y + alpha) / (total(lambda _e, _y: True) + k * alpha))
        return s + sum(math.log(cond(j, vj, y, {})) for j, vj in xp.items())

    def mutual_information(i: str) -> float:
        p = {(v, y): joint(i, v, y) for v in values[i] for y in classes}
        pv = {v: sum(p[(v, y)] for y in classes) for v in values[i]}
        py = {y: sum(p[(v, y)] for v in values[i]) for y in classes}
        mi = sum(q * math.log(q / (pv[v] * py[y])) for (v, y), q in p.items() if q > 0)
        return max(0.0, mi)

    parents = [i for i in xp if total(lambda e, _y, i=i: e.get(i) == xp[i]) >= m * (1 - 1e-12)]
    if not parents:
        jll = {y: naive(y) for y in classes}
    else:
        w = [mutual_information(i) for i in parents]
        if not any(w):
            w = [1.0] * len(parents)
        jll = {
            y: math.log(sum(wi * math.exp(spode(i, y)) for wi, i in zip(w, parents, strict=True)))
            for y in classes
        }
    top = max(jll.values())
    lse = top + math.log(sum(math.exp(v - top) for v in jll.values()))
    return {y: v - lse for y, v in jll.items()}


def assert_close(got: dict[Hashable, float], want: dict[Hashable, float], where: str) -> None:
    assert got.keys() == want.keys(), where
    for c in want:
        assert abs(got[c] - want[c]) <= TOLERANCE * max(1.0, abs(want[c])), (where, c, got, want)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize(
    ("alpha", "m", "half_life"),
    [(1.0, 1.0, None), (0.3, 3.0, None), (1.0, 2.0, 15.0)],
)
def test_weighted_aode_matches_brute_force_every_step(
    alpha: float, m: float, half_life: float | None, sparse: bool
) -> None:
    events = make_stream(seed=11, n=80)
    model = AODE(
        alpha=alpha, min_parent_count=m, half_life=half_life, weighting="mutual_information"
    )
    if sparse:
        model._store.keep_sparse()
    gamma = None if half_life is None else 0.5 ** (1.0 / half_life)
    rng = random.Random(0)
    seen: list[Event] = []
    for t, (x, y, w) in enumerate(events):
        unseen = {**x, rng.choice(["f0", "f1", "f2"]): "never-seen"}
        for probe in (x, unseen, {}):
            want = brute_force(seen, probe, alpha, m, gamma)
            assert_close(model.predict_log_proba_one(probe), want, f"step {t} x={probe}")
        model.learn_one(x, y, w)
        seen.append((x, y, w))


def test_weights_change_predictions_and_zero_weights_fall_back_to_uniform() -> None:
    events = make_stream(seed=4, n=200)
    weighted, uniform = AODE(weighting="mutual_information"), AODE()
    probe = {"f0": "v1", "f1": "u2", "f2": "q", "f3": "w0"}
    for x, _y, w in events[:5]:  # one class: every I(X_i; Y) is 0, uniform weights
        weighted.learn_one(x, "only", w)
        uniform.learn_one(x, "only", w)
    assert weighted.predict_log_proba_one(probe) == uniform.predict_log_proba_one(probe)
    for x, y, w in events:
        weighted.learn_one(x, y, w)
        uniform.learn_one(x, y, w)
    got, plain = weighted.predict_log_proba_one(probe), uniform.predict_log_proba_one(probe)
    assert max(abs(got[c] - plain[c]) for c in got) > 1e-3


def test_uniform_is_the_default_and_the_same_model() -> None:
    default, explicit = AODE(), AODE(weighting="uniform")
    assert default.weighting == "uniform"
    for x, y, w in make_stream(seed=6, n=60):
        default.learn_one(x, y, w)
        explicit.learn_one(x, y, w)
    probe = {"f0": "v0", "f2": "p"}
    assert default.predict_log_proba_one(probe) == explicit.predict_log_proba_one(probe)
    assert json.dumps(default.to_state()) == json.dumps(explicit.to_state())


def _columns(batch: list[Event]) -> tuple[tuple[str, ...], list[list[Any]]]:
    names = ("f0", "f1", "f2", "f3")
    return names, [[x.get(name) for x, _y, _w in batch] for name in names]


def test_batch_paths_take_the_per_event_path() -> None:
    events = [(x, y, w) for x, y, w in make_stream(seed=2, n=400) if "late" not in x]
    model, ref = AODE(weighting="mutual_information"), AODE(weighting="mutual_information")
    for x, y, w in events[:100]:
        model.learn_one(x, y, w)
        ref.learn_one(x, y, w)
    batch = events[100:200]
    before = json.dumps(model.to_state())
    ys = [y for _x, y, _w in batch]
    ws = [w for _x, _y, w in batch]
    assert model.predict_learn_columns(*_columns(batch), ys, ws) is None  # declined
    assert json.dumps(model.to_state()) == before
    lps, preds, errors = model.predict_learn_many([x for x, _y, _w in batch], ys, ws)
    assert errors == {}
    for (x, y, w), lp, pred in zip(batch, lps, preds, strict=True):
        expected = ref.predict_log_proba_one(x)
        assert lp == expected
        assert pred == max(expected, key=expected.__getitem__)
        ref.learn_one(x, y, w)
    assert json.dumps(model.to_state()) == json.dumps(ref.to_state())


def test_state_round_trip_and_merge_keep_the_option() -> None:
    events = list(mixed_stream(seed=3, n=300, missing=0.1))
    model = AODE(weighting="mutual_information")
    for x, y in events[:200]:
        model.learn_one(x, y)
    copy = Learner.from_state(json.loads(json.dumps(model.to_state())))
    assert isinstance(copy, AODE) and copy.weighting == "mutual_information"
    for x, _y in events[200:230]:
        assert copy.predict_log_proba_one(x) == model.predict_log_proba_one(x)
    one_pass, left, right = (AODE(weighting="mutual_information") for _ in range(3))
    stream = make_stream(seed=9, n=160)
    for t, (x, y, w) in enumerate(stream):
        one_pass.learn_one(x, y, w)
        (left if t < 70 else right).learn_one(x, y, w)
    merged = left.merge(right)
    assert isinstance(merged, AODE) and merged.weighting == "mutual_information"
    for x, _y, _w in stream[:40]:
        assert_close(merged.predict_log_proba_one(x), one_pass.predict_log_proba_one(x), "merge")
    with pytest.raises(IncompatibleModelError, match="weighting"):
        left.merge(AODE())


def test_weighting_is_checked() -> None:
    with pytest.raises(ConfigError, match="weighting must be 'uniform' or 'mutual_information'"):
        AODE(weighting="mi")


@pytest.mark.parametrize("alpha", [1.0, 0.3, 0.0])
def test_dense_weights_equal_the_counts_weights(alpha: float) -> None:
    model = AODE(alpha=alpha)
    for x, y, w in make_stream(seed=12, n=150):
        model.learn_one(x, y, w)
    store = model._store
    block = store.dense
    assert block is not None
    dense = dense_mutual_information(block, alpha)
    categorical = store.categorical
    classes = list(categorical.class_weight)
    for f, c in block.feat.items():
        want = smoothed_mutual_information(
            categorical.counts[f], classes, store.feature_weight[f], alpha
        )
        assert abs(dense[c] - want) <= 1e-12 * max(1.0, want), f
    assert dense.max() > 0.01
