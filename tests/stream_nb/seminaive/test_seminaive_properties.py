"""Property tests (hypothesis) of the semi-naive learners on arbitrary small streams."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from stream_nb import AODE, KDB, SPODE, TAN, Learner

values = st.one_of(st.sampled_from(["a", "b", "c"]), st.booleans(), st.none())
events = st.lists(
    st.tuples(
        st.dictionaries(st.sampled_from(["f0", "f1", "f2", "f3"]), values, max_size=4),
        st.sampled_from([0, 1, "late"]),
        st.sampled_from([0.5, 1.0, 2.0]),
    ),
    min_size=2,
    max_size=40,
)
FAST = settings(max_examples=25, deadline=None)


def learn(model: Learner, stream: list) -> Learner:
    for x, y, w in stream:
        model.learn_one(x, y, w)
    return model


def close(a: dict, b: dict, tol: float = 1e-9) -> bool:
    return a.keys() == b.keys() and all(abs(a[c] - b[c]) <= tol * max(1.0, abs(b[c])) for c in a)


@FAST
@given(events, st.integers(min_value=0, max_value=40))
def test_aode_and_spode_merge_equals_one_pass(stream: list, cut: int) -> None:
    for make in (AODE, lambda: SPODE("f1"), lambda: AODE(min_parent_count=2.0)):
        merged = learn(make(), stream[:cut]).merge(learn(make(), stream[cut:]))
        one = learn(make(), stream)
        for x, _y, _w in stream:
            assert close(merged.predict_log_proba_one(x), one.predict_log_proba_one(x))


@FAST
@given(events)
def test_probabilities_are_normalised(stream: list) -> None:
    for model in (AODE(), TAN(rebuild_every=3), KDB(k=2, rebuild_every=3), SPODE()):
        learn(model, stream)
        for x, _y, _w in stream:
            proba = model.predict_proba_one(x)
            assert abs(math.fsum(proba.values()) - 1.0) <= 1e-9
            log_proba = model.predict_log_proba_one(x)
            assert all(math.isfinite(v) and v <= 1e-12 for v in log_proba.values())


@FAST
@given(events)
def test_state_round_trip_with_changing_structure(stream: list) -> None:
    half = len(stream) // 2
    model = learn(KDB(k=2, rebuild_every=2, half_life=7.0), stream[:half])
    copy = Learner.from_state(json.loads(json.dumps(model.to_state())))
    learn(model, stream[half:])
    learn(copy, stream[half:])
    assert json.dumps(copy.to_state()) == json.dumps(model.to_state())
