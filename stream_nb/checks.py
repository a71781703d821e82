"""Generic checks that every learner must pass, for ours and for yours.

Each check takes a ``factory`` (a no-argument callable returning a fresh,
untrained learner) and a list of ``(x, y)`` events suited to that learner, and
raises :class:`AssertionError` naming the check and the learner when the
learner breaks the protocol of :class:`stream_nb.base.Learner`:

===========================  ==========================================================
check                        property
===========================  ==========================================================
``cold_start``               an untrained model predicts ``{}`` / ``None``, also after a
                             state round trip and a merge of untrained models
``proba_sums_to_one``        every step: probabilities in [0, 1] summing to 1, finite
                             log-probabilities ≤ 0
``log_proba_consistent``     ``exp(predict_log_proba_one) == predict_proba_one`` and
                             ``predict_one`` is a most probable class
``predict_does_not_learn``   predicting leaves the state unchanged
``input_not_mutated``        ``x`` is not changed by learning or predicting
``feature_order``            shuffled feature order gives the same model and answers
``new_and_vanishing``        features appearing late, disappearing, unseen at
                             prediction time, and an empty ``x`` are handled
``state_round_trip``         ``to_state`` → orjson → ``from_state`` predicts identically,
                             before and after further learning
``merge_identity``           merging with an untrained model changes nothing
``merge_union``              learning A, merging B equals learning A then B
``chunked_learning``         several models merged equal one pass over all events
``weight_repetition``        ``w=2`` equals learning the event twice
``no_log_zero``              no warning (run as errors) and no exception from
                             ``log(0)`` on edge cases: one class, tiny weights, ``{}``
``wide_events``              10,000 features per event: finite, normalised answers
``unsaveable_rejected``      labels and feature names a state could not hold (tuples,
                             ``None``, NaN, objects), unhashable labels and a non-mapping
                             ``x`` raise ``InvalidEventError`` with a bounded reason and
                             change nothing; integers beyond 64 bits (labels, names)
                             survive a JSON state exactly
===========================  ==========================================================

A learner may be exempt from a check only with a written reason, e.g.
``weight_repetition`` and ``merge_union`` do not hold with forgetting
(``half_life``), where order matters by design.

Examples
--------
>>> from stream_nb import CategoricalNB
>>> from stream_nb.checks import check_learner
>>> from stream_nb.datasets import categorical_stream
>>> events = list(categorical_stream(seed=1, n=60, missing=0.2))
>>> ran = check_learner(CategoricalNB, events)
>>> len(ran) == len(CHECKS)
True
>>> ran = check_learner(
...     lambda: CategoricalNB(half_life=20),
...     events,
...     exempt={
...         "merge_union": "with forgetting, A's events are decayed by B's",
...         "chunked_learning": "same reason as merge_union",
...         "weight_repetition": "two events decay the first copy once more",
...     },
... )
>>> "merge_union" in ran
False
"""

from __future__ import annotations

import copy
import math
import random
import sys
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from stream_nb._exceptions import InvalidEventError
from stream_nb.base import Learner
from stream_nb.datasets import agrawal, categorical_stream, mixed_stream, zipf_text

__all__ = [
    "CHECKS",
    "Check",
    "check_learner",
    "default_factory",
    "suitable_events",
    "yield_checks",
]

Event = tuple[Mapping[str, Any], Hashable]
Factory = Callable[[], Learner]

#: |Σ p − 1| allowed: exp() and the sum each round once per class.
_SUM_TOLERANCE = 1e-9
#: exp(log p) vs p, relative: a learner may compute both paths separately.
_EXP_TOLERANCE = 1e-12
#: Log-probabilities from a different summation order (shuffled features, a
#: merge instead of one pass, w=2 instead of two events) differ by rounding
#: only; relative to max(1, |log p|).
_ROUNDING_TOLERANCE = 1e-9
#: Weight of the "tiny" event of ``no_log_zero``: small but far from underflow.
_TINY_WEIGHT = 1e-6


# ---------------------------------------------------------------------- helpers
def _fail(check: str, model: Learner, message: str) -> AssertionError:
    return AssertionError(f"check {check!r} failed for {model!r}: {message}")


def _learn_all(model: Learner, events: Sequence[Event]) -> Learner:
    for x, y in events:
        model.learn_one(x, y)
    return model


def _close(a: float, b: float, tolerance: float) -> bool:
    if a == b:  # also -inf == -inf
        return True
    return abs(a - b) <= tolerance * max(1.0, abs(a), abs(b))


