"""The ``stream-nb`` command: run the daemon, evaluate models, inspect and merge snapshots.

Subcommands
-----------
``run``      read events, predict, emit, learn; dead letters, checkpoints, metrics
``eval``     prequential run of one or several models over a file: report, curve CSV, plot
``inspect``  describe a snapshot (classes, counts, features, size, informative features)
``merge``    merge the models of several snapshots into one snapshot
``demo``     print a seeded demo stream as JSON lines

Every flag can also be set with an environment variable ``STREAM_NB_<FLAG>``
(``--checkpoint-dir`` → ``STREAM_NB_CHECKPOINT_DIR``); a flag on the command
line wins. ``--help`` shows both and the defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

import stream_nb
from stream_nb._exceptions import (
    CheckpointError,
    ConfigError,
    InvalidEventError,
    ModelStateError,
    StreamNBError,
)
from stream_nb.base import Learner
from stream_nb.connectors.registry import open_sink, open_source
from stream_nb.engine import (
    Checkpointer,
    DelayedLabelCache,
    Engine,
    ErrorPolicy,
    EventDecoder,
    tune_gc,
    tune_malloc,
)
from stream_nb.engine._json import dumps_exact
from stream_nb.engine.checkpoint import encode_snapshot, read_snapshot
from stream_nb.engine.engine import ENGINE_STATE_FORMAT

__all__ = ["DAEMON_BOUNDS", "build_parser", "daemon_params", "main"]

_log = logging.getLogger("stream_nb.cli")

DEFAULT_MODEL = "NaiveBayes"
_ENV_PREFIX = "STREAM_NB_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


# ---------------------------------------------------------------------- flags + env
class _EnvError(Exception):
    pass


def _env_name(flag: str) -> str:
    return _ENV_PREFIX + flag.lstrip("-").upper().replace("-", "_")


def _flag(
    parser: argparse._ActionsContainer,
    flag: str,
    *,
    type: Callable[[str], Any] = str,
    default: Any = None,
    help: str,
    choices: Sequence[str] | None = None,
    metavar: str | None = None,
    switch: bool = False,
    repeat: bool = False,
    short: str | None = None,
) -> None:
    """Add ``flag`` with its ``STREAM_NB_*`` variable; the variable overrides ``default``."""
    env = _env_name(flag)
    raw = os.environ.get(env)
    names = [short, flag] if short else [flag]
    if switch:
        value = default
        if raw is not None:
            lowered = raw.strip().lower()
            if lowered not in _TRUE | _FALSE:
                raise _EnvError(
                    f"{env}={raw!r} (for {flag}) must be one of 1/0, true/false, yes/no"
                )
            value = lowered in _TRUE
        parser.add_argument(
            *names,
            action="store_true",
            default=value,
            help=f"{help} [env {env}=1; default: off]",
        )
        return
    value = default
    if raw is not None:
        try:
            value = [type(v) for v in raw.split()] if repeat else type(raw)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise _EnvError(f"{env}={raw!r} (for {flag}): {exc}") from exc
        if choices is not None and (value not in choices):
            raise _EnvError(f"{env}={raw!r} (for {flag}) must be one of {', '.join(choices)}")
    shown = "none" if default is None else default
    parser.add_argument(
        *names,
        type=type,
        default=value,
        choices=choices,
        metavar=metavar,
        action="append" if repeat else "store",
        help=f"{help} [env {env}; default: {shown}]",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _json_value(text: str) -> Any:
    """JSON, or ``@FILE`` to read the JSON from a file."""
    data: str | bytes = text
    if text.startswith("@"):
        try:
            data = Path(text[1:]).read_bytes()
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {text[1:]!r}: {exc}") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text[:80]!r}") from None


def _key_value(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, orjson.loads(value)
    except orjson.JSONDecodeError:
        return key, value  # a bare string


# ---------------------------------------------------------------------- parser
def _add_event_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("events")
    _flag(
        g,
        "--shape",
        default="auto",
        choices=("auto", "nested", "flat"),
        help="event shape: nested {x: {...}, y} or flat (label removed, other keys are "
        "features); auto picks nested when the features field holds an object",
    )
    _flag(g, "--features-field", default="x", help="features field of nested events")
    _flag(g, "--label-field", default="y", help="label field")
    _flag(g, "--id-field", default="id", help="event id field ('' to disable ids)")
    _flag(g, "--weight-field", default="w", help="sample weight field ('' to disable weights)")
    _flag(
        g,
        "--max-line-bytes",
        type=_positive_int,
        default=1 << 20,
        help="longest accepted event in bytes; longer ones are dead letters (too_large)",
    )


def _add_model_flags(p: argparse.ArgumentParser, *, multi: bool = False) -> None:
    g = p.add_argument_group("model")
    if multi:
        _flag(
            g,
            "--model",
            repeat=True,
            metavar="NAME[:JSON]",
            help="learner to evaluate (NaiveBayes when none is given), repeatable, optionally "
            "with parameters as JSON "
            "(e.g. 'CategoricalNB:{\"alpha\": 0.5}'); the env variable takes a "
            "space-separated list",
        )
    else:
        _flag(
            g,
            "--model",
            default=DEFAULT_MODEL,
            metavar="NAME",
            help="learner class (see 'stream-nb run --help' epilog for the list)",
        )
        _flag(
            g,
            "--params",
            type=_json_value,
            metavar="JSON",
            help="learner parameters as a JSON object (or @file.json)",
        )
        _flag(
            g,
            "--param",
            type=_key_value,
            repeat=True,
            metavar="KEY=VALUE",
            help="one learner parameter, repeatable; VALUE is JSON or a bare string; the "
            "env variable takes a space-separated list",
        )
    _flag(
        g,
        "--loss-matrix",
        type=_json_value,
        metavar="JSON",
        help="cost-sensitive decisions: {predicted: {true: cost}} or [[predicted, true, "
        "cost], ...] (keeps non-string labels), or @file.json",
    )
    _flag(g, "--window", type=_positive_int, default=1000, help="prequential window (events)")
    _flag(g, "--fading-factor", type=float, default=0.999, help="prequential fading factor")


# ---------------------------------------------------------------------- memory bounds
#: The daemon's bound on each learner parameter that takes one, applied when the
#: learner's own default is unbounded and neither --params nor --param sets it.
#: (A learner that takes ``max_vocabulary`` gets no default ``max_features``: its
#: vocabulary is its features, bounded with an overflow token instead.)
DAEMON_BOUNDS: dict[str, int] = {
    "max_classes": 10_000,
    "max_features": 10_000,
    "max_values_per_feature": 10_000,
    "max_vocabulary": 100_000,
}


def _add_bound_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "memory bounds",
        "Upper bounds on the learner parameters of the same names, for learners that take "
        "them, unless --params/--param sets the parameter; 0 lifts the bound. A learner's "
        "own tighter default is kept (the semi-naive max_values_per_feature=100).",
    )
    for name, value in DAEMON_BOUNDS.items():
        _flag(
            g,
            "--" + name.replace("_", "-"),
            type=_nonneg_int,
            default=value,
            metavar="N",
            help=f"bound on the learner's {name}",
        )


def daemon_params(
    cls: type[Learner],
    params: Mapping[str, Any] | None = None,
    bounds: Mapping[str, int | None] | None = None,
) -> dict[str, Any]:
    """``params`` completed with the daemon's memory bounds, as ``stream-nb run`` builds a learner.

    Each bound of ``bounds`` (default :data:`DAEMON_BOUNDS`; ``None``:
    unbounded) is set for the parameters ``cls`` takes and ``params`` leaves
    out, unless the learner's own default is tighter.

    Examples
    --------
    >>> from stream_nb import CategoricalNB, SPODE
    >>> daemon_params(CategoricalNB, {"alpha": 0.5})["max_values_per_feature"]
    10000
    >>> "max_values_per_feature" in daemon_params(SPODE)  # its own default, 100, is tighter
    False
    >>> from stream_nb import MultinomialNB
    >>> sorted(daemon_params(MultinomialNB))  # the vocabulary bounds its features
    ['max_classes', 'max_vocabulary']
    """
    import inspect

    out = dict(params or {})
    accepted = inspect.signature(cls).parameters
    for name, bound in (DAEMON_BOUNDS if bounds is None else bounds).items():
        if name not in accepted or name in out:
            continue
        if name == "max_features" and "max_vocabulary" in accepted:
            continue  # the vocabulary bound applies (overflow token)
        own = accepted[name].default
        if own is None or (bound is not None and bound < own):
            out[name] = bound
    return out


def _add_log_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("logging")
    _flag(
        g,
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="log level",
    )
    _flag(
        g,
        "--log-format",
        default="text",
        choices=("text", "json"),
        help="log line format (json: one object per line)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``stream-nb`` argument parser (environment variables read now)."""
    _Formatter = argparse.RawDescriptionHelpFormatter
    learners = ", ".join(sorted(Learner._registry)) or "none"
    parser = argparse.ArgumentParser(
        prog="stream-nb",
        description="Online Naive Bayes over event streams: a crash-safe prequential daemon.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"stream-nb {stream_nb.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # ---- run
    run = sub.add_parser(
        "run",
        help="run the daemon: read events, predict, emit, learn",
        description="Predict then learn every event (prequential), emit one JSON prediction "
        "record per event, send bad input to a dead-letter sink, checkpoint, export metrics. "
        "URLs: '-' (stdin/stdout), 'stderr', 'file:PATH' or PATH, 'demo:NAME?seed=S&n=N', "
        "'kafka://HOST:PORT/TOPIC' (stream-nb[kafka]).",
        epilog=f"learners: {learners}",
        formatter_class=_Formatter,
    )
    g = run.add_argument_group("input and output")
    _flag(g, "--source", default="-", metavar="URL", help="where events come from")
    _flag(g, "--sink", default="-", metavar="URL", help="where prediction records go")
    _flag(
        g,
        "--demo",
        metavar="NAME",
        help="read a seeded demo stream instead of --source (agrawal, zipf_text, "
        "categorical, mixed)",
    )
    _flag(g, "--seed", type=int, default=42, help="seed of the --demo stream")
    _flag(
        g,
        "--limit",
        type=_positive_int,
        metavar="N",
        help="stop after N events (the length of a --demo stream)",
    )
    _flag(g, "--follow", switch=True, help="keep reading a growing --source file (like tail -f)")
    _flag(
        g,
        "--dead-letters",
        metavar="URL",
        help="where rejected events go, with reason and position (default stderr; "
        "only with --error-policy dead_letter)",
    )
    _flag(
        g,
        "--error-policy",
        default="dead_letter",
        choices=[p.value for p in ErrorPolicy],
        help="what to do with a bad event",
    )
    _flag(
        g,
        "--batch-size",
        type=_positive_int,
        default=1024,
        help="most records per batch (fewer when fewer are waiting)",
    )
    _add_event_flags(run)
    _add_model_flags(run)
    _add_bound_flags(run)
    g = run.add_argument_group("predictions")
    _flag(
        g,
        "--top-k",
        type=_positive_int,
        metavar="K",
        help="emit the log-probabilities of the K most probable classes only",
    )
    _flag(
        g,
        "--explain",
        switch=True,
        help="add each feature's log-likelihood ratio, predicted class vs runner-up",
    )
    _flag(
        g,
        "--delayed-labels",
        switch=True,
        help="cache unlabelled events by id until a label-only event {id, y} arrives",
    )
    _flag(
        g,
        "--delayed-max-size",
        type=_positive_int,
        metavar="N",
        help="most cached events (default 100000; needs --delayed-labels)",
    )
    _flag(
        g,
        "--delayed-max-age",
        type=_positive_float,
        metavar="SECONDS",
        help="evict cached events older than this (default 3600; needs --delayed-labels)",
    )
    _flag(
        g,
        "--initial-model",
        metavar="SNAPSHOT",
        help="start from this snapshot's model (e.g. from 'stream-nb merge') when "
        "--checkpoint-dir holds none",
    )
    g = run.add_argument_group("checkpoints, metrics, reports")
    _flag(
        g,
        "--checkpoint-dir",
        metavar="DIR",
        help="snapshot directory (restored on start; one daemon per directory, locked)",
    )
    _flag(
        g,
        "--reset-state",
        switch=True,
        help="accept starting a new model when --checkpoint-dir holds snapshots but none is "
        "valid, or holds none while the output files already have records: invalid "
        "snapshots are moved aside (*.rejected), the output and dead-letter files are "
        "truncated, the input is read from its start (a valid snapshot is always restored); "
        "on Kafka, a new model at the group's committed offsets",
    )
    _flag(
        g,
        "--checkpoint-every",
        type=_positive_int,
        metavar="N",
        help="checkpoint every N events (needs --checkpoint-dir)",
    )
    _flag(
        g,
        "--checkpoint-interval",
        type=_positive_float,
        metavar="SECONDS",
        help="checkpoint every SECONDS (needs --checkpoint-dir; default 60 with it)",
    )
    _flag(
        g,
        "--metrics-address",
        metavar="[HOST:]PORT",
        help=(
            "serve /metrics, /healthz, /readyz there; a bare PORT binds 127.0.0.1, "
            "0.0.0.0:PORT all interfaces (port 0 picks a free one)"
        ),
    )
    _flag(
        g,
        "--health-deadline",
        type=_positive_float,
        default=60.0,
        metavar="SECONDS",
        help="/healthz fails (503) when the processing loop has not completed an iteration "
        "(idle polls included) for this long",
    )
    _flag(
        g,
        "--report-interval",
        type=_positive_float,
        metavar="SECONDS",
        help="log the prequential report every SECONDS",
    )
    _flag(
        g,
        "--report",
        metavar="PATH",
        help="write the final report (JSON) here ('-': stdout) instead of to stderr "
        "(to stdout when the predictions go to a file or stderr)",
    )
    _add_log_flags(run)

    run.set_defaults(subparser=run)
    # ---- eval
    ev = sub.add_parser(
        "eval",
        help="prequential evaluation of one or several models over a file",
        description="Run each --model prequentially over the events of FILE (predict then "
        "learn); print the final report as JSON, write a learning curve as CSV and a plot.",
        epilog=f"learners: {learners}",
        formatter_class=_Formatter,
    )
    _flag(ev, "--input", short="-i", metavar="FILE", help="JSON-lines events ('-' for stdin)")
    _flag(ev, "--curve", metavar="CSV", help="learning-curve CSV to write")
    _flag(ev, "--plot", metavar="PNG", help="learning-curve plot to write (needs stream-nb[plot])")
    _flag(
        ev, "--every", type=_positive_int, default=1000, help="curve point every N labelled events"
    )
    _flag(ev, "--limit", type=_positive_int, metavar="N", help="stop after N events")
    _add_event_flags(ev)
    _add_model_flags(ev, multi=True)
    _add_log_flags(ev)

    ev.set_defaults(subparser=ev)
    # ---- inspect
    ins = sub.add_parser(
        "inspect",
        help="describe a snapshot",
        description="Print a snapshot (file, or newest valid one of a directory) as JSON: "
        "learner, classes and counts, features, size, most informative features (one "
        "score per learner family, see stream_nb.informative), the dependence structure "
        "of TAN/KDB/SPODE, positions.",
        formatter_class=_Formatter,
    )
    _flag(ins, "--snapshot", metavar="PATH", help="snapshot file or checkpoint directory")
    _flag(
        ins,
        "--top",
        type=_nonneg_int,
        default=10,
        metavar="N",
        help="most informative features to list (0: none)",
    )
    _add_log_flags(ins)

    ins.set_defaults(subparser=ins)
    # ---- merge
    mg = sub.add_parser(
        "merge",
        help="merge the models of several snapshots into one",
        description="Add the statistics of every snapshot's model (same learner and "
        "parameters) into one, written as a snapshot usable with 'run --initial-model'.",
        formatter_class=_Formatter,
    )
    mg.add_argument(
        "snapshots", nargs="+", metavar="SNAPSHOT", help="snapshot files or directories"
    )
    _flag(mg, "--output", short="-o", metavar="PATH", help="snapshot to write")
    _add_log_flags(mg)

    mg.set_defaults(subparser=mg)
    # ---- demo
    de = sub.add_parser(
        "demo",
        help="print a seeded demo stream as JSON lines",
        description="Print a seeded synthetic stream of stream_nb.datasets as JSON lines.",
        formatter_class=_Formatter,
    )
    _flag(
        de,
        "--stream",
        default="agrawal",
        metavar="NAME",
        help="agrawal, zipf_text, categorical or mixed",
    )
    _flag(de, "--seed", type=int, default=42, help="seed")
    _flag(de, "--n", short="-n", type=_nonneg_int, default=1000, help="number of events")
    _flag(de, "--shape", default="flat", choices=("flat", "nested"), help="event shape")
    _flag(de, "--label-field", default="y", help="label field")
    _flag(de, "--features-field", default="x", help="features field of nested events")
    _flag(
        de,
        "--delay-labels",
        type=_nonneg_int,
        default=0,
        metavar="D",
        help="emit events with an id and no label, and each label {id, y} D events later",
    )
    de.set_defaults(subparser=de)
    return parser


# ---------------------------------------------------------------------- helpers
class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": record.created,
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        extra = getattr(record, "data", None)
        if extra is not None:
            out["data"] = extra
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


def _setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("stream_nb")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def _learner_class(
    parser: argparse.ArgumentParser, name: str, flag: str = "--model"
) -> type[Learner]:
    cls = Learner._registry.get(name)
    if cls is None:
        _import_learner_modules()
        cls = Learner._registry.get(name)
    if cls is None:
        known = ", ".join(sorted(Learner._registry)) or "none"
        parser.error(f"{flag}: unknown learner {name!r}; choose one of {known}")
    return cls


def _import_learner_modules() -> None:
    """Import every public submodule of stream_nb, so learners not exported yet register."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(stream_nb.__path__):
        if not info.name.startswith("_") and info.name not in ("cli", "engine"):
            with contextlib.suppress(Exception):
                importlib.import_module(f"stream_nb.{info.name}")


def _make_learner(parser: argparse.ArgumentParser, name: str, params: dict[str, Any]) -> Learner:
    cls = _learner_class(parser, name)
    try:
        return cls(**params)
    except TypeError as exc:
        parser.error(f"--params: invalid parameters for {name}: {exc}")
    except ConfigError as exc:
        parser.error(f"--params: {exc}")
    raise AssertionError("unreachable")


def _loss_matrix(
    parser: argparse.ArgumentParser, value: Any
) -> dict[Hashable, dict[Hashable, float]] | None:
    if value is None:
        return None
    if isinstance(value, dict) and all(isinstance(r, dict) for r in value.values()):
        return value
    if isinstance(value, list) and all(isinstance(t, list) and len(t) == 3 for t in value):
        out: dict[Hashable, dict[Hashable, float]] = {}
        for predicted, true, cost in value:
            if isinstance(predicted, (list, dict)) or isinstance(true, (list, dict)):
                parser.error("--loss-matrix: labels must be JSON scalars")
            out.setdefault(predicted, {})[true] = cost
        return out
    parser.error(
        "--loss-matrix must be {predicted: {true: cost}} or [[predicted, true, cost], ...], "
        f"got {str(value)[:80]!r}"
    )
    raise AssertionError("unreachable")


def _decoder(args: argparse.Namespace, learners: Sequence[Learner]) -> EventDecoder:
    return EventDecoder(
        shape=args.shape,
        features_field=args.features_field,
        label_field=args.label_field,
        id_field=args.id_field or None,
        weight_field=args.weight_field or None,
        max_bytes=args.max_line_bytes,
        nonnegative=any(type(m).capabilities.nonnegative_counts for m in learners),
    )


def parse_metrics_address(text: str) -> tuple[str, int]:
    """Parse ``--metrics-address``: ``HOST:PORT``, ``:PORT`` or a bare ``PORT``.

    Without a host the endpoint binds the loopback interface; all interfaces need an
    explicit ``0.0.0.0:PORT``.

    Examples
    --------
    >>> parse_metrics_address("9108")
    ('127.0.0.1', 9108)
    >>> parse_metrics_address("0.0.0.0:9108")
    ('0.0.0.0', 9108)
    >>> parse_metrics_address("[::1]:9108")
    ('::1', 9108)
    """
    host, _, port = text.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(
            f"--metrics-address must be [HOST:]PORT (e.g. 127.0.0.1:9108 or 9108), got {text!r}"
        )
    return (host.strip("[]") or "127.0.0.1"), int(port)


def _parse_address(parser: argparse.ArgumentParser, text: str) -> tuple[str, int]:
    try:
        return parse_metrics_address(text)
    except ValueError as exc:
        parser.error(str(exc))


def _emit_report(report: Any, target: str | None, default_stream: Any) -> None:
    data = dumps_exact(report, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_INDENT_2)
    if target is None:
        stream = default_stream
    elif target == "-":
        stream = sys.stdout
    else:
        Path(target).write_bytes(data + b"\n")
        return
    stream.flush()
    stream.buffer.write(data + b"\n")
    stream.flush()


class _Progress:
    """A one-line progress display on stderr (only when stderr is a terminal)."""

    def __init__(self) -> None:
        self._last = 0.0
        self._start = time.monotonic()
        self._shown = False

    def __call__(self, engine: Engine) -> None:
        now = time.monotonic()
        if now - self._last < 1.0:
            return
        self._last = now
        rate = engine.consumed / max(now - self._start, 1e-9)
        accuracy = ""
        ev = engine.evaluator
        if ev is not None and ev.n:
            accuracy = f"  accuracy {ev.n_correct / ev.n:.4f}"
        rejected = sum(engine.rejected.values())
        sys.stderr.write(
            f"\r{engine.consumed:,} events  {rate:,.0f}/s{accuracy}  rejected {rejected:,}   "
        )
        sys.stderr.flush()
        self._shown = True

    def finish(self) -> None:
        if self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


# ---------------------------------------------------------------------- commands
def _cmd_run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from stream_nb.evaluation import PrequentialEvaluator

    tune_malloc()  # before the model and the first batch: their memory is then reused
    # cross-flag checks, each naming the exact flag
    if args.demo is not None and args.source != "-":
        parser.error("--demo and --source are mutually exclusive: --demo generates the events")
    if args.follow and args.demo is not None:
        parser.error("--follow needs a file --source, not --demo")
    if args.follow and args.source == "-":
        parser.error("--follow needs a file --source, not stdin ('-')")
    for flag in ("checkpoint_every", "checkpoint_interval"):
        if getattr(args, flag) is not None and args.checkpoint_dir is None:
            parser.error(f"--{flag.replace('_', '-')} needs --checkpoint-dir")
    for flag in ("delayed_max_size", "delayed_max_age"):
        if getattr(args, flag) is not None and not args.delayed_labels:
            parser.error(f"--{flag.replace('_', '-')} needs --delayed-labels")
    if args.delayed_labels and not args.id_field:
        parser.error("--delayed-labels needs an --id-field to match labels to events")
    if args.error_policy != "dead_letter" and args.dead_letters is not None:
        parser.error(f"--dead-letters has no effect with --error-policy {args.error_policy}")
    dead_letters_url = "stderr" if args.dead_letters is None else args.dead_letters
    if args.fading_factor is not None and not 0 < args.fading_factor <= 1:
        parser.error(f"--fading-factor must be in (0, 1], got {args.fading_factor}")
    params: dict[str, Any] = {}
    if args.params is not None:
        if not isinstance(args.params, dict):
            parser.error(f"--params must be a JSON object, got {args.params!r}")
        params.update(args.params)
    for key, value in args.param or []:
        params[key] = value
    loss_matrix = _loss_matrix(parser, args.loss_matrix)
    address = None if args.metrics_address is None else _parse_address(parser, args.metrics_address)

    if args.reset_state and args.checkpoint_dir is None:
        parser.error("--reset-state needs --checkpoint-dir")
    _setup_logging(args.log_level, args.log_format)
    bounds = {name: getattr(args, name) or None for name in DAEMON_BOUNDS}
    params = daemon_params(_learner_class(parser, args.model), params, bounds)
    learner = _make_learner(parser, args.model, params)
    decoder = _decoder(args, [learner])
    checkpointer = None
    if args.checkpoint_dir is not None:
        # One daemon per directory, checked before any connector is opened (a second
        # instance must not join the first's consumer group or touch its files).
        checkpointer = Checkpointer(args.checkpoint_dir)
        checkpointer.lock()

    metrics = None
    if address is not None:
        from stream_nb.engine.telemetry import EngineMetrics

        metrics = EngineMetrics()
        metrics.set_build_info(version=stream_nb.__version__, learner=args.model)
    options: dict[str, Any] = {
        "max_line_bytes": args.max_line_bytes,
        "follow": args.follow,
        "metrics": metrics,
        "limit": args.limit,
        "label_field": args.label_field,
        "features_field": args.features_field,
        # File outputs are fsynced at every checkpoint, where a snapshot must not
        # refer to output a crash could lose; without checkpoints a restart starts
        # over anyway, so they are written (to the OS) but not fsynced.
        "fsync": args.checkpoint_dir is not None,
        "reset_state": args.reset_state,
    }
    source_url = args.source
    if args.demo is not None:
        source_url = f"demo:{args.demo}?seed={args.seed}"
    try:
        evaluator = PrequentialEvaluator(
            window=args.window, fading_factor=args.fading_factor, loss_matrix=loss_matrix
        )
    except ConfigError as exc:
        parser.error(f"--loss-matrix: {exc}")
    try:
        source = open_source(source_url, options)
        sink = open_sink(args.sink, options)
        dead_letters = (
            open_sink(dead_letters_url, options, role="dead_letters")
            if args.error_policy == "dead_letter"
            else None
        )
    except ConfigError as exc:
        parser.error(str(exc))
    checkpoint_interval = args.checkpoint_interval
    if checkpointer is not None and args.checkpoint_every is None and checkpoint_interval is None:
        checkpoint_interval = 60.0
    delayed = None
    if args.delayed_labels:
        delayed = DelayedLabelCache(
            max_size=args.delayed_max_size or 100_000,
            max_age=args.delayed_max_age or 3600.0,
        )
    engine = Engine(
        learner,
        source,
        sink,
        dead_letters=dead_letters,
        decoder=decoder,
        checkpointer=checkpointer,
        evaluator=evaluator,
        metrics=metrics,
        error_policy=ErrorPolicy(args.error_policy),
        batch_size=args.batch_size,
        checkpoint_every=args.checkpoint_every,
        checkpoint_interval=checkpoint_interval,
        top_k=args.top_k,
        explain=args.explain,
        loss_matrix=loss_matrix,
        delayed=delayed,
        reset_state=args.reset_state,
    )
    for connector in (source, sink, dead_letters):
        # Connectors that need engine hooks (e.g. Kafka model sync) attach before restore.
        attach = getattr(connector, "attach_engine", None)
        if attach is not None:
            attach(engine)
    restored = engine.restore()
    if not restored and args.initial_model is not None:
        try:
            _, initial = _snapshot_model(args.initial_model)
        except StreamNBError as exc:
            parser.error(f"--initial-model: {exc}")
        if type(initial) is not type(learner):
            parser.error(
                f"--initial-model holds a {type(initial).__name__}, not a {args.model}; "
                f"use --model {type(initial).__name__}"
            )
        engine.learner = initial
    tune_gc()  # after the model is loaded: it is frozen out of future collections
    server = None
    if address is not None and metrics is not None:
        from stream_nb.engine.telemetry import progress_check, serve_metrics

        server = serve_metrics(
            metrics,
            address[0],
            address[1],
            ready=lambda: engine.ready,
            live=progress_check(engine.progress_age, args.health_deadline),
        )
        _log.info("metrics on %s/metrics", server.url, extra={"data": {"port": server.port}})

    def _stop(signum: int, frame: Any) -> None:
        _log.info("signal %d: finishing the batch, flushing and checkpointing", signum)
        engine.stop()

    previous = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}
    progress = _Progress() if sys.stderr.isatty() else None
    report_interval = args.report_interval
    last_report = [time.monotonic()]

    def _tick(e: Engine) -> None:
        if progress is not None:
            progress(e)
        if report_interval is not None and time.monotonic() - last_report[0] >= report_interval:
            last_report[0] = time.monotonic()
            data = _short_report(e)
            text = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS, default=str).decode()
            _log.info("report %s", text, extra={"data": data})

    engine.set_progress(_tick)
    _log.info(
        "running %s from %s to %s%s",
        args.model,
        source_url,
        args.sink,
        f" (restored snapshot {engine.summary().restored_from})" if restored else "",
    )
    try:
        summary = engine.run(max_events=None if args.limit is None else args.limit)
    except InvalidEventError as exc:  # --error-policy raise
        _log.error("%s", exc)
        engine.sink.flush()
        return 1
    finally:
        if progress is not None:
            progress.finish()
        for s, handler in previous.items():
            signal.signal(s, handler)
        for closable in (source, sink, dead_letters):
            if closable is not None:
                with contextlib.suppress(StreamNBError, OSError):
                    closable.close()
        if server is not None:
            server.close()
    out = summary.to_dict()
    if args.report is None and out["report"] is not None:
        # On a terminal the confusion matrices are noise; --report PATH keeps them.
        for view in out["report"].values():
            if isinstance(view, dict):
                view.pop("confusion", None)
    # The report goes to stderr, unless the predictions go to a file or to stderr:
    # then stdout is free for it.
    scheme = args.sink.partition("://")[0] if "://" in args.sink else "file"
    local = args.sink not in ("-", "stdout") and scheme == "file"
    default_stream = sys.stdout if local else sys.stderr
    _emit_report(out, args.report, default_stream)
    return 0


def _short_report(engine: Engine) -> dict[str, Any]:
    out: dict[str, Any] = {
        "consumed": engine.consumed,
        "learned": engine.learned,
        "rejected": dict(engine.rejected),
    }
    if engine.evaluator is not None:
        report = engine.evaluator.report(confusion=False)
        out["cumulative"] = report["cumulative"]
        out["window"] = report["window"]
    return out


def _parse_model_spec(parser: argparse.ArgumentParser, spec: str) -> tuple[str, Learner]:
    name, sep, raw = spec.partition(":")
    params: Any = {}
    if sep:
        try:
            params = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            parser.error(f"--model {spec!r}: parameters are not valid JSON ({exc})")
        if not isinstance(params, dict):
            parser.error(f"--model {spec!r}: parameters must be a JSON object")
    cls = _learner_class(parser, name)
    try:
        return spec, cls(**params)
    except (TypeError, ConfigError) as exc:
        parser.error(f"--model {spec!r}: {exc}")
    raise AssertionError("unreachable")


def _cmd_eval(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from stream_nb.evaluation import PrequentialEvaluator

    if args.input is None:
        parser.error("--input is required (a JSON-lines file, or '-' for stdin)")
    specs = args.model or [DEFAULT_MODEL]
    if len(set(specs)) != len(specs):
        parser.error("--model: each model may be given once")
    if not 0 < args.fading_factor <= 1:
        parser.error(f"--fading-factor must be in (0, 1], got {args.fading_factor}")
    loss_matrix = _loss_matrix(parser, args.loss_matrix)
    _setup_logging(args.log_level, args.log_format)
    models = [_parse_model_spec(parser, s) for s in specs]
    decoder = _decoder(args, [m for _, m in models])
    evaluators = [
        PrequentialEvaluator(
            window=args.window, fading_factor=args.fading_factor, loss_matrix=loss_matrix
        )
        for _ in models
    ]
    decide: Callable[[dict[Hashable, float]], Hashable | None] | None = None
    if loss_matrix is not None:
        from stream_nb.evaluation import bayes_risk_decision

        matrix = loss_matrix
        decide = lambda lp: bayes_risk_decision(lp, matrix)  # noqa: E731
    try:
        source = open_source(args.input, {"max_line_bytes": args.max_line_bytes})
    except (ConfigError, StreamNBError) as exc:
        parser.error(f"--input: {exc}")
    rows: list[dict[str, Any]] = []
    rejected: dict[str, int] = {}
    consumed = labelled = 0
    start = time.perf_counter()
    limit = args.limit
    while not source.exhausted and (limit is None or consumed < limit):
        want = 4096 if limit is None else min(4096, limit - consumed)
        batch = source.next_batch(want, 1.0)
        for record in batch:
            consumed += 1
            try:
                x, y, _eid, w = decoder.decode(record.payload)
            except InvalidEventError as exc:
                if record.payload.strip():
                    rejected[exc.reason] = rejected.get(exc.reason, 0) + 1
                continue
            if x is None or y is None:
                continue
            labelled += 1
            for (_, model), evaluator in zip(models, evaluators, strict=True):
                jll = model._joint_log_likelihood(x)
                lp = stream_nb.base.log_softmax(jll)
                if not lp:
                    y_pred = None
                elif decide is not None:
                    y_pred = decide(lp)
                else:
                    y_pred = max(jll, key=jll.__getitem__)
                evaluator.update(y, y_pred, lp)
                model.learn_one(x, y, w)
            if labelled % args.every == 0:
                rows.extend(_curve_rows(labelled, models, evaluators))
    if labelled % args.every:
        rows.extend(_curve_rows(labelled, models, evaluators))
    source.close()
    seconds = time.perf_counter() - start
    report = {
        "input": args.input,
        "events": consumed,
        "labelled": labelled,
        "rejected": rejected,
        "seconds": seconds,
        "models": {
            spec: {"learner": repr(model), "size": model.model_size(), "report": ev.report()}
            for (spec, model), ev in zip(models, evaluators, strict=True)
        },
    }
    if args.curve is not None:
        with open(args.curve, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(_CURVE_FIELDS))
            writer.writeheader()
            writer.writerows(rows)
    if args.plot is not None:
        _plot(parser, rows, [s for s, _ in models], args.plot)
    _emit_report(report, "-", sys.stdout)
    return 0


_CURVE_FIELDS = (
    "events",
    "model",
    "accuracy",
    "window_accuracy",
    "fading_accuracy",
    "log_loss",
    "window_log_loss",
    "kappa",
    "window_kappa",
    "macro_f1",
)


def _curve_rows(
    n: int, models: list[tuple[str, Learner]], evaluators: list[Any]
) -> list[dict[str, Any]]:
    rows = []
    for (spec, _), ev in zip(models, evaluators, strict=True):
        r = ev.report(confusion=False)
        c, w, f = r["cumulative"], r["window"], r["fading"]
        rows.append(
            {
                "events": n,
                "model": spec,
                "accuracy": c["accuracy"],
                "window_accuracy": w["accuracy"],
                "fading_accuracy": f["accuracy"],
                "log_loss": c["log_loss"],
                "window_log_loss": w["log_loss"],
                "kappa": c["kappa"],
                "window_kappa": w["kappa"],
                "macro_f1": c["macro_f1"],
            }
        )
    return rows


def _plot(
    parser: argparse.ArgumentParser, rows: list[dict[str, Any]], specs: list[str], path: str
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        parser.error("--plot needs matplotlib: pip install 'stream-nb[plot]'")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for spec in specs:
        mine = [r for r in rows if r["model"] == spec]
        xs = [r["events"] for r in mine]
        top.plot(xs, [_nan(r["window_accuracy"]) for r in mine], label=spec)
        bottom.plot(xs, [_nan(r["window_log_loss"]) for r in mine], label=spec)
    top.set_ylabel("accuracy (window)")
    bottom.set_ylabel("log loss (window, nats)")
    bottom.set_xlabel("labelled events")
    top.legend(loc="lower right")
    top.grid(alpha=0.3)
    bottom.grid(alpha=0.3)
    fig.suptitle("stream-nb prequential learning curve")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _nan(value: Any) -> float:
    return math.nan if value is None else float(value)


#: What a malformed model state can raise from code that does not map it to
#: ModelStateError; the commands report each as one line, never a traceback.
_STATE_ERRORS = (KeyError, TypeError, ValueError, ArithmeticError, AttributeError, IndexError)


def _snapshot_model(path: str) -> tuple[dict[str, Any], Learner]:
    """A snapshot file's (or a checkpoint directory's newest valid) body and its model.

    Raises
    ------
    CheckpointError
        If it is not a readable stream-nb engine snapshot.
    ModelStateError
        If its model state is invalid.
    """
    body = read_snapshot(path)
    found = body.get("format")
    if found != ENGINE_STATE_FORMAT:
        raise CheckpointError(
            f"{path}: engine state format {found!r}, expected {ENGINE_STATE_FORMAT!r}; "
            "give a snapshot written by 'stream-nb run' or 'stream-nb merge'"
        )
    if not isinstance(body.get("learner"), dict):
        raise CheckpointError(f"{path}: the snapshot has no 'learner' state object")
    try:
        return body, Learner.from_state(body["learner"])
    except ModelStateError as exc:
        raise ModelStateError(f"{path}: invalid learner state: {exc}") from exc
    except _STATE_ERRORS as exc:
        raise ModelStateError(f"{path}: invalid learner state: {exc!r}") from exc


def _informative_features(learner: Learner, top: int) -> list[dict[str, Any]]:
    """The ``top`` most informative features, best first.

    A learner's own ``most_informative_features(top)`` method wins; otherwise
    :func:`stream_nb.informative.informative_features` (one documented score
    per learner family, from the model's statistics).
    """
    own = getattr(learner, "most_informative_features", None)
    if callable(own):
        return list(own(top))
    from stream_nb.informative import informative_features

    return informative_features(learner, top)


def _cmd_inspect(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.snapshot is None:
        parser.error("--snapshot is required (a snapshot file or a checkpoint directory)")
    _setup_logging(args.log_level, args.log_format)
    _import_learner_modules()
    try:
        body, learner = _snapshot_model(args.snapshot)
        out = _describe(args, body, learner)
    except StreamNBError as exc:
        print(f"stream-nb inspect: {exc}", file=sys.stderr)
        return 1
    except _STATE_ERRORS as exc:  # a state that from_state accepted but cannot be described
        print(
            f"stream-nb inspect: {args.snapshot}: cannot describe the model: {exc!r}",
            file=sys.stderr,
        )
        return 1
    _emit_report(out, "-", sys.stdout)
    return 0


def _describe(args: argparse.Namespace, body: dict[str, Any], learner: Learner) -> dict[str, Any]:
    """The ``inspect`` output for a snapshot's body and model."""
    prior = stream_nb.base.log_softmax(learner.joint_log_likelihood_one({}))
    class_weight = learner.class_weights()
    classes = []
    for c, lp in prior.items():
        entry: dict[str, Any] = {"label": c, "prior": math.exp(lp)}
        if c in class_weight:
            entry["count"] = class_weight[c]
        classes.append(entry)
    features = set(learner.feature_names())
    out = {
        "path": str(args.snapshot),
        "created": body.get("created"),
        "learner": type(learner).__name__,
        "params": learner.get_params(),
        "n_learned": learner.n_learned,
        "size": learner.model_size(),
        "classes": classes,
        "features": sorted(features, key=str),
        "most_informative_features": _informative_features(learner, args.top),
        "structure": _structure(learner),
        "source_position": body.get("source"),
        "sink_position": body.get("sink"),
        "counters": body.get("counters"),
        "report": _report_of(body.get("evaluator")),
        "snapshot_bytes": Path(args.snapshot).stat().st_size
        if Path(args.snapshot).is_file()
        else None,
    }
    return out


def _structure(learner: Learner) -> dict[str, Any] | None:
    """Parents of each feature (TAN, KDB, SPODE); ``None`` for the other learners."""
    from stream_nb.informative import structure

    return structure(learner)


def _report_of(state: Any) -> Any:
    if state is None:
        return None
    from stream_nb.evaluation import PrequentialEvaluator

    try:
        return PrequentialEvaluator.from_state(state).report(confusion=False)
    except StreamNBError:
        return None


def _cmd_merge(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.output is None:
        parser.error("--output is required (the merged snapshot to write)")
    _setup_logging(args.log_level, args.log_format)
    _import_learner_modules()
    merged: Learner | None = None
    target = Path(args.output)
    if not target.parent.is_dir():
        print(
            f"stream-nb merge: cannot write {str(target)!r}: directory "
            f"{str(target.parent)!r} does not exist; create it first",
            file=sys.stderr,
        )
        return 1
    for path in args.snapshots:
        try:
            _, learner = _snapshot_model(path)  # (its errors name the file)
        except StreamNBError as exc:
            print(f"stream-nb merge: {exc}", file=sys.stderr)
            return 1
        try:
            merged = learner if merged is None else merged.merge(learner)
        except StreamNBError as exc:
            print(f"stream-nb merge: {path}: {exc}", file=sys.stderr)
            return 1
        except _STATE_ERRORS as exc:
            print(f"stream-nb merge: {path}: cannot merge this model: {exc!r}", file=sys.stderr)
            return 1
    assert merged is not None
    body = {
        "format": "stream-nb/engine",
        "created": time.time(),
        "learner": merged.to_state(),
        "source": None,
        "sink": None,
        "dead_letters": None,
        "evaluator": None,
        "delayed": None,
        "counters": None,
        "extra": {},
        "merged_from": [str(p) for p in args.snapshots],
    }
    tmp = target.with_name(f".{target.name}.tmp")
    data = encode_snapshot(body)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        print(f"stream-nb merge: cannot write {str(target)!r}: {exc}", file=sys.stderr)
        return 1
    print(
        orjson.dumps(
            {"output": str(target), "learner": type(merged).__name__, "n_learned": merged.n_learned}
        ).decode()
    )
    return 0


def _cmd_demo(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from stream_nb.connectors.memory import DemoSource

    try:
        source = DemoSource(
            args.stream,
            seed=args.seed,
            n=args.n,
            shape=args.shape,
            label_field=args.label_field,
            features_field=args.features_field,
        )
    except ConfigError as exc:
        parser.error(f"--stream: {exc}")
    out = sys.stdout.buffer
    delay = args.delay_labels
    pending: list[bytes] = []
    index = 0
    try:
        while not source.exhausted:
            lines = []
            for record in source.next_batch(4096, 0):
                if delay:
                    event = orjson.loads(record.payload)
                    if args.shape == "flat":
                        y = event.pop(args.label_field)
                    else:
                        y = event.pop(args.label_field)
                    event["id"] = index
                    lines.append(orjson.dumps(event))
                    pending.append(orjson.dumps({"id": index, args.label_field: y}))
                    if len(pending) > delay:
                        lines.append(pending.pop(0))
                else:
                    lines.append(record.payload)
                index += 1
            if lines:
                out.write(b"\n".join(lines) + b"\n")
        if pending:
            out.write(b"\n".join(pending) + b"\n")
        out.flush()
    except BrokenPipeError:  # e.g. '| head'
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    return 0


_COMMANDS = {
    "run": _cmd_run,
    "eval": _cmd_eval,
    "inspect": _cmd_inspect,
    "merge": _cmd_merge,
    "demo": _cmd_demo,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``stream-nb`` console script; returns the exit code."""
    try:
        parser = build_parser()
    except _EnvError as exc:
        print(f"stream-nb: error: environment variable {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        return _COMMANDS[args.command](args.subparser, args)
    except (StreamNBError, OSError) as exc:
        # one line, never a traceback: the message names the value and the fix (a log
        # line once the command has set up logging, so --log-format json keeps it)
        if logging.getLogger("stream_nb").handlers:
            _log.error("%s", exc)
        else:
            print(f"stream-nb {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
