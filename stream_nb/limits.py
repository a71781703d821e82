"""The numeric range of every learner: the bounds that keep its arithmetic finite.

A learner accepts exactly the numbers it can compute with. An event holding a
number outside these bounds raises :class:`~stream_nb.InvalidEventError` with
``reason="out_of_range"``, when it is learned *and* when it is predicted,
before any statistic changes (the daemon dead-letters it with that reason);
parameters outside them raise :class:`~stream_nb.ConfigError`.

=====================  ===================  ==========================================
bound                  value                applies to
=====================  ===================  ==========================================
:data:`MAX_VALUE`      1e100                ``|x|`` of a Gaussian feature value
                                            (GaussianNB, NaiveBayes) and of a token
                                            count (MultinomialNB, ComplementNB)
:data:`MAX_WEIGHT`     1e50                 sample weight ``w`` of ``learn_one``
:data:`MIN_WEIGHT`     1e-50                (every learner)
:data:`MAX_ALPHA`      1e10                 smoothing ``alpha``
:data:`MIN_ALPHA`      1e-100
:data:`MAX_VAR_        1e10                 ``var_smoothing``
SMOOTHING`
:data:`MAX_HALF_LIFE`  1e12                 ``half_life``
:data:`MIN_HALF_LIFE`  0.02
=====================  ===================  ==========================================

Values that are only compared, never multiplied, have no bound beyond being
finite: categories (CategoricalNB, NaiveBayes), BernoulliNB's values (compared
with ``binarize``) and the numeric values of the semi-naive learners (binned
by comparison; an ``int`` must lie within the double range, ``±1.797e308``,
for its bin edges to be doubles).

Why these bounds
----------------
The analysis assumes at most :data:`MAX_EVENTS` = 2**53 learned events over a
model's life (merges included) and at most :data:`MAX_EVENT_FEATURES` = 2**32
features in one event; every worst case below then stays under the largest
double, 1.8e308, with a margin (``test_limits.py`` recomputes each one).

- *Raw weights.* With forgetting, statistics are kept in raw units
  ``true / scale`` (see :mod:`stream_nb.base`) and the scale is renormalised
  below :data:`RENORMALISE_BELOW` = 1e-30, so one event adds at most
  ``MAX_WEIGHT / RENORMALISE_BELOW`` = 1e80 raw units and any weight sum is at
  most ``N = 2**53 × 1e80 ≈ 9.0e95``.
- *Gaussian.* Means lie in ``[-MAX_VALUE, MAX_VALUE]``, so ``|x − μ| ≤ 2e100``
  and ``M2 ≤ N × (2e100)² ≈ 3.6e296`` (Welford's and Chan's updates, with the
  Chan term computed as ``δ·δ·(n_a/n)·n_b``). ``σ² ≥`` :data:`MIN_VARIANCE` =
  1e-90 keeps the sum over an event's features of ``(x − μ)²/σ²`` below
  ``2**32 × 4e200 / 1e-90 ≈ 1.7e300``; ``σ² ≤ 4e200 × (1 + 1e10)``.
- *Token counts.* A count ``N_{y,w}`` is at most ``2**53 × 1e100 × 1e80 ≈
  9.0e195``; MultinomialNB sums ``x_w × N_{y,w}`` over an event's tokens (≤
  ``2**32 × 1e100 × 9.0e195 ≈ 3.9e305``), class totals ``T_y`` are at most
  ``2**32`` times a count (≈ 3.9e205), and ``N / α ≤ 9.0e295``.
- *Smoothing.* ``α`` in raw units lies in ``[1e-100, 1e40]``, so every ratio
  of a weight to ``α`` is at most ``9.0e195`` (a token count: ``9.0e295``).
  BernoulliNB's one-logarithm term ``(c + α)(N_y + α) / (α (N_y − c + α))``
  can exceed the double range for ``α < 1e-50``; it is then taken as two
  logarithms.
- *Small weights.* Without forgetting every weight sum is ≥ 1e-50, so a
  product of two (mutual information of the semi-naive learners) is ≥ 1e-100,
  far from the subnormal range. Forgetting may still decay old statistics to
  0; every formula treats a zero weight as "no evidence" (a class whose weight
  decayed to 0 has probability 0).
- *half_life.* ``γ = 2^(-1/half_life)`` is the decay of one unit of weight.
  Above 1e12, ``1 − γ < 7e-13`` is held by a double to worse than 1e-4
  relative (and ``γ`` rounds to exactly 1 near 6e15: no forgetting at all);
  below 0.02, ``γ < 2^-50`` and one event of weight 1 wipes every earlier one
  out to within double precision (the model is the last event), while
  renormalising the whole model after every event.

Examples
--------
>>> from stream_nb import GaussianNB, InvalidEventError
>>> model = GaussianNB()
>>> model.learn_one({"salary": 52_000.0}, "a")
>>> try:
...     model.learn_one({"salary": 1.797e308}, "b")
... except InvalidEventError as exc:
...     print(exc.reason)
out_of_range
>>> model.n_learned
1
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from numbers import Real
from typing import Any

from stream_nb._exceptions import ConfigError, InvalidEventError

__all__ = [
    "MAX_ALPHA",
    "MAX_EVENTS",
    "MAX_EVENT_FEATURES",
    "MAX_HALF_LIFE",
    "MAX_VALUE",
    "MAX_VAR_SMOOTHING",
    "MAX_WEIGHT",
    "MIN_ALPHA",
    "MIN_HALF_LIFE",
    "MIN_VARIANCE",
    "MIN_WEIGHT",
    "RENORMALISE_BELOW",
    "check_half_life",
    "check_number",
    "check_weight",
    "value_out_of_range",
]

#: Largest ``|x|`` of a number a learner multiplies: Gaussian values, token counts.
MAX_VALUE = 1e100
#: Largest sample weight ``w``.
MAX_WEIGHT = 1e50
#: Smallest sample weight ``w``.
MIN_WEIGHT = 1e-50
#: Largest smoothing constant ``alpha``.
MAX_ALPHA = 1e10
#: Smallest smoothing constant ``alpha``.
MIN_ALPHA = 1e-100
#: Largest ``var_smoothing`` (a fraction of the largest variance).
MAX_VAR_SMOOTHING = 1e10
#: Longest ``half_life``: ``γ = 2^(-1/h)`` still differs from 1 to 1e-4 relative.
MAX_HALF_LIFE = 1e12
#: Shortest ``half_life``: ``γ ≥ 2^-50``, the previous event still counts.
MIN_HALF_LIFE = 0.02
#: The global forgetting scale is renormalised below this (raw ≤ 1e30 × true).
RENORMALISE_BELOW = 1e-30
#: Floor of the Gaussian ε (so of every σ²).
MIN_VARIANCE = 1e-90
#: Assumed most events a model learns over its life (merges included).
MAX_EVENTS = 2**53
#: Assumed most features in one event.
MAX_EVENT_FEATURES = 2**32


def value_out_of_range(
    feature: Hashable, value: Any, what: str = "value", limit: float = MAX_VALUE
) -> InvalidEventError:
    """The error for a number beyond ``limit`` (:data:`MAX_VALUE`): a feature's
    ``"value"`` or a token's ``"count"``.

    Examples
    --------
    >>> print(value_out_of_range("salary", 1e200))
    feature 'salary' has value 1e+200, beyond |x| <= 1e+100, the range the model can \
