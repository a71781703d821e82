"""Bounded memory, merge, state, forgetting, discretisation and validation (semi-naive)."""

from __future__ import annotations

import json
import math
import random
import uuid
from collections.abc import Callable, Hashable
from typing import Any

import pytest
from _bn import bn_stream

from stream_nb import (
    AODE,
    KDB,
    SPODE,
    TAN,
    ConfigError,
    IncompatibleModelError,
    InvalidEventError,
    Learner,
    ModelStateError,
)
from stream_nb.seminaive import Discretiser
from stream_nb.seminaive.discretise import equal_frequency_edges

FACTORIES: dict[str, Callable[..., Learner]] = {
    "SPODE": lambda **kw: SPODE("x1", **kw),
    "AODE": AODE,
    "TAN": lambda **kw: TAN(rebuild_every=50, **kw),
    "KDB1": lambda **kw: KDB(k=1, rebuild_every=50, **kw),
    "KDB2": lambda **kw: KDB(k=2, rebuild_every=50, **kw),
}


def mixed_events(seed: int, n: int) -> list[tuple[dict[str, Any], Hashable]]:
    """Tree-BN categorical features plus a numeric one and a flag."""
    rng = random.Random(seed)
    out = []
    for x, y in bn_stream(seed, n):
        x = dict(x)
        x["t"] = rng.gauss(float(y), 1.0)
        x["flag"] = rng.random() < 0.3 + 0.2 * y
        out.append((x, y))
    return out


def assert_same(a: Learner, b: Learner, xs: list[dict[str, Any]], tol: float = 1e-9) -> None:
    for x in xs:
        pa, pb = a.predict_log_proba_one(x), b.predict_log_proba_one(x)
        assert pa.keys() == pb.keys()
        for c in pa:
            assert abs(pa[c] - pb[c]) <= tol * max(1.0, abs(pb[c])), (x, c, pa, pb)


# ---------------------------------------------------------------- bounded memory
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_uuid_feature_keeps_model_size_bounded_by_the_cap(name: str) -> None:
    cap = 20
    model = FACTORIES[name](max_values_per_feature=cap)
    unbounded = FACTORIES[name](max_values_per_feature=None)
    rng = random.Random(0)
    sizes = []
    for t, (x, y) in enumerate(bn_stream(seed=1, n=1500)):
        event = {**x, "id": str(uuid.UUID(int=rng.getrandbits(128)))}
        model.learn_one(event, y)
        unbounded.learn_one(event, y)
        if t in (500, 1499):
            sizes.append(model.model_size())
    # bound from the cap: K classes, d features, at most cap + 1 values each
    k, d, s = 3, 7, cap + 1
    single = k + 1 + d * k + d * s * k + d + d * s
    pairs = d * s * (d - 1) * (k + s * k)
    families = d * s**2 * (k + s * k)
    assert sizes[1]["stored_counts"] <= single + pairs + families
    assert sizes[1]["stored_counts"] < 1.01 * sizes[0]["stored_counts"]  # flat past the cap
    assert unbounded.model_size()["stored_counts"] > 5 * sizes[1]["stored_counts"]
    assert sizes[1]["bytes"] == sizes[1]["stored_counts"] * Learner._BYTES_PER_NUMBER
    store = model._store  # type: ignore[attr-defined]
    assert len(store.categorical.counts["id"]) == cap + 1  # cap values + the "other" bucket
    assert None in store.categorical.counts["id"]


def test_unseen_value_of_a_full_feature_scores_as_other() -> None:
    model = AODE(max_values_per_feature=2)
    for i in range(30):
        model.learn_one({"id": f"u{i}", "a": "p" if i % 2 else "q"}, i % 2)
    via_other = model.predict_log_proba_one({"id": "never-seen", "a": "p"})
    via_other2 = model.predict_log_proba_one({"id": "u29", "a": "p"})  # also past the cap
    assert via_other == via_other2
    unbounded = AODE(max_values_per_feature=None)
    unbounded.learn_one({"id": "x"}, 0)
    unbounded.learn_one({"id": "y"}, 1)
    assert len(unbounded._store.categorical.counts["id"]) == 2


