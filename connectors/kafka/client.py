"""Calling kafka-python safely: bounded calls, rate-limited trouble logs, the adapter.

* :func:`bounded` runs a blocking client call with a deadline (kafka-python 3.0's
  transactional calls take none);
* :class:`TroubleLog` logs broker trouble at most once per kind every 30 s, with a
  count of what it held back (:data:`trouble` is the one every connector shares);
* :class:`ClientAdapter` is the one place that touches kafka-python beyond its
  public API (see its docstring); :func:`warn_without_crc32c` uses it. It also makes
  the connector's consumers and producers, polls and turns polled messages into
  records: :class:`~stream_nb.connectors.kafka.confluent.ConfluentAdapter` does the
  same with librdkafka (``client=confluent``), and :func:`client_adapter` picks one.
"""

from __future__ import annotations

import functools
import logging
import operator
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kafka import KafkaConsumer
from kafka import errors as kerrors
from kafka.future import Future

from stream_nb._exceptions import ConfigError, StreamNBError
from stream_nb.connectors.kafka.block import MessageBlock
from stream_nb.connectors.kafka.delivery import KafkaPythonProducer
from stream_nb.connectors.kafka.url import log
from stream_nb.engine.runtime import CallTimeout, call_within

__all__ = [
    "CLIENTS",
    "ClientAdapter",
    "ClientFatalError",
    "TroubleLog",
    "bounded",
    "client_adapter",
    "trouble",
    "warn_without_crc32c",
]

#: The Kafka clients a connector can use (``client=`` in a URL, ``--kafka-client``):
#: kafka-python (the default) and librdkafka through confluent-kafka.
CLIENTS = ("kafka-python", "confluent")

T = TypeVar("T")


class ClientFatalError(kerrors.IllegalStateError):  # type: ignore[misc]  # untyped base
    """The client object cannot go on (librdkafka's fatal error state, for example a
    transaction the broker answered with ``INVALID_TXN_STATE`` after a restart); a new
    client with the same configuration can."""


def bounded(call: Callable[[], T], seconds: float, what: str, error: type[StreamNBError]) -> T:
    """Run a blocking client call, but wait for it at most ``seconds``.

    The call runs on a helper thread (a daemon thread: a call that never returns
    cannot keep the process alive). Its own exception is re-raised here.

    Raises
    ------
    StreamNBError
        ``error(...)`` naming ``what`` if the call did not finish in time.

    Examples
    --------
    >>> from stream_nb import ConfigError
    >>> bounded(lambda: 6 * 7, 1.0, "a sum", ConfigError)
    42
    >>> bounded(lambda: time.sleep(5), 0.05, "a nap", ConfigError)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ConfigError: a nap did not finish within 0.05 s; the broker ...
    """
    try:
        return call_within(call, seconds, what)
    except CallTimeout as exc:
        message = (
            f"{exc}; the broker is unreachable or overloaded (exiting so that a supervisor "
            "restarts from the last snapshot)"
        )
        log.error("%s", message)
        raise error(message) from None


