"""Plain-data encoding helpers for learner states (JSON-able, never pickle).

JSON objects only have string keys, while labels and feature values may be any
hashable scalar (``str``, ``int``, ``float``, ``bool``, ``None``). Mappings are
therefore stored as lists of ``[key, value]`` pairs, which keep key types.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

__all__ = ["decode_value", "encode_value", "from_pairs", "pairs"]

_SCALARS = (str, int, float, bool, type(None))


def pairs(mapping: Mapping[Any, Any]) -> list[list[Any]]:
    """``{k: v}`` as ``[[k, v], ...]``, keeping key types.

    Examples
    --------
    >>> pairs({1: 2.0, "a": 3})
    [[1, 2.0], ['a', 3]]
    """
    return [[k, v] for k, v in mapping.items()]


def from_pairs(items: Iterable[Any]) -> dict[Hashable, Any]:
    """Inverse of :func:`pairs`; rejects non-scalar keys.

    Examples
    --------
    >>> from_pairs([[1, 2.0], ["a", 3]])
    {1: 2.0, 'a': 3}
    """
    out: dict[Hashable, Any] = {}
    for item in items:
        key, value = item
        if not isinstance(key, _SCALARS):
            raise ValueError(f"state keys must be scalars, got {type(key).__name__}")
        out[key] = value
    return out


def encode_value(value: Any) -> Any:
    """Encode a parameter value: mappings become ``{"$map": pairs}``, tuples lists."""
    if isinstance(value, Mapping):
        return {"$map": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [encode_value(v) for v in value]
    if isinstance(value, _SCALARS):
        return value
    raise TypeError(f"cannot encode parameter value of type {type(value).__name__}")


def decode_value(value: Any) -> Any:
    """Inverse of :func:`encode_value`."""
    if isinstance(value, dict):
        if set(value) != {"$map"}:
            raise ValueError("encoded mappings must be {'$map': [[key, value], ...]}")
        return {decode_value(k): decode_value(v) for k, v in value["$map"]}
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    return value
