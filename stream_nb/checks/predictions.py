"""Checks of what a learner answers: probabilities, decisions, inputs left alone."""

from __future__ import annotations

import copy
import math
import random
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from stream_nb.base import Learner
from stream_nb.checks._support import (
    EXP_TOLERANCE,
    ROUNDING_TOLERANCE,
    SUM_TOLERANCE,
    Event,
    Factory,
    agree,
    close,
    dump,
    fail,
    learn_all,
    need,
    xs_of,
)

__all__ = [
    "check_cold_start",
    "check_feature_order",
    "check_input_not_mutated",
    "check_log_proba_consistent",
    "check_new_and_vanishing",
    "check_no_log_zero",
    "check_predict_does_not_learn",
    "check_proba_sums_to_one",
    "check_wide_events",
]

#: Weight of the "tiny" event of ``no_log_zero``: small but far from underflow.
_TINY_WEIGHT = 1e-6


def check_cold_start(factory: Factory, events: Sequence[Event]) -> None:
    """An untrained model returns ``{}`` and ``None`` and survives state and merge."""
    need(events, 1, "cold_start")
    x = events[0][0]
    for model in (
        factory(),
        Learner.from_state(orjson.loads(orjson.dumps(factory().to_state()))),
        factory().merge(factory()),
        learn_all(factory(), events).clone(),
    ):
        if model.predict_log_proba_one(x) != {}:
            raise fail("cold_start", model, "predict_log_proba_one must return {} before learning")
        if model.predict_proba_one(x) != {}:
            raise fail("cold_start", model, "predict_proba_one must return {} before learning")
        if model.predict_one(x) is not None:
            raise fail("cold_start", model, "predict_one must return None before learning")
        if model.n_learned != 0:
            raise fail("cold_start", model, f"n_learned is {model.n_learned}, expected 0")


def check_proba_sums_to_one(factory: Factory, events: Sequence[Event]) -> None:
    """Prequentially, probabilities lie in [0, 1] and sum to 1; log-probabilities are finite."""
    model = factory()
    for step, (x, y) in enumerate(events):
        model.learn_one(x, y)
        log_proba = model.predict_log_proba_one(events[(step + 1) % len(events)][0])
        if not log_proba:
            raise fail("proba_sums_to_one", model, f"no class scored after {step + 1} events")
        for c, lp in log_proba.items():
            if not (math.isfinite(lp) and lp <= SUM_TOLERANCE):
                raise fail("proba_sums_to_one", model, f"log P({c!r} | x) = {lp!r} at step {step}")
        proba = model.predict_proba_one(events[(step + 1) % len(events)][0])
        if any(not 0.0 <= p <= 1.0 for p in proba.values()):
            raise fail("proba_sums_to_one", model, f"probability outside [0, 1]: {proba!r}")
        total = math.fsum(proba.values())
        if abs(total - 1.0) > SUM_TOLERANCE:
            raise fail("proba_sums_to_one", model, f"probabilities sum to {total!r} at step {step}")


def check_log_proba_consistent(factory: Factory, events: Sequence[Event]) -> None:
    """``exp(log P) == P`` class by class, and ``predict_one`` is an argmax."""
    model = factory()
    for x, y in events:
        model.learn_one(x, y)
        log_proba = model.predict_log_proba_one(x)
        proba = model.predict_proba_one(x)
        if log_proba.keys() != proba.keys():
            raise fail("log_proba_consistent", model, "log-proba and proba name different classes")
        for c, lp in log_proba.items():
            if not math.isclose(math.exp(lp), proba[c], rel_tol=EXP_TOLERANCE, abs_tol=0.0):
                raise fail("log_proba_consistent", model, f"exp({lp!r}) != {proba[c]!r} for {c!r}")
        best = model.predict_one(x)
        top = max(log_proba.values())
        if best not in log_proba or not close(log_proba[best], top, ROUNDING_TOLERANCE):
            raise fail(
                "log_proba_consistent",
                model,
                f"predict_one gave {best!r}, not a most probable class",
            )