# ---------------------------------------------------------------- merge
@pytest.mark.parametrize("name", ["SPODE", "AODE"])
def test_merge_equals_one_pass(name: str) -> None:
    events = mixed_events(seed=2, n=400)
    one = FACTORIES[name](warmup=50)
    a, b = FACTORIES[name](warmup=50), FACTORIES[name](warmup=50)
    for x, y in events:
        one.learn_one(x, y)
    for x, y in events[:200]:
        a.learn_one(x, y)
    for x, y in events[200:]:
        b.learn_one(x, y)
    xs = [x for x, _ in events[::20]]
    with pytest.raises(IncompatibleModelError, match="numeric feature 't' has bins"):
        a.merge(b)  # both discretisers froze on different samples: need equal edges
    edges = {"t": [-1.0, 0.0, 1.0, 2.0, 3.0]}
    one, a, b = (FACTORIES[name](bin_edges=edges) for _ in range(3))
    for x, y in events:
        one.learn_one(x, y)
    for x, y in events[:200]:
        a.learn_one(x, y)
    for x, y in events[200:]:
        b.learn_one(x, y)
    assert_same(a.merge(b), one, xs)


def test_merge_rejects_different_frozen_bins() -> None:
    a, b = AODE(warmup=10), AODE(warmup=10)
    for i in range(20):
        a.learn_one({"t": float(i)}, i % 2)
        b.learn_one({"t": float(100 + i)}, i % 2)
    with pytest.raises(IncompatibleModelError, match=r"numeric feature 't' has bins .* bin_edges="):
        a.merge(b)


def test_merge_of_warm_up_samples_freezes_the_union() -> None:
    a, b = AODE(warmup=10), AODE(warmup=10)
    for i in range(6):
        a.learn_one({"t": float(i)}, 0)
        b.learn_one({"t": float(10 + i)}, 1)
    a.merge(b)
    assert a._disc.edges["t"] == equal_frequency_edges([0, 1, 2, 3, 4, 5, 10, 11, 12, 13], 10)
    assert "t" not in a._disc.samples


def test_merge_past_the_cap_moves_counts_to_other() -> None:
    a, b = AODE(max_values_per_feature=2), AODE(max_values_per_feature=2)
    a.learn_one({"id": "a1", "c": "x"}, 0)
    a.learn_one({"id": "a2", "c": "y"}, 1)
    b.learn_one({"id": "b1", "c": "x"}, 0)
    b.learn_one({"id": "b2", "c": "x"}, 1)
    a.merge(b)
    counts = a._store.categorical.counts["id"]
    assert set(counts) == {"a1", "a2", None}
    assert counts[None] == {0: 1.0, 1: 1.0}
    assert a._store.pairs[("c", "x")]["id"][1][None] == [1.0, 1.0]  # by class index


@pytest.mark.parametrize("name", ["TAN", "KDB1"])
def test_structure_merge_equals_one_pass_after_a_rebuild(name: str) -> None:
    events = list(bn_stream(seed=6, n=600))
    one, a, b = (FACTORIES[name]() for _ in range(3))
    for x, y in events:
        one.learn_one(x, y)
    for x, y in events[:300]:
        a.learn_one(x, y)
    for x, y in events[300:]:
        b.learn_one(x, y)
    a.merge(b)  # rebuilt from the merged counts
    one.rebuild()
    assert a.parents == one.parents  # type: ignore[attr-defined]
    assert_same(a, one, [x for x, _ in events[::10]])


