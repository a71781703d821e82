"""Online, mergeable equal-frequency or equal-width discretisation of numeric features.

Each numeric feature gets its own bins. The first values of a feature, up to
a total weight of ``warmup``, are kept as a sample; when it is full,
``n_bins − 1`` cut points are placed at its empirical quantiles (``strategy="frequency"``,
the default: equal-frequency binning, Dougherty, Kohavi & Sahami 1995, "Supervised
and unsupervised discretization of continuous features", ICML) or at equal
distances over its range (``strategy="width"``, see :func:`equal_width_edges`) and
**frozen**. From then on a value ``v`` maps
to the bin ``bisect_right(edges, v)``, an ``int`` in ``0 … len(edges)``, for
ever, so the counts learned for a bin always mean the same interval. While a
feature's sample is filling, :meth:`Discretiser.learn_value` returns ``None``;
the semi-naive learners buffer those events and replay the values once the
cut points freeze, so the counts end up exactly as if the bins had been known
from the first event.

If the sample holds at most ``n_bins`` distinct values (integers coding
categories, flags), every distinct value gets its own bin: the cut points are
the midpoints between consecutive distinct values. Otherwise cut point ``q``
is the midpoint between the first distinct value whose cumulative weight
reaches ``q·W/n_bins`` and the next one (see :func:`equal_frequency_edges`);
repeated cut points (ties) are dropped.

Samples are weighted: a value learned with weight ``w`` counts ``w`` towards
``warmup`` and ``w`` times in the quantiles, so ``w=2`` equals learning the
value twice.

Merging two discretisers (see :meth:`Discretiser.merge`): frozen edges must be
equal (pass ``bin_edges`` to fix them up front on every shard); a feature
frozen on one side only takes those edges; two warm-up samples are
concatenated (ours first) until their weight reaches ``warmup``, then frozen.
"""

from __future__ import annotations

import itertools
import math
import sys
from bisect import bisect_right
from collections.abc import Container, Hashable, Mapping, Sequence
from typing import Any

from stream_nb._exceptions import ConfigError, IncompatibleModelError, ModelStateError
from stream_nb._state import (
    encode_key,
    pairs,
    read_count,
    read_finite,
    read_key,
    read_list,
    read_mapping,
    read_pairs,
)
from stream_nb.limits import value_out_of_range

__all__ = [
    "STRATEGIES",
    "Discretiser",
    "check_bin_edges",
    "check_binnable",
    "check_strategy",
    "equal_frequency_edges",
    "equal_width_edges",
    "midpoint",
]

#: The ways cut points are placed on a warm-up sample.
STRATEGIES = ("frequency", "width")

#: Relative slack when a cumulative weight is compared with a quantile target,
#: so that sums of unit weights that should hit the target exactly do.
_CUT_TOLERANCE = 1e-12

#: Largest magnitude of a value that can be binned: cut points are doubles, so an
#: ``int`` beyond the double range could not have one on its side.
_MAX_BINNABLE = sys.float_info.max


def check_binnable(feature: Hashable, value: float) -> None:
    """Raise ``InvalidEventError(reason="out_of_range")`` for an ``int`` beyond the double
    range (every float, and every other int, can be binned).

    Examples
    --------
    >>> check_binnable("n", 10**300)
    >>> check_binnable("n", 10**400)
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.InvalidEventError: feature 'n' has value an integer of 1329 bits, ...
    """
    if value.__class__ is int and not -_MAX_BINNABLE <= value <= _MAX_BINNABLE:
        raise value_out_of_range(feature, value, limit=_MAX_BINNABLE)


def midpoint(a: float, b: float) -> float:
    """``(a + b) / 2`` without overflow, for any two finite numbers within the double range.

    Examples
    --------
    >>> midpoint(1.0, 2.0), midpoint(1.7e308, 1.79e308), midpoint(10**308, 1.5e308)
    (1.5, 1.745e+308, 1.25e+308)
    """
    try:
        m = (a + b) / 2.0
    except OverflowError:  # (an int sum past the double range)
        m = math.inf
    if m - m != 0.0:  # a + b beyond the double range: halve first (exact at that size)
        m = a / 2.0 + b / 2.0
    return m


