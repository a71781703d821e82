"""Helpers for the end-to-end Kafka tests: topics, events, daemons, models."""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError
from kafka_broker import die_with_parent

import stream_nb
from stream_nb import Checkpointer, Learner
from stream_nb.cli import daemon_params

#: The learner the end-to-end tests run (``stream-nb run --model``).
MODEL = "NaiveBayes"

#: Relative tolerance for means/variances merged by Chan's formula vs learned in order.
MODEL_RTOL = 1e-9


def daemon_args(
    bootstrap: str,
    source: str,
    out: str,
    dlq: str,
    checkpoints: Path,
    *,
    interval: str,
    batch_size: int,
) -> list[str]:
    """``stream-nb run`` flags of a test daemon: ``source`` (a ``kafka://`` URL) to topic
    ``out``, dead letters to ``dlq``, the test model, ids in ``id``, checkpoints every
    ``interval`` seconds in ``checkpoints``."""
    return [
        "--source",
        source,
        "--sink",
        f"kafka://{bootstrap}/{out}",
        "--dead-letters",
        f"kafka://{bootstrap}/{dlq}",
        "--model",
        MODEL,
        "--id-field",
        "id",
        "--checkpoint-dir",
        str(checkpoints),
        "--checkpoint-interval",
        interval,
        "--batch-size",
        str(batch_size),
        "--log-level",
        "INFO",
        # below Daemon.stop's wait: a stop that hangs prints every thread's stack
        "--stop-timeout",
        "45",
    ]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()


def make_events(n: int, seed: int, start: int = 0) -> list[dict[str, Any]]:
    """Labelled mixed events with ids ``start..start+n-1`` (categorical and numeric)."""
    rng = random.Random(seed)
    events = []
    for i in range(start, start + n):
        y = rng.choice("abc")
        shift = {"a": 0.0, "b": 1.5, "c": -2.0}[y]
        events.append(
            {
                "id": i,
                "x": {
                    "colour": rng.choice(
                        ["red", "green", "blue"] if y != "a" else ["red", "red", "blue"]
                    ),
                    "shape": rng.choice(["round", "square"]),
                    "size": rng.gauss(shift, 1.0),  # Gaussian: Welford mean/variance
                },
                "y": y,
            }
        )
    return events


def produce(
    bootstrap: str, topic: str, payloads: Iterable[bytes], partitions: int, first: int = 0
) -> None:
    """Send payloads round-robin over the partitions (payload i to partition (first+i) % P),
    keyed by the event id (``"bad"`` for payloads that are not events)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for i, payload in enumerate(payloads, start=first):
        try:
            key = str(orjson.loads(payload)["id"]).encode()
        except (orjson.JSONDecodeError, KeyError, TypeError):
            key = b"bad"
        producer.send(topic, value=payload, key=key, partition=i % partitions)
    producer.flush()
    producer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        consumer.close()
    return {tp.partition: o for tp, o in ends.items()}


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None}).get(group, {})
    except KafkaError:  # coordinator not available yet
        return {}
    finally:
        admin.close()
    return {
        tp.partition: om.offset
        for tp, om in offsets.items()
        if tp.topic == topic and om.offset >= 0
    }


def wait_for(
    predicate: Any,
    timeout: float,
    what: str,
    interval: float = 0.3,
    daemons: Iterable[Daemon] = (),
) -> None:
    """Poll ``predicate`` until true; fail early, with its log, if a daemon died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for daemon in daemons:
            if not daemon.alive():
                raise AssertionError(f"daemon exited while waiting for {what}:\n{daemon.log()}")
        if predicate():
            return
        time.sleep(interval)
    logs = "\n".join(d.log() for d in daemons)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{logs}")


def wait_committed(
    bootstrap: str,
    group: str,
    topic: str,
    partitions: int,
    timeout: float,
    daemons: Iterable[Daemon] = (),
) -> None:
    """Until the group's committed offsets reach the topic's end on every partition."""
    ends = end_offsets(bootstrap, topic, partitions)
    wait_for(
        lambda: committed_offsets(bootstrap, group, topic) == ends,
        timeout,
        f"group {group} to commit {ends}",
        daemons=daemons,
    )


