"""Apache Kafka source and sinks (kafka-python 3.x): crash-safe, consumer-group aware.

Needs the ``kafka`` extra: ``pip install '.[kafka]'`` in a clone of stream-nb. The
``kafka-fast`` extra adds librdkafka (confluent-kafka), which a URL chooses with
``client=confluent`` (or ``--kafka-client confluent`` for every URL); kafka-python stays
the default client.

URLs
----
``kafka://host:port[,host:port]/topic[,topic][?option=value&...]``. Options are
stream-nb's own (``group_id``, ``auto_offset_reset``, ``worker_id``,
``create_topics`` …, see :class:`KafkaSource` and :class:`KafkaSink`) or any
kafka-python consumer/producer option (``security_protocol=SASL_SSL``,
``sasl_mechanism=PLAIN``, ``fetch_max_wait_ms=100`` …), passed through with
numbers and ``true``/``false`` converted.

At start every connector checks that its topics exist (input, predictions, dead
letters, model sync) and fails at once naming a missing one, unless
``create_topics=true`` asks to create it
(:func:`~stream_nb.connectors.kafka.topics.check_topics`).

Delivery (see :mod:`stream_nb.connectors.base`)
-----------------------------------------------
* The consumer never auto-commits (``enable_auto_commit=False``) and its reset
  policy is explicit (``auto_offset_reset``, default ``earliest``).
* :meth:`KafkaSource.position` is the *next* offset of every partition this
  process has handed out records from, and the worker id (``{"offsets":
  [[topic, partition, offset], ...], "worker": id}``); the engine stores it in
  the snapshot with the model.
* :meth:`KafkaSource.seek` loads a snapshot's offsets; whenever a partition is
  assigned (at start or in a rebalance) the consumer is positioned there and,
  before anything is fetched, the offset is compared with the group's commit:
  a commit ahead made by this worker means a lost newer snapshot — the snapshot
  wins (the model learned exactly up to it) and the re-read events are counted
  as replayed; one made by another worker wins (that worker learned them).
* A daemon with checkpoints but no snapshot on a group that already committed
  offsets refuses to start (its model would be lost without a word) unless
  ``reset_state`` is set.
* :meth:`KafkaSource.commit` commits the group offsets of the assigned
  partitions only after the engine made the snapshot durable, with the snapshot
  id in the commit metadata.
* Rebalances follow kafka-python 3.x's rules: the listener
  (``AsyncConsumerRebalanceListener``) runs on the client's IO thread, inside
  the main thread's ``poll``, and never blocks it. On revoke it awaits a helper
  thread that checkpoints the engine and commits (or runs a sync transaction)
  before the partitions move; on *lost* nothing is committed and the engine
  returns to its last snapshot (or, with model sync, to its base).
* The consumer is a static group member (``group_instance_id`` from the worker
  id, which the snapshot keeps): a daemon restarted after a crash takes its
  partitions back at once instead of waiting for the session timeout; a clean
  stop leaves the group, so its partitions move on at once.
* Predictions go to a topic through :class:`KafkaSink`, keyed by the event key
  (or id), with the event's headers; each carries the source topic/partition/offset
  so consumers can drop the duplicates at-least-once delivery allows.
  :class:`KafkaDeadLetterSink` keeps the event's key and headers and adds headers
  naming the reason and the source topic/partition/offset.

Staying up
----------
* No single record can stop a partition: a dead letter carries at most a 64 KiB
  prefix of the rejected payload (with its size and SHA-256); a record that still
  exceeds its topic's limit is sent in a smaller form (a dead letter without its
  payload, a prediction without ``log_proba``), else dropped, counted and logged.
* Every blocking client call has a bound: a sink ``flush`` waits up to
  ``delivery_timeout_ms`` (default 30 s) and then raises
  :class:`~stream_nb.SinkError`; commits, offset reads, transactions and closes
  time out likewise. Such an error ends the daemon with a non-zero exit so that
  its supervisor restarts it from the last snapshot: nothing is acknowledged
  (committed) before it is durable, so no event is lost or learned twice.
* Broker trouble is logged at most once per kind every 30 s, with a count
  (:data:`~stream_nb.connectors.kafka.client.trouble`); while no broker connection is up
  :attr:`KafkaSource.ready` is false.

Examples
--------
>>> parse_kafka_url("kafka://127.0.0.1:9092,127.0.0.1:9093/events,more?group_id=g&linger_ms=5")
(['127.0.0.1:9092', '127.0.0.1:9093'], ['events', 'more'], {'group_id': 'g', 'linger_ms': 5})


Modules
-------
:mod:`~stream_nb.connectors.kafka.url`
    URLs, their options, and the settings every connector shares.
:mod:`~stream_nb.connectors.kafka.topics`
    Topic checks (and creation) at start.
:mod:`~stream_nb.connectors.kafka.source`
    :class:`KafkaSource`: the consumer, positions, commits, a clean leave.
:mod:`~stream_nb.connectors.kafka.rebalance`
    The rebalance listener, and the partitions' snapshot offsets reconciled with the
    group's commits.
:mod:`~stream_nb.connectors.kafka.sink`
    :class:`KafkaSink` and :class:`KafkaDeadLetterSink`.
:mod:`~stream_nb.connectors.kafka.records`
    Records within their topic's limit (sizes, headers, dead letters, predictions).
:mod:`~stream_nb.connectors.kafka.sync`
    :class:`KafkaSync`: model sync and exactly-once.
:mod:`~stream_nb.connectors.kafka.metrics`
    :class:`~stream_nb.connectors.kafka.metrics.KafkaMetrics` (Prometheus).
:mod:`~stream_nb.connectors.kafka.client`
    Bounded calls, the trouble log, the kafka-python adapter, the choice of client.
:mod:`~stream_nb.connectors.kafka.confluent`
    The librdkafka adapter (``client=confluent``).
:mod:`~stream_nb.connectors.kafka.factories`
    The ``kafka://`` URL factories, registered on import.
"""

try:
    import kafka  # noqa: F401 (every module of this package imports kafka-python)
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the Kafka connector needs kafka-python; install the 'kafka' extra "
        "(pip install '.[kafka]' in a clone of stream-nb)"
    ) from exc

from stream_nb.connectors.kafka.factories import open_kafka_sink, open_kafka_source
from stream_nb.connectors.kafka.metrics import KafkaMetrics
from stream_nb.connectors.kafka.records import (
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_REASON,
    HEADER_TOPIC,
)
from stream_nb.connectors.kafka.sink import KafkaDeadLetterSink, KafkaSink
from stream_nb.connectors.kafka.source import KafkaSource
from stream_nb.connectors.kafka.sync import SYNC_FORMAT, KafkaSync
from stream_nb.connectors.kafka.url import (
    CALL_SECONDS,
    CLOSE_SECONDS,
    DELIVERY_TIMEOUT_MS,
    parse_kafka_url,
)

__all__ = [
    "CALL_SECONDS",
    "CLOSE_SECONDS",
    "DELIVERY_TIMEOUT_MS",
    "HEADER_OFFSET",
    "HEADER_PARTITION",
    "HEADER_REASON",
    "HEADER_TOPIC",
    "SYNC_FORMAT",
    "KafkaDeadLetterSink",
    "KafkaMetrics",
    "KafkaSink",
    "KafkaSource",
    "KafkaSync",
    "open_kafka_sink",
    "open_kafka_source",
    "parse_kafka_url",
]
