"""The binned numeric features of :class:`~stream_nb.naive_bayes.mixed.NaiveBayes`.

A feature of kind ``"bins"`` maps each number to a bin index
``bisect_right(edges, value)`` (an ``int`` in ``0 … len(edges)``) that
NaiveBayes learns and scores as a categorical value. Its cut points come from
``bin_edges`` (fixed from the start), or are placed by a
:class:`~stream_nb.seminaive.discretise.Discretiser` on the feature's first
values, up to a total weight of ``warmup`` (``strategy`` ``"frequency"`` or
``"width"``), then frozen.

While a feature warms up, NaiveBayes models it by its Gaussian (it is one
more Gaussian feature, scored and learned as such) and this component keeps
a record ``(value, label, raw weight)`` of every value learned. When the
cut points freeze, NaiveBayes drops the feature's Gaussian statistics and
replays the records, in order, into its categorical counts as bins: from
then on the model is exactly the model that was given those cut points as
``bin_edges`` from its first event.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb._exceptions import ConfigError, IncompatibleModelError, ModelStateError
from stream_nb._state import (
    encode_key,
    read_count,
    read_finite,
    read_key,
    read_label,
    read_list,
    read_mapping,
)
from stream_nb.limits import MAX_VALUE
from stream_nb.seminaive.discretise import Discretiser, check_bin_edges, check_strategy

__all__ = ["NumericBins", "Record", "binned_column", "check_bin_params"]

_NUMBERS = frozenset((int, float))

#: One value learned while its feature warms up: ``(value, label, raw weight)``.
Record = tuple[float, Hashable, float]


def check_bin_params(
    bin_edges: Any, n_bins: Any, warmup: Any, strategy: Any
) -> tuple[dict[Hashable, list[float]] | None, int, int, str]:
    """The binning parameters of NaiveBayes, checked.

    Examples
    --------
    >>> check_bin_params({"a": [1, 2]}, 5, 50, "width")
    ({'a': [1.0, 2.0]}, 5, 50, 'width')
    >>> check_bin_params(None, 1, 50, "width")
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ConfigError: n_bins must be an integer >= 2, got 1
    """
    for name, value, low in (("n_bins", n_bins, 2), ("warmup", warmup, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
    return check_bin_edges(bin_edges), n_bins, warmup, check_strategy(strategy)


def binned_column(edges: Sequence[float], column: Sequence[Any]) -> list[Any] | None:
    """The bins of a batch's values of one binned feature (``None`` stays a missing
    value), as :meth:`NumericBins.bin` of :func:`~stream_nb.limits.check_number` gives
    them one at a time; ``None`` when a value is not an ``int`` or ``float`` within
    ``±MAX_VALUE`` (the per-event path rejects its event; ±MAX_VALUE itself is left
    to it too).

    Examples
    --------
    >>> binned_column([1.0, 2.0], [0.5, 1, None, 2.5, 2.0])
    [0, 1, None, 2, 2]
    """
    types = set(map(type, column))
    missing = type(None) in types
    if not _NUMBERS.issuperset(types - {type(None)}):
        return None  # (bool, str …: the per-event path names the value)
    present = [v for v in column if v is not None] if missing else column
    try:  # (each value through float(), as check_number converts it)
        values = np.fromiter(present, np.float64, len(present))
    except OverflowError:
        return None  # an int beyond the double range
    if not (np.abs(values) < MAX_VALUE).all():
        return None  # NaN, ±inf or out of range (an int just past it may round to it)
    codes: list[Any] = np.searchsorted(
        np.asarray(edges, dtype=np.float64), values, "right"
    ).tolist()
    if not missing:
        return codes
    found = iter(codes)
    return [None if v is None else next(found) for v in column]


class NumericBins:
    """Cut points of the binned features and the records of those warming up.

    Parameters
    ----------
    n_bins, warmup, bin_edges, strategy
        As :class:`~stream_nb.seminaive.discretise.Discretiser`.

    Examples
    --------
    >>> bins = NumericBins(n_bins=2, warmup=3, bin_edges=None, strategy="width")
    >>> [bins.warm("t", v, "a", 1.0, 1.0) for v in (0.0, 4.0, 1.0)]
    [False, False, True]
    >>> bins.edges("t"), bins.take("t"), bins.bin("t", 3.0)
    ([2.0], [(0.0, 'a', 1.0), (4.0, 'a', 1.0), (1.0, 'a', 1.0)], 1)
    """

    __slots__ = ("discretiser", "records")

    def __init__(
        self,
        *,
        n_bins: int,
        warmup: int,
        bin_edges: Mapping[Hashable, Sequence[float]] | None,
        strategy: str,
    ) -> None:
        self.discretiser = Discretiser(n_bins, warmup, bin_edges, strategy)
        self.records: dict[Hashable, list[Record]] = {}

    def frozen(self, feature: Hashable) -> bool:
        """Whether ``feature``'s cut points are known (fixed or frozen)."""
        return feature in self.discretiser.edges

    def edges(self, feature: Hashable) -> list[float]:
        return self.discretiser.edges[feature]

    def bin(self, feature: Hashable, value: float) -> int:
        """The bin of ``value`` (the feature's cut points are known)."""
        return bisect_right(self.discretiser.edges[feature], value)

    def warm(self, feature: Hashable, value: float, y: Hashable, raw: float, true: float) -> bool:
        """Record ``value`` of a warming feature (``raw``: its weight in the model's raw
        units, ``true``: its weight now, which counts towards ``warmup``); ``True``
        when the cut points froze with it (then :meth:`take` the records)."""
        self.records.setdefault(feature, []).append((value, y, raw))
        self.discretiser.learn_value(feature, value, true)
        return feature in self.discretiser.edges

    def take(self, feature: Hashable) -> list[Record]:
        """Remove and return the records of ``feature``."""
        return self.records.pop(feature, [])

    def freeze(self, feature: Hashable, edges: Sequence[float]) -> None:
        """Fix ``feature``'s cut points (another model froze them first)."""
        self.discretiser.edges[feature] = list(edges)
        self.discretiser.samples.pop(feature, None)

    def check_merge(self, other: NumericBins) -> None:
        """Raise :class:`~stream_nb.IncompatibleModelError` when a feature is frozen on both
        sides with different cut points (before anything changes)."""
        for feature, edges in other.discretiser.edges.items():
            mine = self.discretiser.edges.get(feature)
            if mine is not None and mine != edges:
                raise IncompatibleModelError(
                    f"cannot merge: binned feature {feature!r} has cut points {mine} here and "
                    f"{edges} in the other model; fix them in both with "
                    "bin_edges={feature: [...]}"
                )

    def rescale(self, factor: float) -> None:
        """Scale the records' raw weights (the model renormalised its forgetting scale)."""
        self.records = {
            f: [(v, y, w * factor) for v, y, w in recs] for f, recs in self.records.items()
        }

    def to_state(self) -> dict[str, Any]:
        return {
            "discretiser": self.discretiser.to_state(),
            "records": [
                [encode_key(f), [[encode_key(v), encode_key(y), w] for v, y, w in recs]]
                for f, recs in self.records.items()
            ],
        }

    def load_state(self, state: Any, where: str) -> None:
        """Inverse of :meth:`to_state`, checked: a feature has records only while it warms up."""
        state = read_mapping(state, where, ("discretiser", "records"))
        self.discretiser.load_state(state["discretiser"], f"{where}.discretiser")
        records: dict[Hashable, list[Record]] = {}
        for e, entry in enumerate(read_list(state["records"], f"{where}.records")):
            at = f"{where}.records[{e}]"
            feature, recs = read_list(entry, at, 2)
            feature = read_key(feature, f"{at}[0]")
            if feature in records or feature in self.discretiser.edges:
                raise ModelStateError(f"{at}[0]: {feature!r} is listed twice or already binned")
            out = []
            for i, rec in enumerate(read_list(recs, f"{at}[1]")):
                v, y, w = read_list(rec, f"{at}[1][{i}]", 3)
                out.append(
                    (
                        read_finite(read_key(v, f"{at}[1][{i}][0]"), f"{at}[1][{i}][0]"),
                        read_label(y, f"{at}[1][{i}][1]"),
                        read_count(w, f"{at}[1][{i}][2]", positive=True),
                    )
                )
            records[feature] = out
        self.records = records

    def size(self) -> int:
        return self.discretiser.size() + sum(3 * len(r) for r in self.records.values())
