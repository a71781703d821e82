"""CategoricalStatistics, the counts component of CategoricalNB, of NaiveBayes' categorical
part and of the semi-naive store.

Each public method against a hand-computed or brute-force value: learning
(missing values, the "other" bucket, admitting features, completing an event),
the scores and the per-feature terms, merging through a value map, rescaling,
state (with or without the class weights) and size.
"""

from __future__ import annotations

import inspect
import math
import random
from collections.abc import Hashable
from typing import Any

import orjson
import pytest

from stream_nb import CategoricalNB, InvalidEventError, ModelStateError
from stream_nb.naive_bayes._categorical_stats import CategoricalStatistics

Item = tuple[Hashable, Any]


def events(seed: int, n: int) -> list[tuple[list[Item], Hashable, float]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        items = [(f, rng.choice("abcdef")) for f in ("f", "g", "h") if rng.random() < 0.8]
        out.append((items, rng.choice(["p", "q", "r"]), rng.choice([1.0, 0.5, 2.0])))
    return out


def learned(evs: list[tuple[list[Item], Hashable, float]], **kw: Any) -> CategoricalStatistics:
    stats = CategoricalStatistics(**kw)
    for items, y, w in evs:
        stats.learn(items, y, w)
    return stats


def test_learn_counts_every_level() -> None:
    stats = learned([([("f", "a"), ("g", None)], "p", 1.0), ([("f", "b")], "q", 2.0)])
    assert stats.class_weight == {"p": 1.0, "q": 2.0}
    assert stats.total_weight == 3.0
    assert stats.present == {"f": {"p": 1.0, "q": 2.0}}  # g: a missing value
    assert stats.counts == {"f": {"a": {"p": 1.0}, "b": {"q": 2.0}}}
    assert stats.size() == 2 + 2 + 2


def test_completing_an_event_leaves_the_class_weights() -> None:
    stats = learned([([("f", "a")], "p", 1.0)])
    stats.learn([("g", "x")], "p", 1.0, event=False)
    assert stats.class_weight == {"p": 1.0} and stats.total_weight == 1.0
    assert stats.present == {"f": {"p": 1.0}, "g": {"p": 1.0}}
    assert stats.counts["g"] == {"x": {"p": 1.0}}


def test_the_missing_marker() -> None:
    # encoded items (the semi-naive store): None is the "other" bucket, never missing
    marker = object()
    stats = CategoricalStatistics(max_values=1, missing=marker)
    stats.learn([("f", "a"), ("g", marker)], "p", 1.0)
    stats.learn([("f", None)], "p", 1.0)
    assert stats.counts == {"f": {"a": {"p": 1.0}, None: {"p": 1.0}}}
    assert stats.present == {"f": {"p": 2.0}}


def test_values_past_the_cap_share_the_bucket_when_learning_and_scoring() -> None:
    stats = learned([([("f", v)], "p", 1.0) for v in "abc"], max_values=2)
    assert stats.counts["f"] == {"a": {"p": 1.0}, "b": {"p": 1.0}, None: {"p": 1.0}}
    assert stats.capped("f", "z") is None and stats.capped("f", "a") == "a"
    assert stats.capped("new", "z") == "z"
    # "z" is read as the bucket: (1 + α) / (3 + 3α)
    jll = stats.joint_log_likelihood({"f": "z"}, 1.0)
    assert jll == {"p": pytest.approx(math.log(2 / 6))}


def test_features_admit_refuses_are_not_learned() -> None:
    asked = []

    def admit() -> bool:  # max_features=1
        asked.append(len(stats.present))
        return len(stats.present) < 1

    stats = CategoricalStatistics(admit=admit)
    for items, y, w in [([("f", "a"), ("g", "b")], "p", 1.0), ([("h", "c")], "q", 1.0)]:
        stats.learn(items, y, w)
    stats.learn([("f", "b")], "q", 1.0)  # a known feature: admit is not asked
    assert list(stats.present) == ["f"] and list(stats.counts) == ["f"]
    assert stats.class_weight == {"p": 1.0, "q": 2.0}
    assert asked == [0, 1, 1]


def test_scores_match_the_formulas() -> None:
    evs = events(1, 200)
    stats = learned(evs)
    alpha = 0.7
    x = {"f": "a", "g": "z", "h": None, "unknown": "a"}
    jll = stats.joint_log_likelihood(x, alpha)
    total = sum(w for _, _, w in evs)
    classes = ["p", "q", "r"]
    for y in classes:
        n_y = sum(w for _, c, w in evs if c == y)
        want = math.log((n_y + alpha) / (total + 3 * alpha))
        for f, v in (("f", "a"), ("g", "z")):
            n_yf = sum(w for items, c, w in evs if c == y and f in dict(items))
            n_yfv = sum(w for items, c, w in evs if c == y and dict(items).get(f) == v)
            values = {dict(items)[f] for items, _, _ in evs if f in dict(items)}
            want += math.log((n_yfv + alpha) / (n_yf + len(values) * alpha))
        assert jll[y] == pytest.approx(want, rel=1e-12)
    # one feature's terms are that feature's share of the score
    base = stats.joint_log_likelihood({}, alpha)
    one = stats.joint_log_likelihood({"f": "a"}, alpha)
    terms = stats.log_likelihoods("f", "a", classes, alpha)
    assert terms == pytest.approx([one[y] - base[y] for y in classes], rel=1e-12)
    assert CategoricalStatistics().joint_log_likelihood(x, alpha) == {}


def test_priors_fixed_or_uniform() -> None:
    evs = [([("f", "a")], "p", 3.0), ([("f", "b")], "q", 1.0)]
    uniform = learned(evs, fit_prior=False).joint_log_likelihood({}, 1.0)
    assert uniform == {"p": -math.log(2), "q": -math.log(2)}
    fixed = learned(evs, class_prior={"q": 2.0}).joint_log_likelihood({}, 1.0)
    assert fixed == {"q": math.log(2.0)}  # classes class_prior leaves out are not scored


def test_merge_equals_learning_both_streams() -> None:
    a_events, b_events = events(2, 150), events(3, 150)
    merged = learned(a_events)
    other = learned(b_events)
    merged.merge(other, 1.0, merged.value_map(other))
    both = learned(a_events + b_events)
    assert merged.class_weight == pytest.approx(both.class_weight)
    assert merged.total_weight == pytest.approx(both.total_weight)
    for f in both.counts:
        assert merged.present[f] == pytest.approx(both.present[f])
        assert merged.counts[f].keys() == both.counts[f].keys()
        for v in both.counts[f]:
            assert merged.counts[f][v] == pytest.approx(both.counts[f][v])


def test_merge_relabels_past_the_cap_and_leaves_out_features_not_kept() -> None:
    mine = learned([([("f", "a")], "p", 1.0)], max_values=2)
    theirs = learned([([("f", "b"), ("g", "x")], "q", 1.0), ([("f", "c")], "q", 1.0)], max_values=2)
    vmap = mine.value_map(theirs, keep={"f"})
    assert vmap == {"f": {"b": "b", "c": None}}
    mine.merge(theirs, 0.5, vmap)
    assert mine.counts == {"f": {"a": {"p": 1.0}, "b": {"q": 0.5}, None: {"q": 0.5}}}
    assert mine.present == {"f": {"p": 1.0, "q": 1.0}}
    assert mine.class_weight == {"p": 1.0, "q": 1.0} and mine.total_weight == 2.0


def test_rescale_state_and_validation() -> None:
    stats = learned(events(4, 60), max_values=3)
    stats.rescale(0.25)
    copy = CategoricalStatistics(max_values=3)
    copy.load_state(orjson.loads(orjson.dumps(stats.to_state())), "stats.nb")
    assert copy.to_state() == stats.to_state()
    assert copy.size() == stats.size()
    assert copy.joint_log_likelihood({"f": "a"}, 0.5) == stats.joint_log_likelihood({"f": "a"}, 0.5)
    state = stats.to_state()
    state["total_weight"] += 1.0
    with pytest.raises(ModelStateError, match=r"stats\.nb\.total_weight"):
        CategoricalStatistics(max_values=3).load_state(state, "stats.nb")
    without_counts = {k: v for k, v in state.items() if k != "counts"}
    with pytest.raises(ModelStateError, match=r"stats\.nb: missing field 'counts'"):
        CategoricalStatistics().load_state(without_counts, "stats.nb")


def test_categorical_nb_holds_one() -> None:
    model = CategoricalNB(max_values_per_feature=1, max_features=1)
    model.learn_one({"sky": "sun", "wind": "calm"}, "play")
    model.learn_one({"sky": "rain"}, "stay")
    stats = model.categorical
    assert stats.counts == {"sky": {"sun": {"play": 1.0}, None: {"stay": 1.0}}}
    assert model.to_state()["stats"] == stats.to_state()
    assert model.joint_log_likelihood_one({"sky": "fog"}) == stats.joint_log_likelihood(
        {"sky": "fog"}, model.alpha
    )


def test_categorical_nb_parameters_are_keyword_only_after_alpha() -> None:
    params = list(inspect.signature(CategoricalNB).parameters.values())
    assert params[0].name == "alpha" and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])
    with pytest.raises(TypeError, match="positional argument"):
        CategoricalNB(1.0, False)  # type: ignore[misc]


