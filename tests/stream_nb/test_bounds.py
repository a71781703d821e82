"""Memory bounds of every learner: max_classes, max_features, max_values_per_feature (the
"other" bucket) and max_vocabulary (the overflow token), against brute force.

A bounded model must equal an unbounded one learned on the stream rewritten by the bound's
rule (features dropped, values or tokens replaced by a shared bucket), so each rule is
tested by doing that rewrite by hand.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from learner_classes import learner_params
from test_checks import EXEMPT

from stream_nb import (
    AODE,
    KDB,
    SPODE,
    TAN,
    BernoulliNB,
    CategoricalNB,
    ComplementNB,
    ConfigError,
    GaussianNB,
    IncompatibleModelError,
    InvalidEventError,
    Learner,
    MultinomialNB,
    NaiveBayes,
)
from stream_nb.checks import check_learner, default_factory, suitable_events

LEARNERS = learner_params()
TOL = 1e-9


def dump(model: Learner) -> bytes:
    return orjson.dumps(model.to_state())


def assert_same_log_proba(a: dict[Any, float], b: dict[Any, float]) -> None:
    assert a.keys() == b.keys()
    for c in a:
        assert math.isclose(a[c], b[c], rel_tol=TOL, abs_tol=TOL), (c, a[c], b[c])


# ---------------------------------------------------------------------- parameters
@pytest.mark.parametrize("cls", LEARNERS)
@pytest.mark.parametrize("name", ["max_classes", "max_features"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True, "3"])
def test_bounds_are_validated(cls: type[Learner], name: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=rf"{name} must be an integer >= 1 or None"):
        default_factory(cls, **{name: value})()


@pytest.mark.parametrize("cls", LEARNERS)
def test_bounds_are_parameters_and_refuse_merges_when_they_differ(cls: type[Learner]) -> None:
    a = default_factory(cls, max_classes=5, max_features=50)()
    assert a.get_params()["max_classes"] == 5 and a.get_params()["max_features"] == 50
    assert a.clone().get_params() == a.get_params()
    copied = Learner.from_state(orjson.loads(dump(a)))
    assert copied.get_params() == a.get_params()
    b = default_factory(cls, max_classes=6, max_features=50)()
    with pytest.raises(IncompatibleModelError, match=r"parameters differ: \['max_classes'\]"):
        a.merge(b)


# ---------------------------------------------------------------------- max_classes
@pytest.mark.parametrize("cls", LEARNERS)
def test_a_new_class_beyond_max_classes_is_rejected_and_nothing_changes(
    cls: type[Learner],
) -> None:
    events = suitable_events(cls, n=90, seed=2)
    labels = list(dict.fromkeys(y for _, y in events))
    assert len(labels) >= 3
    model = default_factory(cls, max_classes=2)()
    reference = default_factory(cls)()
    rejected = 0
    for x, y in events:
        if y in labels[:2]:
            model.learn_one(x, y)
            reference.learn_one(x, y)
            continue
        before = dump(model)
        with pytest.raises(InvalidEventError, match=r"max_classes=2") as info:
            model.learn_one(x, y)
        assert info.value.reason == "too_many_classes"
        assert dump(model) == before
        rejected += 1
    assert rejected and model.model_size()["classes"] == 2
    for x, _ in events[:10]:
        assert_same_log_proba(model.predict_log_proba_one(x), reference.predict_log_proba_one(x))
    # the batch path rejects the same events
    batch = default_factory(cls, max_classes=2)()
    _lps, _preds, errors = batch.predict_learn_many(
        [x for x, _ in events], [y for _, y in events], [1.0] * len(events)
    )
    assert sorted(errors) == [i for i, (_, y) in enumerate(events) if y not in labels[:2]]
    assert all(e.reason == "too_many_classes" for e in errors.values())  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", LEARNERS)
def test_a_merge_keeps_every_class_and_learning_stays_bounded(cls: type[Learner]) -> None:
    """Workers of one group may each learn a new class at the cap: folding their models
    must not fail (a daemon would stop on every restart), so the bound is on learning."""
    events = suitable_events(cls, n=90, seed=2)
    labels = list(dict.fromkeys(y for _, y in events))
    a = default_factory(cls, max_classes=2)()
    b = default_factory(cls, max_classes=2)()
    for x, y in events:
        if y in labels[:2]:
            a.learn_one(x, y)
        if y in labels[1:3]:
            b.learn_one(x, y)
    a.merge(b)
    assert a.model_size()["classes"] == 3
    copied = Learner.from_state(orjson.loads(dump(a)))  # a merged state loads
    for model in (a, copied):
        x, y = events[0]
        with pytest.raises(InvalidEventError) as info:
            model.learn_one(x, labels[3] if len(labels) > 3 else "another")
        assert info.value.reason == "too_many_classes"
        model.learn_one(x, labels[2])  # known classes are still learned


# ---------------------------------------------------------------------- max_features
def unique_keys(cls: type[Learner], n: int, seed: int) -> list[tuple[dict[str, Any], Any]]:
    """Suitable events, each with one more feature of a name never seen before."""
    events = suitable_events(cls, n=n, seed=seed)
    out = []
    for i, (x, y) in enumerate(events):
        value = next(iter(x.values())) if x else 1
        out.append(({**x, f"uuid-{i:06d}": value}, y))
    return out


@pytest.mark.parametrize("cls", LEARNERS)
def test_unique_feature_names_stay_bounded_by_max_features(cls: type[Learner]) -> None:
    cap = 12
    model = default_factory(cls, max_features=cap, warmup=5)() if cls in (
        SPODE, AODE, TAN, KDB
    ) else default_factory(cls, max_features=cap)()  # fmt: skip
    events = unique_keys(cls, 300, 4)
    for x, y in events:
        model.learn_one(x, y)
    size = model.model_size()
    assert size["features"] <= cap
    copied = Learner.from_state(orjson.loads(dump(model)))
    for x, _ in events[:20]:
        lp = copied.predict_log_proba_one(x)
        assert lp and math.isclose(sum(map(math.exp, lp.values())), 1.0, rel_tol=1e-9)
    assert len(dump(model)) < 200_000


def drop_features(events: list[Any], cap: int, known: Callable[[str, Any], bool]) -> list[Any]:
    """The events as a model bounded to ``cap`` features learns them (first met first)."""
    seen: list[str] = []
    out = []
    for x, y in events:
        kept = {}
        for f, v in x.items():
            if f in seen:
                kept[f] = v
            elif known(f, v) and len(seen) < cap:
                seen.append(f)
                kept[f] = v
        out.append((kept, y))
    return out


@pytest.mark.parametrize(
    ("cls", "learned"),
    [
        (CategoricalNB, lambda f, v: v is not None),
        (GaussianNB, lambda f, v: v is not None),
        (MultinomialNB, lambda f, v: v > 0),
        (ComplementNB, lambda f, v: v > 0),
        (BernoulliNB, lambda f, v: True),
    ],
)
def test_max_features_equals_learning_without_the_dropped_features(
    cls: type[Learner], learned: Callable[[str, Any], bool]
) -> None:
    cap = 7
    events = unique_keys(cls, 200, 6)
    rewritten = drop_features(events, cap, learned)
    bounded, reference = cls(max_features=cap), cls()
    for (x, y), (kept, _) in zip(events, rewritten, strict=True):
        bounded.learn_one(x, y)
        reference.learn_one(kept, y)
    assert bounded.model_size()["features"] == cap
    for x, _ in events[:60]:
        # features never learned contribute nothing, like the dropped ones
        assert_same_log_proba(bounded.predict_log_proba_one(x), reference.predict_log_proba_one(x))
    assert bounded.model_size()["stored_counts"] == reference.model_size()["stored_counts"]


def test_naive_bayes_max_features_counts_both_kinds_and_gives_no_kind_to_dropped() -> None:
    model = NaiveBayes(max_features=3)
    model.learn_one({"a": 1.0, "b": "x"}, 0)
    model.learn_one({"a": 2.0, "c": 3.0, "d": "y", "e": 4.0}, 1)
    assert sorted(model.kinds()) == ["a", "b", "c"]  # numeric first, then categorical
    model.learn_one({"d": "z", "f": 1.0}, 0)
    assert model.model_size()["features"] == 3
    assert Learner.from_state(orjson.loads(dump(model))).kinds() == model.kinds()


@pytest.mark.parametrize("cls", [CategoricalNB, GaussianNB, NaiveBayes, MultinomialNB, TAN])
def test_merge_under_max_features_drops_the_other_models_extra_features(
    cls: type[Learner],
) -> None:
    cap = 10
    params = {"warmup": 5} if cls is TAN else {}
    events = unique_keys(cls, 120, 8)
    a = default_factory(cls, max_features=cap, **params)()
    b = default_factory(cls, max_features=cap, **params)()
    for x, y in events[:60]:
        a.learn_one(x, y)
    for x, y in events[60:]:
        b.learn_one(x, y)
    a.merge(b)
    assert a.model_size()["features"] <= cap
    Learner.from_state(orjson.loads(dump(a)))  # a valid state


# ---------------------------------------------------------------------- the "other" bucket
OTHER = "__other__"


def other_bucket(events: list[Any], cap: int, categorical: Callable[[str, Any], bool]) -> Any:
    """Events with values first met once a feature holds ``cap`` values replaced by a
    sentinel, and the function mapping a prediction's ``x`` the same way."""
    values: dict[str, list[Any]] = {}
    out = []
    for x, y in events:
        mapped = {}
        for f, v in x.items():
            if v is None or not categorical(f, v):
                mapped[f] = v
                continue
            seen = values.setdefault(f, [])
            if v not in seen:
                if len(seen) < cap:
                    seen.append(v)
                else:
                    v = OTHER
            mapped[f] = v
        out.append((mapped, y))

    def for_prediction(x: dict[str, Any]) -> dict[str, Any]:
        return {
            f: v
            if v is None
            or not categorical(f, v)
            or f not in values
            or v in values[f]
            or len(values[f]) < cap
            else OTHER
            for f, v in x.items()
        }

    return out, for_prediction


