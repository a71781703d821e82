"""The token learners' two layouts of their counts (per-token rows, the kernels' array):
kernel batches, per-event batches, single events, predictions, states, merges,
rescales and sizes in any order give the per-event path's model bit for bit; the
array's size bounds fall back to the per-event path; a batch that meets new classes
takes the kernel after them; bools count as 0/1 on both paths."""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable, Hashable
from typing import Any, ClassVar

import numpy as np
import pytest

from stream_nb import BernoulliNB, ComplementNB, Learner, MultinomialNB
from stream_nb._batch import predict_learn_loop
from stream_nb.datasets import zipf_text
from stream_nb.naive_bayes._arrays import per_event_answers
from stream_nb.naive_bayes._token_store import Codes, TokenStore, count_matrix

Event = tuple[dict[str, Any], Hashable | None, float]

LEARNERS: dict[str, Callable[[], Learner]] = {
    "multinomial": MultinomialNB,
    "multinomial-mle": lambda: MultinomialNB(alpha=0.0),
    "complement": ComplementNB,
    "complement-norm": lambda: ComplementNB(norm=True, alpha=0.5),
    "bernoulli": BernoulliNB,
    "bernoulli-binary": lambda: BernoulliNB(binarize=None, alpha=0.7),
}


def _events(n: int, *, seed: int, binary: bool = False, weights: bool = False) -> list[Event]:
    """Zipf documents over 3 classes (a 4th from the middle on), some unlabelled, some
    zero counts, some weights."""
    rng = random.Random(seed)
    out: list[Event] = []
    for i, (x, y) in enumerate(zipf_text(seed, n, vocabulary=800, length=(1, 30), classes=3)):
        x = dict(x)
        if i > n // 2 and rng.random() < 0.1:
            y = 3
        if rng.random() < 0.1:
            x[next(iter(x))] = 0
        if binary:
            x = {t: int(c > 0) for t, c in x.items()}
        w = rng.choice([1.0, 2.0, 3.0]) if weights and rng.random() < 0.3 else 1.0
        out.append((x, None if rng.random() < 0.1 else y, w))
    return out


def _close_answers(got: Any, want: Any) -> None:
    for lp, ref in zip(got[0], want[0], strict=True):
        assert (lp is None) == (ref is None)
        if lp is None or ref is None:
            continue
        assert lp.keys() == ref.keys()
        for label, value in ref.items():
            assert math.isclose(lp[label], value, rel_tol=1e-10, abs_tol=1e-10)
    assert got[2].keys() == want[2].keys()


def _steps(rng: random.Random, other: Learner) -> list[tuple[str, Callable[..., Any]]]:
    """What a step between kernel batches may do to a model (the same to both)."""

    def learn(model: Learner, chunk: list[Event]) -> Any:
        for x, y, w in chunk[:5]:
            if y is not None:
                model.learn_one(x, y, w)
        return None

    def predict(model: Learner, chunk: list[Event]) -> Any:
        return [model.predict_log_proba_one(x) for x, _, _ in chunk[:5]]

    return [
        ("learn_one", learn),
        ("predict", predict),
        ("model_size", lambda model, chunk: model.model_size()),
        ("state", lambda model, chunk: model.to_state()),
        ("merge", lambda model, chunk: model.merge(copy.deepcopy(other)) and None),
        ("features", lambda model, chunk: model.feature_names()),
        ("informative", lambda model, chunk: model.informative_features(3)),
    ]


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_any_order_of_kernel_batches_and_other_calls(name: str) -> None:
    """Each step: a kernel batch (a model whose rows may be stale) next to the per-event
    loop on a twin, then something else that reads or changes the counts, on both."""
    make = LEARNERS[name]
    events = _events(4000, seed=7, binary=name == "bernoulli-binary", weights=True)
    rng = random.Random(3)
    other = make()
    for x, y, w in events[:200]:
        if y is not None:
            other.learn_one(x, y, w)
    fast, slow = make(), make()
    for model in (fast, slow):
        predict_learn_loop(
            model.joint_log_likelihood_one, model.learn_one, *_split(events[200:400])
        )
    steps = _steps(rng, other)
    start, taken = 400, 0
    while start < len(events):
        chunk = events[start : start + rng.choice([64, 150, 300])]
        start += len(chunk)
        xs, ys, ws = _split(chunk)
        got = fast.predict_learn_rows(xs, ys, ws)
        want = predict_learn_loop(slow.joint_log_likelihood_one, slow.learn_one, xs, ys, ws)
        if got is None:
            got_answers = predict_learn_loop(
                fast.joint_log_likelihood_one, fast.learn_one, xs, ys, ws
            )
        else:
            taken += 1
            got_answers = per_event_answers(*got)
        _close_answers(got_answers, want)
        label, step = rng.choice(steps)
        result_fast, result_slow = step(fast, chunk), step(slow, chunk)
        if label == "predict":
            _close_answers((result_fast, [], {}), (result_slow, [], {}))
        elif label != "informative":
            assert result_fast == result_slow, label
        assert fast.to_state() == slow.to_state(), label
    assert taken >= (0 if name.endswith("mle") else 5)  # (alpha=0: most batches rule a class out)


