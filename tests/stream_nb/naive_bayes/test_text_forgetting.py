"""The token learners' batch kernels with forgetting (``half_life``) and fixed feature
weights (``feature_weights``) against the per-event loop.

Every prediction agrees to 1e-9 (the decision where the best class leads by more) and
the state after every batch is the per-event path's to the bit (counts, class weights,
the scale), on seeded Zipf streams with unlabelled events, zero counts, new tokens, a
class first met mid-stream and real weights; half-lives from 2 events (the scale
renormalises within the stream: those batches go per event, unchanged) to 10,000;
ComplementNB's normalising sums both event by event (a half-life of a few events) and
through their series; BernoulliNB's aggregates with a token on in every event and a tiny
α (``N − c`` is then 0 and the terms are ``log α``)."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_checks import Event, against_the_loop
from kernel_checks import zipf_documents as _stream

from stream_nb import BernoulliNB, ComplementNB, Learner, MultinomialNB
from tests.stream_nb.naive_bayes.oracles import token_events

LEARNERS: dict[str, tuple[Callable[..., Learner], dict[str, Any]]] = {
    "multinomial": (MultinomialNB, {}),
    "multinomial-lidstone": (MultinomialNB, {"alpha": 0.3, "fit_prior": False}),
    "complement": (ComplementNB, {}),
    "complement-norm": (ComplementNB, {"norm": True, "alpha": 0.5}),
    "bernoulli": (BernoulliNB, {}),
    "bernoulli-threshold": (BernoulliNB, {"binarize": 1.0, "alpha": 2.0}),
}

#: Weights for tokens of the vocabulary (frequent and rare ones) and for tokens first met
#: in a batch (``new…``): 0 (not scored, still learned), below and above 1.
WEIGHTS = {"w1": 0.0, "w2": 2.5, "w7": 0.5, "w40": 0.0, "w300": 3.0, "new500": 2.0, "new900b": 0.0}


class _Kernel:
    """The learner's own ``predict_learn_many`` (its kernel where it takes the batch, after
    the events that bring new classes); counts the batches a kernel wrote."""

    def __init__(self) -> None:
        self.taken = 0

    def __call__(self, model: Any, xs: Any, ys: Any, ws: Any) -> Any:
        out = model.predict_learn_many(xs, ys, ws)
        self.taken += bool(model._rows_stale)  # (a kernel batch leaves rows to rebuild)
        return out


def _check(make: Callable[[], Learner], events: list[Event], seed: int) -> int:
    kernel = _Kernel()
    against_the_loop(make, events, seed, kernel, exact_state=True)
    return kernel.taken


@pytest.mark.parametrize("name", sorted(LEARNERS))
@pytest.mark.parametrize("half_life", [2.0, 40.0, 10_000.0])
@pytest.mark.parametrize("weights", [None, [1.0, 0.5, 2.25, 3.0]], ids=["unit", "real"])
def test_forgetting_kernels_equal_the_loop(
    name: str, half_life: float, weights: list[float] | None
) -> None:
    cls, params = LEARNERS[name]
    events = _stream(2000, seed=int(half_life) % 7 + 1, weights=weights)
    taken = _check(lambda: cls(half_life=half_life, **params), events, 3)
    # half_life=2: the scale renormalises every ~100 events (every 200 units of weight);
    # the batches within which it does go per event
    assert taken >= (1 if half_life == 2.0 else 6)


@pytest.mark.parametrize("name", sorted(LEARNERS))
@pytest.mark.parametrize("half_life", [None, 60.0])
def test_feature_weights_kernels_equal_the_loop(name: str, half_life: float | None) -> None:
    cls, params = LEARNERS[name]
    events = _stream(2000, seed=4, weights=[1.0, 2.0, 0.5])
    make = lambda: cls(half_life=half_life, feature_weights=WEIGHTS, **params)  # noqa: E731
    assert _check(make, events, 5) >= 6


def test_maximum_likelihood_with_forgetting_and_weights() -> None:
    """MultinomialNB's kernel takes ``alpha = 0`` (α / scale is 0 at every scale); a weight
    of 0 takes a token's zero-probability terms out."""
    rng = random.Random(6)
    events: list[Event] = []
    for _ in range(1500):  # every token soon counted in every class: no class ruled out
        x = {f"t{j}": rng.randint(1, 3) for j in range(6) if rng.random() < 0.7}
        events.append((x or {"t0": 1}, rng.choice("abc"), rng.choice([1.0, 0.5])))
    for half_life, weights in [(50.0, None), (50.0, {"t1": 0.0, "t2": 2.0}), (None, {"t3": 0})]:
        model = functools.partial(
            MultinomialNB, alpha=0, half_life=half_life, feature_weights=weights
        )
        assert _check(model, events, 7) >= 3


