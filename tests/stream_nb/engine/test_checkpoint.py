"""Snapshots: atomic, checksummed, previous kept, newest valid restored, no pickle."""

from __future__ import annotations

import os

import orjson
import pytest

from stream_nb import CheckpointError, ConfigError, CorruptCheckpointError
from stream_nb.engine.checkpoint import (
    Checkpointer,
    decode_snapshot,
    encode_snapshot,
    read_snapshot,
)


def _files(directory):
    return sorted(n for n in os.listdir(directory) if n.startswith("snapshot-"))


def test_roundtrip_keeps_json_types(tmp_path):
    cp = Checkpointer(tmp_path)
    body = {"labels": [[1, 2.5], ["1", True], [None, False]], "nested": {"a": [1.0, -0.0]}}
    snapshot_id = cp.write(body)
    assert cp.latest() == (snapshot_id, body)
    assert read_snapshot(tmp_path / f"snapshot-{snapshot_id}.json") == body
    assert read_snapshot(tmp_path) == body


def test_previous_kept_and_older_deleted(tmp_path):
    cp = Checkpointer(tmp_path)
    ids = [cp.write({"n": i}) for i in range(5)]
    assert _files(tmp_path) == [f"snapshot-{i}.json" for i in ids[-2:]]
    cp3 = Checkpointer(tmp_path / "k3", keep=3)
    for i in range(5):
        cp3.write({"n": i})
    assert len(_files(tmp_path / "k3")) == 3
    with pytest.raises(ConfigError, match="keep must be an integer >= 2"):
        Checkpointer(tmp_path, keep=1)


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda d: d[:-2], "truncated write"),
        (lambda d: d[:-3] + b"xyz", "checksum mismatch"),
        (lambda d: b"", "bad header"),
        (lambda d: b"garbage\n" + d, "bad header"),
        (lambda d: d.replace(b'"version":1', b'"version":0'), "unsupported snapshot version 0"),
    ],
)
def test_corrupt_newest_falls_back_to_previous(tmp_path, damage, match):
    cp = Checkpointer(tmp_path)
    cp.write({"n": 1})
    newest = cp.write({"n": 2})
    path = tmp_path / f"snapshot-{newest}.json"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CorruptCheckpointError, match=match):
        read_snapshot(path)
    assert cp.latest() == ("000000000001", {"n": 1})
    assert cp.corrupt[0][0] == path.name and match in cp.corrupt[0][1]


def test_all_corrupt_gives_none_and_read_snapshot_error(tmp_path):
    cp = Checkpointer(tmp_path)
    cp.write({"n": 1})
    (tmp_path / "snapshot-000000000001.json").write_bytes(b"{}")
    assert cp.latest() is None
    with pytest.raises(CheckpointError, match="no valid snapshot in directory"):
        read_snapshot(tmp_path)


def test_corrupt_snapshot_does_not_evict_the_valid_previous(tmp_path):
    cp = Checkpointer(tmp_path)
    cp.write({"n": 1})
    bad = cp.write({"n": 2})
    (tmp_path / f"snapshot-{bad}.json").write_bytes(b"broken")
    assert cp.latest() == ("000000000001", {"n": 1})
    cp.write({"n": 3})
    # the newest (3) and the valid previous (1) remain; the corrupt one is not counted
    assert Checkpointer(tmp_path).latest() == ("000000000003", {"n": 3})
    assert "snapshot-000000000001.json" in _files(tmp_path)


def test_temporary_files_are_cleaned_and_ignored(tmp_path):
    cp = Checkpointer(tmp_path)
    cp.write({"n": 1})
    (tmp_path / ".snapshot-000000000002.tmp").write_bytes(b"half a snap")
    assert cp.latest() == ("000000000001", {"n": 1})
    cp.clean_temporary()
    assert not any(n.endswith(".tmp") for n in os.listdir(tmp_path))


def test_body_is_json_not_pickle():
    data = encode_snapshot({"a": [1, "b"]})
    header, body = data.split(b"\n", 1)
    assert header.startswith(b'{"format":"stream-nb/snapshot"') and body == b'{"a":[1,"b"]}'
    with pytest.raises(CheckpointError, match="not JSON-able"):
        encode_snapshot({"a": object()})
    body = b"[1,2,3]"
    with pytest.raises(CorruptCheckpointError, match="body must be a JSON object"):
        decode_snapshot(_header_for(body) + b"\n" + body)


def _header_for(body: bytes) -> bytes:
    import hashlib

    digest = hashlib.sha256(body).hexdigest()
    header = {"format": "stream-nb/snapshot", "version": 1, "sha256": digest, "length": len(body)}
    return orjson.dumps(header)


def test_unwritable_directory_reports(tmp_path):
    target = tmp_path / "file"
    target.write_bytes(b"")
    with pytest.raises(CheckpointError, match="cannot create checkpoint directory"):
        Checkpointer(target / "sub")


