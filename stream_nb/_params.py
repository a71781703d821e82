"""Parameter validation and the class prior shared by the discrete learners."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any

from stream_nb._exceptions import ConfigError, InvalidEventError
from stream_nb._state import LABEL_TYPES, check_feature_names
from stream_nb.limits import MAX_ALPHA, MIN_ALPHA

__all__ = [
    "check_alpha",
    "check_bool",
    "check_cap",
    "check_class_prior",
    "check_feature_weights",
    "check_nonneg",
    "log_prior",
]

_log = math.log
_NEG_INF = -math.inf


def check_alpha(alpha: Any, name: str = "alpha", *, allow_zero: bool = False) -> float:
    """A smoothing constant in ``[MIN_ALPHA, MAX_ALPHA]`` of :mod:`stream_nb.limits`,
    or exactly 0 (maximum likelihood) where ``allow_zero`` (the learner then scores
    zero counts ``-inf`` and decides by :mod:`stream_nb._mle`'s rule)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        kind = "non-negative" if allow_zero else "positive"
        raise ConfigError(f"{name} must be a {kind} number, got {alpha!r}")
    if allow_zero and alpha == 0:
        return 0.0
    if not 0 < alpha < math.inf:  # (no float(): an int of any size compares exactly)
        smallest = f"{name}=0 (maximum likelihood) or " if allow_zero else ""
        raise ConfigError(
            f"{name} must be {'non-negative' if allow_zero else 'positive'} and finite, got "
            f"{alpha!r}; for almost no smoothing use {smallest}a small value such as "
            f"{name}=1e-10"
        )
    if not MIN_ALPHA <= alpha <= MAX_ALPHA:
        zero = " or exactly 0" if allow_zero else ""
        raise ConfigError(
            f"{name} must be in [{MIN_ALPHA:g}, {MAX_ALPHA:g}]{zero}, the range the model "
            f"computes with in floating point, got {alpha!r}; for almost no smoothing use "
            f"{name}={MIN_ALPHA:g}"
        )
    return float(alpha)


def check_nonneg(value: Any, name: str, maximum: float | None = None) -> float:
    """A non-negative finite number (at most ``maximum`` if given)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a non-negative number, got {value!r}")
    if not 0 <= value < math.inf:
        raise ConfigError(f"{name} must be non-negative and finite, got {value!r}")
    if maximum is not None and value > maximum:
        raise ConfigError(
            f"{name} must be at most {maximum:g} (the range the model computes with in "
            f"floating point), got {value!r}"
        )
    return float(value)


def check_cap(value: Any, name: str) -> int | None:
    """A memory bound: ``None`` (unbounded) or an integer ≥ 1 (not ``bool``).

    Examples
    --------
    >>> check_cap(None, "max_classes"), check_cap(10, "max_classes")
    (None, 10)
    >>> check_cap(0, "max_classes")
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ConfigError: max_classes must be an integer >= 1 or None (unbounded), ...
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1 or None (unbounded), got {value!r}")
    return int(value)


def check_bool(value: Any, name: str) -> bool:
    """A real ``bool`` (not a truthy string such as ``"false"``)."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False, got {value!r}")
    return value


def check_class_prior(class_prior: Any) -> dict[Hashable, float] | None:
    """``None`` or a mapping label -> positive finite prior probability.

    Priors need not sum to 1: only their ratios matter after normalisation.
    """
    if class_prior is None:
        return None
    if not isinstance(class_prior, Mapping) or not class_prior:
        raise ConfigError(
            f"class_prior must be a non-empty mapping label -> probability, got {class_prior!r}"
        )
    out: dict[Hashable, float] = {}
    for label, p in class_prior.items():
        if label.__class__ not in LABEL_TYPES and not (
            label.__class__ is float and label - label == 0.0
        ):
            raise ConfigError(
                f"class_prior has label {label!r} ({type(label).__name__}); labels must be "
                "a string, an integer, a bool or a finite float"
            )
        if (
            isinstance(p, bool)
            or not isinstance(p, (int, float))
            or not (p > 0 and math.isfinite(p))
        ):
            raise ConfigError(
                f"class_prior[{label!r}] must be a positive probability, got {p!r}; "
                "leave a class out instead of giving it 0"
            )
        out[label] = float(p)
    return out


#: The largest feature weight: a weight multiplies a log-probability (at most ~1e3 in
#: magnitude within the numeric range), so every weighted score stays far from overflow.
MAX_FEATURE_WEIGHT = 1e6


def check_feature_weights(feature_weights: Any) -> dict[Hashable, float] | None:
    """``None`` or a mapping feature -> weight in ``[0, MAX_FEATURE_WEIGHT]`` (a copy; an
    empty mapping is ``None``). Features it leaves out have weight 1.

    Examples
    --------
    >>> check_feature_weights({"sky": 0.5, "id": 0})
    {'sky': 0.5, 'id': 0.0}
    >>> check_feature_weights({"sky": -1})
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ConfigError: feature_weights['sky'] must be non-negative and finite, ...
    """
    if feature_weights is None:
        return None
    if not isinstance(feature_weights, Mapping):
        raise ConfigError(
            f"feature_weights must be a mapping feature -> weight >= 0, got {feature_weights!r}"
        )
    try:
        check_feature_names(feature_weights)
    except InvalidEventError as exc:
        raise ConfigError(f"feature_weights: {exc}") from None
    out = {
        f: check_nonneg(w, f"feature_weights[{f!r}]", MAX_FEATURE_WEIGHT)
        for f, w in feature_weights.items()
    }
    return out or None


def log_prior(
    class_weight: Mapping[Hashable, float],
    total_weight: float,
    alpha: float,
    fit_prior: bool,
    class_prior: Mapping[Hashable, float] | None,
) -> dict[Hashable, float]:
    """Log class priors of the discrete learners, as a new dict to accumulate into.

    ``log P(y) = log((N_y + α) / (N + Kα))`` (Laplace/Lidstone; with ``α = 0`` the
    maximum-likelihood ``log(N_y / N)``, ``-inf`` for a class of weight 0); ``1/K`` when
    ``fit_prior`` is false; ``class_prior[y]`` when given, in which case seen
    classes missing from ``class_prior`` are not scored (probability 0).
    ``alpha`` is in the same raw units as the weights.
    """
    if class_prior is not None:
        return {y: _log(class_prior[y]) for y in class_weight if y in class_prior}
    if not fit_prior:
        return dict.fromkeys(class_weight, -_log(len(class_weight)))
    if alpha == 0:  # maximum likelihood: a class of weight 0 has probability 0
        log_total = _log(total_weight) if total_weight > 0 else 0.0
        return {y: _log(n) - log_total if n > 0 else _NEG_INF for y, n in class_weight.items()}
    log_denominator = _log(total_weight + len(class_weight) * alpha)
    return {y: _log(n + alpha) - log_denominator for y, n in class_weight.items()}
