"""``stream-nb eval``: prequential evaluation of several models over a file."""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Callable, Hashable
from typing import Any

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
    _loss_matrix,
    _parse_model_spec,
    _setup_logging,
)
from stream_nb.cli.flags import (
    DEFAULT_MODEL,
    _add_event_flags,
    _add_log_flags,
    _add_model_flags,
    _command_parser,
    _flag,
    _positive_int,
)
from stream_nb.cli.plot import _CURVE_FIELDS, _curve_rows, _plot
from stream_nb.connectors.registry import open_source


def _add_eval_parser(sub: Any, formatter: type[argparse.HelpFormatter], learners: str) -> None:
    """The ``eval`` subcommand and its flags."""
    ev = _command_parser(
        sub,
        "eval",
        formatter,
        help="prequential evaluation of one or several models over a file",
        description="Run each --model prequentially over the events of FILE (predict then "
        "learn); print the final report as JSON, write a learning curve as CSV and a plot.",
        epilog=f"learners: {learners}",
    )
    _flag(ev, "--source", metavar="FILE", help="JSON-lines events ('-' for stdin), as run --source")
    # the spelling of earlier releases, kept working
    ev.add_argument("-i", "--input", dest="source", metavar="FILE", help=argparse.SUPPRESS)
    _flag(ev, "--curve", metavar="CSV", help="learning-curve CSV to write")
    _flag(ev, "--plot", metavar="PNG", help="learning-curve plot to write (needs stream-nb[plot])")
    _flag(
        ev, "--every", type=_positive_int, default=1000, help="curve point every N labelled events"
    )
    _flag(ev, "--limit", type=_positive_int, metavar="N", help="stop after N events")
    _add_event_flags(ev)
    _add_model_flags(ev, multi=True)
    _add_log_flags(ev)


def _cmd_eval(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from stream_nb.evaluation import PrequentialEvaluator

    if args.source is None:
        parser.error("--source (alias --input) is required (a JSON-lines file, or '-' for stdin)")
    specs = args.model or [DEFAULT_MODEL]
    if len(set(specs)) != len(specs):
        parser.error("--model: each model may be given once")
    _check_fading_factor(parser, args.fading_factor)
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
        source = open_source(args.source, {"max_line_bytes": args.max_line_bytes})
    except (ConfigError, StreamNBError) as exc:
        parser.error(f"--source (alias --input): {exc}")
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
                jll = model.joint_log_likelihood_one(x)
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
        "input": args.source,
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
