"""Kafka end to end: topic → ``stream-nb run`` → topic on each client, against its raw loop.

One command (starts its own single-node broker from the Maven Central jars, see
``scripts/kafka_jars.sh``; set ``STREAM_NB_KAFKA_BOOTSTRAP=host:port`` to use
another cluster)::

    python -m benchmarks.bench_kafka                    # 100k Agrawal events, NaiveBayes
    python -m benchmarks.bench_kafka --events 20000 --repeats 1     # quicker

The events are produced to a 4-partition topic first (not timed). Each scenario
then starts real subprocesses and is timed from spawn until the output topic holds
one record per event; start-up and the group join are included in the wall time,
and the *steady* rate counts from the first output record. CPU is the
subprocesses' own (user + system, every client thread included), measured after
they ended.

Scenarios, for each client (``kafka-python`` and ``confluent``, i.e. librdkafka):

* ``raw loop``: the ceiling of a Kafka-to-Kafka Python process on that client, a
  consumer-group member that polls, ``orjson.loads`` each value, ``orjson.dumps`` a
  small record and produces it (same consumer and producer settings as the
  connector: ``acks=all``, ``linger_ms=5``, 512 KiB batches, up to 2048 records per
  poll), no model, no commits;
* ``daemon``: ``stream-nb run`` at-least-once (checkpoints every 5 s);
* ``daemon, exactly-once``: ``exactly_once=true&sync_interval=1``.

``--sync`` adds two kafka-python daemons in one group with model sync. Turns
alternate (every scenario once, then again, ``--repeats`` times); the tables give
the median and best of each rate, and each daemon's rate as a share of its
client's raw loop in the same run. Results go to ``benchmarks/results/kafka.json``
and ``kafka.md`` with the machine description.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
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
CLIENTS = ("kafka-python", "confluent")
_BROKER_DIR = Path(__file__).resolve().parents[1] / "tests" / "connectors" / "kafka"


def _create(bootstrap: str, topics: list[str], partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(
            [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in topics]
        )
    finally:
        admin.close()


def _produce(bootstrap: str, topic: str, n: int, seed: int) -> None:
    from kafka import KafkaProducer

    _create(bootstrap, [topic], PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    for i, (x, y) in enumerate(agrawal(seed=seed, n=n)):
        producer.send(topic, value=orjson.dumps({"id": i, "x": x, "y": y}), key=str(i).encode())
    producer.flush()
    producer.close()


class _Watcher:
    """Records in a topic (sum of its end offsets), with one long-lived consumer."""

    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaConsumer

        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)

    def records(self, topic: str) -> int:
        from kafka import TopicPartition

        partitions = self._consumer.partitions_for_topic(topic)
        if not partitions:
            self._consumer.topics()  # refresh the metadata: the topic may be new
            return 0
        ends = self._consumer.end_offsets([TopicPartition(topic, p) for p in partitions])
        return sum(ends.values())

    def close(self) -> None:
        self._consumer.close()


# ---------------------------------------------------------------- the raw loops
def _raw_kafka_python(bootstrap: str, topic: str, out: str, n: int, group: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        max_poll_records=2048,
    )
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, batch_size=512 * 1024
    )
    loads, dumps, send = orjson.loads, orjson.dumps, producer.send
    done = 0
    while done < n:
        for messages in consumer.poll(timeout_ms=500, max_records=2048).values():
            for m in messages:
                event = loads(m.value)
                send(out, value=dumps({"id": event["id"], "y_pred": event["y"]}), key=m.key)
            done += len(messages)
    producer.flush()
    producer.close()
    consumer.close(autocommit=False)


def _raw_confluent(bootstrap: str, topic: str, out: str, n: int, group: str) -> None:
    import confluent_kafka as ck

    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.subscribe([topic])
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 512 * 1024,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    loads, dumps, produce = orjson.loads, orjson.dumps, producer.produce
    done = 0
    while done < n:
        messages = consumer.consume(2048, 0.5)
        for m in messages:
            if m.error() is not None:
                continue
            event = loads(m.value())
            produce(out, dumps({"id": event["id"], "y_pred": event["y"]}), m.key())
            done += 1
        producer.poll(0)
    producer.flush()
    consumer.close()


def raw_loop(client: str, bootstrap: str, topic: str, out: str, n: int) -> None:
    """Consume ``n`` events of ``topic``, parse each, produce a small record to ``out``."""
    run = _raw_confluent if client == "confluent" else _raw_kafka_python
    run(bootstrap, topic, out, n, f"bench-raw-{uuid.uuid4().hex[:8]}")


# ---------------------------------------------------------------- scenarios
def _daemon_args(
    exe: str,
    model: str,
    bootstrap: str,
    topic: str,
    out: str,
    group: str,
    worker: int,
    query: str,
    cp: Path,
) -> list[str]:
    source = f"kafka://{bootstrap}/{topic}?group_id={group}&worker_id=w{worker}{query}"
    return [
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
        str(cp),
        "--checkpoint-interval",
        "5",
        "--report",
        os.devnull,
        "--log-level",
        "WARNING",
    ]


def run_timed(
    commands: list[list[str]], watcher: _Watcher, out: str, n: int, env: dict[str, str]
) -> dict[str, Any]:
    """Start ``commands`` and time them until ``out`` holds ``n`` records."""
    procs = []
    cpu0, start = _children_cpu(), time.perf_counter()
    for command in commands:
        procs.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env))
    first = None
    try:
        while True:
            done = watcher.records(out)
            now = time.perf_counter()
            if done and first is None:
                first = (now, done)
            if done >= n:
                break
            if any(p.poll() not in (None, 0) for p in procs):
                raise RuntimeError(f"a benchmark process exited early: {commands}")
            time.sleep(0.05)
        wall = now - start
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(60)
    cpu = _children_cpu() - cpu0
    assert first is not None
    steady = (n - first[1]) / (now - first[0]) if now > first[0] and n > first[1] else None
    return {
        "seconds": wall,
        "events_per_s": n / wall,
        "events_per_s_steady": steady,
        "events_per_s_cpu": n / cpu if cpu > 0 else None,
    }


def scenarios(with_sync: bool) -> list[dict[str, Any]]:
    """Every scenario: label, client, kind (``raw`` or ``daemon``), workers, URL query."""
    out: list[dict[str, Any]] = []
    for client in CLIENTS:
        out.append({"scenario": "raw loop", "client": client, "kind": "raw", "workers": 1})
        out.append(
            {"scenario": "daemon", "client": client, "kind": "daemon", "workers": 1, "query": ""}
        )
        out.append(
            {
                "scenario": "daemon, exactly-once",
                "client": client,
                "kind": "daemon",
                "workers": 1,
                "query": "&exactly_once=true&sync_interval=1",
            }
        )
    if with_sync:
        out.append(
            {
                "scenario": "2 daemons in one group, model sync",
                "client": "kafka-python",
                "kind": "daemon",
                "workers": 2,
                "query": "&sync_topic=sync-{topic}&sync_interval=1",
            }
        )
    return out


def run_scenario(
    spec: dict[str, Any],
    exe: str,
    model: str,
    bootstrap: str,
    topic: str,
    n: int,
    watcher: _Watcher,
) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    out = f"bench-out-{tag}"
    # created before the clock starts (one partition, as a broker creates them on first use)
    _create(bootstrap, [out, f"{out}-dlq"], 1)
    env = dict(os.environ, STREAM_NB_KAFKA_CLIENT=spec["client"])
    if spec["kind"] == "raw":
        command = [sys.executable, "-m", "benchmarks.bench_kafka", "--raw", spec["client"]]
        command += ["--bootstrap", bootstrap, "--topic", topic, "--out", out]
        command += ["--events", str(n)]
        return run_timed([command], watcher, out, n, env)
    tmp = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    query = spec["query"].format(topic=topic)
    try:
        commands = [
            _daemon_args(exe, model, bootstrap, topic, out, f"bench-{tag}", w, query, tmp / f"w{w}")
            for w in range(spec["workers"])
        ]
        return run_timed(commands, watcher, out, n, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def summarise(spec: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and best of each rate over the repeats."""
    row = {k: v for k, v in spec.items() if k != "query"}
    row["runs"] = runs
    for key in ("events_per_s", "events_per_s_steady", "events_per_s_cpu"):
        values = [r[key] for r in runs if r[key] is not None]
        row[f"{key}_median"] = statistics.median(values) if values else None
        row[f"{key}_best"] = max(values) if values else None
    return row


