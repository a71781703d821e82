"""Brute-force building blocks shared by the learner tests.

Each learner's test module computes its formula from the raw events with these
helpers, independently of the learner's incremental statistics; the last
section holds the procedures several learners' tests run the same way.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import orjson
from hypothesis import strategies as st

from stream_nb import Learner
from stream_nb.limits import MIN_VARIANCE

#: One event as the tests replay it: features, label, sample weight.
Event = tuple[dict[str, Any], Hashable, float]

#: Agreement between a learner and a reference: |Δ| ≤ TOLERANCE × max(1, |value|).
TOLERANCE = 1e-9


def assert_close(
    got: Mapping[Hashable, float], want: Mapping[Hashable, float], tol: float = TOLERANCE
) -> None:
    """The same classes, each log-probability within ``tol`` relative (absolute below 1)."""
    assert got.keys() == want.keys()
    for c, v in want.items():
        assert abs(got[c] - v) <= tol * max(1.0, abs(v)), (c, got[c], v)


def decayed_weights(events: Sequence[Event], half_life: float | None) -> list[float]:
    """True weight of each event now: ``w_i × γ^(Σ_{j>i} w_j)``, ``γ = 2^(-1/half_life)``."""
    if half_life is None:
        return [w for _, _, w in events]
    gamma = 2.0 ** (-1.0 / half_life)
    out = []
    after = 0.0
    for _, _, w in reversed(events):
        out.append(w * gamma**after)
        after += w
    return out[::-1]


def class_weights(events: Sequence[Event], weights: Sequence[float]) -> dict[Hashable, float]:
    """``N_y``: the (decayed) weight of each class, in order of first appearance."""
    n_y: dict[Hashable, float] = {}
    for (_, y, _), w in zip(events, weights, strict=True):
        n_y[y] = n_y.get(y, 0.0) + w
    return n_y


def log_prior(
    n_y: Mapping[Hashable, float],
    n: float,
    alpha: float,
    fit_prior: bool = True,
    class_prior: Mapping[Hashable, float] | None = None,
) -> dict[Hashable, float]:
    """``log P(y)`` of every scored class: ``log class_prior[y]`` when given (classes it
    leaves out are not scored), ``-log K`` without ``fit_prior``, else
    ``log((N_y + α) / (N + Kα))`` (``α = 0``: ``log(N_y / N)``)."""
    k = len(n_y)
    if class_prior is not None:
        return {y: math.log(class_prior[y]) for y in n_y if y in class_prior}
    if not fit_prior:
        return {y: -math.log(k) for y in n_y}
    return {y: math.log((n_y[y] + alpha) / (n + k * alpha)) for y in n_y}


def normalise(scores: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Log-softmax of unnormalised log scores with a compensated sum (``{}`` stays ``{}``)."""
    if not scores:
        return {}
    m = max(scores.values())
    lse = m + math.log(math.fsum(math.exp(v - m) for v in scores.values()))
    return {c: v - lse for c, v in scores.items()}


# ------------------------------------------------------------------ Gaussian terms
def weighted_moments(pairs: Sequence[tuple[float, float]]) -> tuple[float, float, float]:
    """(Σw, weighted mean, population variance) by two passes."""
    n = math.fsum(w for _, w in pairs)
    mean = math.fsum(w * v for v, w in pairs) / n
    var = math.fsum(w * (v - mean) ** 2 for v, w in pairs) / n
    return n, mean, var


def gaussian_terms(
    events: Sequence[Event],
    weights: Sequence[float],
    x: Mapping[str, Any],
    classes: Sequence[Hashable],
    var_smoothing: float | None = None,
    numeric: set[str] | None = None,
    mode: str = "feature",
) -> dict[Hashable, float]:
    """Σ_f log N(x_f; μ_yf, σ²_yf) per class, over the features that every class has learned.

    ``numeric`` restricts the features considered (NaiveBayes' Gaussian ones).
    ``mode``: ``"feature"``, ``ε_f = var_smoothing × V_f`` (a feature with
    ``V_f = 0`` left out), or ``"global"``, ``ε = var_smoothing × max_f V_f``
    (nothing when that is 0); both floored at 1e-90. ``var_smoothing=None``:
    1e-2 for ``"feature"``, 1e-9 for ``"global"``.
    """
    if var_smoothing is None:
        var_smoothing = 1e-2 if mode == "feature" else 1e-9
    values: dict[str, list[tuple[float, float, Hashable]]] = {}
    for (ex, y, _), w in zip(events, weights, strict=True):
        for f, v in ex.items():
            if v is not None and (numeric is None or f in numeric):
                values.setdefault(f, []).append((float(v), w, y))
    variances = {f: weighted_moments([(v, w) for v, w, _ in vs])[2] for f, vs in values.items()}
    max_var = max(variances.values(), default=0.0)
    out = dict.fromkeys(classes, 0.0)
    if mode == "global" and max_var == 0.0:
        return out  # every feature constant: equal terms for every class, left out
    for f, v in x.items():
        if v is None or f not in values:
            continue
        if mode == "feature":
            if variances[f] == 0.0:
                continue  # constant so far: equal terms for every class, left out
            eps = max(var_smoothing * variances[f], MIN_VARIANCE)
        else:
            eps = max(var_smoothing * max_var, MIN_VARIANCE)
        by_class = {y: [(u, w) for u, w, c in values[f] if c == y] for y in classes}
        if not all(by_class.values()):
            continue  # some scored class has no statistics for f
        for y in classes:
            _, mean, var = weighted_moments(by_class[y])
            var += eps
            out[y] += -0.5 * (math.log(2 * math.pi * var) + (float(v) - mean) ** 2 / var)
    return out


