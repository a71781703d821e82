"""A real Apache Kafka broker for the Kafka tests (one per session).

By default the session fixture formats and starts a single-node KRaft broker
from the Maven Central jars (``scripts/kafka_jars.sh``) on free 127.0.0.1
ports in a temporary directory, and stops it at the end of the session. Set
``STREAM_NB_KAFKA_BOOTSTRAP=host:port[,host:port]`` to run the tests against
another cluster instead (tests that restart the broker still start their own).
Every test uses topics and groups with unique names, so tests can share a
cluster.
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
