"""Rebalances on a real broker: a revoke checkpoints and commits what was processed before
the partitions move, and a clean stop publishes the last sync delta.

Each test starts a first daemon whose periodic checkpoint (or sync) interval is far longer
than the test, lets it process events, then starts a second daemon in the group: the
partitions the first one processed since its last checkpoint move. Without a checkpoint
and commit on revoke their new owner would re-read them from the last commit (learned
twice across the group, predicted twice); the tests count every prediction and every event
learned across the group.
"""

from __future__ import annotations

import signal
from pathlib import Path

import orjson
from kafka_helpers import (
    Daemon,
    assert_same_model,
    committed_offsets,
    create_topic,
    daemon_args,
    end_offsets,
    group_members_with_partitions,
    make_events,
    model_of,
    predictions,
    produce,
    read_topic,
    reference_model,
    snapshot,
    wait_for,
)

PARTITIONS = 4
#: Far longer than a test: checkpoints and syncs happen only on revoke and on stop.
NEVER = "3600"


def args(bootstrap: str, unique: str, checkpoints: Path, extra: str = "") -> list[str]:
    return daemon_args(
        bootstrap,
        f"kafka://{bootstrap}/events-{unique}?group_id=g-{unique}"
        f"&session_timeout_ms=6000&heartbeat_interval_ms=1000{extra}",
        f"out-{unique}",
        f"dlq-{unique}",
        checkpoints,
        interval=NEVER,
        batch_size=50,
    )


def answered(bootstrap: str, unique: str) -> list[int]:
    """Event ids of every prediction on the output topic (duplicates kept)."""
    return [p["id"] for p in predictions(read_topic(bootstrap, f"out-{unique}", 1))]


def run_rebalance_scenario(
    bootstrap: str, tmp_path: Path, unique: str, extra: str
) -> tuple[list[dict], Daemon, Daemon]:
    """a processes 600 events alone; b joins (a's partitions are revoked); 600 more events
    are shared; a stops cleanly (its partitions move to b); then b stops."""
    topic, group = f"events-{unique}", f"g-{unique}"
    create_topic(bootstrap, topic, PARTITIONS)
    events = make_events(1200, seed=21)
    a = Daemon(tmp_path, "a", args(bootstrap, unique, tmp_path / "a", extra)).start()
    b = Daemon(tmp_path, "b", args(bootstrap, unique, tmp_path / "b", extra))
    try:
        produce(bootstrap, topic, [orjson.dumps(e) for e in events[:600]], PARTITIONS)
        wait_for(
            lambda: len(answered(bootstrap, unique)) >= 600, 60, "a's predictions", daemons=[a]
        )
        assert committed_offsets(bootstrap, group, topic) == {}  # nothing committed yet
        b.start()
        wait_for(
            lambda: group_members_with_partitions(bootstrap, group) == 2,
            60,
            "both daemons to hold partitions",
            daemons=[a, b],
        )
        produce(bootstrap, topic, [orjson.dumps(e) for e in events[600:]], PARTITIONS, 600)
        wait_for(
            lambda: len(set(answered(bootstrap, unique))) == len(events),
            60,
            "every event answered",
            daemons=[a, b],
        )
        assert a.stop() == 0, a.log()
        wait_for(
            lambda: group_members_with_partitions(bootstrap, group) == 1,
            60,
            "b to take a's partitions",
            daemons=[b],
        )
    finally:
        if a.alive():
            a.kill()
        if b.alive():
            assert b.stop() == 0, b.log()
    assert committed_offsets(bootstrap, group, topic) == end_offsets(bootstrap, topic, PARTITIONS)
    return events, a, b


