"""BernoulliNB's per-class aggregate at every step of a batch (the series, the near terms
by word and by kind, the segments) against its brute-force sum over the words at each
step, to 1e-12 relative."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from stream_nb.naive_bayes._token_aggregates import MAX_AGGREGATE_CELLS, class_aggregates


def _brute(
    start: float, alpha: float, counts: dict[int, float], events: list[set[int]], ws: list[float]
) -> list[float]:
    """``Σ_{w: c_w>0} log((N − c_w + α) / (N + 2α))`` at every version, word by word."""
    c = dict(counts)
    n = start
    out = []

    def aggregate() -> float:
        return math.fsum(math.log((n - v + alpha) / (n + 2 * alpha)) for v in c.values() if v > 0)

    out.append(aggregate())
    for on, w in zip(events, ws, strict=True):
        n += w
        for word in on:
            c[word] = c.get(word, 0.0) + w
        out.append(aggregate())
    return out


def _case(
    seed: int, n_words: int, start: float, m: int, alpha: float, weights: list[float] | None = None
) -> tuple[list[float], np.ndarray | None]:
    rng = random.Random(seed)
    counts = {i: float(rng.randint(0, int(start))) for i in range(n_words)}
    # a few words on in nearly every event (near terms), the others rarely (far ones)
    on_rate = {i: 0.97 if i < 4 else min(1.0, 0.9 / (1 + i) ** 0.7) for i in range(n_words)}
    events = [{i for i in range(n_words) if rng.random() < on_rate[i]} for _ in range(m)]
    ws = weights if weights is not None else [1.0] * m
    want = _brute(start, alpha, counts, events, ws)
    histogram: dict[float, int] = {}
    for v in counts.values():
        if v > 0:
            histogram[v] = histogram.get(v, 0) + 1
    now = dict(counts)
    moves: list[tuple[float, float, int, int]] = []
    for j, (on, w) in enumerate(zip(events, ws, strict=True)):
        for i in sorted(on):
            moves.append((now[i], w, j + 1, i))
            now[i] += w
    c, w, after, word = (np.array(column) for column in zip(*moves, strict=True))
    weight = np.cumsum(np.concatenate(([start], ws)))
    got = class_aggregates(
        want[0],
        alpha,
        (np.array(list(histogram), dtype=float), np.array(list(histogram.values()), dtype=float)),
        (c.astype(float), w.astype(float), after.astype(np.intp), word.astype(np.intp), None),
        (weight, np.full(len(weight), alpha)),
    )
    return want, got


@pytest.mark.parametrize(
    ("seed", "n_words", "start", "m", "alpha"),
    [
        (1, 300, 50.0, 40, 1.0),  # a class weight below the batch's: segments, near by kind
        (2, 2000, 20000.0, 60, 1.0),  # far words, a few near ones by word
        (3, 500, 5.0, 150, 2.0),  # a tiny start: many segments
        (4, 3000, 50000.0, 100, 1e-3),  # a tiny α
        (5, 1000, 2000.0, 200, 0.5),  # a start a few times the batch
        (6, 800, 0.0, 120, 1.0),  # nothing learned before the batch
    ],
)
def test_aggregates_at_every_step_match_the_sum_over_words(
    seed: int, n_words: int, start: float, m: int, alpha: float
) -> None:
    want, got = _case(seed, n_words, start, m, alpha)
    assert got is not None
    for j, (g, v) in enumerate(zip(got.tolist(), want, strict=True)):
        assert math.isclose(g, v, rel_tol=1e-12, abs_tol=1e-12 * max(1.0, abs(want[-1]))), j


def test_integral_weights() -> None:
    """Moves of several weights: the kinds are pairs (count, weight)."""
    rng = random.Random(7)
    weights = [float(rng.choice([1, 2, 3])) for _ in range(90)]
    for start in (30.0, 400.0, 30000.0):
        want, got = _case(8, 600, start, 90, 1.0, weights)
        assert got is not None
        for g, v in zip(got.tolist(), want, strict=True):
            assert math.isclose(g, v, rel_tol=1e-12, abs_tol=1e-12 * max(1.0, abs(want[-1])))


def test_too_many_near_cells_decline() -> None:
    """Near terms past :data:`MAX_AGGREGATE_CELLS` give ``None`` (the batch goes per event)."""
    m = 2 * MAX_AGGREGATE_CELLS // 64  # versions; the near kinds and words are 64+
    moves = np.arange(64 * 2, dtype=float)
    got = class_aggregates(
        -1.0,
        1.0,
        (np.array([1.0]), np.array([1.0])),
        (
            1.0e6 - 10.0 - moves,
            np.ones(len(moves)),
            np.ones(len(moves), dtype=np.intp),
            np.arange(len(moves)),
            None,
        ),
        (1.0e6 + np.arange(m + 1, dtype=float), np.ones(m + 1)),
    )
    assert got is None
