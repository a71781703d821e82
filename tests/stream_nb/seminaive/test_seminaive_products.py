"""The known-event path of AODE and SPODE against sparse dictionaries.

Events whose values are all known strings are scored from the dense block's
counts (every SPODE a product of ratios) and learned without encoding, their
dictionary single counts deferred until read. A model forced to stay sparse is
the reference: every prediction agrees to 1e-12, on streams with missing values
and late features, on complete streams (every event has every feature: the
denominators come from the block's diagonal) with one number of values per
feature and with several, and with the products taken in chunks (as for wide
events). The state (class order within every count included) is identical
whether or not it was read in between. The block's completeness flag always
equals a check of its counts.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Hashable
from typing import Any

import pytest
from _pair_states import canonical_state, sparse

from stream_nb import AODE, SPODE, Learner
from stream_nb.seminaive import _products, _store

TOLERANCE = 1e-12

FACTORIES: dict[str, Callable[..., Learner]] = {
    "AODE": AODE,
    "AODE-min3": lambda **kw: AODE(min_parent_count=3.0, **kw),
    "SPODE": lambda **kw: SPODE("f0", **kw),
}

Event = tuple[dict[str, Any], Hashable, float]


def string_events(seed: int, n: int) -> list[Event]:
    """String values; a late value, a late feature, a late class, absent and None values."""
    rng = random.Random(seed)
    out: list[Event] = []
    for t in range(n):
        y = rng.choice(["a", "b"] if t < n // 3 else ["a", "b", "c"])
        x: dict[str, Any] = {}
        base = rng.randrange(3)
        x["f0"] = f"v{(base + (y == 'a')) % 3}"
        x["f1"] = x["f0"] if rng.random() < 0.7 else f"v{rng.randrange(3 + (t > n // 2))}"
        x["f2"] = rng.choice(["p", "q"])
        x["f3"] = f"w{rng.randrange(2 + (y == 'b'))}"
        if t > n // 4:
            x["late"] = rng.choice(["l0", "l1"])
        if rng.random() < 0.1:
            del x[rng.choice(list(x))]
        if rng.random() < 0.05:
            x[rng.choice(list(x))] = None
        out.append((x, y, rng.choice([1.0, 1.0, 0.5, 2.5])))
    return out


def assert_close(a: dict[Hashable, float], b: dict[Hashable, float]) -> None:
    assert list(a) == list(b)
    for c in b:
        assert abs(a[c] - b[c]) <= TOLERANCE * max(1.0, abs(b[c])), (c, a, b)


def complete_events(seed: int, n: int, values: tuple[int, ...]) -> list[Event]:
    """Every event has every feature; feature ``i`` takes ``values[i]`` values, the
    last ones only after a while (the block is complete, ``S`` uniform or not)."""
    rng = random.Random(seed)
    out: list[Event] = []
    for t in range(n):
        y = rng.choice(["a", "b"] if t < n // 3 else ["a", "b", "c"])
        k = "abc".index(y)
        x = {
            f"f{i}": f"v{(k + rng.randrange(2)) % m if t < n // 4 else rng.randrange(m)}"
            for i, m in enumerate(values)
        }
        out.append((x, y, rng.choice([1.0, 1.0, 0.5, 2.5])))
    return out


STREAMS: dict[str, Callable[[int, int], list[Event]]] = {
    "missing": string_events,
    "complete": lambda seed, n: complete_events(seed, n, (3, 3, 3, 3)),
    "complete-varied": lambda seed, n: complete_events(seed, n, (2, 3, 4, 3)),
}


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("stream", sorted(STREAMS))
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_known_path_equals_sparse_on_every_step(
    name: str, stream: str, chunked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if chunked:  # products of at most 2 or 3 ratios: the logs of chunks, added
        monkeypatch.setattr(_products, "_LOG_TINY", -15.0)
    model = FACTORIES[name]()
    ref = sparse(FACTORIES[name]())
    rng = random.Random(1)
    for x, y, w in STREAMS[stream](2, 300):
        probe = {**x, rng.choice(list(x)): "never-seen"} if x else x
        for event in (x, probe):
            assert_close(model.predict_log_proba_one(event), ref.predict_log_proba_one(event))
        model.learn_one(x, y, w)
        ref.learn_one(x, y, w)
    block = model._store.dense  # type: ignore[attr-defined]
    assert block.complete == (stream != "missing") == block.check_complete()
    assert (block.uniform_s is not None) == (stream == "complete")
    if chunked:
        assert _products.safe_length(block, 1.0, model._store.total_weight) < 4  # type: ignore[attr-defined]
    assert canonical_state(model) == canonical_state(ref)
    assert model.model_size() == ref.model_size()


def test_known_events_take_the_known_path() -> None:
    """After warm-up nearly every event (None values included) is learned as known items."""
    model = AODE()
    events = [e for e in string_events(seed=3, n=200) if "never-seen" not in e[0].values()]
    for x, y, w in events:
        model.predict_log_proba_one(x)
        model.learn_one(x, y, w)
    store = model._store  # type: ignore[attr-defined]
    assert store._n_deferred > 80  # learned by learn_known since the last new value
    assert store.categorical.total_weight == sum(w for _x, _y, w in events)
    assert not store._deferred


@pytest.mark.parametrize("read_every", [1, 7, 50])
def test_reading_between_events_changes_nothing(read_every: int) -> None:
    """Single counts copied from the block in between equal those copied once at the end."""
    events = string_events(seed=4, n=240)
    read, unread = AODE(), AODE()
    for t, (x, y, w) in enumerate(events):
        read.learn_one(x, y, w)
        unread.learn_one(x, y, w)
        if t % read_every == 0:
            read.to_state()
    assert json.dumps(read.to_state()) == json.dumps(unread.to_state())


def test_deferred_counts_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_DEFERRED events the single counts are copied in: the same state."""
    monkeypatch.setattr(_store, "MAX_DEFERRED", 5)
    events = string_events(seed=7, n=240)
    bounded, ref = AODE(), sparse(AODE())
    for x, y, w in events:
        bounded.learn_one(x, y, w)
        ref.learn_one(x, y, w)
        assert bounded._store._n_deferred < 5  # type: ignore[attr-defined]
    assert canonical_state(bounded) == canonical_state(ref)