# ---------------------------------------------------------------------- one owner
def test_lock_is_exclusive_names_the_holder_and_is_released(tmp_path):
    first, second = Checkpointer(tmp_path), Checkpointer(tmp_path)
    first.lock()
    first.lock()  # idempotent
    assert first.locked
    assert (tmp_path / "stream-nb.lock").read_text() == f"{os.getpid()}\n"
    with pytest.raises(CheckpointError, match=rf"in use by .* \(pid {os.getpid()}\)"):
        second.lock()
    assert not second.locked
    first.unlock()
    second.lock()  # free again
    assert second.locked
    second.unlock()


def test_lock_is_released_by_the_kernel_when_the_holder_is_killed(tmp_path):
    import signal
    import subprocess
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from stream_nb.engine.checkpoint import Checkpointer\n"
            f"Checkpointer({str(tmp_path)!r}).lock()\n"
            "print('locked', flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline() == b"locked\n"
        with pytest.raises(CheckpointError, match=rf"\(pid {holder.pid}\)"):
            Checkpointer(tmp_path).lock()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    mine = Checkpointer(tmp_path)
    mine.lock()  # kill -9 released it
    mine.unlock()


def test_a_removed_lock_file_stops_the_owner_at_its_next_snapshot(tmp_path):
    owner = Checkpointer(tmp_path)
    owner.lock()
    owner.write({"n": 1})
    (tmp_path / "stream-nb.lock").unlink()  # by hand, while the owner runs
    newcomer = Checkpointer(tmp_path)
    newcomer.lock()  # a new file: the kernel cannot tell
    with pytest.raises(CheckpointError, match="was removed or replaced while this process"):
        owner.write({"n": 2})
    assert not owner.locked and newcomer.locked
    assert owner.latest() == ("000000000001", {"n": 1})  # nothing written by the old owner
    newcomer.unlock()


def test_readers_take_no_lock_and_never_touch_files(tmp_path):
    cp = Checkpointer(tmp_path)
    cp.lock()
    cp.write({"n": 1})
    cp.write({"n": 2})
    (tmp_path / "snapshot-000000000002.json").write_bytes(b"garbage")
    (tmp_path / ".snapshot-000000000009.tmp").write_bytes(b"half")
    before = sorted(os.listdir(tmp_path))
    assert read_snapshot(tmp_path) == {"n": 1}  # a live directory, locked by its owner
    assert Checkpointer(tmp_path, create=False).latest() == ("000000000001", {"n": 1})
    assert sorted(os.listdir(tmp_path)) == before
    cp.unlock()


def test_reject_moves_aside_and_never_reuses_a_name(tmp_path):
    cp = Checkpointer(tmp_path)
    cp.write({"n": 1})
    rejected = cp.reject(tmp_path / "snapshot-000000000001.json", "test")
    assert rejected.name == "snapshot-000000000001.json.rejected"
    assert cp.snapshots() == []
    assert cp.write({"n": 2}) == "000000000002"  # the sequence goes on past rejected ones
    (tmp_path / "snapshot-000000000001.json").write_bytes(b"again")
    again = cp.reject(tmp_path / "snapshot-000000000001.json", "test")
    assert again.name == "snapshot-000000000001.json.1.rejected"
    assert cp.rejected() == [
        "snapshot-000000000001.json.1.rejected",
        "snapshot-000000000001.json.rejected",
    ]


def test_write_validates_before_anything_is_written(tmp_path):
    cp = Checkpointer(tmp_path)
    cp.write({"n": 1})

    def refuse(body):
        assert body == {"n": float("nan")} or body == {"n": None}
        raise CheckpointError("would not restore")

    with pytest.raises(CheckpointError, match="would not restore"):
        cp.write({"n": float("nan")}, validate=refuse)  # orjson writes NaN as null
    assert _files(tmp_path) == ["snapshot-000000000001.json"]
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert cp.latest() == ("000000000001", {"n": 1})


# ---------------------------------------------------------------------- exact integers
def test_integers_beyond_64_bits_survive_a_snapshot_exactly(tmp_path):
    body = {"ids": [18446744073709551617, 18446744073709551618, -(2**70)], "n": 1.5}
    data = encode_snapshot(body)
    header = orjson.loads(data.split(b"\n", 1)[0])
    assert header["wide_ints"] is True
    assert decode_snapshot(data) == body
    cp = Checkpointer(tmp_path)
    cp.write(body)
    ids = cp.latest()[1]["ids"]
    assert ids == body["ids"] and all(type(i) is int for i in ids)
    plain = encode_snapshot({"ids": [2**64 - 1]})  # orjson's own range: header unchanged
    assert b"wide_ints" not in plain