def group_members_with_partitions(bootstrap: str, group: str) -> int:
    """Members of a stable group that hold at least one partition."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        info = admin.describe_groups([group]).get(group) or {}
    except KafkaError:
        return 0
    finally:
        admin.close()
    if info.get("group_state") != "Stable":
        return 0
    return sum(
        any(t["partitions"] for t in m["member_assignment"]["assigned_partitions"])
        for m in info.get("members", [])
    )


def read_topic(
    bootstrap: str, topic: str, partitions: int, *, read_committed: bool = False
) -> list[Any]:
    """Every record of ``topic`` up to its current end.

    ``read_committed``: first waits (at most 60 s) until no transaction is open on the
    topic (the last stable offset reaches the high watermark): a stopped producer's
    open transaction is aborted by the coordinator only after its timeout. A
    transaction that stays open fails the read, naming the offsets.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed" if read_committed else "read_uncommitted",
    )
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    ends = consumer.end_offsets(tps)
    deadline = time.monotonic() + 60
    if read_committed:
        high = end_offsets(bootstrap, topic, partitions)
        while any(ends[tp] < high[tp.partition] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"a transaction stays open on {topic}: last stable offsets "
                    f"{ {tp.partition: ends[tp] for tp in tps} }, high watermarks {high}"
                )
            time.sleep(0.5)
            ends = consumer.end_offsets(tps)
            high = end_offsets(bootstrap, topic, partitions)
    out: list[Any] = []
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        if time.monotonic() > deadline:
            raise AssertionError(f"cannot read {topic} to its end")
        for messages in consumer.poll(timeout_ms=500).values():
            out.extend(messages)
    consumer.close()
    return out


class Daemon:
    """One ``stream-nb run`` subprocess, logging to a file."""

    def __init__(self, workdir: Path, name: str, args: list[str]) -> None:
        self.log_path = workdir / f"{name}.log"
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self._start_at = 0

    def start(self) -> Daemon:
        self._start_at = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        # faulthandler: a daemon that does not stop prints every thread's stack on SIGABRT
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "stream_nb.cli", "run", *self.args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=die_with_parent,
        )
        log.close()
        return self

    def wait_running(self, timeout: float = 60.0) -> Daemon:
        """Until the daemon logged that its loop starts (signal handlers installed)."""
        deadline = time.monotonic() + timeout
        while (
            "INFO stream_nb.cli: running"
            not in self.log_path.read_text(errors="replace")[self._start_at :]
        ):
            if not self.alive():
                raise AssertionError(f"daemon exited during start:\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"daemon not running after {timeout} s:\n{self.log()}")
            time.sleep(0.1)
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait (the daemon flushes and checkpoints)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            raise AssertionError(f"daemon did not stop:\n{self.log()}") from None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-20000:]


def snapshot(directory: Path) -> dict[str, Any]:
    found = Checkpointer(directory, create=False).latest()
    assert found is not None, f"no snapshot in {directory}"
    return found[1]


def model_of(directory: Path) -> Learner:
    """The committed model of a daemon's newest snapshot (the sync base when syncing)."""
    body = snapshot(directory)
    sync = (body.get("extra") or {}).get("kafka_sync")
    return Learner.from_state(sync["base"] if sync else body["learner"])


def reference_model(events: Iterable[Mapping[str, Any]]) -> Learner:
    """The library's own model (:data:`MODEL`, the daemon's parameters) learned on ``events``."""
    cls = getattr(stream_nb, MODEL)
    learner = cls(**daemon_params(cls))
    for event in events:
        learner.learn_one(event["x"], event["y"])
    return learner


def assert_same_model(actual: Learner, expected: Learner, rtol: float = MODEL_RTOL) -> None:
    """Same class, parameters and events learned; statistics equal (floats to ``rtol``)."""
    assert type(actual) is type(expected)
    assert actual.n_learned == expected.n_learned
    a, b = actual.to_state(), expected.to_state()
    assert a["params"] == b["params"]
    assert_close_tree(canonical(a["stats"]), canonical(b["stats"]), rtol, "stats")


_GAUSSIAN_BLOCK = {"classes", "features", "n", "mean", "m2"}


def canonical(value: Any) -> Any:
    """Pair lists (``[[key, value], ...]``) as dicts so order does not matter; Gaussian
    blocks indexed ``[class][feature]`` (order of first appearance) keyed by name instead."""
    if isinstance(value, dict) and value.keys() >= _GAUSSIAN_BLOCK:
        classes = [repr(c) for c, _ in value["classes"]]
        features = [repr(f) for f in value["features"]]
        out = {k: canonical(v) for k, v in value.items() if k not in _GAUSSIAN_BLOCK}
        out["classes"] = canonical(value["classes"])
        for stat in ("n", "mean", "m2"):
            out[stat] = {
                c: dict(zip(features, row, strict=True))
                for c, row in zip(classes, value[stat], strict=True)
            }
        if "global" in out:  # per statistic, a row indexed by feature
            out["global"] = [dict(zip(features, row, strict=True)) for row in value["global"]]
        return out
    if (
        isinstance(value, list)
        and value
        and all(
            isinstance(item, list) and len(item) == 2 and not isinstance(item[0], (list, dict))
            for item in value
        )
    ):
        keys = [item[0] for item in value]
        if len(set(map(repr, keys))) == len(keys):
            return {repr(k): canonical(v) for k, v in value}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    return value


def assert_close_tree(a: Any, b: Any, rtol: float, path: str) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys differ"
        for k in a:
            assert_close_tree(a[k], b[k], rtol, f"{path}/{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_close_tree(x, y, rtol, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=rtol, abs_tol=rtol), f"{path}: {a} != {b}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def predictions(records: Iterable[Any]) -> list[dict[str, Any]]:
    return [orjson.loads(r.value) for r in records]
