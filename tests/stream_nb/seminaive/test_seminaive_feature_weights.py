"""``feature_weights`` of SPODE, AODE, TAN and KDB.

Every prequential step of random streams is compared with the brute-force
reference of ``_reference.py`` (each term of feature ``j`` times ``w_j``, the
SPODE joint term split as ``P̂_p(y) P̂(x_p | y)``, weight-0 features no one's
parent), with ``alpha`` 0 and 0.5, weights 0, between 0 and 1 and above 1, to
``1e-12``. Weight 0 is a selection: predictions do not depend on the feature,
and SPODE/AODE predict exactly as a model that never saw it. Weights of 1
everywhere give today's output byte for byte; weights are saved, loaded and
checked by merge; the batch paths take the per-event path.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import orjson
import pytest
from _reference import Event, Reference, make_stream, probes

from stream_nb import AODE, KDB, SPODE, TAN, IncompatibleModelError, Learner
from stream_nb._exceptions import ConfigError
from stream_nb.datasets import mixed_stream
from stream_nb.seminaive._information import ranked as ranking

TOLERANCE = 1e-12

#: 0, a fraction, above 1; "late" and "ghost" left out (weight 1)
WEIGHTS = {"f0": 2.5, "f1": 0.0, "f2": 0.4, "f3": 1.7}


@contextmanager
def strict() -> Iterator[None]:
    """Floating-point errors raise, warnings are errors."""
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def assert_close(got: dict[Hashable, float], want: dict[Hashable, float], where: str) -> None:
    assert got.keys() == want.keys(), (where, got, want)
    for c in want:
        assert math.isfinite(got[c]), (where, got)
        assert abs(got[c] - want[c]) <= TOLERANCE * max(1.0, abs(want[c])), (where, c, got, want)


SUPER_PARENT: dict[str, tuple[Callable[..., Learner], bool, str | None]] = {
    "AODE": (AODE, False, None),
    "AODE-weighted": (lambda **kw: AODE(weighting="mutual_information", **kw), True, None),
    "SPODE-f0": (lambda **kw: SPODE("f0", **kw), False, "f0"),
    "SPODE-f1-weight0": (lambda **kw: SPODE("f1", **kw), False, "f1"),
}


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize(
    ("alpha", "half_life"), [(0.5, None), (0.0, None), (0.5, 15.0), (0.0, 15.0)]
)
@pytest.mark.parametrize("name", sorted(SUPER_PARENT))
def test_super_parent_weights_match_brute_force(
    name: str, alpha: float, half_life: float | None, sparse: bool
) -> None:
    factory, weighted, only = SUPER_PARENT[name]
    model = factory(alpha=alpha, half_life=half_life, feature_weights=WEIGHTS)
    if sparse:
        model._store.keep_sparse()  # type: ignore[attr-defined]
    rng = random.Random(1)
    seen: list[Event] = []
    with strict():
        for t, (x, y, w) in enumerate(make_stream(seed=7, n=70)):
            ref = Reference(seen, alpha, half_life, WEIGHTS)
            for probe in probes(x, rng):
                want = ref.aode(probe, 1.0, weighted, only)
                assert_close(model.predict_log_proba_one(probe), want, f"step {t} x={probe}")
            model.learn_one(x, y, w)
            seen.append((x, y, w))


@pytest.mark.parametrize("alpha", [0.5, 0.0])
def test_naive_terms_past_max_pair_features_are_weighted(alpha: float) -> None:
    weights = {"f0": 0.3, "f2": 0.0, "f3": 2.0, "late": 3.0}
    model = AODE(alpha=alpha, max_pair_features=2, feature_weights=weights)
    rng = random.Random(4)
    seen: list[Event] = []
    with strict():
        for t, (x, y, w) in enumerate(make_stream(seed=11, n=60)):
            ref = Reference(seen, alpha, None, weights, pair_limit=2)
            for probe in probes(x, rng):
                want = ref.aode(probe, 1.0, False)
                assert_close(model.predict_log_proba_one(probe), want, f"step {t} x={probe}")
            model.learn_one(x, y, w)
            seen.append((x, y, w))


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize(
    ("alpha", "half_life"), [(0.5, None), (0.0, None), (0.5, 100.0), (0.0, 100.0)]
)
@pytest.mark.parametrize("name", ["TAN", "KDB-k1", "KDB-k2"])
def test_tree_weights_match_brute_force(
    name: str, alpha: float, half_life: float | None, sparse: bool
) -> None:
    options: dict[str, Any] = {
        "alpha": alpha,
        "half_life": half_life,
        "rebuild_every": 16,
        "feature_weights": WEIGHTS,
    }
    model: TAN | KDB = TAN(**options) if name == "TAN" else KDB(int(name[-1]), **options)
    if sparse:
        model._store.keep_sparse()
    rng = random.Random(2)
    seen: list[Event] = []
    starts: dict[str, int] = {}  # first event in each feature's family counts
    tracked: dict[str, tuple[str, ...]] = {}
    skipped = edges = 0  # steps where f1 (weight 0) is someone's parent, where any is
    with strict():
        for t, (x, y, w) in enumerate(make_stream(seed=8, n=150, dependent=True)):
            ref = Reference(seen, alpha, half_life, WEIGHTS)
            parents = {str(f): tuple(map(str, pa)) for f, pa in model.parents.items()}
            for probe in probes(x, rng):
                want = ref.tree(probe, parents, 1.0, starts)
                assert_close(model.predict_log_proba_one(probe), want, f"step {t} x={probe}")
            model.learn_one(x, y, w)
            seen.append((x, y, w))
            for f, pa in model.parents.items():
                if tracked.get(str(f)) != pa:
                    tracked[str(f)] = tuple(map(str, pa))
                    starts[str(f)] = len(seen)
            skipped += any("f1" in pa for pa in model.parents.values())
            edges += any(model.parents.values())
    assert edges > 50  # a structure was used
    if half_life is None:  # the weight-0 feature was a parent: the scores skipped it
        assert skipped > 50


FACTORIES: dict[str, Callable[..., Learner]] = {
    "AODE": AODE,
    "AODE-weighted": lambda **kw: AODE(weighting="mutual_information", **kw),
    "SPODE-f0": lambda **kw: SPODE("f0", **kw),
    "SPODE-auto": SPODE,
    "TAN": lambda **kw: TAN(rebuild_every=16, **kw),
    "KDB": lambda **kw: KDB(2, rebuild_every=16, **kw),
}


@pytest.mark.parametrize("alpha", [1.0, 0.0])
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_weight_zero_predictions_do_not_depend_on_the_feature(name: str, alpha: float) -> None:
    weights = {"f0": 0.0, "f2": 2.0}
    model = FACTORIES[name](alpha=alpha, feature_weights=weights)
    blind = FACTORIES[name](alpha=alpha, feature_weights={"f2": 2.0})  # never sees f0
    rng = random.Random(5)
    with strict():
        for x, y, w in make_stream(seed=12, n=120, dependent=True):
            model.learn_one(x, y, w)
            blind.learn_one({f: v for f, v in x.items() if f != "f0"}, y, w)
            for probe in probes(x, rng):
                without = {f: v for f, v in probe.items() if f != "f0"}
                got = model.predict_log_proba_one(probe)
                assert got == model.predict_log_proba_one(without)
                assert got == model.predict_log_proba_one({**probe, "f0": "never-seen"})
                if name.startswith(("AODE", "SPODE")):  # exactly the model that never saw f0
                    assert got == blind.predict_log_proba_one(probe), probe
    assert "f0" in model.feature_names()  # still learned
    if name == "SPODE-auto":
        assert model.structure()["super_parent"] == blind.structure()["super_parent"] != "f0"


def _numeric_events(n: int) -> list[Event]:
    rng = random.Random(9)
    out: list[Event] = []
    for _ in range(n):
        y = rng.choice("ab")
        x = {"t": rng.gauss(1.0 if y == "a" else -1.0, 1.0), "c": rng.choice(["u", "v", y])}
        out.append((x, y, 1.0))
    return out


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_warm_up_gaussian_terms_are_weighted(name: str) -> None:
    """``jll(x) − jll(x without t)`` is ``w_t`` times the Gaussian warm-up term of ``t``."""
    make = FACTORIES[name]
    plain = make(warmup=500)
    half = make(warmup=500, feature_weights={"t": 0.5})
    off = make(warmup=500, feature_weights={"t": 0.0, "c": 3.0})
    events = _numeric_events(60)
    for x, y, w in events:
        for model in (plain, half, off):
            model.learn_one(x, y, w)
    checked = 0
    for x, _y, _w in events[:20]:
        rest = {"c": x["c"]}
        term = {
            k: plain._joint_log_likelihood(x)[k] - plain._joint_log_likelihood(rest)[k]
            for k in "ab"
        }
        got = {
            k: half._joint_log_likelihood(x)[k] - half._joint_log_likelihood(rest)[k] for k in "ab"
        }
        for k in "ab":
            assert term[k] != 0.0
            assert got[k] == pytest.approx(0.5 * term[k], rel=1e-12, abs=1e-12)
        assert off._joint_log_likelihood(x) == off._joint_log_likelihood(rest)
        checked += 1
    assert checked == 20


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_weights_of_one_are_the_unweighted_model_byte_for_byte(name: str) -> None:
    make = FACTORIES[name]
    ones = {"cat0": 1.0, "num0": 1, "flag": 1.0, "ghost": 1.0}
    plain, weighted = make(), make(feature_weights=ones)
    events = list(mixed_stream(seed=3, n=400, missing=0.1))
    for start in range(0, 400, 100):
        xs = [x for x, _y in events[start : start + 100]]
        ys = [y for _x, y in events[start : start + 100]]
        ws = [1.0] * len(xs)
        assert weighted.predict_learn_many(xs, ys, ws) == plain.predict_learn_many(xs, ys, ws)
    assert weighted.to_state()["stats"] == plain.to_state()["stats"]
    for x, _y in events[:50]:
        assert weighted.predict_log_proba_one(x) == plain.predict_log_proba_one(x)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_state_merge_and_batch_paths(name: str) -> None:
    make = FACTORIES[name]
    weights = {"f0": 0.0, "f2": 2.0, "f3": 0.5}
    events = make_stream(seed=13, n=300, dependent=True)
    model = make(alpha=0.5, feature_weights=weights)
    for x, y, w in events[:150]:
        model.learn_one(x, y, w)
    copy = Learner.from_state(orjson.loads(orjson.dumps(model.to_state())))
    assert copy.get_params()["feature_weights"] == weights
    for x, _y, _w in events[150:200]:
        assert copy.predict_log_proba_one(x) == model.predict_log_proba_one(x)
    other = make(alpha=0.5, feature_weights=weights)
    for x, y, w in events[150:]:
        other.learn_one(x, y, w)
    copy.merge(other)
    assert copy.n_learned == 300
    with pytest.raises(IncompatibleModelError, match=r"parameters differ: \['feature_weights'\]"):
        copy.merge(make(alpha=0.5, feature_weights={"f0": 1.0}))
    with pytest.raises(IncompatibleModelError, match="feature_weights"):
        copy.merge(make(alpha=0.5))
    # batches take the per-event path while weights are set: equal to the byte
    fast = make(alpha=0.5, feature_weights=weights)
    slow = make(alpha=0.5, feature_weights=weights)
    for start in range(0, len(events), 100):
        batch = events[start : start + 100]
        xs, ys, ws = [e[0] for e in batch], [e[1] for e in batch], [e[2] for e in batch]
        assert fast.predict_learn_many(xs, ys, ws) == Learner.predict_learn_many(slow, xs, ys, ws)
        names = ("f0", "f1", "f2", "f3")
        columns = [[e[0].get(f) for e in batch] for f in names]
        assert fast.predict_learn_columns(names, columns, ys, ws) is None  # declined
    assert fast.to_state() == slow.to_state()


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_state_saved_before_feature_weights_still_loads(name: str) -> None:
    model = FACTORIES[name]()
    model.learn_one({"a": "x", "b": "y"}, "p")
    state = model.to_state()
    del state["params"]["feature_weights"]  # (states written before the parameter existed)
    assert Learner.from_state(state).to_state() == model.to_state()


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ({"a": -1}, r"feature_weights\['a'\] must be non-negative and finite, got -1"),
        ({"a": math.nan}, r"feature_weights\['a'\] must be non-negative and finite"),
        ([("a", 1)], r"feature_weights must be a mapping"),
    ],
)
@pytest.mark.parametrize("cls", [AODE, SPODE, TAN, KDB])
def test_invalid_weights_are_refused(cls: Callable[..., Learner], weights: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        cls(feature_weights=weights)


@pytest.mark.parametrize("alpha", [1.0, 0.0])
def test_automatic_spode_parent_skips_weight_zero(alpha: float) -> None:
    weights = {"f1": 0.0, "f2": 2.0}
    plain, auto = SPODE(alpha=alpha), SPODE(alpha=alpha, feature_weights=weights)
    events = make_stream(seed=12, n=120, dependent=True)
    for x, y, w in events:
        plain.learn_one(x, y, w)
        auto.learn_one(x, y, w)
    ranked = ranking(plain._store)
    assert ranked[0] == "f1" == plain.structure()["super_parent"]  # the best, of weight 0
    explicit = SPODE(ranked[1], alpha=alpha, feature_weights=weights)
    for x, y, w in events:
        explicit.learn_one(x, y, w)
    assert auto.structure()["super_parent"] == ranked[1]
    for x, _y, _w in events[:40]:
        assert auto.predict_log_proba_one(x) == explicit.predict_log_proba_one(x)
