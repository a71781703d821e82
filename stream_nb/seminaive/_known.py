"""Batches of known events for the batch kernel of AODE and SPODE.

An event is *known* when every value is ``None`` (missing) or a string the
dense block already holds for that feature: encoding would leave it as it is,
so the kernel works on the block's item indices alone
(:meth:`~stream_nb.seminaive._superparent._SuperParent._predict_learn_known`).
These functions turn a batch, given as dictionaries or as columns, into those
indices, or say that some event is not known (``None``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb._softmax import ABSORB
from stream_nb.seminaive._dense import Floats, Indices

__all__ = ["known_items", "normalise", "rows_from_columns", "rows_from_dicts"]

Codes = Mapping[Hashable, Mapping[str, int]]


def known_items(codes: Codes, x: Mapping[Any, Any]) -> list[int] | None:
    """The dense block's items of ``x`` when every value is ``None`` (missing, left out)
    or a string the block knows for that feature, else ``None``.

    Examples
    --------
    >>> codes = {"a": {"u": 1, "v": 2}, "b": {"p": 3}}
    >>> known_items(codes, {"a": "v", "b": None}), known_items(codes, {"a": "w"})
    ([2], None)
    """
    try:
        return [codes[f][v] for f, v in x.items() if v is not None]
    except (KeyError, TypeError):  # a feature or value not in the block, or unhashable
        return None


def rows_from_dicts(
    codes: Codes, xs: Sequence[Mapping[Any, Any]], parent: Hashable | None
) -> tuple[list[list[int]], list[int | None]] | None:
    """Each event's items and its item of feature ``parent`` (``None``: absent, missing,
    or no ``parent``); ``None`` unless every event is a known, non-empty ``dict``."""
    rows = []
    for x in xs:
        if x.__class__ is not dict:
            return None
        idx = known_items(codes, x)
        if not idx:
            return None
        rows.append(idx)
    if parent is None:
        return rows, [None] * len(rows)
    of_parent = codes.get(parent, {})
    values = [x.get(parent) for x in xs]
    return rows, [None if v is None else of_parent.get(v) for v in values]


def rows_from_columns(
    codes: Codes,
    names: Sequence[Hashable],
    columns: Sequence[Sequence[Any]],
    parent: Hashable | None,
) -> tuple[list[list[int]], list[int | None]] | None:
    """:func:`rows_from_dicts` for events given as columns (``names[j]`` holds ``columns[j]``)."""
    mapped: list[list[int | None]] = []
    ats: list[int | None] | None = None
    for name, column in zip(names, columns, strict=True):
        of = codes.get(name)
        if of is None:
            if any(v is not None for v in column):
                return None  # a feature the block does not hold
            continue
        try:
            items: list[int | None] = [of[v] for v in column]
        except (KeyError, TypeError):
            try:
                items = [None if v is None else of[v] for v in column]
            except (KeyError, TypeError):
                return None
        mapped.append(items)
        if name == parent:
            ats = items
    if not mapped:
        return None
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