def test_kdb_family_counts_merge_only_for_equal_parents() -> None:
    events = list(bn_stream(seed=7, n=400))
    a, b = KDB(k=2, rebuild_every=1000), KDB(k=2, rebuild_every=1000)
    for x, y in events:
        a.learn_one(x, y)
        b.learn_one(x, y)
    before = a.model_size()["stored_counts"]
    a.merge(b)
    assert a.parents == b.parents
    assert a.model_size()["stored_counts"] == before  # same keys, doubled weights
    fam = next(f for f in a._families.values() if f)
    node = next(iter(fam.values()))
    other = b._families[next(j for j in a._families if a._families[j] is fam)]
    assert node[0] == [2 * w for w in other[next(iter(fam))][0]]


# ---------------------------------------------------------------- state
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_state_round_trip_keeps_discretiser_and_structure(name: str) -> None:
    events = mixed_events(seed=3, n=300)
    model = FACTORIES[name](warmup=40, half_life=100.0)
    for x, y in events[:200]:
        model.learn_one(x, y)
    state = json.loads(json.dumps(model.to_state()))
    copy = Learner.from_state(state)
    assert copy._disc.edges == model._disc.edges  # type: ignore[attr-defined]
    if isinstance(model, (TAN, KDB)):
        assert copy.parents == model.parents  # type: ignore[attr-defined]
        assert any(model.parents.values())
    for x, y in events[200:]:
        model.learn_one(x, y)
        copy.learn_one(x, y)
    assert_same(copy, model, [x for x, _ in events[::7]], tol=0.0)
    assert json.dumps(copy.to_state()) == json.dumps(model.to_state())


def test_malformed_state_is_rejected() -> None:
    model = TAN()
    for x, y in bn_stream(seed=1, n=40):
        model.learn_one(x, y)
    state = model.to_state()
    state["stats"]["families"] = [["x1", []]]
    with pytest.raises(ModelStateError, match="families must exist exactly"):
        Learner.from_state(state)
    state = model.to_state()
    state["stats"]["discretiser"]["edges"] = [["t", ["a"]]]
    with pytest.raises(
        ModelStateError, match=r"stats.discretiser.edges\[.t.\]\[0\]: must be a number"
    ):
        Learner.from_state(state)


# ---------------------------------------------------------------- forgetting
def test_forgetting_survives_renormalisation() -> None:
    """half_life=1 drives the scale below 1e-30 (renormalised); old events vanish."""
    events = list(bn_stream(seed=8, n=700))
    model = AODE(half_life=1.0)
    for x, y in events:
        model.learn_one(x, y)
    assert model._scale > 1e-30
    recent = AODE()
    # weights of everything older than ~120 events are below 2^-120 relative
    for i, (x, y) in enumerate(events[-120:]):
        recent.learn_one(x, y, 0.5 ** (119 - i))
    assert_same(model, recent, [x for x, _ in events[-30:]], tol=1e-6)


# ---------------------------------------------------------------- discretiser
def test_discretiser_warm_up_then_frozen_bins() -> None:
    d = Discretiser(n_bins=4, warmup=8)
    assert [d.learn_value("t", float(v)) for v in range(8)] == [None] * 8
    assert d.edges["t"] == [1.5, 3.5, 5.5]
    assert [d.learn_value("t", v) for v in (-5.0, 1.5, 2.0, 100.0)] == [0, 1, 1, 3]
    assert d.bin_value("unknown", 1.0) is None
    assert equal_frequency_edges([1, 1, 1, 1, 2], 4) == [1.5]
    assert equal_frequency_edges([5.0] * 10, 3) == []


def test_warm_up_values_are_replayed_once_the_bins_freeze() -> None:
    model = AODE(warmup=5, n_bins=2)
    for i in range(4):
        model.learn_one({"t": float(i), "c": "a"}, i % 2)
    assert "t" not in model._store.categorical.counts  # warm-up: not counted yet
    assert len(model._pending) == 4
    model.learn_one({"t": 4.0, "c": "a"}, 0)  # the 5th value freezes the bins
    assert model._disc.edges["t"] == [2.5]  # {0, 1, 2} | {3, 4}
    assert model._store.categorical.counts["t"] == {0: {0: 2.0, 1: 1.0}, 1: {1: 1.0, 0: 1.0}}
    assert model._store.pairs[("c", "a")]["t"][1] == {0: [2.0, 1.0], 1: [1.0, 1.0]}
    assert model._pending == []