def equal_frequency_edges(
    sample: Sequence[float], n_bins: int, weights: Sequence[float] | None = None
) -> list[float]:
    """Cut points splitting a (weighted) sample into ``n_bins`` bins of equal weight.

    Distinct values are sorted with their total weight ``W_v`` (1 each by
    default), ``W = Σ W_v``. If there are at most ``n_bins`` of them, the cut
    points are the midpoints between consecutive values. Otherwise cut ``q``
    (``q = 1 … n_bins − 1``) lies midway between the first value whose
    cumulative weight reaches ``q·W/n_bins`` and the next value; repeated
    cuts are dropped. A value of weight 2 therefore counts exactly like the
    same value twice.

    Parameters
    ----------
    sample
        Finite numbers, in any order.
    n_bins
        Number of bins wanted (at least 2).
    weights
        Positive weight of each value (default 1).

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
    >>> equal_frequency_edges([1, 2, 3], n_bins=2, weights=[1, 3, 1])
    [2.5]
    """
    totals: dict[float, float] = {}
    for v, w in zip(sample, weights if weights is not None else [1.0] * len(sample), strict=True):
        totals[v] = totals.get(v, 0.0) + w
    distinct = sorted(totals)
    if len(distinct) <= n_bins:
        return [midpoint(a, b) for a, b in itertools.pairwise(distinct)]
    total = math.fsum(totals.values())
    cumulative = list(itertools.accumulate(totals[v] for v in distinct))
    edges: list[float] = []
    k = 0
    for q in range(1, n_bins):
        target = q * total / n_bins
        while k < len(distinct) - 1 and cumulative[k] < target * (1.0 - _CUT_TOLERANCE):
            k += 1
        if k == len(distinct) - 1:
            break
        edge = midpoint(distinct[k], distinct[k + 1])
        if not edges or edge > edges[-1]:
            edges.append(edge)
    return edges


def equal_width_edges(sample: Sequence[float], n_bins: int) -> list[float]:
    """Cut points splitting the range of a sample into ``n_bins`` bins of equal width.

    With ``lo = min(sample)``, ``hi = max(sample)`` and ``step = (hi − lo) / n_bins``,
    cut ``q`` is ``lo + q·step`` (``q = 1 … n_bins − 1``), computed as
    ``numpy.linspace(lo, hi, n_bins + 1)`` computes its inner points (so these
    are scikit-learn's ``KBinsDiscretizer(strategy="uniform")`` edges). Values
    outside the sample's range fall into the first or the last bin; weights do
    not matter. A sample of one distinct value gives one bin (no cut point).

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
    >>> equal_width_edges([0.0, 10.0, 1.0, 2.0], n_bins=5)
    [2.0, 4.0, 6.0, 8.0]
    >>> equal_width_edges([3, 3, 3], n_bins=4)
    []
    """
    lo, hi = float(min(sample)), float(max(sample))
    step = (hi - lo) / n_bins
    edges: list[float] = []
    for q in range(1, n_bins):
        if step != math.inf:
            edge = q * step + lo
        else:  # a range beyond the largest double: a convex combination stays finite
            edge = lo * ((n_bins - q) / n_bins) + hi * (q / n_bins)
        if lo < edge < hi and (not edges or edge > edges[-1]):
            edges.append(edge)
    return edges


