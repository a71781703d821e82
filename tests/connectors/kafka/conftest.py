"""A real Apache Kafka broker for the Kafka tests (one per session).

By default the session fixture formats and starts a single-node KRaft broker
from the Maven Central jars (``scripts/kafka_jars.sh``) on free 127.0.0.1
ports in a temporary directory, and stops it at the end of the session. Set
``STREAM_NB_KAFKA_BOOTSTRAP=host:port[,host:port]`` to run the tests against
another cluster instead (tests that restart the broker still start their own).
Every test uses topics and groups with unique names, so tests can share a
cluster.

Both clients. Every test that reaches a broker runs once per Kafka client
(``[kafka-python]`` and ``[confluent]``, the :func:`kafka_client` parameter): the
daemons it starts get the client through ``STREAM_NB_KAFKA_CLIENT`` (``--kafka-client``),
and the connectors it builds itself through ``client=kafka_client``. The files of
:data:`KAFKA_PYTHON_ONLY` test kafka-python itself (its adapter internals, the broker
seen through it, the partition bookkeeping driven with a raw kafka-python consumer)
and run once; so do those of :data:`BOTH_CLIENTS_INSIDE`, which run both clients
themselves.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kafka_broker import KafkaBroker

#: The clients every broker test runs with.
CLIENTS = ("kafka-python", "confluent")

#: Test files about kafka-python itself: its adapter's use of kafka-python internals
#: (test_kafka_client), the test broker seen through kafka-python (test_kafka_broker),
#: and :class:`~stream_nb.connectors.kafka.rebalance.Partitions` driven directly with a
#: kafka-python consumer (test_kafka_partitions; the source and daemon tests run the
#: same bookkeeping with both clients).
KAFKA_PYTHON_ONLY = frozenset(
    {"test_kafka_client.py", "test_kafka_broker.py", "test_kafka_partitions.py"}
)

#: Test files that run both clients themselves (the benchmark's smoke test).
BOTH_CLIENTS_INSIDE = frozenset({"test_kafka_bench.py"})

#: Fixtures that reach a broker.
_BROKER_FIXTURES = frozenset({"kafka_bootstrap", "own_broker", "strict_broker"})


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every broker test with both clients (except :data:`KAFKA_PYTHON_ONLY`)."""
    if (
        "kafka_client" in metafunc.fixturenames
        and _BROKER_FIXTURES & set(metafunc.fixturenames)
        and Path(metafunc.definition.path).name not in KAFKA_PYTHON_ONLY | BOTH_CLIENTS_INSIDE
    ):
        metafunc.parametrize("kafka_client", CLIENTS, indirect=True)


@pytest.fixture
def kafka_client(request: pytest.FixtureRequest) -> str:
    """The Kafka client of this test run (``kafka-python`` unless parametrized)."""
    return str(getattr(request, "param", "kafka-python"))


@pytest.fixture(autouse=True)
def _kafka_client_of_daemons(kafka_client: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Daemons started by the test (``stream-nb run``) use :func:`kafka_client`."""
    monkeypatch.setenv("STREAM_NB_KAFKA_CLIENT", kafka_client)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a running broker: the environment's, or one started here."""
    external = os.environ.get("STREAM_NB_KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    broker = KafkaBroker()
    try:
        broker.start()
        yield broker.bootstrap
    finally:
        broker.close()


@pytest.fixture
def own_broker() -> Iterator[KafkaBroker]:
    """A broker of this test's own, which the test may stop and restart."""
    broker = KafkaBroker()
    try:
        broker.start()
        yield broker
    finally:
        broker.close()


@pytest.fixture
def strict_broker() -> Iterator[KafkaBroker]:
    """A broker of this test's own that, like most production brokers, creates no topic
    on first use (``auto.create.topics.enable=false``)."""
    broker = KafkaBroker(config={"auto.create.topics.enable": "false"})
    try:
        broker.start()
        yield broker
    finally:
        broker.close()


@pytest.fixture
def unique() -> str:
    """A short unique suffix for topic and group names."""
    return uuid.uuid4().hex[:10]
