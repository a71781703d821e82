"""A seeded stream from a known tree-structured Bayesian network (shared by the tests)."""

from __future__ import annotations

import random
from collections.abc import Iterator

#: feature -> its parent feature in the true tree (the class is a parent of every feature)
TREE: dict[str, str | None] = {
    "x0": None,
    "x1": "x0",
    "x2": "x0",
    "x3": "x1",
    "x4": "x1",
    "x5": "x2",
}


def bn_stream(
    seed: int, n: int, keep: float = 0.7, root: float = 0.5
) -> Iterator[tuple[dict[str, str], int]]:
    """``x0 = y`` w.p. ``root``; a child copies its parent w.p. ``keep``, else ``(parent + y) % 3``.

    Features are strings ``"v0"``…``"v2"``; the class is an int in 0…2.
    """
    rng = random.Random(seed)
    for _ in range(n):
        y = rng.randrange(3)
        x: dict[str, int] = {}
        for f, p in TREE.items():
            if p is None:
                x[f] = y if rng.random() < root else rng.randrange(3)
            else:
                x[f] = x[p] if rng.random() < keep else (x[p] + y) % 3
        yield {f: f"v{v}" for f, v in x.items()}, y
