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

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from stream_nb.checks._support import Event, Factory
from stream_nb.checks.events import default_factory, suitable_events
from stream_nb.checks.predictions import (
    check_cold_start,
    check_feature_order,
    check_input_not_mutated,
    check_log_proba_consistent,
    check_new_and_vanishing,
    check_no_log_zero,
    check_predict_does_not_learn,
    check_proba_sums_to_one,
    check_wide_events,
)
from stream_nb.checks.statistics import (
    check_chunked_learning,
    check_merge_identity,
    check_merge_union,
    check_state_round_trip,
    check_unsaveable_rejected,
    check_weight_repetition,
)

__all__ = [
    "CHECKS",
    "Check",
    "check_learner",
    "default_factory",
    "suitable_events",
    "yield_checks",
]


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
