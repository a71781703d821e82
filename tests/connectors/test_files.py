"""File and stream connectors: line splitting across blocks, positions, seek, follow mode,
over-long lines, stdin through a pipe, durable sink positions and truncation; the registry."""

from __future__ import annotations

import os
import threading
import time

import pytest

import stream_nb.connectors.files as files
from stream_nb import ConfigError, SinkError, SourceError
from stream_nb.connectors.files import FileSink, FileSource, StdinSource, StreamSink
from stream_nb.connectors.memory import ListSource
from stream_nb.connectors.registry import open_sink, open_source, register, scheme_of


def _drain(src, n=7):
    out = []
    while not src.exhausted:
        out.extend(src.next_batch(n, 0.01))
    return out


def test_lines_split_across_small_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_BLOCK_BYTES", 5)
    lines = [b'{"a":1}', b"", b'{"bb":22}', b"x" * 13, b"\r", b"last"]
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines))  # no trailing newline: the last line still counts
    records = _drain(FileSource(path))
    assert [r.payload for r in records] == lines
    offsets = [0]
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len(line) + 1)
    assert [r.position for r in records] == [
        {"line": i + 1, "offset": o} for i, o in enumerate(offsets)
    ]


def test_position_and_seek_resume_exactly(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(b'{"i":%d}\n' % i for i in range(100)))
    src = FileSource(path)
    first = src.next_batch(37, 0)
    position = src.position()
    assert position == {"line": 37, "offset": sum(len(r.payload) + 1 for r in first)}
    rest = _drain(src)
    again = FileSource(path)
    again.seek(position)
    assert [r.payload for r in _drain(again)] == [r.payload for r in rest]
    assert [r.position for r in FileSource(path).next_batch(100, 0)][37:] == [
        r.position for r in rest
    ]


