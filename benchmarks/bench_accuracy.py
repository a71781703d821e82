"""Prequential accuracy and log loss of every stream-nb learner next to river and MOA.

One command::

    python -m benchmarks.bench_accuracy            # every stream and model, ~10 minutes
    python -m benchmarks.bench_accuracy --quick    # 500 events per stream
    python -m benchmarks.bench_accuracy --list     # the streams and configurations
    python -m benchmarks.bench_accuracy --stream iris --model AODE --no-write

Every model sees the same events in the same order and is tested on each
event before it learns it (test then train, every event). The streams are in
:mod:`benchmarks.accuracy_streams`, the named model configurations in
:mod:`benchmarks.accuracy_models` (MOA's NaiveBayes through capymoa, which
needs Java: ``pip install -e '.[bench]'``, or ``--no-moa``). Scoring is
:func:`score`, one rule for every model. Results go to
``benchmarks/results/accuracy.json`` and ``accuracy.md`` and the plot to
``docs/img/accuracy.png`` (with ``--out DIR``: ``DIR/accuracy.png``); see
docs/benchmarks.md for the method and a reading.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import stream_nb
from benchmarks.accuracy_models import CONFIGS, Config, Prediction, moa_available
from benchmarks.accuracy_report import write_markdown, write_plot
from benchmarks.accuracy_streams import (
    DISCRETE_MAX_VALUES,
    SKLEARN_ORDER_SEED,
    STREAMS,
    SYNTHETIC_SEED,
    Stream,
    load_streams,
)
from stream_nb import LOG_LOSS_FLOOR

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PLOT = ROOT / "docs" / "img" / "accuracy.png"

#: ``log(LOG_LOSS_FLOOR)``: a log-probability of the true class below it (or
#: ``-inf``, or NaN) counts as this, so one event costs at most ``-log(1e-15) ≈ 34.5``.
LOG_FLOOR = math.log(LOG_LOSS_FLOOR)

#: Events per stream of ``--quick`` (generated streams, and the cap on data sets).
QUICK_EVENTS = 500


@dataclasses.dataclass(frozen=True)
class Score:
    """Prequential scores of one run.

    Attributes
    ----------
    accuracy
        Correct predictions / events; an event without a prediction is wrong.
    log_loss
        Mean ``-max(log P(y | x), log LOG_LOSS_FLOOR)`` in nats over the events
        whose label occurred earlier in the stream (``None`` if there is none).
    events, log_loss_events
        Events scored for accuracy and for log loss.
    no_prediction
        Events the model predicted nothing for.
    """

    accuracy: float
    log_loss: float | None
    events: int
    log_loss_events: int
    no_prediction: int


def score(labels: Sequence[Hashable], predictions: Sequence[Prediction]) -> Score:
    """Accuracy and log loss of predictions made before learning each label.

    The rule, the same for every model:

    * the predicted class is the most probable one (NaN ignored; ties: the
      first in the model's order); ``{}`` (or only NaN) is no prediction, never right;
    * log loss is taken on the events whose label occurred earlier in the
      stream: the first event of each class is left out, as no model can give
      a class it never saw a probability (the same events for every model); on
      those events, a model without a prediction is given the uniform
      distribution over the classes seen so far, and ``log P(y | x)`` is floored
      at :data:`LOG_FLOOR` (a class left out of the prediction has probability 0).

    Examples
    --------
    >>> s = score(["a", "a", "b", "a"], [{}, {"a": 0.0}, {"a": 0.0}, {}])
    >>> s.accuracy, s.no_prediction, s.log_loss_events
    (0.25, 2, 2)
    >>> round(s.log_loss, 4)  # (0 + log 2) / 2: the last event is uniform over {a, b}
    0.3466
    """
    seen: set[Hashable] = set()
    hits = 0
    none = 0
    loss = 0.0
    n_loss = 0
    for y, lp in zip(labels, predictions, strict=True):
        finite = {c: v for c, v in lp.items() if v == v}
        if finite:
            hits += max(finite, key=finite.__getitem__) == y
        else:
            none += 1
        if y in seen:
            log_p = lp.get(y, -math.inf) if finite else -math.log(len(seen))
            loss -= log_p if log_p > LOG_FLOOR else LOG_FLOOR
            n_loss += 1
        seen.add(y)
    n = len(labels)
    return Score(hits / n if n else 0.0, loss / n_loss if n_loss else None, n, n_loss, none)


def select_configs(models: Sequence[str] | None, moa: bool) -> list[Config]:
    """The configurations named (by name or learner; all when ``models`` is ``None``)."""
    chosen = [c for c in CONFIGS if models is None or c.name in models or c.learner in models]
    return [c for c in chosen if moa or c.family != "MOA"]


def stream_info(stream: Stream) -> dict[str, Any]:
    return {
        "name": stream.name,
        "group": stream.group,
        "source": stream.source,
        "events": len(stream.events),
        "features": len(stream.features),
        "classes": len(stream.labels),
        "numeric": stream.numeric,
        "has_numeric": stream.has_numeric,
        "counts": stream.counts,
        "discrete": stream.discrete,
    }


def run(streams: Sequence[Stream], configs: Sequence[Config]) -> list[dict[str, Any]]:
    """Every configuration on every stream it applies to, in order, printed as it goes."""
    rows = []
    for stream in streams:
        labels = [y for _x, y in stream.events]
        for config in configs:
            if not config.applies(stream):
                continue
            result = config.run(stream)
            s = score(labels, result.predictions)
            row = {
                "stream": stream.name,
                "config": config.name,
                **dataclasses.asdict(s),
                "cpu_seconds": round(result.cpu_seconds, 3),
                "wall_seconds": round(result.wall_seconds, 3),
            }
            if result.notes:
                row["notes"] = result.notes
            rows.append(row)
            ll = "   —  " if s.log_loss is None else f"{s.log_loss:6.3f}"
            print(
                f"{stream.name:15} {config.name:40} acc {s.accuracy:.4f}  log loss {ll}  "
                f"{result.cpu_seconds:7.2f} CPU s",
                flush=True,
            )
    return rows


def _version(module: str) -> str | None:
    try:
        return str(__import__(module).__version__)
    except Exception:
        return None


def _command_output(command: Sequence[str]) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=ROOT)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if done.returncode == 0 and text else None


def machine(moa: bool) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = {
        "python": platform.python_version(),
        "stream_nb": stream_nb.__version__,
        "stream_nb_commit": _command_output(["git", "rev-parse", "--short", "HEAD"]),
        "numpy": _version("numpy"),
        "river": _version("river"),
        "scikit-learn": _version("sklearn"),
        "capymoa": _version("capymoa") if moa else None,
        "java": _command_output(["java", "-version"]) if moa else None,
    }
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": [round(v, 2) for v in os.getloadavg()]
        if hasattr(os, "getloadavg")
        else None,
        "platform": platform.platform(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "versions": versions,
    }


def settings(args: argparse.Namespace, synthetic: int, data: int | None) -> dict[str, Any]:
    return {
        "synthetic_events": synthetic,
        "data_events": data,
        "synthetic_seed": SYNTHETIC_SEED,
        "sklearn_order_seed": SKLEARN_ORDER_SEED,
        "discrete_max_values": DISCRETE_MAX_VALUES,
        "log_loss_floor": LOG_LOSS_FLOOR,
        "command": "python -m benchmarks.bench_accuracy " + " ".join(args.argv),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=20_000, help="events per generated stream")
    parser.add_argument(
        "--data-events", type=int, default=None, help="cap on the events of a data set (None: all)"
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_EVENTS} events per stream (a smoke run)"
    )
    parser.add_argument(
        "--stream", action="append", default=None, help="a stream to run (repeat; default all)"
    )
    parser.add_argument(
        "--model",
        action="append",
        default=None,
        help="a configuration or learner name to run (repeat; default all)",
    )
    parser.add_argument("--no-moa", action="store_true", help="leave out MOA (capymoa, Java)")
    parser.add_argument("--list", action="store_true", help="list streams and configurations")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for the results")
    parser.add_argument(
        "--plot", type=Path, default=None, help=f"plot file (default {PLOT}, or OUT/accuracy.png)"
    )
    parser.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    parser.add_argument("--no-write", action="store_true", help="write no file")
    parser.add_argument(
        "--from-json",
        type=Path,
        default=None,
        help="re-render accuracy.md and the plot from this accuracy.json (no run)",
    )
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)

    if args.list:
        for spec in STREAMS:
            print(f"stream  {spec.name:15} {spec.group:18} {spec.source}")
        for c in CONFIGS:
            print(f"model   {c.name:40} {c.family:10} tables: {', '.join(c.tables)}")
        return 0
    plot = args.plot or (PLOT if args.out.resolve() == RESULTS else args.out / "accuracy.png")
    if args.from_json is not None:
        payload = json.loads(args.from_json.read_text())
        write_markdown(payload, args.out / "accuracy.md")
        if not args.no_plot:
            write_plot(payload, plot)
        return 0

    synthetic = QUICK_EVENTS if args.quick else args.events
    data = QUICK_EVENTS if args.quick and args.data_events is None else args.data_events
    if synthetic < 10:
        parser.error(f"--events must be at least 10, got {synthetic}")
    if data is not None and data < 10:
        parser.error(f"--data-events must be at least 10, got {data}")
    known = {s.name for s in STREAMS}
    for name in args.stream or []:
        if name not in known:
            parser.error(f"--stream {name!r} is not a stream; see --list")
    names = {c.name for c in CONFIGS} | {c.learner for c in CONFIGS}
    for name in args.model or []:
        if name not in names:
            parser.error(f"--model {name!r} is not a configuration or learner; see --list")
    configs = select_configs(args.model, moa=not args.no_moa)
    if any(c.family == "MOA" for c in configs):
        why = moa_available()
        if why is not None:
            parser.error(
                f"MOA needs capymoa and Java ({why}): pip install -e '.[bench]', or pass --no-moa"
            )

    start = time.perf_counter()
    streams = load_streams(args.stream, synthetic, data)
    rows = run(streams, configs)
    elapsed = time.perf_counter() - start
    payload = {
        "machine": machine(moa=any(c.family == "MOA" for c in configs)),
        "settings": settings(args, synthetic, data),
        "wall_seconds": round(elapsed, 1),
        "streams": [stream_info(s) for s in streams],
        "configs": [
            {
                "name": c.name,
                "family": c.family,
                "learner": c.learner,
                "tables": list(c.tables),
                "lookahead": c.lookahead,
            }
            for c in configs
        ],
        "rows": rows,
    }
    print(f"{len(rows)} runs on {len(streams)} streams in {elapsed:.0f} s", flush=True)
    if not args.no_write:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "accuracy.json").write_text(json.dumps(payload, indent=1) + "\n")
        write_markdown(payload, args.out / "accuracy.md")
        if not args.no_plot:
            write_plot(payload, plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
