"""``stream-nb run``: the daemon."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from typing import Any

import orjson

import stream_nb
from stream_nb._exceptions import (
    ConfigError,
    InvalidEventError,
    StreamNBError,
)
from stream_nb.cli.common import (
    _check_fading_factor,
    _decoder,
    _emit_report,
    _learner_class,
    _log,
    _loss_matrix,
    _make_learner,
    _setup_logging,
    _snapshot_model,
    _split_model_spec,
)
from stream_nb.cli.flags import (
    DAEMON_BOUNDS,
    _add_bound_flags,
    _add_event_flags,
    _add_log_flags,
    _add_model_flags,
    _command_parser,
    _flag,
    _parse_address,
    _positive_float,
    _positive_int,
    _switch,
    daemon_params,
)
from stream_nb.connectors.registry import open_sink, open_source
from stream_nb.engine import (
    Checkpointer,
    DelayedLabelCache,
    Engine,
    ErrorPolicy,
    stop_watchdog,
    tune_gc,
    tune_malloc,
)


def _add_run_parser(sub: Any, formatter: type[argparse.HelpFormatter], learners: str) -> None:
    """The ``run`` subcommand and its flags."""
    run = _command_parser(
        sub,
        "run",
        formatter,
        help="run the daemon: read events, predict, emit, learn",
        description="Predict then learn every event (prequential), emit one JSON prediction "
        "record per event, send bad input to a dead-letter sink, checkpoint, export metrics. "
        "URLs: '-' (stdin/stdout), 'stderr', 'file:PATH' or PATH, 'demo:NAME?seed=S&n=N', "
        "'kafka://HOST:PORT/TOPIC' (the kafka extra).",
        epilog=f"learners: {learners}",
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
    _switch(g, "--follow", help="keep reading a growing --source file (like tail -f)")
    _flag(
        g,
        "--kafka-client",
        default="kafka-python",
        choices=["kafka-python", "confluent"],
        help="client of the kafka:// URLs without a client= option: kafka-python, or "
        "confluent (librdkafka; pip install 'stream-nb[kafka-fast]')",
    )
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
    _switch(
        g,
        "--explain",
        help="add each feature's log-likelihood ratio, predicted class vs runner-up",
    )
    _switch(
        g,
        "--delayed-labels",
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
    _switch(
        g,
        "--reset-state",
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
        "--stop-timeout",
        type=_positive_float,
        default=150.0,
        metavar="SECONDS",
        help="after SIGTERM/SIGINT, a stop (last batch, flushes, final checkpoint, Kafka "
        "commits) that has not ended within SECONDS prints every thread's stack and exits "
        "with status 1 (the last checkpoint stands); keep it below the supervisor's own "
        "kill timeout (systemd TimeoutStopSec)",
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
    _check_fading_factor(parser, args.fading_factor)
    name, model_params = _split_model_spec(parser, args.model)
    params: dict[str, Any] = {}
    if args.params is not None:
        if not isinstance(args.params, dict):
            parser.error(f"--params must be a JSON object, got {args.params!r}")
        params.update(args.params)
    for key, value in args.param or []:
        params[key] = value
    both = [key for key in model_params if key in params]
    if both:
        parser.error(
            f"--model {args.model!r} and --params/--param both set {both[0]!r}: "
            "set each parameter in one place"
        )
    flag = "--params"  # where the parameters were set, for the errors
    if model_params:
        flag = "--model" if not params else "--model or --params/--param"
    params.update(model_params)
    loss_matrix = _loss_matrix(parser, args.loss_matrix)
    address = None if args.metrics_address is None else _parse_address(parser, args.metrics_address)

    if args.reset_state and args.checkpoint_dir is None:
        parser.error("--reset-state needs --checkpoint-dir")
    _setup_logging(args.log_level, args.log_format)
    bounds = {name: getattr(args, name) or None for name in DAEMON_BOUNDS}
    cls = _learner_class(parser, name)
    learner = _make_learner(parser, cls, daemon_params(cls, params, bounds), flag)
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
        metrics.set_build_info(version=stream_nb.__version__, learner=cls.__name__)
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
        "kafka_client": args.kafka_client,
    }
    source_url = args.source
    if args.demo is not None:
        source_url = f"demo:{args.demo}?seed={args.seed}"
    evaluator = PrequentialEvaluator(
        window=args.window, fading_factor=args.fading_factor, loss_matrix=loss_matrix
    )
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
        if connector is not None:
            connector.attach_engine(engine)
    restored = engine.restore()
    if not restored and args.initial_model is not None:
        try:
            _, initial = _snapshot_model(args.initial_model)
        except StreamNBError as exc:
            parser.error(f"--initial-model: {exc}")
        if type(initial) is not cls:
            parser.error(
                f"--initial-model holds a {type(initial).__name__}, not a {cls.__name__}; "
                f"use --model {type(initial).__name__}"
            )
        engine.learner = initial
    tune_gc()  # after the model is loaded: it is frozen out of future collections
    server = None
    if address is not None and metrics is not None:
        from stream_nb.engine.server import progress_check, serve_metrics

        server = serve_metrics(
            metrics,
            address[0],
            address[1],
            ready=lambda: engine.ready,
            live=progress_check(engine.progress_age, args.health_deadline),
        )
        _log.info("metrics on %s/metrics", server.url, extra={"data": {"port": server.port}})

    def _stop(signum: int, frame: Any) -> None:
        _log.info(
            "signal %d: finishing the batch, flushing and checkpointing (at most %g s)",
            signum,
            args.stop_timeout,
        )
        stop_watchdog(args.stop_timeout)
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
        cls.__name__,
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
