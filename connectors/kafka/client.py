"""What the Kafka connector needs around kafka-python's producers and consumers.

Needs the ``kafka`` extra (``pip install '.[kafka]' in a clone``). Kept apart from
:mod:`stream_nb.connectors.kafka` (sources, sinks, model sync), which uses it:

* :func:`bounded` runs a blocking client call with a deadline (kafka-python 3.0's
  transactional calls take none);
* :class:`TroubleLog` logs broker trouble at most once per kind every 30 s, with a
  count of what it held back;
* :func:`check_topics` checks at start that topics exist (or creates them) and
  reads each one's record size limit (``max.message.bytes``);
* :func:`record_bytes`, :func:`carry_headers`, :func:`fit_dead_letter` and
  :func:`shrink_prediction` keep every record within its topic's limit, so that
  no single record can stop a partition;
* :class:`ClientAdapter` is the one place that touches kafka-python beyond its
  public API (see its docstring).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from stream_nb._exceptions import ConfigError, StreamNBError

try:
    from kafka.errors import (
        KafkaError,
        MessageSizeTooLargeError,
        RecordListTooLargeError,
    )
    from kafka.future import Future as _KafkaFuture
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the Kafka connector needs kafka-python; install the 'kafka' extra: "
        "pip install '.[kafka]' in a clone"
    ) from exc

__all__ = [
    "DEAD_LETTER_PAYLOAD_BYTES",
    "MAX_CARRIED_HEADERS",
    "MAX_CARRIED_HEADER_BYTES",
    "ClientAdapter",
    "TopicInfo",
    "TroubleLog",
    "bounded",
    "carry_headers",
    "check_topics",
    "fit_dead_letter",
    "is_too_large",
    "record_bytes",
    "shrink_prediction",
]

_log = logging.getLogger("stream_nb.kafka")

T = TypeVar("T")

#: Largest part of a rejected payload a dead letter carries (bytes); a longer payload
#: is cut to this prefix, with its full size and SHA-256.
DEAD_LETTER_PAYLOAD_BYTES = 64 * 1024

#: Source headers carried to a prediction or dead letter, in total (names and values,
#: bytes), and in number; headers beyond either bound are dropped, in order.
MAX_CARRIED_HEADER_BYTES = 16 * 1024
MAX_CARRIED_HEADERS = 64

#: Header prefix of the headers stream-nb writes itself.
HEADER_PREFIX = "stream_nb."

#: Upper bound of a record batch's and one record's framing (magic v2): the 61-byte
#: batch header, the record's attributes, varint lengths, offset and timestamp deltas.
_BATCH_OVERHEAD = 61 + 21 + 10
#: Per header: two varint lengths.
_HEADER_OVERHEAD = 10


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
    >>> bounded(lambda: 6 * 7, 1.0, "a sum", ConfigError)
    42
    >>> bounded(lambda: time.sleep(5), 0.05, "a nap", ConfigError)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ConfigError: a nap did not finish within 0.05 s; the broker ...
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=f"stream-nb {what}", daemon=True).start()
    if not done.wait(seconds):
        message = (
            f"{what} did not finish within {seconds:g} s; the broker is unreachable or "
            "overloaded (exiting so that a supervisor restarts from the last snapshot)"
        )
        _log.error("%s", message)
        raise error(message)
    if "error" in box:
        raise box["error"]
    return box["value"]


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
trouble = TroubleLog(_log)


class ClientAdapter:
    """The two things kafka-python 3.0 offers no public API for, in one place.

    * **Broker connections** (:meth:`connections`): read from the client's public
      ``metrics()`` (``connection-count`` of its ``*-metrics`` group), so readiness and
      outage logging need no private attribute. ``None`` when the client keeps no
      metrics (``metrics_enabled=False``).
    * **Blocking work from a rebalance listener** (:meth:`await_in_thread`): kafka-python
      3.x runs an ``AsyncConsumerRebalanceListener`` on its IO loop, where blocking calls
      are refused. The listener must await work done on another thread, and only the
      loop can resume it: this is the one use of a private attribute (the consumer's
      ``_net`` loop and its ``call_soon_threadsafe``). If a kafka-python release
      moves it, :meth:`await_in_thread` raises instead of skipping the work (a
      revoke would otherwise commit nothing), and the tests of this module fail.
    """

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
        done = _KafkaFuture()

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


# ---------------------------------------------------------------- topics at start
@dataclass(frozen=True)
class TopicInfo:
    """A topic as found (or created) at start.

    Attributes
    ----------
    name
        The topic.
    partitions
        Its partition count (``None`` when the broker creates it on first use).
    max_message_bytes
        Its ``max.message.bytes`` (largest record batch the broker accepts), or
        ``None`` when it could not be read.
    """

    name: str
    partitions: int | None
    max_message_bytes: int | None


def check_topics(
    admin: Any,
    servers: Sequence[str],
    roles: Mapping[str, str],
    *,
    create: bool,
    partitions: int = -1,
    replication_factor: int = -1,
    single_partition: Sequence[str] = (),
    error: type[StreamNBError] = ConfigError,
) -> dict[str, TopicInfo]:
    """Check that every topic of ``roles`` (topic → what it is for) exists.

    A missing topic is created when ``create`` is true (``partitions`` and
    ``replication_factor``, ``-1`` for the broker's defaults; the topics of
    ``single_partition`` get one partition). Otherwise, if the broker creates topics
    on first use (``auto.create.topics.enable=true``), a missing topic is logged and
    left to the broker, except the ``single_partition`` ones, which are created here
    with one partition. Otherwise it is an error naming the topic and both fixes.

    Raises
    ------
    ConfigError
        (or ``error``) naming a missing topic, or one the client may not describe.
    """
    names = list(roles)
    found = {t["name"]: t for t in admin.describe_topics(names)}
    missing: list[str] = []
    for name in names:
        code = int(found.get(name, {}).get("error_code", 3))
        if code == 3:  # UNKNOWN_TOPIC_OR_PARTITION
            missing.append(name)
        elif code == 29:  # TOPIC_AUTHORIZATION_FAILED
            raise error(
                f"not authorized to describe Kafka topic {name!r} ({roles[name]}) on "
                f"{','.join(servers)}; grant this client DESCRIBE, READ/WRITE on it"
            )
        elif code != 0:
            raise error(f"cannot describe Kafka topic {name!r} ({roles[name]}): error code {code}")
    to_create: list[str] = []
    left_to_broker: list[str] = []
    if missing:
        if create:
            to_create = missing
        elif _broker_auto_creates(admin):
            to_create = [n for n in missing if n in single_partition]
            left_to_broker = [n for n in missing if n not in single_partition]
        else:
            name = missing[0]
            hint = " --partitions 1" if name in single_partition else ""
            raise error(
                f"Kafka topic {name!r} ({roles[name]}) does not exist on "
                f"{','.join(servers)}; create it (kafka-topics.sh --bootstrap-server "
                f"{servers[0]} --create --topic {name}{hint}) or set create_topics=true "
                "in the URL"
            )
    if to_create:
        _create(admin, to_create, partitions, replication_factor, single_partition, roles)
        found.update({t["name"]: t for t in admin.describe_topics(to_create)})
    for name in left_to_broker:
        _log.warning(
            "Kafka topic %r (%s) does not exist; the broker will create it with its "
            "defaults on first use (auto.create.topics.enable=true)",
            name,
            roles[name],
        )
    limits = _max_message_bytes(admin, [n for n in names if n not in left_to_broker])
    return {
        name: TopicInfo(
            name,
            None if name in left_to_broker else len(found[name].get("partitions") or []),
            limits.get(name),
        )
        for name in names
    }


def _create(
    admin: Any,
    names: list[str],
    partitions: int,
    replication_factor: int,
    single_partition: Sequence[str],
    roles: Mapping[str, str],
) -> None:
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    for name in names:
        count = 1 if name in single_partition else partitions
        try:
            admin.create_topics([NewTopic(name, count, replication_factor)])
        except TopicAlreadyExistsError:  # another daemon created it meanwhile
            continue
        _log.info(
            "created Kafka topic %r (%s) with %s partition(s)",
            name,
            roles[name],
            "the broker's default" if count < 0 else count,
        )


def _broker_auto_creates(admin: Any) -> bool:
    """Whether the broker creates topics on first use (``False`` when unknown)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    try:
        brokers = admin.describe_cluster()["brokers"]
        broker = str(brokers[0]["broker_id"])
        found = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, broker, ["auto.create.topics.enable"])],
            config_filter="all",
        )
        value = found["broker"][broker]["auto.create.topics.enable"]["value"]
    except (KafkaError, KeyError, IndexError, TypeError):
        return False
    return str(value).lower() == "true"