@pytest.mark.parametrize(
    ("cls", "events", "categorical"),
    [
        (CategoricalNB, suitable_events(CategoricalNB, n=300, seed=9), lambda f, v: True),
        (
            NaiveBayes,
            suitable_events(NaiveBayes, n=300, seed=9),
            lambda f, v: isinstance(v, (str, bool)),
        ),
    ],
)
@pytest.mark.parametrize("cap", [1, 2, 3])
def test_max_values_per_feature_is_the_other_bucket(
    cls: type[Learner], events: list[Any], categorical: Any, cap: int
) -> None:
    rewritten, for_prediction = other_bucket(events, cap, categorical)
    bounded, reference = cls(max_values_per_feature=cap), cls()
    for (x, y), (mapped, _) in zip(events, rewritten, strict=True):
        bounded.learn_one(x, y)
        reference.learn_one(mapped, y)
    fresh = [({f: f"never-{i}" for f in x}, y) for i, (x, y) in enumerate(events[:20])]
    for x, _ in [*events[:80], *fresh]:
        if cls is NaiveBayes:
            x = {
                f: v
                for f, v in x.items()
                if v is None or categorical(f, v) or f in bounded.gaussian.feature_index
            }
            x = {
                f: v
                for f, v in x.items()
                if not (isinstance(v, str) and f in bounded.gaussian.feature_index)
            }
        assert_same_log_proba(
            bounded.predict_log_proba_one(x), reference.predict_log_proba_one(for_prediction(x))
        )
    assert bounded.model_size() == reference.model_size()
    copied = Learner.from_state(orjson.loads(dump(bounded)))
    assert dump(copied) == dump(bounded)


