"""The source/sink interface every connector implements (stdin/file, memory, Kafka).

A source hands out raw records in batches and knows how to resume; a sink
accepts encoded records and makes them durable on ``flush``. The engine owns
decoding, the model and checkpoints; connectors only move bytes.

Delivery contract used by the engine, per batch::

    records = source.next_batch(max_records, timeout)
    ... predict, emit to sink, learn, dead-letter bad records ...
    sink.flush(); dead_letters.flush()
    position = source.position()          # after every record handed out so far
    snapshot = write_checkpoint(model, position, sink.position(), ...)
    source.commit(position, snapshot_id)  # e.g. Kafka group offsets; no-op for files

On restart the engine restores the snapshot and calls ``source.seek(position)``
(seekable sources) and ``sink.truncate(sink_position)`` (sinks that can), so no
event is learned twice and none is lost. Without a snapshot, a sink whose
:meth:`Sink.existing_output` is not ``None`` makes the engine refuse to start
(unless told to start over, then :meth:`Sink.discard` empties it).

``close`` may not run on a crash (kill -9); nothing here relies on it for
correctness.

A connector that needs more of the engine than this contract (Kafka: a checkpoint
before partitions move, model-sync state in snapshots) overrides ``attach_engine``,
which the CLI calls before the engine restores a snapshot; what it may use of the
engine is :class:`EngineHooks`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias

if TYPE_CHECKING:
    from stream_nb.base import Learner

__all__ = [
    "Block",
    "EngineHooks",
    "Headers",
    "LineBlock",
    "Record",
    "Sink",
    "Source",
    "whole_number",
]

#: Message headers as sinks take them: ``(name, value)`` pairs, in order.
Headers: TypeAlias = list[tuple[str, bytes]]


def whole_number(value: object, *, at_most: int | None = None) -> int | None:
    """``value`` if it is an integer (not a bool) from 0 to ``at_most``, else ``None``:
    the check of a number read back from a snapshot's position or an option.

    Examples
    --------
    >>> whole_number(3), whole_number(-1), whole_number(True), whole_number(5, at_most=4)
    (3, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    if at_most is not None and value > at_most:
        return None
    return value


class Record(NamedTuple):
    """One raw event as read from a source.

    A named tuple (immutable, and about three times cheaper to build than a
    frozen dataclass: sources build one per line or message).

    Attributes
    ----------
    payload
        The raw bytes (one JSON line or one Kafka message value), undecoded.
    position
        Where the record came from, JSON-able, e.g. ``{"line": 12, "offset": 840}``
        for a file or ``{"topic": "t", "partition": 0, "offset": 41}`` for Kafka.
        Used in prediction records and dead letters.
    key
        Message key where the source has one.
    timestamp
        Source timestamp in seconds since the epoch, where known.
    headers
        Message headers where the source has them.

    Examples
    --------
    >>> r = Record(b'{"a": 1}', {"line": 1, "offset": 0})
    >>> r.payload, r.key, r.headers
    (b'{"a": 1}', None, ())
    """

    payload: bytes
    position: dict[str, Any]
    key: bytes | None = None
    timestamp: float | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


class Block(Protocol):
    """A batch of records as columns, without one :class:`Record` per record.

    Sources that can hand out their records this way offer
    ``next_block(max_records, timeout) -> Block | None`` beside
    :meth:`Source.next_batch` (``None``: nothing came); the engine's column path reads
    whole blocks, and writes their prediction records from one template per batch
    (:meth:`position_format`) with the records' keys and headers
    (:meth:`Sink.write_keyed`). :class:`LineBlock` is the line sources' block.
    """

    @property
    def payloads(self) -> list[bytes]:
        """Each record's raw bytes, in order."""

    def records(self) -> list[Record]:
        """One :class:`Record` per record (what :meth:`Source.next_batch` would give)."""

    def positions(self) -> list[dict[str, Any]]:
        """The position of every record, as its :class:`Record` would carry it."""

    def position_format(self) -> tuple[bytes, list[Sequence[Any]]]:
        """The positions as JSON text: a ``%``-format and its columns, such that
        ``fmt % row`` for each row of ``zip(*columns)`` is ``orjson.dumps`` of that
        record's position."""

    def keys(self) -> Sequence[bytes | None] | None:
        """Each record's message key, or ``None`` when no record has one."""

    def headers(self) -> Sequence[Headers | None] | None:
        """Each record's headers (``None``: none), or ``None`` when no record has any."""

    def last_timestamp(self) -> float | None:
        """The newest source timestamp among the records (``None``: none known)."""


class LineBlock(NamedTuple):
    """Consecutive lines of a line source, without one :class:`Record` per line: a
    :class:`Block`.

    Line ``first + i`` of the source starts at byte ``offsets[i]`` and holds
    ``payloads[i]``. Sources that read lines offer ``next_block`` beside
    :meth:`Source.next_batch`; the engine's column path reads whole blocks.

    Examples
    --------
    >>> block = LineBlock([b'{"a": 1}', b'{"a": 2}'], 3, [40, 49])
    >>> [r.position for r in block.records()]
    [{'line': 3, 'offset': 40}, {'line': 4, 'offset': 49}]
    >>> fmt, columns = block.position_format()
    >>> [fmt % row for row in zip(*columns)]
    [b'{"line":3,"offset":40}', b'{"line":4,"offset":49}']
    """

    payloads: list[bytes]
    first: int
    offsets: list[int]

    def positions(self) -> list[dict[str, Any]]:
        """The position of every line, as its :class:`Record` would carry it."""
        return [
            {"line": line, "offset": offset}
            for line, offset in zip(  # noqa: B905 (same length)
                range(self.first, self.first + len(self.offsets)), self.offsets
            )
        ]

    def position_format(self) -> tuple[bytes, list[Sequence[Any]]]:
        """The lines' positions as JSON text (see :meth:`Block.position_format`)."""
        first = self.first
        return b'{"line":%d,"offset":%d}', [range(first, first + len(self.offsets)), self.offsets]

    def records(self) -> list[Record]:
        """One :class:`Record` per line."""
        new = tuple.__new__
        return [
            new(Record, (payload, position, None, None, ()))
            for payload, position in zip(self.payloads, self.positions())  # noqa: B905
        ]

    def keys(self) -> None:
        """Lines have no keys."""
        return None

    def headers(self) -> None:
        """Lines have no headers."""
        return None

    def last_timestamp(self) -> None:
        """Lines have no timestamps."""
        return None


class Source(abc.ABC):
    """Where raw records come from.

    Subclasses implement :meth:`next_batch`, :meth:`position` and
    :meth:`close`; seekable ones also :meth:`seek` and set ``seekable``.
    """

    #: Whether :meth:`seek` can resume exactly after a checkpointed position.
    seekable: bool = False

    @abc.abstractmethod
    def next_batch(self, max_records: int, timeout: float) -> list[Record]:
        """Up to ``max_records`` records, waiting at most ``timeout`` seconds.

        Returns ``[]`` when nothing arrived in time. Once the source has ended
        for good (end of a file that is not followed), :attr:`exhausted` is true.
        """

    @property
    def exhausted(self) -> bool:
        """True once no record will ever come again."""
        return False

    @abc.abstractmethod
    def position(self) -> dict[str, Any]:
        """JSON-able position just after every record handed out so far."""

    def seek(self, position: dict[str, Any]) -> None:
        """Resume just after ``position`` (from :meth:`position`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot seek")

    def commit(self, position: dict[str, Any], snapshot_id: str) -> None:  # noqa: B027
        """Called after a snapshot covering ``position`` is durable (Kafka commits offsets)."""

    def attach_engine(self, engine: EngineHooks) -> None:  # noqa: B027
        """Called once the engine exists, before it restores a snapshot (see the module
        docstring); nothing by default."""

    @property
    def ready(self) -> bool:
        """Whether the source is connected and able to deliver (for ``/readyz``)."""
        return True

    @abc.abstractmethod
    def close(self) -> None:
        """Release resources. May not run on a crash."""


class Sink(abc.ABC):
    """Where encoded records go (predictions or dead letters)."""

    @abc.abstractmethod
    def write(
        self, value: bytes, *, key: bytes | None = None, headers: Headers | None = None
    ) -> None:
        """Buffer one record (no trailing newline: line-based sinks add it)."""

    def write_many(self, values: list[bytes]) -> None:
        """Buffer several unkeyed records in order (same as :meth:`write` on each).

        Line sinks override it to buffer the whole list at once; the engine
        uses it once per batch for sinks that ignore keys (``uses_keys = False``).
        """
        write = self.write
        for value in values:
            write(value)

    def write_lines(self, block: bytes) -> None:
        """Buffer several unkeyed records given as one block: JSON values separated by
        ``\\n``, no trailing newline (same as :meth:`write` on each line).

        Line sinks override it to buffer the block as it is; the engine's
        column path hands over a whole batch this way.
        """
        self.write_many(block.split(b"\n"))

    def write_keyed(
        self,
        values: list[bytes],
        keys: Sequence[bytes | None] | None,
        headers: Sequence[Headers | None] | None,
    ) -> None:
        """Buffer several records in order, with their keys and headers (``None``: no
        record has any); the same as :meth:`write` on each.

        The engine's column path hands a keyed sink (``uses_keys``) a whole batch this
        way; sinks that send each record (Kafka) override it with one tight loop.
        """
        write = self.write
        for i, value in enumerate(values):
            write(
                value,
                key=None if keys is None else keys[i],
                headers=None if headers is None else headers[i],
            )

    @abc.abstractmethod
    def flush(self) -> None:
        """Hand every buffered record to durable storage (file fsync, producer flush)."""

    def position(self) -> dict[str, Any] | None:
        """Durable position for checkpoints (bytes written for files), or ``None``."""
        return None

    def truncate(self, position: dict[str, Any]) -> None:  # noqa: B027
        """Drop output written after ``position`` (on restore), where the sink can."""

    def existing_output(self) -> str | None:
        """What this sink already held when opened, e.g. ``"812 bytes in 'out.jsonl'"``,
        or ``None`` (empty, or a sink that cannot tell: stdout, Kafka).

        A run without a snapshot refuses to start on a sink that holds output
        (the engine would append a second history to it) unless told to
        start over, which calls :meth:`discard`.
        """
        return None

    def discard(self) -> None:  # noqa: B027
        """Drop everything this sink holds (``--reset-state``), where the sink can."""

    def attach_engine(self, engine: EngineHooks) -> None:  # noqa: B027
        """Called once the engine exists, before it restores a snapshot (see the module
        docstring); nothing by default."""

    @abc.abstractmethod
    def close(self) -> None:
        """Flush and release resources. May not run on a crash."""


class EngineHooks(Protocol):
    """What a connector may use of the engine it is attached to (``attach_engine``).

    :class:`~stream_nb.engine.Engine` provides all of it. The Kafka connector uses it
    to checkpoint before partitions move, to return to the last snapshot when
    partitions were lost, and (model sync) to keep state in snapshots, run after every
    batch and replace the model.
    """

    #: The model; model sync replaces it.
    learner: Learner

    @property
    def sink(self) -> Sink:
        """Where predictions go."""

    @property
    def dead_letters(self) -> Sink | None:
        """Where rejected events go, if anywhere."""

    @property
    def checkpointer(self) -> object | None:
        """The snapshot store (``None``: the engine keeps no snapshots)."""

    def checkpoint(self) -> str:
        """Flush the sinks, write a snapshot, then commit the source; the snapshot id."""

    def restore(self) -> bool:
        """Return to the newest valid snapshot; whether there was one."""

    def add_batch_hook(self, hook: Callable[[EngineHooks], None]) -> None:
        """Call ``hook(engine)`` after every batch."""

    def add_extra_state(
        self, name: str, provider: Callable[[], Any], consumer: Callable[[Any], None]
    ) -> None:
        """Keep ``provider()`` in every snapshot; hand it to ``consumer`` on restore."""