def _assert_same_predictions(
    check: str,
    model: Learner,
    reference: Learner,
    xs: Sequence[Mapping[str, Any]],
    tolerance: float,
) -> None:
    """Log-probabilities of ``model`` and ``reference`` agree on every ``x``."""
    for x in xs:
        got = model.predict_log_proba_one(x)
        want = reference.predict_log_proba_one(x)
        if got.keys() != want.keys():
            raise _fail(
                check,
                model,
                f"classes {sorted(map(repr, got))} != {sorted(map(repr, want))} for x={x!r}",
            )
        for c, v in want.items():
            if not _close(got[c], v, tolerance):
                raise _fail(
                    check, model, f"log P({c!r} | x) = {got[c]!r}, expected {v!r} (x={x!r})"
                )


def _dump(model: Learner) -> bytes:
    return orjson.dumps(model.to_state())


def _xs(events: Sequence[Event]) -> list[Mapping[str, Any]]:
    return [x for x, _ in events]


def _need(events: Sequence[Event], n: int, check: str) -> None:
    if len(events) < n:
        raise ValueError(f"check {check!r} needs at least {n} events, got {len(events)}")


# ---------------------------------------------------------------------- checks
def check_cold_start(factory: Factory, events: Sequence[Event]) -> None:
    """An untrained model returns ``{}`` and ``None`` and survives state and merge."""
    _need(events, 1, "cold_start")
    x = events[0][0]
    for model in (
        factory(),
        Learner.from_state(orjson.loads(orjson.dumps(factory().to_state()))),
        factory().merge(factory()),
        _learn_all(factory(), events).clone(),
    ):
        if model.predict_log_proba_one(x) != {}:
            raise _fail("cold_start", model, "predict_log_proba_one must return {} before learning")
        if model.predict_proba_one(x) != {}:
            raise _fail("cold_start", model, "predict_proba_one must return {} before learning")
        if model.predict_one(x) is not None:
            raise _fail("cold_start", model, "predict_one must return None before learning")
        if model.n_learned != 0:
            raise _fail("cold_start", model, f"n_learned is {model.n_learned}, expected 0")


def check_proba_sums_to_one(factory: Factory, events: Sequence[Event]) -> None:
    """Prequentially, probabilities lie in [0, 1] and sum to 1; log-probabilities are finite."""
    model = factory()
    for step, (x, y) in enumerate(events):
        model.learn_one(x, y)
        log_proba = model.predict_log_proba_one(events[(step + 1) % len(events)][0])
        if not log_proba:
            raise _fail("proba_sums_to_one", model, f"no class scored after {step + 1} events")
        for c, lp in log_proba.items():
            if not (math.isfinite(lp) and lp <= _SUM_TOLERANCE):
                raise _fail("proba_sums_to_one", model, f"log P({c!r} | x) = {lp!r} at step {step}")
        proba = model.predict_proba_one(events[(step + 1) % len(events)][0])
        if any(not 0.0 <= p <= 1.0 for p in proba.values()):
            raise _fail("proba_sums_to_one", model, f"probability outside [0, 1]: {proba!r}")
        total = math.fsum(proba.values())
        if abs(total - 1.0) > _SUM_TOLERANCE:
            raise _fail(
                "proba_sums_to_one", model, f"probabilities sum to {total!r} at step {step}"
            )


def check_log_proba_consistent(factory: Factory, events: Sequence[Event]) -> None:
    """``exp(log P) == P`` class by class, and ``predict_one`` is an argmax."""
    model = factory()
    for x, y in events:
        model.learn_one(x, y)
        log_proba = model.predict_log_proba_one(x)
        proba = model.predict_proba_one(x)
        if log_proba.keys() != proba.keys():
            raise _fail("log_proba_consistent", model, "log-proba and proba name different classes")
        for c, lp in log_proba.items():
            if not math.isclose(math.exp(lp), proba[c], rel_tol=_EXP_TOLERANCE, abs_tol=0.0):
                raise _fail("log_proba_consistent", model, f"exp({lp!r}) != {proba[c]!r} for {c!r}")
        best = model.predict_one(x)
        top = max(log_proba.values())
        if best not in log_proba or not _close(log_proba[best], top, _ROUNDING_TOLERANCE):
            raise _fail(
                "log_proba_consistent",
                model,
                f"predict_one gave {best!r}, not a most probable class",
            )