@pytest.mark.parametrize("name", ["multinomial", "complement-norm", "bernoulli"])
def test_rows_rebuilt_from_the_array_are_the_per_event_rows(name: str) -> None:
    """A model whose counts only the kernel learned for a while rebuilds, when read,
    the rows (MultinomialNB's log cache included) the per-event path holds."""
    make = LEARNERS[name]
    events = _events(2500, seed=11)
    fast, slow = make(), make()
    xs, ys, ws = _split(events)
    fast.predict_learn_many(xs[:300], ys[:300], ws[:300])
    slow.predict_learn_many(xs[:300], ys[:300], ws[:300])
    taken = 0
    for start in range(300, len(xs), 400):
        part = slice(start, start + 400)
        if fast.predict_learn_rows(xs[part], ys[part], ws[part]) is None:
            fast.predict_learn_many(xs[part], ys[part], ws[part])  # (a new class)
        else:
            taken += 1
        predict_learn_loop(
            slow.joint_log_likelihood_one, slow.learn_one, xs[part], ys[part], ws[part]
        )
    assert taken >= 3 and fast._rows_stale  # (the last batch was the kernel's)
    assert fast.model_size() == slow.model_size()  # (reads every row)
    assert fast._counts == slow._counts  # the rows themselves, in the same order
    assert list(fast._counts) == list(slow._counts)


class _SmallArray(MultinomialNB):
    """A MultinomialNB whose kernels keep an array of at most 2,000 cells."""

    _ARRAY_CELLS: ClassVar[int] = 2000


class _SmallBatches(ComplementNB):
    """A ComplementNB whose kernels take batches of at most 1,000 cells."""

    _BATCH_CELLS: ClassVar[int] = 1000


def test_the_array_bound_falls_back_to_the_per_event_path() -> None:
    """Past the bound no array is kept (the rows made fresh first) and every batch takes
    the per-event path, with the same answers and model."""
    events = _events(3000, seed=5)
    fast, slow = _SmallArray(), _SmallArray()
    xs, ys, ws = _split(events)
    taken = declined = 0
    for start in range(0, len(xs), 200):
        part = slice(start, start + 200)
        got = fast.predict_learn_many(xs[part], ys[part], ws[part])
        want = predict_learn_loop(
            slow.joint_log_likelihood_one, slow.learn_one, xs[part], ys[part], ws[part]
        )
        _close_answers(got, want)
        assert fast.to_state() == slow.to_state()
        before = fast.to_state()
        if fast.predict_learn_rows(xs[part][:64], [None] * 64) is None:
            declined += 1
            assert fast._store is None  # (bounded: nothing kept)
            assert fast.to_state() == before
        else:
            taken += 1
            predict_learn_loop(
                slow.joint_log_likelihood_one,
                slow.learn_one,
                xs[part][:64],
                [None] * 64,
                [1.0] * 64,
            )
    assert taken >= 1 and declined >= 5  # (the vocabulary outgrows 2,000 / 4 classes)
    assert len(fast._counts) * 4 > _SmallArray._ARRAY_CELLS


