"""``stream-nb inspect``: describe a snapshot."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import stream_nb
from stream_nb._exceptions import (
    StreamNBError,
)
from stream_nb._state import STATE_ERRORS
from stream_nb.base import Learner
from stream_nb.cli.common import (
    _emit_report,
    _report_of,
    _setup_logging,
    _snapshot_model,
)
from stream_nb.cli.flags import _add_log_flags, _command_parser, _flag, _nonneg_int


def _add_inspect_parser(sub: Any, formatter: type[argparse.HelpFormatter], learners: str) -> None:
    """The ``inspect`` subcommand and its flags."""
    ins = _command_parser(
        sub,
        "inspect",
        formatter,
        help="describe a snapshot",
        description="Print a snapshot (file, or newest valid one of a directory) as JSON: "
        "learner, classes and counts, features, size, most informative features (one "
        "score per learner family, see stream_nb.informative), the dependence structure "
        "of TAN/KDB/SPODE, positions.",
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


def _cmd_inspect(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.snapshot is None:
        parser.error("--snapshot is required (a snapshot file or a checkpoint directory)")
    _setup_logging(args.log_level, args.log_format)
    try:
        body, learner = _snapshot_model(args.snapshot)
        out = _describe(args, body, learner)
    except StreamNBError as exc:
        print(f"stream-nb inspect: {exc}", file=sys.stderr)
        return 1
    except STATE_ERRORS as exc:  # a state that from_state accepted but cannot be described
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
        "most_informative_features": learner.informative_features(args.top),
        "structure": learner.structure(),  # parents of each feature (TAN, KDB, SPODE)
        "source_position": body.get("source"),
        "sink_position": body.get("sink"),
        "counters": body.get("counters"),
        "report": _report_of(body.get("evaluator")),
        "snapshot_bytes": Path(args.snapshot).stat().st_size
        if Path(args.snapshot).is_file()
        else None,
    }
    return out
