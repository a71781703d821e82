"""Validation of the token learners' event values (multinomial, Bernoulli, complement).

The checks run before any statistic is touched, so a rejected event leaves the
model unchanged. The fast path is two C-level passes (``sum`` and ``min``); the
offending token is searched for only when they fail.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real
from typing import Any

from stream_nb._exceptions import InvalidEventError
from stream_nb.limits import MAX_VALUE, value_out_of_range

__all__ = ["binary_on", "check_counts", "count_stats", "threshold_on"]

_INF = math.inf


def _bad_count(x: Mapping[str, Any]) -> InvalidEventError | None:
    """The error for the first token of ``x`` whose count is not a valid count
    (``None``: every count is valid, only their sum is beyond ``MAX_VALUE``)."""
    for token, value in x.items():
        if isinstance(value, bool):
            continue
        if not isinstance(value, Real) or value != value:
            return InvalidEventError(
                f"token {token!r} has count {value!r}; counts must be non-negative numbers "
                "(int or float): convert it or drop the token",
                reason="non_numeric",
            )
        if value < 0:
            return InvalidEventError(
                f"token {token!r} has negative count {value!r}; counts must be >= 0: "
                "drop the token or send 0",
                reason="negative_count",
            )
        if value == _INF:
            return InvalidEventError(
                f"token {token!r} has infinite count {value!r}; counts must be finite",
                reason="non_finite",
            )
        if value > MAX_VALUE:  # type: ignore[operator] # (a Real)
            return value_out_of_range(token, value, "count")
    if all(isinstance(v, Real) for v in x.values()):
        return None
    return InvalidEventError(  # pragma: no cover - only for exotic numeric types
        f"token counts {dict(x)!r} are not valid non-negative finite numbers",
        reason="non_numeric",
    )


def check_counts(x: Mapping[str, Any]) -> float:
    """Validate token counts and return their sum.

    Parameters
    ----------
    x
        Token -> count. Counts are non-negative finite ints or floats (``bool``
        counts as 0/1).

    Returns
    -------
    float
        ``Σ_w x_w``.

    Raises
    ------
    InvalidEventError
        ``reason="non_numeric"`` (not a number, or NaN), ``"negative_count"``,
        ``"non_finite"`` or ``"out_of_range"`` (a count beyond
        :data:`~stream_nb.limits.MAX_VALUE`), naming the token.

    Examples
    --------
    >>> check_counts({"a": 2, "b": 0.5})
    2.5
    >>> check_counts({"a": -1})
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.InvalidEventError: token 'a' has negative count -1; ...
    """
    return count_stats(x)[0]


def count_stats(x: Mapping[str, Any]) -> tuple[float, float]:
    """:func:`check_counts` that also returns the smallest count (0 for an empty ``x``).

    Examples
    --------
    >>> count_stats({"a": 2, "b": 1})
    (3, 1)
    """
    if not x:
        return 0.0, 0.0
    values = x.values()
    total = smallest = None
    try:
        total = sum(values)
        smallest = min(values)
        if (
            total <= MAX_VALUE  # (so is every count: each is at most the sum)
            and smallest >= 0
            and (type(total) in (int, float) or isinstance(total, Real))
        ):
            return total, smallest
    except (TypeError, OverflowError):  # (a float plus an int past the double range)
        pass
    error = _bad_count(x)
    if error is not None:
        raise error
    return total, smallest  # type: ignore[return-value] # (a sum beyond MAX_VALUE)


def _bad_binary(token: str, value: Any, threshold: float | None) -> InvalidEventError:
    if threshold is None:
        return InvalidEventError(
            f"feature {token!r} has value {value!r}; with binarize=None values must be "
            "True/False or 1/0 (set binarize to a threshold for counts)",
            reason="non_binary",
        )
    return InvalidEventError(
        f"feature {token!r} has value {value!r}; values must be numbers (not NaN) to be "
        f"compared with binarize={threshold!r}",
        reason="non_numeric",
    )


def threshold_on(x: Mapping[str, Any], threshold: float) -> list[str]:
    """Features of ``x`` with value ``> threshold``; raises on non-numeric or NaN values.

    Examples
    --------
    >>> threshold_on({"a": 2, "b": 0, "c": 0.5}, 0.5)
    ['a']
    """
    on: list[str] = []
    append = on.append
    try:
        for token, value in x.items():
            if value > threshold:
                append(token)
            elif not value <= threshold:  # NaN
                raise _bad_binary(token, value, threshold)
    except TypeError:
        for token, value in x.items():
            try:
                value > threshold  # noqa: B015 - find the incomparable value
            except TypeError:
                raise _bad_binary(token, value, threshold) from None
        raise  # pragma: no cover
    return on


def binary_on(x: Mapping[str, Any]) -> list[str]:
    """Features of ``x`` whose value is ``True``/``1``; any value other than 0/1 raises.

    Examples
    --------
    >>> binary_on({"a": True, "b": 0, "c": 1})
    ['a', 'c']
    """
    on: list[str] = []
    append = on.append
    for token, value in x.items():
        if value == 1:
            append(token)
        elif value != 0:
            raise _bad_binary(token, value, None)
    return on
