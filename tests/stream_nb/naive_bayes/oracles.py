"""Brute-force building blocks shared by the learner tests.

Each learner's test module computes its formula from the raw events with these
helpers, independently of the learner's incremental statistics.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

#: One event as the tests replay it: features, label, sample weight.
Event = tuple[dict[str, Any], Hashable, float]


def decayed_weights(events: Sequence[Event], half_life: float | None) -> list[float]:
    """True weight of each event now: ``w_i × γ^(Σ_{j>i} w_j)``, ``γ = 2^(-1/half_life)``."""
    if half_life is None:
        return [w for _, _, w in events]
    gamma = 2.0 ** (-1.0 / half_life)
    out = []
    after = 0.0
    for _, _, w in reversed(events):
        out.append(w * gamma**after)
        after += w
    return out[::-1]


def normalise(scores: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Log-softmax of unnormalised log scores with a compensated sum (``{}`` stays ``{}``)."""
    if not scores:
        return {}
    m = max(scores.values())
    lse = m + math.log(math.fsum(math.exp(v - m) for v in scores.values()))
    return {c: v - lse for c, v in scores.items()}
