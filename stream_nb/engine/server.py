"""The HTTP endpoint of the metrics: ``/metrics``, ``/healthz`` and ``/readyz``."""

from __future__ import annotations

import http.server
import math
import socket
import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
)
from prometheus_client.exposition import choose_encoder

from stream_nb._exceptions import ConfigError
from stream_nb.engine.telemetry import EngineMetrics

__all__ = ["MetricsServer", "progress_check", "serve_metrics"]


#: Seconds before an idle or stalled client connection is dropped, so a client
#: that connects and sends nothing cannot hold a thread forever.
_IDLE_CONNECTION_SECONDS = 30.0


#: How often the server thread checks for close(); bounds close()'s wait.
_POLL_SECONDS = 0.05


# ---------------------------------------------------------------------- HTTP server
class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves /metrics, /healthz and /readyz; everything else is 404."""

    server: _Server
    protocol_version = "HTTP/1.1"
    #: Seconds an idle (keep-alive) connection may hold its thread; scrapers reconnect.
    timeout = _IDLE_CONNECTION_SECONDS

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def _respond(self, *, send_body: bool) -> None:
        path = self.path.split("?", 1)[0]
        server = self.server
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            status, body = 200, encoder(server.registry)
        elif path == "/healthz":
            content_type = "text/plain; charset=utf-8"
            alive = _call(server.live)
            status, body = (200, b"ok\n") if alive else (503, b"not alive\n")
        elif path == "/readyz":
            content_type = "text/plain; charset=utf-8"
            ready = _call(server.ready)
            status, body = (200, b"ready\n") if ready else (503, b"not ready\n")
        else:
            content_type = "text/plain; charset=utf-8"
            status, body = 404, b"not found: try /metrics, /healthz or /readyz\n"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request access log (scrapes every few seconds)."""


def _call(check: Callable[[], bool]) -> bool:
    """A health callback's answer; an exception counts as 'no'."""
    try:
        return bool(check())
    except Exception:
        return False


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    registry: CollectorRegistry
    ready: Callable[[], bool]
    live: Callable[[], bool]


class _Server6(_Server):
    address_family = socket.AF_INET6


class MetricsServer:
    """A running metrics/health HTTP server (see :func:`serve_metrics`).

    Attributes
    ----------
    host, port
        The address actually bound (``port`` is the real one when 0 was asked).
    url
        ``http://host:port``.
    """

    def __init__(self, server: _Server, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        address = server.server_address
        self.host: str = str(address[0])
        self.port: int = int(address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        """Stop serving, close the socket and join the thread (idempotent)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_metrics(
    metrics: EngineMetrics,
    host: str = "127.0.0.1",
    port: int = 9108,
    ready: Callable[[], bool] = lambda: True,
    live: Callable[[], bool] = lambda: True,
) -> MetricsServer:
    """Serve ``/metrics``, ``/healthz`` and ``/readyz`` from a background thread.

    Parameters
    ----------
    metrics
        The metrics whose registry ``/metrics`` exposes (text format 0.0.4,
        or OpenMetrics when the scraper asks for it).
    host
        Address to bind; the default 127.0.0.1 is reachable from this machine
        only (use ``0.0.0.0`` in a container).
    port
        TCP port; 0 picks a free one (read it from ``MetricsServer.port``).
    ready
        ``/readyz`` answers 200 while it returns true, else 503 (e.g. not yet
        restored or the source not connected).
    live
        ``/healthz`` answers 200 while it returns true, else 503 (the daemon
        passes "the processing loop completed an iteration within
        ``--health-deadline`` seconds", see :func:`progress_check`).

    Returns
    -------
    MetricsServer
        Call ``close()`` (or use it as a context manager) to stop it.

    Raises
    ------
    ConfigError
        If the port is out of range or cannot be bound.

    Examples
    --------
    >>> import urllib.request
    >>> with serve_metrics(EngineMetrics(), port=0) as server:
    ...     urllib.request.urlopen(server.url + "/healthz").status
    200
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"metrics port must be an integer in 0..65535, got {port!r}")
    server_class = _Server6 if ":" in host else _Server
    try:
        server = server_class((host, port), _Handler)
    except OSError as exc:
        raise ConfigError(
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}; "
            "choose another --metrics-address, or port 0 to pick a free one"
        ) from exc
    server.registry = metrics.registry
    server.ready = ready
    server.live = live
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": _POLL_SECONDS},
        name=f"stream-nb-metrics:{server.server_address[1]}",
        daemon=True,
    )
    thread.start()
    return MetricsServer(server, thread)


def progress_check(age: Callable[[], float], deadline: float) -> Callable[[], bool]:
    """A ``live`` check for :func:`serve_metrics`: true while ``age()`` (seconds since
    the processing loop last completed an iteration) is at most ``deadline``.

    Examples
    --------
    >>> progress_check(lambda: 3.0, 60.0)(), progress_check(lambda: 61.0, 60.0)()
    (True, False)
    """
    if not deadline > 0 or not math.isfinite(deadline):
        raise ConfigError(f"health deadline must be positive seconds, got {deadline!r}")
    return lambda: age() <= deadline
