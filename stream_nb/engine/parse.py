"""JSON lines to columns, for the column path."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import orjson

#: The column path parses and transposes a batch this many lines at a time, so each
#: chunk's dicts are freed, and their memory reused, while still in the CPU caches.
_PARSE_CHUNK = 256


def _parse_uniform(
    payloads: list[bytes],
) -> tuple[list[dict[str, Any]], tuple[dict[str, Any], list[Sequence[Any]]] | None] | None:
    """Parse JSON lines for the column path: ``(objects, None)``, or ``([], (first
    object, columns))`` when all are objects with the same keys (transposed chunk by
    chunk); ``None`` if one is not an object. Raises ``orjson.JSONDecodeError``."""
    loads = orjson.loads
    first: dict[str, Any] | None = None
    names: tuple[str, ...] = ()
    chunks: list[list[Sequence[Any]]] = []
    for start in range(0, len(payloads), _PARSE_CHUNK):
        objs = list(map(loads, payloads[start : start + _PARSE_CHUNK]))
        if set(map(type, objs)) != {dict}:
            return None
        if first is None:
            first = objs[0]
            names = tuple(first)
        columns = _columns(objs, names)
        if columns is None:
            # not uniform (e.g. some events unlabelled): every object, the earlier
            # chunks parsed again (their dicts are gone)
            rest = list(map(loads, payloads[start + len(objs) :]))
            if set(map(type, rest)) - {dict}:
                return None
            return [*map(loads, payloads[:start]), *objs, *rest], None
        chunks.append(columns)
    assert first is not None
    if len(chunks) == 1:
        return [], (first, chunks[0])
    joined: list[Sequence[Any]] = []
    for parts in zip(*chunks, strict=True):  # each column's parts, chunk after chunk
        column: list[Any] = []
        for part in parts:
            column += part
        joined.append(column)
    return [], (first, joined)


def _columns(dicts: Sequence[dict[str, Any]], names: tuple[str, ...]) -> list[Sequence[Any]] | None:
    """``dicts`` as columns in ``names`` order, or ``None`` unless each has exactly those keys
    (in any order)."""
    if not names or set(map(len, dicts)) != {len(names)}:
        return None
    try:
        if len(names) == 1:
            return [tuple(map(operator.itemgetter(names[0]), dicts))]
        return list(zip(*map(operator.itemgetter(*names), dicts)))  # noqa: B905 (same keys)
    except KeyError:
        return None
