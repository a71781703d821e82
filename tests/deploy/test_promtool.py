"""``promtool`` on deploy/prometheus: rule syntax, the rule unit tests, the example config."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from deploy_helpers import DEPLOY, RULE_FILES, tool

PROMETHEUS_DIR = DEPLOY / "prometheus"
UNIT_TESTS = sorted((PROMETHEUS_DIR / "tests").glob("*.yml"))
ALERTS = PROMETHEUS_DIR / "stream-nb.alerts.yml"


def promtool(*args: str, cwd: Path = PROMETHEUS_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool", "prometheus"), *args], cwd=cwd, capture_output=True, text=True
    )


def alert_names() -> list[str]:
    return re.findall(r"^      - alert: (\w+)$", ALERTS.read_text(), re.MULTILINE)


def test_the_rule_files_pass_promtool_check_rules() -> None:
    result = promtool("check", "rules", *(str(path) for path in RULE_FILES))
    assert result.returncode == 0, result.stdout + result.stderr
    for path in RULE_FILES:
        rules = len(re.findall(r"^      - (?:record|alert): ", path.read_text(), re.MULTILINE))
        assert f"Checking {path}\n  SUCCESS: {rules} rules found" in result.stdout


def test_the_rule_unit_tests_pass() -> None:
    assert len(UNIT_TESTS) == 2
    result = promtool("test", "rules", *(str(path) for path in UNIT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(UNIT_TESTS)


def test_every_alert_is_unit_tested_firing_and_quiet() -> None:
    """Each alert has an evaluation where it fires and one where nothing fires."""
    text = (PROMETHEUS_DIR / "tests" / "stream-nb.alerts.test.yml").read_text()
    firing: set[str] = set()
    quiet: set[str] = set()
    for block in re.split(r"^      - eval_time: ", text, flags=re.MULTILINE)[1:]:
        name = re.search(r"^        alertname: (\w+)$", block, re.MULTILINE)
        assert name is not None, block
        if re.search(r"^        exp_alerts: \[\]$", block, re.MULTILINE):
            quiet.add(name[1])
        elif re.search(r"^          - exp_labels:$", block, re.MULTILINE):
            firing.add(name[1])
    names = set(alert_names())
    assert len(names) >= 8
    assert firing == names
    assert quiet == names


@pytest.mark.parametrize(
    ("alert", "before", "after"),
    [
        # a threshold that also catches the healthy instance
        ("StreamNBDeadLetterRatioHigh", "ratio_rate5m > 0.05", "ratio_rate5m > 0.001"),
        # the condition that tells an idle daemon from one that stopped checkpointing
        (
            "StreamNBCheckpointStale",
            "stream_nb_last_processed_timestamp_seconds\n"
            "            > stream_nb_checkpoint_last_success_timestamp_seconds",
            "stream_nb_last_processed_timestamp_seconds",
        ),
        # firing at once instead of after its hold time
        (
            "StreamNBDown",
            'expr: up{job=~"stream-nb.*", job!~"stream-nb-(readyz|healthz).*"} == 0\n'
            "        for: 2m",
            "expr: up == 0\n        for: 0m",
        ),
        # paging about the blackbox exporter's own `up` as if a daemon were down
        (
            "StreamNBDown",
            'expr: up{job=~"stream-nb.*", job!~"stream-nb-(readyz|healthz).*"} == 0',
            'expr: up{job=~"stream-nb.*"} == 0',
        ),
        # one slow batch taken for a stuck loop
        (
            "StreamNBNotLive",
            "expr: stream_nb_progress_age_seconds > 60\n        for: 2m",
            "expr: stream_nb_progress_age_seconds > 60\n        for: 0m",
        ),
        # a fixed threshold instead of 3 × each daemon's own checkpoint interval
        (
            "StreamNBCheckpointStale",
            "> 3 * (stream_nb_checkpoint_interval_seconds > 0)",
            "> 180",
        ),
        # file sources forgotten: only Kafka lag counts as input
        (
            "StreamNBStalled",
            "or on (instance, job)\n            stream_nb_source_backlog_bytes > 0",
            "or on (instance, job)\n            stream_nb_source_backlog_bytes > 1e99",
        ),
    ],
)
def test_the_unit_tests_catch_a_broken_alert(
    tmp_path: Path, alert: str, before: str, after: str
) -> None:
    shutil.copytree(PROMETHEUS_DIR, tmp_path / "prometheus")
    alerts = tmp_path / "prometheus" / ALERTS.name
    text = alerts.read_text()
    assert before in text
    assert text.count(before) == 1
    alerts.write_text(text.replace(before, after))
    result = promtool("test", "rules", "tests/stream-nb.alerts.test.yml", cwd=alerts.parent)
    assert result.returncode != 0
    assert f"alertname: {alert}," in result.stdout + result.stderr


def test_the_example_prometheus_config_is_valid() -> None:
    result = promtool("check", "config", "prometheus.example.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 2 rule files found" in result.stdout
