"""Event validation shared by the text learners (multinomial, Bernoulli, complement).

The checks run before any statistic is touched, so a rejected event leaves the
model unchanged. The fast path is two C-level passes (``sum`` and ``min``); the
offending token is searched for only when they fail.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from numbers import Real
from typing import Any

from stream_nb._exceptions import InvalidEventError
from stream_nb._state import pairs
from stream_nb._stores import add_scaled, rescale, tree_from_pairs, tree_to_pairs
from stream_nb.base import Learner

__all__ = ["binary_on", "check_counts", "count_stats", "threshold_on"]

_INF = math.inf


def _bad_count(x: Mapping[str, Any]) -> InvalidEventError:
    """The error for the first token of ``x`` whose count is not a valid count."""
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
        ``reason="non_numeric"`` (not a number, or NaN), ``"negative_count"`` or
        ``"non_finite"``, naming the token.

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
    try:
        total = sum(values)
        smallest = min(values)
        if (
            total < _INF
            and smallest >= 0
            and (type(total) in (int, float) or isinstance(total, Real))
        ):
            return total, smallest
    except TypeError:
        pass
    raise _bad_count(x)


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


class _TokenLearner(Learner):
    """Statistics shared by the token learners: class weights and dense count rows.

    ``_counts[token]`` is a list of raw weights indexed by class (``_index``,
    in order of first appearance); a row is only as long as the highest class
    index that touched the token, missing entries are 0. Subclasses keep
    per-class totals in ``_class_extra`` (name -> label -> raw weight) and
    derived caches, rebuilt by :meth:`_rebuild` after a merge, a rescale or a
    load (caches are never read from a state).
    """

    _EXTRA: tuple[str, ...] = ()

    def __init__(self, *, half_life: float | None = None) -> None:
        super().__init__(half_life=half_life)
        self._class_weight: dict[Hashable, float] = {}  # N_y, in order of first appearance
        self._total_weight = 0.0  # N
        self._index: dict[Hashable, int] = {}  # label -> class index k
        self._counts: dict[str, list[float]] = {}
        self._class_extra: dict[str, dict[Hashable, float]] = {name: {} for name in self._EXTRA}

    def _add_weight(self, y: Hashable, w: float) -> int:
        """Add ``w`` to ``N_y`` and ``N``; return the class index of ``y``."""
        class_weight = self._class_weight
        k = self._index.get(y)
        if k is None:
            k = self._index[y] = len(class_weight)
            class_weight[y] = w
            for extra in self._class_extra.values():
                extra[y] = 0.0
        else:
            class_weight[y] += w
        self._total_weight += w
        return k

    def _rebuild(self) -> None:
        """Recompute derived caches from the raw statistics."""

    # ------------------------------------------------------------------ sparse views
    def _sparse_counts(self) -> dict[str, dict[Hashable, float]]:
        labels = list(self._class_weight)
        return {
            token: {labels[k]: n for k, n in enumerate(row) if n}
            for token, row in self._counts.items()
        }

    def _load(
        self,
        class_weight: dict[Hashable, float],
        total_weight: float,
        extra: Mapping[str, Mapping[Hashable, float]],
        counts: Mapping[str, Mapping[Hashable, float]],
    ) -> None:
        """Set the raw statistics from sparse form and rebuild everything derived."""
        index = {y: k for k, y in enumerate(class_weight)}
        dense: dict[str, list[float]] = {}
        for token, by_class in counts.items():
            unknown = by_class.keys() - index.keys()
            if unknown:
                raise ValueError(f"counts of token {token!r} name unknown classes {unknown!r}")
            row = [0.0] * (max((index[y] for y in by_class), default=-1) + 1)
            for y, n in by_class.items():
                if n < 0:
                    raise ValueError(f"count of token {token!r} in class {y!r} is negative: {n!r}")
                row[index[y]] = n
            dense[token] = row
        self._class_extra = {
            name: {y: float(extra[name].get(y, 0.0)) for y in class_weight} for name in self._EXTRA
        }
        self._class_weight = class_weight
        self._total_weight = total_weight
        self._index = index
        self._set_rows(dense)
        self._rebuild()

    def _set_rows(self, dense: dict[str, list[float]]) -> None:
        """Install plain count rows (a subclass may store them in another layout)."""
        self._counts = dense

    # ------------------------------------------------------------------ Learner hooks
    def _merge(self, other: Any, factor: float) -> None:
        class_weight = dict(self._class_weight)
        add_scaled(class_weight, other._class_weight, factor)
        extra = {name: dict(self._class_extra[name]) for name in self._EXTRA}
        for name in self._EXTRA:
            add_scaled(extra[name], other._class_extra[name], factor)
        counts = self._sparse_counts()
        add_scaled(counts, other._sparse_counts(), factor)
        total = self._total_weight + other._total_weight * factor
        self._load(class_weight, total, extra, counts)

    def _rescale(self, factor: float) -> None:
        rescale(self._class_weight, factor)
        self._total_weight *= factor
        for extra in self._class_extra.values():
            rescale(extra, factor)
        for row in self._counts.values():
            row[:] = [n * factor for n in row]
        self._rebuild()

    def _stats_to_state(self) -> dict[str, Any]:
        return {
            "class_weight": pairs(self._class_weight),
            "total_weight": self._total_weight,
            **{name: pairs(self._class_extra[name]) for name in self._EXTRA},
            "counts": tree_to_pairs(self._sparse_counts()),
        }

    def _stats_from_state(self, stats: Mapping[str, Any]) -> None:
        class_weight = tree_from_pairs(stats["class_weight"], depth=1)
        extra = {name: tree_from_pairs(stats[name], depth=1) for name in self._EXTRA}
        for name, values in extra.items():
            if set(values) != set(class_weight):
                raise ValueError(f"{name} and class_weight must name the same classes")
        counts = tree_from_pairs(stats["counts"], depth=2)
        self._load(class_weight, float(stats["total_weight"]), extra, counts)  # type: ignore[arg-type]

    def _size(self) -> tuple[int, int, int]:
        classes = len(self._class_weight)
        stored = classes * (1 + len(self._EXTRA)) + sum(map(len, self._counts.values()))
        return classes, len(self._counts), stored