@pytest.mark.parametrize("half_life", [None, 30.0])
@pytest.mark.parametrize("name", ["AODE", "TAN"])
def test_warm_up_then_freeze_equals_bins_known_from_the_start(
    name: str, half_life: float | None
) -> None:
    """Two numeric features, one appearing late: replay makes the counts exact."""
    rng = random.Random(4)
    events = []
    for t in range(300):
        y = rng.randrange(3)
        x: dict[str, Any] = {"c": f"c{(y + rng.randrange(2)) % 3}", "t": rng.gauss(y, 1.0)}
        if t >= 60:
            x["u"] = rng.gauss(-y, 2.0) if rng.random() < 0.9 else None
        events.append((x, y))
    learned = FACTORIES[name](warmup=40, half_life=half_life)
    for x, y in events:
        learned.learn_one(x, y)
    edges = learned._disc.edges  # type: ignore[attr-defined]
    assert set(edges) == {"t", "u"}
    fixed = FACTORIES[name](bin_edges=edges, half_life=half_life)
    for x, y in events:
        fixed.learn_one(x, y)
    probes = [x for x, _ in events[::15]]
    if name == "AODE":
        assert_same(learned, fixed, probes, tol=1e-9)
    else:
        learned.rebuild()  # structures were rebuilt at different moments
        fixed.rebuild()
        assert learned.parents == fixed.parents
        assert_same(learned, fixed, probes, tol=1e-9)


def test_merge_replays_the_union_of_warm_up_samples() -> None:
    rng = random.Random(5)
    events = [
        ({"t": rng.gauss(y, 1.0), "c": str(y)}, y) for y in (rng.randrange(2) for _ in range(80))
    ]
    one, a, b = AODE(warmup=30), AODE(warmup=30), AODE(warmup=30)
    for x, y in events:
        one.learn_one(x, y)
    for x, y in events[:20]:
        a.learn_one(x, y)
    for x, y in events[20:]:
        b.learn_one(x, y)
    with pytest.raises(IncompatibleModelError):
        AODE(warmup=30).merge(b).merge(one)  # both froze on different samples
    small_b = AODE(warmup=30)
    for x, y in events[20:25]:
        small_b.learn_one(x, y)
    a.merge(small_b)  # 25 values: still warming, buffered events travel with the merge
    assert len(a._pending) == 25
    for x, y in events[25:]:
        a.learn_one(x, y)
    assert a._disc.edges == one._disc.edges
    assert_same(a, one, [x for x, _ in events[::5]])


def test_infinite_values_are_binned_but_never_sampled() -> None:
    model = AODE(warmup=3, n_bins=2)
    model.learn_one({"t": math.inf}, 0)  # warm-up: missing, not buffered
    for v in (1.0, 2.0, 3.0):
        model.learn_one({"t": v}, 1)
    assert model._disc.edges["t"] == [2.5]  # {1, 2} | {3}
    model.learn_one({"t": -math.inf}, 0)
    assert model._store.categorical.counts["t"] == {0: {1: 2.0, 0: 1.0}, 1: {1: 1.0}}
    assert Learner.from_state(json.loads(json.dumps(model.to_state()))).to_state() == (
        model.to_state()
    )


