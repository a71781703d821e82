"""``stream-nb demo``: print a seeded demo stream."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

import orjson

from stream_nb._exceptions import (
    ConfigError,
)
from stream_nb.cli.flags import _command_parser, _flag, _nonneg_int


def _add_demo_parser(sub: Any, formatter: type[argparse.HelpFormatter], learners: str) -> None:
    """The ``demo`` subcommand and its flags."""
    de = _command_parser(
        sub,
        "demo",
        formatter,
        help="print a seeded demo stream as JSON lines",
        description="Print a seeded synthetic stream of stream_nb.datasets as JSON lines.",
    )
    _flag(
        de,
        "--demo",
        default="agrawal",
        metavar="NAME",
        help="the stream: agrawal, zipf_text, categorical or mixed (as run --demo)",
    )
    _flag(de, "--seed", type=int, default=42, help="seed")
    _flag(de, "--limit", type=_nonneg_int, default=1000, metavar="N", help="number of events")
    # the spellings of earlier releases, kept working
    de.add_argument("--stream", dest="demo", metavar="NAME", help=argparse.SUPPRESS)
    de.add_argument("-n", "--n", dest="limit", type=_nonneg_int, help=argparse.SUPPRESS)
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


def _cmd_demo(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from stream_nb.connectors.memory import DemoSource

    try:
        source = DemoSource(
            args.demo,
            seed=args.seed,
            n=args.limit,
            shape=args.shape,
            label_field=args.label_field,
            features_field=args.features_field,
        )
    except ConfigError as exc:
        parser.error(f"--demo (alias --stream): {exc}")
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
                    y = event.pop(args.label_field)  # (top level in either shape)
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
