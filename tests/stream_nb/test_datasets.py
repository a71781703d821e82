"""stream_nb.datasets: determinism, the published Agrawal definitions, shapes and validation."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from stream_nb import CategoricalNB, ConfigError
from stream_nb.datasets import agrawal, categorical_stream, mixed_stream, zipf_text

GENERATORS = [
    pytest.param(lambda seed: agrawal(seed, 50, function=5, perturbation=0.1), id="agrawal"),
    pytest.param(lambda seed: zipf_text(seed, 50, vocabulary=500), id="zipf_text"),
    pytest.param(lambda seed: categorical_stream(seed, 50, missing=0.2), id="categorical"),
    pytest.param(lambda seed: mixed_stream(seed, 50, missing=0.2), id="mixed"),
]


@pytest.mark.parametrize("make", GENERATORS)
def test_same_seed_same_stream_and_global_random_untouched(make: Any) -> None:
    random.seed(123)
    before = random.random()
    random.seed(123)
    first = list(make(7))
    assert random.random() == before  # the global generator was not used
    assert list(make(7)) == first
    assert list(make(8)) != first
    assert len(first) == 50
    assert all(isinstance(x, dict) for x, _ in first)
    assert len({id(x) for x, _ in first}) == 50  # a fresh dict per event


# ------------------------------------------------------------------ Agrawal
def group_a(function: int, x: dict[str, Any]) -> bool:
    """The paper's Group A predicates (Agrawal et al. 1993, Table 2), restated independently."""
    salary, commission, age, loan = x["salary"], x["commission"], x["age"], x["loan"]
    elevel, hvalue, hyears = int(x["elevel"]), x["hvalue"], x["hyears"]
    band = 0 if age < 40 else 1 if age < 60 else 2
    salary_band = [(50e3, 100e3), (75e3, 125e3), (25e3, 75e3)][band]
    elevel_set = [{0, 1}, {1, 2, 3}, {2, 3, 4}][band]

    def within(v: float, bounds: tuple[float, float]) -> bool:
        return bounds[0] <= v <= bounds[1]

    if function == 1:
        return band != 1
    if function == 2:
        return within(salary, salary_band)
    if function == 3:
        return elevel in elevel_set
    if function == 4:
        yes = [(25e3, 75e3), (50e3, 100e3), (50e3, 100e3)][band]
        no = [(50e3, 100e3), (75e3, 125e3), (25e3, 75e3)][band]
        return within(salary, yes if elevel in elevel_set else no)
    if function == 5:
        yes = [(100e3, 300e3), (200e3, 400e3), (300e3, 500e3)][band]
        no = [(200e3, 400e3), (300e3, 500e3), (100e3, 300e3)][band]
        return within(loan, yes if within(salary, salary_band) else no)
    if function == 6:
        return within(salary + commission, salary_band)
    income = 2 / 3 * (salary + commission)  # the paper prints 0.67; MOA computes 2/3
    equity = 0.1 * hvalue * max(hyears - 20, 0)
    disposable = {
        7: income - 0.2 * loan - 20e3,
        8: income - 5000 * elevel - 20e3,
        9: income - 5000 * elevel - 0.2 * loan - 10e3,
        10: income - 5000 * elevel + 0.2 * equity - 10e3,
    }[function]
    return disposable > 0


@pytest.mark.parametrize("function", range(1, 11))
def test_agrawal_labels_follow_the_paper(function: int) -> None:
    events = list(agrawal(seed=function, n=2000, function=function))
    mismatches = [(x, y) for x, y in events if y != (0 if group_a(function, x) else 1)]
    assert mismatches == []
    assert {y for _, y in events} <= {0, 1}


@pytest.mark.parametrize("function", [1, 2, 3, 4, 6, 7, 8, 9, 10])
def test_agrawal_agrees_with_rivers_classification_functions(function: int) -> None:
    """river numbers functions from 0 and labels Group A 1 for F1-F6, 0 for F7-F10.

    F5 is left out: river's version compares salary where the paper compares loan.
    """
    from river.datasets.synth import Agrawal

    river_function = getattr(Agrawal, f"_classification_function_{function - 1}")
    group_a_label = 1 if function <= 6 else 0
    for x, y in agrawal(seed=3, n=1000, function=function, nominal=False):
        river_label = river_function(**x)
        assert (river_label == group_a_label) == (y == 0)


