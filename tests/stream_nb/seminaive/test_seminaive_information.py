"""Conditional mutual information from the dense block equals that of the sparse counts."""

from __future__ import annotations

import random

import pytest

from stream_nb.seminaive._information import conditional_mutual_information
from stream_nb.seminaive._store import PairStore


def _stores(seed: int, n: int, weights: list[float]) -> tuple[PairStore, PairStore]:
    rng = random.Random(seed)
    dense, sparse = PairStore(None, True), PairStore(None, False)
    for t in range(n):
        y = rng.choice(["a", "b", "c"] if t > n // 4 else ["a", "b"])
        f0 = rng.randrange(3)
        items = [
            ("f0", f"v{f0}"),
            ("f1", f"u{f0 if rng.random() < 0.6 else rng.randrange(4)}"),
            ("f2", f"p{rng.randrange(2)}"),
            ("f3", f"w{(f0 + (y == 'a')) % 3}"),
        ]
        if rng.random() < 0.3:
            items.pop(rng.randrange(4))  # a missing feature
        w = rng.choice(weights)
        for store in (dense, sparse):
            if y not in store.classes:
                store.add_class(y)
            store.learn(items, y, w)
    assert dense.dense is not None and sparse.dense is None
    return dense, sparse


@pytest.mark.parametrize("z", [None, 3.09])
@pytest.mark.parametrize("weights", [[1.0], [0.3, 1.0, 2.5]])
def test_dense_equals_sparse(z: float | None, weights: list[float]) -> None:
    for seed in range(4):
        dense, sparse = _stores(seed, 60 + 150 * seed, weights)
        got = conditional_mutual_information(dense, 1.0, z)
        expected = conditional_mutual_information(sparse, 1.0, z)
        assert set(got) == set(expected)
        for key, value in expected.items():
            assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
        if z is None:
            assert len(expected) == 6  # every pair, in learning order
