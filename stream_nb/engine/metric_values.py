"""The checks :class:`~stream_nb.engine.telemetry.EngineMetrics` applies to every value.

A label value must come from its fixed set (so the number of series stays
bounded), a count must be a non-negative integer, a duration a non-negative
finite number of seconds. Each check raises :class:`~stream_nb.ConfigError`
naming the value and what was expected, before anything is counted.
"""

from __future__ import annotations

import math
from typing import Any

from stream_nb._exceptions import ConfigError

__all__ = [
    "NAN",
    "check_count",
    "check_label",
    "check_seconds",
    "check_unix_time",
    "gauge_value",
]

NAN = math.nan


def check_label(value: str, allowed: tuple[str, ...], what: str) -> None:
    """Raise unless ``value`` is one of ``allowed`` (``what`` names it in the message).

    Examples
    --------
    >>> check_label("cumulative", ("cumulative", "window"), "view")
    >>> check_label("daily", ("cumulative", "window"), "view")
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ConfigError: unknown view 'daily'; metric labels must be bounded, ...
    """
    if value not in allowed:
        raise ConfigError(
            f"unknown {what} {value!r}; metric labels must be bounded, use one of "
            f"{', '.join(allowed)} (or add it to stream_nb.engine.telemetry)"
        )


def check_count(value: object, name: str) -> int:
    """``value`` if it is a non-negative ``int`` (not a ``bool``), else raise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{name} must be a non-negative integer count, got {value!r}")
    return value


def check_seconds(value: Any, name: str) -> float:
    """``value`` as a float if it is a non-negative, finite number, else raise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value >= 0 and math.isfinite(value))
    ):
        raise ConfigError(f"{name} must be a non-negative, finite number of seconds, got {value!r}")
    return float(value)


def check_unix_time(value: Any, name: str) -> float:
    """``value`` as a float if it is a positive, finite Unix time, else raise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value > 0 and math.isfinite(value))
    ):
        raise ConfigError(f"{name} must be a positive, finite Unix time, got {value!r}")
    return float(value)


def gauge_value(value: Any) -> float:
    """A report value as a gauge value: ``None`` (undefined) becomes NaN.

    Examples
    --------
    >>> gauge_value(None), gauge_value(1)
    (nan, 1.0)
    """
    return NAN if value is None else float(value)