def test_other_bucket_in_a_merge_follows_learning_order() -> None:
    events = suitable_events(CategoricalNB, n=200, seed=1)
    a, b, whole = (CategoricalNB(max_values_per_feature=2) for _ in range(3))
    for x, y in events[:100]:
        a.learn_one(x, y)
        whole.learn_one(x, y)
    # b's own values fit its cap: the merge is learning b's events after a's
    small = [({f: v for f, v in x.items() if v in (None, "v0", "v3")}, y) for x, y in events[100:]]
    for x, y in small:
        b.learn_one(x, y)
        whole.learn_one(x, y)
    a.merge(b)
    for x, _ in events[:50]:
        assert_same_log_proba(a.predict_log_proba_one(x), whole.predict_log_proba_one(x))


def test_the_batch_kernel_applies_the_other_bucket() -> None:
    from stream_nb.naive_bayes._vectorised import gaussian_predict_learn_many

    rng = random.Random(3)
    xs = [{"a": rng.random(), "id": f"u{i % 700}"} for i in range(1200)]
    ys = [i % 2 for i in range(1200)]
    batch, single = NaiveBayes(max_values_per_feature=50), NaiveBayes(max_values_per_feature=50)
    for x, y in zip(xs[:400], ys[:400], strict=True):  # the feature fills up
        batch.learn_one(x, y)
        single.learn_one(x, y)
    for start in (400, 800):  # then whole batches: new values go to the bucket in numpy
        got = gaussian_predict_learn_many(
            batch.predict_learn_columns,
            xs[start : start + 400],
            ys[start : start + 400],
            [1.0] * 400,
        )
        assert got is not None
        for x, y, lp in zip(xs[start : start + 400], ys[start : start + 400], got[0], strict=True):
            assert_same_log_proba(lp, single.predict_log_proba_one(x))  # type: ignore[arg-type]
            single.learn_one(x, y)
    assert set(batch.categorical.counts["id"]) == set(single.categorical.counts["id"])
    assert len(batch.categorical.counts["id"]) == 51  # 50 values and the bucket
    assert batch.model_size() == single.model_size()
    a = batch.predict_log_proba_one({"a": 0.5, "id": "u699"})
    assert_same_log_proba(a, single.predict_log_proba_one({"a": 0.5, "id": "u699"}))