def test_the_terms_alone_are_the_score_without_the_prior() -> None:
    stats = learned(events(5, 120), max_values=4)
    alpha = 0.3
    x = {"f": "a", "g": "zz", "h": None, "unknown": "b"}
    prior = stats.joint_log_likelihood({}, alpha)
    jll = dict(prior)
    stats.add_terms(jll, x, ["f", "g", "h", "unknown"], alpha)
    assert jll == stats.joint_log_likelihood(x, alpha)  # the same sums, bit for bit
    only_f = dict(prior)
    stats.add_terms(only_f, x, ["f"], alpha)
    assert only_f == stats.joint_log_likelihood({"f": "a"}, alpha)


def test_an_unhashable_value_is_named_for_the_owner() -> None:
    stats = learned([([("f", "a"), ("g", "b")], "p", 1.0)])
    x = {"new": [1], "f": "a", "g": ["b"]}
    jll = {"p": 0.0}
    with pytest.raises(TypeError):  # the score itself: a plain TypeError
        stats.add_terms(jll, x, ["new", "f", "g"], 1.0)
    with pytest.raises(TypeError):
        stats.joint_log_likelihood(x, 1.0)
    # a feature never learned is not scored, so not named
    with pytest.raises(InvalidEventError, match=r"categorical feature 'g' has unhashable value"):
        stats.check_hashable(x, ["new", "f", "g"])
    stats.check_hashable({"f": "a", "new": [1]}, ["f", "new"])  # nothing to name


