"""The ``stream-nb`` argument parser: one subparser per command."""

from __future__ import annotations

import argparse

import stream_nb
from stream_nb.base import Learner
from stream_nb.cli.demo import _add_demo_parser
from stream_nb.cli.evaluate import _add_eval_parser
from stream_nb.cli.inspect import _add_inspect_parser
from stream_nb.cli.merge import _add_merge_parser
from stream_nb.cli.run import _add_run_parser


def build_parser() -> argparse.ArgumentParser:
    """The ``stream-nb`` argument parser (environment variables read now)."""
    _Formatter = argparse.RawDescriptionHelpFormatter
    learners = ", ".join(sorted(Learner.registered())) or "none"
    parser = argparse.ArgumentParser(
        prog="stream-nb",
        description="Online Naive Bayes over event streams: a crash-safe prequential daemon.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"stream-nb {stream_nb.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_run_parser(sub, _Formatter, learners)
    _add_eval_parser(sub, _Formatter, learners)
    _add_inspect_parser(sub, _Formatter, learners)
    _add_merge_parser(sub, _Formatter, learners)
    _add_demo_parser(sub, _Formatter, learners)
    return parser
