"""The generic learner checks on *mixed* events (the auto-discovered run uses categorical ones).

Mixed str/bool/float events exercise the numeric discretiser, its warm-up
replay and the caps inside every generic check; ``wide_events`` (10,000
features per event) passes thanks to ``max_pair_features``. With the default
``warmup=100`` and 120 events, every merge of parts sees the union's first
100 values before freezing, so even ``merge_union`` holds exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from stream_nb import AODE, KDB, SPODE, TAN, Learner
from stream_nb.checks import CHECKS, check_learner, suitable_events

_STRUCTURE = (
    "the structure is rebuilt on a schedule of learned weight, and after a merge from the "
    "merged counts: a one-pass model keeps the structure of its last scheduled rebuild"
)
_DECAY = "with forgetting, order matters by design (see test_checks.HALF_LIFE_EXEMPT)"
_WIDE_ONCE = (
    "10,000 features per event cost ~2 CPU-s per learner even with max_pair_features=200; "
    "run once, in the variant without half_life"
)

FACTORIES: dict[str, Callable[..., Learner]] = {
    "SPODE": lambda **kw: SPODE("c0", **kw),
    "AODE": AODE,
    "TAN": lambda **kw: TAN(rebuild_every=40, **kw),
    "KDB": lambda **kw: KDB(k=2, rebuild_every=40, **kw),
}


@pytest.mark.parametrize("half_life", [None, 20.0])
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_generic_checks_on_mixed_events(name: str, half_life: float | None) -> None:
    events = suitable_events("NaiveBayes", 120, seed=7)
    exempt = {}
    if name in ("TAN", "KDB"):
        exempt.update(merge_union=_STRUCTURE, chunked_learning=_STRUCTURE)
    if half_life is not None:
        exempt.update(merge_union=_DECAY, chunked_learning=_DECAY, weight_repetition=_DECAY)
        exempt.update(wide_events=_WIDE_ONCE)
    ran = check_learner(lambda: FACTORIES[name](half_life=half_life), events, exempt=exempt)
    assert set(ran) == set(CHECKS) - set(exempt)


OPTIONS: dict[str, Callable[[], Learner]] = {
    "AODE-weighted": lambda: AODE(weighting="mutual_information"),
    "AODE-alpha0": lambda: AODE(alpha=0),
    "SPODE-alpha0": lambda: SPODE("c0", alpha=0),
    "TAN-alpha0": lambda: TAN(alpha=0, rebuild_every=40),
    "KDB-alpha0": lambda: KDB(2, alpha=0, rebuild_every=40),
}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_generic_checks_with_weighting_and_alpha_zero(name: str) -> None:
    events = suitable_events("NaiveBayes", 120, seed=7)
    exempt = {}
    if name.startswith(("TAN", "KDB")):
        exempt.update(merge_union=_STRUCTURE, chunked_learning=_STRUCTURE)
    ran = check_learner(OPTIONS[name], events, exempt=exempt)
    assert set(ran) == set(CHECKS) - set(exempt)