def shares(rows: list[dict[str, Any]]) -> None:
    """Each daemon's rates as shares of its client's raw loop (median/median, best/best)."""
    raw = {r["client"]: r for r in rows if r["kind"] == "raw"}
    for row in rows:
        ceiling = raw.get(row["client"])
        if row["kind"] != "daemon" or ceiling is None:
            continue
        for key in ("events_per_s_steady", "events_per_s_cpu"):
            for stat in ("median", "best"):
                a, b = row[f"{key}_{stat}"], ceiling[f"{key}_{stat}"]
                row[f"share_{key}_{stat}"] = a / b if a and b else None


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f} %"


def write_results(result: dict[str, Any], output: Path) -> None:
    output.mkdir(parents=True, exist_ok=True)
    (output / "kafka.json").write_text(json.dumps(result, indent=2) + "\n")
    m = result["machine"]
    lines = [
        f"Kafka topic → process → topic, {result['events']:,} Agrawal events on "
        f"{result['partitions']} partitions, `stream-nb run --model {result['model']}` "
        f"against each client's raw consume + orjson + produce loop, single-node broker on "
        f"the same machine, {result['repeats']} alternating turns (median / best); machine: "
        f"{m['cpu']}, {m['cores']} cores, load {m['load_average'][0]:.1f}, Python {m['python']}",
        "",
        "| client | scenario | events/s steady (median / best) | events per CPU-s "
        "(median / best) | share of the raw loop, CPU (median / best) | share, steady "
        "(median / best) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        scenario = row["scenario"]
        lines.append(
            f"| {row['client']} | {scenario} | {_rate(row['events_per_s_steady_median'])} / "
            f"{_rate(row['events_per_s_steady_best'])} | "
            f"{_rate(row['events_per_s_cpu_median'])} / {_rate(row['events_per_s_cpu_best'])} | "
            f"{_share(row.get('share_events_per_s_cpu_median'))} / "
            f"{_share(row.get('share_events_per_s_cpu_best'))} | "
            f"{_share(row.get('share_events_per_s_steady_median'))} / "
            f"{_share(row.get('share_events_per_s_steady_best'))} |"
        )
    (output / "kafka.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--model", default="NaiveBayes")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sync", action="store_true", help="add 2 daemons with model sync")
    parser.add_argument("--output", type=Path, default=RESULTS)
    # one raw loop (a subprocess of a benchmark run)
    parser.add_argument("--raw", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.raw is not None:
        raw_loop(args.raw, args.bootstrap, args.topic, args.out, args.events)
        return 0
    exe = shutil.which("stream-nb") or str(Path(sys.executable).parent / "stream-nb")
    broker = None
    bootstrap = os.environ.get("STREAM_NB_KAFKA_BOOTSTRAP")
    if not bootstrap:
        sys.path.insert(0, str(_BROKER_DIR))
        from kafka_broker import KafkaBroker

        broker = KafkaBroker(heap="1g")
        broker.start()
        bootstrap = broker.bootstrap
    specs = scenarios(args.sync)
    runs: list[list[dict[str, Any]]] = [[] for _ in specs]
    try:
        topic = f"bench-events-{uuid.uuid4().hex[:8]}"
        _produce(bootstrap, topic, args.events, args.seed)
        watcher = _Watcher(bootstrap)
        try:
            for turn in range(args.repeats):
                for spec, found in zip(specs, runs, strict=True):
                    run = run_scenario(
                        spec, exe, args.model, bootstrap, topic, args.events, watcher
                    )
                    found.append(run)
                    print(
                        f"turn {turn + 1}: {spec['client']}, {spec['scenario']}: "
                        f"{_rate(run['events_per_s_steady'])} events/s steady, "
                        f"{_rate(run['events_per_s_cpu'])} per CPU-s",
                        flush=True,
                    )
        finally:
            watcher.close()
    finally:
        if broker is not None:
            broker.close()
    rows = [summarise(spec, found) for spec, found in zip(specs, runs, strict=True)]
    shares(rows)
    result = {
        "events": args.events,
        "partitions": PARTITIONS,
        "model": args.model,
        "repeats": args.repeats,
        "machine": machine(),
        "rows": rows,
    }
    write_results(result, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
