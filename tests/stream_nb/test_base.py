"""stream_nb.base: log_softmax, the learner protocol, merge and state errors, weights."""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Mapping
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from learner_classes import learner_params

from stream_nb import (
    CategoricalNB,
    ConfigError,
    IncompatibleModelError,
    Learner,
    ModelStateError,
)
from stream_nb.base import log_softmax


@pytest.fixture(autouse=True)
def _restore_registry() -> Any:
    """Learner classes defined inside tests register themselves; forget them afterwards."""
    saved = dict(Learner._registry)
    yield
    Learner._registry.clear()
    Learner._registry.update(saved)


# ------------------------------------------------------------------ log_softmax
def test_log_softmax_edge_cases() -> None:
    assert log_softmax({}) == {}
    assert log_softmax({"a": -math.inf, "b": -math.inf}) == {}
    assert log_softmax({"a": 0.0, "b": -math.inf}) == {"a": 0.0}
    assert log_softmax({"a": 5.0}) == {"a": 0.0}


def test_log_softmax_does_not_overflow_or_underflow() -> None:
    lp = log_softmax({"a": 1e6, "b": 1e6})
    assert lp == {"a": pytest.approx(-math.log(2)), "b": pytest.approx(-math.log(2))}
    lp = log_softmax({"a": -1e6, "b": 0.0})
    assert lp["a"] == pytest.approx(-1e6) and lp["b"] == 0.0
    lp = log_softmax({"a": -2000.0, "b": -2001.0})
    assert math.exp(lp["a"]) + math.exp(lp["b"]) == pytest.approx(1.0)


@given(st.dictionaries(st.integers(), st.floats(-700, 700), min_size=1, max_size=20))
def test_log_softmax_matches_direct_computation(jll: dict[int, float]) -> None:
    total = math.fsum(math.exp(v) for v in jll.values())
    lp = log_softmax(jll)
    assert lp.keys() == jll.keys()
    for c, v in jll.items():
        assert lp[c] == pytest.approx(v - math.log(total), abs=1e-9)
    assert math.fsum(math.exp(v) for v in lp.values()) == pytest.approx(1.0, abs=1e-12)


# ------------------------------------------------------------------ protocol
def trained(**params: Any) -> CategoricalNB:
    model = CategoricalNB(**params)
    model.learn_one({"f": "a", "g": 1}, "x")
    model.learn_one({"f": "b", "g": 2}, "y", 2.0)
    model.learn_one({"f": "a"}, 3)
    return model


def test_predictions_are_derived_from_the_joint_log_likelihood() -> None:
    model = trained()
    x = {"f": "a", "g": 2}
    jll = model._joint_log_likelihood(x)
    assert model.predict_log_proba_one(x) == log_softmax(jll)
    assert model.predict_proba_one(x) == {c: math.exp(v) for c, v in log_softmax(jll).items()}
    assert model.predict_one(x) == max(jll, key=jll.__getitem__)
    assert model.n_learned == 3


def test_predict_one_ties_go_to_the_first_learned_class() -> None:
    model = CategoricalNB()
    model.learn_one({"f": "a"}, "first")
    model.learn_one({"f": "a"}, "second")
    assert model.predict_one({"f": "a"}) == "first"


def test_clone_is_untrained_with_the_same_parameters() -> None:
    model = trained(alpha=0.3, half_life=4.0)
    clone = model.clone()
    assert type(clone) is CategoricalNB
    assert clone.get_params() == model.get_params()
    assert clone.predict_proba_one({"f": "a"}) == {}
    assert clone.n_learned == 0


# ------------------------------------------------------------------ weights
@pytest.mark.parametrize("w", [0, 0.0, -1.0, math.nan, math.inf, -math.inf, "2", None, [1.0]])
def test_invalid_sample_weights_are_rejected(w: object) -> None:
    model = CategoricalNB()
    with pytest.raises(ConfigError, match=r"sample weight w must be positive and finite, got"):
        model.learn_one({"f": "a"}, "x", w)  # type: ignore[arg-type]
    assert model.n_learned == 0
    assert model.predict_proba_one({"f": "a"}) == {}


def test_weight_scales_counts() -> None:
    weighted, repeated = CategoricalNB(), CategoricalNB()
    weighted.learn_one({"f": "a"}, "x", 3.0)
    weighted.learn_one({"f": "b"}, "y")
    for _ in range(3):
        repeated.learn_one({"f": "a"}, "x")
    repeated.learn_one({"f": "b"}, "y")
    for x in ({"f": "a"}, {"f": "b"}, {}):
        assert weighted.predict_log_proba_one(x) == pytest.approx(repeated.predict_log_proba_one(x))


