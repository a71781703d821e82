"""In-memory test doubles: a list source and a memory sink (shipped for users' tests too).

:class:`ListSource` replays a list of payloads; two sentinels shape the
stream: :data:`ListSource.EOF` ends it there (what follows is never read) and
:data:`ListSource.ABORT` makes :meth:`ListSource.next_batch` raise
:class:`~stream_nb.SourceError` when reached, to simulate a broken source.
:class:`MemorySink` keeps written records, separating the durable ones
(flushed) from the buffered ones, so a test can simulate a crash by dropping
the buffer.
"""

from __future__ import annotations

from typing import Any

import orjson

from stream_nb._exceptions import SinkError, SourceError
from stream_nb.connectors.base import Headers, Record, Sink, Source, whole_number

__all__ = ["DemoSource", "ListSource", "MemorySink", "demo_generators"]


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ListSource.{self.name}"


class ListSource(Source):
    """A seekable source over a list of payloads.

    Parameters
    ----------
    items
        ``bytes`` (used as is), ``str`` (UTF-8 encoded) or any other JSON-able
        value (encoded with orjson), and the sentinels :data:`EOF`/:data:`ABORT`.

    Examples
    --------
    >>> src = ListSource([{"x": {"a": 1}}, "raw", ListSource.EOF, b"never"])
    >>> [r.payload for r in src.next_batch(10, 0)], src.exhausted
    ([b'{"x":{"a":1}}', b'raw'], True)
    >>> src.position()
    {'index': 2}
    """

    #: End the stream here.
    EOF: Any = _Sentinel("EOF")
    #: Raise SourceError here (a broken source).
    ABORT: Any = _Sentinel("ABORT")

    seekable = True

    def __init__(self, items: list[Any]) -> None:
        self._items = list(items)
        self._index = 0
        self.closed = False
        #: ``(position, snapshot_id)`` of every :meth:`commit` call.
        self.commits: list[tuple[dict[str, Any], str]] = []

    @staticmethod
    def _encode(item: Any) -> bytes:
        if isinstance(item, bytes):
            return item
        if isinstance(item, str):
            return item.encode("utf-8")
        return orjson.dumps(item)

    def next_batch(self, max_records: int, timeout: float) -> list[Record]:
        out: list[Record] = []
        items = self._items
        while len(out) < max_records and self._index < len(items):
            item = items[self._index]
            if item is ListSource.EOF:
                break
            if item is ListSource.ABORT:
                if out:
                    break  # hand out what came before; raise on the next call
                raise SourceError(f"ListSource aborted at index {self._index}")
            out.append(Record(self._encode(item), {"index": self._index}))
            self._index += 1
        return out

    @property
    def exhausted(self) -> bool:
        return self._index >= len(self._items) or self._items[self._index] is ListSource.EOF

    def position(self) -> dict[str, Any]:
        return {"index": self._index}

    def seek(self, position: dict[str, Any]) -> None:
        index = whole_number(position.get("index"), at_most=len(self._items))
        if index is None:
            raise SourceError(
                f"cannot seek ListSource to {position!r}; "
                f"expected {{'index': 0…{len(self._items)}}}"
            )
        self._index = index

    def commit(self, position: dict[str, Any], snapshot_id: str) -> None:
        self.commits.append((dict(position), snapshot_id))

    def close(self) -> None:
        self.closed = True


