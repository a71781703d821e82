"""``stream-nb merge``: add the models of several snapshots into one."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from stream_nb._exceptions import (
    StreamNBError,
)
from stream_nb._state import STATE_ERRORS
from stream_nb.base import Learner
from stream_nb.cli.common import (
    _setup_logging,
    _snapshot_model,
)
from stream_nb.cli.flags import _add_log_flags, _command_parser, _flag
from stream_nb.engine.checkpoint import encode_snapshot


def _add_merge_parser(sub: Any, formatter: type[argparse.HelpFormatter], learners: str) -> None:
    """The ``merge`` subcommand and its flags."""
    mg = _command_parser(
        sub,
        "merge",
        formatter,
        help="merge the models of several snapshots into one",
        description="Add the statistics of every snapshot's model (same learner and "
        "parameters) into one, written as a snapshot usable with 'run --initial-model'.",
    )
    mg.add_argument(
        "snapshots", nargs="+", metavar="SNAPSHOT", help="snapshot files or directories"
    )
    _flag(mg, "-o", "--output", metavar="PATH", help="snapshot to write")
    _add_log_flags(mg)


def _cmd_merge(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.output is None:
        parser.error("--output is required (the merged snapshot to write)")
    _setup_logging(args.log_level, args.log_format)
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
        except STATE_ERRORS as exc:
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
