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
subprocesses' own (user + system, every client thread included): in total (start-up
and stop included, measured after they ended), and *after start-up*, from the first
output record to the last (read from ``/proc``), which is the cost per event. The
measured processes run with compiled bytecode, as an installed package has it (kept
in a temporary ``PYTHONPYCACHEPREFIX``, whatever ``PYTHONDONTWRITEBYTECODE`` says);
every scenario first runs once, untimed, on 2,000 events to compile it and warm the
broker.

Scenarios, for each client (``kafka-python`` and ``confluent``, i.e. librdkafka;
``--clients`` picks):

* ``raw loop``: the ceiling of a Kafka-to-Kafka Python process on that client, a
  consumer-group member that polls, ``orjson.loads`` each value, ``orjson.dumps`` a
  small record and produces it (same consumer and producer settings as the
  connector: ``acks=all``, ``linger_ms=5``, 512 KiB batches, up to 2048 records per
  poll), no model, no commits; its process imports only the client and orjson;
* ``daemon``: ``stream-nb run`` at-least-once (checkpoints every 5 s);
* ``daemon, exactly-once``: ``exactly_once=true&sync_interval=1``.

``--baseline PATH/TO/stream-nb`` adds both daemons of another checkout (its own
virtualenv's ``stream-nb``) to every turn, as ``(baseline)`` rows. ``--sync`` adds
two kafka-python daemons in one group with model sync. Turns alternate (every
scenario once, then again, ``--repeats`` times); the tables give the median and
best of each rate, and each daemon's rate as a share of its client's raw loop in
the same run. Results go to ``benchmarks/results/kafka.json`` and ``kafka.md`` with
the machine description.
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
from typing import Any, NamedTuple

import orjson

# (the raw loops run in this module's own process: it imports nothing else at start, so
# that their CPU is the client's loop and orjson, not stream-nb's or numpy's imports)

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

    from stream_nb.datasets import agrawal

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


def _process_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system, every thread) the live processes ``pids`` used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def run_timed(
    commands: list[list[str]], watcher: _Watcher, out: str, n: int, env: dict[str, str]
) -> dict[str, Any]:
    """Start ``commands`` and time them until ``out`` holds ``n`` records."""
    from benchmarks.bench_engine import _children_cpu

    procs = []
    cpu0, start = _children_cpu(), time.perf_counter()
    for command in commands:
        procs.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env))
    pids = [p.pid for p in procs]
    first = None
    try:
        while True:
            done = watcher.records(out)
            now = time.perf_counter()
            if done and first is None:
                first = (now, done, _process_cpu(pids))
            if done >= n:
                steady_cpu = _process_cpu(pids) - first[2]
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
        # from the first output record to the last: the per-event cost, start-up and
        # stop left out (None when the CPU clock did not tick in between)
        "events_per_s_cpu_steady": (n - first[1]) / steady_cpu if steady_cpu > 0 else None,
    }


def scenarios(
    with_sync: bool, clients: tuple[str, ...] = CLIENTS, baseline: str | None = None
) -> list[dict[str, Any]]:
    """Every scenario: label, client, kind (``raw`` or ``daemon``), workers, URL query, and
    for the ``baseline`` daemons the ``stream-nb`` executable they run."""
    daemons = [("daemon", ""), ("daemon, exactly-once", "&exactly_once=true&sync_interval=1")]
    out: list[dict[str, Any]] = []
    for client in clients:
        out.append({"scenario": "raw loop", "client": client, "kind": "raw", "workers": 1})
        for exe, suffix in [(None, "")] + ([] if baseline is None else [(baseline, " (baseline)")]):
            for label, query in daemons:
                spec = {"scenario": label + suffix, "client": client, "kind": "daemon"}
                out.append({**spec, "workers": 1, "query": query, "exe": exe})
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


class Setting(NamedTuple):
    """What every scenario of a run shares."""

    exe: str  # this checkout's stream-nb
    model: str
    bootstrap: str
    watcher: _Watcher
    env: dict[str, str]  # of the measured processes