# ------------------------------------------------------------------ token events
def token_stream(seed: int, n: int, vocabulary: int = 25, classes: int = 3) -> list[Event]:
    """Random documents: zero counts, float counts, weights, a class that starts late."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        x: dict[str, Any] = {}
        for _ in range(rng.randint(0, 6)):
            token = f"t{min(int(rng.expovariate(0.25)), vocabulary - 1)}"
            x[token] = rng.choice([0, 1, 1, 1, 2, 3, 0.5])
        late = i > n * 0.6 and rng.random() < 0.3
        y: Hashable = "late" if late else rng.randrange(classes - 1)
        w = rng.choice([1.0, 1.0, 0.5, 2.0, 0.1])
        events.append((x, y, w))
    return events


def with_unseen(x: Mapping[str, Any], rng: random.Random, binary: bool = False) -> dict[str, Any]:
    """The event plus a token (feature) never learned, with a count (``binary``: on)."""
    out = dict(x)
    out[f"unseen{rng.randrange(3)}"] = 1 if binary else rng.randint(0, 2)
    return out


def token_events(max_int: int, max_float: float) -> st.SearchStrategy[Event]:
    """Hypothesis events over the tokens ``w0`` … ``w7``: int values up to ``max_int``
    or floats up to ``max_float``, labels ``a``/``b``/``c``, weights 1, 0.5 or 3."""
    return st.tuples(
        st.dictionaries(
            st.sampled_from([f"w{i}" for i in range(8)]),
            st.one_of(st.integers(0, max_int), st.floats(0, max_float, allow_nan=False)),
            max_size=5,
        ),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([1.0, 0.5, 3.0]),
    )


# ------------------------------------------------------------------ shared procedures
def assert_prequential(
    model: Learner,
    events: Sequence[Event],
    reference: Callable[..., dict[Hashable, float]],
    *,
    binary: bool = False,
    **params: Any,
) -> None:
    """On every prequential step, the model's log posterior of the event plus a token
    never learned (:func:`with_unseen`) is ``reference(events before it, that x, **params)``."""
    rng = random.Random(0)
    for i, (x, y, w) in enumerate(events):
        x_probe = with_unseen(x, rng, binary)
        assert_close(model.predict_log_proba_one(x_probe), reference(events[:i], x_probe, **params))
        model.learn_one(x, y, w)


def learn_scaled(
    make: Callable[[float], Learner], events: Sequence[Event], alpha: float, factor: float = 4.0
) -> tuple[Learner, Learner]:
    """``make(alpha)`` after learning ``events``, and ``make(alpha × factor)`` after learning
    them with every weight × ``factor`` (scaling both together changes no posterior)."""
    model, scaled = make(alpha), make(alpha * factor)
    for x, y, w in events:
        model.learn_one(x, y, w)
        scaled.learn_one(x, y, w * factor)
    return model, scaled


def assert_merge_and_copy(
    make: Callable[[], Learner], events: Sequence[Event], *, union: bool
) -> tuple[Learner, Learner]:
    """Merge a model of the odd events (restored from its JSON state) with one of the even
    events; return it and a copy restored from its state, which predicts exactly alike.

    With ``union`` the merge also predicts as one model that learned the odd events
    then the even ones (not with forgetting, where order matters).
    """
    a, b, one = make(), make(), make()
    for i, (x, y, w) in enumerate(events):
        (a if i % 2 else b).learn_one(x, y, w)
    for x, y, w in [e for i, e in enumerate(events) if i % 2] + [
        e for i, e in enumerate(events) if not i % 2
    ]:
        one.learn_one(x, y, w)
    merged = Learner.from_state(orjson.loads(orjson.dumps(a.to_state())))
    merged.merge(b)
    copy = Learner.from_state(orjson.loads(orjson.dumps(merged.to_state())))
    for x, _, _ in events[:30]:
        if union:
            assert_close(merged.predict_log_proba_one(x), one.predict_log_proba_one(x))
        assert copy.predict_log_proba_one(x) == merged.predict_log_proba_one(x)
    return merged, copy
