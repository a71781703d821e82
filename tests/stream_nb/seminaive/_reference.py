"""A brute-force reference for the semi-naive scores, recomputed from the raw events.

It shares no code with the learners: every count is a sum over the event list
(decayed with ``half_life``), every formula is written out as in
docs/seminaive.md, including ``alpha = 0`` (zero counts ``-inf``, a ratio whose
conditioning count is 0 at its limit ``1/s``, and the zero-count rule of
stream_nb._mle applied per class, over the SPODEs of a mixture with the fewest).

With ``feature_weights`` every term of feature ``j`` is multiplied by ``w_j``
(the finite part; a zero count stays one, a weight-0 term is left out), a
SPODE's joint term is split as ``P̂_p(y) P̂(x_p | y)`` with ``w_p`` on the second
factor, and a feature of weight 0 is no one's parent. ``pair_limit``: only the
first ``pair_limit`` features learned have pair counts (``max_pair_features``).

:func:`make_stream` and :func:`probes` are the random streams and probes the
tests compare on.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Mapping
from typing import Any

Event = tuple[dict[str, Any], Hashable, float]
#: (sum of finite log terms, number of zero-count terms)
Term = tuple[float, int]


def ratio(num: float, den: float, alpha: float, s: float) -> Term:
    """``log((num + α) / (den + α s))``: with α = 0, ``-inf`` (counted) or ``1/s`` when
    ``den = 0``."""
    if alpha > 0:
        return math.log((num + alpha) / (den + alpha * s)), 0
    if den == 0:
        return -math.log(s), 0
    if num == 0:
        return 0.0, 1
    return math.log(num / den), 0


def add(a: Term, b: Term) -> Term:
    return a[0] + b[0], a[1] + b[1]


def weigh(term: Term, w: float) -> Term:
    """A term times its feature's weight (weight 0: no term at all)."""
    return (w * term[0], term[1]) if w else (0.0, 0)


