"""Parsed JSON objects to per-event feature mappings, for the row path.

The row path serves learners whose events do not share one set of keys (token
counts: ``capabilities.row_kernel``). :func:`rows_of` gives the feature
dictionaries :class:`~stream_nb.engine.events.EventDecoder` would give, with the
labels, ids and weights, for a batch in which every event is one the decoder
accepts as an ordinary event; anything else (a rejected or label-only event, an
unusual shape) returns ``None`` and the batch takes the general path, which
handles it per event.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, repeat
from typing import Any

from stream_nb.engine.events import EventDecoder
from stream_nb.engine.parse import scalar_fields
from stream_nb.engine.settings import _NUMBERS, _SCALARS

__all__ = ["rows_of"]

#: ``(features, labels, ids, weights)`` of a batch (``ids``/``weights`` ``None``: none given)
Rows = tuple[list[dict[str, Any]], Sequence[Any], Sequence[Any] | None, Sequence[float] | None]


def rows_of(
    decoder: EventDecoder,
    objs: list[dict[str, Any]],
    transposed: tuple[dict[str, Any], list[Sequence[Any]]] | None = None,
    *,
    check_nonnegative: bool = False,
) -> Rows | None:
    """``(features, labels, ids, weights)`` of parsed events, as the decoder gives them,
    or ``None`` unless every event is an ordinary one it accepts.

    ``objs`` are parsed JSON objects (taken over: their label, id and weight
    fields are popped), or ``transposed`` is ``(first object, columns)`` when
    the objects had the same top-level keys (``objs`` is then not read).
    The feature values are the row kernel's to check (it refuses a batch with a
    value it cannot take, and the general path then rejects the event as the
    decoder would); ``check_nonnegative`` refuses here a batch with a value that is
    not a scalar or a negative number (the decoder's ``nonnegative`` check, for a
    learner that does not make it).

    Examples
    --------
    >>> objs = [{"x": {"a": 1}, "y": "p"}, {"x": {"b": 2}, "y": "q", "w": 2}]
    >>> rows_of(EventDecoder(), objs)
    ([{'a': 1}, {'b': 2}], ['p', 'q'], None, [1.0, 2.0])
    """
    label_field, id_field, weight_field = (
        decoder.label_field,
        decoder.id_field,
        decoder.weight_field,
    )
    features_field, shape = decoder.features_field, decoder.shape
    ids: Sequence[Any] | None = None
    raw_ws: Sequence[Any] | None = None
    xs: list[Any]
    if transposed is not None:
        first, columns = transposed
        where = {name: j for j, name in enumerate(first)}
        b = len(columns[0])
        ys: Sequence[Any] = columns[where[label_field]] if label_field in where else (None,) * b
        if id_field is not None and id_field in where:
            ids = columns[where[id_field]]
        if weight_field is not None and weight_field in where:
            raw_ws = columns[where[weight_field]]
        special = {label_field, id_field, weight_field}
        if features_field in where and shape != "flat":
            xs = list(columns[where[features_field]])
            if len(where) - len(special & where.keys()) != 1:
                return None  # other top-level keys beside the features object
            if set(map(type, xs)) != {dict}:
                return None  # (auto: some events flat; nested: not an object)
        elif shape == "nested":
            return None
        else:
            return None  # flat events with one set of keys: the column path's case
    else:
        b = len(objs)
        ys = [o.pop(label_field, None) for o in objs]
        if id_field is not None:
            ids = [o.pop(id_field, None) for o in objs]
        if weight_field is not None:
            raw_ws = [o.pop(weight_field, None) for o in objs]
        if shape == "flat" or (
            shape == "auto" and not any(map(dict.__contains__, objs, repeat(features_field)))
        ):
            xs = objs  # flat events: each object is its features
        else:
            xs = []
            add = xs.append
            for o in objs:
                if features_field in o:
                    x = o[features_field]
                    if type(x) is dict:
                        if len(o) != 1:
                            return None  # other top-level keys beside the features object
                        add(x)
                        continue
                    if shape == "nested":
                        return None
                elif shape == "nested":
                    return None
                add(o)
    if not all(xs):
        return None  # an event without features (label-only, or rejected)
    fields = scalar_fields(ys, ids, raw_ws, b)
    if fields is None:
        return None
    ids, raw = fields
    ws = None if raw is None else [float(w) for w in raw]
    if check_nonnegative:
        values = list(chain.from_iterable(map(dict.values, xs)))
        types = set(map(type, values))
        if not _SCALARS.issuperset(types):
            return None
        if types & _NUMBERS and min(v for v in values if type(v) in _NUMBERS) < 0:
            return None
    return xs, ys, ids, ws
