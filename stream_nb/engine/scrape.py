"""The gauges read when Prometheus scrapes: readiness, loop progress age, source backlog.

:class:`ScrapeTimeGauges` is a prometheus-client collector that
:class:`~stream_nb.engine.telemetry.EngineMetrics` registers on its registry.
Each gauge reads a callback set by
:meth:`EngineMetrics.watch <stream_nb.engine.telemetry.EngineMetrics.watch>`
from the HTTP server's thread, so the values are right even while the
processing loop is stuck.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily

__all__ = ["ScrapeTimeGauges"]


class ScrapeTimeGauges:
    """The gauges read at every scrape (a prometheus-client collector).

    Each reads a callback set by :meth:`EngineMetrics.watch`; a gauge without a
    callback, or whose callback answers ``None``, has no sample. A callback that
    raises never fails the scrape: readiness then reads 0 (as ``/readyz``
    answers 503), the other gauges have no sample.

    Examples
    --------
    >>> from prometheus_client import CollectorRegistry
    >>> registry = CollectorRegistry()
    >>> gauges = ScrapeTimeGauges()
    >>> registry.register(gauges)
    >>> gauges.ready = lambda: True
    >>> registry.get_sample_value("stream_nb_ready")
    1.0
    >>> registry.get_sample_value("stream_nb_progress_age_seconds") is None
    True
    """

    _READY = ("stream_nb_ready", "1 while the source can deliver (what /readyz answers), else 0.")
    _AGE = (
        "stream_nb_progress_age_seconds",
        "Seconds since the processing loop last completed an iteration (idle polls included); "
        "/healthz fails above --health-deadline.",
    )
    _BACKLOG = (
        "stream_nb_source_backlog_bytes",
        "Bytes of the input file after the records the source handed out (file sources "
        "only; a last line without its newline that was read already is not counted).",
    )

    def __init__(self) -> None:
        self.ready: Callable[[], bool] | None = None
        self.progress_age: Callable[[], float] | None = None
        self.backlog_bytes: Callable[[], int | None] | None = None

    def describe(self) -> Iterator[GaugeMetricFamily]:
        for name, documentation in (self._READY, self._AGE, self._BACKLOG):
            yield GaugeMetricFamily(name, documentation)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        values = (self._ready(), self._read(self.progress_age), self._read(self.backlog_bytes))
        for (name, documentation), value in zip(  # noqa: B905 (same length)
            (self._READY, self._AGE, self._BACKLOG), values
        ):
            family = GaugeMetricFamily(name, documentation)
            if value is not None:
                family.add_metric([], value)
            yield family

    def _ready(self) -> float | None:
        if self.ready is None:
            return None
        try:
            return 1.0 if self.ready() else 0.0
        except Exception:  # as /readyz: a failing check counts as "not ready"
            return 0.0

    @staticmethod
    def _read(callback: Callable[[], float | int | None] | None) -> float | None:
        if callback is None:
            return None
        try:
            value = callback()
        except Exception:  # a scrape never fails because of one gauge
            return None
        return None if value is None else float(value)
