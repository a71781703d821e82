"""A real Prometheus scraping a Kafka daemon: the dashboard's Kafka panels on real data.

test_prometheus.py runs a daemon on a file, which exports no ``stream_nb_kafka_*``
series. Here the broker of ``scripts/kafka-local.sh`` holds the topics, created by
the daemon itself (``create_topics=true``, the input with three partitions), with
model sync on; keyed events (and one bad line) go in through ``kafka-local.sh produce``
once Prometheus scrapes the daemon, so rates, commits and rebalances have something
to measure. Prometheus then answers what the Kafka panels show, and every name the
dashboard and the rules read is checked against this daemon's own ``/metrics``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from deploy_helpers import (
    JOB,
    Daemon,
    LocalKafka,
    PrometheusServer,
    dashboard_panels,
    exposition_names,
    grafana_variables,
    names_used_in_deploy,
    recorded_names,
    stream_nb_command,
    substitute,
    wait_for,
)

MODEL = "NaiveBayes"
GOOD = 400
PARTITIONS = 3


@dataclass
class KafkaRun:
    kafka: LocalKafka
    daemon: Daemon
    prometheus: PrometheusServer
    lines: int

    def value(self, expr: str) -> float:
        """The single value of an instant query about this daemon."""
        result = self.prometheus.query(expr)
        assert len(result) == 1, (expr, result)
        return float(result[0]["value"][1])


@pytest.fixture(scope="module")
def kafka_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaRun]:
    workdir = tmp_path_factory.mktemp("kafka-prometheus")
    kafka = LocalKafka(workdir / "kafka-data", workdir)
    daemon = prometheus = None
    try:
        kafka.start()
        b = kafka.bootstrap
        daemon = Daemon(
            workdir,
            [
                "--source",
                f"kafka://{b}/events?group_id=dashboard&create_topics=true"
                f"&topic_partitions={PARTITIONS}&sync_topic=nb-sync",
                *("--sink", f"kafka://{b}/predictions?create_topics=true"),
                *("--dead-letters", f"kafka://{b}/events-dlq?create_topics=true"),
                *("--checkpoint-dir", "checkpoints", "--checkpoint-interval", "1"),
                *("--model", MODEL),
            ],
        ).start()
        prom_dir = workdir / "prometheus"
        prom_dir.mkdir()
        prometheus = PrometheusServer(prom_dir, [daemon.target]).start()
        up = f'up{{job="{JOB}"}} == 1'
        wait_for(lambda: prometheus.query(up), "Prometheus to scrape the daemon")
        # the events arrive after the first scrapes: the counters' rates see them
        events = subprocess.run(
            [*stream_nb_command(), "demo", "--limit", str(GOOD), "--seed", "7"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        # keyed records (the documented ConsoleProducer options), so that every
        # partition gets some: a partition the daemon has read nothing from has no
        # lag series yet
        keyed = "".join(f"{i}\t{line}\n" for i, line in enumerate(events.splitlines()))
        produced = kafka.script(
            *("produce", "events"),
            *("--reader-property", "parse.key=true", "--reader-property", "key.separator=\t"),
            stdin=keyed + "bad\t{not json\n",
        )
        assert produced.returncode == 0, produced.stderr
        lines = GOOD + 1
        run = KafkaRun(kafka, daemon, prometheus, lines)
        consumed = f'stream_nb_events_consumed_total{{job="{JOB}"}}'
        committed = f'sum(stream_nb_kafka_committed_offset{{job="{JOB}", topic="events"}})'
        wait_for(
            lambda: (
                prometheus.values(consumed, "instance") == {daemon.target: lines}
                and prometheus.values(committed, "") == {"": lines}
            ),
            "Prometheus to see every event consumed and committed",
        )
        # the recorded quantiles need a few rule evaluations after the events
        wait_for(
            lambda: prometheus.query(
                f'instance:stream_nb_kafka_commit_duration_seconds:quantile_rate15m{{job="{JOB}"}}'
                f" >= 0"
            ),
            "the recorded commit-duration quantile",
        )
        yield run
    finally:
        if prometheus is not None:
            prometheus.stop()
        if daemon is not None:
            daemon.stop()
        kafka.stop()


def test_lag_per_partition_and_in_total(kafka_run: KafkaRun) -> None:
    prom, job = kafka_run.prometheus, f'job="{JOB}"'
    lag = prom.values(f'stream_nb_kafka_consumer_lag{{{job}, topic="events"}}', "partition")
    assert lag == {str(p): 0.0 for p in range(PARTITIONS)}
    assert kafka_run.value(f"instance:stream_nb_kafka_consumer_lag:sum{{{job}}}") == 0
    assert kafka_run.value(f"stream_nb_kafka_assigned_partitions{{{job}}}") == PARTITIONS


def test_readiness_progress_and_no_file_backlog(kafka_run: KafkaRun) -> None:
    """The gauges read at scrape time: ready (a broker connection is up), a loop that
    iterates, and no file backlog series (a Kafka source's backlog is its lag)."""
    job = f'job="{JOB}"'
    assert kafka_run.value(f"stream_nb_ready{{{job}}}") == 1
    assert kafka_run.value(f"stream_nb_progress_age_seconds{{{job}}}") < 30
    assert kafka_run.value(f"stream_nb_checkpoint_interval_seconds{{{job}}}") == 1
    assert kafka_run.prometheus.query(f"stream_nb_source_backlog_bytes{{{job}}}") == []


def test_rebalances_commits_and_sync(kafka_run: KafkaRun) -> None:
    prom, job = kafka_run.prometheus, f'job="{JOB}"'
    rebalances = prom.values(f"stream_nb_kafka_rebalances_total{{{job}}}", "event")
    assert set(rebalances) == {"assigned", "revoked", "lost"}
    assert rebalances["assigned"] >= 1 and rebalances["lost"] == 0
    assert kafka_run.value(f"stream_nb_kafka_commit_duration_seconds_count{{{job}}}") >= 1
    assert kafka_run.value(f"stream_nb_kafka_commit_failures_total{{{job}}}") == 0
    committed = prom.values(
        f'stream_nb_kafka_committed_offset{{{job}, topic="events"}}', "partition"
    )
    assert sum(committed.values()) == kafka_run.lines
    assert kafka_run.value(f"stream_nb_kafka_sync_deltas_sent_total{{{job}}}") >= 1
    assert kafka_run.value(f"stream_nb_kafka_sync_lag{{{job}}}") == 0
    assert kafka_run.value(f"stream_nb_kafka_replayed_events_total{{{job}}}") == 0


def test_events_and_dead_letters_from_the_topic(kafka_run: KafkaRun) -> None:
    prom, job = kafka_run.prometheus, f'job="{JOB}"'
    outcomes = prom.values(f"stream_nb_events_processed_total{{{job}}} > 0", "outcome")
    assert outcomes == {"learned": GOOD, "dead_letter": 1}
    reasons = prom.values(f"stream_nb_dead_letters_total{{{job}}} > 0", "reason")
    assert reasons == {"invalid_json": 1}


def test_every_panel_shows_the_kafka_daemon(kafka_run: KafkaRun) -> None:
    """On a Kafka daemon every panel of the dashboard has data, the Kafka row included
    (but for the file sources' backlog: a Kafka source's is its consumer lag)."""
    variables = grafana_variables(kafka_run.daemon.target, MODEL)
    empty = []
    for panel in dashboard_panels():
        if "stream_nb_source_backlog_bytes" in " ".join(t["expr"] for t in panel["targets"]):
            continue
        results = [
            kafka_run.prometheus.query(substitute(target["expr"], variables))
            for target in panel["targets"]
        ]
        if not any(results):
            empty.append(panel["title"])
    assert empty == []


def test_every_name_in_deploy_is_in_the_daemons_exposition(kafka_run: KafkaRun) -> None:
    """The dashboard and the rules read only names this daemon exports (engine, Kafka,
    process collector) or the recording rules define: a misspelt name would evaluate
    to nothing instead of failing."""
    exported = exposition_names(kafka_run.daemon.metrics())
    used = names_used_in_deploy()
    assert {name for name in used if name.startswith("stream_nb_kafka_")}
    assert used - exported - recorded_names() - {"up"} == set()


def test_no_alert_on_a_healthy_kafka_daemon(kafka_run: KafkaRun) -> None:
    """Every rule evaluates healthy, and nothing is pending or firing: the Kafka alerts
    (stalled, lag growing) stay quiet on a daemon that keeps up."""
    rules = [r for g in kafka_run.prometheus.api("rules")["groups"] for r in g["rules"]]
    assert [(r["name"], r["health"]) for r in rules if r["health"] != "ok"] == []
    assert kafka_run.prometheus.api("alerts")["alerts"] == []


def test_the_kafka_daemon_stops_cleanly(kafka_run: KafkaRun) -> None:
    """Kept last (module order): SIGTERM commits and exits 0."""
    assert kafka_run.daemon.stop() == 0
