"""Welford statistics with weights, Chan's merge and the Gaussian log-density (stream_nb.stats)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_nb.stats import LOG_2PI, Welford, chan_merge, gaussian_log_density, welford_add


def two_pass(data: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(Σw, weighted mean, population variance) by two exact-ish passes."""
    n = math.fsum(w for _, w in data)
    mean = math.fsum(w * v for v, w in data) / n
    return n, mean, math.fsum(w * (v - mean) ** 2 for v, w in data) / n


def test_welford_merge_and_rescale_match_two_pass() -> None:
    rng = random.Random(2)
    data = [(rng.gauss(3, 2), rng.choice([0.5, 1.0, 2.0])) for _ in range(200)]
    a, b = Welford(), Welford()
    for v, w in data[:90]:
        a.update(v, w)
    for v, w in data[90:]:
        b.update(v, w)
    a.merge(b)
    n, mean, var = two_pass(data)
    assert a.n == pytest.approx(n, rel=1e-12)
    assert a.mean == pytest.approx(mean, rel=1e-12)
    assert a.variance == pytest.approx(var, rel=1e-10)
    a.rescale(0.5)  # weights halve, the distribution does not change
    assert a.n == pytest.approx(n / 2, rel=1e-12)
    assert a.variance == pytest.approx(var, rel=1e-10)
    assert Welford.from_state(a.to_state()).to_state() == a.to_state()
    assert "Welford(n=" in repr(a)


def test_merge_factor_scales_the_other_side() -> None:
    a, b = Welford(), Welford()
    a.update(1.0)
    b.update(3.0)
    a.merge(b, factor=3.0)  # b counts as weight 3
    assert (a.n, a.mean) == (4.0, 2.5)


def test_first_value_is_kept_exactly() -> None:
    # w/n is computed first, so a first event of any weight gives mean == x and M2 == 0
    assert welford_add(0.0, 0.0, 0.0, 59.0, 0.01) == (0.01, 59.0, 0.0)


def test_empty_sides_of_a_merge() -> None:
    assert chan_merge(0.0, 0.0, 0.0, 2.0, 5.0, 1.0) == (2.0, 5.0, 1.0)
    assert chan_merge(2.0, 5.0, 1.0, 0.0, 0.0, 0.0) == (2.0, 5.0, 1.0)
    assert Welford().variance == 0.0


def test_gaussian_log_density_is_analytic_in_the_tails() -> None:
    assert gaussian_log_density(0.0, 0.0, 1.0) == pytest.approx(-0.5 * LOG_2PI)
    far = gaussian_log_density(1e150, 0.0, 1.0)  # the pdf underflows; its log does not
    assert math.isfinite(far) and far == pytest.approx(-0.5e300, rel=1e-12)
    assert gaussian_log_density(1.0, 0.0, 4.0) == pytest.approx(
        math.log(math.exp(-1.0 / 8.0) / math.sqrt(8 * math.pi))
    )


values = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
weights = st.sampled_from([0.25, 1.0, 3.0])


@given(st.lists(st.tuples(values, weights), min_size=2, max_size=40), st.integers(0, 40))
def test_property_any_split_merges_to_the_whole(data: list[tuple[float, float]], cut: int) -> None:
    whole, left, right = Welford(), Welford(), Welford()
    for v, w in data:
        whole.update(v, w)
    for v, w in data[:cut]:
        left.update(v, w)
    for v, w in data[cut:]:
        right.update(v, w)
    left.merge(right)
    n, mean, var = two_pass(data)
    scale = max(1.0, max(abs(v) for v, _ in data))
    for stat in (whole, left):
        assert stat.n == pytest.approx(n)
        assert abs(stat.mean - mean) <= 1e-9 * scale
        assert abs(stat.variance - var) <= 1e-9 * scale * scale
