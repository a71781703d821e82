"""A real Prometheus (Debian's ``prometheus``) scraping a real ``stream-nb run``.

One daemon follows a file of events; a Prometheus server on a free port scrapes it
every second and evaluates ``deploy/prometheus/*.yml``. Events arrive in two
phases, the second after Prometheus has its first samples, so rates and ratios
have something to measure. The tests then ask Prometheus's HTTP API what it saw.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from deploy_helpers import (
    CONSOLES,
    JOB,
    RULE_FILES,
    Daemon,
    PrometheusServer,
    dashboard_panels,
    dashboard_variable_queries,
    grafana_variables,
    stream_nb_command,
    substitute,
    variable_selector,
    wait_for,
)

#: Lines the daemon rejects, one per dead-letter reason (with --max-line-bytes 2000).
BAD = {
    "invalid_json": b"{not json",
    "not_object": b"[1, 2]",
    "invalid_utf8": b'\xff\xfe{"age": 1}',
    "too_large": b'{"pad": "' + b"x" * 3000 + b'", "y": 1}',
    "invalid_label": b'{"age": 30, "y": [1]}',
    "missing_features": b'{"y": 1}',
    "invalid_features": b'{"age": [1, 2], "y": 1}',
    "non_finite": b'{"age": 1e999, "y": 1}',
    "invalid_weight": b'{"age": 30, "y": 1, "w": -1}',
    "invalid_id": b'{"age": 30, "y": 1, "id": [1]}',
}
MODEL = "NaiveBayes"
#: Good events per phase, and how often each bad line is repeated per phase.
PHASES = ((150, 1), (250, 2))


@dataclass
class Run:
    daemon: Daemon
    prometheus: PrometheusServer
    lines: int
    good: int
    rejected: dict[str, int]
    phase2_lines: int
    phase2_rejected: int


def _lines(good: list[bytes], repeat: int) -> list[bytes]:
    """Good events with every bad line ``repeat`` times, spread among them."""
    out = list(good)
    for i, line in enumerate(list(BAD.values()) * repeat):
        out.insert((i * 37) % (len(out) + 1), line)
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    workdir = tmp_path_factory.mktemp("prometheus")
    total_good = sum(n for n, _ in PHASES)
    demo = subprocess.run(
        [*stream_nb_command(), "demo", "--limit", str(total_good), "--seed", "3"],
        check=True,
        capture_output=True,
    ).stdout.splitlines()
    (n1, r1), (_, r2) = PHASES
    phase1, phase2 = _lines(demo[:n1], r1), _lines(demo[n1:], r2)
    source = workdir / "events.jsonl"
    source.write_bytes(b"\n".join(phase1) + b"\n")
    daemon = Daemon(
        workdir,
        [
            *("--source", str(source), "--follow", "--model", MODEL),
            *("--sink", "predictions.jsonl", "--dead-letters", "dead-letters.jsonl"),
            *("--max-line-bytes", "2000", "--checkpoint-dir", "checkpoints"),
            *("--checkpoint-interval", "1"),
        ],
    ).start()
    prom_dir = workdir / "prometheus"
    prom_dir.mkdir()
    prometheus = PrometheusServer(prom_dir, [daemon.target], consoles=CONSOLES)
    try:
        # Phase 1 is processed before Prometheus starts: its first sample of every
        # counter already holds it, and phase 2 is what the rates measure.
        wait_for(
            lambda: daemon.sample("stream_nb_events_consumed_total") == len(phase1),
            "the daemon to consume phase 1",
        )
        prometheus.start()
        consumed = f'stream_nb_events_consumed_total{{job="{JOB}"}}'
        wait_for(
            lambda: prometheus.values(consumed, "instance") == {daemon.target: len(phase1)},
            "Prometheus to scrape phase 1",
        )
        with open(source, "ab") as f:
            f.write(b"\n".join(phase2) + b"\n")
        lines = len(phase1) + len(phase2)
        wait_for(
            lambda: prometheus.values(consumed, "instance") == {daemon.target: lines},
            "Prometheus to scrape phase 2",
        )
        yield Run(
            daemon=daemon,
            prometheus=prometheus,
            lines=lines,
            good=total_good,
            rejected={reason: r1 + r2 for reason in BAD},
            phase2_lines=len(phase2),
            phase2_rejected=r2 * len(BAD),
        )
    finally:
        prometheus.stop()
        daemon.stop()


def test_the_daemon_is_an_up_target(run: Run) -> None:
    targets = run.prometheus.api("targets")["activeTargets"]
    assert [(t["labels"]["job"], t["labels"]["instance"], t["health"]) for t in targets] == [
        (JOB, run.daemon.target, "up")
    ]
    assert run.prometheus.values(f'up{{job="{JOB}"}}', "instance") == {run.daemon.target: 1.0}


def test_events_processed_equal_the_input(run: Run) -> None:
    prom, job = run.prometheus, f'job="{JOB}"'
    assert prom.values(f"stream_nb_events_consumed_total{{{job}}}", "instance") == {
        run.daemon.target: run.lines
    }
    outcomes = prom.values(f"stream_nb_events_processed_total{{{job}}} > 0", "outcome")
    assert outcomes == {"learned": run.good, "dead_letter": sum(run.rejected.values())}
    assert prom.values(f"stream_nb_prequential_evaluated_total{{{job}}}", "instance") == {
        run.daemon.target: run.good
    }
    assert prom.values(f"stream_nb_predictions_emitted_total{{{job}}}", "instance") == {
        run.daemon.target: run.good
    }


def test_the_gauges_read_at_scrape_time_and_the_checkpoint_interval(run: Run) -> None:
    """Every line of the file was read (no backlog), the source is ready, the loop
    iterates (idle polls included), and --checkpoint-interval 1 is exported for
    StreamNBCheckpointStale."""
    prom, job = run.prometheus, f'job="{JOB}"'
    target = run.daemon.target
    assert prom.values(f"stream_nb_source_backlog_bytes{{{job}}}", "instance") == {target: 0}
    assert prom.values(f"stream_nb_ready{{{job}}}", "instance") == {target: 1}
    assert prom.values(f"stream_nb_progress_age_seconds{{{job}}} < 30", "instance").keys() == {
        target
    }
    assert prom.values(f"stream_nb_checkpoint_interval_seconds{{{job}}}", "instance") == {target: 1}


def test_dead_letters_by_reason_match_the_injected_lines(run: Run) -> None:
    seen = run.prometheus.values(f'stream_nb_dead_letters_total{{job="{JOB}"}} > 0', "reason")
    assert seen == run.rejected
    # ... and the dead-letter file the daemon wrote says the same
    dead = run.daemon.workdir / "dead-letters.jsonl"

    def reasons() -> dict[str, int]:
        counts: dict[str, int] = {}
        for line in dead.read_text().splitlines():
            reason = json.loads(line)["reason"]
            counts[reason] = counts.get(reason, 0) + 1
        return counts

    assert wait_for(lambda: reasons() == run.rejected and reasons(), "the dead-letter file")


def test_the_rule_files_load_and_evaluate_healthy(run: Run) -> None:
    texts = "\n".join(path.read_text() for path in RULE_FILES)
    expected_groups = set(re.findall(r"^  - name: (\S+)$", texts, re.MULTILINE))
    expected_rules = len(re.findall(r"^      - (?:record|alert): ", texts, re.MULTILINE))

    def groups() -> list[dict] | None:
        found = run.prometheus.api("rules")["groups"]
        rules = [rule for group in found for rule in group["rules"]]
        # every rule evaluated at least once since the rules were loaded
        if rules and all(rule["health"] != "unknown" for rule in rules):
            return list(found)
        return None

    found = wait_for(groups, "every rule to be evaluated")
    assert {group["name"] for group in found} == expected_groups
    assert {group["file"] for group in found} == {str(path) for path in RULE_FILES}
    rules = [rule for group in found for rule in group["rules"]]
    assert len(rules) == expected_rules
    unhealthy = [(r["name"], r["health"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert unhealthy == []


def test_every_rule_expression_parses_and_evaluates(run: Run) -> None:
    rules = [rule for group in run.prometheus.api("rules")["groups"] for rule in group["rules"]]
    assert rules
    errors = []
    for rule in rules:
        try:
            run.prometheus.query(rule["query"])
        except AssertionError as exc:
            errors.append(f"{rule['name']}: {exc}")
    assert errors == []


def test_every_alert_has_a_runbook_section(run: Run) -> None:
    operations = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    anchors = {_anchor(h) for h in re.findall(r"^#+ (.+)$", operations, re.MULTILINE)}
    alerts = [
        rule
        for group in run.prometheus.api("rules")["groups"]
        for rule in group["rules"]
        if rule["type"] == "alerting"
    ]
    assert len(alerts) >= 8
    for alert in alerts:
        annotations = alert["annotations"]
        assert set(annotations) == {"summary", "description", "runbook"}, alert["name"]
        assert annotations["runbook"] == f"docs/operations.md#{alert['name'].lower()}"
        assert alert["name"].lower() in anchors, f"no section {alert['name']} in operations.md"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_the_dead_letter_alert_sees_the_real_series(run: Run) -> None:
    """Phase 2 rejects 20 of 270 lines (7.4 % > 5 %): StreamNBDeadLetterRatioHigh is
    pending for this daemon (it fires only after 10 minutes), and nothing else is
    active on a daemon that is otherwise healthy."""
    ratio = run.phase2_rejected / run.phase2_lines
    recorded = f'instance:stream_nb_dead_letters:ratio_rate5m{{job="{JOB}"}}'
    wait_for(
        lambda: (
            run.prometheus.values(recorded, "instance").get(run.daemon.target)
            == pytest.approx(ratio, rel=1e-9)
        ),
        f"the recorded dead-letter ratio to be {ratio}",
    )

    def active() -> list[tuple[str, str, str]]:
        alerts = run.prometheus.api("alerts")["alerts"]
        return sorted(
            (a["labels"]["alertname"], a["labels"]["instance"], a["state"]) for a in alerts
        )

    expected = [("StreamNBDeadLetterRatioHigh", run.daemon.target, "pending")]
    assert wait_for(lambda: active() == expected and active(), "the pending alert") == expected


def _dashboard_queries(run: Run) -> list[tuple[str, str]]:
    """``(panel title, PromQL)`` of every panel target and variable, substituted."""
    variables = grafana_variables(run.daemon.target, MODEL)
    queries = []
    for panel in dashboard_panels():
        for target in panel["targets"]:
            queries.append((panel["title"], substitute(target["expr"], variables)))
    for name, query in dashboard_variable_queries().items():
        selector, _label = variable_selector(query)
        queries.append((f"variable {name}", substitute(selector, variables)))
    return queries


def test_every_dashboard_expression_parses_and_evaluates(run: Run) -> None:
    queries = _dashboard_queries(run)
    assert len(queries) > 40
    errors = []
    for title, expr in queries:
        try:
            run.prometheus.query(expr)
        except AssertionError as exc:
            errors.append(f"{title}: {exc}")
    assert errors == []


def test_dashboard_variables_select_the_daemon(run: Run) -> None:
    variables = grafana_variables(run.daemon.target, MODEL)
    for name, expected in (("job", JOB), ("model", MODEL), ("instance", run.daemon.target)):
        selector, label = variable_selector(dashboard_variable_queries()[name])
        assert run.prometheus.values(substitute(selector, variables), label) == {expected: 1.0}


def test_every_non_kafka_panel_shows_the_run(run: Run) -> None:
    """A daemon on a file source feeds every panel but the Kafka ones: a panel that
    stays empty has a metric name or label that does not exist."""
    # The recorded rates and quantiles need a few evaluations after phase 2.
    wait_for(
        lambda: run.prometheus.query(
            f'instance:stream_nb_event_latency_seconds:quantile_rate5m{{job="{JOB}"}}'
        ),
        "the recorded latency quantiles",
    )
    variables = grafana_variables(run.daemon.target, MODEL)
    empty = []
    for panel in dashboard_panels():
        if "kafka" in " ".join(t["expr"] for t in panel["targets"]):
            continue
        results = [
            run.prometheus.query(substitute(target["expr"], variables))
            for target in panel["targets"]
        ]
        if not any(results):
            empty.append(panel["title"])
    assert empty == []


def test_the_console_is_served_and_its_panels_show_the_run(run: Run) -> None:
    """deploy/prometheus/consoles/stream-nb.html (the dashboard without Grafana, and the
    page of the screenshot): Prometheus serves it, and each panel's expression, with
    the page's job and instance filters, has data."""
    status, page = run.prometheus.get("/consoles/stream-nb.html")
    assert status == 200, page
    assert page.count("new PromConsole.Graph(") == 1
    for script in re.findall(r'<script src="([^"]+)"', page):
        assert run.prometheus.get(script)[0] == 200, script
    parts = re.findall(r"'([^']*)' \+ sel \+ '([^']*)',", page)
    assert len(parts) == 10
    sel = f'job=~"{JOB}", instance=~"{grafana_variables(run.daemon.target, MODEL)["instance"]}"'
    empty = [a + sel + b for a, b in parts if not run.prometheus.query(a + sel + b)]
    assert empty == []


def test_the_daemon_stops_cleanly_under_scraping(run: Run) -> None:
    """Kept last (module order): SIGTERM while Prometheus scrapes ends with exit 0."""
    assert run.daemon.stop() == 0
    assert os.path.getsize(run.daemon.workdir / "predictions.jsonl") > 0
