"""The dense numpy pair block of the semi-naive learners against sparse dictionaries.

A model forced to stay sparse is the reference: predictions agree to 1e-12 on
every step and the statistics (states compared as sets) are identical, through
learning, forgetting with renormalisation, warm-up replay, merges, state
round trips and the switch to sparse when the block would pass its byte cap.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Hashable
from typing import Any

import pytest
from _pair_states import canonical_state, sparse

from stream_nb import AODE, KDB, SPODE, TAN, Learner
from stream_nb.datasets import mixed_stream
from stream_nb.seminaive import _dense

TOLERANCE = 1e-12

FACTORIES: dict[str, Callable[..., Learner]] = {
    "AODE": AODE,
    "SPODE": lambda **kw: SPODE("cat0", **kw),
    "TAN": lambda **kw: TAN(rebuild_every=40, **kw),
    "KDB": lambda **kw: KDB(k=2, rebuild_every=40, **kw),
}


def assert_same_predictions(a: Learner, b: Learner, x: dict[str, Any]) -> None:
    pa, pb = a.predict_log_proba_one(x), b.predict_log_proba_one(x)
    assert pa.keys() == pb.keys()
    for c in pb:
        assert abs(pa[c] - pb[c]) <= TOLERANCE * max(1.0, abs(pb[c])), (x, c, pa, pb)


def stream(seed: int, n: int) -> list[tuple[dict[str, Any], Hashable]]:
    """Mixed events (numeric warm-up and replay) with a late class."""
    events = list(mixed_stream(seed=seed, n=n, missing=0.15))
    return [(x, "late" if t > n // 2 and t % 7 == 0 else y) for t, (x, y) in enumerate(events)]


@pytest.mark.parametrize("half_life", [None, 0.2])
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_dense_equals_sparse_on_every_step(name: str, half_life: float | None) -> None:
    dense = FACTORIES[name](half_life=half_life, warmup=20)
    ref = sparse(FACTORIES[name](half_life=half_life, warmup=20))
    rng = random.Random(4)
    for x, y in stream(seed=2, n=160):
        probe = {**x, rng.choice(list(x)): "never-seen"} if x else x
        assert_same_predictions(dense, ref, x)
        assert_same_predictions(dense, ref, probe)
        w = rng.choice([1.0, 0.5, 3.0])
        dense.learn_one(x, y, w)
        ref.learn_one(x, y, w)
    assert dense._store.dense is not None  # type: ignore[attr-defined]
    assert canonical_state(dense) == canonical_state(ref)
    assert dense.model_size() == ref.model_size()


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_dense_merge_and_state_equal_sparse(name: str) -> None:
    events = stream(seed=3, n=120)
    # warm-up 100: each part buffers its 60 numeric values, the merge freezes the union
    parts = [FACTORIES[name](warmup=100) for _ in range(2)]
    refs = [sparse(FACTORIES[name](warmup=100)) for _ in range(2)]
    for t, (x, y) in enumerate(events):
        for model in (parts[t % 2], refs[t % 2]):
            model.learn_one(x, y)
    merged, ref = parts[0].merge(parts[1]), refs[0].merge(refs[1])
    assert merged._store.dense is not None  # type: ignore[attr-defined]
    assert canonical_state(merged) == canonical_state(ref)
    loaded = Learner.from_state(json.loads(json.dumps(merged.to_state())))
    assert loaded._store.dense is not None  # type: ignore[attr-defined]
    for x, _ in events[:30]:
        assert_same_predictions(merged, ref, x)
        assert_same_predictions(loaded, ref, x)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_block_past_the_byte_cap_switches_to_sparse(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """UUID-like values grow the block until it would pass the cap; then dictionaries."""
    monkeypatch.setattr(_dense, "DENSE_MAX_BYTES", 200_000)
    model = FACTORIES[name](max_values_per_feature=None, warmup=20)
    ref = sparse(FACTORIES[name](max_values_per_feature=None, warmup=20))
    switched_at = None
    for t, (x, y) in enumerate(stream(seed=5, n=150)):
        event = {**x, "id": f"id-{t}"}
        assert_same_predictions(model, ref, event)
        model.learn_one(event, y)
        ref.learn_one(event, y)
        if switched_at is None and model._store.dense is None:  # type: ignore[attr-defined]
            switched_at = t
    assert switched_at is not None and 20 < switched_at < 149
    assert canonical_state(model) == canonical_state(ref)
    # a state too large for a block loads sparse; a small one dense
    loaded = Learner.from_state(model.to_state())
    assert loaded._store.dense is None  # type: ignore[attr-defined]
    monkeypatch.setattr(_dense, "DENSE_MAX_BYTES", 10**9)
    assert Learner.from_state(model.to_state())._store.dense is not None  # type: ignore[attr-defined]


def test_block_memory_is_bounded_by_the_cap() -> None:
    model = AODE(max_values_per_feature=None)
    for t in range(3000):
        model.learn_one({"id": f"u{t}", "a": str(t % 3)}, t % 2)
        block = model._store.dense
        if block is None:
            break
        nbytes = block.pair.nbytes + block.ctx.nbytes
        assert nbytes <= _dense.DENSE_MAX_BYTES
    assert model._store.dense is None
    assert abs(sum(model.predict_proba_one({"id": "u3", "a": "0"}).values()) - 1.0) < 1e-12
