"""``alpha = 0`` (maximum likelihood) for SPODE, AODE, TAN and KDB.

Every prequential step is compared with the brute-force reference of
``_reference.py`` (zero counts ``-inf``, ratios conditioned on nothing at their
``α → 0`` limit, the zero-count rule of ``stream_nb._mle`` per class and, for a
mixture, over the SPODEs with the fewest zero counts), with floating-point
errors raised and warnings turned into errors: never NaN, an exception or a
warning. The batch kernels are declared off for ``α = 0`` (tested: they decline
and the per-event path gives the same answers).
"""

from __future__ import annotations

import json
import math
import random
import warnings
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from _reference import Event, Reference, make_stream, probes

from stream_nb import AODE, KDB, SPODE, TAN, ConfigError, Learner
from stream_nb.datasets import mixed_stream

TOLERANCE = 1e-12


@contextmanager
def strict() -> Iterator[None]:
    """Floating-point errors raise, warnings are errors."""
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def assert_close(got: dict[Hashable, float], want: dict[Hashable, float], where: str) -> None:
    assert got.keys() == want.keys(), (where, got, want)
    for c in want:
        assert math.isfinite(got[c]), (where, got)
        assert abs(got[c] - want[c]) <= TOLERANCE * max(1.0, abs(want[c])), (where, c, got, want)


SUPER_PARENT: dict[str, tuple[Callable[..., Learner], bool, str | None]] = {
    "AODE": (AODE, False, None),
    "AODE-weighted": (lambda **kw: AODE(weighting="mutual_information", **kw), True, None),
    "SPODE": (lambda **kw: SPODE("f0", **kw), False, "f0"),
}


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize(("m", "half_life"), [(1.0, None), (0.0, None), (2.0, 15.0)])
@pytest.mark.parametrize("name", sorted(SUPER_PARENT))
def test_super_parent_alpha_zero_matches_brute_force(
    name: str, m: float, half_life: float | None, sparse: bool
) -> None:
    factory, weighted, only = SUPER_PARENT[name]
    model = factory(alpha=0, min_parent_count=m, half_life=half_life)
    if sparse:
        model._store.keep_sparse()  # type: ignore[attr-defined]
    rng = random.Random(1)
    seen: list[Event] = []
    finite_everywhere = 0
    with strict():
        for t, (x, y, w) in enumerate(make_stream(seed=7, n=70)):
            ref = Reference(seen, 0.0, half_life)
            for probe in probes(x, rng):
                want = ref.aode(probe, m, weighted, only)
                got = model.predict_log_proba_one(probe)
                assert_close(got, want, f"step {t} x={probe}")
                finite_everywhere += len(got) == len(ref.classes)
            model.learn_one(x, y, w)
            seen.append((x, y, w))
    assert 0 < finite_everywhere < 4 * 70  # both cases met: some class at probability 0 or not


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("name", ["TAN", "KDB-k1"])
def test_tree_alpha_zero_matches_brute_force(name: str, sparse: bool) -> None:
    model: TAN | KDB = (
        TAN(alpha=0, rebuild_every=16) if name == "TAN" else KDB(1, alpha=0, rebuild_every=16)
    )
    if sparse:
        model._store.keep_sparse()
    rng = random.Random(2)
    seen: list[Event] = []
    with strict():
        for t, (x, y, w) in enumerate(make_stream(seed=8, n=120, dependent=True)):
            ref = Reference(seen, 0.0)
            for probe in probes(x, rng):
                want = ref.tree(probe, model.parents, 1.0)
                assert_close(model.predict_log_proba_one(probe), want, f"step {t} x={probe}")
            model.learn_one(x, y, w)
            seen.append((x, y, w))
    assert any(model.parents.values())  # a structure was used


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_kdb_families_alpha_zero_match_brute_force(alpha: float) -> None:
    model = KDB(2, alpha=alpha, rebuild_every=16)
    rng = random.Random(3)
    seen: list[Event] = []
    starts: dict[str, int] = {}  # first event in each feature's family counts
    tracked: dict[str, tuple[str, ...]] = {}
    used = 0
    with strict():
        for t, (x, y, w) in enumerate(make_stream(seed=9, n=200, dependent=True)):
            ref = Reference(seen, alpha)
            for probe in probes(x, rng):
                parents = {str(f): tuple(map(str, pa)) for f, pa in model.parents.items()}
                want = ref.tree(probe, parents, 1.0, starts)
                assert_close(model.predict_log_proba_one(probe), want, f"step {t} x={probe}")
            model.learn_one(x, y, w)
            seen.append((x, y, w))
            for f, pa in model.parents.items():
                if tracked.get(str(f)) != pa:
                    tracked[str(f)] = tuple(map(str, pa))
                    starts[str(f)] = len(seen)
            used += any(len(pa) >= 2 for pa in model.parents.values())
    assert used > 100  # families were in use for most of the stream


