"""The test broker works with kafka-python 3.x: produce and consume round trip."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic


def test_produce_consume_round_trip(kafka_bootstrap: str, unique: str) -> None:
    topic = f"smoke-{unique}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for i in range(20):
        producer.send(topic, key=str(i).encode(), value=f"v{i}".encode(), partition=i % 2)
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=30_000,
    )
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == 20:
            break
    consumer.close()
    values.sort()
    assert values == sorted(f"v{i}".encode() for i in range(20))