def _max_message_bytes(admin: Any, names: list[str]) -> dict[str, int]:
    """``max.message.bytes`` of each topic that has it readable."""
    from kafka.admin import ConfigResource, ConfigResourceType

    if not names:
        return {}
    try:
        found = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, n, ["max.message.bytes"]) for n in names],
            config_filter="all",
        )["topic"]
    except (KafkaError, KeyError, TypeError):
        return {}
    out = {}
    for name in names:
        try:
            out[name] = int(found[name]["max.message.bytes"]["value"])
        except (KeyError, TypeError, ValueError):
            continue
    return out


# ---------------------------------------------------------------- record sizes
def record_bytes(
    key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]] | None
) -> int:
    """An upper bound of the size of a record batch holding only this record.

    A broker compares its ``max.message.bytes`` with that size (magic v2, no
    compression), kafka-python its ``max_request_size``.

    Examples
    --------
    >>> record_bytes(b"k", b"x" * 100, [("trace", b"abc")])
    211
    """
    size = _BATCH_OVERHEAD + len(value) + (0 if key is None else len(key))
    if headers:
        for name, data in headers:
            size += _HEADER_OVERHEAD + len(name.encode()) + len(data)
    return size


def is_too_large(exc: BaseException | None) -> bool:
    """Whether a send failed because the record (batch) exceeds a size limit."""
    return isinstance(exc, (MessageSizeTooLargeError, RecordListTooLargeError))


