"""Crash-safe snapshots: atomic writes, a checksum, the previous one kept, no pickle.

File format (``snapshot-<seq>.json``), two parts::

    {"format": "stream-nb/snapshot", "version": 1, "sha256": "<hex>", "length": N}\\n
    <N bytes: the body, one JSON object>

The header is checked first, then the body's length and SHA-256, and only then
the body is parsed (with orjson: plain data, safe from untrusted storage).

Writing: body and header go to ``.snapshot-<seq>.tmp``, which is fsynced,
renamed atomically over its final name, and the directory is fsynced so the
rename itself is durable. Only then are snapshots older than the ``keep``
newest deleted. Restoring walks the snapshots newest first and returns the
first valid one; each invalid one is logged and listed in
:attr:`Checkpointer.corrupt`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from stream_nb._exceptions import CheckpointError, ConfigError, CorruptCheckpointError

__all__ = ["SNAPSHOT_FORMAT", "SNAPSHOT_VERSION", "Checkpointer", "read_snapshot"]

SNAPSHOT_FORMAT = "stream-nb/snapshot"
SNAPSHOT_VERSION = 1

_NAME = re.compile(r"^snapshot-(\d{12})\.json$")
_log = logging.getLogger("stream_nb.checkpoint")


def encode_snapshot(body: Mapping[str, Any]) -> bytes:
    """Header line + body bytes, as written to disk.

    Examples
    --------
    >>> data = encode_snapshot({"a": 1})
    >>> decode_snapshot(data)
    {'a': 1}
    """
    try:
        payload = orjson.dumps(body)
    except TypeError as exc:
        raise CheckpointError(f"snapshot body is not JSON-able: {exc}") from exc
    header = {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "length": len(payload),
    }
    return orjson.dumps(header, option=orjson.OPT_APPEND_NEWLINE) + payload


def decode_snapshot(data: bytes, *, name: str = "snapshot") -> dict[str, Any]:
    """Verify and parse :func:`encode_snapshot` output.

    Raises
    ------
    CorruptCheckpointError
        On any format, version, length or checksum mismatch.
    """
    newline = data.find(b"\n")
    try:
        header = orjson.loads(data[:newline]) if newline > 0 else None
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != SNAPSHOT_FORMAT:
        raise CorruptCheckpointError(f"{name}: not a stream-nb snapshot (bad header)")
    if header.get("version") != SNAPSHOT_VERSION:
        raise CorruptCheckpointError(
            f"{name}: unsupported snapshot version {header.get('version')!r}; "
            f"this stream-nb reads version {SNAPSHOT_VERSION}"
        )
    payload = data[newline + 1 :]
    if len(payload) != header.get("length"):
        raise CorruptCheckpointError(
            f"{name}: body is {len(payload)} bytes, header says {header.get('length')!r} "
            "(truncated write?)"
        )
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise CorruptCheckpointError(f"{name}: checksum mismatch (corrupted file)")
    try:
        body = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise CorruptCheckpointError(f"{name}: body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise CorruptCheckpointError(f"{name}: body must be a JSON object")
    return body


def read_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and verify one snapshot file, or the newest valid one of a directory."""
    p = Path(path)
    if p.is_dir():
        found = Checkpointer(p, create=False).latest()
        if found is None:
            raise CheckpointError(f"no valid snapshot in directory {str(p)!r}")
        return found[1]
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"cannot read snapshot {str(p)!r}: {exc}") from exc
    return decode_snapshot(data, name=str(p))


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Checkpointer:
    """Snapshots in one directory, newest-valid-first restore.

    Parameters
    ----------
    directory
        Where snapshots live (created if missing).
    keep
        How many snapshots to keep (>= 2: the newest and at least one previous).

    Examples
    --------
    >>> import tempfile
    >>> cp = Checkpointer(tempfile.mkdtemp())
    >>> cp.write({"n": 1}), cp.write({"n": 2})
    ('000000000001', '000000000002')
    >>> cp.latest()
    ('000000000002', {'n': 2})
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, keep: int = 2, create: bool = True
    ) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 2:
            raise ConfigError(f"keep must be an integer >= 2 (newest + previous), got {keep!r}")
        self.directory = Path(directory)
        self.keep = keep
        #: ``(file name, error message)`` of every invalid snapshot met by :meth:`latest`.
        self.corrupt: list[tuple[str, str]] = []
        if create:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CheckpointError(
                    f"cannot create checkpoint directory {str(self.directory)!r}: {exc}"
                ) from exc

    def _sequence(self) -> list[tuple[int, Path]]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            m = _NAME.match(name)
            if m:
                out.append((int(m.group(1)), self.directory / name))
        out.sort(reverse=True)
        return out

    def write(self, body: Mapping[str, Any]) -> str:
        """Write a new snapshot atomically and return its id (a zero-padded sequence number).

        Raises
        ------
        CheckpointError
            If the snapshot cannot be encoded or written (the previous ones are untouched).
        """
        existing = self._sequence()
        seq = existing[0][0] + 1 if existing else 1
        snapshot_id = f"{seq:012d}"
        data = encode_snapshot(body)
        final = self.directory / f"snapshot-{snapshot_id}.json"
        tmp = self.directory / f".snapshot-{snapshot_id}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, final)
            _fsync_dir(self.directory)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise CheckpointError(f"cannot write snapshot {str(final)!r}: {exc}") from exc
        # Keep the ``keep - 1`` newest snapshots not known to be corrupt (plus the new
        # one); corrupt files newer than those stay as evidence until they age out.
        corrupt = {name for name, _ in self.corrupt}
        valid = [e for e in existing if e[1].name not in corrupt]
        kept = valid[: self.keep - 1]
        oldest_kept = kept[-1][0] if kept else seq
        for s, old in existing:
            if (s, old) in kept or s >= oldest_kept:
                continue
            try:
                old.unlink()
            except OSError as exc:  # pragma: no cover - only logged
                _log.warning("cannot delete old snapshot %s: %s", old, exc)
        return snapshot_id

    def latest(self) -> tuple[str, dict[str, Any]] | None:
        """``(id, body)`` of the newest valid snapshot, or ``None`` if there is none.

        Invalid snapshots are logged at WARNING, recorded in :attr:`corrupt`
        and skipped in favour of the previous one.
        """
        for seq, path in self._sequence():
            try:
                return f"{seq:012d}", decode_snapshot(path.read_bytes(), name=path.name)
            except (CorruptCheckpointError, OSError) as exc:
                self.corrupt.append((path.name, str(exc)))
                _log.warning("skipping invalid snapshot %s: %s", path.name, exc)
        return None

    def clean_temporary(self) -> None:
        """Delete ``.snapshot-*.tmp`` files left by a crash during a write."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return
        for name in names:
            if name.startswith(".snapshot-") and name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    (self.directory / name).unlink()