def test_schema_overrides_types() -> None:
    model = AODE(schema={"code": "categorical", "n": "numeric"}, warmup=1)
    model.learn_one({"code": 7, "n": 3}, "y")
    assert model._store.categorical.counts["code"] == {7: {"y": 1.0}}
    model.learn_one({"t": 1.0}, "y")  # "t" warms up (warmup=1 freezes it at once)
    before = model.to_state()
    with pytest.raises(InvalidEventError, match="feature 'n' is numeric in the schema"):
        model.learn_one({"t": 2.0, "n": "three"}, "y")
    assert model.to_state() == before  # nothing learned from the rejected event
    assert model.predict_proba_one({"n": float("nan"), "code": None}) == {"y": 1.0}


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: AODE(alpha=-0.5), "alpha must be non-negative"),
        (lambda: AODE(min_parent_count=-1), "min_parent_count must be non-negative"),
        (lambda: AODE(max_values_per_feature=0), "max_values_per_feature must be an integer >= 1"),
        (lambda: AODE(n_bins=1), "n_bins must be an integer >= 2"),
        (lambda: AODE(warmup=True), "warmup must be an integer >= 1"),
        (lambda: AODE(bin_edges={"t": [2, 1]}), r"bin_edges\['t'\] must be strictly increasing"),
        (lambda: AODE(bin_edges={"t": [math.inf]}), "use finite numbers"),
        (lambda: AODE(bin_edges=[1.0]), "bin_edges must be a mapping"),
        (lambda: AODE(schema={"a": "text"}), r"schema\['a'\] must be 'categorical' or 'numeric'"),
        (lambda: SPODE(parent=["a"]), "parent must be a feature name"),
        (lambda: TAN(rebuild_every=0), "rebuild_every must be an integer >= 1"),
        (lambda: KDB(k=0), "k must be an integer >= 1"),
        (lambda: KDB(half_life=-1), "half_life must be a positive"),
    ],
)
def test_invalid_parameters(make: Callable[[], Learner], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make()


def test_merge_with_other_parameters_is_rejected() -> None:
    with pytest.raises(IncompatibleModelError, match=r"parameters differ: \['k'\]"):
        KDB(k=1).merge(KDB(k=2))


# ---------------------------------------------------------------- pair-feature cap
def test_features_past_max_pair_features_are_naive_bayes_only() -> None:
    events = list(bn_stream(seed=9, n=300))
    capped = AODE(max_pair_features=3)  # x0, x1, x2 get pair counts; x3…x5 do not
    pairs_only = AODE()
    for x, y in events:
        capped.learn_one(x, y)
        pairs_only.learn_one({k: v for k, v in x.items() if k in ("x0", "x1", "x2")}, y)
    store = capped._store
    assert list(store.pair_features) == ["x0", "x1", "x2"]
    assert {i for i, _ in store.pairs} == {"x0", "x1", "x2"}
    assert all(set(sub) <= {"x0", "x1", "x2"} for sub in store.pairs.values())
    nb = store.categorical
    for x, _ in events[::25]:
        want = pairs_only._joint_log_likelihood(x)
        for j in ("x3", "x4", "x5"):  # CategoricalNB terms, the same for every SPODE
            values = nb.counts[j]
            for y in want:
                n = values.get(x[j], {}).get(y, 0.0)
                want[y] += math.log((n + 1.0) / (nb.present[j].get(y, 0.0) + len(values)))
        got = capped._joint_log_likelihood(x)
        assert got.keys() == want.keys()
        assert all(abs(got[c] - want[c]) <= 1e-9 * max(1.0, abs(want[c])) for c in want)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_wide_events_stay_bounded_by_max_pair_features(name: str) -> None:
    model = FACTORIES[name](max_pair_features=10)
    rng = random.Random(3)
    for _ in range(5):
        y = rng.randrange(2)
        model.learn_one({f"w{k}": str((k + y) % 3) for k in range(400)}, y)
    size = model.model_size()
    assert size["features"] == 400
    # pair vectors: at most 10 features × 3 values × 9 partners × (1 + 3 values) × 2 classes
    assert size["stored_counts"] < 400 * 3 * 4 + 10 * 3 * 9 * 4 * 2 + 100
    proba = model.predict_proba_one({f"w{k}": "1" for k in range(400)})
    assert abs(sum(proba.values()) - 1.0) < 1e-9
    state = json.loads(json.dumps(model.to_state()))
    assert Learner.from_state(state).predict_proba_one({"w0": "1"}) == model.predict_proba_one(
        {"w0": "1"}
    )
