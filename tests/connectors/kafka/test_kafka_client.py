"""connectors/kafka/client.py: bounded calls, the rate-limited trouble log, and the one
adapter over kafka-python's internals (each of its uses tested against kafka-python)."""

from __future__ import annotations

import logging
import threading
import time
import uuid

import pytest
from kafka import AsyncConsumerRebalanceListener, KafkaConsumer
from kafka_broker import KafkaBroker
from kafka_helpers import create_topic, wait_for

from stream_nb import SinkError
from stream_nb.connectors.kafka.client import ClientAdapter, TroubleLog, bounded


def test_bounded_returns_raises_and_times_out() -> None:
    assert bounded(lambda: 1, 1.0, "x", SinkError) == 1
    with pytest.raises(ZeroDivisionError):
        bounded(lambda: 1 / 0, 1.0, "x", SinkError)
    release = threading.Event()
    with pytest.raises(SinkError, match=r"committing did not finish within 0\.2 s"):
        bounded(release.wait, 0.2, "committing", SinkError)
    assert not release.is_set()  # it returned while the call still blocks
    release.set()


def test_trouble_log_holds_back_repeats_and_counts_them(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = TroubleLog(logging.getLogger("stream_nb.test"), every=30.0, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="stream_nb.test"):
        for t in (0.0, 1.0, 2.0, 3.0, 31.0, 32.0):
            now[0] = t
            log.report("flush", "waiting")
        log.report("commit", "commit failed")  # another kind: logged at once
        now[0] = 95.0
        assert log.clear("flush", "acknowledged again")
        assert not log.clear("flush", "acknowledged again")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "waiting",
        "waiting (3 more like it in the last 30 s)",
        "commit failed",
        "acknowledged again (after 95 s)",
    ]
    assert log.active("commit") and not log.active("flush")


# ---------------------------------------------------------------- the client adapter
def test_client_adapter_counts_connections_from_public_metrics(own_broker: KafkaBroker) -> None:
    """Readiness reads kafka-python's public metrics: connections while the broker is up,
    none once it is away."""
    consumer = KafkaConsumer(bootstrap_servers=own_broker.bootstrap, group_id=None)
    silent = KafkaConsumer(bootstrap_servers=own_broker.bootstrap, metrics_enabled=False)
    try:
        consumer.topics()
        assert (ClientAdapter.connections(consumer) or 0) > 0
        assert ClientAdapter.connections(silent) is None  # unknown: readiness stays true
        own_broker.stop()
        wait_for(lambda: ClientAdapter.connections(consumer) == 0, 60, "connections to drop")
    finally:
        consumer.close()
        silent.close()


def test_client_adapter_refuses_a_kafka_python_without_an_io_loop() -> None:
    """A kafka-python layout without the consumer's IO loop raises (a revoke would
    otherwise skip its checkpoint and commit without a word)."""
    coroutine = ClientAdapter.await_in_thread(object(), lambda: True)
    with pytest.raises(RuntimeError, match="no consumer IO loop"):
        coroutine.send(None)


def test_client_adapter_runs_listener_work_on_a_helper_thread(kafka_bootstrap: str) -> None:
    """A rebalance listener awaits blocking work on a helper thread through the consumer's
    IO loop: the work runs off the IO thread, its result and its exception come back to
    the listener, and kafka-python keeps the group going meanwhile."""
    topic = f"adapter-{uuid.uuid4().hex[:10]}"
    create_topic(kafka_bootstrap, topic, 1)
    seen: dict[str, object] = {}

    def work() -> bool:
        seen["work_thread"] = threading.current_thread().name
        time.sleep(0.2)  # blocking: refused on the IO thread
        return True

    def failing() -> bool:
        raise ZeroDivisionError("inside the helper thread")

    class Listener(AsyncConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: object) -> None:
            pass

        async def on_partitions_assigned(self, assigned: object) -> None:
            seen["listener_thread"] = threading.current_thread().name
            seen["result"] = await ClientAdapter.await_in_thread(consumer, work)
            try:
                await ClientAdapter.await_in_thread(consumer, failing)
            except ZeroDivisionError as exc:
                seen["error"] = exc

    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=f"g-{topic}")
    try:
        consumer.subscribe([topic], listener=Listener())
        deadline = time.monotonic() + 60
        while "error" not in seen and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
    finally:
        consumer.close()
    assert seen["result"] is True
    assert isinstance(seen["error"], ZeroDivisionError)
    assert seen["work_thread"] == "stream-nb rebalance"
    assert seen["listener_thread"] != seen["work_thread"]


def test_client_adapter_sees_the_c_crc32c_of_the_kafka_extra() -> None:
    """The ``kafka`` extra (and the test extra) installs ``crc32c``, which kafka-python
    then uses."""
    assert ClientAdapter.native_crc32c() is True