def check_strategy(strategy: Any) -> str:
    """Validate the ``strategy`` parameter: ``"frequency"`` or ``"width"``."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy must be 'frequency' or 'width', got {strategy!r}")
    return str(strategy)


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
    """Per-feature bins, placed on a weighted warm-up sample then frozen.

    Parameters
    ----------
    n_bins
        Bins per numeric feature (at most; fewer when the warm-up sample has ties).
    warmup
        Total sample weight of a feature (events, for unit weights) collected
        before its cut points are frozen. Non-finite values are binned but never
        sampled.
    bin_edges
        Cut points fixed up front for some features (never learned).
    strategy
        ``"frequency"`` (equal-frequency: :func:`equal_frequency_edges`) or
        ``"width"`` (equal-width over the sample's range: :func:`equal_width_edges`).

    Examples
    --------
    >>> d = Discretiser(n_bins=2, warmup=4)
    >>> [d.learn_value("t", v) for v in (1.0, 2.0, 3.0, 4.0)]  # warm-up: no bin yet
    [None, None, None, None]
    >>> d.edges["t"]
    [2.5]
    >>> d.learn_value("t", 2.0), d.bin_value("t", 9.0)
    (0, 1)
    >>> w = Discretiser(n_bins=2, warmup=4, strategy="width")
    >>> [w.learn_value("t", v) for v in (1.0, 2.0, 3.0, 9.0)], w.edges["t"]
    ([None, None, None, None], [5.0])
    """

    __slots__ = ("edges", "n_bins", "samples", "strategy", "warmup")

    def __init__(
        self,
        n_bins: int = 10,
        warmup: int = 100,
        bin_edges: Mapping[Hashable, Sequence[float]] | None = None,
        strategy: str = "frequency",
    ) -> None:
        self.n_bins = n_bins
        self.strategy = check_strategy(strategy)
        # ``math.inf`` after :meth:`defer`: never freeze from the own sample
        self.warmup: float = warmup
        self.edges: dict[Hashable, list[float]] = {f: list(e) for f, e in (bin_edges or {}).items()}
        # feature -> [values, weights, total weight]
        self.samples: dict[Hashable, list[Any]] = {}

    def learn_value(self, feature: Hashable, value: float, weight: float = 1.0) -> int | None:
        """Bin of ``value`` while learning; ``None`` while the feature warms up.

        The value the sample's weight reaches ``warmup`` with is still
        answered ``None``: the cut points freeze right after it.
        """
        edges = self.edges.get(feature)
        if edges is not None:
            return bisect_right(edges, value)
        if value - value != 0.0:  # ±inf: binned once frozen, never sampled
            return None
        sample = self.samples.get(feature)
        if sample is None:
            sample = self.samples[feature] = [[], [], 0.0]
        sample[0].append(value)
        sample[1].append(weight)
        sample[2] += weight
        if sample[2] >= self.warmup * (1.0 - _CUT_TOLERANCE):
            self._freeze(feature)
        return None

    def bin_value(self, feature: Hashable, value: float) -> int | None:
        """Bin of ``value`` for prediction (never changes the discretiser)."""
        edges = self.edges.get(feature)
        return None if edges is None else bisect_right(edges, value)

    def _freeze(self, feature: Hashable) -> None:
        values, weights, _total = self.samples.pop(feature)
        if self.strategy == "width":
            self.edges[feature] = equal_width_edges(values, self.n_bins)
        else:
            self.edges[feature] = equal_frequency_edges(values, self.n_bins, weights)

    def merge(self, other: Discretiser, keep: Container[Hashable] | None = None) -> None:
        """Combine ``other`` into this discretiser (see the module docstring).

        Only ``other``'s features in ``keep`` are taken (all by default).

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
            if feature not in self.edges and (keep is None or feature in keep):
                self.edges[feature] = list(edges)
                self.samples.pop(feature, None)
        for feature, (values, weights, _total) in other.samples.items():
            if feature in self.edges or (keep is not None and feature not in keep):
                continue
            # take the other's values in order until the sample weight reaches warmup,
            # as one model learning both streams would have
            for v, w in zip(values, weights, strict=True):
                if self.learn_value(feature, v, w) is not None or feature in self.edges:
                    break

    def defer(self) -> None:
        """Never freeze cut points from this discretiser's own sample: only a merge brings
        frozen ones (model sync, see :meth:`stream_nb.base.Learner.defer_binning`)."""
        self.warmup = math.inf

    def bin_like(self, other: Discretiser) -> None:
        """Take ``other``'s frozen cut points (for features with none here), then
        :meth:`defer`: a model delta bins as its model does, and leaves values still
        warming up raw, to be binned by the model it is merged into.

        Examples
        --------
        >>> model = Discretiser(n_bins=2, warmup=2, bin_edges={"t": [0.5]})
        >>> delta = Discretiser(n_bins=2, warmup=2)
        >>> delta.bin_like(model)
        >>> delta.learn_value("t", 1.0), [delta.learn_value("u", v) for v in (1.0, 2.0, 3.0)]
        (1, [None, None, None])
        """
        for feature, edges in other.edges.items():
            self.edges.setdefault(feature, list(edges))
        self.defer()

    def to_state(self) -> dict[str, Any]:
        """Edges and warm-up samples as JSON-able pair lists (integers exact)."""
        return {
            "edges": pairs(self.edges),
            "samples": [
                [encode_key(f), [encode_key(v) for v in values], weights]
                for f, (values, weights, _t) in self.samples.items()
            ],
        }

    def load_state(self, state: Any, where: str = "discretiser") -> None:
        """Inverse of :meth:`to_state`, validated: strictly increasing finite cut points,
        finite sample values (integers kept exactly), positive weights, and no
        feature both frozen and warming up."""
        state = read_mapping(state, where, ("edges", "samples"))
        edges = read_pairs(state["edges"], f"{where}.edges", _edges)
        samples: dict[Hashable, list[Any]] = {}
        for e, entry in enumerate(read_list(state["samples"], f"{where}.samples")):
            at = f"{where}.samples[{e}]"
            feature, values, weights = read_list(entry, at, 3)
            feature = read_key(feature, f"{at}[0]")
            if feature in samples or feature in edges:
                raise ModelStateError(f"{at}[0]: feature {feature!r} listed twice")
            vs = [_value(v, f"{at}[1][{i}]") for i, v in enumerate(read_list(values, f"{at}[1]"))]
            ws = [
                read_count(w, f"{at}[2][{i}]", positive=True)
                for i, w in enumerate(read_list(weights, f"{at}[2]", len(vs)))
            ]
            samples[feature] = [vs, ws, math.fsum(ws)]
        self.edges = edges
        self.samples = samples

    def size(self) -> int:
        """Numbers held (cut points and weighted samples)."""
        return sum(map(len, self.edges.values())) + sum(
            2 * len(s[0]) + 1 for s in self.samples.values()
        )


def _value(value: Any, where: str) -> float | int:
    """A sample value: a finite number, an integer kept exactly (tagged when large)."""
    number = read_key(value, where)
    if number.__class__ is int:
        return number
    return read_finite(number, where)


def _edges(value: Any, where: str) -> list[float]:
    edges = [read_finite(v, f"{where}[{i}]") for i, v in enumerate(read_list(value, where))]
    if any(b <= a for a, b in itertools.pairwise(edges)):
        raise ModelStateError(f"{where}: cut points must be strictly increasing, got {edges!r:.80}")
    return edges