def test_half_life_halves_an_event_after_half_life_units() -> None:
    model = CategoricalNB(half_life=2.0)
    model.learn_one({}, "old")
    model.learn_one({}, "new", 2.0)  # two units later "old" weighs 1/2
    # prior (N_y + α) / (N + Kα): old (0.5 + 1), new (2 + 1)
    proba = model.predict_proba_one({})
    assert proba["old"] == pytest.approx(1.5 / 4.5, abs=1e-12)


# ------------------------------------------------------------------ merge
def test_merge_rejects_another_class() -> None:
    class Other(CategoricalNB):
        pass

    with pytest.raises(IncompatibleModelError, match="cannot merge a Other into a CategoricalNB"):
        CategoricalNB().merge(Other())


@pytest.mark.parametrize(
    ("a", "b", "diff"),
    [
        ({"alpha": 1.0}, {"alpha": 2.0}, r"\['alpha'\]"),
        ({}, {"half_life": 5.0}, r"\['half_life'\]"),
        ({"fit_prior": False}, {"class_prior": {"x": 1.0}}, r"\['class_prior', 'fit_prior'\]"),
    ],
)
def test_merge_rejects_other_parameters(a: dict, b: dict, diff: str) -> None:
    model, other = trained(**a), trained(**b)
    before = orjson.dumps(model.to_state())
    with pytest.raises(IncompatibleModelError, match=f"parameters differ: {diff}"):
        model.merge(other)
    assert orjson.dumps(model.to_state()) == before  # nothing half-merged


def test_merge_with_forgetting_adds_decayed_statistics() -> None:
    a, b = CategoricalNB(half_life=1.0), CategoricalNB(half_life=1.0)
    a.learn_one({}, "x")
    a.learn_one({}, "x")  # x: 1/2 + 1 = 1.5
    b.learn_one({}, "y")  # y: 1
    a.merge(b)
    proba = a.predict_proba_one({})
    assert proba["x"] == pytest.approx((1.5 + 1) / (2.5 + 2), abs=1e-12)


# ------------------------------------------------------------------ state
def good_state() -> dict[str, Any]:
    return orjson.loads(orjson.dumps(trained(class_prior={"x": 0.5, 3: 0.5}).to_state()))


def test_state_is_plain_json_and_keeps_key_types() -> None:
    model = trained(class_prior={"x": 0.5, 3: 0.5})
    state = orjson.loads(orjson.dumps(model.to_state()))
    copy_ = CategoricalNB.from_state(state)
    assert copy_.get_params() == model.get_params()
    assert set(copy_.predict_proba_one({"g": 1})) == {"x", 3}


