"""Batches of known events for the batch kernel of AODE and SPODE.

An event is *known* when every value is ``None`` (missing) or a string the
dense block already holds for that feature: encoding would leave it as it is,
so the kernel works on the block's item indices alone
(:meth:`~stream_nb.seminaive._superparent._SuperParent._predict_learn_known`).
These functions turn a batch, given as dictionaries or as columns, into those
indices, or say that some event is not known (``None``).

A numeric feature whose cut points are frozen (``bins``: its cut points and
the block's item of each bin learned) is known too: a number is binned as
encoding would bin it (``bisect_right`` on the cut points, NaN missing), and
known when its bin is an item of the block.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb._exceptions import ConfigError, InvalidEventError
from stream_nb._softmax import ABSORB
from stream_nb.limits import check_weight
from stream_nb.seminaive._dense import Floats, Indices

__all__ = [
    "Bins",
    "Rows",
    "item_array",
    "known_items",
    "known_run",
    "labels_and_weights_known",
    "normalise",
    "rows_from_columns",
]

Codes = Mapping[Hashable, Mapping[str, int]]

#: Feature -> (its frozen cut points, bin -> the block's item of that bin).
Bins = Mapping[Hashable, tuple[Sequence[float], Mapping[int, int]]]

#: Events' items: one list per event, or a ``(B, d)`` array when every event has ``d``.
Rows = list[list[int]] | Indices

#: Integers converted to a double without rounding (numpy and ``bisect`` then agree).
_EXACT_INT = 2**53


def _item(of: Mapping[str, int] | None, binned: Any, v: Any) -> int | None:
    """The item of value ``v`` (``None``: missing); ``KeyError`` when it is not known."""
    if v is None:
        return None
    t = v.__class__
    if t is str:
        if of is None:
            raise KeyError(v)
        return of[v]
    if binned is not None and (t is float or (t is int and -_EXACT_INT <= v <= _EXACT_INT)):
        if v != v:  # NaN: missing
            return None
        edges, items = binned
        return int(items[bisect_right(edges, v)])
    raise KeyError(v)


def known_items(codes: Codes, x: Mapping[Any, Any], bins: Bins | None = None) -> list[int] | None:
    """The dense block's items of ``x`` when every value is ``None`` (missing, left out)
    or a string the block knows for that feature (or a number of a known bin of a
    feature in ``bins``), else ``None``.

    Examples
    --------
    >>> codes = {"a": {"u": 1, "v": 2}, "b": {"p": 3}}
    >>> known_items(codes, {"a": "v", "b": None}), known_items(codes, {"a": "w"})
    ([2], None)
    >>> known_items(codes, {"a": "u", "n": 7.5}, {"n": ([5.0], {0: 4, 1: 5})})
    [1, 5]
    """
    try:
        return [codes[f][v] for f, v in x.items() if v is not None]
    except (KeyError, TypeError):  # a feature or value not in the block, or unhashable
        if not bins:
            return None
    try:
        found = [_item(codes.get(f), bins.get(f), v) for f, v in x.items()]
    except (KeyError, TypeError):
        return None
    return [a for a in found if a is not None]


def known_run(
    codes: Codes,
    xs: Sequence[Mapping[Any, Any]],
    start: int,
    parent: Hashable | None,
    bins: Bins | None = None,
) -> tuple[list[list[int]], list[int | None]]:
    """The longest run of known, non-empty ``dict`` events from ``xs[start]`` on: each
    event's items and its item of feature ``parent`` (``None``: absent, missing, or no
    ``parent``); empty lists when ``xs[start]`` is not one.

    Examples
    --------
    >>> codes = {"a": {"u": 1, "v": 2}}
    >>> known_run(codes, [{"a": "w"}, {"a": "u"}, {"a": "v"}, {"a": "w"}], 1, "a")
    ([[1], [2]], [1, 2])
    """
    rows = []
    for x in xs[start:]:
        if x.__class__ is not dict:
            break
        idx = known_items(codes, x, bins)
        if not idx:
            break
        rows.append(idx)
    if parent is None:
        return rows, [None] * len(rows)
    of_parent = codes.get(parent)
    binned = None if bins is None else bins.get(parent)
    stop = start + len(rows)
    return rows, [_item(of_parent, binned, x.get(parent)) for x in xs[start:stop]]


def rows_from_columns(
    codes: Codes,
    names: Sequence[Hashable],
    columns: Sequence[Sequence[Any]],
    parent: Hashable | None,
    bins: Bins | None = None,
) -> tuple[Rows, list[int | None]] | None:
    """Each event's items and its item of feature ``parent`` (as :func:`known_run`) for
    events given as columns (``names[j]`` holds ``columns[j]``); ``None`` unless every
    event is known and non-empty. With no value missing the items come as one
    ``(B, d)`` array.

    Examples
    --------
    >>> codes = {"a": {"u": 1, "v": 2}, "b": {"p": 3}}
    >>> rows, _ = rows_from_columns(codes, ("a", "b"), [["u", "v"], ["p", "p"]], None)
    >>> rows.tolist()
    [[1, 3], [2, 3]]
    >>> rows_from_columns(codes, ("a", "b"), [["u", "v"], ["p", None]], "a")
    ([[1, 3], [2]], [1, 2])
    """
    mapped: list[list[int | None]] = []
    ats: list[int | None] | None = None
    full = True
    for name, column in zip(names, columns, strict=True):
        of = codes.get(name)
        binned = None if bins is None else bins.get(name)
        if of is None and binned is None:
            if any(v is not None for v in column):
                return None  # a feature the block does not hold
            continue
        try:
            items: list[int | None] = [of[v] for v in column]  # type: ignore[index]
        except (KeyError, TypeError):
            try:
                items = [_item(of, binned, v) for v in column]
            except (KeyError, TypeError):
                return None
            full = full and None not in items
        mapped.append(items)
        if name == parent:
            ats = items
    if not mapped:
        return None
    if full:
        array = np.array(mapped, dtype=np.intp).T.copy()
        return array, [None] * len(array) if ats is None else ats
    rows = [[a for a in row if a is not None] for row in zip(*mapped, strict=True)]
    if not all(rows):
        return None
    return rows, [None] * len(rows) if ats is None else ats


def normalise(jll: Floats) -> tuple[Floats, Indices]:
    """Row-wise log-softmax of finite scores (max-shifted, as
    :func:`~stream_nb._softmax.log_softmax`) and the first argmax of each row.

    Examples
    --------
    >>> lp, best = normalise(np.array([[0.0, 0.0], [0.0, 1.0]]))
    >>> np.exp(lp).round(6).tolist(), best.tolist()
    ([[0.5, 0.5], [0.268941, 0.731059]], [0, 1])
    """
    top = jll.max(axis=1, keepdims=True)
    shifted = jll - top
    log_total = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    if np.abs(top).max() < ABSORB:
        log_proba: Floats = jll - (top + log_total)
    else:
        log_proba = shifted - log_total
    return log_proba, jll.argmax(axis=1)


def item_array(rows: Rows) -> Indices | None:
    """``rows`` as a ``(B, d)`` array when every event has as many items, else ``None``.

    Examples
    --------
    >>> item_array([[1, 2], [3, 4]]).tolist()
    [[1, 2], [3, 4]]
    >>> item_array([[1, 2], [3]]) is None
    True
    """
    if isinstance(rows, np.ndarray):
        return rows
    d = len(rows[0])
    if any(len(idx) != d for idx in rows):
        return None
    return np.array(rows, dtype=np.intp)


def labels_and_weights_known(
    classes: Mapping[Hashable, int], ys: Sequence[Hashable | None], ws: Sequence[float]
) -> bool:
    """Whether every label is ``None`` or one of ``classes`` and every weight is valid
    (:func:`~stream_nb.limits.check_weight`); ``False`` leaves the batch to the general
    path, which names what is wrong.

    Examples
    --------
    >>> labels_and_weights_known({"a": 0}, ["a", None], [1.0, 2.0])
    True
    >>> labels_and_weights_known({"a": 0}, ["b"], [1.0])  # an unknown class
    False
    >>> labels_and_weights_known({"a": 0}, ["a"], [-1.0])  # a negative weight
    False
    """
    try:
        if not all(y is None or y in classes for y in ys):
            return False
        for w in ws:
            if w != 1.0:
                check_weight(w)
    except (ConfigError, InvalidEventError, TypeError):
        return False
    return True
