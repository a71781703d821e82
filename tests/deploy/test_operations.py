"""What docs/operations.md promises operators, checked on real daemons: the metrics
endpoint's default interface, the checkpoint age of a restarted daemon, and the refusal
of a snapshot from a newer stream-nb.

(The unit, the rules, the dashboard and the local Kafka have test files of their own.)
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest
from deploy_helpers import REPO, Daemon, stream_nb_command, wait_for

from stream_nb import Checkpointer

OPERATIONS = REPO / "docs" / "operations.md"

#: /proc/net/tcp's state of a listening socket.
_LISTEN = "0A"


def listening_addresses(port: int) -> set[str]:
    """The IPv4 addresses (dotted) with a socket listening on ``port``."""
    addresses = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state = fields[1], fields[3]
        address, _, hex_port = local.partition(":")
        if state == _LISTEN and int(hex_port, 16) == port:
            # little-endian hex: 0100007F is 127.0.0.1
            addresses.add(".".join(str(b) for b in reversed(bytes.fromhex(address))))
    return addresses


@pytest.mark.parametrize(
    ("flag", "interface"),
    [("0", "127.0.0.1"), (":0", "127.0.0.1"), ("0.0.0.0:0", "0.0.0.0")],
)
def test_the_metrics_endpoint_binds_loopback_unless_a_host_is_given(
    tmp_path: Path, flag: str, interface: str
) -> None:
    """A bare port (or ``:PORT``) listens on 127.0.0.1 only; all interfaces take an
    explicit ``0.0.0.0:PORT``."""
    (tmp_path / "events.jsonl").write_bytes(b"")
    daemon = Daemon(
        tmp_path,
        ["--source", "events.jsonl", "--follow", "--sink", "predictions.jsonl"],
        metrics_address=flag,
    ).start()
    try:
        assert daemon.port is not None
        assert listening_addresses(daemon.port) == {interface}
        assert daemon.sample("stream_nb_events_consumed_total") == 0
    finally:
        assert daemon.stop() == 0


def test_a_restarted_daemon_counts_its_checkpoint_age_from_the_restored_snapshot(
    tmp_path: Path,
) -> None:
    """The last-checkpoint time of a new process is the restored snapshot's, so the
    checkpoint age and StreamNBCheckpointStale are right from the start (not undefined
    until the first new checkpoint); the interval is exported for that alert."""
    events = subprocess.run(
        [*stream_nb_command(), "demo", "--limit", "50"], check=True, capture_output=True
    ).stdout
    (tmp_path / "events.jsonl").write_bytes(events)
    args = [
        *("--source", "events.jsonl", "--follow", "--sink", "predictions.jsonl"),
        *("--checkpoint-dir", "st", "--checkpoint-interval", "3600"),
    ]
    first = Daemon(tmp_path, args).start()
    try:
        wait_for(lambda: first.sample("stream_nb_events_consumed_total") == 50, "50 events")
        assert first.sample("stream_nb_checkpoint_interval_seconds") == 3600
    finally:
        assert first.stop() == 0  # a final checkpoint
    _, body = Checkpointer(tmp_path / "st").latest()  # type: ignore[misc]
    second = Daemon(tmp_path, args).start()
    try:
        # nothing new to process: no checkpoint of its own, only the restored one
        assert (
            second.sample("stream_nb_checkpoint_last_success_timestamp_seconds")
            == (body["created"])
        )
        assert second.sample("stream_nb_events_consumed_total") == 0
    finally:
        assert second.stop() == 0


def test_a_snapshot_of_a_newer_stream_nb_is_refused_as_documented(tmp_path: Path) -> None:
    """The daemon exits 1 with the message docs/operations.md quotes ("Upgrades"), and
    moves nothing aside."""
    run = [*stream_nb_command(), "run", "--sink", "predictions.jsonl", "--checkpoint-dir", "st"]
    events = subprocess.run(
        [*stream_nb_command(), "demo", "--limit", "100"], check=True, capture_output=True
    ).stdout
    (tmp_path / "events.jsonl").write_bytes(events)
    first = subprocess.run(
        [*run, "--source", "events.jsonl"], cwd=tmp_path, capture_output=True, text=True
    )
    assert first.returncode == 0, first.stderr
    newest = sorted((tmp_path / "st").glob("snapshot-*.json"))[-1]
    # the header line carries the snapshot format's version: a newer stream-nb's 2
    data = newest.read_bytes()
    newline = data.index(b"\n")
    header = orjson.loads(data[:newline])
    assert header["version"] == 1
    newest.write_bytes(orjson.dumps({**header, "version": 2}) + data[newline:])
    before = sorted(os.listdir(tmp_path / "st"))

    second = subprocess.run(
        [*run, "--source", "events.jsonl"], cwd=tmp_path, capture_output=True, text=True
    )
    assert second.returncode == 1
    message = (
        f"{newest.name}: written by a newer stream-nb (snapshot format version 2; this "
        "stream-nb reads version 1): upgrade stream-nb to read it, or move the checkpoint "
        "directory aside to start a new model"
    )
    assert message in second.stderr
    assert sorted(os.listdir(tmp_path / "st")) == before
    documented = " ".join(OPERATIONS.read_text().split())
    assert message.replace(newest.name, "snapshot-N.json") in documented
