"""The delayed-label cache: size and age limits, evictions counted, state round trip."""

from __future__ import annotations

import orjson
import pytest

from stream_nb import CheckpointError, ConfigError
from stream_nb.engine.delayed import DelayedLabelCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_size_limit_evicts_oldest():
    cache = DelayedLabelCache(max_size=2, max_age=None)
    for i in range(4):
        cache.put(i, {"f": i}, 1.0, "a", {"a": 0.0})
    assert len(cache) == 2 and cache.evicted == 2
    assert cache.pop(0) is None and cache.pop(3).x == {"f": 3}


def test_age_limit():
    clock = Clock()
    cache = DelayedLabelCache(max_size=10, max_age=5.0, clock=clock)
    cache.put("old", {"f": 1}, 1.0, "a", {})
    clock.now += 6
    cache.put("new", {"f": 2}, 2.0, "b", {})
    assert cache.evicted == 1 and cache.pop("old") is None
    assert cache.pop("new").w == 2.0


def test_repeated_id_replaces():
    cache = DelayedLabelCache(max_size=2, max_age=None)
    cache.put(1, {"f": 1}, 1.0, "a", {})
    cache.put(1, {"f": 2}, 1.0, "b", {})
    assert len(cache) == 1 and cache.evicted == 0 and cache.pop(1).y_pred == "b"


def test_state_round_trip_keeps_json_types():
    clock = Clock()
    cache = DelayedLabelCache(max_size=10, max_age=100.0, clock=clock)
    cache.put(7, {"f": 1.5}, 1.0, True, {True: -0.1, False: -2.4})
    cache.put("7", {"g": "v"}, 3.0, 2, {2: 0.0})
    state = orjson.loads(orjson.dumps(cache.to_state()))
    other = DelayedLabelCache(max_size=10, max_age=100.0, clock=clock)
    other.load_state(state)
    assert other.pop(7).log_proba == {True: -0.1, False: -2.4}
    assert other.pop("7").y_pred == 2
    with pytest.raises(CheckpointError, match="malformed delayed-label cache state"):
        other.load_state({"entries": [[1, 2]]})


def test_config_errors():
    with pytest.raises(ConfigError, match="max_size must be a positive integer"):
        DelayedLabelCache(max_size=0)
    with pytest.raises(ConfigError, match="max_age must be a positive number"):
        DelayedLabelCache(max_age=-1)
