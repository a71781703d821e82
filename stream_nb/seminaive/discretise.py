"""Online, mergeable equal-frequency discretisation of numeric features.

Each numeric feature gets its own bins. The first ``warmup`` values of a
feature are kept as a sample; when the sample is full, ``n_bins − 1`` cut
points are placed at its empirical quantiles (equal-frequency binning,
Dougherty, Kohavi & Sahami 1995, "Supervised and unsupervised discretization
of continuous features", ICML) and **frozen**. From then on a value ``v`` maps
to the bin ``bisect_right(edges, v)``, an ``int`` in ``0 … len(edges)``, for
ever, so the counts learned for a bin always mean the same interval. While a
feature's sample is filling, :meth:`Discretiser.learn_value` returns ``None``;
the semi-naive learners buffer those events and replay the values once the
cut points freeze, so the counts end up exactly as if the bins had been known
from the first event.

If the sample holds at most ``n_bins`` distinct values (integers coding
categories, flags), every distinct value gets its own bin: the cut points are
the midpoints between consecutive distinct values. Otherwise cut point ``q``
is the midpoint between the order statistics either side of rank
``q·n/n_bins``; repeated cut points (ties) are dropped.

Merging two discretisers (see :meth:`Discretiser.merge`): frozen edges must be
equal (pass ``bin_edges`` to fix them up front on every shard); a feature
frozen on one side only takes those edges; two warm-up samples are
concatenated and frozen if they reach ``warmup`` values.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_right
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from stream_nb._exceptions import ConfigError, IncompatibleModelError
from stream_nb._state import from_pairs, pairs

__all__ = ["Discretiser", "check_bin_edges", "equal_frequency_edges"]


def equal_frequency_edges(sample: Sequence[float], n_bins: int) -> list[float]:
    """Cut points splitting ``sample`` into ``n_bins`` bins of equal frequency.

    Parameters
    ----------
    sample
        Finite numbers, in any order.
    n_bins
        Number of bins wanted (at least 2).

    Returns
    -------
    list of float
        Strictly increasing cut points, at most ``n_bins − 1`` of them.

    Examples
    --------
    >>> equal_frequency_edges([0, 1, 1, 0, 1], n_bins=10)
    [0.5]
    >>> equal_frequency_edges(list(range(100)), n_bins=4)
    [24.5, 49.5, 74.5]
    """
    s = sorted(sample)
    distinct = sorted(set(s))
    if len(distinct) <= n_bins:
        return [(a + b) / 2.0 for a, b in itertools.pairwise(distinct)]
    n = len(s)
    edges: list[float] = []
    for q in range(1, n_bins):
        rank = (q * n) // n_bins
        lo, hi = s[rank - 1], s[rank]
        if lo == hi:
            continue  # a tie straddles the quantile: no cut inside equal values
        edge = (lo + hi) / 2.0
        if not edges or edge > edges[-1]:
            edges.append(edge)
    return edges


def check_bin_edges(bin_edges: Any) -> dict[Hashable, list[float]] | None:
    """Validate the ``bin_edges`` parameter: feature -> strictly increasing finite cut points."""
    if bin_edges is None:
        return None
    if not isinstance(bin_edges, Mapping):
        raise ConfigError(
            f"bin_edges must be a mapping feature -> list of cut points, got {bin_edges!r}"
        )
    out: dict[Hashable, list[float]] = {}
    for feature, edges in bin_edges.items():
        if not isinstance(edges, (list, tuple)) or not edges:
            raise ConfigError(
                f"bin_edges[{feature!r}] must be a non-empty list of numbers, got {edges!r}"
            )
        values: list[float] = []
        for e in edges:
            if isinstance(e, bool) or not isinstance(e, (int, float)) or not math.isfinite(e):
                raise ConfigError(f"bin_edges[{feature!r}] holds {e!r}; use finite numbers")
            values.append(float(e))
        if any(b <= a for a, b in itertools.pairwise(values)):
            raise ConfigError(
                f"bin_edges[{feature!r}] must be strictly increasing, got {edges!r}; sort them "
                "and drop duplicates"
            )
        out[feature] = values
    return out


class Discretiser:
    """Per-feature equal-frequency bins, learned from a warm-up sample then frozen.

    Parameters
    ----------
    n_bins
        Bins per numeric feature (at most; fewer when the warm-up sample has ties).
    warmup
        Values of a feature sampled before its cut points are frozen.
    bin_edges
        Cut points fixed up front for some features (never learned).

    Examples
    --------
    >>> d = Discretiser(n_bins=2, warmup=4)
    >>> [d.learn_value("t", v) for v in (1.0, 2.0, 3.0, 4.0)]  # warm-up: missing
    [None, None, None, None]
    >>> d.edges["t"]
    [2.5]
    >>> d.learn_value("t", 2.0), d.bin_value("t", 9.0)
    (0, 1)
    """

    __slots__ = ("edges", "n_bins", "samples", "warmup")

    def __init__(
        self,
        n_bins: int = 10,
        warmup: int = 100,
        bin_edges: Mapping[Hashable, Sequence[float]] | None = None,
    ) -> None:
        self.n_bins = n_bins
        self.warmup = warmup
        self.edges: dict[Hashable, list[float]] = {f: list(e) for f, e in (bin_edges or {}).items()}
        self.samples: dict[Hashable, list[float]] = {}

    def learn_value(self, feature: Hashable, value: float) -> int | None:
        """Bin of ``value`` while learning; ``None`` (missing) during the warm-up."""
        edges = self.edges.get(feature)
        if edges is not None:
            return bisect_right(edges, value)
        sample = self.samples.get(feature)
        if sample is None:
            sample = self.samples[feature] = []
        sample.append(value)
        if len(sample) >= self.warmup:
            self._freeze(feature)
        return None

    def bin_value(self, feature: Hashable, value: float) -> int | None:
        """Bin of ``value`` for prediction (never changes the discretiser)."""
        edges = self.edges.get(feature)
        return None if edges is None else bisect_right(edges, value)

    def _freeze(self, feature: Hashable) -> None:
        self.edges[feature] = equal_frequency_edges(self.samples.pop(feature), self.n_bins)

    def merge(self, other: Discretiser) -> None:
        """Combine ``other`` into this discretiser (see the module docstring).

        Raises
        ------
        IncompatibleModelError
            If a feature is frozen on both sides with different cut points.
        """
        for feature, edges in other.edges.items():  # validate everything before changing
            mine = self.edges.get(feature)
            if mine is not None and mine != edges:
                raise IncompatibleModelError(
                    f"cannot merge: numeric feature {feature!r} has bins {mine} here and "
                    f"{edges} in the other model; fix them on every shard with "
                    "bin_edges={feature: [...]}"
                )
        for feature, edges in other.edges.items():
            if feature not in self.edges:
                self.edges[feature] = list(edges)
                self.samples.pop(feature, None)
        for feature, sample in other.samples.items():
            if feature in self.edges:
                continue
            mine_sample = self.samples.setdefault(feature, [])
            mine_sample.extend(sample[: max(0, self.warmup - len(mine_sample))])
            if len(mine_sample) >= self.warmup:
                self._freeze(feature)

    def to_state(self) -> dict[str, Any]:
        """Edges and warm-up samples as JSON-able pair lists."""
        return {"edges": pairs(self.edges), "samples": pairs(self.samples)}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Inverse of :meth:`to_state`."""
        edges = from_pairs(state["edges"])
        samples = from_pairs(state["samples"])
        for name, table in (("edges", edges), ("samples", samples)):
            for feature, values in table.items():
                if not isinstance(values, list) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                    for v in values
                ):
                    raise ValueError(f"discretiser {name} of {feature!r} must be finite numbers")
        self.edges = {f: [float(v) for v in e] for f, e in edges.items()}
        self.samples = {f: [float(v) for v in s] for f, s in samples.items()}

    def size(self) -> int:
        """Numbers held (cut points and samples)."""
        return sum(map(len, self.edges.values())) + sum(map(len, self.samples.values()))