class Reference:
    """Counts of a weighted event list, and the learners' scores from them."""

    def __init__(
        self,
        events: list[Event],
        alpha: float,
        half_life: float | None = None,
        feature_weights: Mapping[str, float] | None = None,
        pair_limit: int | None = None,
    ) -> None:
        self.fw = feature_weights
        gamma = None if half_life is None else 0.5 ** (1.0 / half_life)
        weights, later = [], 0.0
        for _e, _y, w in reversed(events):
            weights.append(w if gamma is None else w * gamma**later)
            later += w
        self.ev = [
            ({k: v for k, v in e.items() if v is not None}, y, w)
            for (e, y, _), w in zip(events, weights[::-1], strict=True)
        ]
        self.alpha = alpha
        self.classes = list(dict.fromkeys(y for _e, y, _w in self.ev))
        self.values: dict[str, list[Any]] = {}
        for e, _y, _w in self.ev:
            for f, v in e.items():
                self.values.setdefault(f, [])
                if v not in self.values[f]:
                    self.values[f].append(v)
        self.pair = set(list(self.values)[:pair_limit])

    def w(self, f: str) -> float:
        return 1.0 if self.fw is None else self.fw.get(f, 1.0)

    def total(self, pred: Callable[[dict[str, Any], Hashable], bool], since: int = 0) -> float:
        """Weight of the events from index ``since`` on that satisfy ``pred``."""
        return sum(w for e, y, w in self.ev[since:] if pred(e, y))

    def cond(self, j: str, vj: Any, y: Hashable, given: Mapping[str, Any], since: int = 0) -> Term:
        """``P̂(x_j | y, given)`` (counts from event ``since`` on; ``S_j`` from all)."""

        def match(e: dict[str, Any], yy: Hashable) -> bool:
            return yy == y and all(e.get(f) == v for f, v in given.items())

        num = self.total(lambda e, yy: match(e, yy) and e.get(j) == vj, since)
        den = self.total(lambda e, yy: match(e, yy) and j in e, since)
        return ratio(num, den, self.alpha, len(self.values[j]))

    def joint(self, i: str, vi: Any, y: Hashable) -> Term:
        """``P̂(y, x_i)``."""
        num = self.total(lambda e, yy: yy == y and e.get(i) == vi)
        den = self.total(lambda e, _y: i in e)
        return ratio(num, den, self.alpha, len(self.classes) * len(self.values[i]))

    def prior(self, y: Hashable) -> Term:
        num = self.total(lambda _e, yy: yy == y)
        return ratio(num, self.total(lambda _e, _y: True), self.alpha, len(self.classes))

    def known(self, x: Mapping[str, Any]) -> dict[str, Any]:
        return {f: v for f, v in x.items() if v is not None and f in self.values}

    def naive(self, xp: Mapping[str, Any], y: Hashable) -> Term:
        out = self.prior(y)
        for j, vj in xp.items():
            out = add(out, weigh(self.cond(j, vj, y, {}), self.w(j)))
        return out

    def spode(self, xp: Mapping[str, Any], i: str, y: Hashable) -> Term:
        if self.fw is None:
            out = self.joint(i, xp[i], y)
        else:  # P̂_i(y) P̂(x_i | y), the second factor weighted
            n_y = self.total(lambda e, yy: yy == y and i in e)
            n = self.total(lambda e, _y: i in e)
            s_i = len(self.values[i])
            out = ratio(n_y, n, self.alpha * s_i, len(self.classes))
            out = add(out, weigh(self.cond(i, xp[i], y, {}), self.w(i)))
        for j, vj in xp.items():
            if j != i:
                given = {i: xp[i]} if j in self.pair else {}
                out = add(out, weigh(self.cond(j, vj, y, given), self.w(j)))
        return out

    def mutual_information(self, i: str) -> float:
        """``I(X_i; Y)`` of the smoothed ``P̂(y, x_i)`` and its marginals."""
        a, k, s = self.alpha, len(self.classes), len(self.values[i])
        n_i = self.total(lambda e, _y: i in e)
        p = {
            (v, y): (self.total(lambda e, yy, v=v, y=y: yy == y and e.get(i) == v) + a)
            / (n_i + a * k * s)
            for v in self.values[i]
            for y in self.classes
        }
        pv = {v: sum(p[(v, y)] for y in self.classes) for v in self.values[i]}
        py = {y: sum(p[(v, y)] for v in self.values[i]) for y in self.classes}
        return max(0.0, sum(q * math.log(q / (pv[v] * py[y])) for (v, y), q in p.items() if q))

    def aode(
        self, x: Mapping[str, Any], m: float, weighted: bool, only: str | None = None
    ) -> dict[Hashable, float]:
        """AODE (``only``: SPODE of that parent) scores, normalised, classes of probability 0
        left out."""
        if not self.ev:
            return {}
        xp = self.known(x)
        parents = [
            i
            for i in xp
            if (only is None or i == only)
            and i in self.pair
            and self.w(i)
            and self.total(lambda e, _y, i=i: e.get(i) == xp[i]) >= m * (1 - 1e-12)
        ]
        if not parents:
            return self.normalise({y: self.naive(xp, y) for y in self.classes})
        w = [self.mutual_information(i) for i in parents] if weighted else [1.0] * len(parents)
        if not any(w):
            w = [1.0] * len(parents)
        kept = [(i, wi) for i, wi in zip(parents, w, strict=True) if wi > 0]
        scores: dict[Hashable, Term] = {}
        for y in self.classes:
            terms = [(self.spode(xp, i, y), wi) for i, wi in kept]
            fewest = min(t[1] for t, _w in terms)
            mixed = sum(wi * math.exp(t[0]) for t, wi in terms if t[1] == fewest)
            scores[y] = (math.log(mixed / sum(wi for _i, wi in kept)), fewest)
        return self.normalise(scores)

    def tree(
        self,
        x: Mapping[str, Any],
        parents: Mapping[str, tuple[str, ...]],
        m: float,
        families: Mapping[str, int] | None = None,
    ) -> dict[Hashable, float]:
        """TAN / KDB scores for the given structure, normalised. ``families[j]``: the
        index of the first event in feature ``j``'s family counts (KDB, two or more
        parents); its family term is used when every parent is present and that
        configuration has weight at least ``m`` in them."""
        if not self.ev:
            return {}
        xp = self.known(x)
        present = {f: v for f, v in x.items() if v is not None}
        scores = {}
        for y in self.classes:
            out = self.prior(y)
            for j, vj in xp.items():
                wj = self.w(j)
                if not wj:
                    continue
                pa = parents.get(j, ())
                if (
                    families is not None
                    and len(pa) >= 2
                    and all(p in present and self.w(p) for p in pa)
                ):
                    config = {p: present[p] for p in pa}
                    since = families[j]
                    support = self.total(
                        lambda e, _y, c=config, j=j: (
                            j in e and all(e.get(p) == v for p, v in c.items())
                        ),
                        since,
                    )
                    if support > 0 and support >= m * (1 - 1e-12):
                        out = add(out, weigh(self.cond(j, vj, y, config, since), wj))
                        continue
                usable = [
                    p
                    for p in parents.get(j, ())
                    if p in xp
                    and self.w(p)
                    and self.total(lambda e, _y, p=p: e.get(p) == xp[p]) >= m
                ]
                given = {usable[0]: xp[usable[0]]} if usable else {}
                out = add(out, weigh(self.cond(j, vj, y, given), wj))
            scores[y] = out
        return self.normalise(scores)

    @staticmethod
    def normalise(scores: Mapping[Hashable, Term]) -> dict[Hashable, float]:
        fewest = min(z for _f, z in scores.values())
        kept = {y: f for y, (f, z) in scores.items() if z == fewest}
        top = max(kept.values())
        lse = top + math.log(sum(math.exp(v - top) for v in kept.values()))
        return {y: v - lse for y, v in kept.items()}


def make_stream(seed: int, n: int, dependent: bool = False) -> list[Event]:
    """Sparse categorical counts (many zero cells), missing values, weights, a late class;
    ``dependent``: ``f1`` and ``f3`` mostly copy ``f0`` (edges for TAN and KDB)."""
    rng = random.Random(seed)
    events: list[Event] = []
    for t in range(n):
        y: Hashable = rng.choice(["a", "b", "c"] if t < n // 2 else ["a", "b", "c", 7])
        x: dict[str, Any] = {
            "f0": f"v{rng.randrange(2) + (y == 'a')}",
            "f1": f"u{rng.randrange(5)}",
            "f2": "p" if y == "b" else rng.choice("pqr"),
            "f3": f"w{rng.randrange(2 + (y == 'c'))}",
        }
        if dependent and rng.random() < 0.9:
            x["f1"] = x["f3"] = x["f0"]
        if t > n // 3:
            x["late"] = f"l{rng.randrange(3)}"
        for k in list(x):
            if rng.random() < 0.15:
                del x[k]
            elif rng.random() < 0.05:
                x[k] = None
        events.append((x, y, rng.choice([1.0, 1.0, 0.5, 2.5])))
    return events


def probes(x: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    unseen = {**x, rng.choice(["f0", "f1", "f2", "f3"]): "never-seen"}
    mixed = {f: f"{v}" for f, v in x.items()}
    if "f1" in mixed:
        mixed["f1"] = rng.choice(["u0", "u1", "u2", "u3", "u4"])
    return [x, unseen, mixed, {}]