# ---------------------------------------------------------------------- overflow token
def overflow(events: list[Any], cap: int, combine: Any, zeros: bool) -> Any:
    vocabulary: list[str] = []
    out = []
    for x, y in events:
        mapped: dict[str, Any] = {}
        for t, c in x.items():
            if t in vocabulary:
                mapped[t] = c
            elif not zeros and not c > 0:
                continue
            elif len(vocabulary) < cap:
                vocabulary.append(t)
                mapped[t] = c
            else:
                mapped[OTHER] = c if OTHER not in mapped else combine(mapped[OTHER], c)
        out.append((mapped, y))

    def for_prediction(x: dict[str, Any]) -> dict[str, Any]:
        if len(vocabulary) < cap:
            return x
        mapped: dict[str, Any] = {}
        for t, c in x.items():
            if t in vocabulary:
                mapped[t] = c
            else:
                mapped[OTHER] = c if OTHER not in mapped else combine(mapped[OTHER], c)
        return mapped

    return out, for_prediction


TEXT = [
    (MultinomialNB, lambda a, b: a + b, False, {}),
    (MultinomialNB, lambda a, b: a + b, False, {"half_life": 50}),
    (ComplementNB, lambda a, b: a + b, False, {}),
    (ComplementNB, lambda a, b: a + b, False, {"norm": True}),
    (BernoulliNB, max, True, {}),
    (BernoulliNB, max, True, {"binarize": 1.5}),
]


