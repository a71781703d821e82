"""The prediction records of a labelled block from one line template (the column path).

Byte for byte what ``orjson.dumps`` gives for the record dicts, built without them:
one ``%`` format of a line template per event, every value already JSON text. The
positions come from the block's own format
(:meth:`~stream_nb.connectors.base.Block.position_format`), its integer columns
written by ``orjson`` in one call per column (a list of them, split at the commas),
as are the ids (when every event has one), ``n_learned`` and each class's
log-probabilities; the text from ``"y_pred"`` to the first log-probability's key is
precomputed for every (predicted, true) pair of classes.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import orjson

from stream_nb.connectors.base import Block
from stream_nb.engine.settings import _OPT_NON_STR, _TEMPLATE_MAX_CLASSES, _TEMPLATE_TYPES

__all__ = ["LineTemplate", "int_texts"]

#: A ``%`` conversion of a format (``%%`` included).
_CONVERSION = re.compile(rb"%(.)", re.DOTALL)


def int_texts(values: Sequence[Any]) -> list[bytes] | None:
    """Each of ``values`` as ``orjson`` writes it, when all are ``int`` (not ``bool``)
    within 64 bits; else ``None``.

    Examples
    --------
    >>> int_texts(range(9, 12)), int_texts([1, True]), int_texts([2**70])
    ([b'9', b'10', b'11'], None, None)
    """
    if isinstance(values, range):
        values = list(values)
    elif set(map(type, values)) - {int}:
        return None
    if not values:
        return []
    try:
        return orjson.dumps(values)[1:-1].split(b",")
    except orjson.JSONEncodeError:  # an int beyond 64 bits
        return None


class LineTemplate:
    """One engine's line template: the pieces of its classes, and the block formats it
    met, kept from batch to batch.

    Examples
    --------
    >>> from stream_nb.connectors.base import LineBlock
    >>> template = LineTemplate()
    >>> block = LineBlock([b"", b""], 7, [0, 40])
    >>> log_proba = np.log([[0.75, 0.25], [0.5, 0.5]])
    >>> result = (["a", "b"], log_proba, np.array([0, 0]))
    >>> lines = template.lines(block, ["a", "b"], None, 3, result)
    >>> lines[1][:60], lines[1] == orjson.dumps(
    ...     {"position": {"line": 8, "offset": 40}, "y_pred": "a", "y_true": "b",
    ...      "log_proba": dict(zip("ab", log_proba[1].tolist())), "n_learned": 4})
    (b'{"position":{"line":8,"offset":40},"y_pred":"a","y_true":"b"', True)
    """

    def __init__(self) -> None:
        # (labels, pairs, the rest of a line, column of a label)
        self._classes: tuple[list[Hashable], list[bytes], bytes, dict[Hashable, int]] | None = None
        # a block's position format -> the format with %b only, and which columns were %d
        self._formats: dict[bytes, tuple[bytes, list[bool]]] = {}

    def lines(
        self,
        block: Block,
        ys: Sequence[Hashable | None],
        ids: Sequence[Any] | None,
        n_before: int,
        result: tuple[list[Hashable], np.ndarray, np.ndarray],
    ) -> list[bytes] | None:
        """The prediction records of ``block``'s events (all labelled: ``ys``; ``ids`` or
        ``None``; ``n_before`` events learned before them) from the kernel's
        ``(labels, log_proba, best)``, or ``None`` when the template cannot write them.

        Taken when the labels and the batch's true labels are all ``int``, ``str`` or
        ``bool`` of one type (so a label's text is its class's text), their object keys
        are distinct, there are at most 64 classes, and every event or none has an id.
        """
        labels, log_proba, best = result
        b = len(ys)
        classes = self._pieces(labels, ys)
        if classes is None:
            return None
        pairs, rest, column_of = classes
        id_texts: list[list[bytes]] = []
        if ids is not None:
            if None in ids:
                return None  # some records without "id": the dicts
            texts = int_texts(ids)
            if texts is None:
                try:
                    texts = list(map(orjson.dumps, ids))
                except orjson.JSONEncodeError:  # e.g. an int beyond 64 bits
                    return None
            id_texts = [texts]
        found = self._position(block)
        if found is None:
            return None
        position, position_columns = found
        line = (
            (b'{"id":%b,"position":' if id_texts else b'{"position":')
            + position
            + b",%b%b"
            + rest
            + b'},"n_learned":%b}'
        )
        pair = best * len(labels)
        pair += np.fromiter(map(column_of.__getitem__, ys), np.intp, count=b)
        # each class's column as one JSON array, cut at the commas (no float's text
        # holds one); orjson writes float64 array items as it writes Python floats
        by_class = np.ascontiguousarray(log_proba.T)
        option = orjson.OPT_SERIALIZE_NUMPY
        floats = [orjson.dumps(column, option=option)[1:-1].split(b",") for column in by_class]
        learned = int_texts(range(n_before, n_before + b))
        if learned is None:
            return None
        rows = zip(  # noqa: B905 (all b long)
            *id_texts,
            *position_columns,
            map(pairs.__getitem__, pair.tolist()),
            *floats,
            learned,
        )
        return list(map(line.__mod__, rows))

    def _pieces(
        self, labels: list[Hashable], ys: Sequence[Hashable | None]
    ) -> tuple[list[bytes], bytes, dict[Hashable, int]] | None:
        """``(pairs, rest, column of a label)`` of these classes, or ``None``."""
        label_type = type(labels[0])
        if len(labels) > _TEMPLATE_MAX_CLASSES or label_type not in _TEMPLATE_TYPES:
            return None
        if set(map(type, labels)) != {label_type} or set(map(type, ys)) != {label_type}:
            return None
        cached = self._classes
        if cached is None or cached[0] != labels:
            try:
                texts = [orjson.dumps(label) for label in labels]
                keys = [orjson.dumps({label: 0}, option=_OPT_NON_STR)[1:-3] for label in labels]
            except orjson.JSONEncodeError:  # e.g. an int beyond 64 bits
                return None
            if len(set(keys)) != len(keys):
                return None  # e.g. 1 and "1": the dict path shows what orjson does
            # pair p * k + t: '"y_pred":P,"y_true":T,"log_proba":{KEY0:'
            pairs = [
                b'"y_pred":' + predicted + b',"y_true":' + true + b',"log_proba":{' + keys[0] + b":"
                for predicted in texts
                for true in texts
            ]
            rest = b"".join(b"," + key.replace(b"%", b"%%") + b":%b" for key in keys[1:])
            column_of = {label: j for j, label in enumerate(labels)}
            cached = self._classes = (list(labels), pairs, rest, column_of)
        return cached[1], cached[2], cached[3]

    def _position(self, block: Block) -> tuple[bytes, list[Sequence[Any]]] | None:
        """The block's position format with its integer columns as text (``%b``), and its
        columns; ``None`` for a conversion other than ``%d``/``%b`` (the dicts)."""
        fmt, columns = block.position_format()
        known = self._formats.get(fmt)
        if known is None:
            kinds = [m.group(1) for m in _CONVERSION.finditer(fmt) if m.group(1) != b"%"]
            if set(kinds) - {b"d", b"b"} or len(kinds) != len(columns):
                return None
            known = self._formats[fmt] = (
                _CONVERSION.sub(lambda m: b"%%" if m.group(1) == b"%" else b"%b", fmt),
                [kind == b"d" for kind in kinds],
            )
        text_fmt, numbers = known
        texts: list[Sequence[Any]] = []
        for column, number in zip(columns, numbers, strict=True):
            if number:
                column_texts = int_texts(column)
                if column_texts is None:
                    return None  # (not ints: the dicts show what orjson does)
                texts.append(column_texts)
            else:
                texts.append(column)
        return text_fmt, texts
