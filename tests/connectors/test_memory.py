"""The in-memory test doubles and the seeded demo source."""

from __future__ import annotations

import pytest

from stream_nb import ConfigError, SinkError, SourceError
from stream_nb.connectors.memory import DemoSource, ListSource, MemorySink
from stream_nb.datasets import agrawal


def test_list_source_encodes_and_ends_at_eof():
    src = ListSource([b"raw", "text", {"a": 1}, ListSource.EOF, "after"])
    batch = src.next_batch(2, 0)
    assert [r.payload for r in batch] == [b"raw", b"text"] and not src.exhausted
    assert [r.payload for r in src.next_batch(9, 0)] == [b'{"a":1}']
    assert src.exhausted and src.next_batch(9, 0) == []


def test_list_source_abort_raises_after_handing_out_what_came_before():
    src = ListSource(["a", ListSource.ABORT, "b"])
    assert [r.payload for r in src.next_batch(5, 0)] == [b"a"]
    with pytest.raises(SourceError, match="ListSource aborted at index 1"):
        src.next_batch(5, 0)


def test_list_source_seek_and_commit():
    src = ListSource(["a", "b", "c"])
    src.next_batch(2, 0)
    src.commit(src.position(), "000000000001")
    src.seek({"index": 1})
    assert [r.payload for r in src.next_batch(5, 0)] == [b"b", b"c"]
    assert src.commits == [({"index": 2}, "000000000001")]
    with pytest.raises(SourceError, match="cannot seek ListSource"):
        src.seek({"index": 9})


def test_memory_sink_flush_truncate_and_close():
    sink = MemorySink()
    sink.write(b'{"a":1}')
    sink.flush()
    sink.write(b'{"a":2}', key=b"k")
    assert sink.position() == {"count": 1} and sink.calls == [(b'{"a":2}', b"k", None)]
    sink.truncate({"count": 0})
    assert sink.values() == []
    with pytest.raises(SinkError, match="cannot truncate MemorySink"):
        sink.truncate({"count": 5})
    sink.close()
    with pytest.raises(SinkError, match="MemorySink is closed"):
        sink.write(b"x")


def test_demo_source_matches_the_generator_and_seeks():
    src = DemoSource("agrawal", seed=7, n=50, shape="nested")
    records = []
    while not src.exhausted:
        records.extend(src.next_batch(16, 0))
    expected = list(agrawal(7, 50))
    import orjson

    assert [orjson.loads(r.payload) for r in records] == [{"x": x, "y": y} for x, y in expected]
    again = DemoSource("agrawal", seed=7, n=50, shape="nested")
    again.seek({"index": 20})
    assert [r.payload for r in again.next_batch(100, 0)] == [r.payload for r in records[20:]]
    assert DemoSource("categorical", n=1).name == "categorical_stream"
    with pytest.raises(ConfigError, match="unknown demo stream 'sea'"):
        DemoSource("sea")