compute with; send it in other units, or leave it out (None) if it stands for a missing value
    >>> print(value_out_of_range("the", 2**400, "count"))
    token 'the' has count 2.582e+120, beyond |x| <= 1e+100, the range the model can \
compute with; drop the token or cap its count
    """
    if isinstance(value, int):
        shown = f"{float(value):.4g}" if value.bit_length() <= 1023 else "an integer of "
        if value.bit_length() > 1023:
            shown += f"{value.bit_length()} bits"
    else:
        shown = f"{value!r:.40}"
    start = f"feature {feature!r} has value" if what == "value" else f"token {feature!r} has count"
    fix = (
        "send it in other units, or leave it out (None) if it stands for a missing value"
        if what == "value"
        else "drop the token or cap its count"
    )
    return InvalidEventError(
        f"{start} {shown}, beyond |x| <= {limit:g}, the range the model can compute with; {fix}",
        reason="out_of_range",
    )


def check_number(feature: Hashable, value: Any, hint: str) -> float:
    """A feature value a learner computes with, as a float within ``±MAX_VALUE``.

    Raises :class:`~stream_nb.InvalidEventError` naming the feature:
    ``reason="non_numeric"`` for anything but an int or float (``bool`` is not a
    number here; the message ends with ``hint``, where ``{feature}`` is filled in),
    ``"non_finite"`` for NaN or ±inf, ``"out_of_range"`` beyond ``MAX_VALUE``.

    Examples
    --------
    >>> check_number("height", 2, "send numbers")
    2.0
    >>> check_number("height", "tall", "send numbers")
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.InvalidEventError: feature 'height' has non-numeric value 'tall' (str); \
send numbers
    """
    if value.__class__ is bool or not isinstance(value, Real):
        raise InvalidEventError(
            f"feature {feature!r} has non-numeric value {value!r} ({type(value).__name__}); "
            + hint.format(feature=feature),
            reason="non_numeric",
        )
    number: Any = value  # (a Real: compared as it is, exactly for an int of any size)
    if not -MAX_VALUE <= number <= MAX_VALUE:
        if number != number or number in (math.inf, -math.inf):
            raise InvalidEventError(
                f"feature {feature!r} has non-finite value {value!r}; send a finite number "
                "or leave the feature out (None) when it is missing",
                reason="non_finite",
            )
        raise value_out_of_range(feature, value)
    return float(value)


def check_weight(w: Any) -> None:
    """Check a sample weight: a positive finite number within ``[MIN_WEIGHT, MAX_WEIGHT]``.

    Raises :class:`~stream_nb.ConfigError` for anything but a positive finite
    number (``bool`` is not one), and ``InvalidEventError(reason="out_of_range")``
    for one outside the bounds.

    Examples
    --------
    >>> check_weight(2.5)
    >>> check_weight(1e60)
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.InvalidEventError: sample weight w=1e+60 is outside [1e-50, 1e+50], \
the range the model can compute with; rescale the weights of the stream
    """
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not (w > 0.0 and w != math.inf):
        raise ConfigError(
            f"sample weight w must be positive and finite, got {w!r}; "
            "pass a number such as 1.0 (the default)"
        )
    if not MIN_WEIGHT <= w <= MAX_WEIGHT:
        raise InvalidEventError(
            f"sample weight w={w!r} is outside [{MIN_WEIGHT:g}, {MAX_WEIGHT:g}], the range "
            "the model can compute with; rescale the weights of the stream",
            reason="out_of_range",
        )


def check_half_life(half_life: Any) -> float | None:
    """``None`` or a number of weight units in ``[MIN_HALF_LIFE, MAX_HALF_LIFE]``.

    Examples
    --------
    >>> check_half_life(None), check_half_life(500)
    (None, 500)
    >>> check_half_life(0.001)
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ConfigError: half_life must be in [0.02, 1e+12] units of weight, \
got 0.001: below 0.02 one event decays every earlier one below double precision (the model \
would be the last event); use a half_life of at least 0.02
    """
    if half_life is None:
        return None
    if not isinstance(half_life, (int, float)) or isinstance(half_life, bool):
        raise ConfigError(
            f"half_life must be a positive number of events or None, got {half_life!r}"
        )
    if half_life != half_life or half_life <= 0 or half_life == math.inf:
        raise ConfigError(
            f"half_life must be a positive, finite number of events, got {half_life!r}; "
            "use None to disable forgetting"
        )
    span = f"half_life must be in [{MIN_HALF_LIFE:g}, {MAX_HALF_LIFE:g}] units of weight, got "
    if half_life < MIN_HALF_LIFE:
        raise ConfigError(
            f"{span}{half_life!r}: below {MIN_HALF_LIFE:g} one event decays every earlier "
            "one below double precision (the model would be the last event); use a "
            f"half_life of at least {MIN_HALF_LIFE:g}"
        )
    if half_life > MAX_HALF_LIFE:
        if isinstance(half_life, float):
            shown = f"{half_life!r:.30}"
        elif half_life.bit_length() > 1000:
            shown = f"an integer of {half_life.bit_length()} bits"
        else:
            shown = f"{half_life:.3e}"
        raise ConfigError(
            f"{span}{shown}: beyond {MAX_HALF_LIFE:g} the decay 2^(-1/half_life) is too close "
            "to 1 for a double to hold it (and is exactly 1 near 6e15); use None to disable "
            "forgetting"
        )
    return half_life