def test_the_batch_bound_declines_large_batches() -> None:
    """A batch of more cells (classes × entries) than the bound goes to the per-event path."""
    events = _events(1200, seed=6)
    model, twin = _SmallBatches(), ComplementNB()
    xs, ys, ws = _split(events)
    for m in (model, twin):
        m.predict_learn_many(xs[:300], ys[:300], ws[:300])
    assert sum(map(len, xs[300:364])) * len(model._class_weight) > _SmallBatches._BATCH_CELLS
    before = model.to_state()
    assert model.predict_learn_rows(xs[300:364], ys[300:364], ws[300:364]) is None
    assert model.to_state() == before
    assert twin.predict_learn_rows(xs[300:364], ys[300:364], ws[300:364]) is not None


class _CountingKernel(MultinomialNB):
    """A MultinomialNB that counts the events its kernel took."""

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.kernel_events = 0

    def _row_kernel(self, xs: Any, ys: Any, ws: Any) -> Any:
        out = super()._row_kernel(xs, ys, ws)
        if out is not None:
            self.kernel_events += len(xs)
        return out


def test_a_batch_with_new_classes_takes_the_kernel_after_them() -> None:
    """The first batch of a stream (no class yet) and a batch that brings a class: event
    by event up to the last new class, the kernel for the rest, the loop's answers."""
    events = _events(1500, seed=9)
    xs, ys, ws = _split(events)
    fast, slow = _CountingKernel(), MultinomialNB()
    ys = list(ys)
    ys[900] = "late class"
    ys[1300] = "later class"
    for part in (slice(0, 500), slice(500, 1000), slice(1000, 1500)):
        got = fast.predict_learn_many(xs[part], ys[part], ws[part])
        want = predict_learn_loop(
            slow.joint_log_likelihood_one, slow.learn_one, xs[part], ys[part], ws[part]
        )
        _close_answers(got, want)
        assert got[1] == want[1] or all(
            math.isclose(max(lp.values()), lp[p], abs_tol=1e-10)
            for lp, p in zip(got[0], got[1], strict=True)
            if lp
        )
        assert fast.to_state()["stats"] == slow.to_state()["stats"]
        assert fast.n_learned == slow.n_learned
    # every part but the events up to a new class went through the kernel
    assert fast.kernel_events >= 1500 - 10 - (900 - 500) - (1300 - 1000) - 3 * 64


def test_bool_counts_take_the_kernel_as_zero_or_one() -> None:
    """``True``/``False`` count as 1/0 for the count learners, on both paths."""
    events = _events(880, seed=4)[:440]  # (the 4th class comes after)
    rng = random.Random(1)
    for make in (MultinomialNB, lambda: ComplementNB(norm=True)):
        fast, slow = make(), make()
        xs, ys, ws = _split(events)
        xs = [{t: (rng.random() < 0.5) if c == 1 else c for t, c in x.items()} for x in xs]
        fast.predict_learn_many(xs[:200], ys[:200], ws[:200])
        slow.predict_learn_many(xs[:200], ys[:200], ws[:200])
        got = fast.predict_learn_rows(xs[200:], ys[200:], ws[200:])
        assert got is not None
        want = predict_learn_loop(
            slow.joint_log_likelihood_one, slow.learn_one, xs[200:], ys[200:], ws[200:]
        )
        _close_answers(per_event_answers(*got), want)
        assert fast.to_state() == slow.to_state()


def test_complement_sums_refreshed_from_either_layout_are_the_same_bits() -> None:
    """ComplementNB(norm=True) refreshes its sums from whichever layout holds the counts:
    the same numbers either way, so a copy from the state predicts bit for bit alike."""
    events = _events(3000, seed=8)
    xs, ys, ws = _split(events)
    model = ComplementNB(norm=True)
    model.predict_learn_many(xs[:300], ys[:300], ws[:300])
    for start in range(300, 3000, 300):
        model.predict_learn_rows(xs[start : start + 300], ys[start : start + 300])
    copy_ = Learner.from_state(model.to_state())  # (to_state refreshes the sums first)
    for x in xs[:50]:
        assert model.predict_log_proba_one(x) == copy_.predict_log_proba_one(x)