@pytest.mark.parametrize(("cls", "combine", "zeros", "params"), TEXT)
@pytest.mark.parametrize("cap", [1, 5, 40])
def test_max_vocabulary_is_the_overflow_token(
    cls: type[Learner], combine: Any, zeros: bool, params: dict[str, Any], cap: int
) -> None:
    rng = random.Random(cap)
    events = [
        ({f"t{rng.randint(0, 80)}": rng.choice([0, 1, 2, 3]) for _ in range(6)}, rng.choice("abc"))
        for _ in range(300)
    ]
    rewritten, for_prediction = overflow(events, cap, combine, zeros)
    bounded, reference = cls(max_vocabulary=cap, **params), cls(**params)
    for (x, y), (mapped, _) in zip(events, rewritten, strict=True):
        bounded.learn_one(x, y)
        reference.learn_one(mapped, y)
        if rng.random() < 0.1:
            probe = events[rng.randrange(len(events))][0]
            assert_same_log_proba(
                bounded.predict_log_proba_one(probe),
                reference.predict_log_proba_one(for_prediction(probe)),
            )
    unseen = {"never": 2, "seen-not": 1, "t1": 1}
    assert_same_log_proba(
        bounded.predict_log_proba_one(unseen),
        reference.predict_log_proba_one(for_prediction(unseen)),
    )
    assert bounded.model_size() == reference.model_size()
    assert bounded.model_size()["features"] <= cap + 1
    copied = Learner.from_state(orjson.loads(dump(bounded)))
    assert dump(copied) == dump(bounded)


@pytest.mark.parametrize("cls", [MultinomialNB, ComplementNB, BernoulliNB])
def test_overflow_token_in_a_merge_follows_learning_order(cls: type[Learner]) -> None:
    rng = random.Random(5)
    first = [({f"t{rng.randint(0, 30)}": 1 for _ in range(4)}, rng.choice("ab")) for _ in range(80)]
    second = [
        ({f"t{rng.randint(25, 33)}": 1 for _ in range(2)}, rng.choice("ab")) for _ in range(40)
    ]
    a, b, whole = (cls(max_vocabulary=20) for _ in range(3))
    for x, y in first:
        a.learn_one(x, y)
        whole.learn_one(x, y)
    for x, y in second:  # nine tokens: b never overflows by itself
        b.learn_one(x, y)
        whole.learn_one(x, y)
    a.merge(b)
    if cls is not BernoulliNB:  # Bernoulli: exact when one overflow token is on per event
        for x, _ in [*first[:20], *second[:20]]:
            assert_same_log_proba(a.predict_log_proba_one(x), whole.predict_log_proba_one(x))
    Learner.from_state(orjson.loads(dump(a)))  # overflow counts stay within class weights


def test_bernoulli_merged_overflow_counts_stay_within_class_weights() -> None:
    a, b = BernoulliNB(max_vocabulary=2), BernoulliNB(max_vocabulary=50)
    a.learn_one({"x": 1, "y": 1}, "c")
    for _ in range(5):
        b.learn_one({"p": 1, "q": 1, "r": 1}, "c")  # three tokens on per event
    b.max_vocabulary = 2  # the same parameters, so that the merge is allowed
    a.merge(b)
    counts = a._sparse_counts()[None]
    assert counts["c"] <= a._class_weight["c"]
    Learner.from_state(orjson.loads(dump(a)))


# ---------------------------------------------------------------------- generic checks
@pytest.mark.parametrize("cls", LEARNERS)
def test_every_check_passes_with_tight_bounds(cls: type[Learner]) -> None:
    """A bounded learner keeps the protocol (merges past a bound are approximations)."""
    params: dict[str, Any] = {"max_classes": 50, "max_features": 6}
    if cls in (CategoricalNB, NaiveBayes, SPODE, AODE, TAN, KDB):
        params["max_values_per_feature"] = 2
    if cls in (MultinomialNB, BernoulliNB, ComplementNB):
        params["max_vocabulary"] = 5
    exempt = dict(EXEMPT.get(cls.__name__, {}))  # the learner's standing exemptions
    if "max_vocabulary" in params:
        exempt["new_and_vanishing"] = "in a full vocabulary an unseen token is the overflow token"
    check_learner(
        default_factory(cls, **params),
        exempt={
            **exempt,
            "feature_order": "which features a bound admits depends on the order met",
            "merge_union": "a merge maps the other's values by its own first-met order",
            "chunked_learning": "same reason as merge_union",
            "wide_events": "max_features keeps 6 of the 10,000 features (tested above)",
        },
    )
