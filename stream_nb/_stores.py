"""Helpers over the nested dictionaries of raw weights that learners keep.

A *store* is a dict whose leaves are floats (raw weights) and whose inner
nodes are dicts, e.g. ``feature -> value -> class -> weight``. Merging,
rescaling, state encoding and size counting are the same for every store, so
they live here once.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from stream_nb._state import from_pairs

__all__ = ["add_scaled", "count_leaves", "rescale", "tree_from_pairs", "tree_to_pairs"]


def add_scaled(dst: dict[Any, Any], src: dict[Any, Any], factor: float) -> None:
    """``dst += factor × src`` leaf by leaf; missing branches are created.

    Examples
    --------
    >>> d = {"a": {1: 1.0}}
    >>> add_scaled(d, {"a": {1: 2.0, 2: 1.0}, "b": {3: 1.0}}, 0.5)
    >>> d
    {'a': {1: 2.0, 2: 0.5}, 'b': {3: 0.5}}
    """
    for key, value in src.items():
        if isinstance(value, dict):
            branch = dst.get(key)
            if branch is None:
                branch = dst[key] = {}
            add_scaled(branch, value, factor)
        else:
            dst[key] = dst.get(key, 0.0) + value * factor


def rescale(store: dict[Any, Any], factor: float) -> None:
    """Multiply every leaf of ``store`` by ``factor`` in place."""
    for key, value in store.items():
        if isinstance(value, dict):
            rescale(value, factor)
        else:
            store[key] = value * factor


def count_leaves(store: dict[Any, Any]) -> int:
    """Number of float leaves in ``store``."""
    n = 0
    for value in store.values():
        n += count_leaves(value) if isinstance(value, dict) else 1
    return n


def tree_to_pairs(store: dict[Any, Any]) -> list[list[Any]]:
    """A nested store as nested ``[key, value]`` pair lists (JSON-able, key types kept).

    Examples
    --------
    >>> tree_to_pairs({"f": {True: 1.0}})
    [['f', [[True, 1.0]]]]
    """
    return [[k, tree_to_pairs(v) if isinstance(v, dict) else v] for k, v in store.items()]


def tree_from_pairs(items: Any, depth: int) -> dict[Hashable, Any]:
    """Inverse of :func:`tree_to_pairs` for a store ``depth`` dicts deep.

    Leaves must be finite numbers.

    Examples
    --------
    >>> tree_from_pairs([["f", [[True, 1.0]]]], depth=2)
    {'f': {True: 1.0}}
    """
    out = from_pairs(items)
    if depth > 1:
        return {k: tree_from_pairs(v, depth - 1) for k, v in out.items()}
    for k, v in out.items():
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or v != v
            or v
            in (
                float("inf"),
                float("-inf"),
            )
        ):
            raise ValueError(f"statistic for key {k!r} must be a finite number, got {v!r}")
        out[k] = float(v)
    return out