@pytest.mark.parametrize("perturbation", [0.0, 0.3])
def test_agrawal_attribute_ranges(perturbation: float) -> None:
    for x, y in agrawal(seed=1, n=3000, function=1, perturbation=perturbation):
        assert 20e3 <= x["salary"] <= 150e3
        if perturbation == 0.0:
            assert (x["commission"] == 0) == (x["salary"] >= 75e3)
        assert x["commission"] == 0 or 10e3 <= x["commission"] <= 75e3
        assert isinstance(x["age"], int) and 20 <= x["age"] <= 80
        assert x["elevel"] in {"0", "1", "2", "3", "4"}
        assert x["car"] in {str(c) for c in range(1, 21)}
        assert x["zipcode"] in {str(z) for z in range(9)}
        k = 9 - int(x["zipcode"])
        assert k * 50e3 <= x["hvalue"] <= k * 150e3
        assert isinstance(x["hyears"], int) and 1 <= x["hyears"] <= 30
        assert 0 <= x["loan"] <= 500e3
        assert y in (0, 1)


def test_agrawal_nominal_false_gives_ints() -> None:
    x, _ = next(agrawal(seed=0, n=1, nominal=False))
    assert all(isinstance(x[f], int) for f in ("elevel", "car", "zipcode"))


# ------------------------------------------------------------------ text
def test_zipf_text_shapes_and_frequencies() -> None:
    docs = list(zipf_text(seed=1, n=400, vocabulary=1000, length=(5, 9), classes=3, topic=0.0))
    assert {y for _, y in docs} == {0, 1, 2}
    totals: Counter[str] = Counter()
    for x, _ in docs:
        assert 5 <= sum(x.values()) <= 9
        assert all(isinstance(c, int) and c > 0 for c in x.values())
        assert all(t.startswith("w") and 0 <= int(t[1:]) < 1000 for t in x)
        totals.update(x)
    ranked = [t for t, _ in totals.most_common(3)]
    assert ranked[0] == "w0"  # rank 1 is the most frequent token under Zipf's law


def test_zipf_topics_make_classes_learnable() -> None:
    docs = list(zipf_text(seed=2, n=600, vocabulary=2000, classes=2, topic=0.5))
    per_class = [Counter(), Counter()]  # type: ignore[var-annotated]
    for x, y in docs:
        per_class[y].update(x)
    top = [{t for t, _ in c.most_common(30)} for c in per_class]
    assert top[0] != top[1]


# ------------------------------------------------------------------ categorical, mixed
def test_categorical_stream_is_learnable_and_has_missing_features() -> None:
    events = list(categorical_stream(seed=4, n=3000, features=6, values=4, classes=3, missing=0.25))
    sizes = Counter(len(x) for x, _ in events)
    assert sum(n * count for n, count in sizes.items()) / len(events) == pytest.approx(4.5, abs=0.2)
    assert {y for _, y in events} <= {"c0", "c1", "c2"}
    model, correct = CategoricalNB(), 0
    for x, y in events:
        correct += model.predict_one(x) == y
        model.learn_one(x, y)
    majority = max(Counter(y for _, y in events).values())
    assert correct > majority  # it is generated by a Naive Bayes model


def test_mixed_stream_types() -> None:
    for x, y in mixed_stream(seed=5, n=100, categorical=2, numeric=2, classes=3):
        assert set(x) == {"cat0", "cat1", "flag", "num0", "num1"}
        assert isinstance(x["cat0"], str) and isinstance(x["flag"], bool)
        assert isinstance(x["num0"], float)
        assert y in {"a", "b", "c"}


def test_zero_events() -> None:
    assert list(agrawal(seed=0, n=0)) == []
    assert list(zipf_text(seed=0, n=0)) == []


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: agrawal(0, 10, function=0), r"function must be an integer 1…10 .* got 0"),
        (lambda: agrawal(0, 10, function=11), r"function must be an integer 1…10"),
        (lambda: agrawal(0, -1), r"n must be an integer >= 0, got -1"),
        (lambda: agrawal(0, 2.5), r"n must be an integer >= 0, got 2.5"),
        (lambda: agrawal(0, 10, perturbation=1.5), r"perturbation must be a probability"),
        (lambda: zipf_text(0, 10, vocabulary=0), r"vocabulary must be an integer >= 1, got 0"),
        (lambda: zipf_text(0, 10, length=(0, 5)), r"length must be a pair of integers"),
        (lambda: zipf_text(0, 10, length=(6, 5)), r"length must be a pair .* got \(6, 5\)"),
        (lambda: zipf_text(0, 10, exponent=0), r"exponent must be a positive number, got 0"),
        (lambda: zipf_text(0, 10, topic=-0.1), r"topic must be a probability"),
        (lambda: categorical_stream(0, 10, values=0), r"values must be an integer >= 1"),
        (lambda: categorical_stream(0, 10, missing=2), r"missing must be a probability"),
        (lambda: categorical_stream(0, 10, concentration=0), r"concentration must be a positive"),
        (lambda: mixed_stream(0, 10, classes=27), r"classes must be at most 26, got 27"),
    ],
)
def test_invalid_arguments_fail_early(call: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        call()
