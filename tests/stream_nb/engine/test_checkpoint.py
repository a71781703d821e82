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
        (lambda d: d.replace(b'"version":1', b'"version":99'), "unsupported snapshot version 99"),
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