def test_reference_agrees_with_smoothed_learners_too() -> None:
    """The reference itself, at α > 0, is the learners' documented formula."""
    model = AODE(alpha=0.5)
    seen: list[Event] = []
    for x, y, w in make_stream(seed=3, n=40):
        assert_close(
            model.predict_log_proba_one(x), Reference(seen, 0.5).aode(x, 1.0, False), str(x)
        )
        model.learn_one(x, y, w)
        seen.append((x, y, w))


@pytest.mark.parametrize(
    "factory",
    [
        lambda: AODE(0),
        lambda: AODE(0, weighting="mutual_information"),
        lambda: SPODE("cat0", alpha=0),
        lambda: TAN(0, rebuild_every=50),
        lambda: KDB(2, alpha=0, rebuild_every=50),
    ],
)
def test_mixed_stream_with_warm_up_never_nan(factory: Callable[[], Learner]) -> None:
    model = factory()
    with strict():
        for x, y in mixed_stream(seed=4, n=400, missing=0.1):
            lp = model.predict_log_proba_one(x)
            if lp:
                assert all(math.isfinite(v) for v in lp.values())
                assert abs(sum(math.exp(v) for v in lp.values()) - 1.0) < 1e-9
            model.learn_one(x, y)


@pytest.mark.parametrize("name", ["AODE", "SPODE", "TAN"])
def test_batch_kernels_are_off_for_alpha_zero(name: str) -> None:
    def make() -> Learner:
        return {"AODE": AODE, "SPODE": lambda alpha: SPODE("f0", alpha=alpha), "TAN": TAN}[name](
            alpha=0
        )

    events = [(x, y, w) for x, y, w in make_stream(seed=5, n=300) if "late" not in x]
    model, ref = make(), make()
    for x, y, w in events[:100]:
        model.learn_one(x, y, w)
        ref.learn_one(x, y, w)
    batch = events[100:]
    names = ("f0", "f1", "f2", "f3")
    columns = [[x.get(f) for x, _y, _w in batch] for f in names]
    ys, ws = [y for _x, y, _w in batch], [w for _x, _y, w in batch]
    before = json.dumps(model.to_state())
    assert model.predict_learn_columns(names, columns, ys, ws) is None
    assert json.dumps(model.to_state()) == before
    with strict():
        lps, _preds, errors = model.predict_learn_many([x for x, _y, _w in batch], ys, ws)
    assert errors == {}
    for (x, y, w), lp in zip(batch, lps, strict=True):
        assert lp == ref.predict_log_proba_one(x)
        ref.learn_one(x, y, w)
    assert json.dumps(model.to_state()) == json.dumps(ref.to_state())


@pytest.mark.parametrize("cls", [AODE, TAN])
def test_alpha_zero_accepted_negative_rejected(cls: type[Learner]) -> None:
    assert cls(alpha=0).alpha == 0.0  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="alpha must be non-negative"):
        cls(alpha=-1.0)  # type: ignore[call-arg]
