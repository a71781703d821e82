"""Checks of what a learner keeps: states, merges, weights, and what it must refuse."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import orjson

from stream_nb._exceptions import InvalidEventError
from stream_nb.base import Learner
from stream_nb.checks._support import (
    ROUNDING_TOLERANCE,
    Event,
    Factory,
    assert_same_predictions,
    dump,
    fail,
    learn_all,
    need,
    xs_of,
)

__all__ = [
    "check_chunked_learning",
    "check_merge_identity",
    "check_merge_union",
    "check_state_round_trip",
    "check_unsaveable_rejected",
    "check_weight_repetition",
]


def check_state_round_trip(factory: Factory, events: Sequence[Event]) -> None:
    """``to_state`` → JSON bytes → ``from_state`` predicts identically, also after more learning."""
    need(events, 2, "state_round_trip")
    half = len(events) // 2
    model = learn_all(factory(), events[:half])
    state = orjson.loads(orjson.dumps(model.to_state()))
    for loader in (Learner.from_state, type(model).from_state):
        copied = loader(state)
        if type(copied) is not type(model) or copied.get_params() != model.get_params():
            raise fail("state_round_trip", model, f"from_state built {copied!r}")
        if copied.n_learned != model.n_learned:
            raise fail("state_round_trip", model, "n_learned was not restored")
        if dump(copied) != dump(model):
            raise fail("state_round_trip", model, "to_state of the copy differs from the original")
        assert_same_predictions("state_round_trip", copied, model, xs_of(events), 0.0)
    copied = Learner.from_state(state)
    learn_all(model, events[half:])
    learn_all(copied, events[half:])
    assert_same_predictions("state_round_trip", copied, model, xs_of(events), 0.0)
    if dump(copied) != dump(model):
        raise fail("state_round_trip", model, "states diverged after learning the same events")


def check_merge_identity(factory: Factory, events: Sequence[Event]) -> None:
    """Merging an untrained model in either direction changes no prediction."""
    model = learn_all(factory(), events)
    reference = learn_all(factory(), events)
    assert_same_predictions(
        "merge_identity", model.merge(factory()), reference, xs_of(events), ROUNDING_TOLERANCE
    )
    merged = factory().merge(reference)
    if merged.n_learned != reference.n_learned:
        raise fail("merge_identity", model, "n_learned is not carried by merge")
    assert_same_predictions("merge_identity", merged, reference, xs_of(events), ROUNDING_TOLERANCE)


def check_merge_union(factory: Factory, events: Sequence[Event]) -> None:
    """Learning A then merging a model of B equals learning A then B in one model."""
    need(events, 2, "merge_union")
    half = len(events) // 2
    a = learn_all(factory(), events[:half])
    b = learn_all(factory(), events[half:])
    if a.merge(b) is not a:
        raise fail("merge_union", a, "merge must return self")
    union = learn_all(factory(), events)
    if a.n_learned != union.n_learned:
        raise fail("merge_union", a, f"n_learned {a.n_learned} != {union.n_learned}")
    assert_same_predictions("merge_union", a, union, xs_of(events), ROUNDING_TOLERANCE)


def check_chunked_learning(factory: Factory, events: Sequence[Event]) -> None:
    """Three models on three chunks, merged, equal one pass over all events."""
    need(events, 3, "chunked_learning")
    size = -(-len(events) // 3)
    chunks = [learn_all(factory(), events[i : i + size]) for i in range(0, len(events), size)]
    one_pass = learn_all(factory(), events)
    merged = factory()
    for chunk in chunks:
        merged.merge(chunk)
    assert_same_predictions("chunked_learning", merged, one_pass, xs_of(events), ROUNDING_TOLERANCE)


def check_weight_repetition(factory: Factory, events: Sequence[Event]) -> None:
    """Learning an event with ``w=2`` equals learning it twice, at every step.

    Every other event has ``w=2`` (a uniform factor on all events could hide
    a wrong weighting behind the normalisation).
    """
    weighted, repeated = factory(), factory()
    for i, (x, y) in enumerate(events):
        if i % 2:
            weighted.learn_one(x, y)
            repeated.learn_one(x, y)
            continue
        weighted.learn_one(x, y, 2.0)
        repeated.learn_one(x, y)
        repeated.learn_one(x, y)
        assert_same_predictions("weight_repetition", weighted, repeated, [x], ROUNDING_TOLERANCE)


#: Labels no saved state could hold, with the reason each must be rejected with.
_BAD_LABELS: tuple[tuple[Any, str], ...] = (
    (("a", 1), "invalid_label"),
    (None, "invalid_label"),
    (math.nan, "invalid_label"),
    (math.inf, "invalid_label"),
    (b"bytes", "invalid_label"),
    (object(), "invalid_label"),
    ([1], "invalid_label"),
)
#: A label beyond 64 bits (orjson cannot write it as a plain number).
_BIG_LABEL = 2**70 + 1


def check_unsaveable_rejected(factory: Factory, events: Sequence[Event]) -> None:
    """What a state could not hold is rejected at ``learn_one``; big integers survive exactly."""
    need(events, 2, "unsaveable_rejected")
    model = learn_all(factory(), events[: len(events) // 2])
    before = dump(model)
    x, y = events[-1]

    def rejected(x: Any, y: Any, reason: str, what: str) -> None:
        try:
            model.learn_one(x, y)
        except InvalidEventError as exc:
            if exc.reason != reason:
                raise fail(
                    "unsaveable_rejected", model, f"{what}: reason {exc.reason!r}, not {reason!r}"
                ) from None
        else:
            raise fail("unsaveable_rejected", model, f"{what} was learned")
        if dump(model) != before:
            raise fail("unsaveable_rejected", model, f"rejecting {what} changed the model")

    for label, reason in _BAD_LABELS:
        rejected(x, label, reason, f"label {label!r}")
    for bad_x in ([("f", 1)], None, "f=1"):
        rejected(bad_x, y, "invalid_features", f"x={bad_x!r}")
    if x:
        value = next(iter(x.values()))
        bad_names: tuple[Any, ...] = (("f", "g"), None, math.nan, b"f")
        for bad_name in bad_names:
            bad: dict[Any, Any] = {**x, bad_name: value}
            rejected(bad, y, "invalid_features", f"feature name {bad_name!r}")
    model.learn_one(x, _BIG_LABEL)
    copied = Learner.from_state(orjson.loads(dump(model)))
    labels = [c for c in copied.predict_log_proba_one(x) if c == _BIG_LABEL]
    if [type(c) for c in labels] != [int] or dump(copied) != dump(model):
        raise fail("unsaveable_rejected", model, f"label {_BIG_LABEL} did not survive a state")