@pytest.mark.parametrize(
    ("make", "half_life"),
    [
        (lambda h: BernoulliNB(alpha=1e-9, half_life=h), None),
        (lambda h: BernoulliNB(alpha=1e-9, half_life=h), 10_000.0),
        (lambda h: BernoulliNB(alpha=1e-6, binarize=0.5, half_life=h), 30.0),
        (lambda h: ComplementNB(alpha=1e-9, norm=True, half_life=h), 10_000.0),
        (lambda h: MultinomialNB(alpha=1e-9, half_life=h), 5.0),
    ],
)
@pytest.mark.parametrize("weights", [None, [1.0, 0.5, 2.25]], ids=["unit", "real"])
def test_a_token_in_every_event_with_a_tiny_alpha(
    make: Callable[[float | None], Learner], half_life: float | None, weights: Any
) -> None:
    """BernoulliNB's ``N_y − N_{y,w}`` is 0 for a token on in every event: its terms are
    ``log α`` to the bit only if the counts and class weights are the per-event path's
    (a sum like ``(N₀ − c − w + α) + δ`` would keep nothing of α)."""
    events = _stream(1500, seed=8, weights=weights, always=True)
    assert _check(lambda: make(half_life), events, 9) >= 4


def test_a_batch_that_renormalises_changes_nothing() -> None:
    """Within this batch the scale would fall below RENORMALISE_BELOW (learn_one folds the
    decay into the counts there): the kernels decline it, the model unchanged."""
    events = _stream(400, seed=10)
    xs = [x for x, _, _ in events[200:]]
    ys = [0 if y in (None, 3) else y for _, y, _ in events[200:]]
    for make in (MultinomialNB, lambda **k: ComplementNB(norm=True, **k), BernoulliNB):
        model, loop = make(half_life=0.5), make(half_life=0.5)  # the scale halves twice an event
        for x, y, w in events[:200]:
            if y is not None:
                model.learn_one(x, y, w)
                loop.learn_one(x, y, w)
        before = model.to_state()
        assert model.predict_learn_rows(xs, ys) is None
        assert model.to_state() == before
        got = model.predict_learn_many(xs, ys, [1.0] * len(xs))
        assert got == Learner.predict_learn_many(loop, xs, ys, [1.0] * len(xs))
        assert model.to_state() == loop.to_state()


def test_a_tracked_delta_with_forgetting_is_recorded_per_event() -> None:
    events = _stream(600, seed=11)
    xs = [x for x, _, _ in events]
    ys = [0 if y in (None, 3) else y for _, y, _ in events]
    for make in (MultinomialNB, lambda **k: ComplementNB(norm=True, **k), BernoulliNB):
        model, loop = make(half_life=50.0), make(half_life=50.0)
        for m in (model, loop):
            Learner.predict_learn_many(m, xs[:200], ys[:200], [1.0] * 200)
            m.track_delta()
        assert model.predict_learn_rows(xs[200:], ys[200:]) is None  # (a delta forgets per event)
        model.predict_learn_many(xs[200:], ys[200:], [1.0] * 400)
        Learner.predict_learn_many(loop, xs[200:], ys[200:], [1.0] * 400)
        assert model.to_state() == loop.to_state()
        assert model.delta is not None and loop.delta is not None
        assert model.delta.to_state() == loop.delta.to_state()
        assert model.cut_delta()[1] == 400.0


def test_the_scale_after_kernel_batches_is_learn_ones() -> None:
    """Real weights, unlabelled events: the scale is the running product learn_one makes."""
    events = _stream(1200, seed=12, weights=[1.0, 0.3, 2.5])
    model = MultinomialNB(half_life=77.0)
    model.learn_one(*events[0])
    loop = MultinomialNB(half_life=77.0)
    loop.learn_one(*events[0])
    for start in range(1, len(events), 300):
        chunk = events[start : start + 300]
        xs, ys, ws = ([e[i] for e in chunk] for i in range(3))
        model.predict_learn_many(xs, ys, ws)
        assert model._rows_stale  # (through the kernel)
        for x, y, w in chunk:
            if y is not None:
                loop.learn_one(x, y, w)
        assert model._scale == loop._scale
        assert model.to_state() == loop.to_state()


@pytest.mark.parametrize("cls", [MultinomialNB, ComplementNB, BernoulliNB])
@pytest.mark.parametrize("half_life", [0.5, 5.0, 300.0])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_generated_batches_with_forgetting(cls: Any, half_life: float, data: Any) -> None:
    """Generated events (int and float values, zero counts, weights 0.5 … 3): the learner's
    ``predict_learn_many`` equals the per-event loop, to 1e-9 and to the bit."""
    params: dict[str, Any] = {"half_life": half_life}
    if cls is ComplementNB:
        params["norm"] = data.draw(st.booleans())
    if data.draw(st.booleans()):
        params["feature_weights"] = {"w0": 0.0, "w3": 2.0}
    warm = data.draw(st.lists(token_events(5, 10), min_size=3, max_size=6))
    batch = data.draw(st.lists(token_events(5, 10), min_size=64, max_size=90))
    model, loop = cls(**params), cls(**params)
    for m in (model, loop):
        for x, y, w in warm:
            m.learn_one(x, y, w)
    xs: list[Mapping[str, Any]] = [x for x, _, _ in batch]
    ys: list[Hashable | None] = [y for _, y, _ in batch]
    ws = [w for _, _, w in batch]
    got = model.predict_learn_many(xs, ys, ws)
    want = Learner.predict_learn_many(loop, xs, ys, ws)
    assert got[2].keys() == want[2].keys()
    for lp, ref in zip(got[0], want[0], strict=True):
        assert (lp is None) == (ref is None)
        if lp is not None and ref is not None:
            assert lp.keys() == ref.keys()
            for label, value in ref.items():
                assert math.isclose(lp[label], value, rel_tol=1e-9, abs_tol=1e-9)
    assert model.to_state() == loop.to_state()
