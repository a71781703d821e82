"""The Grafana dashboard's structure, and the metric names in deploy/ against the daemon's.

(That every expression evaluates on a real Prometheus, and that the panels show a
real daemon's data, is in test_prometheus.py.)
"""

from __future__ import annotations

import re

import pytest
from deploy_helpers import (
    DASHBOARD,
    dashboard_panels,
    dashboard_variable_queries,
    exposition_names,
    load_dashboard,
    names_used_in_deploy,
    recorded_names,
)
from prometheus_client import generate_latest

from stream_nb.connectors.kafka import KafkaMetrics
from stream_nb.engine.telemetry import EngineMetrics

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return load_dashboard()


def test_the_dashboard_is_a_grafana_10_model(dashboard: dict) -> None:
    assert dashboard["schemaVersion"] >= 37  # Grafana 10.0
    assert dashboard["uid"] == "stream-nb"
    assert dashboard["title"] == "stream-nb"
    assert dashboard["description"]
    requires = {r["id"]: r["version"] for r in dashboard["__requires"]}
    assert requires["grafana"].startswith("10.")


def test_variables_datasource_job_model_instance(dashboard: dict) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert list(variables) == ["datasource", "job", "model", "instance"]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    queries = dashboard_variable_queries(dashboard)
    assert queries == {
        "job": "label_values(stream_nb_build_info, job)",
        "model": 'label_values(stream_nb_build_info{job=~"$job"}, learner)',
        "instance": 'label_values(stream_nb_build_info{job=~"$job", learner=~"$model"}, instance)',
    }
    for name in ("job", "model", "instance"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"] == DATASOURCE
        assert variables[name]["multi"] and variables[name]["includeAll"]
        # "All" must expand to the listed values, so that All instances of one
        # model are that model's instances, not every instance
        assert "allValue" not in variables[name]


def test_every_panel_has_a_description_a_unit_and_the_datasource_variable(
    dashboard: dict,
) -> None:
    panels = list(dashboard_panels(dashboard))
    assert len(panels) > 30
    for panel in panels:
        title = panel["title"]
        assert len(panel["description"]) > 30, title
        assert panel["fieldConfig"]["defaults"]["unit"], title
        assert panel["datasource"] == DATASOURCE, title
        assert panel["targets"], title
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, title
            expr = target["expr"]
            # every series is filtered by the variables, so no instance is hard-coded
            assert 'job=~"$job"' in expr and 'instance=~"$instance"' in expr, (title, expr)
            assert expr.count("{") == expr.count('instance=~"$instance"'), (title, expr)


def test_no_instance_or_address_is_hard_coded() -> None:
    text = DASHBOARD.read_text()
    assert not re.search(r"instance\s*=\s*\\?\"", text)
    assert not re.search(r"\b\d{1,3}(\.\d{1,3}){3}\b|localhost|:\d{4,5}\b", text)
    # the data source comes from the variable, never a fixed uid
    uids = set(re.findall(r'"uid":\s*"([^"]*)"', text))
    assert uids == {"${datasource}", "-- Grafana --", "stream-nb"}


def test_rows_and_layout(dashboard: dict) -> None:
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == [
        "Overview",
        "Throughput",
        "Latency",
        "Prequential quality",
        "Model",
        "Checkpoints",
        "Kafka",
        "Process",
    ]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        area = {
            (x, y)
            for x in range(pos["x"], pos["x"] + pos["w"])
            for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area


def test_the_panels_the_issue_asks_for(dashboard: dict) -> None:
    exprs = " ".join(t["expr"] for p in dashboard_panels(dashboard) for t in p["targets"])
    for needed in [
        "stream_nb_events_processed_total",
        "stream_nb_dead_letters_total",
        "instance:stream_nb_event_latency_seconds:quantile_rate5m",
        "instance_stage:stream_nb_stage_latency_seconds:quantile_rate5m",
        "stream_nb_prequential_accuracy_ratio",
        "stream_nb_prequential_log_loss",
        "stream_nb_prequential_kappa",
        "stream_nb_prequential_macro_f1_ratio",
        "stream_nb_predictions_emitted_total",
        "instance:stream_nb_checkpoint_age:seconds",
        "instance:stream_nb_checkpoint_duration_seconds:quantile_rate15m",
        "stream_nb_model_classes",
        "stream_nb_model_features",
        "stream_nb_model_stored_counts",
        "stream_nb_model_size_bytes",
        "stream_nb_kafka_consumer_lag",
        "stream_nb_kafka_rebalances_total",
        "stream_nb_kafka_sync_lag",
        "stream_nb_kafka_commit_duration_seconds_count",
        "instance:stream_nb_process_resident_memory:bytes",
        "instance:stream_nb_process_cpu:rate1m",
        "stream_nb_source_backlog_bytes",
        "stream_nb_ready",
        "stream_nb_progress_age_seconds",
        "stream_nb_checkpoint_interval_seconds",
    ]:
        assert needed in exprs, needed


def test_the_checkpoint_threshold_is_each_daemons_own(dashboard: dict) -> None:
    """StreamNBCheckpointStale scales with each daemon's --checkpoint-interval: the panels
    draw that threshold as a series, never as a fixed number of seconds."""
    panels = {p["title"]: p for p in dashboard_panels(dashboard)}
    age = panels["Time since last checkpoint"]
    exprs = [t["expr"] for t in age["targets"]]
    assert 'stream_nb_checkpoint_interval_seconds{job=~"$job", instance=~"$instance"}' in (
        " ".join(exprs)
    )
    for title in ("Time since last checkpoint", "Since last checkpoint"):
        steps = panels[title]["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert [step["value"] for step in steps] == [None], title


def test_every_metric_name_in_deploy_exists() -> None:
    """A misspelt metric evaluates to nothing instead of failing: check the names.

    The names come from the exposition of a new :class:`EngineMetrics` (with the
    process collector's) and the :class:`KafkaMetrics` a Kafka source adds to its
    registry: every family is declared there, with or without samples. (Real daemons'
    ``/metrics`` are checked in test_kafka_prometheus.py.)"""
    metrics = EngineMetrics()
    KafkaMetrics(metrics.registry)
    exported = exposition_names(generate_latest(metrics.registry).decode())
    recorded = recorded_names()
    used = names_used_in_deploy()
    assert {name for name in used if name.startswith("stream_nb_kafka_")}
    assert used - exported - recorded - {"up"} == set()
    assert used & recorded == recorded, "a recording rule nothing uses"