def test_probabilities_of_known_events_agree_with_the_scores() -> None:
    """predict_proba_one and predict_log_proba_one of a known event, from the total
    directly, equal the normalised joint log-likelihood."""
    model = AODE()
    for x, y, w in string_events(seed=8, n=200):
        model.learn_one(x, y, w)
    x = string_events(seed=9, n=1)[0][0]
    x = {f: v for f, v in x.items() if v is not None}
    jll = model.joint_log_likelihood_one(x)
    top = max(jll.values())
    total = sum(math.exp(v - top) for v in jll.values())
    proba, log_proba = model.predict_proba_one(x), model.predict_log_proba_one(x)
    for c, v in jll.items():
        assert abs(log_proba[c] - (v - top - math.log(total))) <= TOLERANCE
        assert abs(proba[c] - math.exp(v - top) / total) <= TOLERANCE


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_completeness_follows_the_counts(name: str) -> None:
    """Complete while every event has every feature, the batch kernel and a state load
    included; an event with a missing value or a feature met late ends it."""
    model = FACTORIES[name]()
    events = complete_events(11, 600, (3, 3, 3, 3))
    for x, y, w in events[:260]:  # (every value and class)
        model.learn_one(x, y, w)
    block = model._store.dense  # type: ignore[attr-defined]
    assert block.complete and block.check_complete()
    names = tuple(events[0][0])
    batch = events[260:400]
    columns = [[x[f] for x, _y, _w in batch] for f in names]
    out = model.predict_learn_columns(
        names, columns, [y for _x, y, _w in batch], [w for _x, _y, w in batch]
    )
    assert out is not None  # (the kernel)
    assert block.complete and block.check_complete()
    copy = Learner.from_state(model.to_state())
    assert copy._store.dense.complete  # type: ignore[attr-defined]
    for change in ({"f1": None}, {"late": "x"}):
        broken = Learner.from_state(model.to_state())
        x, y, w = events[400]
        broken.learn_one({**x, **change}, y, w)
        dense = broken._store.dense  # type: ignore[attr-defined]
        assert not dense.complete and not dense.check_complete()
        assert not Learner.from_state(broken.to_state())._store.dense.complete  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_complete_block_learns_its_column_cells_lazily(name: str) -> None:
    """Scoring known events makes a complete block learn item cells only: its column cells
    stay stale until read, and every reader (state, merge, the general path, the kernel,
    a missing value) sees the counts of a block that learned them all, to the bit."""
    events = complete_events(13, 500, (3, 3, 3, 3))
    lazy, eager = FACTORIES[name](), FACTORIES[name]()
    for x, y, w in events[:300]:
        lazy.predict_proba_one(x)  # (the known path: lazy columns)
        lazy.learn_one(x, y, w)
        eager.learn_one(x, y, w)  # (never predicts: learns every cell)
    block = lazy._store.dense  # type: ignore[attr-defined]
    assert block.lazy_columns and block._stale and block.complete
    assert not eager._store.dense.lazy_columns  # type: ignore[attr-defined]
    assert canonical_state(lazy) == canonical_state(eager)  # (reading the state writes them)
    assert not block._stale
    for x, y, w in events[300:400]:
        lazy.predict_proba_one(x)
        lazy.learn_one(x, y, w)
        eager.learn_one(x, y, w)
    assert block._stale
    merged = Learner.from_state(eager.to_state()).merge(lazy)  # (reading lazy writes them)
    twice = Learner.from_state(eager.to_state()).merge(Learner.from_state(eager.to_state()))
    assert canonical_state(merged) == canonical_state(twice)
    assert not block._stale
    x, y, w = events[400]
    lazy.learn_one({**x, "f2": None}, y, w)  # a missing value ends completeness
    eager.learn_one({**x, "f2": None}, y, w)
    assert not block.complete and not block._stale
    for x, y, w in events[401:]:
        assert_close(lazy.predict_log_proba_one(x), eager.predict_log_proba_one(x))
        lazy.learn_one(x, y, w)
        eager.learn_one(x, y, w)
    assert canonical_state(lazy) == canonical_state(eager)


