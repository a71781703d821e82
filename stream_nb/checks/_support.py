"""What the generic checks share: tolerances, failure messages and small helpers."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import orjson

from stream_nb.base import Learner

__all__ = [
    "EXP_TOLERANCE",
    "ROUNDING_TOLERANCE",
    "SUM_TOLERANCE",
    "Event",
    "Factory",
    "agree",
    "assert_same_predictions",
    "close",
    "dump",
    "fail",
    "learn_all",
    "need",
    "xs_of",
]

#: One event a check learns: features and label.
Event = tuple[Mapping[str, Any], Hashable]
#: A no-argument callable returning a fresh, untrained learner.
Factory = Callable[[], Learner]

#: |Σ p − 1| allowed: exp() and the sum each round once per class.
SUM_TOLERANCE = 1e-9
#: exp(log p) vs p, relative: a learner may compute both paths separately.
EXP_TOLERANCE = 1e-12
#: Log-probabilities from a different summation order (shuffled features, a
#: merge instead of one pass, w=2 instead of two events) differ by rounding
#: only; relative to max(1, |log p|).
ROUNDING_TOLERANCE = 1e-9


def fail(check: str, model: Learner, message: str) -> AssertionError:
    """The error a failing check raises, naming the check and the learner."""
    return AssertionError(f"check {check!r} failed for {model!r}: {message}")


def learn_all(model: Learner, events: Sequence[Event]) -> Learner:
    """``model`` after learning every event in order."""
    for x, y in events:
        model.learn_one(x, y)
    return model


def close(a: float, b: float, tolerance: float) -> bool:
    """``a`` and ``b`` equal, or apart by at most ``tolerance × max(1, |a|, |b|)``."""
    if a == b:  # also -inf == -inf
        return True
    return abs(a - b) <= tolerance * max(1.0, abs(a), abs(b))


def agree(got: Mapping[Hashable, float], want: Mapping[Hashable, float], tolerance: float) -> bool:
    """The same classes, and log-probabilities :func:`close` to ``tolerance``."""
    return got.keys() == want.keys() and all(close(got[c], want[c], tolerance) for c in want)


def assert_same_predictions(
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
            raise fail(
                check,
                model,
                f"classes {sorted(map(repr, got))} != {sorted(map(repr, want))} for x={x!r}",
            )
        for c, v in want.items():
            if not close(got[c], v, tolerance):
                raise fail(check, model, f"log P({c!r} | x) = {got[c]!r}, expected {v!r} (x={x!r})")


def dump(model: Learner) -> bytes:
    """The model's state as JSON bytes (equal bytes: equal models)."""
    return orjson.dumps(model.to_state())


def xs_of(events: Sequence[Event]) -> list[Mapping[str, Any]]:
    """The features of every event."""
    return [x for x, _ in events]


def need(events: Sequence[Event], n: int, check: str) -> None:
    """Raise ``ValueError`` if ``check`` is given fewer than ``n`` events."""
    if len(events) < n:
        raise ValueError(f"check {check!r} needs at least {n} events, got {len(events)}")
