"""connectors/kafka/rebalance.py on the real broker, one step at a time: a group member's
partitions, snapshot offsets reconciled with the group's commits, and the refusal to
start over commits without a snapshot.

A consumer of the group is assigned the partitions by hand (no group join), so each
test drives :class:`Partitions` as the rebalance listener and the source do, and reads
where the consumer is positioned (``consumer.position``)."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka_broker import KafkaBroker
from kafka_helpers import create_topic

from stream_nb import SourceError
from stream_nb.connectors.kafka.rebalance import Partitions, refuse_lost_model
from stream_nb.connectors.kafka.topics import TopicInfo

#: Records in every partition of a test topic: offsets 0..9.
RECORDS = 10


def fill(bootstrap: str, topic: str, partitions: int) -> list[TopicPartition]:
    create_topic(bootstrap, topic, partitions)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for p in range(partitions):
        for i in range(RECORDS):
            producer.send(topic, value=b"{}", partition=p, key=str(i).encode())
    producer.flush()
    producer.close()
    return [TopicPartition(topic, p) for p in range(partitions)]


def commit(bootstrap: str, group: str, offsets: dict[TopicPartition, tuple[int, str]]) -> None:
    """Commit ``{tp: (offset, metadata)}`` for ``group`` (as a worker's snapshot commit)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({tp: OffsetAndMetadata(o, m, -1) for tp, (o, m) in offsets.items()})
    finally:
        consumer.close()


def by(worker: str) -> str:
    return orjson.dumps({"snapshot": "000000000003", "worker": worker}).decode()


@pytest.fixture
def topic(kafka_bootstrap: str, unique: str) -> list[TopicPartition]:
    return fill(kafka_bootstrap, f"parts-{unique}", 3)


@pytest.fixture
def consumer(kafka_bootstrap: str, unique: str) -> Iterator[KafkaConsumer]:
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        group_id=f"g-{unique}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    yield consumer
    consumer.close()


def partitions_of(consumer: KafkaConsumer, reset: str = "earliest") -> Partitions:
    return Partitions(lambda: consumer, group_id="g", call_ms=10_000, auto_offset_reset=reset)


def assign(partitions: Partitions, consumer: KafkaConsumer, tps: set[TopicPartition]) -> None:
    """What the group's assignment does: the consumer's, then the listener's part."""
    consumer.assign(sorted(tps | partitions.assigned(), key=lambda tp: tp.partition))
    partitions.assign(tps)


def test_assigned_partitions_start_at_their_snapshot_offsets_unchecked(
    topic: list[TopicPartition], consumer: KafkaConsumer
) -> None:
    t0, t1, t2 = topic
    partitions = partitions_of(consumer)
    partitions.restore({t0: 5, t1: 7})  # nothing assigned yet: positioned on assignment
    assign(partitions, consumer, {t0, t2})
    assert consumer.position(t0) == 5
    assert consumer.position(t2) == 0  # no snapshot offset, no commit: auto_offset_reset
    assert partitions.unchecked() == {t0: 5}
    assert partitions.assigned() == {t0, t2}
    assert partitions.rebalances == {"assigned": 1, "revoked": 0, "lost": 0}
    assert partitions.committable() == {t0: 5}  # t1 is not assigned


def test_with_model_sync_the_commits_win_over_snapshot_offsets(
    kafka_bootstrap: str, unique: str, topic: list[TopicPartition], consumer: KafkaConsumer
) -> None:
    t0 = topic[0]
    commit(kafka_bootstrap, f"g-{unique}", {t0: (3, "")})
    partitions = partitions_of(consumer)
    partitions.transactional = True
    partitions.restore({t0: 5})
    assign(partitions, consumer, {t0})
    assert partitions.unchecked() == {} and consumer.position(t0) == 3


def test_a_commit_of_this_worker_ahead_of_the_snapshot_counts_replayed_events(
    kafka_bootstrap: str, unique: str, topic: list[TopicPartition], consumer: KafkaConsumer
) -> None:
    """Its newest snapshot was lost: the older snapshot wins, the events are re-read."""
    t0, t1, _ = topic
    commit(kafka_bootstrap, f"g-{unique}", {t0: (9, by("w1")), t1: (3, by("w1"))})
    partitions = partitions_of(consumer)
    partitions.restore({t0: 5, t1: 4})
    assign(partitions, consumer, {t0, t1})
    partitions.check_committed(partitions.unchecked(), "w1")
    assert partitions.replayed == 4  # t0: 5..8; t1's commit is behind the snapshot
    assert (consumer.position(t0), consumer.position(t1)) == (5, 4)
    assert partitions.positions == {t0: 5, t1: 4} and partitions.unchecked() == {}


def test_a_commit_of_another_worker_ahead_of_the_snapshot_wins(
    kafka_bootstrap: str, unique: str, topic: list[TopicPartition], consumer: KafkaConsumer
) -> None:
    """That worker learned the events after the snapshot: continue from its commit."""
    t0, t1, _ = topic
    commit(kafka_bootstrap, f"g-{unique}", {t0: (9, by("w2")), t1: (6, "not json")})
    partitions = partitions_of(consumer)
    partitions.restore({t0: 5, t1: 4})
    assign(partitions, consumer, {t0, t1})
    partitions.check_committed(partitions.unchecked(), "w1")
    assert (consumer.position(t0), consumer.position(t1)) == (9, 6)
    assert partitions.positions == {} and partitions.replayed == 0


def test_revokes_and_losses(topic: list[TopicPartition], consumer: KafkaConsumer) -> None:
    t0, t1, t2 = topic
    partitions = partitions_of(consumer)
    partitions.restore({t0: 5, t1: 7, t2: 9})
    assign(partitions, consumer, {t0, t1, t2})
    partitions.revoke({t0}, "revoked", settled=True)  # committed: its position goes
    partitions.revoke({t1}, "revoked", settled=False)  # kept: resumes from the snapshot
    assert partitions.positions == {t1: 7, t2: 9}
    assert not partitions.take_rollback()
    partitions.revoke({t2}, "lost", settled=False)
    assert partitions.take_rollback() and not partitions.take_rollback()
    assert partitions.rebalances == {"assigned": 1, "revoked": 2, "lost": 1}
    assert partitions.assigned() == set() and partitions.unchecked() == {}

    synced = partitions_of(consumer)
    synced.transactional = True
    synced.assign({t0})
    synced.revoke({t0}, "revoked", settled=False)  # the revoke transaction failed
    assert synced.take_rollback()


@pytest.mark.parametrize(("reset", "end"), [("earliest", 0), ("latest", RECORDS)])
def test_reset_goes_back_to_the_commits_or_the_reset_policy(
    kafka_bootstrap: str,
    unique: str,
    topic: list[TopicPartition],
    consumer: KafkaConsumer,
    reset: str,
    end: int,
) -> None:
    t0, t1, _ = topic
    commit(kafka_bootstrap, f"g-{unique}", {t0: (4, "")})
    partitions = partitions_of(consumer, reset)
    assign(partitions, consumer, {t0, t1})
    consumer.seek(t0, 8)
    consumer.seek(t1, 8)
    partitions.positions.update({t0: 8, t1: 8})
    partitions.reset(reseek=False)
    assert partitions.positions == {} and consumer.position(t0) == 8
    partitions.reset(reseek=True)
    assert (consumer.position(t0), consumer.position(t1)) == (4, end)


def test_after_a_return_to_the_snapshot_partitions_are_checked_again(
    kafka_bootstrap: str, unique: str, topic: list[TopicPartition], consumer: KafkaConsumer
) -> None:
    t0, t1, _ = topic
    commit(kafka_bootstrap, f"g-{unique}", {t1: (3, "")})
    partitions = partitions_of(consumer)
    assign(partitions, consumer, {t0, t1})
    partitions.restore({t0: 5})  # what the engine's restore() does through seek()
    partitions.reposition()
    assert partitions.unchecked() == {t0: 5}  # checked before the next poll
    assert (consumer.position(t0), consumer.position(t1)) == (5, 3)  # t1: the commit


def test_an_unreadable_commit_stops_rather_than_risk_learning_twice(
    own_broker: KafkaBroker,
) -> None:
    (t0,) = fill(own_broker.bootstrap, "unreadable", 1)
    consumer = KafkaConsumer(
        bootstrap_servers=own_broker.bootstrap, group_id="g", enable_auto_commit=False
    )
    try:
        partitions = Partitions(
            lambda: consumer, group_id="g", call_ms=2000, auto_offset_reset="earliest"
        )
        partitions.restore({t0: 5})
        assign(partitions, consumer, {t0})
        own_broker.stop()
        with pytest.raises(SourceError, match=r"committed offset of unreadable\[0\] \(consumer"):
            partitions.check_committed(partitions.unchecked(), "w1")
        assert partitions.unchecked() == {}  # a restart checks again
    finally:
        consumer.close()


def test_commits_without_a_snapshot_refuse_to_start(
    kafka_bootstrap: str, unique: str, topic: list[TopicPartition], consumer: KafkaConsumer
) -> None:
    name = topic[0].topic
    info = {name: TopicInfo(name, 3, None)}

    def refuse() -> None:
        refuse_lost_model(
            consumer,
            group_id="g",
            topics=[name],
            topic_info=info,
            sync_topic=None,
            call_ms=10_000,
        )

    refuse()  # a new group: nothing to lose
    commit(kafka_bootstrap, f"g-{unique}", {topic[0]: (4, ""), topic[2]: (1, "")})
    with pytest.raises(SourceError, match=rf"committed offsets \({name}\[0\]@4, {name}\[2\]@1\)"):
        refuse()


def test_model_sync_refuses_only_once_retention_deleted_deltas(
    kafka_bootstrap: str, unique: str, consumer: KafkaConsumer
) -> None:
    (sync,) = fill(kafka_bootstrap, f"sync-{unique}", 1)
    info = {sync.topic: TopicInfo(sync.topic, 1, None)}

    def refuse() -> None:
        refuse_lost_model(
            consumer,
            group_id="g",
            topics=[],
            topic_info=info,
            sync_topic=sync.topic,
            call_ms=10_000,
        )

    refuse()  # every delta is there: the model is rebuilt from the sync topic
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.delete_records({sync: 4})  # what retention does
    finally:
        admin.close()
    with pytest.raises(SourceError, match=r"deleted offsets below \{0: 4\}"):
        refuse()