def test_forgetting_keeps_the_general_path() -> None:
    """With half_life the raw α changes every event: the general path, same answers."""
    model = AODE(half_life=50.0)
    ref = sparse(AODE(half_life=50.0))
    for x, y, w in string_events(seed=6, n=200):
        assert_close(model.predict_log_proba_one(x), ref.predict_log_proba_one(x))
        model.learn_one(x, y, w)
        ref.learn_one(x, y, w)
    assert canonical_state(model) == canonical_state(ref)


@pytest.mark.parametrize("change", ["value", "removed", "added", "none"])
def test_learning_a_predicted_event_changed_in_between(change: str) -> None:
    """``learn_one`` reuses the items the prediction found only for the very same,
    unchanged event: a dict changed after ``predict_proba_one`` is learned as it is."""
    events = complete_events(12, 200, (3, 3, 3, 3))
    model, ref = AODE(), AODE()
    for x, y, w in events[:150]:
        model.learn_one(x, y, w)
        ref.learn_one(x, y, w)
    for x, y, _w in events[150:]:
        x = dict(x)
        model.predict_proba_one(x)
        if change == "value":
            x["f2"] = "v0" if x["f2"] != "v0" else "v1"
        elif change == "removed":
            del x["f1"]
        elif change == "added":
            x["f9"] = "new"
        model.learn_one(x, y)
        ref.learn_one(x, y)
    assert canonical_state(model) == canonical_state(ref)
