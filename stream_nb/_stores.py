"""Helpers over the nested dictionaries of raw weights that learners keep.

A *store* is a dict whose leaves are floats (raw weights) and whose inner
nodes are dicts, e.g. ``feature -> value -> class -> weight``. Merging,
rescaling, state encoding and size counting are the same for every store, so
they live here once.

The "other" bucket
------------------
A feature capped at ``max_values_per_feature`` distinct values keeps its
first ``cap`` values; any value first met once the feature is full, when
learned *or scored*, is replaced by the bucket :data:`OTHER`, which then
counts as one more value (``S_i ≤ cap + 1``). The text learners' vocabularies
use the same key for their overflow token. :func:`capped` applies the rule to
one value, :func:`value_map` to the values of a model being merged in.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from stream_nb._state import encode_key, read_count, read_key, read_label, read_pairs

__all__ = [
    "BY_CLASS",
    "FEATURE_CLASS",
    "FEATURE_VALUE_CLASS",
    "OTHER",
    "add_scaled",
    "capped",
    "count_leaves",
    "n_real",
    "rescale",
    "tree_from_pairs",
    "tree_to_pairs",
    "value_map",
]

#: Key of the "other" bucket of a feature whose distinct values reached its cap,
#: and of the overflow token of a capped vocabulary. ``None`` is never a real
#: value (it means "missing" in events), never a feature name (rejected when
#: learning) and is JSON-able, so it cannot collide with user data.
OTHER = None


def n_real(keys: Mapping[Any, Any]) -> int:
    """Number of keys other than the :data:`OTHER` bucket."""
    return len(keys) - (OTHER in keys)


def capped(values: Mapping[Any, Any] | None, value: Hashable, cap: int | None) -> Hashable:
    """``value``, or :data:`OTHER` if it is new to a feature already holding ``cap`` values.

    Examples
    --------
    >>> capped({"a": {}, "b": {}}, "c", 2) is OTHER, capped({"a": {}}, "c", 2)
    (True, 'c')
    """
    if cap is None or values is None or value in values or n_real(values) < cap:
        return value
    return OTHER


def value_map(
    mine: Mapping[Any, Mapping[Any, Any]], theirs: Mapping[Any, Mapping[Any, Any]], cap: int | None
) -> dict[Hashable, dict[Hashable, Hashable]]:
    """Where each of another model's values lands here: itself, or :data:`OTHER` past the cap.

    Values already known here keep their slot; new ones take free slots in
    ``theirs``' order until the feature holds ``cap`` values.

    Examples
    --------
    >>> value_map({"f": {"a": 1}}, {"f": {"b": 1, "c": 1, "a": 1}}, 2)
    {'f': {'b': 'b', 'c': None, 'a': 'a'}}
    """
    out: dict[Hashable, dict[Hashable, Hashable]] = {}
    for f, values in theirs.items():
        known = set(mine.get(f, ()))
        count = len(known) - (OTHER in known)
        mapping: dict[Hashable, Hashable] = {}
        for v in values:
            if v is OTHER or v in known:
                mapping[v] = v
            elif cap is None or count < cap:
                mapping[v] = v
                known.add(v)
                count += 1
            else:
                mapping[v] = OTHER
        out[f] = mapping
    return out


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
    >>> tree_to_pairs({"f": {True: 1.0, 2**64: 2.0}})
    [['f', [[True, 1.0], [{'$int': '18446744073709551616'}, 2.0]]]]
    """
    return [
        [encode_key(k), tree_to_pairs(v) if isinstance(v, dict) else v] for k, v in store.items()
    ]


KeyReader = Callable[[Any, str], Hashable]


def _any_key(value: Any, where: str) -> Hashable:
    return read_key(value, where, allow_none=True)


def tree_from_pairs(
    items: Any,
    depth: int,
    where: str = "state",
    keys: tuple[KeyReader, ...] | None = None,
) -> dict[Hashable, Any]:
    """Inverse of :func:`tree_to_pairs` for a store ``depth`` dicts deep, validated.

    Leaves must be finite weights ≥ 0; keys are read level by level with
    ``keys`` (default: any scalar; the last level of a store is usually the
    class, read with :func:`stream_nb._state.read_label`). Duplicate keys
    and bad values raise :class:`~stream_nb.ModelStateError` naming the path.

    Examples
    --------
    >>> tree_from_pairs([["f", [[True, 1.0]]]], depth=2)
    {'f': {True: 1.0}}
    >>> tree_from_pairs([["f", [["x", -1.0]]]], depth=2, where="stats.present")
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ModelStateError: stats.present['f']['x']: must be finite and ≥ 0, got -1.0
    """
    readers = keys if keys is not None else (_any_key,) * depth
    if len(readers) != depth:
        raise ValueError(f"{len(readers)} key readers for a store {depth} deep")
    return _read_tree(items, where, readers)


def _read_tree(items: Any, where: str, readers: tuple[KeyReader, ...]) -> dict[Hashable, Any]:
    if len(readers) == 1:
        return read_pairs(items, where, read_count, key=readers[0])
    rest = readers[1:]
    return read_pairs(items, where, lambda v, w: _read_tree(v, w, rest), key=readers[0])


#: Key readers of the common stores: feature -> class, feature -> value -> class.
BY_CLASS: tuple[KeyReader, ...] = (read_label,)
FEATURE_CLASS: tuple[KeyReader, ...] = (read_key, read_label)
FEATURE_VALUE_CLASS: tuple[KeyReader, ...] = (read_key, _any_key, read_label)
