"""Untrusted states: every learner's from_state raises ModelStateError naming the field, or
loads a model that works (finite, normalised predictions; it learns and saves again).

The fuzzer corrupts one place of a real state at a time (negative, zero, huge, non-finite
numbers, wrong types, missing fields, duplicated entries, another learner's name) and
accepts only those two outcomes: never KeyError, TypeError, OverflowError,
ZeroDivisionError, a raw ValueError, or a NaN later.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from learner_classes import public_learners

import stream_nb
from stream_nb import InvalidEventError, Learner, ModelStateError, PrequentialEvaluator
from stream_nb.checks import default_factory, suitable_events

LEARNERS = public_learners()
NAMES = [cls.__name__ for cls in LEARNERS]

_STATES: dict[str, tuple[dict[str, Any], list[Any]]] = {}


def trained(cls: type[Learner]) -> tuple[dict[str, Any], list[Any]]:
    """A JSON round-tripped state of ``cls`` trained on suitable events (cached), and events."""
    name = cls.__name__
    if name not in _STATES:
        events = suitable_events(cls, n=150, seed=3)
        params: dict[str, Any] = (
            {"warmup": 20, "rebuild_every": 50} if name in ("TAN", "KDB") else {}
        )
        if name in ("SPODE", "AODE"):
            params = {"warmup": 20}
        model = default_factory(cls, **params)()
        for x, y in events:
            model.learn_one(x, y)
        _STATES[name] = (orjson.loads(orjson.dumps(model.to_state())), events)
    state, events = _STATES[name]
    return copy.deepcopy(state), events


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON tree (dict keys and list indices), leaves and inner nodes."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield (*prefix, i)
            yield from paths(value, (*prefix, i))


def corrupt(state: Any, path: tuple[Any, ...], how: str) -> Any:
    """``state`` with the node at ``path`` replaced, deleted or duplicated."""
    parent = state
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if how == "delete":
        del parent[key]
    elif how == "duplicate":
        if isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        else:
            parent[key] = [parent[key], parent[key]]
    else:
        parent[key] = VALUES[how]
    return state


VALUES: dict[str, Any] = {
    "negative": -1.0,
    "negative_int": -7,
    "zero": 0.0,
    "huge": 1e308,
    "minus_huge": -1e308,
    "tiny": 5e-324,
    "nan": math.nan,
    "inf": math.inf,
    "string": "x",
    "none": None,
    "true": True,
    "list": [],
    "object": {},
    "nested": [[1.0, 2.0]],
    "big_int": 2**70,
    "tag": {"$int": "12x"},
}
HOW = [*VALUES, "delete", "duplicate"]


def exercise(model: Learner, events: list[Any]) -> None:
    """The loaded model predicts finite normalised posteriors, learns, and saves again."""
    for x, _y in events[:12]:
        try:
            log_proba = model.predict_log_proba_one(x)
            best = model.predict_one(x)
        except InvalidEventError:
            continue  # the event does not fit the (corrupted) model: a clean rejection
        assert all(math.isfinite(v) and v <= 1e-9 for v in log_proba.values()), log_proba
        if log_proba:
            assert abs(math.fsum(math.exp(v) for v in log_proba.values()) - 1.0) < 1e-6
            assert best in log_proba
    for x, y in events[:5]:
        with contextlib.suppress(InvalidEventError):
            model.learn_one(x, y)
    copy_ = Learner.from_state(orjson.loads(orjson.dumps(model.to_state())))
    assert copy_.n_learned == model.n_learned


def load_or_reject(state: Any, events: list[Any]) -> ModelStateError | None:
    try:
        model = Learner.from_state(state)
    except ModelStateError as exc:
        return exc
    exercise(model, events)
    return None


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60)
@given(data=st.data())
def test_semantic_corruption_raises_only_model_state_error(name: str, data: Any) -> None:
    cls = getattr(stream_nb, name)
    state, events = trained(cls)
    places = sorted(set(paths(state)), key=repr)
    path = data.draw(st.sampled_from(places), label="path")
    how = data.draw(st.sampled_from(HOW), label="how")
    load_or_reject(corrupt(state, path, how), events)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("how", ["negative", "huge", "nan", "string", "duplicate"])
def test_every_number_of_the_statistics_is_checked(name: str, how: str) -> None:
    """Each numeric leaf of the statistics, corrupted in turn (spread over the state)."""
    cls = getattr(stream_nb, name)
    state, events = trained(cls)
    leaves = [
        p
        for p in paths(state["stats"], ("stats",))
        if isinstance(_at(state, p), float) and not isinstance(_at(state, p), bool)
    ]
    step = max(1, len(leaves) // 40)
    for path in leaves[::step]:
        error = load_or_reject(corrupt(copy.deepcopy(state), path, how), events)
        if how in ("nan", "string") or (how == "negative" and not _signed(path)):
            assert error is not None, f"{name}: {how} at {path} was accepted"
            assert "malformed" in str(error) and ": " in str(error)


def _signed(path: tuple[Any, ...]) -> bool:
    """Numbers of a state that may be negative: means, cut points, raw feature values."""
    if "mean" in path or "edges" in path or "pending" in path:
        return True
    if "global" in path and path[path.index("global") + 1] == 1:
        return True
    return "samples" in path and path[path.index("samples") + 2] == 1


def _at(state: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        state = state[key]
    return state


@pytest.mark.parametrize("source", NAMES)
@pytest.mark.parametrize("target", NAMES)
def test_a_state_relabelled_as_another_learner_is_rejected(source: str, target: str) -> None:
    if source == target:
        return
    state, events = trained(getattr(stream_nb, source))
    state["learner"] = target
    error = load_or_reject(state, events)
    # the same statistics (a valid model of either learner; their params differ)
    pairs_alike = {
        frozenset(("MultinomialNB", "ComplementNB")),
        frozenset(("SPODE", "AODE")),
        frozenset(("TAN", "KDB")),
    }
    if frozenset((source, target)) not in pairs_alike:
        assert error is not None, f"a {source} state loaded as a {target}"
    # with its params fixed, even a look-alike layout is either rejected or consistent
    state, events = trained(getattr(stream_nb, source))
    state["learner"] = target
    state["params"] = orjson.loads(
        orjson.dumps(default_factory(getattr(stream_nb, target))().to_state()["params"])
    )
    load_or_reject(state, events)


def test_multinomial_state_labelled_bernoulli_names_the_field() -> None:
    state, _ = trained(stream_nb.MultinomialNB)
    state["learner"] = "BernoulliNB"
    state["params"] = {"alpha": 1.0, "binarize": 0.0, "fit_prior": True, "class_prior": None}
    with pytest.raises(ModelStateError, match=r"stats: unexpected field 'class_tokens'"):
        Learner.from_state(state)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("n_learned", math.inf, r"n_learned: must be a finite integer ≥ 0, got inf"),
        ("n_learned", -7, r"n_learned: must be a finite integer ≥ 0, got -7"),
        ("n_learned", 2.5, r"n_learned: must be a finite integer"),
        ("n_learned", True, r"n_learned: must be a finite integer"),
        ("scale", 0.0, r"scale: must be finite and > 0, got 0.0"),
        ("scale", math.nan, r"scale: must be finite and > 0, got nan"),
        ("format", "stream-nb/learner-v0", r"not a stream-nb learner state"),
        ("version", "1", r"unsupported learner state version '1'"),
        ("learner", ..., r"unknown learner None in state"),
        ("params", ..., r"state: missing field 'params'"),
    ],
)
def test_envelope_fields(field: str, value: Any, match: str) -> None:
    state, _ = trained(stream_nb.CategoricalNB)
    if value is ...:
        del state[field]
    else:
        state[field] = value
    with pytest.raises(ModelStateError, match=match):
        Learner.from_state(state)


def test_n_learned_of_integral_float_is_read_as_an_integer() -> None:
    state, _ = trained(stream_nb.CategoricalNB)
    state["n_learned"] = 150.0
    assert Learner.from_state(state).n_learned == 150


@pytest.mark.parametrize("name", NAMES)
def test_duplicate_class_labels_are_rejected(name: str) -> None:
    cls = getattr(stream_nb, name)
    state, _ = trained(cls)
    stats = state["stats"]
    holder = stats.get("store", {}).get("nb", stats) if "store" in stats else stats
    holder = holder.get("gaussian", holder)
    key = "classes" if "classes" in holder else "class_weight"
    holder[key].append(copy.deepcopy(holder[key][0]))
    with pytest.raises(ModelStateError, match=r"duplicate key"):
        Learner.from_state(state)


def test_negative_class_weight_names_the_field() -> None:
    state, _ = trained(stream_nb.CategoricalNB)
    state["stats"]["class_weight"][0][1] = -1.0
    label = state["stats"]["class_weight"][0][0]
    with pytest.raises(
        ModelStateError,
        match=rf"stats.class_weight\['?{label}'?\]: must be finite and ≥ 0, got -1.0",
    ):
        Learner.from_state(state)


def test_negative_class_prior_is_a_state_error() -> None:
    state, _ = trained(stream_nb.CategoricalNB)
    state["params"]["class_prior"] = {"$map": [["a", -1.0]]}
    with pytest.raises(ModelStateError, match=r"class_prior\['a'\] must be a positive"):
        Learner.from_state(state)


def test_totals_must_match_their_parts() -> None:
    state, _ = trained(stream_nb.CategoricalNB)
    state["stats"]["total_weight"] *= 2
    with pytest.raises(ModelStateError, match=r"stats.total_weight: .* is not the sum of"):
        Learner.from_state(state)
    state, _ = trained(stream_nb.MultinomialNB)
    state["stats"]["class_tokens"][0][1] += 1000.0
    with pytest.raises(ModelStateError, match=r"stats.class_tokens\[.*\]: .* token counts"):
        Learner.from_state(state)


def test_bernoulli_count_above_its_class_weight_is_rejected() -> None:
    state, _ = trained(stream_nb.BernoulliNB)
    _token, by_class = state["stats"]["counts"][0]
    by_class[0][1] = 1e6
    with pytest.raises(ModelStateError, match=r"exceeds the class weight"):
        Learner.from_state(state)


def test_evaluator_state_fuzz() -> None:
    ev = PrequentialEvaluator(window=5)
    for i in range(30):
        ev.update(i % 3, (i * 7) % 3, {i % 3: -0.5})
    good = orjson.loads(orjson.dumps(ev.to_state()))
    for path in sorted(set(paths(good)), key=repr):
        for how in ("negative", "huge", "nan", "string", "delete", "duplicate", "big_int"):
            state = corrupt(copy.deepcopy(good), path, how)
            try:
                loaded = PrequentialEvaluator.from_state(state)
            except ModelStateError:
                continue
            report = loaded.report()
            assert report["cumulative"]["n"] >= 0
            loaded.update(1, 1, {1: -0.1})
            PrequentialEvaluator.from_state(orjson.loads(orjson.dumps(loaded.to_state())))
