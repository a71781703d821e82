"""The streams of the accuracy benchmark (``python -m benchmarks.bench_accuracy``).

Every stream is a list of ``(x, y)`` events built once, in a fixed order, and
given to every model in that order. Feature names are strings (river's
generators name features 0, 1, …: they become ``"0"``, ``"1"``, …); values
are as the data set gives them (numbers), except the ``led-categories``
variant, whose 0/1 segments are the strings ``"0"``/``"1"``.

* river's data sets that ship inside the package (no download): Phishing,
  ImageSegments, Bananas and Shuttle, in the order river yields them.
* scikit-learn's bundled data sets iris, wine, breast_cancer and digits, in the
  order ``numpy.random.default_rng(SKLEARN_ORDER_SEED).permutation(n)``.
* river's generators, ``seed=SYNTHETIC_SEED``, ``n`` events each (20,000 by
  default): SEA, Hyperplane, RandomRBF and Agrawal F0–F9 with river's default
  parameters, LED with 10 % noise and the 17 irrelevant segments (24 features),
  and two concept drifts from Agrawal F0 to Agrawal F1 centred on event
  ``n / 2``: ``drift-abrupt`` (width 100) and ``drift-gradual`` (width ``n / 4``).
  river's ``ConceptDriftStream`` overflows ``math.exp`` for a width below
  ``4 · position / 709`` (57 events at position 10,000), so the abrupt drift
  takes 100.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from itertools import islice
from numbers import Real
from typing import Any

__all__ = [
    "DISCRETE_MAX_VALUES",
    "SKLEARN_ORDER_SEED",
    "STREAMS",
    "SYNTHETIC_SEED",
    "Event",
    "Stream",
    "StreamSpec",
    "load_streams",
]

Event = tuple[dict[str, Any], Hashable]

#: Seed of every river generator (and of ``ConceptDriftStream``'s choices).
SYNTHETIC_SEED = 42
#: Seed of the fixed shuffled order of scikit-learn's bundled data sets.
SKLEARN_ORDER_SEED = 0
#: A stream is *discrete* (CategoricalNB applies to its raw values) when every
#: feature takes at most this many distinct values over the whole stream.
DISCRETE_MAX_VALUES = 20
#: Events between the centre of a drift and the drift's width, per event of the
#: stream: the gradual drift is a quarter of the stream wide.
_GRADUAL_WIDTH_SHARE = 0.25
#: Width of the abrupt drift (river overflows below about 57 at position 10,000).
_ABRUPT_WIDTH = 100


def _is_number(value: Any) -> bool:
    return value.__class__ is not bool and isinstance(value, Real)


@dataclasses.dataclass(frozen=True)
class Stream:
    """One stream of the benchmark, its events built.

    Attributes
    ----------
    name
        Identifier used on the command line and in the results.
    group
        ``"river data"``, ``"scikit-learn data"``, ``"synthetic"`` or ``"drift"``.
    source
        How the events were made, for the results' legend.
    events
        The events, in the order every model sees them.
    """

    name: str
    group: str
    source: str
    events: Sequence[Event]

    @functools.cached_property
    def labels(self) -> list[Hashable]:
        """The distinct labels, in order of first appearance."""
        return list(dict.fromkeys(y for _x, y in self.events))

    @functools.cached_property
    def features(self) -> list[str]:
        """The feature names, in order of first appearance."""
        return list(dict.fromkeys(f for x, _y in self.events for f in x))

    @functools.cached_property
    def numeric(self) -> bool:
        """Every value is a number (int or float, not bool)."""
        return all(_is_number(v) for x, _y in self.events for v in x.values())

    @functools.cached_property
    def has_numeric(self) -> bool:
        """At least one value is a number."""
        return any(_is_number(v) for x, _y in self.events for v in x.values())

    @functools.cached_property
    def counts(self) -> bool:
        """Every value is a whole number ≥ 0 (token counts, pixels, 0/1 flags)."""
        return all(
            _is_number(v) and v >= 0 and float(v).is_integer()
            for x, _y in self.events
            for v in x.values()
        )

    @functools.cached_property
    def discrete(self) -> bool:
        """Every feature takes at most :data:`DISCRETE_MAX_VALUES` distinct values."""
        seen: dict[str, set[Any]] = {}
        for x, _y in self.events:
            for f, v in x.items():
                values = seen.setdefault(f, set())
                values.add(v)
                if len(values) > DISCRETE_MAX_VALUES:
                    return False
        return True

    @property
    def drift(self) -> bool:
        return self.group == "drift"


@dataclasses.dataclass(frozen=True)
class StreamSpec:
    """How to build a stream: ``load(n)`` returns its first ``n`` events (all of a
    data set when ``n`` is ``None``)."""

    name: str
    group: str
    source: str
    load: Callable[[int | None], list[Event]]

    def build(self, n: int | None) -> Stream:
        return Stream(self.name, self.group, self.source, self.load(n))


def _named(events: Iterable[tuple[dict[Any, Any], Hashable]], n: int | None) -> list[Event]:
    """The first ``n`` events with string feature names (values unchanged)."""
    return [({str(f): v for f, v in x.items()}, y) for x, y in islice(events, n)]


def _river_data(cls_name: str) -> Callable[[int | None], list[Event]]:
    def load(n: int | None) -> list[Event]:
        from river import datasets

        return _named(getattr(datasets, cls_name)(), n)

    return load


def _sklearn_data(loader: str) -> Callable[[int | None], list[Event]]:
    def load(n: int | None) -> list[Event]:
        import numpy as np
        from sklearn import datasets

        bunch = getattr(datasets, loader)()
        names = [str(name) for name in bunch.feature_names]
        order = np.random.default_rng(SKLEARN_ORDER_SEED).permutation(len(bunch.target))
        events = (
            ({name: float(bunch.data[i, j]) for j, name in enumerate(names)}, int(bunch.target[i]))
            for i in order
        )
        return _named(events, n)

    return load


def _synthetic(
    make: Callable[[], Iterable[tuple[dict[Any, Any], Hashable]]],
) -> Callable[[int | None], list[Event]]:
    def load(n: int | None) -> list[Event]:
        if n is None:
            raise ValueError("a synthetic stream needs a length")
        return _named(make(), n)

    return load


def _led(categories: bool) -> Callable[[int | None], list[Event]]:
    def load(n: int | None) -> list[Event]:
        from river.datasets import synth

        if n is None:
            raise ValueError("a synthetic stream needs a length")
        stream = synth.LED(seed=SYNTHETIC_SEED, noise_percentage=0.1, irrelevant_features=True)
        events = _named(stream, n)
        if categories:
            return [({f: str(v) for f, v in x.items()}, y) for x, y in events]
        return events

    return load


def _agrawal(function: int) -> Callable[[int | None], list[Event]]:
    def make() -> Iterable[tuple[dict[Any, Any], Hashable]]:
        from river.datasets import synth

        return synth.Agrawal(classification_function=function, seed=SYNTHETIC_SEED)

    return _synthetic(make)


def _drift(gradual: bool) -> Callable[[int | None], list[Event]]:
    def load(n: int | None) -> list[Event]:
        from river.datasets import synth

        if n is None:
            raise ValueError("a synthetic stream needs a length")
        width = (
            max(_ABRUPT_WIDTH, math.ceil(n * _GRADUAL_WIDTH_SHARE)) if gradual else _ABRUPT_WIDTH
        )
        stream = synth.ConceptDriftStream(
            stream=synth.Agrawal(classification_function=0, seed=SYNTHETIC_SEED),
            drift_stream=synth.Agrawal(classification_function=1, seed=SYNTHETIC_SEED + 1),
            position=n // 2,
            width=width,
            seed=SYNTHETIC_SEED,
        )
        return _named(stream, n)

    return load


def _generator(name: str, **params: Any) -> Callable[[int | None], list[Event]]:
    def make() -> Iterable[tuple[dict[Any, Any], Hashable]]:
        from river.datasets import synth

        generator: Iterable[tuple[dict[Any, Any], Hashable]] = getattr(synth, name)(**params)
        return generator

    return _synthetic(make)


_SEED = f"seed={SYNTHETIC_SEED}"

#: Every stream, in the order of the results.
STREAMS: tuple[StreamSpec, ...] = (
    StreamSpec("phishing", "river data", "river.datasets.Phishing", _river_data("Phishing")),
    StreamSpec(
        "image-segments", "river data", "river.datasets.ImageSegments", _river_data("ImageSegments")
    ),
    StreamSpec("bananas", "river data", "river.datasets.Bananas", _river_data("Bananas")),
    StreamSpec("shuttle", "river data", "river.datasets.Shuttle", _river_data("Shuttle")),
    *(
        StreamSpec(
            name.replace("_", "-"),
            "scikit-learn data",
            f"sklearn.datasets.load_{name}, shuffled (seed {SKLEARN_ORDER_SEED})",
            _sklearn_data(f"load_{name}"),
        )
        for name in ("iris", "wine", "breast_cancer", "digits")
    ),
    StreamSpec("sea", "synthetic", f"synth.SEA({_SEED})", _generator("SEA", seed=SYNTHETIC_SEED)),
    StreamSpec(
        "hyperplane",
        "synthetic",
        f"synth.Hyperplane({_SEED})",
        _generator("Hyperplane", seed=SYNTHETIC_SEED),
    ),
    StreamSpec(
        "random-rbf",
        "synthetic",
        f"synth.RandomRBF(seed_model={SYNTHETIC_SEED}, seed_sample={SYNTHETIC_SEED})",
        _generator("RandomRBF", seed_model=SYNTHETIC_SEED, seed_sample=SYNTHETIC_SEED),
    ),
    StreamSpec(
        "led",
        "synthetic",
        f"synth.LED({_SEED}, noise_percentage=0.1, irrelevant_features=True), 0/1 as numbers",
        _led(categories=False),
    ),
    StreamSpec(
        "led-categories",
        "synthetic",
        "the same LED events, 0/1 as the strings '0'/'1'",
        _led(categories=True),
    ),
    *(
        StreamSpec(
            f"agrawal-f{k}",
            "synthetic",
            f"synth.Agrawal(classification_function={k}, {_SEED})",
            _agrawal(k),
        )
        for k in range(10)
    ),
    StreamSpec(
        "drift-abrupt",
        "drift",
        f"synth.ConceptDriftStream(Agrawal F0 {_SEED} → Agrawal F1 seed={SYNTHETIC_SEED + 1}, "
        f"position=n/2, width={_ABRUPT_WIDTH}, {_SEED})",
        _drift(gradual=False),
    ),
    StreamSpec(
        "drift-gradual",
        "drift",
        f"the same concepts, width=n/4 ({_SEED})",
        _drift(gradual=True),
    ),
)


def load_streams(
    names: Sequence[str] | None, synthetic_events: int, data_events: int | None
) -> list[Stream]:
    """Build the named streams (all when ``names`` is ``None``), in :data:`STREAMS` order.

    ``synthetic_events`` is the length of every generated stream;
    ``data_events`` caps the data sets (``None``: whole).
    """
    specs = STREAMS if names is None else [s for s in STREAMS if s.name in set(names)]
    return [
        spec.build(data_events if spec.group.endswith("data") else synthetic_events)
        for spec in specs
    ]
