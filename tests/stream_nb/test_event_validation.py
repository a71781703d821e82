"""learn_one rejects what a saved state could not hold, with a bounded reason and no change;
integers of any size are kept exactly through states."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson
import pytest
from learner_classes import learner_params

import stream_nb
from stream_nb import (
    AODE,
    KDB,
    SPODE,
    TAN,
    CategoricalNB,
    InvalidEventError,
    Learner,
    MultinomialNB,
    NaiveBayes,
)
from stream_nb._state import decode_key, decode_value, encode_key, encode_value
from stream_nb.checks import default_factory, suitable_events

LEARNERS = learner_params()


def trained(cls: type[Learner], **params: Any) -> tuple[Learner, list[Any]]:
    events = suitable_events(cls, n=60, seed=5)
    model = default_factory(cls, **params)()
    for x, y in events:
        model.learn_one(x, y)
    return model, events


def dump(model: Learner) -> bytes:
    return orjson.dumps(model.to_state())


def round_trip(model: Learner) -> Learner:
    return Learner.from_state(orjson.loads(dump(model)))


def assert_rejected(model: Learner, x: Any, y: Any, reason: str, match: str | None = None) -> None:
    before = dump(model)
    with pytest.raises(InvalidEventError, match=match) as info:
        model.learn_one(x, y)
    assert info.value.reason == reason
    assert dump(model) == before


@pytest.mark.parametrize("cls", LEARNERS)
def test_nan_label_is_rejected_not_a_new_class_per_event(cls: type[Learner]) -> None:
    model, events = trained(cls)
    n_classes = model.model_size()["classes"]
    for _ in range(3):
        assert_rejected(model, events[0][0], math.nan, "invalid_label", "NaN is not equal")
    assert model.model_size()["classes"] == n_classes


@pytest.mark.parametrize("cls", LEARNERS)
@pytest.mark.parametrize(
    "label", [("a", "b"), frozenset({1}), b"raw", object(), None, math.inf, -math.inf, [1], {}]
)
def test_labels_a_state_could_not_hold_are_rejected(cls: type[Learner], label: Any) -> None:
    model, events = trained(cls)
    assert_rejected(model, events[0][0], label, "invalid_label", "label")


@pytest.mark.parametrize("cls", LEARNERS)
@pytest.mark.parametrize("x", [None, ["a", "b"], "a=1", 3, [("a", 1)]])
def test_x_that_is_not_a_mapping_is_an_invalid_event(cls: type[Learner], x: Any) -> None:
    model, events = trained(cls)
    assert_rejected(model, x, events[0][1], "invalid_features", "features must be a mapping")
    for predict in (model.predict_one, model.predict_proba_one, model.predict_log_proba_one):
        with pytest.raises(InvalidEventError, match="features must be a mapping") as info:
            predict(x)
        assert info.value.reason == "invalid_features"
    _lps, _preds, errors = model.predict_learn_many([x], [events[0][1]], [1.0])
    assert isinstance(errors[0], InvalidEventError)


@pytest.mark.parametrize("cls", LEARNERS)
@pytest.mark.parametrize("name", [("a", "b"), None, math.nan, b"f", frozenset({"a"})])
def test_feature_names_a_state_could_not_hold_are_rejected(cls: type[Learner], name: Any) -> None:
    model, events = trained(cls)
    x, y = events[0]
    value = next(iter(x.values()))
    assert_rejected(model, {**x, name: value}, y, "invalid_features", "feature name")
    assert_rejected(model, {name: value}, y, "invalid_features", "feature name")


@pytest.mark.parametrize("cls", [CategoricalNB, NaiveBayes, SPODE, AODE, TAN, KDB])
@pytest.mark.parametrize("value", [b"bytes", ("a", 1), frozenset({1}), math.inf])
def test_categorical_values_a_state_could_not_hold_are_rejected(
    cls: type[Learner], value: Any
) -> None:
    params = {} if cls is CategoricalNB else {"schema": {"c": "categorical"}}  # inf: a category
    model, events = trained(cls, **params)
    x, y = events[0]
    assert_rejected(model, {**x, "c": value}, y, "invalid_features", "cannot be a category")


def test_nan_category_is_rejected_with_a_hint() -> None:
    model, _ = trained(CategoricalNB)
    assert_rejected(model, {"f0": math.nan}, "a", "invalid_features", "send None for a missing")


def test_bytes_value_in_categorical_was_learned_but_could_not_be_saved() -> None:
    """Before the check: learned, then to_state could not be dumped."""
    model = CategoricalNB()
    model.learn_one({"f": "x"}, "a")
    with pytest.raises(InvalidEventError):
        model.learn_one({"f": b"x"}, "a")
    orjson.dumps(model.to_state())  # still saveable


@pytest.mark.parametrize("cls", [CategoricalNB, NaiveBayes, MultinomialNB])
def test_unhashable_label_is_an_invalid_event(cls: type[Learner]) -> None:
    model, events = trained(cls)
    assert_rejected(model, events[0][0], {"a": 1}, "invalid_label")


def test_numpy_labels_are_kept_as_builtin_values() -> None:
    model = CategoricalNB()
    model.learn_one({"f": "x"}, np.int64(3))
    model.learn_one({"f": "y"}, np.str_("b"))
    model.learn_one({"f": "z"}, np.float64(1.5))
    model.learn_one({"f": "z"}, np.bool_(True))
    labels = list(model.predict_proba_one({"f": "x"}))
    assert labels == [3, "b", 1.5, True]
    assert [type(c) for c in labels] == [int, str, float, bool]
    assert round_trip(model).predict_proba_one({"f": "x"}) == model.predict_proba_one({"f": "x"})


def test_a_rejected_event_does_not_decay_a_forgetting_model() -> None:
    model = CategoricalNB(half_life=3)
    for i in range(10):
        model.learn_one({"f": str(i % 3)}, i % 2)
    before = dump(model)
    with pytest.raises(InvalidEventError):
        model.learn_one({"f": b"x"}, 0)
    with pytest.raises(InvalidEventError):
        model.learn_one({"f": "0"}, math.nan)
    assert dump(model) == before


# ---------------------------------------------------------------------- big integers
BIG = [2**64, 2**64 + 1, -(2**63) - 1, 2**70, 10**40, -(10**30), 2**20_000 + 7]


@pytest.mark.parametrize("value", BIG, ids=lambda v: f"{v.bit_length()}bits")
def test_integer_tags_round_trip_exactly(value: int) -> None:
    data = orjson.dumps(encode_key(value))
    assert decode_key(orjson.loads(data)) == value
    assert decode_value(orjson.loads(orjson.dumps(encode_value({value: [value]})))) == {
        value: [value]
    }


def test_small_integers_are_plain_json_as_before() -> None:
    assert encode_key(2**63 - 1) == 2**63 - 1
    assert encode_key(-(2**63)) == -(2**63)
    assert encode_key(True) is True


@pytest.mark.parametrize("tag", [{"$int": "1x"}, {"$int": 5}, {"$int": "1", "x": 1}, {"$int": ""}])
def test_malformed_integer_tags_are_state_errors(tag: Any) -> None:
    model = CategoricalNB()
    model.learn_one({"f": "x"}, "a")
    state = orjson.loads(dump(model))
    state["stats"]["class_weight"][0][0] = tag
    with pytest.raises(stream_nb.ModelStateError, match=r"stats.class_weight\[0\]"):
        Learner.from_state(state)


@pytest.mark.parametrize("cls", LEARNERS)
def test_labels_beyond_64_bits_are_exact_after_a_state(cls: type[Learner]) -> None:
    model, events = trained(cls)
    ids = [2**64 + 1, 2**64 + 2, 2**70]  # equal once rounded to a double
    for i, label in enumerate(ids):
        for x, _ in events[i::3][:5]:
            model.learn_one(x, label)
    copied = round_trip(model)
    assert dump(copied) == dump(model)
    got = [c for c in copied.predict_log_proba_one(events[0][0]) if isinstance(c, int)]
    assert set(ids) <= set(got)
    assert copied.predict_log_proba_one(events[1][0]) == model.predict_log_proba_one(events[1][0])


@pytest.mark.parametrize("cls", [CategoricalNB, NaiveBayes, SPODE, KDB])
def test_categorical_values_and_names_beyond_64_bits_stay_distinct(cls: type[Learner]) -> None:
    params = {"schema": {"id": "categorical"}} if cls is NaiveBayes else {}
    if cls in (SPODE, KDB):
        params = {"schema": {"id": "categorical"}}
    model = default_factory(cls, **params)()
    a, b = 18446744073709551617, 18446744073709551618
    for _ in range(5):
        model.learn_one({"id": a, 2**70: "x"}, "first")
        model.learn_one({"id": b, 2**70: "y"}, "second")
    copied = round_trip(model)
    assert dump(copied) == dump(model)
    assert copied.predict_one({"id": a}) == "first"
    assert copied.predict_one({"id": b}) == "second"
    assert copied.predict_one({2**70: "y"}) == "second"


def test_numeric_values_beyond_64_bits_in_a_warm_up_sample_are_exact() -> None:
    model = SPODE(parent="t", warmup=50)
    for i in range(10):
        model.learn_one({"t": 2**70 + i, "c": "x"}, i % 2)
    state = orjson.loads(dump(model))
    copied = Learner.from_state(state)
    assert copied._disc.samples["t"][0] == [2**70 + i for i in range(10)]
    assert dump(copied) == dump(model)


def test_evaluator_keeps_big_integer_labels() -> None:
    ev = stream_nb.PrequentialEvaluator()
    ev.update(2**70, 2**70 + 1, {2**70: -0.1})
    copied = stream_nb.PrequentialEvaluator.from_state(orjson.loads(orjson.dumps(ev.to_state())))
    assert copied.report() == ev.report()
    assert copied.report()["cumulative"]["confusion"] == [[2**70, 2**70 + 1, 1]]
