"""Experiment: do Gaussian numeric children help AODE over discretised ones?

An open design question: should numeric *children* use a Gaussian
``p(x_j | y, x_i)`` per (class, parent value) instead of the discretised
categorical estimate. This script measures it; it is not part of the library
(the default stays whichever wins here)::

    python -m benchmarks.experiment_gaussian_children

Variant ``AODE+gauss``: identical to :class:`stream_nb.AODE` (same discretised
parents, same categorical children) except that each numeric child ``j`` of
parent ``x_i`` contributes ``log N(x_j; μ, σ²)`` with Welford statistics of
``x_j`` over the class-``y`` events with that parent value, σ² = M2/n +
``1e-9 × (variance of x_j over all events)``; cells with fewer than 2 events
use the class-conditional Gaussian of ``x_j``; if that has fewer than 2
events too, the discretised term is used. Both variants see the same events
prequentially.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Mapping
from typing import Any

from stream_nb import AODE
from stream_nb.datasets import agrawal, mixed_stream

_LOG_2PI = math.log(2 * math.pi)
#: variance floor relative to the feature's overall variance (sklearn's var_smoothing)
_VAR_SMOOTHING = 1e-9


class _Welford:
    __slots__ = ("m2", "mean", "n")

    def __init__(self) -> None:
        self.n = 0.0
        self.mean = 0.0
        self.m2 = 0.0

    def add(self, v: float, w: float) -> None:
        self.n += w
        d = v - self.mean
        self.mean += d * w / self.n
        self.m2 += w * d * (v - self.mean)

    def log_pdf(self, v: float, floor: float) -> float:
        var = self.m2 / self.n + floor
        return -0.5 * (_LOG_2PI + math.log(var) + (v - self.mean) ** 2 / var)


def _numeric(v: Any) -> bool:
    return (type(v) is float or type(v) is int) and v == v


class GaussianChildAODE(AODE):
    """AODE whose numeric children are Gaussian per (class, parent value) (experiment only)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cell: dict[tuple[Hashable, Hashable, Hashable], dict[Hashable, _Welford]] = {}
        self._marg: dict[Hashable, dict[Hashable, _Welford]] = {}
        self._all: dict[Hashable, _Welford] = {}

    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        super()._learn(x, y, w)
        items = self._encode(x, False)
        for j, v in x.items():
            if not _numeric(v):
                continue
            self._all.setdefault(j, _Welford()).add(v, w)
            self._marg.setdefault(j, {}).setdefault(y, _Welford()).add(v, w)
            for i, vi in items:
                if i != j:
                    self._cell.setdefault((i, vi, j), {}).setdefault(y, _Welford()).add(v, w)

    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        store = self._store
        class_weight = store.categorical.class_weight
        if not class_weight:
            return {}
        items = self._encode(x, False)
        threshold = self._raw_threshold()
        vw = store.value_weight
        parents = [it for it in items if it[0] in vw and vw[it[0]].get(it[1], 0.0) >= threshold]
        if not parents:
            return self._fallback(items)
        a = self.alpha / self._scale
        classes = list(class_weight)
        numeric = {j: v for j, v in x.items() if _numeric(v) and j in self._marg}
        children = [c for c in self._children(items, a) if c[0] not in numeric]
        chunk = self._safe_chunk(a, children)
        scores = []
        for p in parents:
            s = self._spode(p, children, classes, a, chunk)
            for j, v in numeric.items():
                if j == p[0]:
                    continue
                floor = _VAR_SMOOTHING * max(self._all[j].m2 / self._all[j].n, 1e-300)
                cell = self._cell.get((p[0], p[1], j), {})
                for k, y in enumerate(classes):
                    st = cell.get(y)
                    if st is None or st.n < 2:
                        st = self._marg[j].get(y)
                    if st is not None and st.n >= 2:
                        s[k] += st.log_pdf(v, floor)
            scores.append(s)
        out = {}
        for k, y in enumerate(classes):
            col = [s[k] for s in scores]
            m = max(col)
            out[y] = m + math.log(sum(math.exp(c - m) for c in col))
        return out


def prequential(model: AODE, events: list[tuple[dict[str, Any], Any]]) -> float:
    hits = 0
    for x, y in events:
        hits += model.predict_one(x) == y
        model.learn_one(x, y)
    return hits / len(events)


def main() -> None:
    from river.datasets import synth

    streams = {
        "river Agrawal F2": list(synth.Agrawal(classification_function=2, seed=3).take(3000)),
        "river Agrawal F5": list(synth.Agrawal(classification_function=5, seed=3).take(3000)),
        "stream-nb agrawal F2": list(agrawal(seed=3, n=3000, function=2, nominal=False)),
        "stream-nb mixed": list(mixed_stream(seed=4, n=3000, classes=3)),
    }
    print("| stream | AODE (discretised children) | AODE+gauss children | seconds |")
    print("|---|---:|---:|---:|")
    for name, events in streams.items():
        start = time.perf_counter()
        base = prequential(AODE(), events)
        gauss = prequential(GaussianChildAODE(), events)
        print(f"| {name} | {base:.3f} | {gauss:.3f} | {time.perf_counter() - start:.0f} |")


if __name__ == "__main__":
    main()
