"""The categorical terms of the batch kernels (CategoricalColumns on BatchClasses) against
the per-event statistics: the terms of every event before it is learned, to 1e-12, and
the counts after the batch exactly; and every batch they leave to the per-event path."""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Hashable
from typing import Any

import numpy as np
import pytest

from stream_nb.naive_bayes._arrays import BatchClasses
from stream_nb.naive_bayes._categorical_batch import CategoricalColumns
from stream_nb.naive_bayes._categorical_stats import CategoricalStatistics

LABELS = ["p", "q", "r"]
FEATURES = ("f", "g", "h")


def _event(rng: random.Random, values: str, missing: float = 0.0) -> dict[str, Any]:
    return {f: None if rng.random() < missing else rng.choice(values) for f in FEATURES}


def _warm(rng: random.Random, max_values: int | None) -> CategoricalStatistics:
    stats = CategoricalStatistics(max_values)
    for y in LABELS:  # every class learned before the batch
        stats.learn(_event(rng, "abc").items(), y, 1.0)
    for _ in range(40):
        stats.learn(_event(rng, "abcd").items(), rng.choice(LABELS), rng.choice([0.5, 1.0, 2.0]))
    return stats


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_values", [None, 3])
def test_terms_and_counts_equal_the_per_event_statistics(seed: int, max_values: int | None) -> None:
    rng = random.Random(seed)
    stats = _warm(rng, max_values)
    slow = copy.deepcopy(stats)
    b = rng.choice([5, 64, 200])
    # new values too (the bucket past 3), and missing values
    xs = [_event(rng, "abcdefg", missing=0.2 * (seed % 3 != 0)) for _ in range(b)]
    ys: list[Hashable | None] = [rng.choice([*LABELS, None]) for _ in range(b)]
    unit = seed % 2 == 0
    ws = None if unit else [rng.choice([0.5, 1.0, 2.0]) for _ in range(b)]
    alpha = 0.7

    batch = CategoricalColumns.of(stats, FEATURES, [[x[f] for x in xs] for f in FEATURES], b)
    assert batch is not None and batch.encode()
    classes = BatchClasses.of(LABELS, {y: k for k, y in enumerate(LABELS)}, ys, ws)
    assert classes is not None and classes.unit == unit
    terms = batch.log_likelihoods(classes, alpha)
    assert terms is not None and terms.shape == (len(LABELS), b)
    batch.learn(classes, ys, classes.learned(ys))

    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        want = dict.fromkeys(LABELS, 0.0)
        slow.add_terms(want, x, FEATURES, alpha)
        for k, label in enumerate(LABELS):
            assert math.isclose(terms[k, i], want[label], rel_tol=1e-12), (i, label)
        if y is not None:
            slow.learn(x.items(), y, 1.0 if ws is None else ws[i], False)
    # exactly the same sums, and new values and classes in the same order
    assert stats.to_state() == slow.to_state()


def test_batches_left_to_the_per_event_path_change_nothing() -> None:
    rng = random.Random(9)
    stats = _warm(rng, 3)  # every feature holds 3 values or more: full
    before = stats.to_state()
    columns = [["a"] * 4, ["b"] * 4, ["c"] * 4]
    assert CategoricalColumns.of(stats, FEATURES, columns, 5) is None  # a short column
    open_stats = _warm(random.Random(9), None)
    unhashable = CategoricalColumns.of(
        open_stats, FEATURES, [["a", ["x"]], ["b"] * 2, ["c"] * 2], 2
    )
    assert unhashable is not None and not unhashable.encode()
    nan = CategoricalColumns.of(open_stats, FEATURES, [["a", math.nan], ["b"] * 2, ["c"] * 2], 2)
    assert nan is not None and not nan.encode()  # not a category: the per event error
    assert math.nan not in open_stats.codes["f"][0]  # (a value with a code is a category)
    # a value new to a full feature that is not a category: not put in the bucket
    assert CategoricalColumns.of(stats, FEATURES, [["a", b"x"], ["b"] * 2, ["c"] * 2], 2) is None
    assert stats.to_state() == before


def test_batch_classes() -> None:
    index = {"p": 0, "q": 1}
    classes = BatchClasses.of(["p", "q"], index, ["q", None, "p", "q"], [1.0, 5.0, 2.0, 0.5])
    assert classes is not None and not classes.unit
    assert classes.onehot.tolist() == [[0.0, 0.0, 2.0, 0.0], [1.0, 0.0, 0.0, 0.5]]
    assert classes.before.tolist() == [[0.0, 0.0, 0.0, 2.0], [0.0, 1.0, 1.0, 1.0]]
    assert classes.n_labelled == 3 and classes.rows.tolist() == [0, 2, 3]
    learned = classes.learned(["q", None, "p", "q"])
    assert learned.class_weights == [("p", 2.0), ("q", 1.5)]
    assert learned.event_weights == [("q", 1.0), ("p", 2.0), ("q", 0.5)]
    assert BatchClasses.of(["p"], {"p": 0}, ["p", "new"], None) is None  # a new class
    assert BatchClasses.of(["p"], {"p": 0}, ["p", ["x"]], None) is None  # unhashable
    assert BatchClasses.of(["p"], {"p": 0}, ["p"], [1e60]) is None  # beyond MAX_WEIGHT
    assert BatchClasses.of(["p"], {"p": 0}, ["p", "p"], [1.0, 1.0]).unit  # type: ignore[union-attr]
    assert np.array_equal(BatchClasses.of(["p"], {"p": 0}, ["p"], None).w, [1.0])  # type: ignore[union-attr]
