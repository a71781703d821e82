"""JSON-lines connectors: files (seekable, optionally followed), stdin, stdout, stderr.

Sources read blocks of bytes with ``os.read`` and split them into lines in
C (``bytes.split``); a line longer than ``max_line_bytes`` is never held in
memory whole: its first ``max_line_bytes + 1`` bytes are handed out (so the
decoder rejects it as ``line_too_long``) and the rest is skipped. Record
positions are ``{"line": n, "offset": b}``: the 1-based line number and the
byte offset where the line starts. ``position()`` is ``{"line": lines handed
out, "offset": bytes handed out}``, i.e. where reading resumes after a
:meth:`FileSource.seek`.

A line is never split into two events. While following a file, a last line
without a newline stays unread until its newline arrives. At the end of a
file that is not followed, such a line is one complete event, and the
position says so (``"unterminated": true``): if the file later grows and is
read again from that position, the bytes that complete the line belong to the
event already handed out and are skipped up to its newline (with a warning),
so the next line is the next event and line numbers stay exact.

Sinks buffer records and write them with one ``os.write`` per
``buffer_bytes``; :meth:`FileSink.flush` also fsyncs, and
:meth:`FileSink.position` is the durable byte length, so a checkpoint can pin
it and :meth:`FileSink.truncate` can cut output written after it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import stat
import sys
import time
from itertools import accumulate
from typing import Any

from stream_nb._exceptions import ConfigError, SinkError, SourceError
from stream_nb.connectors.base import Headers, LineBlock, Record, Sink, Source, whole_number

__all__ = ["FileSink", "FileSource", "StdinSource", "StreamSink"]

#: Bytes per ``os.read`` call: large enough to amortise the call, small enough for the cache.
_BLOCK_BYTES = 1 << 18
#: Sleep between polls of a followed file at its end.
_FOLLOW_POLL_SECONDS = 0.05
#: Bytes buffered by sinks before an ``os.write``.
_BUFFER_BYTES = 1 << 16

_log = logging.getLogger("stream_nb.connectors.files")


def _check_limit(max_line_bytes: Any) -> int:
    limit = whole_number(max_line_bytes)
    if limit is None or limit < 1:
        raise ConfigError(f"max_line_bytes must be a positive integer, got {max_line_bytes!r}")
    return limit


class _LineSource(Source):
    """Line splitting over a file descriptor (shared by files and stdin)."""

    def __init__(self, fd: int, *, max_line_bytes: int, follow: bool, name: str) -> None:
        self._fd = fd
        self._max = _check_limit(max_line_bytes)
        self._follow = follow
        self.name = name
        self._reset(0, 0)

    def _reset(self, line: int, offset: int) -> None:
        # the lines split but not handed out yet: payloads and start offsets (their
        # line numbers are consecutive, ending at self._line)
        self._payloads: list[bytes] = []
        self._offsets: list[int] = []
        self._line = line  # lines split so far
        self._start = offset  # offset where the current partial line starts
        self._read = offset  # offset up to which the input was read
        self._buf = b""  # partial line (not over the limit)
        self._discarding = False  # inside an over-long line
        self._prefix = b""  # first max+1 bytes of that line
        self._skipped = 0  # bytes of that line read so far
        self._eof = False
        self._pos_line = line
        self._pos_offset = offset
        # the last line split had no newline (end of input): the position says so
        self._last_open = False
        self._pos_open = False
        # after a seek to an unterminated line: skipping the bytes that complete it
        self._continuing = False
        self._continued = 0

    # ------------------------------------------------------------------ splitting
    def _feed(self, block: bytes) -> None:
        if self._continuing:
            i = block.find(b"\n")
            if i < 0:
                self._continued += len(block)
                self._start += len(block)
                return
            self._continued += i
            self._start += i + 1
            self._continuing = False
            if self._continued:
                _log.warning(
                    "line %d of %s had no newline when it was read as a complete event; "
                    "the %d byte(s) appended to it since are skipped",
                    self._line,
                    self.name,
                    self._continued,
                )
            block = block[i + 1 :]
        if self._discarding:
            i = block.find(b"\n")
            if i < 0:
                self._skipped += len(block)
                return
            self._skipped += i + 1
            self._finish_long()
            block = block[i + 1 :]
        parts = block.split(b"\n")
        if self._buf:  # (no copy of the whole block to prepend the partial line)
            parts[0] = self._buf + parts[0]
        tail = parts.pop()
        if parts:
            lengths = list(map(len, parts))
            # offsets[i]: where line i starts; the last one: where the next line starts
            offsets = list(accumulate(map((1).__add__, lengths), initial=self._start))
            self._start = offsets.pop()
            limit = self._max
            if max(lengths) > limit:
                parts = [part[: limit + 1] for part in parts]
            self._payloads += parts
            self._offsets += offsets
            self._line += len(parts)
        if len(tail) > self._max:
            self._discarding = True
            self._prefix = tail[: self._max + 1]
            self._skipped = len(tail)
            self._buf = b""
        else:
            self._buf = tail

    def _finish_long(self) -> None:
        self._line += 1
        self._payloads.append(self._prefix)
        self._offsets.append(self._start)
        self._start += self._skipped
        self._discarding = False
        self._prefix = b""
        self._skipped = 0

    def _finish_eof(self) -> None:
        """End of input: a last line without newline is a line."""
        if self._discarding:
            self._finish_long()
            self._last_open = True
        elif self._buf:
            self._line += 1
            self._payloads.append(self._buf)
            self._offsets.append(self._start)
            self._start += len(self._buf)
            self._buf = b""
            self._last_open = True
        self._eof = True

    def _wait(self, timeout: float) -> bool:
        """Whether data (or EOF) can be read without blocking longer than ``timeout``."""
        return True

    def _fill(self, timeout: float) -> bool:
        """Read one block; ``False`` when nothing came."""
        if self._eof:
            return False
        if not self._wait(timeout):
            return False
        try:
            block = os.read(self._fd, _BLOCK_BYTES)
        except OSError as exc:
            raise SourceError(f"cannot read {self.name}: {exc}") from exc
        if block:
            self._read += len(block)
            self._feed(block)
            return True
        if self._follow:
            time.sleep(min(timeout, _FOLLOW_POLL_SECONDS))
            return False
        self._finish_eof()
        return True

    # ------------------------------------------------------------------ Source
    def next_batch(self, max_records: int, timeout: float) -> list[Record]:
        block = self.next_block(max_records, timeout)
        return [] if block is None else block.records()

    def next_block(self, max_records: int, timeout: float) -> LineBlock | None:
        """:meth:`next_batch` as one :class:`~stream_nb.connectors.base.LineBlock` (no per-line
        :class:`Record`), or ``None`` when nothing came."""
        deadline = time.monotonic() + timeout
        payloads = self._payloads
        while len(payloads) < max_records and not self._eof:
            # Block only while nothing is ready; otherwise take what is available now.
            wait = 0.0 if payloads else max(0.0, deadline - time.monotonic())
            if not self._fill(wait) and (payloads or time.monotonic() >= deadline):
                break
        stop = min(len(payloads), max_records)
        if stop == 0:
            return None
        first = self._line - len(payloads) + 1
        offsets = self._offsets
        block = LineBlock(payloads[:stop], first, offsets[:stop])
        if stop < len(payloads):  # the source position: where the next line starts
            self._pos_line, self._pos_offset = first + stop - 1, offsets[stop]
            self._pos_open = False
        else:
            self._pos_line, self._pos_offset = self._line, self._start
            self._pos_open = self._last_open
        # Drop what was handed out: ready lines stay under one batch plus one block.
        del payloads[:stop]
        del offsets[:stop]
        return block

    @property
    def exhausted(self) -> bool:
        return self._eof and not self._payloads

    def position(self) -> dict[str, Any]:
        if self._pos_open:
            return {"line": self._pos_line, "offset": self._pos_offset, "unterminated": True}
        return {"line": self._pos_line, "offset": self._pos_offset}


class FileSource(_LineSource):
    """A JSON-lines file, seekable by byte offset; optionally followed like ``tail -f``.

    Parameters
    ----------
    path
        The file.
    follow
        Keep waiting for new lines at the end of the file instead of ending
        (a last line is only handed out once its newline was written; without
        ``follow`` it is handed out at the end of the file, see the module
        docstring).
    max_line_bytes
        Longest line handed out whole.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "events.jsonl")
    >>> _ = open(path, "wb").write(b'{"a":1}\\n\\n{"a":2}')
    >>> src = FileSource(path)
    >>> for r in src.next_batch(10, 0):
    ...     print(r.payload, r.position)
    b'{"a":1}' {'line': 1, 'offset': 0}
    b'' {'line': 2, 'offset': 8}
    b'{"a":2}' {'line': 3, 'offset': 9}
    >>> src.position(), src.exhausted  # the last line had no newline
    ({'line': 3, 'offset': 16, 'unterminated': True}, True)
    >>> src.seek({"line": 1, "offset": 8}); [r.payload for r in src.next_batch(10, 0)]
    [b'', b'{"a":2}']
    >>> src.close()

    Read again from that position once the file has grown, the bytes that
    completed line 3 are skipped (line 3 was already an event):

    >>> _ = open(path, "ab").write(b'  \\n{"a":3}\\n')
    >>> src = FileSource(path)
    >>> src.seek({'line': 3, 'offset': 16, 'unterminated': True})
    >>> [(r.payload, r.position) for r in src.next_batch(10, 0)]
    [(b'{"a":3}', {'line': 4, 'offset': 19})]
    >>> src.close()
    """

    seekable = True

    def __init__(
        self, path: str | os.PathLike[str], *, follow: bool = False, max_line_bytes: int = 1 << 20
    ) -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise SourceError(f"cannot open source file {str(path)!r}: {exc}") from exc
        self.path = os.fspath(path)
        super().__init__(fd, max_line_bytes=max_line_bytes, follow=follow, name=repr(self.path))

    def seek(self, position: dict[str, Any]) -> None:
        line, offset = whole_number(position.get("line")), whole_number(position.get("offset"))
        unterminated = position.get("unterminated", False)
        if line is None or offset is None or not isinstance(unterminated, bool):
            raise SourceError(
                f"cannot seek {self.path!r} to {position!r}; "
                "expected {'line': n, 'offset': bytes}"
            )
        size = os.fstat(self._fd).st_size
        if offset > size:
            raise SourceError(
                f"cannot seek {self.path!r} to byte {offset}: the file has only {size} bytes "
                "(was it replaced or truncated? use a new --checkpoint-dir)"
            )
        os.lseek(self._fd, offset, os.SEEK_SET)
        self._reset(line, offset)
        # the line before ``offset`` was read without its newline: what completes it since
        # belongs to that line, not to a new one
        self._continuing = self._pos_open = unterminated

    def backlog_bytes(self) -> int | None:
        """Bytes of the file after the records handed out so far: what is left to read,
        plus the lines read but not handed out yet. A last line that was read and waits
        for its newline (``follow``) is not counted: there is nothing to process until
        it is complete. ``None`` once closed, or for a file that is not a regular one
        (a FIFO has no size).

        Cheap (one ``fstat``) and safe from another thread: the metrics server reads it
        at every scrape (``stream_nb_source_backlog_bytes``).

        Examples
        --------
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "events.jsonl")
        >>> _ = open(path, "wb").write(b'{"a":1}\\n{"a":2}\\n{"a":')
        >>> src = FileSource(path, follow=True)
        >>> src.backlog_bytes()
        21
        >>> [r.payload for r in src.next_batch(1, 0)], src.backlog_bytes()
        ([b'{"a":1}'], 8)
        >>> _ = src.next_batch(10, 0); src.backlog_bytes()  # '{"a":' waits for its end
        0
        >>> src.close(); src.backlog_bytes() is None
        True
        """
        fd = self._fd
        if fd < 0:
            return None
        try:
            status = os.fstat(fd)
        except OSError:
            return None
        if not stat.S_ISREG(status.st_mode):
            return None
        # unread bytes, plus the complete lines between the position and the partial line
        split = self._start - self._pos_offset
        return max(0, status.st_size - self._read + split)

    def close(self) -> None:
        fd, self._fd = self._fd, -1  # (a scrape reading backlog_bytes sees -1 first)
        if fd >= 0:
            os.close(fd)


class StdinSource(_LineSource):
    """JSON lines from standard input (not seekable; waits with ``select``, so a stop
    request is honoured within ``timeout`` even when no input arrives)."""

    def __init__(self, *, max_line_bytes: int = 1 << 20, fd: int | None = None) -> None:
        super().__init__(
            0 if fd is None else fd,  # the process's standard input descriptor
            max_line_bytes=max_line_bytes,
            follow=False,
            name="stdin",
        )

    def _wait(self, timeout: float) -> bool:
        try:
            readable, _, _ = select.select([self._fd], [], [], timeout)
        except (OSError, ValueError):  # e.g. not a selectable descriptor: just block
            return True
        return bool(readable)

    def close(self) -> None:
        """Leave the process's stdin open."""