def run_scenario(spec: dict[str, Any], setting: Setting, topic: str, n: int) -> dict[str, Any]:
    """Run ``spec`` over the ``n`` events of ``topic`` and time it."""
    exe, model, bootstrap, watcher, env = setting
    tag = uuid.uuid4().hex[:8]
    out = f"bench-out-{tag}"
    # created before the clock starts (one partition, as a broker creates them on first use)
    _create(bootstrap, [out, f"{out}-dlq"], 1)
    env = dict(env, STREAM_NB_KAFKA_CLIENT=spec["client"])
    if spec["kind"] == "raw":
        command = [sys.executable, "-m", "benchmarks.bench_kafka", "--raw", spec["client"]]
        command += ["--bootstrap", bootstrap, "--topic", topic, "--out", out]
        command += ["--events", str(n)]
        return run_timed([command], watcher, out, n, env)
    tmp = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    query = spec["query"].format(topic=topic)
    try:
        program = spec.get("exe") or exe
        commands = [
            _daemon_args(
                program, model, bootstrap, topic, out, f"bench-{tag}", w, query, tmp / f"w{w}"
            )
            for w in range(spec["workers"])
        ]
        return run_timed(commands, watcher, out, n, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def measured_env(cache: Path) -> dict[str, str]:
    """The environment of the measured processes: compiled bytecode kept in ``cache``
    (as an installed package has it), whatever ``PYTHONDONTWRITEBYTECODE`` says here."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(cache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def summarise(spec: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and best of each rate over the repeats."""
    row = {k: v for k, v in spec.items() if k not in ("query", "exe")}
    row["runs"] = runs
    keys = ("events_per_s", "events_per_s_steady", "events_per_s_cpu", "events_per_s_cpu_steady")
    for key in keys:
        values = [r[key] for r in runs if r.get(key) is not None]
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
        for key in ("events_per_s_steady", "events_per_s_cpu", "events_per_s_cpu_steady"):
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
        "| client | scenario | events per CPU-s (median / best) | share of the raw loop "
        "(median / best) | events per CPU-s after start-up (median / best) | share after "
        "start-up (median / best) | events/s steady, wall (median / best) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        cells = [row["client"], row["scenario"]]
        for key in ("events_per_s_cpu", "events_per_s_cpu_steady"):
            cells.append(f"{_rate(row.get(key + '_median'))} / {_rate(row.get(key + '_best'))}")
            cells.append(
                f"{_share(row.get(f'share_{key}_median'))} / {_share(row.get(f'share_{key}_best'))}"
            )
        cells.append(
            f"{_rate(row.get('events_per_s_steady_median'))} / "
            f"{_rate(row.get('events_per_s_steady_best'))}"
        )
        lines.append("| " + " | ".join(cells) + " |")
    (output / "kafka.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--model", default="NaiveBayes")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sync", action="store_true", help="add 2 daemons with model sync")
    parser.add_argument(
        "--clients",
        default=",".join(CLIENTS),
        help="comma-separated Kafka clients to run (kafka-python, confluent)",
    )
    parser.add_argument(
        "--baseline",
        metavar="STREAM_NB",
        help="another stream-nb executable (e.g. an older checkout's) whose daemons run "
        "in the same turns, as '(baseline)' rows",
    )
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
    clients = tuple(c.strip() for c in args.clients.split(",") if c.strip())
    unknown = set(clients) - set(CLIENTS)
    if unknown or not clients:
        parser.error(f"--clients: expected some of {', '.join(CLIENTS)}, got {args.clients!r}")
    specs = scenarios(args.sync, clients, args.baseline)
    runs: list[list[dict[str, Any]]] = [[] for _ in specs]
    cache = Path(tempfile.mkdtemp(prefix="bench-kafka-pycache-"))
    try:
        topic = f"bench-events-{uuid.uuid4().hex[:8]}"
        _produce(bootstrap, topic, args.events, args.seed)
        warm = min(args.events, 2000)
        _produce(bootstrap, f"{topic}-warm", warm, args.seed + 1)
        watcher = _Watcher(bootstrap)
        setting = Setting(exe, args.model, bootstrap, watcher, measured_env(cache))
        try:
            # every scenario once, untimed: bytecode compiled and cached, broker warm
            for spec in specs:
                run_scenario(spec, setting, f"{topic}-warm", warm)
            for turn in range(args.repeats):
                for spec, found in zip(specs, runs, strict=True):
                    run = run_scenario(spec, setting, topic, args.events)
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
        shutil.rmtree(cache, ignore_errors=True)
        if broker is not None:
            broker.close()
    from benchmarks.bench_engine import machine

    rows = [summarise(spec, found) for spec, found in zip(specs, runs, strict=True)]
    shares(rows)
    result = {
        "events": args.events,
        "baseline": args.baseline,
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
