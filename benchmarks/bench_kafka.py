"""Kafka end to end: topic → ``stream-nb run`` → topic, events/s, one daemon and two in a group.

One command (starts its own single-node broker from the Maven Central jars, see
``scripts/kafka_jars.sh``; set ``STREAM_NB_KAFKA_BOOTSTRAP=host:port`` to use
another cluster)::

    python -m benchmarks.bench_kafka                    # 100k Agrawal events, NaiveBayes
    python -m benchmarks.bench_kafka --events 20000     # quicker

The events are produced to a 4-partition topic first (not timed). Each
scenario then starts real ``stream-nb run`` subprocesses (own consumer group,
predictions and dead letters to Kafka topics, checkpoints every 5 s) and is
timed from spawn until the predictions topic holds one record per event;
start-up and the group join are included, and the *steady* rate counts from
the first prediction. CPU is the daemons' own (user + system), measured after
they are stopped.

Scenarios: ``1 daemon`` (at-least-once, the default), ``1 daemon,
exactly-once`` (transactions every second), ``2 daemons, model sync`` (one
group, deltas every second). Results go to ``benchmarks/results/kafka.json``
and ``kafka.md`` with the machine description.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from benchmarks.bench_engine import _children_cpu, machine
from stream_nb.datasets import agrawal

RESULTS = Path(__file__).parent / "results"
PARTITIONS = 4
_BROKER_DIR = Path(__file__).resolve().parents[1] / "tests" / "connectors" / "kafka"


def _produce(bootstrap: str, topic: str, n: int, seed: int) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    for i, (x, y) in enumerate(agrawal(seed=seed, n=n)):
        producer.send(topic, value=orjson.dumps({"id": i, "x": x, "y": y}), key=str(i).encode())
    producer.flush()
    producer.close()


def _records(bootstrap: str, topic: str) -> int:
    """Records in ``topic`` (sum of end offsets; 0 if it does not exist yet)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            return 0
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in partitions])
        return sum(ends.values())
    finally:
        consumer.close()


def scenario(
    exe: str, bootstrap: str, topic: str, n: int, model: str, workers: int, query: str
) -> dict[str, Any]:
    """Run ``workers`` daemons until the predictions topic holds ``n`` records."""
    tag = uuid.uuid4().hex[:8]
    out, group = f"bench-out-{tag}", f"bench-{tag}"
    tmp = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    procs = []
    cpu0, start = _children_cpu(), time.perf_counter()
    for w in range(workers):
        source = f"kafka://{bootstrap}/{topic}?group_id={group}&worker_id=w{w}{query}"
        args = [
            exe,
            "run",
            "--model",
            model,
            "--source",
            source,
            "--sink",
            f"kafka://{bootstrap}/{out}",
            "--dead-letters",
            f"kafka://{bootstrap}/{out}-dlq",
            "--id-field",
            "id",
            "--checkpoint-dir",
            str(tmp / f"w{w}"),
            "--checkpoint-interval",
            "5",
            "--report",
            os.devnull,
            "--log-level",
            "WARNING",
        ]
        procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL))
    first = None
    try:
        while True:
            done = _records(bootstrap, out)
            now = time.perf_counter()
            if done and first is None:
                first = (now, done)
            if done >= n:
                break
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a stream-nb daemon exited early")
            time.sleep(0.05)
        wall = now - start
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(60)
        shutil.rmtree(tmp, ignore_errors=True)
    cpu = _children_cpu() - cpu0
    assert first is not None
    steady = (n - first[1]) / (now - first[0]) if now > first[0] and n > first[1] else None
    return {
        "workers": workers,
        "seconds": wall,
        "events_per_s": n / wall,
        "events_per_s_steady": steady,
        "events_per_s_cpu": n / cpu if cpu > 0 else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--model", default="NaiveBayes")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    exe = shutil.which("stream-nb") or str(Path(sys.executable).parent / "stream-nb")
    broker = None
    bootstrap = os.environ.get("STREAM_NB_KAFKA_BOOTSTRAP")
    if not bootstrap:
        sys.path.insert(0, str(_BROKER_DIR))
        from kafka_broker import KafkaBroker

        broker = KafkaBroker(heap="1g")
        broker.start()
        bootstrap = broker.bootstrap
    try:
        topic = f"bench-events-{uuid.uuid4().hex[:8]}"
        _produce(bootstrap, topic, args.events, args.seed)
        rows = []
        for label, workers, query in (
            ("1 daemon (at-least-once)", 1, ""),
            ("1 daemon, exactly-once", 1, "&exactly_once=true&sync_interval=1"),
            ("2 daemons in one group, model sync", 2, f"&sync_topic=sync-{topic}&sync_interval=1"),
        ):
            row = scenario(exe, bootstrap, topic, args.events, args.model, workers, query)
            row["scenario"] = label
            rows.append(row)
            print(f"{label}: {row['events_per_s']:,.0f} events/s", flush=True)
    finally:
        if broker is not None:
            broker.close()
    result = {
        "events": args.events,
        "partitions": PARTITIONS,
        "model": args.model,
        "machine": machine(),
        "rows": rows,
    }
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "kafka.json").write_text(json.dumps(result, indent=2) + "\n")
    m = result["machine"]
    lines = [
        f"Kafka topic → `stream-nb run --model {args.model}` → topic, {args.events:,} Agrawal "
        f"events on {PARTITIONS} partitions, single-node broker on the same machine; "
        f"machine: {m['cpu']}, {m['cores']} cores, load {m['load_average'][0]:.1f}, "
        f"Python {m['python']}",
        "",
        "| scenario | events/s (wall, from spawn) | events/s (steady) | events/s (daemon CPU) |",
        "|---|---:|---:|---:|",
    ]
    for row in rows:
        steady = row["events_per_s_steady"]
        cpu = row["events_per_s_cpu"]
        lines.append(
            f"| {row['scenario']} | {row['events_per_s']:,.0f} | "
            f"{'—' if steady is None else f'{steady:,.0f}'} | "
            f"{'—' if cpu is None else f'{cpu:,.0f}'} |"
        )
    (args.output / "kafka.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
