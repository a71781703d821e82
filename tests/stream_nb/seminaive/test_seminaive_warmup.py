"""The Gaussian term of numeric features during their warm-up (``warmup_terms="gaussian"``).

While a numeric feature warms up, every class score gets
``log N(x; μ_y, σ²_y)`` from the events seen so far (docs/seminaive.md); once
its cut points freeze the model is exactly the one without the term. Checked
against a brute force from the raw events (the categorical part from
``_reference.py``, the Gaussian part recomputed here), for every learner, with
``half_life`` and ``alpha = 0``; through state round trips and merges in the
middle of the warm-up; and the batch paths against one event at a time.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Hashable
from typing import Any

import pytest
from _reference import Event, Reference

from stream_nb import AODE, KDB, SPODE, TAN, ConfigError, Learner

TOLERANCE = 1e-12
WARMUP = 40


def make_stream(seed: int, n: int) -> list[Event]:
    """Two categorical features and a numeric one (``t``, class-dependent) with missing
    values (``None``, NaN) and weights."""
    rng = random.Random(seed)
    events: list[Event] = []
    for _ in range(n):
        y = rng.choice(["a", "b", "c"])
        x: dict[str, Any] = {
            "c0": f"v{rng.randrange(2) + (y == 'a')}",
            "c1": rng.choice("pq") if y != "b" else "p",
            "t": rng.gauss({"a": 0.0, "b": 2.0, "c": 5.0}[y], 1.0 + (y == "c")),
        }
        r = rng.random()
        if r < 0.1:
            x["t"] = None
        elif r < 0.15:
            x["t"] = math.nan
        events.append((x, y, rng.choice([1.0, 1.0, 0.5, 2.0])))
    return events


def gaussian(events: list[Event], x: float, half_life: float | None) -> dict[Hashable, float]:
    """``log N(x; μ_y, σ²_y)`` of feature ``t`` from the raw events (docs/seminaive.md)."""
    gamma = None if half_life is None else 0.5 ** (1.0 / half_life)
    data, later = [], 0.0
    for e, y, w in reversed(events):
        t = e.get("t")
        if t is not None and t == t:
            data.append((t, y, w if gamma is None else w * gamma**later))
        later += w
    classes = list(dict.fromkeys(y for _e, y, _w in events))

    def moments(rows: list[tuple[float, Hashable, float]]) -> tuple[float, float, float]:
        n = sum(w for _t, _y, w in rows)
        if n == 0:
            return 0.0, 0.0, 0.0
        mean = sum(w * t for t, _y, w in rows) / n
        return n, mean, sum(w * (t - mean) ** 2 for t, _y, w in rows) / n

    n, mean, var = moments(data)
    if n == 0 or var == 0:
        return dict.fromkeys(classes, 0.0)
    out = {}
    for y in classes:
        n_y, m_y, v_y = moments([r for r in data if r[1] == y])
        mu, s2 = (n_y * m_y + mean) / (n_y + 1), (n_y * v_y + var) / (n_y + 1)
        out[y] = -0.5 * math.log(2 * math.pi * s2) - (x - mu) ** 2 / (2 * s2)
    return out


def with_terms(lp: dict[Hashable, float], terms: dict[Hashable, float]) -> dict[Hashable, float]:
    jll = {y: v + terms[y] for y, v in lp.items()}
    top = max(jll.values())
    lse = top + math.log(sum(math.exp(v - top) for v in jll.values()))
    return {y: v - lse for y, v in jll.items()}


def assert_close(got: dict[Hashable, float], want: dict[Hashable, float], where: str) -> None:
    assert got.keys() == want.keys(), (where, got, want)
    for c in want:
        assert abs(got[c] - want[c]) <= TOLERANCE * max(1.0, abs(want[c])), (where, c, got, want)


def categorical(x: dict[str, Any]) -> dict[str, Any]:
    return {f: v for f, v in x.items() if f != "t"}


@pytest.mark.parametrize(("alpha", "half_life"), [(1.0, None), (0.5, 10.0), (0.0, None)])
@pytest.mark.parametrize("weighted", [False, True])
def test_aode_warm_up_term_matches_brute_force(
    alpha: float, half_life: float | None, weighted: bool
) -> None:
    options = {"alpha": alpha, "half_life": half_life, "warmup": WARMUP}
    weighting = "mutual_information" if weighted else "uniform"
    model = AODE(weighting=weighting, **options)  # type: ignore[arg-type]
    blind = AODE(weighting=weighting, warmup_terms="none", **options)  # type: ignore[arg-type]
    seen: list[Event] = []
    changed = 0
    for t, (x, y, w) in enumerate(make_stream(seed=1, n=90)):
        frozen = "t" in model._disc.edges
        for probe in (x, {**x, "t": 3.5}, categorical(x)):
            got = model.predict_log_proba_one(probe)
            if frozen or probe.get("t") is None or probe["t"] != probe["t"]:
                assert got == blind.predict_log_proba_one(probe), (t, probe)  # exactly as today
                continue
            ref = Reference([(categorical(e), c, v) for e, c, v in seen], alpha, half_life)
            plain = ref.aode(categorical(probe), 1.0, weighted)
            if not plain:
                assert got == {}
                continue
            want = with_terms(plain, gaussian(seen, probe["t"], half_life))
            assert_close(got, want, f"step {t} x={probe}")
            changed += got != blind.predict_log_proba_one(probe)
        model.learn_one(x, y, w)
        blind.learn_one(x, y, w)
        seen.append((x, y, w))
    assert "t" in model._disc.edges  # the stream passed the freeze
    assert changed > 20  # the warm-up term changed predictions


FACTORIES: dict[str, Callable[..., Learner]] = {
    "SPODE": lambda **kw: SPODE("c0", **kw),
    "TAN": lambda **kw: TAN(rebuild_every=16, **kw),
    "KDB": lambda **kw: KDB(2, rebuild_every=16, **kw),
}


@pytest.mark.parametrize("alpha", [1.0, 0.0])
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_every_learner_adds_the_term_and_only_during_warm_up(name: str, alpha: float) -> None:
    model = FACTORIES[name](alpha=alpha, warmup=WARMUP)
    blind = FACTORIES[name](alpha=alpha, warmup=WARMUP, warmup_terms="none")
    seen: list[Event] = []
    for t, (x, y, w) in enumerate(make_stream(seed=2, n=80)):
        probe = {**x, "t": 1.0}
        got, plain = model.predict_log_proba_one(probe), blind.predict_log_proba_one(probe)
        if "t" in model._disc.edges:
            assert got == plain, t
        elif plain:
            assert_close(got, with_terms(plain, gaussian(seen, 1.0, None)), f"step {t}")
        model.learn_one(x, y, w)
        blind.learn_one(x, y, w)
        seen.append((x, y, w))


def state(model: Learner) -> str:
    return json.dumps(model.to_state())


def test_state_round_trip_mid_warm_up() -> None:
    events = make_stream(seed=3, n=80)
    model = AODE(warmup=WARMUP)
    for x, y, w in events[:25]:
        model.learn_one(x, y, w)
    assert "t" not in model._disc.edges
    copy = Learner.from_state(json.loads(state(model)))
    for x, y, w in events[25:]:
        probe = {**x, "t": 2.5}
        assert copy.predict_log_proba_one(probe) == model.predict_log_proba_one(probe)
        model.learn_one(x, y, w)
        copy.learn_one(x, y, w)
    assert state(copy) == state(model)


def test_merge_mid_warm_up_equals_one_pass() -> None:
    events = make_stream(seed=4, n=30)
    one_pass, left, right = (AODE(warmup=WARMUP) for _ in range(3))
    for t, (x, y, w) in enumerate(events):
        one_pass.learn_one(x, y, w)
        (left if t < 12 else right).learn_one(x, y, w)
    merged = left.merge(right)
    assert "t" not in merged._disc.edges  # still warming up after the merge
    for x, _y, _w in events:
        for probe in ({**x, "t": 0.5}, {**x, "t": 4.0}):
            assert_close(
                merged.predict_log_proba_one(probe), one_pass.predict_log_proba_one(probe), "merge"
            )


def test_batch_paths_during_and_after_warm_up() -> None:
    events = [(x, y, 1.0) for x, y, _w in make_stream(seed=5, n=200)]
    model, ref = AODE(warmup=WARMUP), AODE(warmup=WARMUP)
    names = ("c0", "c1", "t")
    taken = 0
    for start in range(0, len(events), 20):
        batch = events[start : start + 20]
        before = state(model)
        ys = [y for _x, y, _w in batch]
        out = model.predict_learn_columns(names, [[x[f] for x, _y, _w in batch] for f in names], ys)
        if out is None:
            assert state(model) == before
            lps, _preds, errors = model.predict_learn_many(
                [x for x, _y, _w in batch], ys, [1.0] * 20
            )
            assert errors == {}
            for (x, y, _w), lp in zip(batch, lps, strict=True):
                assert lp is not None
                assert_close(lp, ref.predict_log_proba_one(x), "many")
                ref.learn_one(x, y)
        else:
            taken += 1
            labels, log_proba, _best = out
            assert "t" in model._disc.edges  # declined while t warms up
            for i, (x, y, _w) in enumerate(batch):
                want = ref.predict_log_proba_one(x)
                for j, c in enumerate(labels):
                    assert abs(log_proba[i, j] - want[c]) <= TOLERANCE * max(1.0, abs(want[c]))
                ref.learn_one(x, y)
        assert state(model) == state(ref)
    assert taken > 0


def test_warmup_terms_is_checked() -> None:
    with pytest.raises(ConfigError, match="warmup_terms must be 'gaussian' or 'none'"):
        AODE(warmup_terms="normal")