def test_codes_note_the_missing_tokens_in_order() -> None:
    codes = Codes({"a": 0, "b": 1})
    assert [codes[t] for t in ("b", "x", "a", "y", "x")] == [1, -1, 0, -1, -1]
    assert codes.missing == ["x", "y", "x"]
    assert copy.deepcopy(codes) == codes


def test_the_store_mirrors_the_rows_of_any_layout() -> None:
    rows = {"a": [1.0, 0.5, 2.0], "b": [1.0, 0.0, 0.0, 0.25, 3.0], "c": [1.0]}
    assert count_matrix(rows.values(), 2, (2, 2)).tolist() == [[2.0, 0.0, 0.0], [0.0, 3.0, 0.0]]
    store = TokenStore(2, 2)
    store.sync(rows, 2)
    assert store.code == {"a": 0, "b": 1, "c": 2}
    assert store.matrix().tolist() == [[2.0, 0.0, 0.0], [0.0, 3.0, 0.0]]
    store.reserve(500)
    assert store.counts.shape[1] >= 500 and store.matrix().shape == (2, 3)
    store.mark(np.array([1]))
    tokens, columns = store.take_dirty()
    assert tokens == ["b"] and columns.tolist() == [[0.0], [3.0]]
    assert store.take_dirty()[0] == []


def _split(events: list[Event]) -> tuple[list[dict[str, Any]], list[Hashable | None], list[float]]:
    return [x for x, _, _ in events], [y for _, y, _ in events], [w for _, _, w in events]


@pytest.mark.parametrize("name", ["multinomial", "complement-norm"])
def test_fractional_counts_and_empty_events(name: str) -> None:
    """Real-valued counts (each count the per-event path's sum, added in event order) and
    events without tokens (summed per event without ``reduceat``)."""
    make = LEARNERS[name]
    events = _events(1200, seed=12)[:560]
    rng = random.Random(2)
    xs, ys, ws = _split(events)
    xs = [{} if rng.random() < 0.05 else {t: c * 0.37 for t, c in x.items()} for x in xs]
    fast, slow = make(), make()
    for model in (fast, slow):
        model.predict_learn_many(xs[:100], ys[:100], ws[:100])
    taken = 0
    for start in range(100, 560, 115):
        part = slice(start, start + 115)
        got = fast.predict_learn_rows(xs[part], ys[part], ws[part])
        want = predict_learn_loop(
            slow.joint_log_likelihood_one, slow.learn_one, xs[part], ys[part], ws[part]
        )
        assert got is not None
        taken += 1
        _close_answers(per_event_answers(*got), want)
        assert fast.to_state() == slow.to_state()
    assert taken == 4


def test_a_vocabulary_past_65536_codes() -> None:
    """Token codes past 16 bits sort on the batch's own codes: the same model."""
    rng = random.Random(13)
    fast, slow = BernoulliNB(), BernoulliNB()
    for model in (fast, slow):
        model.learn_one({"seed": 1}, "a")
        model.learn_one({"seed": 1}, "b")
    for batch in range(4):
        xs = [
            {f"t{batch}_{i}_{j}": 1 for j in range(280)} | {"common": 1, f"r{rng.randint(0, 9)}": 1}
            for i in range(64)
        ]
        ys = [rng.choice("ab") for _ in xs]
        got = fast.predict_learn_rows(xs, ys)
        want = predict_learn_loop(slow.joint_log_likelihood_one, slow.learn_one, xs, ys, [1.0] * 64)
        assert got is not None
        _close_answers(per_event_answers(*got), want)
    assert len(fast._counts) > 1 << 16
    assert fast.to_state() == slow.to_state()