def check_predict_does_not_learn(factory: Factory, events: Sequence[Event]) -> None:
    """Predicting (even on new features) leaves the state unchanged."""
    model = learn_all(factory(), events[: len(events) // 2])
    before = dump(model)
    for x in xs_of(events):
        model.predict_log_proba_one(x)
        model.predict_proba_one(x)
        model.predict_one(x)
    if dump(model) != before:
        raise fail("predict_does_not_learn", model, "the state changed while predicting")


def check_input_not_mutated(factory: Factory, events: Sequence[Event]) -> None:
    """Neither ``x`` (values nor key order) nor ``y`` is changed."""
    model = factory()
    for x, y in events:
        x_before, y_before = copy.deepcopy(x), copy.deepcopy(y)
        model.predict_log_proba_one(x)
        model.learn_one(x, y)
        model.predict_proba_one(x)
        model.predict_one(x)
        if x != x_before or list(x) != list(x_before) or y != y_before:
            raise fail("input_not_mutated", model, f"x changed from {x_before!r} to {x!r}")


def check_feature_order(factory: Factory, events: Sequence[Event]) -> None:
    """Shuffling the features of every event changes nothing but rounding."""
    rng = random.Random(0)

    def shuffled(x: Mapping[str, Any]) -> dict[str, Any]:
        keys = list(x)
        rng.shuffle(keys)
        return {k: x[k] for k in keys}

    model = learn_all(factory(), events)
    other = learn_all(factory(), [(shuffled(x), y) for x, y in events])
    for x in xs_of(events):
        want = model.predict_log_proba_one(x)
        for candidate in (model, other):
            got = candidate.predict_log_proba_one(shuffled(x))
            if not agree(got, want, ROUNDING_TOLERANCE):
                raise fail("feature_order", model, f"answer depends on feature order for x={x!r}")


def check_new_and_vanishing(factory: Factory, events: Sequence[Event]) -> None:
    """Features may appear late, disappear, be unseen when predicting, or be absent."""
    need(events, 4, "new_and_vanishing")
    half = len(events) // 2
    model = factory()
    for i, (x, y) in enumerate(events):
        if i < half:
            event = dict(x)
        else:
            # vanishing: drop the first feature; new: a copy of a present value
            # under a never-seen name (same type, so valid for every learner)
            event = {k: v for j, (k, v) in enumerate(x.items()) if j > 0}
            if x:
                k, v = next(iter(x.items()))
                event[f"{k}@late{i % 3}"] = v
        model.learn_one(event, y)
        for probe in (
            event,
            {f"{k}@unseen": v for k, v in x.items()},
            {},
            {**x, **{f"{k}@unseen": v for k, v in x.items()}},
        ):
            proba = model.predict_proba_one(probe)
            total = math.fsum(proba.values())
            if not proba or abs(total - 1.0) > SUM_TOLERANCE:
                raise fail("new_and_vanishing", model, f"P(y | {probe!r}) = {proba!r}")
    # A feature never learned contributes nothing: adding it changes nothing.
    for x in xs_of(events):
        with_unseen = {**x, **{f"{k}@unseen": v for k, v in x.items()}}
        got, want = model.predict_log_proba_one(with_unseen), model.predict_log_proba_one(x)
        if not agree(got, want, ROUNDING_TOLERANCE):
            raise fail("new_and_vanishing", model, f"never-learned features changed P(y | {x!r})")


def check_no_log_zero(factory: Factory, events: Sequence[Event]) -> None:
    """No warning (turned into errors) and no exception on edge cases of ``log(0)``."""
    need(events, 2, "no_log_zero")
    numpy = sys.modules.get("numpy")  # only if the learner already imported it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        previous = numpy.seterr(all="raise") if numpy is not None else None
        try:
            x0, y0 = events[0]
            one_class = factory()
            one_class.learn_one(x0, y0)  # K = 1: log P(y) = 0
            tiny = factory()
            tiny.learn_one(x0, y0, _TINY_WEIGHT)
            model = factory()
            for x, y in events:
                model.learn_one(x, y)
            for m in (one_class, tiny, model):
                for x in [{}, *xs_of(events)]:
                    for c, lp in m.predict_log_proba_one(x).items():
                        if math.isnan(lp):
                            raise fail("no_log_zero", m, f"log P({c!r} | {x!r}) is NaN")
                    m.predict_one(x)
        except (ArithmeticError, ValueError, Warning) as exc:
            raise fail("no_log_zero", factory(), f"{type(exc).__name__}: {exc}") from exc
        finally:
            if numpy is not None and previous is not None:
                numpy.seterr(**previous)


#: Features per event in ``wide_events`` (the issue's stability bound).
_WIDE_FEATURES = 10_000
#: Events learned in ``wide_events``: enough for several classes, cheap at 10k features.
_WIDE_EVENTS = 8


def check_wide_events(factory: Factory, events: Sequence[Event]) -> None:
    """10,000 features per event give finite, normalised log-probabilities (no NaN/inf)."""
    model = factory()
    wide_events = []
    for x, y in events[:_WIDE_EVENTS]:
        copies = -(-_WIDE_FEATURES // max(1, len(x)))
        wide_events.append(({f"{k}#{i}": v for i in range(copies) for k, v in x.items()}, y))
    for x, y in wide_events:
        model.learn_one(x, y)
    for x, _ in wide_events:
        log_proba = model.predict_log_proba_one(x)
        if not log_proba or not all(
            math.isfinite(v) and v <= SUM_TOLERANCE for v in log_proba.values()
        ):
            raise fail(
                "wide_events", model, f"log-probabilities {log_proba!r} with {len(x)} features"
            )
        total = math.fsum(model.predict_proba_one(x).values())
        if abs(total - 1.0) > SUM_TOLERANCE:
            raise fail(
                "wide_events", model, f"probabilities sum to {total!r} with {len(x)} features"
            )