def broken(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A good state with ``path`` set to ``value`` (or deleted when value is ...)."""
    state = copy.deepcopy(good_state())
    node: Any = state
    for key in path[:-1]:
        node = node[key]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return state


@pytest.mark.parametrize(
    ("state", "match"),
    [
        ("not a state", r"not a stream-nb learner state \(expected format 'stream-nb/learner'\)"),
        (None, "not a stream-nb learner state"),
        ([1, 2], "not a stream-nb learner state"),
        (broken(("format",), "other"), "not a stream-nb learner state"),
        (broken(("version",), 99), r"unsupported learner state version 99; .* reads version 1"),
        (broken(("version",), ...), "unsupported learner state version None"),
        (broken(("learner",), "NoSuchNB"), r"unknown learner 'NoSuchNB' in state"),
        (broken(("learner",), ["CategoricalNB"]), r"unknown learner \['CategoricalNB'\]"),
        (broken(("learner",), "Learner"), r"unknown learner 'Learner'"),
        (broken(("params",), ...), r"malformed CategoricalNB state: state: missing field 'params'"),
        (broken(("params",), [1]), "malformed CategoricalNB state"),
        (broken(("params", "alpha"), -1), r"malformed CategoricalNB state: ConfigError.*alpha"),
        (broken(("params", "bogus"), 1), r"malformed CategoricalNB state: TypeError.*bogus"),
        (broken(("params", "class_prior"), {"$map": 5}), "malformed CategoricalNB state"),
        (broken(("params", "class_prior"), {"x": 1}), r"encoded mappings must be"),
        (broken(("n_learned",), "many"), "malformed CategoricalNB state"),
        (broken(("scale",), 0.0), r"scale: must be finite and > 0, got 0.0"),
        (broken(("scale",), -1.0), r"scale: must be finite and > 0, got -1.0"),
        (broken(("scale",), 0.5), r"scale: must be in \(0, 1\] .* exactly 1 without, got 0.5"),
        (broken(("scale",), 1e308), r"scale: must be in \(0, 1\]"),
        (broken(("scale",), "nan"), r"scale: must be a finite number > 0, got 'nan' \(str\)"),
        (broken(("scale",), 1e309), r"scale: must be finite and > 0, got inf"),
        (broken(("stats",), ...), r"state: missing field 'stats'"),
        (broken(("stats",), "stats"), "malformed CategoricalNB state"),
        (broken(("stats", "total_weight"), "x"), "malformed CategoricalNB state"),
        (
            broken(("stats", "class_weight"), [[["list"], 1.0]]),
            r"class_weight\[0\]: a label must be",
        ),
        (
            broken(("stats", "class_weight"), [["x", "1.0"]]),
            "must be a finite number ≥ 0, got '1.0'",
        ),
        (broken(("stats", "class_weight"), [["x", True]]), "must be a finite number ≥ 0, got True"),
        (
            broken(("stats", "class_weight"), [["x", 1e309]]),
            r"class_weight\['x'\]: must be finite and ≥ 0, got inf",
        ),
        (broken(("stats", "class_weight"), [["x"]]), "malformed CategoricalNB state"),
        (broken(("stats", "counts"), [["f", 1.0]]), "malformed CategoricalNB state"),
        (broken(("stats", "counts"), []), "present and counts must name the same features"),
        (broken(("stats", "present"), [["f", [["x", [["deep", 1.0]]]]]]), "finite number"),
    ],
)
def test_malformed_states_raise_model_state_error(state: Any, match: str) -> None:
    with pytest.raises(ModelStateError, match=match):
        Learner.from_state(state)


def test_from_state_on_a_subclass_checks_the_class() -> None:
    class OtherNB(CategoricalNB):
        pass

    state = good_state()
    with pytest.raises(ModelStateError, match="state holds a CategoricalNB, not a OtherNB"):
        OtherNB.from_state(state)
    assert type(CategoricalNB.from_state(state)) is CategoricalNB


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(path=st.sampled_from(["params", "n_learned", "scale", "stats"]), value=json_values)
def test_untrusted_states_raise_only_model_state_error(path: str, value: Any) -> None:
    """Arbitrary JSON in any field gives ModelStateError or a working model, nothing else."""
    state = broken((path,), value)
    try:
        model = Learner.from_state(state)
    except ModelStateError:
        return
    model.predict_proba_one({"f": "a"})


@given(
    stats=st.fixed_dictionaries(
        {
            "class_weight": json_values,
            "total_weight": json_values,
            "present": json_values,
            "counts": json_values,
        }
    )
)
def test_untrusted_statistics_raise_only_model_state_error(stats: dict[str, Any]) -> None:
    state = broken(("stats",), stats)
    try:
        model = Learner.from_state(state)
    except ModelStateError:
        return
    model.predict_proba_one({"f": "a"})


def test_a_subclass_hook_contract() -> None:
    """A minimal learner implementing only the hooks gets the whole protocol."""

    class CountOnly(Learner):
        def __init__(self, *, half_life: float | None = None) -> None:
            super().__init__(half_life=half_life)
            self.counts: dict[Hashable, float] = {}

        def _params(self) -> dict[str, Any]:
            return {}

        def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
            self.counts[y] = self.counts.get(y, 0.0) + w

        def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
            return {y: math.log(n) for y, n in self.counts.items()}

        def _merge(self, other: Any, factor: float) -> None:
            for y, n in other.counts.items():
                self.counts[y] = self.counts.get(y, 0.0) + n * factor

        def _rescale(self, factor: float) -> None:
            self.counts = {y: n * factor for y, n in self.counts.items()}

        def _stats_to_state(self) -> Any:
            return [[y, n] for y, n in self.counts.items()]

        def _stats_from_state(self, stats: Any) -> None:
            self.counts = {y: float(n) for y, n in stats}

        def _size(self) -> tuple[int, int, int]:
            return len(self.counts), 0, len(self.counts)

    model = CountOnly(half_life=0.05)  # renormalises every few events
    for i in range(50):
        model.learn_one({}, i % 2)
    assert model.predict_one({}) == 1  # the last event dominates
    assert model.model_size() == {"classes": 2, "features": 0, "stored_counts": 2, "bytes": 200}
    copy_ = Learner.from_state(orjson.loads(orjson.dumps(model.to_state())))
    assert copy_.predict_log_proba_one({}) == model.predict_log_proba_one({})
    assert repr(copy_) == "CountOnly(half_life=0.05)"
    # registered by its name on definition (the fixture forgets it afterwards)
    assert Learner.registered()["CountOnly"] is CountOnly
    assert CountOnly.registered() == {"CountOnly": CountOnly}


def test_registered_learners_by_name() -> None:
    import stream_nb

    every = Learner.registered()
    exported = {n: getattr(stream_nb, n) for n in stream_nb.__all__}
    learners = {n: c for n, c in exported.items() if isinstance(c, type) and issubclass(c, Learner)}
    assert {n: c for n, c in every.items() if n in learners} == {
        n: c for n, c in learners.items() if c is not Learner
    }
    assert "Learner" not in every  # (the base itself is not a learner one can build)
    categorical = CategoricalNB.registered()  # it and its subclasses (other tests define some)
    assert categorical["CategoricalNB"] is CategoricalNB and "GaussianNB" not in categorical
    assert all(issubclass(c, CategoricalNB) for c in categorical.values())
    every.clear()  # a copy: the registry is unchanged
    assert "CategoricalNB" in Learner.registered()

    class _Private(CategoricalNB):
        pass

    assert "_Private" not in Learner.registered()  # a leading underscore: not registered


def test_predict_learn_many_is_predict_then_learn_event_by_event() -> None:
    import random

    from stream_nb import InvalidEventError, MultinomialNB

    rng = random.Random(4)
    xs = [{"a": rng.choice([0, 1, 2, -1]), "b": rng.randint(0, 3)} for _ in range(300)]
    ys = [rng.choice(["p", "q", None]) for _ in range(300)]
    ws = [rng.choice([1.0, 0.5, 2.0]) for _ in range(300)]
    batch, reference = MultinomialNB(), MultinomialNB()
    lps, preds, errors = batch.predict_learn_many(xs, ys, ws)
    for i, (x, y, w) in enumerate(zip(xs, ys, ws, strict=True)):
        try:
            want = reference.predict_log_proba_one(x)
        except InvalidEventError as exc:
            assert lps[i] is None and preds[i] is None and str(errors[i]) == str(exc)
            continue
        assert lps[i] == want and preds[i] == reference.predict_one(x)
        if y is not None:
            try:
                reference.learn_one(x, y, w)
            except InvalidEventError as exc:
                assert str(errors[i]) == str(exc)
                continue
        assert i not in errors
    assert errors and batch.to_state() == reference.to_state()


def test_deeply_nested_untrusted_state_is_a_model_state_error() -> None:
    model = CategoricalNB()
    model.learn_one({"f": "a"}, "x")
    state = orjson.loads(orjson.dumps(model.to_state()))
    nested: object = 1.0
    for _ in range(5000):
        nested = [nested]
    state["params"]["alpha"] = nested
    with pytest.raises(ModelStateError, match="malformed CategoricalNB state"):
        Learner.from_state(state)


# ---------------------------------------------------------------- capabilities and deltas
@pytest.mark.parametrize("cls", learner_params())
def test_declared_capabilities_match_what_the_class_implements(cls):
    caps = cls.capabilities
    assert caps.column_kernel == (cls.predict_learn_columns is not Learner.predict_learn_columns)
    assert caps.informative_features == (
        cls._informative_entries is not Learner._informative_entries
    )
    assert caps.structure == (cls.structure is not Learner.structure)


def test_a_tracked_delta_records_the_batch_kernel_which_keeps_the_columns():
    from stream_nb import GaussianNB

    model = GaussianNB()
    xs = [{"a": float(i % 5), "b": float(i % 3)} for i in range(300)]
    ys = [i % 2 for i in range(300)]
    model.predict_learn_many(xs[:100], ys[:100], [1.0] * 100)
    assert model.columns_supported
    base = Learner.from_state(model.to_state())
    model.track_delta()
    assert model.columns_supported  # (the kernel records into the delta itself)
    model.predict_learn_many(xs[100:], ys[100:], [1.0] * 200)  # the vectorised kernel
    delta, weight = model.cut_delta()
    assert (weight, delta.n_learned) == (200.0, 200)
    base.apply_delta(delta, weight)
    assert base.to_state()["stats"]["n"] == model.to_state()["stats"]["n"]
    for x in xs[:20]:  # Chan's merge of the moments equals learning them, to rounding
        rebuilt, learned = base.predict_proba_one(x), model.predict_proba_one(x)
        assert rebuilt.keys() == learned.keys()
        assert all(math.isclose(rebuilt[c], learned[c], rel_tol=1e-12) for c in learned)
    model.stop_delta()
    assert model.columns_supported and model.delta is None


def test_delta_api_errors_name_the_fix():
    from stream_nb import CategoricalNB, GaussianNB

    with pytest.raises(ConfigError, match="track_delta"):
        CategoricalNB().cut_delta()
    with pytest.raises(IncompatibleModelError, match="cannot record into a GaussianNB"):
        CategoricalNB().track_delta(GaussianNB())
