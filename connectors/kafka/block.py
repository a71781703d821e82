"""Polled Kafka messages as one block of columns (:class:`MessageBlock`).

The engine's column path reads a batch as columns: the payloads to parse, and for the
prediction records each message's position, key and headers. A
:class:`MessageBlock` takes those from the client's messages with one C-level pass
per column (``map`` over the messages) instead of a
:class:`~stream_nb.connectors.base.Record` per message, and writes the positions as
JSON text from one format (:meth:`MessageBlock.position_format`). The client
adapters make it (``ClientAdapter.block``); the records it stands for
(:meth:`MessageBlock.records`) are exactly the ones ``ClientAdapter.records`` makes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from stream_nb.connectors.base import Headers, Record

__all__ = ["MessageBlock"]


class MessageBlock:
    """A batch of polled Kafka messages: a :class:`~stream_nb.connectors.base.Block`.

    Parameters
    ----------
    messages
        The client's messages, in the order handed out.
    payloads
        Each message's value (``b""`` for none: a tombstone).
    topics, partitions, offsets
        Where each message came from.
    keys
        Each message's key (``None``: none).
    headers
        Each message's headers as the client gives them: ``(name, value)`` pairs, a
        value possibly ``None``; ``None`` or empty for none.
    timestamp
        A message's timestamp in seconds since the epoch (``None``: not available).

    Examples
    --------
    >>> block = MessageBlock([None, None], [b"{}", b"{}"], ["t", "t"], [0, 1], [7, 3],
    ...                      [b"k", None], [None, [("trace", b"x")]], lambda m: None)
    >>> fmt, columns = block.position_format()
    >>> [fmt % row for row in zip(*columns)]
    [b'{"topic":"t","partition":0,"offset":7}', b'{"topic":"t","partition":1,"offset":3}']
    >>> record = block.records()[1]
    >>> record.position, record.key, record.headers
    ({'topic': 't', 'partition': 1, 'offset': 3}, None, (('trace', b'x'),))
    >>> block.headers()
    [None, [('trace', b'x')]]
    """

    __slots__ = (
        "_headers",
        "_keys",
        "_messages",
        "_offsets",
        "_partitions",
        "_timestamp",
        "_topics",
        "payloads",
    )

    def __init__(
        self,
        messages: list[Any],
        payloads: list[bytes],
        topics: list[str],
        partitions: list[int],
        offsets: list[int],
        keys: list[bytes | None],
        headers: list[Any],
        timestamp: Callable[[Any], float | None],
    ) -> None:
        self._messages = messages
        self.payloads = payloads
        self._topics = topics
        self._partitions = partitions
        self._offsets = offsets
        self._keys = keys
        self._headers = headers
        self._timestamp = timestamp

    def __len__(self) -> int:
        return len(self.payloads)

    def next_offsets(self) -> dict[tuple[str, int], int]:
        """The offset after the last message of each ``(topic, partition)``."""
        last = dict(zip(zip(self._topics, self._partitions), self._offsets))  # noqa: B905
        return {tp: offset + 1 for tp, offset in last.items()}

    def positions(self) -> list[dict[str, Any]]:
        """``{"topic", "partition", "offset"}`` of every message."""
        return [
            {"topic": t, "partition": p, "offset": o}
            for t, p, o in zip(self._topics, self._partitions, self._offsets)  # noqa: B905
        ]

    def position_format(self) -> tuple[bytes, list[Sequence[Any]]]:
        """The positions as JSON text: the topic written into the format when every
        message comes from one topic (Kafka topic names hold no ``%``), else a column."""
        topics = self._topics
        first = topics[0] if topics else ""
        if topics.count(first) == len(topics):
            topic = orjson.dumps(first).replace(b"%", b"%%")
            fmt = b'{"topic":' + topic + b',"partition":%d,"offset":%d}'
            return fmt, [self._partitions, self._offsets]
        texts = {name: orjson.dumps(name) for name in set(topics)}
        return (
            b'{"topic":%b,"partition":%d,"offset":%d}',
            [list(map(texts.__getitem__, topics)), self._partitions, self._offsets],
        )

    def keys(self) -> list[bytes | None] | None:
        """Each message's key, or ``None`` when no message has one."""
        keys = self._keys
        return None if keys.count(None) == len(keys) else keys

    def headers(self) -> list[Headers | None] | None:
        """Each message's headers (a missing value read as ``b""``; ``None``: none), or
        ``None`` when no message has any."""
        raw = self._headers
        if not any(raw):
            return None
        return [[(k, v or b"") for k, v in h] if h else None for h in raw]

    def last_timestamp(self) -> float | None:
        """The timestamp of the last message that has one."""
        timestamp = self._timestamp
        for message in reversed(self._messages):
            stamp = timestamp(message)
            if stamp is not None:
                return stamp
        return None

    def records(self) -> list[Record]:
        """One :class:`~stream_nb.connectors.base.Record` per message."""
        stamps = map(self._timestamp, self._messages)
        return [
            Record(
                payload=value,
                position=position,
                key=key,
                timestamp=stamp,
                headers=tuple((k, v or b"") for k, v in h) if h else (),
            )
            for value, position, key, stamp, h in zip(  # noqa: B905 (same length)
                self.payloads, self.positions(), self._keys, stamps, self._headers
            )
        ]
