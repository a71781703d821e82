"""Prometheus metrics of the streaming engine (served by :mod:`stream_nb.engine.server`).

:class:`EngineMetrics` owns every metric on its own ``CollectorRegistry``
(plus prometheus-client's process, platform and garbage-collector
collectors), so several engines or tests in one process never clash and the
global default registry stays untouched. The engine calls it once per batch
with aggregated counts; the per-event latency histogram is fed with a sample
of events chosen by the engine, so the metrics cost nothing per event.

Names follow the Prometheus conventions: prefix ``stream_nb_``, base units
(seconds, bytes), counters end in ``_total``. Label values come from small
fixed sets (:data:`OUTCOMES`, :data:`DEAD_LETTER_REASONS`, :data:`STAGES`,
:data:`CHECKPOINT_RESULTS`, :data:`CHECKPOINT_FAILURE_REASONS`,
:data:`VIEWS`), validated on every call (:mod:`stream_nb.engine.metric_values`),
so a feature name or a label value can never become a label and the number of
series is bounded. Every series of those sets exists (at 0) from the start,
so dashboards and ``rate()`` see them before the first event. The gauges read
at scrape time are in :mod:`stream_nb.engine.scrape`.

The metrics, their types, labels and meaning are listed once, in
``docs/evaluation.md`` (section "Prometheus metrics and health"); a test
checks that list against the registry.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

from stream_nb._exceptions import ConfigError
from stream_nb.engine.metric_values import (
    NAN,
    check_count,
    check_label,
    check_seconds,
    check_unix_time,
    gauge_value,
)
from stream_nb.engine.scrape import ScrapeTimeGauges

if TYPE_CHECKING:
    from stream_nb.evaluation import PrequentialEvaluator


#: What happened to a consumed event (``stream_nb_events_processed_total``).
#: ``learned``: a labelled event was predicted (when possible) then learned;
#: ``predicted``: an unlabelled event was predicted only; ``delayed``: an
#: unlabelled event was predicted and cached for its delayed label;
#: ``label_matched``: a label-only event found its cached features and was
#: learned; ``label_unmatched``: a label-only event found nothing (evicted or
#: unknown id); ``dead_letter``: rejected to the dead-letter sink;
#: ``skipped``: rejected and dropped (policy ``skip``); ``blank``: an empty
#: or whitespace-only line, ignored.
OUTCOMES: tuple[str, ...] = (
    "learned",
    "predicted",
    "delayed",
    "label_matched",
    "label_unmatched",
    "dead_letter",
    "skipped",
    "blank",
)


#: Why an event was rejected (``stream_nb_dead_letters_total``); the
#: ``reason`` codes of :class:`stream_nb.InvalidEventError`.
DEAD_LETTER_REASONS: tuple[str, ...] = (
    "invalid_utf8",
    "invalid_json",
    "too_large",
    "not_object",
    "missing_features",
    "invalid_features",
    "invalid_label",
    "invalid_id",
    "invalid_weight",
    "non_finite",
    "negative_count",
    "out_of_range",
    "too_many_classes",
    "invalid_event",
    "learn_error",
    "predict_error",
)


#: Engine stages timed per batch.
STAGES: tuple[str, ...] = ("decode", "predict", "learn", "evaluate", "emit")


#: Checkpoint results.
CHECKPOINT_RESULTS: tuple[str, ...] = ("success", "failure")


#: Why a checkpoint failed (``stream_nb_checkpoint_failures_total``).
CHECKPOINT_FAILURE_REASONS: tuple[str, ...] = ("sink", "invalid_state", "io")


#: Prequential views (see :mod:`stream_nb.evaluation`).
VIEWS: tuple[str, ...] = ("cumulative", "window", "fading")


#: Buckets for per-event and per-stage latencies: 1, 2.5, 5 × 10^k seconds
#: from 1 µs to 1 s (a Naive Bayes update takes a few µs to a few hundred µs).
LATENCY_BUCKETS: tuple[float, ...] = (
    *(float(f"{m}e{e}") for e in range(-6, 0) for m in (1, 2.5, 5)),
    1.0,
)


__all__ = [
    "CHECKPOINT_FAILURE_REASONS",
    "CHECKPOINT_RESULTS",
    "DEAD_LETTER_REASONS",
    "LATENCY_BUCKETS",
    "OUTCOMES",
    "STAGES",
    "VIEWS",
    "EngineMetrics",
]

#: Buckets for a whole batch: 100 µs to 60 s.
_BATCH_BUCKETS = (1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                  1.0, 2.5, 5.0, 10.0, 30.0, 60.0)  # fmt: skip


#: Buckets for checkpoint writes: 1 ms to 2 min (fsync on a slow disk).
_CHECKPOINT_BUCKETS = (1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                       10.0, 30.0, 60.0, 120.0)  # fmt: skip


_MODEL_SIZE_KEYS = ("classes", "features", "stored_counts", "bytes")


_KAPPAS = (("kappa", "cohen"), ("kappa_m", "m"), ("kappa_t", "temporal"))


class EngineMetrics:
    """Every Prometheus metric of one engine, on its own registry.

    Parameters
    ----------
    registry
        Registry to register on. ``None`` (default) creates a new one with
        the process, platform and GC collectors; a registry passed in is used
        as is (add those collectors yourself if you want them).

    Attributes
    ----------
    registry
        The registry; the Kafka connector adds its ``stream_nb_kafka_*``
        metrics here.

    Examples
    --------
    >>> from prometheus_client import generate_latest
    >>> metrics = EngineMetrics()
    >>> metrics.record_batch(consumed=3, outcomes={"learned": 2, "dead_letter": 1},
    ...                      predictions=2, seconds=0.002,
    ...                      stage_seconds={"decode": 0.0005, "learn": 0.001},
    ...                      last_event_timestamp=None)
    >>> metrics.record_dead_letter("invalid_json")
    >>> text = generate_latest(metrics.registry).decode()
    >>> "stream_nb_events_processed_total{outcome=\\"learned\\"} 2.0" in text
    True
    >>> metrics.registry.get_sample_value("stream_nb_dead_letters_total",
    ...                                   {"reason": "invalid_json"})
    1.0
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        if registry is None:
            registry = CollectorRegistry(auto_describe=True)
            # the default collectors register on the global registry; ours are new instances
            ProcessCollector(registry=registry)
            PlatformCollector(registry=registry)
            GCCollector(registry=registry)
        self.registry = registry
        r = registry
        self._consumed = Counter(
            "stream_nb_events_consumed", "Events (records) read from the source.", registry=r
        )
        self._processed = Counter(
            "stream_nb_events_processed",
            "Events handled, by outcome.",
            ["outcome"],
            registry=r,
        )
        self._outcomes = {o: self._processed.labels(outcome=o) for o in OUTCOMES}
        self._dead = Counter(
            "stream_nb_dead_letters",
            "Events rejected to the dead-letter sink (or skipped), by reason.",
            ["reason"],
            registry=r,
        )
        self._reasons = {x: self._dead.labels(reason=x) for x in DEAD_LETTER_REASONS}
        self._predictions = Counter(
            "stream_nb_predictions_emitted", "Prediction records written to the sink.", registry=r
        )
        self._batches = Counter("stream_nb_batches", "Batches processed.", registry=r)
        self._batch_seconds = Histogram(
            "stream_nb_batch_duration_seconds",
            "Wall time to process one batch.",
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self._event_latency = Histogram(
            "stream_nb_event_latency_seconds",
            "Time from decoding an event to emitting its prediction (sampled events).",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self._stage_latency = Histogram(
            "stream_nb_stage_latency_seconds",
            "Mean time per event spent in a stage, one observation per batch.",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self._stage_hist = {s: self._stage_latency.labels(stage=s) for s in STAGES}
        self._stage_total = Counter(
            "stream_nb_stage_seconds", "Total time spent in a stage.", ["stage"], registry=r
        )
        self._stage_counters = {s: self._stage_total.labels(stage=s) for s in STAGES}
        self._last_event = Gauge(
            "stream_nb_last_event_timestamp_seconds",
            "Timestamp carried by the last processed event (Unix time; 0 before any).",
            registry=r,
        )
        self._last_processed = Gauge(
            "stream_nb_last_processed_timestamp_seconds",
            "Wall-clock time when the last batch finished (Unix time; 0 before any).",
            registry=r,
        )
        self._evaluated = Counter(
            "stream_nb_prequential_evaluated",
            "Labelled events scored prequentially (resumes from the snapshot after a restore).",
            registry=r,
        )
        self._correct = Counter(
            "stream_nb_prequential_correct",
            "Labelled events whose prediction was right.",
            registry=r,
        )
        self._seen_evaluated = 0
        self._seen_correct = 0
        self._accuracy = Gauge(
            "stream_nb_prequential_accuracy_ratio",
            "Prequential accuracy by view (cumulative, sliding window, fading factor).",
            ["view"],
            registry=r,
        )
        self._log_loss = Gauge(
            "stream_nb_prequential_log_loss",
            "Prequential log loss in nats by view.",
            ["view"],
            registry=r,
        )
        self._kappa = Gauge(
            "stream_nb_prequential_kappa",
            "Prequential kappa statistics by view: cohen, m (vs majority class), "
            "temporal (vs no-change).",
            ["view", "statistic"],
            registry=r,
        )
        self._macro_f1 = Gauge(
            "stream_nb_prequential_macro_f1_ratio",
            "Prequential macro-averaged F1 by view.",
            ["view"],
            registry=r,
        )
        self._cost = Gauge(
            "stream_nb_prequential_cost",
            "Prequential mean misclassification cost by view (NaN without a loss matrix).",
            ["view"],
            registry=r,
        )
        # children resolved once: (gauge child, report key) per view
        self._view_gauges: list[tuple[str, list[tuple[Any, str]]]] = []
        for view in VIEWS:
            children = [
                (self._accuracy.labels(view=view), "accuracy"),
                (self._log_loss.labels(view=view), "log_loss"),
                (self._macro_f1.labels(view=view), "macro_f1"),
                (self._cost.labels(view=view), "cost"),
            ]
            children += [
                (self._kappa.labels(view=view, statistic=statistic), key)
                for key, statistic in _KAPPAS
            ]
            for child, _key in children:
                child.set(NAN)
            self._view_gauges.append((view, children))
        self._model = {
            "classes": Gauge("stream_nb_model_classes", "Classes learned.", registry=r),
            "features": Gauge("stream_nb_model_features", "Features learned.", registry=r),
            "stored_counts": Gauge(
                "stream_nb_model_stored_counts", "Numbers held in the model statistics.", registry=r
            ),
            "bytes": Gauge(
                "stream_nb_model_size_bytes",
                "Estimated memory of the model statistics.",
                registry=r,
            ),
        }
        self._checkpoints = Counter(
            "stream_nb_checkpoints", "Checkpoints attempted, by result.", ["result"], registry=r
        )
        self._checkpoint_results = {
            x: self._checkpoints.labels(result=x) for x in CHECKPOINT_RESULTS
        }
        self._checkpoint_failures = Counter(
            "stream_nb_checkpoint_failures",
            "Checkpoints that failed, by reason (the previous snapshot stays the newest).",
            ["reason"],
            registry=r,
        )
        self._checkpoint_failure_reasons = {
            x: self._checkpoint_failures.labels(reason=x) for x in CHECKPOINT_FAILURE_REASONS
        }
        self._checkpoint_seconds = Histogram(
            "stream_nb_checkpoint_duration_seconds",
            "Time to write one checkpoint (successful or not).",
            buckets=_CHECKPOINT_BUCKETS,
            registry=r,
        )
        self._checkpoint_last = Gauge(
            "stream_nb_checkpoint_last_success_timestamp_seconds",
            "Unix time of the last successful checkpoint, or of the snapshot restored at "
            "start (0 before any).",
            registry=r,
        )
        self._last_success = 0.0
        self._checkpoint_interval = Gauge(
            "stream_nb_checkpoint_interval_seconds",
            "Configured seconds between checkpoints (--checkpoint-interval); 0 without "
            "checkpoints or with count-based ones only.",
            registry=r,
        )
        self._delayed_size = Gauge(
            "stream_nb_delayed_label_cache_entries",
            "Unlabelled events waiting for their delayed label.",
            registry=r,
        )
        self._delayed_evicted = Counter(
            "stream_nb_delayed_label_evictions",
            "Cached events evicted (size or age limit) before their label arrived.",
            registry=r,
        )
        self._build = Gauge(
            "stream_nb_build_info",
            "Build information; the value is always 1.",
            ["version", "learner"],
            registry=r,
        )
        self._build_lock = threading.Lock()
        self._scraped = ScrapeTimeGauges()
        r.register(self._scraped)

    # ------------------------------------------------------------------ per batch
    def record_batch(
        self,
        *,
        consumed: int,
        outcomes: Mapping[str, int],
        predictions: int,
        seconds: float,
        stage_seconds: Mapping[str, float],
        last_event_timestamp: float | None,
    ) -> None:
        """Record one processed batch (call once per batch, not per event).

        Parameters
        ----------
        consumed
            Records read from the source in this batch.
        outcomes
            Events per outcome in this batch; keys from :data:`OUTCOMES`.
        predictions
            Prediction records written in this batch.
        seconds
            Wall time of the whole batch.
        stage_seconds
            Total time of the batch spent per stage (keys from :data:`STAGES`).
            Each adds to ``stream_nb_stage_seconds_total`` and its mean per
            consumed event is observed once in
            ``stream_nb_stage_latency_seconds``.
        last_event_timestamp
            Unix timestamp of the batch's last event when known (e.g. the
            Kafka record time), else ``None`` (the gauge keeps its value).

        Raises
        ------
        ConfigError
            For an unknown outcome or stage, or a negative count or duration.
        """
        consumed = check_count(consumed, "consumed")
        check_count(predictions, "predictions")
        seconds = check_seconds(seconds, "seconds")
        for outcome, count in outcomes.items():
            check_label(outcome, OUTCOMES, "outcome")
            check_count(count, f"outcomes[{outcome!r}]")
        for stage, value in stage_seconds.items():
            check_label(stage, STAGES, "stage")
            check_seconds(value, f"stage_seconds[{stage!r}]")
        if last_event_timestamp is not None and (
            isinstance(last_event_timestamp, bool)
            or not isinstance(last_event_timestamp, (int, float))
            or not math.isfinite(last_event_timestamp)
        ):
            raise ConfigError(
                f"last_event_timestamp must be Unix seconds or None, got {last_event_timestamp!r}"
            )
        # everything validated before anything is counted: a rejected call counts nothing
        self._consumed.inc(consumed)
        for outcome, count in outcomes.items():
            if count:
                self._outcomes[outcome].inc(count)
        if predictions:
            self._predictions.inc(predictions)
        self._batches.inc()
        self._batch_seconds.observe(seconds)
        for stage, value in stage_seconds.items():
            self._stage_counters[stage].inc(value)
            if consumed:
                self._stage_hist[stage].observe(value / consumed)
        if last_event_timestamp is not None:
            self._last_event.set(last_event_timestamp)
        self._last_processed.set(time.time())

    def record_event_latency(self, seconds: float) -> None:
        """Observe the latency of one event.

        The engine samples events (for instance one per batch, or one in N),
        so the histogram shows the latency distribution without a clock read
        and an observation for every event.
        """
        self._event_latency.observe(check_seconds(seconds, "seconds"))

    def record_dead_letter(self, reason: str) -> None:
        """Count one rejected event by reason (one of :data:`DEAD_LETTER_REASONS`)."""
        check_label(reason, DEAD_LETTER_REASONS, "dead-letter reason")
        self._reasons[reason].inc()

    # ------------------------------------------------------------------ evaluation
    def record_evaluation(self, evaluator: PrequentialEvaluator) -> None:
        """Publish the evaluator's metrics (call once per batch; O(classes)).

        The correct/evaluated counters equal the evaluator's cumulative
        totals: after a restore they resume from the snapshot's totals. An
        evaluator whose totals went down (a new one) starts the counting again
        from its own totals.
        """
        n, correct = evaluator.n, evaluator.n_correct
        if n < self._seen_evaluated or correct < self._seen_correct:
            self._seen_evaluated = self._seen_correct = 0
        if n > self._seen_evaluated:
            self._evaluated.inc(n - self._seen_evaluated)
        if correct > self._seen_correct:
            self._correct.inc(correct - self._seen_correct)
        self._seen_evaluated, self._seen_correct = n, correct
        report = evaluator.report(confusion=False)
        for view, children in self._view_gauges:
            values = report[view]
            for child, key in children:
                child.set(gauge_value(values.get(key)))

    # ------------------------------------------------------------------ model, checkpoints
    def record_model_size(self, size: Mapping[str, int]) -> None:
        """Publish :meth:`stream_nb.Learner.model_size` (``classes``, ``features``,
        ``stored_counts``, ``bytes``; keys left out keep their value)."""
        for key, value in size.items():
            check_label(key, _MODEL_SIZE_KEYS, "model size key")
            self._model[key].set(check_count(value, f"size[{key!r}]"))

    def record_checkpoint(self, *, result: str, seconds: float, reason: str | None = None) -> None:
        """Count one checkpoint attempt (``result`` in :data:`CHECKPOINT_RESULTS`)
        and its duration; a success also sets the last-success timestamp, a
        failure with a ``reason`` (one of :data:`CHECKPOINT_FAILURE_REASONS`)
        counts in ``stream_nb_checkpoint_failures_total``."""
        check_label(result, CHECKPOINT_RESULTS, "checkpoint result")
        if reason is not None:
            check_label(reason, CHECKPOINT_FAILURE_REASONS, "checkpoint failure reason")
        seconds = check_seconds(seconds, "seconds")
        self._checkpoint_results[result].inc()
        if reason is not None and result == "failure":
            self._checkpoint_failure_reasons[reason].inc()
        self._checkpoint_seconds.observe(seconds)
        if result == "success":
            self._last_success = time.time()
            self._checkpoint_last.set(self._last_success)

    def record_restored_checkpoint(self, created: float) -> None:
        """The engine restored a snapshot written at ``created`` (Unix time).

        That snapshot is the last successful checkpoint until the next one, so
        the checkpoint age is right from the start of a process (instead of
        undefined until its first checkpoint). A time older than the last
        success already recorded is ignored.

        Examples
        --------
        >>> metrics = EngineMetrics()
        >>> metrics.record_restored_checkpoint(1_700_000_000.5)
        >>> metrics.registry.get_sample_value(
        ...     "stream_nb_checkpoint_last_success_timestamp_seconds")
        1700000000.5
        """
        created = check_unix_time(created, "created")
        if created > self._last_success:
            self._last_success = created
            self._checkpoint_last.set(created)

    def set_checkpoint_interval(self, seconds: float | None) -> None:
        """Publish the configured seconds between checkpoints (``None`` or 0: checkpoints
        are off, or count-based only), so an alert can scale with it."""
        self._checkpoint_interval.set(0.0 if seconds is None else check_seconds(seconds, "seconds"))

    def record_delayed_label_cache(self, *, size: int, evicted: int) -> None:
        """Publish the delayed-label cache: ``size`` is the number of entries
        now; ``evicted`` the number evicted *since the previous call* (a delta,
        like the per-batch counts of :meth:`record_batch`)."""
        self._delayed_size.set(check_count(size, "size"))
        evicted = check_count(evicted, "evicted")
        if evicted:
            self._delayed_evicted.inc(evicted)

    def watch(
        self,
        *,
        ready: Callable[[], bool] | None = None,
        progress_age: Callable[[], float] | None = None,
        backlog_bytes: Callable[[], int | None] | None = None,
    ) -> None:
        """Callbacks read at every scrape, from the HTTP server's thread (keep them cheap
        and thread-safe; an argument left out keeps its earlier callback).

        Parameters
        ----------
        ready
            ``stream_nb_ready``: 1 while it returns true, else 0 (0 if it raises).
        progress_age
            ``stream_nb_progress_age_seconds``: seconds since the processing loop
            last completed an iteration.
        backlog_bytes
            ``stream_nb_source_backlog_bytes``: bytes the source has not handed out,
            or ``None`` when it cannot tell (then there is no sample).

        Examples
        --------
        >>> metrics = EngineMetrics()
        >>> metrics.watch(ready=lambda: False, progress_age=lambda: 2.5)
        >>> value = metrics.registry.get_sample_value
        >>> value("stream_nb_ready"), value("stream_nb_progress_age_seconds")
        (0.0, 2.5)
        >>> value("stream_nb_source_backlog_bytes") is None
        True
        """
        if ready is not None:
            self._scraped.ready = ready
        if progress_age is not None:
            self._scraped.progress_age = progress_age
        if backlog_bytes is not None:
            self._scraped.backlog_bytes = backlog_bytes

    def set_build_info(self, *, version: str, learner: str) -> None:
        """Set ``stream_nb_build_info{version, learner} 1`` (replaces a previous call)."""
        for name, value in (("version", version), ("learner", learner)):
            if not isinstance(value, str) or not value or len(value) > 100:
                raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
        with self._build_lock:
            self._build.clear()
            self._build.labels(version=version, learner=learner).set(1)