class MemorySink(Sink):
    """A sink keeping records in memory: ``flushed`` (durable) and ``pending`` (buffered).

    Examples
    --------
    >>> sink = MemorySink()
    >>> sink.write(b'{"a":1}'); sink.flush(); sink.write(b'{"a":2}')
    >>> sink.position(), len(sink.pending), sink.records()
    ({'count': 1}, 1, [{'a': 1}, {'a': 2}])
    """

    def __init__(self) -> None:
        self.flushed: list[bytes] = []
        self.pending: list[bytes] = []
        #: ``(value, key, headers)`` of every write, for tests that need keys/headers.
        self.calls: list[tuple[bytes, bytes | None, Headers | None]] = []
        self.closed = False

    def write(
        self, value: bytes, *, key: bytes | None = None, headers: Headers | None = None
    ) -> None:
        if self.closed:
            raise SinkError("MemorySink is closed; create a new one")
        self.pending.append(value)
        if key is not None or headers is not None:
            self.calls.append((value, key, headers))

    def flush(self) -> None:
        self.flushed.extend(self.pending)
        self.pending.clear()

    def position(self) -> dict[str, Any]:
        return {"count": len(self.flushed)}

    def truncate(self, position: dict[str, Any]) -> None:
        count = whole_number(position.get("count"), at_most=len(self.flushed))
        if count is None:
            raise SinkError(
                f"cannot truncate MemorySink to {position!r}: it holds {len(self.flushed)} "
                "durable records"
            )
        del self.flushed[count:]
        self.pending.clear()

    def existing_output(self) -> str | None:
        return f"{len(self.flushed)} records in a MemorySink" if self.flushed else None

    def discard(self) -> None:
        self.truncate({"count": 0})

    def values(self) -> list[bytes]:
        """Every record written, durable first."""
        return self.flushed + self.pending

    def records(self) -> list[Any]:
        """Every record written, decoded from JSON."""
        return [orjson.loads(v) for v in self.values()]

    def close(self) -> None:
        self.flush()
        self.closed = True


class DemoSource(Source):
    """A seeded synthetic stream from :mod:`stream_nb.datasets`, as JSON-lines records.

    Events are flat objects (features plus ``label_field``) or nested
    (``{"x": ..., "y": ...}``). The stream is deterministic for a seed, so the
    source is seekable: :meth:`seek` regenerates it and skips ahead.

    Parameters
    ----------
    name
        A generator of :mod:`stream_nb.datasets` (``agrawal``, ``zipf_text``,
        ``categorical_stream``, ``mixed_stream``; ``categorical`` and
        ``mixed`` are accepted as short names).
    seed, n
        Seed and number of events.
    shape
        ``"flat"`` or ``"nested"``.
    label_field, features_field
        Field names of the emitted events.
    params
        Extra keyword arguments for the generator.

    Examples
    --------
    >>> src = DemoSource("agrawal", seed=42, n=2)
    >>> [r.position for r in src.next_batch(10, 0)], src.exhausted
    ([{'index': 0}, {'index': 1}], True)
    """

    seekable = True

    def __init__(
        self,
        name: str,
        *,
        seed: int = 42,
        n: int = 10_000,
        shape: str = "flat",
        label_field: str = "y",
        features_field: str = "x",
        params: dict[str, Any] | None = None,
    ) -> None:
        from stream_nb import datasets
        from stream_nb._exceptions import ConfigError

        names = demo_generators()
        key = name if name in names else f"{name}_stream"
        if key not in names:
            raise ConfigError(
                f"unknown demo stream {name!r}; choose one of {', '.join(sorted(names))}"
            )
        if shape not in ("flat", "nested"):
            raise ConfigError(f"shape must be 'flat' or 'nested', got {shape!r}")
        self.name = key
        self._factory = getattr(datasets, key)
        self._seed, self._n, self._params = seed, n, dict(params or {})
        self._shape, self._label, self._features = shape, label_field, features_field
        self._index = 0
        self._iterator = self._factory(seed, n, **self._params)

    def next_batch(self, max_records: int, timeout: float) -> list[Record]:
        out: list[Record] = []
        dumps = orjson.dumps
        index = self._index
        flat = self._shape == "flat"
        for x, y in self._iterator:
            if flat:
                x[self._label] = y
                payload = dumps(x)
            else:
                payload = dumps({self._features: x, self._label: y})
            out.append(Record(payload, {"index": index}))
            index += 1
            if len(out) >= max_records:
                break
        self._index = index
        return out

    @property
    def exhausted(self) -> bool:
        return self._index >= self._n

    def position(self) -> dict[str, Any]:
        return {"index": self._index}

    def seek(self, position: dict[str, Any]) -> None:
        index = whole_number(position.get("index"), at_most=self._n)
        if index is None:
            raise SourceError(
                f"cannot seek demo stream to {position!r}; expected {{'index': 0…{self._n}}}"
            )
        self._iterator = self._factory(self._seed, self._n, **self._params)
        for _ in range(index):
            next(self._iterator)
        self._index = index

    def close(self) -> None:
        self._index = self._n


def demo_generators() -> list[str]:
    """Names of the demo streams (the generators of :mod:`stream_nb.datasets`).

    Examples
    --------
    >>> "agrawal" in demo_generators()
    True
    """
    from stream_nb import datasets

    return list(datasets.__all__)
