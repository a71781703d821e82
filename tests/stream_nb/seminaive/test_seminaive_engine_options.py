"""Weighted AODE, ``alpha = 0``, the Gaussian warm-up term and ``feature_weights`` through
the engine.

Whatever path the engine takes (the column path, where the batch kernels
decline these options or warming values, or the general path), it writes the
same prediction records byte for byte and leaves the same model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from stream_nb import AODE, KDB, SPODE, TAN, Learner
from stream_nb.checks.engine import run_engine
from stream_nb.datasets import mixed_stream

#: weight 0, a fraction and more than 1, on categorical and numeric features
WEIGHTS = {"cat0": 0.0, "cat2": 2.0, "num0": 0.5, "num1": 0.0, "flag": 3.0}

FACTORIES: dict[str, Callable[[], Learner]] = {
    "AODE-weighted": lambda: AODE(weighting="mutual_information"),
    "AODE-alpha0": lambda: AODE(alpha=0),
    "TAN-alpha0": lambda: TAN(alpha=0, rebuild_every=100),
    "AODE-gaussian-warm-up": lambda: AODE(warmup=300),
    "TAN-gaussian-warm-up": lambda: TAN(warmup=300, rebuild_every=100),
    "AODE-feature-weights": lambda: AODE(feature_weights=WEIGHTS),
    "SPODE-feature-weights": lambda: SPODE("cat1", feature_weights=WEIGHTS),
    "KDB-feature-weights": lambda: KDB(2, warmup=300, rebuild_every=100, feature_weights=WEIGHTS),
}


def _run(lines: list[bytes], make: Callable[[], Learner], columns: bool) -> tuple[Any, ...]:
    run = run_engine(make(), lines, column_path=columns)
    return run.records, run.state, run.report, run.outcomes


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_engine_paths_write_the_same_records(name: str) -> None:
    lines = []
    for i, (x, y) in enumerate(mixed_stream(seed=5, n=600, missing=0.1)):
        event = {
            "id": f"e{i}",
            **{k: v for k, v in x.items() if not (isinstance(v, float) and math.isnan(v))},
        }
        event["y"] = y
        lines.append(orjson.dumps(event))
    fast = _run(lines, FACTORIES[name], columns=True)
    slow = _run(lines, FACTORIES[name], columns=False)
    assert fast[0] == slow[0]  # every prediction record, byte for byte
    assert fast[1] == slow[1]  # the model
    assert fast[2] == slow[2] and fast[3] == slow[3]
    assert len(fast[0]) == 600
