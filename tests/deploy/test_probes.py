"""deploy/prometheus/prometheus.example.yml for real: Debian's Prometheus with the example
configuration as shipped (only its addresses and intervals replaced), Debian's
blackbox exporter probing a real daemon's /readyz and /healthz, the shipped alerts on
the daemon's own readiness and progress gauges, and the probe-based alerts that
docs/operations.md gives instead ("Probing /readyz and /healthz").

The probe jobs must label their series with the daemon's own ``instance`` (the
``host:port`` of its /metrics), or the probe-based StreamNBNotReady and StreamNBNotLive
could not tell a daemon that is down (StreamNBDown's) from one that answers /metrics
but not /healthz. The gauge-based ones tell it by themselves: a daemon that is down has
no sample.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from deploy_helpers import (
    DEPLOY,
    JOB,
    REPO,
    RULE_FILES,
    Daemon,
    PrometheusServer,
    die_with_parent,
    free_port,
    tool,
    wait_for,
)

EXAMPLE = DEPLOY / "prometheus" / "prometheus.example.yml"
PROBE_JOBS = ("stream-nb-readyz", "stream-nb-healthz")
#: The groups of the shipped alerts and of the documented probe-based ones.
SHIPPED, PROBES = "stream-nb.alerts", "stream-nb.probes"


def probe_rules() -> str:
    """The rule file after ``<!-- probe-based alerts -->`` in docs/operations.md."""
    text = (REPO / "docs" / "operations.md").read_text()
    match = re.search(r"<!-- probe-based alerts -->\n```yaml\n(.*?)```", text, re.DOTALL)
    assert match is not None, "docs/operations.md lost its probe-based alerts"
    return match[1]


@dataclass
class Probed:
    daemon: Daemon
    prometheus: PrometheusServer

    def rule_query(self, name: str, group: str = SHIPPED) -> str:
        """The expression of a loaded rule of ``group`` (alerts: without their hold time)."""
        for found in self.prometheus.api("rules")["groups"]:
            for rule in found["rules"]:
                if found["name"] == group and rule["name"] == name:
                    return str(rule["query"])
        raise AssertionError(f"no rule {name} loaded in group {group}")

    def instances(self, expr: str) -> set[str]:
        return {r["metric"]["instance"] for r in self.prometheus.query(expr)}


def example_config(daemon: str, exporter: str, extra_rules: Path) -> str:
    """The example configuration pointed at this daemon and exporter, scraped every second,
    with ``extra_rules`` loaded next to the shipped rule files."""
    text = EXAMPLE.read_text()
    last = RULE_FILES[-1]
    for old, new in [
        ("127.0.0.1:9108", daemon),
        ("127.0.0.1:9115", exporter),
        ("scrape_interval: 15s", "scrape_interval: 1s"),
        ("evaluation_interval: 15s", "evaluation_interval: 1s"),
        *((f"- {path.name}", f"- {path}") for path in RULE_FILES[:-1]),
        (f"- {last.name}", f"- {last}\n  - {extra_rules}"),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_the_probe_based_alerts_pass_promtool(tmp_path: Path) -> None:
    rules = tmp_path / "stream-nb.probes.yml"
    rules.write_text(probe_rules())
    result = subprocess.run(
        [tool("promtool", "prometheus"), "check", "rules", str(rules)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 2 rules found" in result.stdout


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Probed]:
    workdir = tmp_path_factory.mktemp("probes")
    (workdir / "events.jsonl").write_bytes(b"")
    blackbox_config = workdir / "blackbox.yml"
    blackbox_config.write_text(json.dumps({"modules": {"http_2xx": {"prober": "http"}}}))
    exporter_address = f"127.0.0.1:{free_port()}"
    with open(workdir / "blackbox.log", "ab") as log:
        exporter = subprocess.Popen(
            [
                tool("prometheus-blackbox-exporter", "prometheus-blackbox-exporter"),
                f"--config.file={blackbox_config}",
                f"--web.listen-address={exporter_address}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            preexec_fn=die_with_parent,
        )
    daemon = Daemon(
        workdir, ["--source", "events.jsonl", "--follow", "--sink", "predictions.jsonl"]
    )
    prom_dir = workdir / "prometheus"
    prom_dir.mkdir()
    probes = workdir / "stream-nb.probes.yml"
    probes.write_text(probe_rules())
    prometheus = None
    try:
        daemon.start()
        prometheus = PrometheusServer(
            prom_dir, [], config_text=example_config(daemon.target, exporter_address, probes)
        ).start()
        yield Probed(daemon, prometheus)
    finally:
        if prometheus is not None:
            prometheus.stop()
        daemon.stop()
        exporter.terminate()
        exporter.wait(30)


def test_the_example_jobs_probe_the_daemon_under_its_own_instance(probed: Probed) -> None:
    prom, target = probed.prometheus, probed.daemon.target

    def every_job_up() -> bool:
        targets = prom.api("targets")["activeTargets"]
        return sorted((t["labels"]["job"], t["health"]) for t in targets) == sorted(
            [(JOB, "up")] + [(job, "up") for job in PROBE_JOBS]
        )

    wait_for(every_job_up, "the daemon and both probes to be scraped")
    for job in (JOB, *PROBE_JOBS):
        up = prom.values(f'up{{job="{job}"}}', "instance")
        assert up == {target: 1.0}, job
    for job in PROBE_JOBS:
        assert prom.values(f'probe_success{{job="{job}"}}', "instance") == {target: 1.0}
        assert prom.values(f'probe_http_status_code{{job="{job}"}}', "instance") == {target: 200.0}


def test_a_ready_live_daemon_trips_no_alert(probed: Probed) -> None:
    prom, target = probed.prometheus, probed.daemon.target
    wait_for(
        lambda: prom.values(f'stream_nb_ready{{job="{JOB}"}}', "instance") == {target: 1.0},
        "the daemon's readiness gauge",
    )
    for alert in ("StreamNBDown", "StreamNBNotReady", "StreamNBNotLive"):
        assert probed.instances(probed.rule_query(alert)) == set(), alert
    for alert in ("StreamNBNotReady", "StreamNBNotLive"):
        assert probed.instances(probed.rule_query(alert, PROBES)) == set(), alert
    # the gauges the shipped alerts read, and the probes the documented ones read, agree
    age = prom.values(f'stream_nb_progress_age_seconds{{job="{JOB}"}}', "instance")
    assert age.keys() == {target} and age[target] < 60
    for job in PROBE_JOBS:
        assert prom.values(f'probe_success{{job="{job}"}}', "instance") == {target: 1.0}


def test_a_stopped_daemon_is_down_not_unready_or_stuck(probed: Probed) -> None:
    """Kept last (module order). Once the daemon is gone, both probes fail and its
    /metrics too: only StreamNBDown's expression selects it, for the shipped alerts
    (the gauges have no sample left) and for the probe-based ones alike."""
    assert probed.daemon.stop() == 0
    prom, target = probed.prometheus, probed.daemon.target
    wait_for(
        lambda: (
            all(
                prom.values(f'probe_success{{job="{job}"}}', "instance") == {target: 0.0}
                for job in PROBE_JOBS
            )
            and prom.values(f'up{{job="{JOB}"}}', "instance") == {target: 0.0}
        ),
        "the probes and the scrape to fail",
    )
    # the exporter itself still answers: its jobs are up
    for job in PROBE_JOBS:
        assert prom.values(f'up{{job="{job}"}}', "instance") == {target: 1.0}
    assert probed.instances(probed.rule_query("StreamNBDown")) == {target}
    for group in (SHIPPED, PROBES):
        assert probed.instances(probed.rule_query("StreamNBNotReady", group)) == set(), group
        assert probed.instances(probed.rule_query("StreamNBNotLive", group)) == set(), group
    assert prom.query(f'stream_nb_ready{{job="{JOB}"}}') == []  # stale: no sample