def test_seek_errors(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"{}\n")
    with pytest.raises(SourceError, match="the file has only 3 bytes"):
        FileSource(path).seek({"line": 9, "offset": 99})
    with pytest.raises(SourceError, match="expected \\{'line': n, 'offset': bytes\\}"):
        FileSource(path).seek({"index": 1})
    with pytest.raises(SourceError, match="cannot open source file"):
        FileSource(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("block", [3, 64, 1 << 16])
def test_over_long_lines_are_cut_not_held(tmp_path, monkeypatch, block):
    monkeypatch.setattr(files, "_BLOCK_BYTES", block)
    path = tmp_path / "in.jsonl"
    long_line = b'{"a":"' + b"z" * 500 + b'"}'
    path.write_bytes(b'{"a":1}\n' + long_line + b'\n{"a":2}\n' + long_line)
    records = _drain(FileSource(path, max_line_bytes=20))
    assert [len(r.payload) for r in records] == [7, 21, 7, 21]
    assert records[1].payload == long_line[:21]
    assert [r.position["line"] for r in records] == [1, 2, 3, 4]
    assert records[2].position["offset"] == 8 + len(long_line) + 1


def test_follow_mode_waits_for_complete_lines(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":')
    src = FileSource(path, follow=True)
    assert [r.payload for r in src.next_batch(10, 0.05)] == [b'{"a":1}']
    assert src.next_batch(10, 0.05) == [] and not src.exhausted
    with open(path, "ab") as f:
        f.write(b"2}\n")
    assert [r.payload for r in src.next_batch(10, 0.5)] == [b'{"a":2}']
    assert src.position() == {"line": 2, "offset": 16}


def test_stdin_source_over_a_pipe_respects_timeout():
    read_fd, write_fd = os.pipe()
    src = StdinSource(fd=read_fd)
    start = time.monotonic()
    assert src.next_batch(10, 0.05) == []
    assert time.monotonic() - start < 5  # returned instead of blocking forever
    os.write(write_fd, b'{"a":1}\n{"a":2}\n')
    assert [r.payload for r in src.next_batch(10, 1.0)] == [b'{"a":1}', b'{"a":2}']
    writer = threading.Timer(0.05, lambda: (os.write(write_fd, b'{"a":3}'), os.close(write_fd)))
    writer.start()
    got = []
    while not src.exhausted:
        got.extend(src.next_batch(10, 0.5))
    writer.join()
    assert [r.payload for r in got] == [b'{"a":3}'] and not src.seekable
    os.close(read_fd)


def test_file_sink_durable_position_and_truncate(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_bytes(b"old\n")
    sink = FileSink(path, buffer_bytes=10)
    assert sink.position() == {"bytes": 4}
    sink.write(b"a" * 12)  # over the buffer: written out, not yet durable
    assert path.read_bytes() == b"old\n" + b"a" * 12 + b"\n" and sink.position() == {"bytes": 4}
    sink.flush()
    assert sink.position() == {"bytes": 17}
    sink.write(b"b")
    sink.flush()
    sink.truncate({"bytes": 17})
    sink.write(b"c")
    sink.close()
    assert path.read_bytes() == b"old\n" + b"a" * 12 + b"\nc\n"


def test_file_sink_truncate_errors(tmp_path):
    sink = FileSink(tmp_path / "out.jsonl")
    with pytest.raises(SinkError, match="has 0 bytes but the snapshot says 10 were durable"):
        sink.truncate({"bytes": 10})
    with pytest.raises(SinkError, match="expected \\{'bytes': n\\}"):
        sink.truncate({"count": 1})
    with pytest.raises(SinkError, match="cannot open sink file"):
        FileSink(tmp_path / "no" / "dir" / "out.jsonl")


def test_stream_sink_writes_lines(capfd):
    sink = StreamSink("stdout")
    sink.write(b'{"a":1}')
    sink.flush()
    sink.close()
    assert capfd.readouterr().out == '{"a":1}\n' and sink.position() is None
    with pytest.raises(ConfigError, match="stream must be 'stdout' or 'stderr'"):
        StreamSink("stdlog")


def test_registry_urls(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"{}\n")
    assert isinstance(open_source(str(path)), FileSource)
    assert isinstance(open_source(f"file:{path}"), FileSource)
    assert isinstance(open_source("-"), StdinSource)
    assert isinstance(open_sink(f"file://{tmp_path}/o.jsonl"), FileSink)
    assert isinstance(open_sink("stderr"), StreamSink)
    assert scheme_of("kafka://h:1/t") == "kafka" and scheme_of("C:/data.jsonl") == "file"
    demo = open_source("demo:agrawal?seed=1&n=3")
    assert len(demo.next_batch(10, 0)) == 3 and demo.exhausted
    with pytest.raises(ConfigError, match="no source connector for 'nope://x'"):
        open_source("nope://x")
    with pytest.raises(ConfigError, match="follow mode needs a file source"):
        open_source("-", {"follow": True})
    with pytest.raises(ConfigError, match="unknown demo option"):
        open_source("demo:agrawal?speed=3")
    register("testlist", source=lambda url, options: ListSource([url.encode()]))
    assert open_source("testlist:abc").next_batch(1, 0)[0].payload == b"testlist:abc"
    with pytest.raises(ConfigError, match="needs a source and/or a sink factory"):
        register("empty")


def test_file_sink_on_a_device_is_neither_fsynced_nor_truncated():
    sink = FileSink(os.devnull)
    sink.write(b'{"a":1}')
    sink.flush()
    assert sink.position() is None
    sink.truncate({"bytes": 0})  # nothing to do, no error
    sink.close()


def test_next_block_matches_next_batch(tmp_path, monkeypatch):
    """Blocks (the engine's column path) carry the same lines, positions and source
    position as records, also across an over-long line."""
    monkeypatch.setattr(files, "_BLOCK_BYTES", 7)
    lines = [b'{"a":1}', b"y" * 40, b"", b'{"b":2}', b"tail"]
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    by_records, by_blocks = FileSource(path, max_line_bytes=16), FileSource(path, max_line_bytes=16)
    while not by_records.exhausted:
        records = by_records.next_batch(2, 0.01)
        block = by_blocks.next_block(2, 0.01)
        assert block is not None and block.records() == records
        assert [r.position for r in records] == block.positions()
        assert by_records.position() == by_blocks.position()
    assert by_blocks.exhausted and by_blocks.next_block(2, 0.01) is None
    assert by_blocks.position() == {"line": 5, "offset": path.stat().st_size}


@pytest.mark.parametrize("block", [3, 1 << 18])
def test_an_unterminated_last_line_is_one_event_and_its_completion_is_skipped(
    tmp_path, monkeypatch, caplog, block
):
    monkeypatch.setattr(files, "_BLOCK_BYTES", block)
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":2}\n{"a":3')  # a writer was mid-line
    src = FileSource(path)
    records = _drain(src)
    assert [r.payload for r in records] == [b'{"a":1}', b'{"a":2}', b'{"a":3']
    position = src.position()
    assert position == {"line": 3, "offset": 22, "unterminated": True}
    with open(path, "ab") as f:
        f.write(b'}\n{"a":4}\n{"a":5}\n')  # ... and finished it
    again = FileSource(path)
    again.seek(position)
    rest = _drain(again)
    # line 3 was handed out already: its completion is not a fourth line
    assert [(r.payload, r.position) for r in rest] == [
        (b'{"a":4}', {"line": 4, "offset": 24}),
        (b'{"a":5}', {"line": 5, "offset": 32}),
    ]
    assert again.position() == {"line": 5, "offset": 40}
    assert "line 3 of" in caplog.text
    assert "the 1 byte(s) appended to it since are skipped" in caplog.text


def test_a_position_after_an_unterminated_line_holds_until_its_newline(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a":1}\n{"a"')
    src = FileSource(path)
    _drain(src)
    position = src.position()
    with open(path, "ab") as f:
        f.write(b":2")  # grown, still no newline
    follower = FileSource(path, follow=True)
    follower.seek(position)
    assert follower.next_batch(10, 0.05) == []
    assert follower.position() == position  # a checkpoint now resumes the same way
    with open(path, "ab") as f:
        f.write(b'}\n{"a":3}\n{"a":4')
    got = follower.next_batch(10, 0.2)
    assert [(r.payload, r.position) for r in got] == [(b'{"a":3}', {"line": 3, "offset": 16})]
    assert follower.position() == {"line": 3, "offset": 24}  # line 4 has no newline yet


def test_following_never_splits_a_line_written_in_pieces(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"")
    src = FileSource(path, follow=True)
    seen = []
    for piece in (b'{"a":', b"1", b'}\n{"b"', b":2}", b"\n"):
        with open(path, "ab") as f:
            f.write(piece)
        seen.extend(src.next_batch(10, 0.05))
    assert [(r.payload, r.position) for r in seen] == [
        (b'{"a":1}', {"line": 1, "offset": 0}),
        (b'{"b":2}', {"line": 2, "offset": 8}),
    ]
    assert src.position() == {"line": 2, "offset": 16}