def check_predict_does_not_learn(factory: Factory, events: Sequence[Event]) -> None:
    """Predicting (even on new features) leaves the state unchanged."""
    model = _learn_all(factory(), events[: len(events) // 2])
    before = _dump(model)
    for x in _xs(events):
        model.predict_log_proba_one(x)
        model.predict_proba_one(x)
        model.predict_one(x)
    if _dump(model) != before:
        raise _fail("predict_does_not_learn", model, "the state changed while predicting")


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
            raise _fail("input_not_mutated", model, f"x changed from {x_before!r} to {x!r}")


def check_feature_order(factory: Factory, events: Sequence[Event]) -> None:
    """Shuffling the features of every event changes nothing but rounding."""
    rng = random.Random(0)

    def shuffled(x: Mapping[str, Any]) -> dict[str, Any]:
        keys = list(x)
        rng.shuffle(keys)
        return {k: x[k] for k in keys}

    model = _learn_all(factory(), events)
    other = _learn_all(factory(), [(shuffled(x), y) for x, y in events])
    for x in _xs(events):
        want = model.predict_log_proba_one(x)
        for candidate in (model, other):
            got = candidate.predict_log_proba_one(shuffled(x))
            if got.keys() != want.keys() or not all(
                _close(got[c], want[c], _ROUNDING_TOLERANCE) for c in want
            ):
                raise _fail("feature_order", model, f"answer depends on feature order for x={x!r}")


def check_new_and_vanishing(factory: Factory, events: Sequence[Event]) -> None:
    """Features may appear late, disappear, be unseen when predicting, or be absent."""
    _need(events, 4, "new_and_vanishing")
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
            if not proba or abs(total - 1.0) > _SUM_TOLERANCE:
                raise _fail("new_and_vanishing", model, f"P(y | {probe!r}) = {proba!r}")
    # A feature never learned contributes nothing: adding it changes nothing.
    for x in _xs(events):
        with_unseen = {**x, **{f"{k}@unseen": v for k, v in x.items()}}
        got, want = model.predict_log_proba_one(with_unseen), model.predict_log_proba_one(x)
        if got.keys() != want.keys() or not all(
            _close(got[c], want[c], _ROUNDING_TOLERANCE) for c in want
        ):
            raise _fail("new_and_vanishing", model, f"never-learned features changed P(y | {x!r})")


def check_state_round_trip(factory: Factory, events: Sequence[Event]) -> None:
    """``to_state`` → JSON bytes → ``from_state`` predicts identically, also after more learning."""
    _need(events, 2, "state_round_trip")
    half = len(events) // 2
    model = _learn_all(factory(), events[:half])
    state = orjson.loads(orjson.dumps(model.to_state()))
    for loader in (Learner.from_state, type(model).from_state):
        copied = loader(state)
        if type(copied) is not type(model) or copied.get_params() != model.get_params():
            raise _fail("state_round_trip", model, f"from_state built {copied!r}")
        if copied.n_learned != model.n_learned:
            raise _fail("state_round_trip", model, "n_learned was not restored")
        if _dump(copied) != _dump(model):
            raise _fail("state_round_trip", model, "to_state of the copy differs from the original")
        _assert_same_predictions("state_round_trip", copied, model, _xs(events), 0.0)
    copied = Learner.from_state(state)
    _learn_all(model, events[half:])
    _learn_all(copied, events[half:])
    _assert_same_predictions("state_round_trip", copied, model, _xs(events), 0.0)
    if _dump(copied) != _dump(model):
        raise _fail("state_round_trip", model, "states diverged after learning the same events")


def check_merge_identity(factory: Factory, events: Sequence[Event]) -> None:
    """Merging an untrained model in either direction changes no prediction."""
    model = _learn_all(factory(), events)
    reference = _learn_all(factory(), events)
    _assert_same_predictions(
        "merge_identity", model.merge(factory()), reference, _xs(events), _ROUNDING_TOLERANCE
    )
    merged = factory().merge(reference)
    if merged.n_learned != reference.n_learned:
        raise _fail("merge_identity", model, "n_learned is not carried by merge")
    _assert_same_predictions("merge_identity", merged, reference, _xs(events), _ROUNDING_TOLERANCE)


def check_merge_union(factory: Factory, events: Sequence[Event]) -> None:
    """Learning A then merging a model of B equals learning A then B in one model."""
    _need(events, 2, "merge_union")
    half = len(events) // 2
    a = _learn_all(factory(), events[:half])
    b = _learn_all(factory(), events[half:])
    if a.merge(b) is not a:
        raise _fail("merge_union", a, "merge must return self")
    union = _learn_all(factory(), events)
    if a.n_learned != union.n_learned:
        raise _fail("merge_union", a, f"n_learned {a.n_learned} != {union.n_learned}")
    _assert_same_predictions("merge_union", a, union, _xs(events), _ROUNDING_TOLERANCE)


def check_chunked_learning(factory: Factory, events: Sequence[Event]) -> None:
    """Three models on three chunks, merged, equal one pass over all events."""
    _need(events, 3, "chunked_learning")
    size = -(-len(events) // 3)
    chunks = [_learn_all(factory(), events[i : i + size]) for i in range(0, len(events), size)]
    one_pass = _learn_all(factory(), events)
    merged = factory()
    for chunk in chunks:
        merged.merge(chunk)
    _assert_same_predictions("chunked_learning", merged, one_pass, _xs(events), _ROUNDING_TOLERANCE)


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
        _assert_same_predictions("weight_repetition", weighted, repeated, [x], _ROUNDING_TOLERANCE)


def check_no_log_zero(factory: Factory, events: Sequence[Event]) -> None:
    """No warning (turned into errors) and no exception on edge cases of ``log(0)``."""
    _need(events, 2, "no_log_zero")
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
                for x in [{}, *_xs(events)]:
                    for c, lp in m.predict_log_proba_one(x).items():
                        if math.isnan(lp):
                            raise _fail("no_log_zero", m, f"log P({c!r} | {x!r}) is NaN")
                    m.predict_one(x)
        except (ArithmeticError, ValueError, Warning) as exc:
            raise _fail("no_log_zero", factory(), f"{type(exc).__name__}: {exc}") from exc
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
            math.isfinite(v) and v <= _SUM_TOLERANCE for v in log_proba.values()
        ):
            raise _fail(
                "wide_events", model, f"log-probabilities {log_proba!r} with {len(x)} features"
            )
        total = math.fsum(model.predict_proba_one(x).values())
        if abs(total - 1.0) > _SUM_TOLERANCE:
            raise _fail(
                "wide_events", model, f"probabilities sum to {total!r} with {len(x)} features"
            )


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
    _need(events, 2, "unsaveable_rejected")
    model = _learn_all(factory(), events[: len(events) // 2])
    before = _dump(model)
    x, y = events[-1]

    def rejected(x: Any, y: Any, reason: str, what: str) -> None:
        try:
            model.learn_one(x, y)
        except InvalidEventError as exc:
            if exc.reason != reason:
                raise _fail(
                    "unsaveable_rejected", model, f"{what}: reason {exc.reason!r}, not {reason!r}"
                ) from None
        else:
            raise _fail("unsaveable_rejected", model, f"{what} was learned")
        if _dump(model) != before:
            raise _fail("unsaveable_rejected", model, f"rejecting {what} changed the model")

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
    copied = Learner.from_state(orjson.loads(_dump(model)))
    labels = [c for c in copied.predict_log_proba_one(x) if c == _BIG_LABEL]
    if [type(c) for c in labels] != [int] or _dump(copied) != _dump(model):
        raise _fail("unsaveable_rejected", model, f"label {_BIG_LABEL} did not survive a state")


#: Every check by name, in the order :func:`yield_checks` runs them.
CHECKS: dict[str, Callable[[Factory, Sequence[Event]], None]] = {
    "cold_start": check_cold_start,
    "proba_sums_to_one": check_proba_sums_to_one,
    "log_proba_consistent": check_log_proba_consistent,
    "predict_does_not_learn": check_predict_does_not_learn,
    "input_not_mutated": check_input_not_mutated,
    "feature_order": check_feature_order,
    "new_and_vanishing": check_new_and_vanishing,
    "state_round_trip": check_state_round_trip,
    "merge_identity": check_merge_identity,
    "merge_union": check_merge_union,
    "chunked_learning": check_chunked_learning,
    "weight_repetition": check_weight_repetition,
    "no_log_zero": check_no_log_zero,
    "wide_events": check_wide_events,
    "unsaveable_rejected": check_unsaveable_rejected,
}


@dataclass(frozen=True)
class Check:
    """One check bound to a learner factory and events; call it to run it."""

    name: str
    factory: Factory
    events: Sequence[Event]

    def __call__(self) -> None:
        CHECKS[self.name](self.factory, self.events)


def yield_checks(factory: Factory, events: Sequence[Event]) -> Iterator[Check]:
    """Every check of :data:`CHECKS`, bound to ``factory`` and ``events``.

    Parameters
    ----------
    factory
        A no-argument callable returning a fresh, untrained learner (a class
        or ``lambda: MyLearner(alpha=0.5)``).
    events
        ``(x, y)`` pairs the learner accepts; 50–200 events with at least
        two classes are plenty.

    Examples
    --------
    >>> from stream_nb import CategoricalNB
    >>> events = [({"a": "x"}, 0), ({"a": "y"}, 1), ({"a": "x"}, 0), ({"a": "z"}, 1)]
    >>> for check in yield_checks(CategoricalNB, events):
    ...     check()
    """
    events = list(events)
    for name in CHECKS:
        yield Check(name, factory, events)


def check_learner(
    factory: Factory,
    events: Sequence[Event] | None = None,
    *,
    exempt: Mapping[str, str] | None = None,
) -> list[str]:
    """Run every check against a learner; raise on the first failure.

    Parameters
    ----------
    factory
        A no-argument callable returning a fresh, untrained learner.
    events
        ``(x, y)`` pairs suited to the learner; by default
        :func:`suitable_events` for the class ``factory()`` builds.
    exempt
        Check name → written reason for not running it. A reason is required.

    Returns
    -------
    list of str
        Names of the checks that ran (and passed).

    Raises
    ------
    AssertionError
        From the first failing check, naming it and the learner.
    ValueError
        If ``exempt`` names an unknown check or gives an empty reason.
    """
    exempt = dict(exempt or {})
    for name, reason in exempt.items():
        if name not in CHECKS:
            raise ValueError(f"unknown check {name!r} in exempt; known checks: {sorted(CHECKS)}")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"exempting check {name!r} needs a written reason, got {reason!r}")
    if events is None:
        events = suitable_events(type(factory()))
    ran = []
    for check in yield_checks(factory, events):
        if check.name not in exempt:
            check()
            ran.append(check.name)
    return ran


# ---------------------------------------------------------------------- events
def _late_class(events: Sequence[Event], label: Hashable) -> list[Event]:
    """Relabel every third event of the last quarter: a class that appears late."""
    start = len(events) * 3 // 4
    return [(x, label if i >= start and i % 3 == 0 else y) for i, (x, y) in enumerate(events)]


def _categorical_events(seed: int, n: int) -> list[Event]:
    events = categorical_stream(seed, n, features=5, values=4, missing=0.15)
    return _late_class(list(events), "late")


def _numeric_events(seed: int, n: int) -> list[Event]:
    rng = random.Random(seed)
    events = [
        ({k: v for k, v in x.items() if rng.random() >= 0.1}, y)  # some features missing
        for x, y in agrawal(seed, n, function=2, nominal=False)
    ]
    return _late_class(events, 2)


def _token_events(seed: int, n: int) -> list[Event]:
    events = zipf_text(seed, n, vocabulary=300, length=(1, 12), classes=2)
    return _late_class(list(events), 2)


def _mixed_events(seed: int, n: int) -> list[Event]:
    return _late_class(list(mixed_stream(seed, n, classes=2, missing=0.1)), "late")


#: Event generator by learner class name; other learners get categorical events.
_EVENTS_BY_LEARNER: dict[str, Callable[[int, int], list[Event]]] = {
    "CategoricalNB": _categorical_events,
    "GaussianNB": _numeric_events,
    "MultinomialNB": _token_events,
    "BernoulliNB": _token_events,
    "ComplementNB": _token_events,
    "NaiveBayes": _mixed_events,
}


def suitable_events(learner: type[Learner] | str, n: int = 120, seed: int = 0) -> list[Event]:
    """Seeded events of the kind a stream-nb learner expects, with a class appearing late.

    Categorical values for :class:`~stream_nb.CategoricalNB` (and any learner
    not listed, e.g. AODE or TAN), Agrawal's numbers with some features
    missing for ``GaussianNB``, Zipf token counts for ``MultinomialNB``,
    ``BernoulliNB`` and ``ComplementNB``, and mixed str/bool/float features for
    ``NaiveBayes``.

    Examples
    --------
    >>> x, y = suitable_events("MultinomialNB", n=5)[0]
    >>> all(isinstance(count, int) for count in x.values())
    True
    """
    name = learner if isinstance(learner, str) else learner.__name__
    return _EVENTS_BY_LEARNER.get(name, _categorical_events)(seed, n)


#: Constructor arguments a learner needs that have no default.
_REQUIRED_PARAMS: dict[str, dict[str, Any]] = {"SPODE": {"parent": "f0"}}


def default_factory(learner: type[Learner], **params: Any) -> Factory:
    """A factory for ``learner`` with ``params``, filling arguments without a default.

    Examples
    --------
    >>> from stream_nb import CategoricalNB
    >>> default_factory(CategoricalNB, alpha=0.5)().alpha
    0.5
    """
    merged = {**_REQUIRED_PARAMS.get(learner.__name__, {}), **params}
    return lambda: learner(**merged)