class _FdSink(Sink):
    """Buffered newline-terminated records to a file descriptor."""

    #: Line sinks ignore message keys: the engine need not compute them.
    uses_keys = False

    def __init__(self, fd: int, *, name: str, buffer_bytes: int) -> None:
        self._fd = fd
        self.name = name
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._limit = buffer_bytes
        self._written = 0  # bytes handed to the OS

    def write(
        self, value: bytes, *, key: bytes | None = None, headers: Headers | None = None
    ) -> None:
        self._buffer.append(value)
        self._buffered += len(value) + 1
        if self._buffered >= self._limit:
            self._write_out()

    def write_many(self, values: list[bytes]) -> None:
        self._buffer.extend(values)
        self._buffered += sum(map(len, values)) + len(values)
        if self._buffered >= self._limit:
            self._write_out()

    def write_lines(self, block: bytes) -> None:
        self._buffer.append(block)  # joined with "\n" like single records
        self._buffered += len(block) + 1
        if self._buffered >= self._limit:
            self._write_out()

    def _write_out(self) -> None:
        if not self._buffer:
            return
        buffer = self._buffer
        self._buffer = []
        self._buffered = 0
        if len(buffer) == 1:  # e.g. a whole batch's block: written as it is, no copy
            pieces = [buffer[0], b"\n"]
        else:
            buffer.append(b"")  # the last newline, in the one copy join makes
            pieces = [b"\n".join(buffer)]
        try:
            for piece in pieces:
                view = memoryview(piece)
                while view:
                    view = view[os.write(self._fd, view) :]
                self._written += len(piece)
        except OSError as exc:
            raise SinkError(f"cannot write to {self.name}: {exc}") from exc

    def flush(self) -> None:
        self._write_out()

    def push(self) -> None:
        """Hand buffered records to the OS now (visible to readers), without fsync."""
        self._write_out()

    def close(self) -> None:
        self.flush()