def test_revoke_checkpoints_and_commits_so_nothing_is_learned_twice(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """At-least-once mode: the new owner starts where the old one stopped, not at the last
    periodic checkpoint: one prediction per event, each event learned by one daemon."""
    events, a, b = run_rebalance_scenario(kafka_bootstrap, tmp_path, unique, "")
    logs = f"a:\n{a.log()}\nb:\n{b.log()}"
    assert sorted(answered(kafka_bootstrap, unique)) == [e["id"] for e in events], logs
    learned = {w: snapshot(tmp_path / w)["counters"]["consumed"] for w in ("a", "b")}
    assert learned["a"] >= 600 and learned["b"] > 0
    assert sum(learned.values()) == len(events)  # nothing re-read across the group
    whole = model_of(tmp_path / "a")
    whole.merge(model_of(tmp_path / "b"))
    assert_same_model(whole, reference_model(events))


def test_revoke_and_clean_stop_in_sync_mode_commit_the_work(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """Model sync whose interval never elapses: the sync transactions run only on revoke
    and on the clean stop, yet b ends with the whole stream's model and nothing is redone."""
    extra = f"&sync_topic=sync-{unique}&sync_interval={NEVER}"
    events, a, b = run_rebalance_scenario(kafka_bootstrap, tmp_path, unique, extra)
    logs = f"a:\n{a.log()}\nb:\n{b.log()}"
    assert sorted(answered(kafka_bootstrap, unique)) == [e["id"] for e in events], logs
    a_state = snapshot(tmp_path / "a")["extra"]["kafka_sync"]
    assert a_state["seq"] >= 2, logs  # one transaction on revoke, one on the clean stop
    # b folded a's deltas, the last one published when a stopped: the whole stream
    try:
        assert_same_model(model_of(tmp_path / "b"), reference_model(events))
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{logs}") from exc
    b_state = snapshot(tmp_path / "b")["extra"]["kafka_sync"]
    assert b_state["merged"][a_state["worker"]] == a_state["seq"], logs
    consumed = sum(snapshot(tmp_path / w)["counters"]["consumed"] for w in ("a", "b"))
    assert consumed == len(events), logs  # no work dropped and redone


def test_lost_partitions_commit_nothing_and_the_evicted_daemon_returns_to_its_snapshot(
    kafka_bootstrap: str, tmp_path: Path, unique: str
) -> None:
    """a is stopped (SIGSTOP) past its session timeout: the group evicts it and b takes
    its partitions from the committed offsets. When a resumes, its partitions are *lost*:
    it commits nothing and returns to its last snapshot, so the events b redid are in one
    model only, and the merged model stays exact."""
    topic, group = f"events-{unique}", f"g-{unique}"
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    events = make_events(1200, seed=23)
    a = Daemon(tmp_path, "a", args(kafka_bootstrap, unique, tmp_path / "a")).start()
    b = Daemon(tmp_path, "b", args(kafka_bootstrap, unique, tmp_path / "b")).start()
    try:
        wait_for(
            lambda: group_members_with_partitions(kafka_bootstrap, group) == 2,
            60,
            "both daemons to hold partitions",
            daemons=[a, b],
        )
        produce(kafka_bootstrap, topic, [orjson.dumps(e) for e in events[:600]], PARTITIONS)
        wait_for(
            lambda: len(set(answered(kafka_bootstrap, unique))) == 600,
            60,
            "the first events answered",
            daemons=[a, b],
        )
        assert a.proc is not None
        a.proc.send_signal(signal.SIGSTOP)
        try:
            wait_for(
                lambda: group_members_with_partitions(kafka_bootstrap, group) == 1,
                60,
                "the group to evict a",
                daemons=[b],
            )
        finally:
            a.proc.send_signal(signal.SIGCONT)
        wait_for(
            lambda: group_members_with_partitions(kafka_bootstrap, group) == 2,
            60,
            "a to rejoin",
            daemons=[a, b],
        )
        produce(kafka_bootstrap, topic, [orjson.dumps(e) for e in events[600:]], PARTITIONS, 600)
        wait_for(
            lambda: len(set(answered(kafka_bootstrap, unique))) == len(events),
            60,
            "every event answered",
            daemons=[a, b],
        )
        assert a.stop() == 0, a.log()
    finally:
        if a.alive():
            a.kill()
        if b.alive():
            assert b.stop() == 0, b.log()
    assert committed_offsets(kafka_bootstrap, group, topic) == end_offsets(
        kafka_bootstrap, topic, PARTITIONS
    )
    assert "restored snapshot" in a.log()  # a returned to its last snapshot when it resumed
    whole = model_of(tmp_path / "a")
    whole.merge(model_of(tmp_path / "b"))
    assert_same_model(whole, reference_model(events))
