"""Tests of stream_nb.engine.telemetry: a real HTTP server on a free port, real scrapes,
``promtool check metrics`` on the exposition, health/readiness, naming rules."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from stream_nb import ConfigError, EngineMetrics, PrequentialEvaluator, serve_metrics
from stream_nb.engine.server import MetricsServer
from stream_nb.engine.telemetry import (
    CHECKPOINT_FAILURE_REASONS,
    CHECKPOINT_RESULTS,
    DEAD_LETTER_REASONS,
    LATENCY_BUCKETS,
    OUTCOMES,
    STAGES,
    VIEWS,
)

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def get(url: str, accept: str | None = None, method: str = "GET") -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, method=method)
    if accept:
        request.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of a text exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def promtool(exposition: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [PROMTOOL, "check", "metrics"], input=exposition, capture_output=True, timeout=60
    )


@pytest.fixture
def metrics() -> EngineMetrics:
    return EngineMetrics()


@pytest.fixture
def server(metrics: EngineMetrics) -> Iterator[MetricsServer]:
    with serve_metrics(metrics, port=0) as running:
        yield running


def drive(metrics: EngineMetrics) -> PrequentialEvaluator:
    """Known values through every recording method."""
    metrics.record_batch(
        consumed=10,
        outcomes={"learned": 6, "predicted": 2, "dead_letter": 1, "skipped": 1},
        predictions=8,
        seconds=0.004,
        stage_seconds={"decode": 0.0005, "predict": 0.001, "learn": 0.002, "emit": 0.0004},
        last_event_timestamp=1_700_000_000.5,
    )
    metrics.record_batch(
        consumed=5,
        outcomes={"learned": 5},
        predictions=5,
        seconds=0.002,
        stage_seconds={"decode": 0.00025},
        last_event_timestamp=None,
    )
    metrics.record_dead_letter("invalid_json")
    metrics.record_dead_letter("invalid_json")
    metrics.record_dead_letter("non_finite")
    for latency in (2e-6, 3e-6, 4e-5, 0.2):
        metrics.record_event_latency(latency)
    ev = PrequentialEvaluator(window=4, loss_matrix={"a": {"b": 3.0}})
    for y, p in [("a", "a"), ("b", "a"), ("b", "b"), ("a", "a"), ("a", None)]:
        ev.update(y, p, {y: math.log(0.5)})
    metrics.record_evaluation(ev)
    metrics.record_model_size({"classes": 2, "features": 7, "stored_counts": 40, "bytes": 4000})
    metrics.record_checkpoint(result="success", seconds=0.02)
    metrics.record_checkpoint(result="failure", seconds=0.5)
    metrics.record_delayed_label_cache(size=12, evicted=3)
    metrics.record_delayed_label_cache(size=9, evicted=2)
    metrics.set_build_info(version="0.1.0", learner="CategoricalNB")
    return ev


def test_scraped_values_match_what_was_recorded(
    metrics: EngineMetrics, server: MetricsServer
) -> None:
    ev = drive(metrics)
    status, content_type, body = get(server.url + "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain; version=0.0.4")
    s = samples(body.decode())

    def value(name: str, **labels: str) -> float:
        return s[(name, tuple(sorted(labels.items())))]

    assert value("stream_nb_events_consumed_total") == 15
    assert value("stream_nb_events_processed_total", outcome="learned") == 11
    assert value("stream_nb_events_processed_total", outcome="predicted") == 2
    assert value("stream_nb_events_processed_total", outcome="delayed") == 0  # pre-created
    assert value("stream_nb_dead_letters_total", reason="invalid_json") == 2
    assert value("stream_nb_dead_letters_total", reason="non_finite") == 1
    assert value("stream_nb_predictions_emitted_total") == 13
    assert value("stream_nb_batches_total") == 2
    assert value("stream_nb_batch_duration_seconds_count") == 2
    assert value("stream_nb_batch_duration_seconds_sum") == pytest.approx(0.006)
    assert value("stream_nb_stage_seconds_total", stage="decode") == pytest.approx(0.00075)
    # mean per event of each batch: 0.0005/10 = 5e-5 and 0.00025/5 = 5e-5
    assert value("stream_nb_stage_latency_seconds_count", stage="decode") == 2
    assert value("stream_nb_stage_latency_seconds_bucket", stage="decode", le="5e-05") == 2
    assert value("stream_nb_stage_latency_seconds_bucket", stage="decode", le="2.5e-05") == 0
    assert value("stream_nb_event_latency_seconds_bucket", le="1e-06") == 0
    assert value("stream_nb_event_latency_seconds_bucket", le="5e-06") == 2
    assert value("stream_nb_event_latency_seconds_bucket", le="5e-05") == 3
    assert value("stream_nb_event_latency_seconds_bucket", le="1.0") == 4
    assert value("stream_nb_event_latency_seconds_count") == 4
    assert value("stream_nb_last_event_timestamp_seconds") == 1_700_000_000.5
    assert value("stream_nb_last_processed_timestamp_seconds") > 1_600_000_000
    report = ev.report(confusion=False)
    assert value("stream_nb_prequential_evaluated_total") == 5
    assert value("stream_nb_prequential_correct_total") == 3
    for view in VIEWS:
        assert value("stream_nb_prequential_accuracy_ratio", view=view) == pytest.approx(
            report[view]["accuracy"]
        )
        assert value("stream_nb_prequential_log_loss", view=view) == pytest.approx(math.log(2))
        assert value("stream_nb_prequential_macro_f1_ratio", view=view) == pytest.approx(
            report[view]["macro_f1"]
        )
        assert value("stream_nb_prequential_cost", view=view) == pytest.approx(report[view]["cost"])
        for key, statistic in (("kappa", "cohen"), ("kappa_m", "m"), ("kappa_t", "temporal")):
            got = value("stream_nb_prequential_kappa", view=view, statistic=statistic)
            want = report[view][key]
            if want is None:  # undefined: exported as NaN
                assert math.isnan(got), (view, statistic)
            else:
                assert got == pytest.approx(want), (view, statistic)
    assert value("stream_nb_prequential_accuracy_ratio", view="window") == 0.5
    assert value("stream_nb_model_classes") == 2
    assert value("stream_nb_model_features") == 7
    assert value("stream_nb_model_stored_counts") == 40
    assert value("stream_nb_model_size_bytes") == 4000
    assert value("stream_nb_checkpoints_total", result="success") == 1
    assert value("stream_nb_checkpoints_total", result="failure") == 1
    assert value("stream_nb_checkpoint_duration_seconds_count") == 2
    assert value("stream_nb_checkpoint_last_success_timestamp_seconds") > 1_600_000_000
    assert value("stream_nb_delayed_label_cache_entries") == 9
    assert value("stream_nb_delayed_label_evictions_total") == 5
    assert value("stream_nb_build_info", learner="CategoricalNB", version="0.1.0") == 1
    # the default collectors are there too
    assert value("process_cpu_seconds_total") >= 0
    assert any(name == "python_info" for name, _labels in s)


def test_exposition_passes_promtool_without_warnings(
    metrics: EngineMetrics, server: MetricsServer
) -> None:
    for step in ("fresh", "driven"):
        if step == "driven":
            drive(metrics)
        _status, _type, body = get(server.url + "/metrics")
        result = promtool(body)
        assert result.returncode == 0, (step, result.stdout, result.stderr)
        # lint findings are printed as "<metric> <problem>"; none are accepted
        assert result.stdout == b"" and result.stderr == b"", (step, result.stdout, result.stderr)


def test_promtool_does_catch_bad_names() -> None:
    """The lint check used above is live: a counter without _total is reported."""
    bad = b"# HELP stream_nb_bad a counter\n# TYPE stream_nb_bad counter\nstream_nb_bad 1\n"
    result = promtool(bad)
    assert b"_total" in result.stdout + result.stderr


def test_undefined_metrics_are_nan_before_any_event(
    metrics: EngineMetrics, server: MetricsServer
) -> None:
    metrics.record_evaluation(PrequentialEvaluator())
    s = samples(get(server.url + "/metrics")[2].decode())
    for view in VIEWS:
        assert math.isnan(s[("stream_nb_prequential_accuracy_ratio", (("view", view),))])
        assert math.isnan(s[("stream_nb_prequential_cost", (("view", view),))])
    assert s[("stream_nb_prequential_evaluated_total", ())] == 0


def test_openmetrics_negotiation(metrics: EngineMetrics, server: MetricsServer) -> None:
    drive(metrics)
    status, content_type, body = get(server.url + "/metrics", accept=OPENMETRICS)
    assert status == 200
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")
    assert b"stream_nb_events_consumed_total 15.0" in body


def test_health_and_readiness_flip() -> None:
    state = {"ready": False, "live": True}
    with serve_metrics(
        EngineMetrics(), port=0, ready=lambda: state["ready"], live=lambda: state["live"]
    ) as server:
        assert get(server.url + "/healthz")[0] == 200
        assert get(server.url + "/readyz")[0] == 503
        state["ready"] = True
        assert get(server.url + "/readyz") == (200, "text/plain; charset=utf-8", b"ready\n")
        state["live"] = False
        assert get(server.url + "/healthz")[0] == 503
        state["ready"] = False
        assert get(server.url + "/readyz")[0] == 503
        assert get(server.url + "/readyz?verbose=1")[0] == 503  # query strings are ignored


def test_a_failing_health_callback_answers_503() -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    with serve_metrics(EngineMetrics(), port=0, ready=broken, live=broken) as server:
        assert get(server.url + "/readyz")[0] == 503
        assert get(server.url + "/healthz")[0] == 503
        assert get(server.url + "/metrics")[0] == 200


def test_unknown_path_and_head(server: MetricsServer) -> None:
    status, _type, body = get(server.url + "/nope")
    assert status == 404
    assert b"/metrics" in body
    status, _type, body = get(server.url + "/metrics", method="HEAD")
    assert status == 200 and body == b""


def test_server_binds_the_address_and_closes(metrics: EngineMetrics) -> None:
    server = serve_metrics(metrics, host="127.0.0.1", port=0)
    assert server.host == "127.0.0.1" and server.port > 0
    assert server.url == f"http://127.0.0.1:{server.port}"
    # the port is taken while it runs
    with pytest.raises(ConfigError, match=rf"cannot serve metrics on 127.0.0.1:{server.port}"):
        serve_metrics(metrics, port=server.port)
    server.close()
    server.close()  # idempotent
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(server.url + "/healthz", timeout=5)


@pytest.mark.parametrize("port", [-1, 70000, "9108", True])
def test_invalid_port(metrics: EngineMetrics, port: object) -> None:
    with pytest.raises(ConfigError, match=r"metrics port must be an integer in 0\.\.65535"):
        serve_metrics(metrics, port=port)  # type: ignore[arg-type]


def test_scrapes_during_concurrent_updates(metrics: EngineMetrics, server: MetricsServer) -> None:
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            metrics.record_batch(
                consumed=1,
                outcomes={"learned": 1},
                predictions=1,
                seconds=1e-5,
                stage_seconds={"learn": 1e-6},
                last_event_timestamp=None,
            )

    thread = threading.Thread(target=work)
    thread.start()
    try:
        values = []
        for _ in range(5):
            s = samples(get(server.url + "/metrics")[2].decode())
            values.append(s[("stream_nb_events_consumed_total", ())])
    finally:
        stop.set()
        thread.join()
    assert values == sorted(values)  # counters never go back


# ---------------------------------------------------------------------- evaluation counters
def test_prequential_counters_follow_the_evaluator(metrics: EngineMetrics) -> None:
    def counter(name: str) -> float | None:
        return metrics.registry.get_sample_value(name)

    ev = PrequentialEvaluator()
    for y in "abab":
        ev.update(y, "a", {})
    metrics.record_evaluation(ev)
    metrics.record_evaluation(ev)  # no new events: no change
    assert counter("stream_nb_prequential_evaluated_total") == 4
    assert counter("stream_nb_prequential_correct_total") == 2
    ev.update("a", "a", {})
    metrics.record_evaluation(ev)
    assert counter("stream_nb_prequential_evaluated_total") == 5
    assert counter("stream_nb_prequential_correct_total") == 3
    # a new evaluator (smaller totals) restarts the deltas from its own totals
    fresh = PrequentialEvaluator()
    fresh.update("a", "a", {})
    fresh.update("b", "b", {})
    metrics.record_evaluation(fresh)
    assert counter("stream_nb_prequential_evaluated_total") == 7
    assert counter("stream_nb_prequential_correct_total") == 5


# ---------------------------------------------------------------------- naming rules
ALLOWED_LABELS = {"outcome", "reason", "stage", "result", "view", "statistic", "version", "learner"}
DEFAULT_COLLECTOR_PREFIXES = ("process_", "python_")
UNITS = ("seconds", "bytes", "ratio")


def test_every_metric_follows_the_naming_conventions(metrics: EngineMetrics) -> None:
    drive(metrics)
    ours = 0
    for family in metrics.registry.collect():
        if family.name.startswith(DEFAULT_COLLECTOR_PREFIXES):
            continue
        ours += 1
        name = family.name
        assert re.fullmatch(r"stream_nb_[a-z0-9_]+", name), name
        assert family.documentation, name
        if family.type == "counter":
            # prometheus-client keeps the family name without _total and adds it to samples
            assert not name.endswith("_total"), name
            for s in family.samples:
                assert s.name in (f"{name}_total", f"{name}_created"), s.name
        else:
            assert not name.endswith("_total"), name
        if family.type == "histogram":
            assert name.endswith("_seconds"), name
        for unit in UNITS:
            if unit in name.split("_"):
                assert name.endswith(unit) or name.endswith(f"{unit}_total"), name
        assert "milliseconds" not in name and "microseconds" not in name, name
        for s in family.samples:
            assert set(s.labels) - {"le"} <= ALLOWED_LABELS, (s.name, s.labels)
    assert ours >= 25


EVALUATION_MD = Path(__file__).resolve().parents[3] / "docs" / "evaluation.md"


def documented_metrics() -> dict[str, set[str]]:
    """{metric name: its labels} from the metrics table of docs/evaluation.md."""
    text = EVALUATION_MD.read_text(encoding="utf-8")
    section = text.split("## Prometheus metrics and health", 1)[1].split("\n## ", 1)[0]
    table: dict[str, set[str]] = {}
    for row in section.splitlines():
        cells = row.split("|")
        if not row.startswith("| `stream_nb_") or len(cells) != 5:
            continue
        # label names in backticks; their values (in parentheses) left out
        labels = set(re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", cells[3])))
        for name in re.findall(r"`(stream_nb_\w+)`", cells[1]):
            table[name] = labels
    return table


def test_docs_list_every_metric_with_its_labels(metrics: EngineMetrics) -> None:
    """docs/evaluation.md holds the one list of the metrics: the same names and labels."""
    drive(metrics)
    metrics.watch(ready=lambda: True, progress_age=lambda: 1.0, backlog_bytes=lambda: 0)
    exported: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        if family.name.startswith(DEFAULT_COLLECTOR_PREFIXES):
            continue
        name = f"{family.name}_total" if family.type == "counter" else family.name
        exported[name] = {label for s in family.samples for label in s.labels} - {"le"}
    assert documented_metrics() == exported


def test_label_values_are_bounded(metrics: EngineMetrics) -> None:
    drive(metrics)
    allowed = {
        "outcome": set(OUTCOMES),
        "reason": set(DEAD_LETTER_REASONS) | set(CHECKPOINT_FAILURE_REASONS),
        "stage": set(STAGES),
        "result": set(CHECKPOINT_RESULTS),
        "view": set(VIEWS),
        "statistic": {"cohen", "m", "temporal"},
    }
    for family in metrics.registry.collect():
        for s in family.samples:
            for label, value in s.labels.items():
                if label in allowed:
                    assert value in allowed[label], (s.name, label, value)


def test_buckets_span_microseconds_to_a_second() -> None:
    assert LATENCY_BUCKETS[0] == 1e-6
    assert LATENCY_BUCKETS[-1] == 1.0
    assert list(LATENCY_BUCKETS) == sorted(LATENCY_BUCKETS)
    assert 2.5e-6 in LATENCY_BUCKETS  # exact decimal bucket bounds


def test_registries_are_independent() -> None:
    a, b = EngineMetrics(), EngineMetrics()
    a.record_dead_letter("too_large")
    assert a.registry.get_sample_value("stream_nb_dead_letters_total", {"reason": "too_large"}) == 1
    assert b.registry.get_sample_value("stream_nb_dead_letters_total", {"reason": "too_large"}) == 0


def test_shared_registry_without_default_collectors() -> None:
    registry = CollectorRegistry()
    metrics = EngineMetrics(registry)
    assert metrics.registry is registry
    names = {family.name for family in registry.collect()}
    assert "stream_nb_events_consumed" in names
    assert not any(name.startswith("process_") for name in names)


# ---------------------------------------------------------------------- validation
BATCH = {
    "consumed": 1,
    "outcomes": {"learned": 1},
    "predictions": 1,
    "seconds": 0.001,
    "stage_seconds": {"learn": 0.001},
    "last_event_timestamp": None,
}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            {"outcomes": {"exploded": 1}},
            r"unknown outcome 'exploded'; metric labels must be bounded",
        ),
        ({"stage_seconds": {"parse": 0.1}}, r"unknown stage 'parse'.*decode, predict"),
        ({"consumed": -1}, r"consumed must be a non-negative integer count, got -1"),
        ({"consumed": 1.5}, r"consumed must be a non-negative integer count"),
        ({"outcomes": {"learned": -2}}, r"outcomes\['learned'\] must be a non-negative integer"),
        ({"seconds": math.nan}, r"seconds must be a non-negative, finite number"),
        ({"stage_seconds": {"learn": -1.0}}, r"stage_seconds\['learn'\] must be a non-negative"),
        ({"last_event_timestamp": "now"}, r"last_event_timestamp must be Unix seconds or None"),
    ],
)
def test_record_batch_validation(change: dict[str, object], match: str) -> None:
    metrics = EngineMetrics()
    with pytest.raises(ConfigError, match=match):
        metrics.record_batch(**{**BATCH, **change})  # type: ignore[arg-type]
    # nothing was counted by the rejected call
    assert metrics.registry.get_sample_value("stream_nb_events_consumed_total") == 0


def test_other_validation(metrics: EngineMetrics) -> None:
    with pytest.raises(ConfigError, match=r"unknown dead-letter reason 'user_42'"):
        metrics.record_dead_letter("user_42")
    with pytest.raises(ConfigError, match=r"unknown checkpoint result 'ok'.*success, failure"):
        metrics.record_checkpoint(result="ok", seconds=1.0)
    with pytest.raises(ConfigError, match=r"unknown model size key 'vocabulary'"):
        metrics.record_model_size({"vocabulary": 3})
    with pytest.raises(ConfigError, match=r"size\['classes'\] must be a non-negative integer"):
        metrics.record_model_size({"classes": -3})
    with pytest.raises(ConfigError, match=r"evicted must be a non-negative integer count"):
        metrics.record_delayed_label_cache(size=1, evicted=-1)
    with pytest.raises(ConfigError, match=r"seconds must be a non-negative, finite number"):
        metrics.record_event_latency(-1e-6)
    with pytest.raises(ConfigError, match=r"learner must be a non-empty string, got ''"):
        metrics.set_build_info(version="1", learner="")


def test_build_info_is_replaced(metrics: EngineMetrics) -> None:
    metrics.set_build_info(version="0.1.0", learner="CategoricalNB")
    metrics.set_build_info(version="0.1.0", learner="GaussianNB")
    found = [
        s.labels
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name == "stream_nb_build_info"
    ]
    assert found == [{"version": "0.1.0", "learner": "GaussianNB"}]


# ---------------------------------------------------------------------- with the real engine
def test_dead_letter_reasons_are_the_decoders_reasons() -> None:
    from stream_nb.engine import REASONS

    assert set(REASONS) == set(DEAD_LETTER_REASONS)


def test_engine_run_is_scraped_and_passes_promtool() -> None:
    """The engine's own calls (outcomes, stages, reasons, sampled latency) are all
    accepted and the scraped values are what it processed."""
    from stream_nb import CategoricalNB
    from stream_nb.connectors.memory import ListSource, MemorySink
    from stream_nb.engine import Engine

    good = [
        {"x": {"colour": c, "size": s}, "y": y}
        for c, s, y in [
            ("red", "big", "apple"),
            ("green", "small", "pear"),
            ("red", "small", "apple"),
        ]
        * 20
    ]
    items: list[object] = [*good[:30], "{not json", "", [1, 2], {"x": {"a": 1}}, *good[30:]]
    metrics = EngineMetrics()
    evaluator = PrequentialEvaluator(window=10)
    engine = Engine(
        CategoricalNB(),
        ListSource(items),
        MemorySink(),
        dead_letters=MemorySink(),
        evaluator=evaluator,
        metrics=metrics,
        batch_size=16,
        latency_every=1,
    )
    engine.run()
    with serve_metrics(metrics, port=0) as server:
        body = get(server.url + "/metrics")[2]
    s = samples(body.decode())
    assert s[("stream_nb_events_consumed_total", ())] == len(items)
    assert s[("stream_nb_events_processed_total", (("outcome", "learned"),))] == len(good)
    assert s[("stream_nb_events_processed_total", (("outcome", "predicted"),))] == 1
    # the blank line is consumed and counted under outcome="blank", as in the run report
    assert s[("stream_nb_events_processed_total", (("outcome", "blank"),))] == 1
    assert engine.outcomes["blank"] == 1
    assert s[("stream_nb_events_processed_total", (("outcome", "dead_letter"),))] == 2
    assert s[("stream_nb_dead_letters_total", (("reason", "invalid_json"),))] == 1
    assert s[("stream_nb_dead_letters_total", (("reason", "not_object"),))] == 1
    assert s[("stream_nb_predictions_emitted_total", ())] == len(good) + 1
    assert s[("stream_nb_prequential_evaluated_total", ())] == evaluator.n == len(good)
    assert s[("stream_nb_prequential_correct_total", ())] == evaluator.n_correct
    assert s[("stream_nb_prequential_accuracy_ratio", (("view", "cumulative"),))] == (
        pytest.approx(evaluator.n_correct / evaluator.n)
    )
    assert s[("stream_nb_event_latency_seconds_count", ())] > 0
    assert s[("stream_nb_model_classes", ())] == 2
    result = promtool(body)
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b"", result
