"""The ``stream-nb`` entry point: parse, dispatch to a command, one-line errors."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from stream_nb._exceptions import (
    StreamNBError,
)
from stream_nb.cli.common import _log
from stream_nb.cli.demo import _cmd_demo
from stream_nb.cli.evaluate import _cmd_eval
from stream_nb.cli.flags import _EnvError
from stream_nb.cli.inspect import _cmd_inspect
from stream_nb.cli.merge import _cmd_merge
from stream_nb.cli.parser import build_parser
from stream_nb.cli.run import _cmd_run
from stream_nb.engine.runtime import abandoned

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


def console(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``stream-nb`` console script: :func:`main`, then exit with its code.

    When a client call that a bounded wait gave up on is still running (a Kafka
    client that never returned from closing, say), the process does not wait for
    it, nor for that library's destructors: the command's own state is durable by
    then (sinks flushed and closed, final checkpoint written), so the logs and
    standard streams are flushed and the process ends with ``os._exit``.
    """
    code = main(argv)
    left = abandoned()
    if not left:
        sys.exit(code)
    _log.warning(
        "exiting without waiting for %d call(s) that did not return: %s",
        len(left),
        "; ".join(left),
    )
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed or broken: nothing to write
            stream.flush()
    os._exit(code)
