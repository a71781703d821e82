"""The token learners' batch kernels (``predict_learn_rows``) against the per-event loop.

Each kernel batch is compared with :func:`stream_nb._batch.predict_learn_loop` on a
twin model: the same log posteriors to 1e-10, the same decisions (up to exact
near-ties), and the same state after every batch, bit for bit. The streams are
seeded Zipf token counts with new classes and new tokens mid-stream, zero
counts, unlabelled events and weights; batches the kernel declines must leave
the model unchanged.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Hashable
from typing import Any

import pytest
from kernel_checks import zipf_documents as _stream

from stream_nb import BernoulliNB, ComplementNB, Learner, MultinomialNB
from stream_nb._batch import predict_learn_loop
from stream_nb.naive_bayes._arrays import per_event_answers
from stream_nb.naive_bayes._text_batch import MIN_BATCH

Event = tuple[dict[str, Any], Hashable | None, float]

LEARNERS: dict[str, Callable[[], Learner]] = {
    "multinomial": MultinomialNB,
    "multinomial-alpha": lambda: MultinomialNB(alpha=0.3, fit_prior=False),
    "complement": ComplementNB,
    "complement-norm": lambda: ComplementNB(norm=True, alpha=0.5),
    "bernoulli": BernoulliNB,
    "bernoulli-threshold": lambda: BernoulliNB(binarize=1.0, alpha=2.0),
}


def _ws(chunk: list[Event]) -> list[float]:
    return [w for _, _, w in chunk]


def _compare(
    make: Callable[[], Learner], events: list[Event], batch: int = 200
) -> tuple[int, Learner]:
    """Run ``events`` through the kernel (falling back to the loop where it declines)
    and through the loop alone; return the number of batches the kernel took."""
    fast, slow = make(), make()
    taken = 0
    for start in range(0, len(events), batch):
        chunk = events[start : start + batch]
        xs = [x for x, _, _ in chunk]
        ys = [y for _, y, _ in chunk]
        before = fast.to_state()
        out = fast.predict_learn_rows(xs, ys, _ws(chunk))
        if out is None:
            assert fast.to_state() == before  # a declined batch changes nothing
            got = predict_learn_loop(
                fast.joint_log_likelihood_one, fast.learn_one, xs, ys, _ws(chunk)
            )
        else:
            taken += 1
            got = per_event_answers(*out)
        want = predict_learn_loop(slow.joint_log_likelihood_one, slow.learn_one, xs, ys, _ws(chunk))
        assert got[2].keys() == want[2].keys()
        for lp, ref, pred, ref_pred in zip(got[0], want[0], got[1], want[1], strict=True):
            assert (lp is None) == (ref is None)
            if lp is None or ref is None:
                continue
            assert lp.keys() == ref.keys()
            for label, value in ref.items():
                assert math.isclose(lp[label], value, rel_tol=1e-10, abs_tol=1e-10)
            if pred != ref_pred:  # only an exact tie up to rounding may differ
                assert math.isclose(ref[pred], ref[ref_pred], abs_tol=1e-10)
        assert fast.to_state() == slow.to_state()
        assert fast.n_learned == slow.n_learned
    return taken, fast


@pytest.mark.parametrize("name", sorted(LEARNERS))
@pytest.mark.parametrize("batch", [MIN_BATCH, 200, 700])
def test_kernel_equals_the_per_event_loop(name: str, batch: int) -> None:
    binary = name == "bernoulli-threshold"
    events = _stream(3000, seed=batch, binary=False)
    taken, _ = _compare(LEARNERS[name], events, batch)
    assert taken >= len(events) // batch - 2
    if binary:
        _compare(LEARNERS[name], _stream(1000, seed=2, binary=True), batch)


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_integral_weights(name: str) -> None:
    taken, _ = _compare(LEARNERS[name], _stream(2400, seed=5, weights=[1.0, 2.0, 3.0]), 300)
    assert taken >= 6


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_real_weights_give_the_per_event_state_bit_for_bit(name: str) -> None:
    taken, _ = _compare(LEARNERS[name], _stream(2400, seed=6, weights=[1.0, 0.5, 2.25, 0.1]), 300)
    assert taken >= 6


def test_bernoulli_binary_values() -> None:
    events = [(x, y, w) for x, y, w in _stream(2000, seed=8, binary=True)]
    taken, _ = _compare(lambda: BernoulliNB(binarize=None), events, 250)
    assert taken >= 6


def _warm(make: Callable[[], Learner], n: int = 300) -> tuple[Learner, list[Event]]:
    model = make()
    events = _stream(n + 200, seed=11)
    for x, y, w in events[:n]:
        if y is not None:
            model.learn_one(x, y, w)
    return model, events[n:]


def _declines(model: Learner, chunk: list[Event]) -> None:
    before = model.to_state()
    xs = [x for x, _, _ in chunk]
    ys = [y for _, y, _ in chunk]
    assert model.predict_learn_rows(xs, ys, _ws(chunk)) is None
    assert model.to_state() == before


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_batches_the_kernel_declines(name: str) -> None:
    make = LEARNERS[name]
    model, chunk = _warm(make)
    assert (
        model.predict_learn_rows([x for x, _, _ in chunk[:10]], [y for _, y, _ in chunk[:10]])
        is None
    )
    _declines(model, [(x, "a new class" if i == 50 else y, w) for i, (x, y, w) in enumerate(chunk)])
    _declines(
        model, [({**x, "t": "text"} if i == 7 else x, y, w) for i, (x, y, w) in enumerate(chunk)]
    )
    _declines(model, [(x, y, 1e60 if i == 3 else w) for i, (x, y, w) in enumerate(chunk)])
    _declines(make(), chunk)  # nothing learned yet
    if isinstance(model, (MultinomialNB, ComplementNB)):
        _declines(
            model, [({**x, "neg": -1} if i == 9 else x, y, w) for i, (x, y, w) in enumerate(chunk)]
        )
        _declines(
            model,
            [({**x, "big": 1e101} if i == 9 else x, y, w) for i, (x, y, w) in enumerate(chunk)],
        )


@pytest.mark.parametrize(
    "make",
    [
        lambda: ComplementNB(max_vocabulary=400),
        lambda: BernoulliNB(max_features=400),
        lambda: MultinomialNB(class_prior={0: 1, 1: 2, 2: 3}),
    ],
)
def test_bounds_reached_and_fixed_priors_take_the_per_event_path(
    make: Callable[[], Learner],
) -> None:
    model, chunk = _warm(make)
    _declines(model, chunk)


@pytest.mark.parametrize(
    "make",
    [
        lambda: MultinomialNB(class_prior={0: 1, 1: 2, 2: 3, 3: 0.5}),
        lambda: MultinomialNB(alpha=0.3, class_prior={0: 0.2, 1: 0.2, 2: 0.5, 3: 0.1}),
        lambda: BernoulliNB(class_prior={0: 1, 1: 2, 2: 3, 3: 0.5}),
        lambda: BernoulliNB(class_prior={0: 1e-300, 1: 1, 2: 1e300, 3: 1}, half_life=800),
    ],
)
def test_fixed_priors_of_every_class_take_the_kernel(make: Callable[[], Learner]) -> None:
    """``class_prior`` naming every class learned: ``log class_prior[y]`` on the kernel;
    one naming fewer classes leaves the batch to the per-event path (above)."""
    taken, _ = _compare(make, _stream(2400, seed=9, weights=[1.0, 2.0]), 300)
    assert taken >= 4


def test_bounds_not_reached_in_the_batch_keep_the_kernel() -> None:
    taken, _ = _compare(
        lambda: MultinomialNB(max_vocabulary=100_000, max_features=50_000),
        _stream(1500, seed=3),
        300,
    )
    assert taken >= 3


def test_caches_after_a_kernel_batch() -> None:
    """The derived caches the per-event path reads next are those it would have built."""
    events = _stream(1500, seed=4)
    xs = [x for x, _, _ in events]
    ys = [y for _, y, _ in events]
    for make in (MultinomialNB, BernoulliNB, lambda: ComplementNB(norm=True)):
        model = make()
        model.predict_learn_many(xs[:500], ys[:500], [1.0] * 500)
        assert model.predict_learn_rows(xs[500:740], ys[500:740]) is not None
        rebuilt = Learner.from_state(model.to_state())
        if isinstance(model, MultinomialNB):
            assert model._counts == rebuilt._counts  # the log1p cache, bit for bit
        elif isinstance(model, BernoulliNB):
            assert model._hist == rebuilt._hist
            assert model._on_words == rebuilt._on_words
        else:
            assert isinstance(model, ComplementNB) and isinstance(rebuilt, ComplementNB)
            assert math.isclose(model._sum_log_total, rebuilt._sum_log_total, rel_tol=1e-12)
            for d, e in zip(model._sum_d, rebuilt._sum_d, strict=True):
                assert math.isclose(d, e, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("name", ["multinomial", "complement-norm", "bernoulli"])
def test_the_kernels_record_the_delta(name: str) -> None:
    """A tracked delta learns what the kernel learned, as learn_one would record it."""
    make = LEARNERS[name]
    events = _stream(1200, seed=9)
    xs = [x for x, _, _ in events]
    ys = [y for _, y, _ in events]
    ws = [1.0] * len(xs)
    fast, slow = make(), make()
    for model in (fast, slow):
        model.predict_learn_many(xs[:300], ys[:300], ws[:300])
        model.track_delta()
    assert fast.columns_supported  # the engine keeps the row path while a delta is tracked
    assert fast.predict_learn_rows(xs[300:500], ys[300:500]) is not None
    fast.predict_learn_many(xs[500:], ys[500:], ws[500:])
    predict_learn_loop(slow.joint_log_likelihood_one, slow.learn_one, xs[300:], ys[300:], ws[300:])
    assert fast.delta is not None and slow.delta is not None
    assert fast.delta.to_state() == slow.delta.to_state()
    assert fast.delta_weight == slow.delta_weight
    rebuilt = make()
    rebuilt.predict_learn_many(xs[:300], ys[:300], ws[:300])
    rebuilt.apply_delta(*fast.cut_delta())
    assert rebuilt.to_state() == fast.to_state()


@pytest.mark.parametrize("name", ["multinomial", "complement-norm", "bernoulli"])
def test_counts_changed_between_kernel_batches(name: str) -> None:
    """Learning one event at a time, merging and loading between kernel batches: the
    kernel reads the counts as they are (its array of counts is rebuilt)."""
    make = LEARNERS[name]
    events = _stream(3000, seed=12)
    xs = [x for x, _, _ in events]
    ys = [y for _, y, _ in events]
    ws = [1.0] * len(xs)
    fast, slow = make(), make()
    other = make()
    for x, y in zip(xs[300:500], ys[300:500], strict=True):
        if y is not None:
            other.learn_one(x, y)
    steps: list[Callable[[Learner], Any]] = [
        lambda model: model.merge(other),
        lambda model: [
            model.learn_one(x, y)
            for x, y in zip(xs[500:520], ys[500:520], strict=True)
            if y is not None
        ],
        lambda model: model.apply_delta(other, 3.0) if model.half_life else model.merge(other),
    ]
    for model in (fast, slow):
        predict_learn_loop(
            model.joint_log_likelihood_one, model.learn_one, xs[:300], ys[:300], ws[:300]
        )
    assert fast.predict_learn_rows(xs[:100], ys[:100]) is not None  # (its array now exists)
    predict_learn_loop(slow.joint_log_likelihood_one, slow.learn_one, xs[:100], ys[:100], ws[:100])
    start = 520
    for step in steps:
        step(fast)
        step(slow)
        chunk = slice(start, start + 200)
        got = fast.predict_learn_rows(xs[chunk], ys[chunk])
        assert got is not None
        want = predict_learn_loop(
            slow.joint_log_likelihood_one, slow.learn_one, xs[chunk], ys[chunk], ws[chunk]
        )
        for lp, ref in zip(per_event_answers(*got)[0], want[0], strict=True):
            assert lp is not None and ref is not None
            for label, value in ref.items():
                assert math.isclose(lp[label], value, rel_tol=1e-10, abs_tol=1e-10)
        assert fast.to_state() == slow.to_state()
        start += 200
    fast = Learner.from_state(fast.to_state())
    assert fast.predict_learn_rows(xs[start : start + 100], ys[start : start + 100]) is not None


def test_the_input_is_not_mutated() -> None:
    events = _stream(600, seed=10)
    xs = [x for x, _, _ in events]
    ys = [y for _, y, _ in events]
    copies = copy.deepcopy(xs)
    for make in LEARNERS.values():
        make().predict_learn_many(xs, ys, [1.0] * len(xs))
    assert xs == copies