class TroubleLog:
    """Warnings about broker trouble: at most one per kind every ``every`` seconds.

    A kind is a short string (``"unreachable"``, ``"commit"`` …, with the topic where
    it helps). The first report of a kind is logged at once; later ones within
    ``every`` seconds are counted, and the next logged one says how many were held
    back. :meth:`clear` logs once that the trouble is over.

    Examples
    --------
    >>> logger = logging.getLogger("stream_nb.doc")
    >>> logger.addHandler(logging.NullHandler()); logger.propagate = False
    >>> clock = iter([0.0, 1.0, 2.0, 40.0, 41.0]).__next__
    >>> log = TroubleLog(logger, every=30.0, clock=clock)
    >>> [log.report("commit", "commit failed") for _ in range(4)]
    [True, False, False, True]
    >>> log.pending("commit")
    0
    >>> log.clear("commit", "commits work again")
    True
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        every: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self.every = every
        self._clock = clock
        self._lock = threading.Lock()
        # kind -> [time of the last logged report, reports held back since, first seen]
        self._kinds: dict[str, list[float]] = {}

    def report(self, kind: str, message: str, *, level: int = logging.WARNING) -> bool:
        """Log ``message`` unless ``kind`` was logged less than ``every`` s ago; whether
        it was logged."""
        now = self._clock()
        with self._lock:
            state = self._kinds.get(kind)
            if state is None:
                self._kinds[kind] = [now, 0.0, now]
                held = -1
            elif now - state[0] >= self.every:
                held = int(state[1])
                state[0], state[1] = now, 0.0
            else:
                state[1] += 1
                return False
        if held > 0:
            message = f"{message} ({held} more like it in the last {self.every:g} s)"
        self._logger.log(level, "%s", message)
        return True

    def pending(self, kind: str) -> int:
        """Reports of ``kind`` held back since the last one logged."""
        with self._lock:
            state = self._kinds.get(kind)
            return 0 if state is None else int(state[1])

    def active(self, kind: str) -> bool:
        """Whether ``kind`` was reported and not cleared since."""
        with self._lock:
            return kind in self._kinds

    def clear(self, kind: str, message: str) -> bool:
        """The trouble of ``kind`` is over: log ``message`` (with its duration) if it had
        been reported; whether it had."""
        now = self._clock()
        with self._lock:
            state = self._kinds.pop(kind, None)
        if state is None:
            return False
        self._logger.info("%s (after %.0f s)", message, now - state[2])
        return True


#: Broker trouble of every Kafka connector of this process.
trouble = TroubleLog(log)

# kafka-python's ConsumerRecord fields, read in C
_VALUE = operator.attrgetter("value")
_OFFSET = operator.attrgetter("offset")
_KEY = operator.attrgetter("key")
_HEADERS = operator.attrgetter("headers")


def _timestamp(message: Any) -> float | None:
    """A kafka-python record's timestamp in seconds."""
    stamp = message.timestamp
    return stamp / 1000.0 if stamp is not None else None