def test_an_owner_that_counts_the_events_keeps_no_class_weights() -> None:
    """NaiveBayes' layout: event=False, the state without class weights, read against
    the owner's."""
    evs = events(6, 80)
    stats = CategoricalStatistics(max_values=3)
    for items, y, w in evs:
        stats.learn(items, y, w, False)
    assert stats.class_weight == {} and stats.total_weight == 0.0
    state = stats.to_state(classes=False)
    assert list(state) == ["present", "counts"]
    owner = learned(evs, max_values=3)  # the same counts, with the class weights
    assert state == {k: v for k, v in owner.to_state().items() if k in state}
    assert stats.size() == owner.size() - len(owner.class_weight)
    copy = CategoricalStatistics(max_values=3)
    copy.load_state(orjson.loads(orjson.dumps(state)), "stats", class_weight=owner.class_weight)
    assert copy.to_state(classes=False) == state and copy.class_weight == {}
    # checked against the owner's classes
    with pytest.raises(ModelStateError, match=r"stats\.present\['f'\]: unknown class 'r'"):
        copy.load_state(state, "stats", class_weight={"p": 100.0, "q": 100.0})
    with pytest.raises(ModelStateError, match=r"stats\.present: 3 features, more than max_f"):
        copy.load_state(owner.to_state(), "stats", max_features=2)


def test_a_merge_admits_new_features_while_room_lasts() -> None:
    mine = learned([([("f", "a")], "p", 1.0)])
    theirs = learned([([("g", "a"), ("f", "b"), ("h", "c"), ("i", "d")], "q", 2.0)])
    assert mine.admitted(theirs, None) is None
    assert mine.admitted(theirs, 0) == {"f"}
    assert mine.admitted(theirs, 2) == {"f", "g", "h"}  # in theirs' order
    mine.merge(theirs, 1.0, mine.value_map(theirs, mine.admitted(theirs, 2)))
    assert list(mine.counts) == ["f", "g", "h"]


def test_a_merge_without_a_value_map_takes_everything_as_it_is() -> None:
    a_events, b_events = events(7, 100), events(8, 100)
    plain, mapped, other = learned(a_events), learned(a_events), learned(b_events)
    plain.merge(other, 0.5, None)
    mapped.merge(other, 0.5, mapped.value_map(other))
    assert plain.to_state() == mapped.to_state()


def test_batch_helpers_bucket_check_and_add() -> None:
    stats = learned([([("f", v)], "p", 1.0) for v in "ab"], max_values=2)
    stats.learn([("g", "x")], "q", 1.0)
    found = stats.bucket_columns(("f", "g"), [["a", "c", "b"], ["x", "y", "x"]])
    assert found == ([["a", None, "b"], ["x", "y", "x"]], frozenset({"f"}))
    # a missing value stays None (the kernel tells it from the bucket by the columns given)
    assert stats.bucket_columns(("f",), [["a", None, "z"]]) == ([["a", None, None]], {"f"})
    assert stats.accepts_new_values("g", ["y"])
    assert not stats.accepts_new_values("g", ["y", "z"])  # past max_values
    assert not stats.accepts_new_values("g", [float("nan")])  # not a category
    assert stats.accepts_new_values("f", [None])  # the bucket is not a value
    stats.codes["g"] = ({"x": 0}, ["x"])
    stats.load_state(stats.to_state(), "stats")
    assert stats.codes == {}  # (value codes are not statistics: a load starts afresh)
    # (the class weights are the kernel's to add)
    items = [("x", "q", 1.0), ("y", "q", 1.0), ("y", "p", 1.0)]
    stats.add_batch("g", [("q", 2.0), ("p", 1.0)], items)
    assert stats.present["g"] == {"q": 3.0, "p": 1.0}
    assert stats.counts["g"] == {"x": {"q": 2.0}, "y": {"q": 1.0, "p": 1.0}}
