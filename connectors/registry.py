"""Connector URLs → sources and sinks (the Kafka connector registers itself here).

=====================================  ============================  =========================
URL                                    as a source                   as a sink
=====================================  ============================  =========================
``-``                                  standard input                standard output
``stdout``/``stderr``                  —                             standard output / error
``file:PATH``, PATH                    :class:`FileSource`           :class:`FileSink` (appends)
``demo:NAME?seed=S&n=N&shape=flat``    :class:`DemoSource` (seeded   —
                                       :mod:`stream_nb.datasets`)
``kafka://…``                          ``KafkaSource``               ``KafkaSink``,
                                                                     ``KafkaDeadLetterSink``
=====================================  ============================  =========================

The file, standard-stream and demo schemes are registered here; ``kafka`` is
registered by :mod:`stream_nb.connectors.kafka` when a ``kafka://`` URL is first
opened, and needs the ``kafka`` extra (``pip install '.[kafka]'`` in a clone).
:func:`open_source` and :func:`open_sink` open a URL; :func:`register` adds a scheme.
A factory is called as ``factory(url, options)`` where ``options`` is a dict of
settings from the CLI; a factory ignores keys it does not know:

* ``role``: ``"source"``, ``"sink"`` or ``"dead_letters"`` (set by :func:`open_source`
  and :func:`open_sink`);
* ``max_line_bytes``, ``follow``: line sources (``--max-line-bytes``, ``--follow``);
* ``fsync``: file sinks fsync on flush (true with ``--checkpoint-dir``);
* ``limit``, ``label_field``, ``features_field``: the demo stream's length and field
  names;
* ``metrics``: the :class:`~stream_nb.engine.telemetry.EngineMetrics` or ``None``
  (the Kafka connector adds its metrics to its registry);
* ``reset_state``: true when ``--reset-state`` accepts starting a new model: a
  connector that can tell that earlier progress exists without a snapshot, e.g.
  consumer-group offsets, refuses to start without it.

Examples
--------
>>> scheme_of("demo:agrawal?seed=1"), type(open_source("demo:agrawal?n=3")).__name__
('demo', 'DemoSource')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from stream_nb._exceptions import ConfigError
from stream_nb.connectors.base import Sink, Source

__all__ = ["open_sink", "open_source", "register", "scheme_of"]

SourceFactory = Callable[[str, Mapping[str, Any]], Source]
SinkFactory = Callable[[str, Mapping[str, Any]], Sink]

#: A source or a sink factory.
Factory = TypeVar("Factory", SourceFactory, SinkFactory)

_SOURCES: dict[str, SourceFactory] = {}
_SINKS: dict[str, SinkFactory] = {}
#: Schemes whose connector module registers itself on import, and the extra it needs.
_LAZY: dict[str, tuple[str, str]] = {"kafka": ("stream_nb.connectors.kafka", "kafka")}


def register(
    scheme: str,
    *,
    source: SourceFactory | None = None,
    sink: SinkFactory | None = None,
) -> None:
    """Register factories for URLs ``scheme://…`` (or ``scheme:…``).

    Examples
    --------
    >>> from stream_nb.connectors.memory import ListSource
    >>> register("demo-list", source=lambda url, options: ListSource([b"{}"]))
    >>> type(open_source("demo-list:anything")).__name__
    'ListSource'
    """
    if not scheme or any(c in scheme for c in ":/ "):
        raise ConfigError(
            f"connector scheme must be a word without ':', '/' or spaces, got {scheme!r}"
        )
    if source is None and sink is None:
        raise ConfigError(f"register({scheme!r}) needs a source and/or a sink factory")
    if source is not None:
        _SOURCES[scheme] = source
    if sink is not None:
        _SINKS[scheme] = sink


def scheme_of(url: str) -> str:
    """``"kafka"`` for ``kafka://…``, ``"file"`` for ``file:…`` or a plain path, ``"-"`` for ``-``.

    Examples
    --------
    >>> scheme_of("kafka://localhost:9092/events"), scheme_of("data/x.jsonl"), scheme_of("-")
    ('kafka', 'file', '-')
    """
    if url in ("-", "stdout", "stderr"):
        return url
    head, sep, _ = url.partition(":")
    if sep and len(head) > 1 and head.replace("-", "").replace("+", "").isalnum():
        return head.lower()
    return "file"


def _file_path(url: str) -> str:
    path = url[len("file:") :] if url.startswith("file:") else url
    if path.startswith("//"):
        path = path[2:]
    if not path:
        raise ConfigError(f"no file path in connector URL {url!r}; use file:PATH or a plain path")
    return path


def _lookup(table: Mapping[str, Factory], url: str, role: str) -> Factory:
    scheme = scheme_of(url)
    if scheme not in table and scheme in _LAZY:
        module, extra = _LAZY[scheme]
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(
                f"{url!r} needs the {module} connector: pip install '.[{extra}]' in a clone of "
                f"stream-nb ({exc})"
            ) from exc
    factory = table.get(scheme)
    if factory is None:
        known = ", ".join(sorted(set(table) | set(_LAZY)))
        raise ConfigError(f"no {role} connector for {url!r} (scheme {scheme!r}); known: {known}")
    return factory


def open_source(url: str, options: Mapping[str, Any] | None = None) -> Source:
    """Open the source named by ``url``."""
    return _lookup(_SOURCES, url, "source")(url, dict(options or {}, role="source"))


def open_sink(url: str, options: Mapping[str, Any] | None = None, *, role: str = "sink") -> Sink:
    """Open the sink named by ``url`` (``role="dead_letters"`` for a dead-letter sink)."""
    return _lookup(_SINKS, url, "sink")(url, dict(options or {}, role=role))


def _file_source(url: str, options: Mapping[str, Any]) -> Source:
    from stream_nb.connectors.files import FileSource

    return FileSource(
        _file_path(url),
        follow=bool(options.get("follow", False)),
        max_line_bytes=int(options.get("max_line_bytes", 1 << 20)),
    )


def _stdin_source(url: str, options: Mapping[str, Any]) -> Source:
    from stream_nb.connectors.files import StdinSource

    if options.get("follow"):
        raise ConfigError("follow mode needs a file source, not stdin ('-')")
    return StdinSource(max_line_bytes=int(options.get("max_line_bytes", 1 << 20)))


def _file_sink(url: str, options: Mapping[str, Any]) -> Sink:
    from stream_nb.connectors.files import FileSink

    return FileSink(_file_path(url), fsync=bool(options.get("fsync", True)))


def _stream_sink(url: str, options: Mapping[str, Any]) -> Sink:
    from stream_nb.connectors.files import StreamSink

    return StreamSink("stderr" if url == "stderr" else "stdout")


register("file", source=_file_source, sink=_file_sink)
register("-", source=_stdin_source, sink=_stream_sink)
register("stdout", sink=_stream_sink)
register("stderr", sink=_stream_sink)


def _demo_source(url: str, options: Mapping[str, Any]) -> Source:
    """``demo:NAME?seed=S&n=N&shape=flat`` — a seeded stream of :mod:`stream_nb.datasets`."""
    from urllib.parse import parse_qs

    from stream_nb.connectors.memory import DemoSource

    rest = url.split(":", 1)[1].lstrip("/")
    name, _, query = rest.partition("?")
    fields = {k: v[-1] for k, v in parse_qs(query).items()}
    try:
        seed = int(fields.pop("seed", "42"))
        n = int(fields.pop("n", str(options.get("limit") or _DEMO_EVENTS)))
    except ValueError as exc:
        raise ConfigError(f"seed and n of {url!r} must be integers: {exc}") from exc
    shape = fields.pop("shape", "flat")
    if fields:
        raise ConfigError(f"unknown demo option(s) {sorted(fields)} in {url!r}; use seed, n, shape")
    return DemoSource(
        name,
        seed=seed,
        n=n,
        shape=shape,
        label_field=str(options.get("label_field", "y")),
        features_field=str(options.get("features_field", "x")),
    )


#: Events of a demo stream when neither ``n`` nor a limit is given.
_DEMO_EVENTS = 1_000_000

register("demo", source=_demo_source)