class ClientAdapter:
    """kafka-python for the connector, and the three things it offers no public API for.

    The connector makes its clients (:meth:`consumer`, :meth:`producer`), subscribes
    (:meth:`subscribe`), polls (:meth:`poll`) and turns what it polled into a block of
    records (:meth:`block`) through this class, so that
    :class:`~stream_nb.connectors.kafka.confluent.ConfluentAdapter` can do the same with
    librdkafka: every other line of the connector is the same for both clients, which
    offer the kafka-python consumer and producer methods it calls.

    * **Broker connections** (:meth:`connections`): read from the client's public
      ``metrics()`` (``connection-count`` of its ``*-metrics`` group), so readiness and
      outage logging need no private attribute. ``None`` when the client keeps no
      metrics (``metrics_enabled=False``).
    * **Blocking work from a rebalance listener** (:meth:`await_in_thread`): kafka-python
      3.x runs an ``AsyncConsumerRebalanceListener`` on its IO loop, where blocking calls
      are refused. The listener must await work done on another thread, and only the
      loop can resume it: this is the one use of a private attribute (the consumer's
      ``_net`` loop and its ``call_soon_threadsafe``); kafka-python's public futures
      resume no coroutine from another thread. If a kafka-python release moves it,
      :meth:`await_in_thread` raises instead of skipping the work (a revoke would
      otherwise commit nothing), and ``tests/connectors/kafka/test_kafka_client.py``
      fails.
    * **Whether CRC32C runs in C** (:meth:`native_crc32c`): kafka-python checksums every
      record batch with the ``crc32c`` package when its internal ``kafka.record.util``
      module found it (``crc32c_c``), else in pure Python; nothing public says which.
    """

    #: The client's name, as in :data:`CLIENTS`.
    name = "kafka-python"

    @staticmethod
    def consumer(**options: Any) -> Any:
        """A consumer with kafka-python's options."""
        return KafkaConsumer(**options)

    @staticmethod
    def producer(**options: Any) -> Any:
        """A producer with kafka-python's options (and the sinks' ``deliveries``)."""
        return KafkaPythonProducer(**options)

    @staticmethod
    def subscribe(consumer: Any, topics: list[str], listener: Any) -> None:
        """Subscribe ``consumer`` to ``topics``; ``listener``'s coroutines handle rebalances."""
        consumer.subscribe(topics, listener=listener)

    @staticmethod
    def poll(consumer: Any, max_records: int, timeout_ms: int) -> Any:
        """Up to ``max_records`` messages, waiting at most ``timeout_ms`` (rebalances run
        inside); hand the result to :meth:`block`."""
        return consumer.poll(timeout_ms=timeout_ms, max_records=max_records)

    @staticmethod
    def block(polled: Any, positions: dict[Any, int]) -> MessageBlock:
        """What :meth:`poll` returned, as one block of columns; ``positions`` gets the next
        offset of every partition it came from."""
        messages: list[Any] = []
        topics: list[str] = []
        partitions: list[int] = []
        for tp, batch in polled.items():
            if batch:
                messages += batch
                topics += [tp.topic] * len(batch)
                partitions += [tp.partition] * len(batch)
                positions[tp] = batch[-1].offset + 1
        payloads = list(map(_VALUE, messages))
        if None in payloads:
            payloads = [b"" if v is None else v for v in payloads]
        return MessageBlock(
            messages,
            payloads,
            topics,
            partitions,
            list(map(_OFFSET, messages)),
            list(map(_KEY, messages)),
            list(map(_HEADERS, messages)),
            _timestamp,
        )

    @staticmethod
    def connections(client: Any) -> int | None:
        """Live broker connections of a consumer, producer or admin client."""
        try:
            metrics = client.metrics()
        except Exception:  # a closed client, or metrics off
            return None
        if not metrics:
            return None
        for group, values in metrics.items():
            if group.endswith("-metrics") and "connection-count" in values:
                return int(values["connection-count"])
        return None

    @staticmethod
    async def await_in_thread(consumer: Any, work: Callable[[], bool]) -> bool:
        """Run ``work()`` on a helper thread; suspend the calling listener coroutine
        (on ``consumer``'s IO loop, which keeps heartbeating) until it returns.

        Returns its result; an exception in ``work`` propagates to the listener.
        """
        net = getattr(consumer, "_net", None)
        if net is None or not hasattr(net, "call_soon_threadsafe"):
            raise RuntimeError(
                "this kafka-python release has no consumer IO loop (_net) to resume a "
                "rebalance listener from a helper thread; use kafka-python 3.0.x"
            )
        done = Future()

        def run() -> None:
            try:
                outcome: tuple[bool, Any] = (True, bool(work()))
            except BaseException as exc:  # handed back to the listener
                outcome = (False, exc)

            def finish() -> None:  # on the IO thread, which then resumes the listener
                if outcome[0]:
                    done.success(outcome[1])
                else:
                    done.failure(outcome[1])

            net.call_soon_threadsafe(finish)

        threading.Thread(target=run, name="stream-nb rebalance", daemon=True).start()
        return bool(await done)

    @staticmethod
    def native_crc32c() -> bool | None:
        """Whether kafka-python checksums record batches in C (``None``: unknown layout)."""
        try:
            from kafka.record import util
        except ImportError:  # pragma: no cover - other kafka-python layouts
            return None
        if not hasattr(util, "crc32c_c"):
            return None
        return util.crc32c_c is not None


def client_adapter(name: str | None) -> ClientAdapter:
    """The adapter of client ``name`` (one of :data:`CLIENTS`; ``None``: kafka-python).

    Raises
    ------
    ConfigError
        For an unknown name, or ``confluent`` without confluent-kafka installed (naming
        the extra that installs it).

    Examples
    --------
    >>> client_adapter(None).name
    'kafka-python'
    >>> client_adapter("rdkafka")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ConfigError: unknown Kafka client 'rdkafka'; expected kafka-python ...
    """
    if name is None or name == "kafka-python":
        return ClientAdapter()
    if name != "confluent":
        raise ConfigError(f"unknown Kafka client {name!r}; expected {' or '.join(CLIENTS)}")
    try:
        from stream_nb.connectors.kafka.confluent import ConfluentAdapter
    except ImportError as exc:
        raise ConfigError(
            "the Kafka client 'confluent' needs confluent-kafka (librdkafka); install the "
            "'kafka-fast' extra: pip install 'stream-nb[kafka-fast]' (or '.[kafka-fast]' in "
            f"a clone of stream-nb) ({exc})"
        ) from exc
    return ConfluentAdapter()


@functools.cache
def warn_without_crc32c() -> None:
    """Warn once when kafka-python must compute CRC32C in pure Python."""
    if ClientAdapter.native_crc32c() is False:
        log.warning(
            "kafka-python computes record-batch CRC32C in pure Python (about 40% of the "
            "daemon's CPU); install the 'kafka' extra or 'pip install crc32c'"
        )
