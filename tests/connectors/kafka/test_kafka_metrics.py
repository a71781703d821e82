"""connectors/kafka/metrics.py on the real broker: a lag series for every assigned
partition, including one the source has read nothing from (empty, or holding records it
has not handed out), and no series left behind for partitions that moved to another
member."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka_helpers import create_topic
from prometheus_client import CollectorRegistry

from stream_nb.connectors.kafka import KafkaMetrics, KafkaSource
from stream_nb.connectors.kafka.rebalance import Partitions

PARTITIONS = 3


def send(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    """``counts[p]`` records to partition ``p``."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for partition, n in counts.items():
        for i in range(n):
            producer.send(topic, value=b'{"i": %d}' % i, partition=partition)
    producer.flush()
    producer.close()


def series(registry: CollectorRegistry, name: str, topic: str) -> dict[int, float]:
    """``{partition: value}`` of a per-partition metric of ``topic``."""
    return {
        int(s.labels["partition"]): s.value
        for family in registry.collect()
        for s in family.samples
        if s.name == name and s.labels.get("topic") == topic
    }


@contextlib.contextmanager
def polling(*sources: KafkaSource) -> Iterator[None]:
    """Each source polled in a thread of its own, as in its own daemon (a member's poll may
    wait for the others to join the group)."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def loop(source: KafkaSource) -> None:
        try:
            while not stop.is_set():
                source.next_batch(500, 0.2)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=loop, args=(s,), daemon=True) for s in sources]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert errors == []


def wait_until(done, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def poll_until(sources: list[KafkaSource], done, what: str, timeout: float = 60.0) -> list:
    """Poll every source in turn (as their daemons' loops would) until ``done()``; the
    records handed out meanwhile."""
    records: list = []
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for source in sources:
            records += source.next_batch(500, 0.2)
    return records


@pytest.fixture
def topic(kafka_bootstrap: str, unique: str) -> str:
    name = f"lag-{unique}"
    create_topic(kafka_bootstrap, name, PARTITIONS)
    return name


@pytest.fixture
def source(
    kafka_bootstrap: str, topic: str, unique: str, kafka_client: str
) -> Iterator[KafkaSource]:
    source = KafkaSource(
        kafka_bootstrap, topic, group_id=f"g-{unique}", worker_id="w1", client=kafka_client
    )
    yield source
    source.close()


def test_a_partition_without_records_has_lag_zero(
    kafka_bootstrap: str, topic: str, source: KafkaSource
) -> None:
    """Partition 2 never gets a record: the source hands out nothing from it, and its lag
    is still published (0), so an alert on the lag sees every assigned partition."""
    send(kafka_bootstrap, topic, {0: 6, 1: 4})
    registry = CollectorRegistry()
    source.bind_metrics(registry)
    lag = "stream_nb_kafka_consumer_lag"
    records = poll_until(
        [source],
        lambda: series(registry, lag, topic) == {0: 0, 1: 0, 2: 0},
        "a lag of 0 on every partition",
    )
    assert sorted(r.position["partition"] for r in records) == [0] * 6 + [1] * 4
    assert TopicPartition(topic, 2) not in source.positions  # read from the consumer
    assert registry.get_sample_value("stream_nb_kafka_assigned_partitions") == PARTITIONS


def test_records_the_source_has_not_handed_out_show_as_lag(
    kafka_bootstrap: str, topic: str, source: KafkaSource
) -> None:
    """Records arrive in partition 1 while the consumer does not fetch it (paused): the
    source hands out none of them, the last fetch's high watermark is stale, and the lag
    comes from the broker's end offset (looked up at most every LOOKUP_EVERY seconds).
    Resumed, the records are read and the lag returns to 0."""
    registry = CollectorRegistry()
    source.bind_metrics(registry)
    lag = "stream_nb_kafka_consumer_lag"
    poll_until(
        [source], lambda: series(registry, lag, topic) == {0: 0, 1: 0, 2: 0}, "every partition"
    )
    t1 = TopicPartition(topic, 1)
    source.consumer.pause(t1)  # kafka-python's public API on the source's consumer
    send(kafka_bootstrap, topic, {1: 5})
    records = poll_until(
        [source], lambda: series(registry, lag, topic) == {0: 0, 1: 5, 2: 0}, "a lag of 5"
    )
    assert records == []  # nothing of partition 1 handed out
    source.consumer.resume(t1)
    records = poll_until(
        [source], lambda: series(registry, lag, topic) == {0: 0, 1: 0, 2: 0}, "the catch-up"
    )
    assert [r.position["offset"] for r in records] == [0, 1, 2, 3, 4]
    assert source.positions[t1] == 5


def test_partitions_that_move_to_another_member_lose_their_series(
    kafka_bootstrap: str, topic: str, unique: str, kafka_client: str
) -> None:
    """A second member joins the group: the partitions revoked from the first one have no
    lag or committed-offset series left in its registry (their new owner publishes
    them), and each member's lag series are exactly its partitions."""
    send(kafka_bootstrap, topic, {0: 3, 1: 3, 2: 3})
    # a rebalance is noticed within a second
    options = {"heartbeat_interval_ms": 1000, "client": kafka_client}
    first = KafkaSource(kafka_bootstrap, topic, group_id=f"g-{unique}", worker_id="w1", **options)
    second = KafkaSource(kafka_bootstrap, topic, group_id=f"g-{unique}", worker_id="w2", **options)
    one, two = CollectorRegistry(), CollectorRegistry()
    first.bind_metrics(one)
    second.bind_metrics(two)
    lag, committed = "stream_nb_kafka_consumer_lag", "stream_nb_kafka_committed_offset"
    try:
        poll_until([first], lambda: series(one, lag, topic) == {0: 0, 1: 0, 2: 0}, "first")
        first.commit(first.position(), "000000000001")
        assert series(one, committed, topic) == {0: 3, 1: 3, 2: 3}

        def split() -> bool:
            mine = {tp.partition for tp in first.assignment}
            theirs = {tp.partition for tp in second.assignment}
            return (
                bool(mine and theirs)
                and mine | theirs == set(range(PARTITIONS))
                and set(series(one, lag, topic)) >= mine
                and set(series(two, lag, topic)) >= theirs
            )

        with polling(first, second):
            wait_until(split, "the partitions to be split between the members")
        mine = {tp.partition for tp in first.assignment}
        moved = {tp.partition for tp in second.assignment}
        assert first.rebalances["revoked"] >= 1
        assert set(series(one, lag, topic)) == mine  # nothing left of the moved partitions
        assert set(series(two, lag, topic)) == moved
        assert not moved & set(series(one, committed, topic))
        assert set(series(two, lag, topic).values()) == {0}  # committed by the first member
    finally:
        second.close()
        first.close()


def test_a_revoke_removes_only_the_revoked_partitions_series() -> None:
    """:class:`Partitions` asks its metrics to forget what it gives up (no broker needed:
    a revoke is bookkeeping)."""
    registry = CollectorRegistry()
    metrics = KafkaMetrics(registry)
    partitions = Partitions(lambda: None, group_id="g", call_ms=1000, auto_offset_reset="earliest")
    partitions.metrics = metrics
    kept, moved, lost = (TopicPartition("t", p) for p in range(3))
    for tp in (kept, moved, lost):
        metrics.lag.labels(topic="t", partition=str(tp.partition)).set(7)
    metrics.committed({kept: 4, moved: 5, lost: 6}, 0.01)
    partitions.revoke({moved}, "revoked", settled=True)
    partitions.revoke({lost}, "lost", settled=False)
    partitions.revoke({TopicPartition("t", 9)}, "revoked", settled=True)  # never published
    assert series(registry, "stream_nb_kafka_consumer_lag", "t") == {0: 7}
    assert series(registry, "stream_nb_kafka_committed_offset", "t") == {0: 4}
    assert registry.get_sample_value("stream_nb_kafka_rebalances_total", {"event": "lost"}) == 1
