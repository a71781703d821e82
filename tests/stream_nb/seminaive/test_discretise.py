"""Equal-width discretisation (``strategy="width"``) against scikit-learn and against
bins given up front."""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from typing import Any

import numpy as np
import pytest
from sklearn.preprocessing import KBinsDiscretizer

from stream_nb import AODE, KDB, SPODE, TAN, ConfigError, IncompatibleModelError, Learner
from stream_nb.seminaive import Discretiser
from stream_nb.seminaive.discretise import equal_width_edges


def sklearn_uniform_edges(sample: list[float], n_bins: int) -> list[float]:
    fitted = KBinsDiscretizer(
        n_bins=n_bins, encode="ordinal", strategy="uniform", subsample=None
    ).fit(np.asarray(sample, dtype=float).reshape(-1, 1))
    return [float(e) for e in fitted.bin_edges_[0][1:-1]]


@pytest.mark.parametrize("seed", range(6))
def test_width_edges_and_bins_are_scikit_learns_uniform_ones(seed: int) -> None:
    rng = random.Random(seed)
    n_bins = rng.randrange(2, 12)
    scale = 10 ** rng.uniform(-3, 6)
    sample = [rng.gauss(0.0, scale) for _ in range(rng.randrange(2, 300))]
    edges = equal_width_edges(sample, n_bins)
    assert edges == sklearn_uniform_edges(sample, n_bins)
    fitted = KBinsDiscretizer(n_bins=n_bins, encode="ordinal", strategy="uniform", subsample=None)
    fitted.fit(np.asarray(sample).reshape(-1, 1))
    # later values, also outside the sample's range: the edge bins take them
    probes = [rng.gauss(0.0, 3 * scale) for _ in range(200)] + [min(sample), max(sample)]
    ours = [bisect_right(edges, v) for v in probes]
    theirs = fitted.transform(np.asarray(probes).reshape(-1, 1))[:, 0].astype(int).tolist()
    assert ours == theirs


def test_width_edges_of_extreme_and_degenerate_samples() -> None:
    edges = equal_width_edges([-1.7e308, 1.7e308], 4)
    assert len(edges) == 3 and all(math.isfinite(e) for e in edges)
    assert edges == sorted(set(edges)) and edges[1] == 0.0
    assert equal_width_edges([2.5] * 5, 3) == []
    # a range of a few doubles: repeated cuts are dropped, the rest stay increasing
    tiny = equal_width_edges([1.0, math.nextafter(1.0, 2.0)], 8)
    assert tiny == sorted(set(tiny)) and len(tiny) <= 1
    assert equal_width_edges([0, 10**20], 2) == [5e19]  # integers, converted once


def test_discretiser_freezes_equal_width_bins_after_the_warm_up() -> None:
    d = Discretiser(n_bins=4, warmup=5, strategy="width")
    assert [d.learn_value("t", v, 1.0) for v in (0.0, 1.0, 1.5, 2.0)] == [None] * 4
    assert d.learn_value("t", 8.0, 1.0) is None  # the value that fills the sample
    assert d.edges["t"] == [2.0, 4.0, 6.0]
    assert (d.bin_value("t", -100.0), d.bin_value("t", 5.0), d.bin_value("t", 1e9)) == (0, 2, 3)
    # weights count towards the warm-up but not in the cut points
    weighted = Discretiser(n_bins=2, warmup=4, strategy="width")
    weighted.learn_value("t", 0.0, 3.0)
    weighted.learn_value("t", 10.0, 1.0)
    assert weighted.edges["t"] == [5.0]


FACTORIES: dict[str, Any] = {
    "SPODE": lambda **kw: SPODE("c", **kw),
    "AODE": AODE,
    "TAN": lambda **kw: TAN(rebuild_every=50, **kw),
    "KDB": lambda **kw: KDB(k=2, rebuild_every=50, **kw),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_width_warm_up_then_freeze_equals_the_same_bins_given_up_front(name: str) -> None:
    rng = random.Random(11)
    events = []
    for _ in range(250):
        y = rng.randrange(3)
        x = {"c": f"c{(y + rng.randrange(2)) % 3}", "t": rng.gauss(2.0 * y, 1.0)}
        events.append((x, y))
    warm = 40
    learned: Learner = FACTORIES[name](warmup=warm, n_bins=5, strategy="width")
    for x, y in events:
        learned.learn_one(x, y)
    edges = equal_width_edges([x["t"] for x, _ in events[:warm]], 5)
    fixed: Learner = FACTORIES[name](bin_edges={"t": edges}, n_bins=5)
    for x, y in events:
        fixed.learn_one(x, y)
    if name in ("TAN", "KDB"):
        learned.rebuild()  # type: ignore[attr-defined]
        fixed.rebuild()  # type: ignore[attr-defined]
    probes = [x for x, _ in events[::10]] + [{"c": "c0", "t": 1e6}, {"t": -1e6}]
    for x in probes:
        pa, pb = learned.predict_log_proba_one(x), fixed.predict_log_proba_one(x)
        assert pa.keys() == pb.keys()
        for c in pa:
            assert abs(pa[c] - pb[c]) <= 1e-9 * max(1.0, abs(pb[c]))


def test_strategy_is_a_checked_parameter_kept_in_the_state() -> None:
    with pytest.raises(ConfigError, match="strategy must be 'frequency' or 'width'"):
        AODE(strategy="quantile")
    with pytest.raises(ConfigError, match="strategy must be 'frequency' or 'width'"):
        Discretiser(strategy="uniform")
    model = AODE(strategy="width", warmup=3)
    for t in (1.0, 4.0, 9.0, 2.0):
        model.learn_one({"t": t}, t > 3)
    restored = AODE.from_state(model.to_state())
    assert restored.get_params()["strategy"] == "width"
    assert restored.to_state() == model.to_state()
    assert AODE().get_params()["strategy"] == "frequency"
    with pytest.raises(IncompatibleModelError, match="strategy"):
        AODE(strategy="width").merge(AODE())
