"""The zero-probability rule of maximum-likelihood scores, against a brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np

from stream_nb._mle import resolve_zero_terms, resolve_zero_terms_one


def brute(terms: list[list[float]]) -> list[float]:
    """Per class the sum of its terms when it has the fewest ``-inf`` terms, else -inf."""
    zeros = [sum(1 for t in row if t == -math.inf) for row in terms]
    fewest = min(zeros)
    return [
        sum(t for t in row if t != -math.inf) if z == fewest else -math.inf
        for row, z in zip(terms, zeros, strict=True)
    ]


def test_matches_brute_force_over_every_pattern_of_zero_terms() -> None:
    rng = np.random.default_rng(0)
    for pattern in itertools.product([False, True], repeat=6):  # 3 classes x 2 terms
        values = rng.normal(size=6)
        terms = [
            [(-math.inf if pattern[2 * c + j] else float(values[2 * c + j])) for j in range(2)]
            for c in range(3)
        ]
        expected = brute(terms)
        arr = np.array(terms)
        zeros = np.isneginf(arr).sum(axis=1)
        finite = np.where(np.isneginf(arr), 0.0, arr).sum(axis=1)
        assert resolve_zero_terms(finite, zeros).tolist() == expected
        by_class = resolve_zero_terms_one(
            {c: float(finite[c]) for c in range(3)}, {c: int(zeros[c]) for c in range(3)}
        )
        assert list(by_class.values()) == expected
        assert any(v > -math.inf for v in expected)


def test_a_term_zero_for_every_class_drops_out() -> None:
    finite = np.array([-1.5, -0.5])
    assert resolve_zero_terms(finite, np.array([0, 0])).tolist() == [-1.5, -0.5]
    assert resolve_zero_terms(finite, np.array([3, 3])).tolist() == [-1.5, -0.5]
