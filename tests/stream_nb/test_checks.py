"""The generic checks of stream_nb.checks against every public learner, and the checks' own tests.

Learners are discovered from ``stream_nb.__all__``, so a learner exported later
is checked automatically. A learner is exempt from a check only through
``EXEMPT`` / ``HALF_LIFE_EXEMPT`` below, each with its reason, and
``test_exemptions_are_still_needed`` proves every exemption still fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import pytest
from learner_classes import public_learners

from stream_nb import CategoricalNB, Learner
from stream_nb.checks import CHECKS, check_learner, default_factory, suitable_events, yield_checks

Event = tuple[dict[str, Any], Hashable]
N_EVENTS = 120
HALF_LIFE = 20.0


#: Learner class name -> check -> why the check does not apply to it. (The semi-naive
#: learners pass ``wide_events`` thanks to ``max_pair_features``: ~1-2 CPU-s and
#: ~125 MB each, measured.)
_LEARNED_WEIGHTS = (
    "WeightedNB's feature weights follow the event order (one gradient step per event, "
    "on the counts of the events before it) and combine by an evidence-weighted average"
)
EXEMPT: dict[str, dict[str, str]] = {
    "WeightedNB": {
        "merge_union": _LEARNED_WEIGHTS,
        "chunked_learning": _LEARNED_WEIGHTS,
        "weight_repetition": (
            "WeightedNB takes one gradient step per event, its size capped at one event's: "
            "w=2 is one step, two copies are two steps from different counts"
        ),
    },
}
#: Exempted checks too costly to re-run to prove the exemption is still needed.
NOT_RERUN = {"wide_events"}

_DECAY_ORDER = (
    "with forgetting, learning A then B decays A's events by B's weight, while A's own "
    "model has not seen B: merged statistics differ from one pass by design"
)
#: Checks that do not hold for any learner with ``half_life`` set.
HALF_LIFE_EXEMPT: dict[str, str] = {
    "merge_union": _DECAY_ORDER,
    "chunked_learning": _DECAY_ORDER,
    "weight_repetition": (
        "with forgetting, the first of two learned copies is decayed by the second "
        "(γ + 1 units) while one event of w=2 counts 2 units"
    ),
}


#: "renormalising": a half-life so short that the global scale falls below
#: 1e-30 (``stream_nb.limits.RENORMALISE_BELOW``) within the 120 events, so every
#: learner's ``_rescale`` runs.
VARIANTS = {
    "default": {},
    "half_life": {"half_life": HALF_LIFE},
    "renormalising": {"half_life": 0.2},
}


def exemptions(cls: type[Learner], variant: str) -> dict[str, str]:
    out = dict(EXEMPT.get(cls.__name__, {}))
    if variant != "default":
        out.update(HALF_LIFE_EXEMPT)
    return out


CASES = [
    pytest.param(cls, variant, check, id=f"{cls.__name__}-{variant}-{check}")
    for cls in public_learners()
    for variant in VARIANTS
    for check in CHECKS
    if check not in exemptions(cls, variant)
]

EXEMPT_CASES = [
    pytest.param(cls, variant, check, id=f"{cls.__name__}-{variant}-{check}")
    for cls in public_learners()
    for variant in VARIANTS
    for check in exemptions(cls, variant)
    if check not in NOT_RERUN
]


def _factory(cls: type[Learner], variant: str) -> Callable[[], Learner]:
    return default_factory(cls, **VARIANTS[variant])


def _events(cls: type[Learner]) -> list[Event]:
    return suitable_events(cls, N_EVENTS, seed=11)


def categorical_events() -> list[Event]:
    return suitable_events(CategoricalNB, N_EVENTS, seed=11)


@pytest.mark.parametrize(("cls", "variant", "check"), CASES)
def test_learner_passes_check(cls: type[Learner], variant: str, check: str) -> None:
    CHECKS[check](_factory(cls, variant), _events(cls))


@pytest.mark.parametrize(("cls", "variant", "check"), EXEMPT_CASES)
def test_exemptions_are_still_needed(cls: type[Learner], variant: str, check: str) -> None:
    """An exemption whose check now passes must be removed from the table."""
    with pytest.raises(AssertionError, match=f"check '{check}' failed"):
        CHECKS[check](_factory(cls, variant), _events(cls))


def test_discovery_finds_the_learners() -> None:
    names = {cls.__name__ for cls in public_learners()}
    assert "CategoricalNB" in names
    assert "Learner" not in names
    for reasons in [*EXEMPT.values(), HALF_LIFE_EXEMPT]:
        for check, reason in reasons.items():
            assert check in CHECKS
            assert len(reason) > 20


# ------------------------------------------------------------------ the checks themselves


def test_check_learner_runs_every_check() -> None:
    assert check_learner(CategoricalNB, categorical_events()) == list(CHECKS)
    assert [c.name for c in yield_checks(CategoricalNB, categorical_events())] == list(CHECKS)


def test_check_learner_picks_suitable_events_by_default() -> None:
    assert check_learner(lambda: CategoricalNB(alpha=0.5)) == list(CHECKS)


def test_check_learner_validates_exemptions() -> None:
    with pytest.raises(ValueError, match="unknown check 'no_such_check'"):
        check_learner(CategoricalNB, categorical_events(), exempt={"no_such_check": "why"})
    with pytest.raises(ValueError, match="needs a written reason"):
        check_learner(CategoricalNB, categorical_events(), exempt={"merge_union": "  "})


def test_checks_need_enough_events() -> None:
    with pytest.raises(ValueError, match="needs at least 4 events"):
        CHECKS["new_and_vanishing"](CategoricalNB, categorical_events()[:2])


# Deliberately broken learners: each check must catch its bug. Names start with
# "_" so they stay out of the learner registry unless a test registers them.


class _MutatesInput(CategoricalNB):
    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        x["_seen"] = True  # type: ignore[index]
        super()._learn(x, y, w)


class _Unnormalised(CategoricalNB):
    def predict_proba_one(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        return {c: math.exp(v) for c, v in self._joint_log_likelihood(x).items()}


class _FirstFeatureOnly(CategoricalNB):
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        return super()._joint_log_likelihood(dict(list(x.items())[:1]))


class _LearnsWhenPredicting(CategoricalNB):
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        jll = super()._joint_log_likelihood(x)
        if jll:
            self._learn(x, next(iter(jll)), 1.0)
        return jll


class _IgnoresWeight(CategoricalNB):
    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        super()._learn(x, y, 1.0)


class _MergeDropsFactor(CategoricalNB):
    def _merge(self, other: Any, factor: float) -> None:
        super()._merge(other, 2 * factor)


class _LosesCountsInState(CategoricalNB):
    def _stats_from_state(self, stats: Mapping[str, Any]) -> None:
        super()._stats_from_state(stats)
        stats = self.categorical
        stats.class_weight = {c: 2 * n for c, n in stats.class_weight.items()}


class _Log0(CategoricalNB):
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        jll = super()._joint_log_likelihood(x)
        return {c: v + math.log(len(x)) for c, v in jll.items()}  # log(0) for x = {}


class _WarmStart(CategoricalNB):
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        return super()._joint_log_likelihood(x) or {"guess": 0.0}


class _CrashesOnNewFeature(CategoricalNB):
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        for feature in x:
            _ = self.categorical.counts[feature]  # KeyError on a never-learned feature
        return super()._joint_log_likelihood(x)


class _StaleClone(CategoricalNB):
    def clone(self) -> Learner:
        return self


@pytest.mark.parametrize(
    ("broken", "check", "error"),
    [
        (_MutatesInput, "input_not_mutated", AssertionError),
        (_Unnormalised, "proba_sums_to_one", AssertionError),
        (_Unnormalised, "log_proba_consistent", AssertionError),
        (_FirstFeatureOnly, "feature_order", AssertionError),
        (_LearnsWhenPredicting, "predict_does_not_learn", AssertionError),
        (_IgnoresWeight, "weight_repetition", AssertionError),
        (_MergeDropsFactor, "merge_union", AssertionError),
        (_MergeDropsFactor, "chunked_learning", AssertionError),
        (_LosesCountsInState, "state_round_trip", AssertionError),
        (_Log0, "no_log_zero", AssertionError),
        (_WarmStart, "cold_start", AssertionError),
        (_StaleClone, "cold_start", AssertionError),
        (_CrashesOnNewFeature, "new_and_vanishing", KeyError),
    ],
)
def test_each_check_catches_its_bug(
    broken: type[Learner], check: str, error: type[Exception], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(Learner._registry, broken.__name__, broken)
    with pytest.raises(error):
        CHECKS[check](broken, categorical_events())


@pytest.mark.parametrize("cls", [pytest.param(c, id=c.__name__) for c in public_learners()])
def test_renormalising_variant_really_renormalises(cls: type[Learner]) -> None:
    model = _factory(cls, "renormalising")()
    jumps = 0
    for x, y in _events(cls):
        before = model._scale
        model.learn_one(x, y)
        jumps += model._scale > before
    assert jumps >= 1