class StreamSink(_FdSink):
    """Records to standard output or standard error (``flush`` writes, no fsync).

    Parameters
    ----------
    stream
        ``"stdout"`` or ``"stderr"``.
    """

    def __init__(self, stream: str = "stdout", *, buffer_bytes: int = _BUFFER_BYTES) -> None:
        if stream not in ("stdout", "stderr"):
            raise ConfigError(f"stream must be 'stdout' or 'stderr', got {stream!r}")
        target = sys.stdout if stream == "stdout" else sys.stderr
        target.flush()
        super().__init__(target.fileno(), name=stream, buffer_bytes=buffer_bytes)

    def close(self) -> None:
        with contextlib.suppress(SinkError):  # e.g. a closed pipe at shutdown
            self.flush()


class FileSink(_FdSink):
    """Records appended to a JSON-lines file; durable byte position and truncation.

    Parameters
    ----------
    path
        The file (created if missing; existing content is kept).
    fsync
        ``flush`` fsyncs (needed for crash safety; ``False`` for speed when
        crash safety does not matter).

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "out.jsonl")
    >>> sink = FileSink(path)
    >>> sink.write(b'{"a":1}'); sink.flush(); sink.position()
    {'bytes': 8}
    >>> sink.write(b'{"a":2}'); sink.flush(); sink.truncate({"bytes": 8})
    >>> open(path, "rb").read()
    b'{"a":1}\\n'
    >>> sink.close()
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync: bool = True,
        buffer_bytes: int = _BUFFER_BYTES,
    ) -> None:
        self.path = os.fspath(path)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise SinkError(f"cannot open sink file {self.path!r}: {exc}") from exc
        super().__init__(fd, name=repr(self.path), buffer_bytes=buffer_bytes)
        # A FIFO or a device (/dev/null) can be neither fsynced nor truncated.
        self._regular = stat.S_ISREG(os.fstat(fd).st_mode)
        self._fsync = fsync and self._regular
        self._written = os.fstat(fd).st_size if self._regular else 0
        self._durable = self._written

    def flush(self) -> None:
        self._write_out()
        if self._fsync and self._durable != self._written:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise SinkError(f"cannot fsync {self.name}: {exc}") from exc
        self._durable = self._written

    def position(self) -> dict[str, Any] | None:
        return {"bytes": self._durable} if self._regular else None

    def truncate(self, position: dict[str, Any]) -> None:
        if not self._regular:
            return
        size = whole_number(position.get("bytes"))
        if size is None:
            raise SinkError(f"cannot truncate {self.name} to {position!r}; expected {{'bytes': n}}")
        self._buffer = []
        self._buffered = 0
        actual = os.fstat(self._fd).st_size
        if actual < size:
            raise SinkError(
                f"{self.name} has {actual} bytes but the snapshot says {size} were durable; "
                "the file was truncated or replaced since: use a new --checkpoint-dir or "
                "restore the file"
            )
        try:
            os.ftruncate(self._fd, size)
            os.fsync(self._fd)
        except OSError as exc:
            raise SinkError(f"cannot truncate {self.name}: {exc}") from exc
        self._written = self._durable = size

    def existing_output(self) -> str | None:
        if not self._regular or not self._durable:
            return None
        return f"{self._durable} bytes in {self.name}"

    def discard(self) -> None:
        self.truncate({"bytes": 0})

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1
