"""JSON lines to columns, for the column path."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import orjson

from stream_nb.engine._json import is_wide
from stream_nb.engine.settings import _NUMBERS, _SCALARS

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


def scalar_fields(
    ys: Sequence[Any], ids: Sequence[Any] | None, raw_ws: Sequence[Any] | None, b: int
) -> tuple[Sequence[Any] | None, Sequence[Any] | None] | None:
    """Check a batch's labels, ids and weights for the array paths.

    Returns ``(ids, weights)`` (``None`` for a field no event carries; a
    missing weight is 1), or ``None`` when the general path must take the
    batch: a label or id that is not a scalar, a float that may be a rounded
    integer beyond 2**63, a weight that is not a positive finite number (the
    general path names it).

    Examples
    --------
    >>> scalar_fields(["a", "b"], [None, None], [None, 2], 2)
    (None, [1.0, 2])
    >>> scalar_fields([["a"], "b"], None, None, 2) is None
    True
    """
    types = set(map(type, ys))
    if not _SCALARS.issuperset(types) or (float in types and any(map(is_wide, ys))):
        return None
    if ids is not None:
        types = set(map(type, ids))
        if not _SCALARS.issuperset(types) or (float in types and any(map(is_wide, ids))):
            return None
        if ids.count(None) == b:
            ids = None
    ws: Sequence[Any] | None = None
    if raw_ws is not None and raw_ws.count(None) < b:
        if None in raw_ws:
            raw_ws = [1.0 if w is None else w for w in raw_ws]
        if not _NUMBERS.issuperset(map(type, raw_ws)):
            return None
        if not all(w > 0 and w - w == 0 for w in raw_ws):
            return None
        ws = raw_ws
    return ids, ws