def carry_headers(
    headers: Sequence[tuple[str, bytes]] | None, *, drop_own: bool = False
) -> list[tuple[str, bytes]]:
    """Source headers to carry: in order, up to :data:`MAX_CARRIED_HEADERS` of them and
    :data:`MAX_CARRIED_HEADER_BYTES` in total; with ``drop_own``, without the
    ``stream_nb.*`` ones (a dead letter writes its own).

    Examples
    --------
    >>> carry_headers([("trace", b"t1"), ("big", b"x" * 20000), ("span", b"s")])
    [('trace', b't1'), ('span', b's')]
    """
    out: list[tuple[str, bytes]] = []
    if not headers:
        return out
    total = 0
    for name, value in headers:
        if drop_own and name.startswith(HEADER_PREFIX):
            continue
        size = len(name.encode()) + len(value)
        if total + size > MAX_CARRIED_HEADER_BYTES:
            continue
        total += size
        out.append((name, value))
        if len(out) == MAX_CARRIED_HEADERS:
            break
    return out


def _payload_bytes(letter: Mapping[str, Any]) -> bytes | None:
    """The rejected payload a dead letter embeds (``payload`` or ``payload_base64``)."""
    if isinstance(letter.get("payload"), str):
        return str(letter["payload"]).encode("utf-8", "surrogatepass")
    if isinstance(letter.get("payload_base64"), str):
        try:
            return base64.b64decode(str(letter["payload_base64"]), validate=True)
        except ValueError:
            return None
    return None


def fit_dead_letter(value: bytes, *, keep_payload: bool = True) -> bytes:
    """A dead letter whose embedded payload is at most :data:`DEAD_LETTER_PAYLOAD_BYTES`.

    A longer payload is cut to that prefix (as text when the payload is UTF-8, else
    base64) and the letter gains ``payload_truncated: true``, ``payload_bytes`` (the
    full size) and ``payload_sha256`` (of the full payload). With ``keep_payload``
    false the payload is left out entirely (size and hash kept). A value that is not
    a dead letter (a JSON object) is returned unchanged.

    Examples
    --------
    >>> letter = orjson.dumps({"reason": "too_large", "payload": "ab" * 40000})
    >>> cut = orjson.loads(fit_dead_letter(letter))
    >>> len(cut["payload"]), cut["payload_bytes"], cut["payload_truncated"]
    (65536, 80000, True)
    >>> sorted(orjson.loads(fit_dead_letter(letter, keep_payload=False)))
    ['payload_bytes', 'payload_omitted', 'payload_sha256', 'reason']
    """
    if keep_payload and len(value) <= DEAD_LETTER_PAYLOAD_BYTES:
        return value  # the payload is shorter still
    try:
        letter = orjson.loads(value)
    except orjson.JSONDecodeError:
        return value
    if not isinstance(letter, dict):
        return value
    payload = _payload_bytes(letter)
    if payload is None or (keep_payload and len(payload) <= DEAD_LETTER_PAYLOAD_BYTES):
        return value
    letter.pop("payload", None)
    letter.pop("payload_base64", None)
    letter.setdefault("payload_bytes", len(payload))
    letter.setdefault("payload_sha256", hashlib.sha256(payload).hexdigest())
    if keep_payload:
        prefix = payload[:DEAD_LETTER_PAYLOAD_BYTES]
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError:
            letter["payload_base64"] = base64.b64encode(prefix).decode("ascii")
        else:  # a valid text cut at a character boundary
            letter["payload"] = prefix.decode("utf-8", "ignore")
        letter["payload_truncated"] = True
    else:
        letter.pop("payload_truncated", None)
        letter["payload_omitted"] = True
    return orjson.dumps(letter)


#: Prediction fields left out of a prediction too large for its topic.
_OPTIONAL_PREDICTION_FIELDS = ("log_proba", "explain")


def shrink_prediction(value: bytes) -> bytes | None:
    """A prediction record without its ``log_proba`` and ``explain`` (listed under
    ``omitted``), or ``None`` if there is nothing to leave out.

    Examples
    --------
    >>> shrink_prediction(b'{"id":1,"y_pred":"a","log_proba":{"a":0.0},"n_learned":3}')
    b'{"id":1,"y_pred":"a","n_learned":3,"omitted":["log_proba"]}'
    """
    try:
        record = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    omitted = [f for f in _OPTIONAL_PREDICTION_FIELDS if record.pop(f, None) is not None]
    if not omitted:
        return None
    record["omitted"] = omitted
    return orjson.dumps(record)
