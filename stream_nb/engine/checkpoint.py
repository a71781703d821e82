"""Crash-safe snapshots: atomic writes, a checksum, the previous one kept, no pickle.

File format (``snapshot-<seq>.json``), two parts::

    {"format": "stream-nb/snapshot", "version": 1, "sha256": "<hex>", "length": N}\\n
    <N bytes: the body, one JSON object>

The header is checked first, then the body's length and SHA-256, and only then
the body is parsed (with orjson: plain data, safe from untrusted storage). A
body holding integers beyond 64 bits (an event id or a label such as
``2**70``) is written with them exact and the header says so
(``"wide_ints": true``); such a body is parsed with the standard library,
which keeps them exact.

Writing: body and header go to ``.snapshot-<seq>.tmp``, which is fsynced,
renamed atomically over its final name, and the directory is fsynced so the
rename itself is durable. Only then are snapshots older than the ``keep``
newest deleted. :meth:`Checkpointer.write` can check the encoded body
before anything is written (``validate``), so a snapshot that would not
restore is never written. :meth:`Checkpointer.latest` walks the snapshots
newest first and returns the first valid one; each invalid one is logged and
listed in :attr:`Checkpointer.corrupt`.

One owner: a daemon takes :meth:`Checkpointer.lock` (an exclusive ``flock``
on ``stream-nb.lock`` in the directory, held until the process ends, released
by the kernel even on ``kill -9``) before it restores or writes anything; a
second daemon on the same directory gets a :class:`CheckpointError` naming
the holder's pid. Readers (``inspect``, ``merge``, :func:`read_snapshot`)
take no lock and never delete or rename a file. Only the owner moves an
invalid snapshot aside (:meth:`Checkpointer.reject`: renamed
``*.rejected``, never deleted).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from stream_nb._bulk import collector_paused
from stream_nb._exceptions import (
    CheckpointError,
    ConfigError,
    CorruptCheckpointError,
    NewerSnapshotError,
)
from stream_nb.engine._json import dumps_exact, loads_exact

__all__ = ["LOCK_NAME", "SNAPSHOT_FORMAT", "SNAPSHOT_VERSION", "Checkpointer", "read_snapshot"]

SNAPSHOT_FORMAT = "stream-nb/snapshot"
SNAPSHOT_VERSION = 1
#: The lock file of a checkpoint directory (holds the owner's pid).
LOCK_NAME = "stream-nb.lock"

_NAME = re.compile(r"^snapshot-(\d{12})\.json$")
_REJECTED = re.compile(r"^snapshot-(\d{12})\.json(?:\.\d+)?\.rejected$")
#: Attempts to list and read a directory whose snapshots a live daemon replaces meanwhile.
_READ_ATTEMPTS = 5
_log = logging.getLogger("stream_nb.checkpoint")


def encode_snapshot(body: Mapping[str, Any]) -> bytes:
    """Header line + body bytes, as written to disk.

    Examples
    --------
    >>> data = encode_snapshot({"a": 1})
    >>> decode_snapshot(data)
    {'a': 1}
    >>> decode_snapshot(encode_snapshot({"ids": [2**70]}))  # exact beyond 64 bits
    {'ids': [1180591620717411303424]}
    """
    wide = False
    try:
        payload = orjson.dumps(body)
    except TypeError:
        try:
            payload = dumps_exact(body)
        except TypeError as exc:
            raise CheckpointError(f"snapshot body is not JSON-able: {exc}") from exc
        wide = True
    header: dict[str, Any] = {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "length": len(payload),
    }
    if wide:
        header["wide_ints"] = True
    return orjson.dumps(header, option=orjson.OPT_APPEND_NEWLINE) + payload


def decode_snapshot(data: bytes, *, name: str = "snapshot") -> dict[str, Any]:
    """Verify and parse :func:`encode_snapshot` output.

    Raises
    ------
    CorruptCheckpointError
        On any format, version, length or checksum mismatch.
    NewerSnapshotError
        If a newer stream-nb wrote it (a higher format version).
    """
    newline = data.find(b"\n")
    try:
        header = orjson.loads(data[:newline]) if newline > 0 else None
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != SNAPSHOT_FORMAT:
        raise CorruptCheckpointError(f"{name}: not a stream-nb snapshot (bad header)")
    check_version(name, "snapshot format", header.get("version"), SNAPSHOT_VERSION)
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
        loads = loads_exact if header.get("wide_ints") is True else orjson.loads
        with collector_paused():
            body = loads(payload)
    except ValueError as exc:  # (orjson.JSONDecodeError is a ValueError)
        raise CorruptCheckpointError(f"{name}: body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise CorruptCheckpointError(f"{name}: body must be a JSON object")
    return body


def check_version(name: str, what: str, found: Any, supported: int) -> None:
    """Raise :class:`NewerSnapshotError` if ``found`` is a version above ``supported``.

    Examples
    --------
    >>> check_version("s.json", "snapshot format", 1, 1)
    >>> check_version("s.json", "snapshot format", 2, 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.NewerSnapshotError: s.json: written by a newer stream-nb ...
    """
    if isinstance(found, int) and not isinstance(found, bool) and found > supported:
        raise NewerSnapshotError(
            f"{name}: written by a newer stream-nb ({what} version {found}; this stream-nb "
            f"reads version {supported}): upgrade stream-nb to read it, or move the "
            "checkpoint directory aside to start a new model"
        )


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
    create
        Create the directory if missing (``False`` for readers).

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
        self._lock_fd = -1
        if create:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CheckpointError(
                    f"cannot create checkpoint directory {str(self.directory)!r}: {exc}"
                ) from exc

    # ------------------------------------------------------------------ one owner
    def lock(self) -> None:
        """Become the directory's only owner until :meth:`unlock` or the process ends.

        An exclusive, non-blocking ``flock`` on :data:`LOCK_NAME`, which then
        holds this process's pid. The kernel releases it when the process
        ends, however it ends. Calling it again is a no-op.

        Raises
        ------
        CheckpointError
            If another process (or another :class:`Checkpointer` of this one)
            holds the directory; the message names the holder's pid.

        Examples
        --------
        >>> import tempfile
        >>> directory = tempfile.mkdtemp()
        >>> first, second = Checkpointer(directory), Checkpointer(directory)
        >>> first.lock()
        >>> second.lock()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        stream_nb._exceptions.CheckpointError: checkpoint directory ... is in use by ... (pid ...
        >>> first.unlock(); second.lock(); second.unlock()
        """
        if self._lock_fd >= 0:
            return
        import fcntl  # POSIX only; imported here so readers work anywhere

        path = self.directory / LOCK_NAME
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise CheckpointError(f"cannot open lock file {str(path)!r}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = ""
            with contextlib.suppress(OSError, ValueError):
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise CheckpointError(f"cannot lock {str(path)!r}: {exc}") from exc
            raise CheckpointError(
                f"checkpoint directory {str(self.directory)!r} is in use by another "
                f"stream-nb run (pid {holder or 'unknown'}); stop that process first, or give "
                "this one its own --checkpoint-dir"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:
            os.close(fd)
            raise CheckpointError(f"cannot write lock file {str(path)!r}: {exc}") from exc
        self._lock_fd = fd
        self.check_lock()  # the file locked is the one at the path (not removed meanwhile)

    def check_lock(self) -> None:
        """Check that the lock file this object holds is still the one in the directory.

        A lock file removed by hand (or the directory replaced) would let a second
        daemon lock a new file and run beside this one; :meth:`write_encoded`
        checks before every snapshot, so the first one stops instead.

        Raises
        ------
        CheckpointError
            If the lock file was removed or replaced.
        """
        if self._lock_fd < 0:
            return
        path = self.directory / LOCK_NAME
        try:
            same = os.stat(path).st_ino == os.fstat(self._lock_fd).st_ino
        except OSError:
            same = False
        if not same:
            self.unlock()
            raise CheckpointError(
                f"lock file {str(path)!r} was removed or replaced while this process held "
                "it, so another stream-nb run may own the directory now; stopping. Never "
                "delete the lock file of a running daemon"
            )

    def unlock(self) -> None:
        """Release :meth:`lock` (the lock file stays; it only holds the last pid)."""
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    @property
    def locked(self) -> bool:
        """Whether this object holds the directory's lock."""
        return self._lock_fd >= 0

    # ------------------------------------------------------------------ listing
    def _names(self) -> list[str]:
        try:
            return os.listdir(self.directory)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise CheckpointError(
                f"cannot list checkpoint directory {str(self.directory)!r}: {exc}"
            ) from exc

    def _sequence(self) -> list[tuple[int, Path]]:
        names = self._names()
        out = []
        for name in names:
            m = _NAME.match(name)
            if m:
                out.append((int(m.group(1)), self.directory / name))
        out.sort(reverse=True)
        return out

    def snapshots(self) -> list[tuple[str, Path]]:
        """``(id, path)`` of every snapshot file, newest first (valid or not)."""
        return [(f"{seq:012d}", path) for seq, path in self._sequence()]

    def rejected(self) -> list[str]:
        """Names of the snapshots moved aside by :meth:`reject`."""
        return sorted(name for name in self._names() if _REJECTED.match(name))

    def read(self, path: Path) -> dict[str, Any]:
        """Read and verify one snapshot file of this directory.

        Raises
        ------
        CorruptCheckpointError
            If it cannot be read or fails its format or checksum validation.
        """
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CorruptCheckpointError(f"{path.name}: cannot read: {exc}") from exc
        return decode_snapshot(data, name=path.name)

    def reject(self, path: Path, reason: str) -> Path:
        """Move an invalid snapshot aside (``<name>.rejected``) and log why; never deletes it.

        Only the owner (:meth:`lock`) should call it. Returns the new path.
        """
        target = path.with_name(path.name + ".rejected")
        n = 0
        while target.exists():
            n += 1
            target = path.with_name(f"{path.name}.{n}.rejected")
        try:
            os.replace(path, target)
            _fsync_dir(self.directory)
        except OSError as exc:
            raise CheckpointError(
                f"cannot move invalid snapshot {str(path)!r} aside: {exc}; move or delete it "
                "by hand"
            ) from exc
        _log.warning("invalid snapshot %s moved aside as %s: %s", path.name, target.name, reason)
        return target

    def _next_sequence(self, existing: list[tuple[int, Path]]) -> int:
        top = existing[0][0] if existing else 0
        for name in self.rejected():
            m = _REJECTED.match(name)
            if m:
                top = max(top, int(m.group(1)))
        return top + 1

    # ------------------------------------------------------------------ writing
    def write(
        self,
        body: Mapping[str, Any],
        *,
        validate: Callable[[dict[str, Any]], object] | None = None,
    ) -> str:
        """Write a new snapshot atomically and return its id (a zero-padded sequence number).

        Parameters
        ----------
        body
            The snapshot's content (JSON-able).
        validate
            Called with the body as :meth:`latest` will read it back (encoded,
            then decoded) before anything is written; an exception it raises
            leaves every file as it was.

        Raises
        ------
        CheckpointError
            If the snapshot cannot be encoded or written (the previous ones are untouched).
        """
        data = encode_snapshot(body)
        if validate is not None:
            validate(decode_snapshot(data))
        return self.write_encoded(data)

    def write_encoded(self, data: bytes) -> str:
        """Write :func:`encode_snapshot` output as the next snapshot (see :meth:`write`)."""
        self.check_lock()
        existing = self._sequence()
        seq = self._next_sequence(existing)
        snapshot_id = f"{seq:012d}"
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

    # ------------------------------------------------------------------ reading
    def latest(self) -> tuple[str, dict[str, Any]] | None:
        """``(id, body)`` of the newest valid snapshot, or ``None`` if there is none.

        Invalid snapshots are logged at WARNING, recorded in :attr:`corrupt`
        and skipped in favour of the previous one. Read-only: safe on the
        directory of a running daemon (a snapshot it deletes meanwhile is
        looked for again).
        """
        for _ in range(_READ_ATTEMPTS):
            vanished = False
            for seq, path in self._sequence():
                try:
                    return f"{seq:012d}", decode_snapshot(path.read_bytes(), name=path.name)
                except FileNotFoundError:
                    vanished = True  # replaced by a newer one meanwhile: list again
                    break
                except (CorruptCheckpointError, OSError) as exc:
                    if (path.name, str(exc)) not in self.corrupt:
                        self.corrupt.append((path.name, str(exc)))
                        _log.warning("skipping invalid snapshot %s: %s", path.name, exc)
            if not vanished:
                return None
        return None

    def clean_temporary(self) -> None:
        """Delete ``.snapshot-*.tmp`` files left by a crash during a write (owner only)."""
        for name in self._names():
            if name.startswith(".snapshot-") and name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    (self.directory / name).unlink()
