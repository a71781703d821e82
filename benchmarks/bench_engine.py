"""Throughput of ``stream-nb run`` (file → file) for every learner family on its natural
stream, next to the bare parse+emit ceiling of the same lines.

Commands::

    python -m benchmarks.bench_engine                         # every family, 1M-line streams
    python -m benchmarks.bench_engine --events 200000 --turns 3     # quicker
    python -m benchmarks.bench_engine --model CategoricalNB,AODE    # some families
    python -m benchmarks.bench_engine --model NaiveBayes --breakdown  # + in-process rows
    python -m benchmarks.bench_engine --model NaiveBayes --profile    # where the time goes
    python -m benchmarks.bench_engine --baseline ../before            # and another checkout

The families and their streams (the generators of ``stream-nb demo``, written to a
file first, not timed): NaiveBayes on ``agrawal``; GaussianNB on ``agrawal`` with its
nominal attributes as numbers; CategoricalNB, AODE, TAN and KDB on ``categorical``;
MultinomialNB, BernoulliNB and ComplementNB on ``zipf_text``. The text streams have
``--events`` / 5 lines, the semi-naive learners' ``--events`` / 10 (they are slower;
each run stays long next to the process start-up, which is counted).

Measured in the same run, in turns (``--turns``):

``ceiling``
    The bare cost of the I/O the daemon cannot avoid, on the same file: read it, one
    ``orjson.loads`` per line, one ``orjson.dumps(..., OPT_APPEND_NEWLINE)`` per line,
    buffered writes; no model, no validation, no evaluation.
Variants of a family (a learner parameter such as ``half_life`` or ``numeric="bins"``,
no target of their own) run on the same stream. ``--baseline CHECKOUT`` runs another
checkout's ``stream-nb`` (its ``.venv``) in the same turns, right after this one's,
for before/after figures.

``stream-nb run``
    The real console script in a subprocess: ``stream-nb run --model M --source IN
    --sink OUT``, with its defaults (prequential evaluator, ``--batch-size``, dead
    letters to stderr, no checkpoints), timed from spawn to exit: the CPU time of the
    whole process, start-up included (reported alone too: the same command on an
    empty file).

Each turn measures, stream after stream, the stream's ceiling and then the run of
each of its learners, so a learner's share of the ceiling in a turn compares two
measurements a few seconds apart (a shared VM drifts from minute to minute). Reported
per family: events per CPU-second of the whole process (median and best over the
turns) and its share of the ceiling's events per CPU-second (median and best of the
turns' shares), against the family's target. The package's bytecode is compiled first
(:func:`compile_bytecode`), as an installed daemon has it. Results go to
``benchmarks/results/engine.json`` and ``engine.md`` with the machine description,
the plot to ``docs/img/engine.png`` (matplotlib: the ``bench`` or ``plot`` extra).
"""

from __future__ import annotations

import os

# This process never calls BLAS: an idle OpenBLAS pool here would take CPU from the
# measured subprocess on a 2-core machine (docs/benchmarks.md, method notes).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import compileall
import cProfile
import dataclasses
import datetime as dt
import gc
import io
import json
import platform
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

import stream_nb
from stream_nb.base import Learner
from stream_nb.cli import build_parser
from stream_nb.connectors.files import FileSink, FileSource
from stream_nb.connectors.memory import DemoSource
from stream_nb.engine import Engine, tune_gc, tune_malloc
from stream_nb.evaluation import PrequentialEvaluator

RESULTS = Path(__file__).resolve().parent / "results"
PLOT = Path(__file__).resolve().parents[1] / "docs" / "img" / "engine.png"


@dataclasses.dataclass(frozen=True)
class Family:
    """A learner on its natural stream, with its target share of the ceiling (``None``:
    a variant of a family, shown beside it)."""

    model: str
    stream: str  # a demo stream (stream-nb demo --demo NAME)
    target: float | None
    divisor: int = 1  # the stream has --events / divisor lines
    params: tuple[tuple[str, Any], ...] = ()  # the generator's parameters
    options: tuple[tuple[str, Any], ...] = ()  # the learner's parameters (--param)

    @property
    def label(self) -> str:
        """The stream as the tables name it."""
        return self.stream + "".join(f", {k}={v}" for k, v in self.params)

    @property
    def name(self) -> str:
        """The learner as the tables name it: its class and the parameters given."""
        return self.model + "".join(f", {k}={v}" for k, v in self.options)

    def make(self) -> Learner:
        """A fresh learner with the family's parameters."""
        return Learner.registered()[self.model](**dict(self.options))

    def events(self, events: int) -> int:
        return max(1, events // self.divisor)


FAMILIES = (
    Family("NaiveBayes", "agrawal", 0.35),
    Family("GaussianNB", "agrawal", 0.35, params=(("nominal", False),)),
    Family("CategoricalNB", "categorical", 0.30),
    Family("MultinomialNB", "zipf_text", 0.25, divisor=5),
    Family("BernoulliNB", "zipf_text", 0.25, divisor=5),
    Family("ComplementNB", "zipf_text", 0.25, divisor=5),
    Family("AODE", "categorical", 0.10, divisor=10),
    Family("TAN", "categorical", 0.05, divisor=10),
    Family("KDB", "categorical", 0.05, divisor=10),
    # variants that take the same kernels: forgetting, binned numbers
    Family("NaiveBayes", "agrawal", None, options=(("numeric", "bins"),)),
    Family("CategoricalNB", "categorical", None, options=(("half_life", 10_000),)),
    Family("MultinomialNB", "zipf_text", None, divisor=5, options=(("half_life", 10_000),)),
)

#: A stream file: (demo stream, its parameters, events)
StreamKey = tuple[str, tuple[tuple[str, Any], ...], int]


class _NullLearner(Learner):
    """Constant scores, learns nothing: isolates the engine's own cost."""

    def _params(self) -> dict[str, Any]:
        return {}

    def _learn(self, x: Any, y: Any, w: float) -> None:
        pass

    def _joint_log_likelihood(self, x: Any) -> dict[Any, float]:
        return {0: -0.5, 1: -1.0}

    def _merge(self, other: Any, factor: float) -> None:
        pass

    def _rescale(self, factor: float) -> None:
        pass

    def _stats_to_state(self) -> Any:
        return {}

    def _stats_from_state(self, stats: Any) -> None:
        pass

    def _size(self) -> tuple[int, int, int]:
        return (0, 0, 0)


def compile_bytecode() -> None:
    """Write the bytecode of stream-nb's modules, as ``pip install`` does.

    With an editable install (a checkout) and ``PYTHONDONTWRITEBYTECODE`` set,
    as on this project's machines, Python would compile the ~35 modules from
    source at every start: about 0.1 s of start-up that no installed daemon pays.
    """
    for directory in stream_nb.__path__:  # stream_nb.connectors included (a symlink)
        compileall.compile_dir(directory, quiet=1)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _best(fn: Callable[[], tuple[float, float]], repeats: int) -> tuple[float, float]:
    """Best (wall, cpu) seconds over ``repeats`` runs."""
    walls, cpus = [], []
    for _ in range(repeats):
        gc.collect()
        wall, cpu = fn()
        walls.append(wall)
        cpus.append(cpu)
    return min(walls), min(cpus)


def write_stream(path: Path, key: StreamKey, seed: int) -> int:
    """Write the demo stream ``key`` as ``stream-nb demo`` prints it; its size in bytes."""
    name, params, n = key
    source = DemoSource(name, seed=seed, n=n, params=dict(params))
    with open(path, "wb") as f:
        while not source.exhausted:
            f.write(b"".join(record.payload + b"\n" for record in source.next_batch(4096, 0)))
    return path.stat().st_size


def ceiling(src: Path, dst: Path) -> tuple[float, float]:
    """Read, ``orjson.loads`` and ``orjson.dumps`` every line; buffered writes."""
    loads, dumps, opt = orjson.loads, orjson.dumps, orjson.OPT_APPEND_NEWLINE
    wall, cpu = time.perf_counter(), time.process_time()
    with open(src, "rb") as f, open(dst, "wb") as out:
        write = out.write
        for line in f:
            write(dumps(loads(line), option=opt))
    return time.perf_counter() - wall, time.process_time() - cpu


def cli_run(
    exe: str, model: str, src: Path, dst: Path, options: tuple[tuple[str, Any], ...] = ()
) -> tuple[float, float]:
    """The real ``stream-nb run`` subprocess, spawn to exit (``options``: ``--param``)."""
    if dst.exists():
        dst.unlink()
    args = [
        exe,
        "run",
        "--model",
        model,
        "--source",
        str(src),
        "--sink",
        str(dst),
        "--report",
        os.devnull,
        "--log-level",
        "WARNING",
    ]
    for key, value in options:
        args += ["--param", f"{key}={json.dumps(value)}"]
    cpu0, wall = _children_cpu(), time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - wall, _children_cpu() - cpu0


def in_process(learner: Learner, src: Path, dst: Path, evaluator: bool) -> tuple[float, float]:
    """The engine as ``stream-nb run`` sets it up: CLI batch size, GC tuned after the model."""
    if dst.exists():
        dst.unlink()
    engine = Engine(
        learner,
        FileSource(src),
        FileSink(dst),
        evaluator=PrequentialEvaluator() if evaluator else None,
        batch_size=_cli_batch_size(),
    )
    saved = gc.get_threshold()
    tune_gc()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        engine.run()
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        gc.unfreeze()
        gc.set_threshold(*saved)


def _cli_batch_size() -> int:
    batch_size = build_parser().parse_args(["run"]).batch_size
    assert isinstance(batch_size, int)
    return batch_size


def learner_alone(make: Callable[[], Learner], src: Path, limit: int) -> tuple[float, float]:
    """``predict_log_proba_one`` + ``learn_one`` on the first ``limit`` decoded events."""
    events = []
    with open(src, "rb") as f:
        for line, _ in zip(f, range(limit), strict=False):
            event = orjson.loads(line)
            y = event.pop("y")
            events.append((event, y))
    model = make()
    wall, cpu = time.perf_counter(), time.process_time()
    for x, y in events:
        model.predict_log_proba_one(x)
        model.learn_one(x, y)
    return time.perf_counter() - wall, time.process_time() - cpu


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "orjson": orjson.__version__,
        "stream_nb": stream_nb.__version__,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def run_turns(
    families: list[Family],
    files: dict[StreamKey, Path],
    events: int,
    turns: int,
    exes: dict[str, str],
    tmp: Path,
) -> dict[str, dict[str, list[tuple[float, float, float]]]]:
    """Per checkout (``exes``: its ``stream-nb``) and family, ``(ceiling CPU s, run CPU
    s, run wall s)`` of every turn; in each turn a family's checkouts run one after the
    other, right after their stream's ceiling."""
    runs: dict[str, dict[str, list[tuple[float, float, float]]]] = {
        checkout: {f.name: [] for f in families} for checkout in exes
    }
    for turn in range(turns):
        for key, path in files.items():
            gc.collect()
            _, ceiling_cpu = ceiling(path, tmp / "ceiling.jsonl")
            for family in families:
                if _key(family, events) != key:
                    continue
                for checkout, exe in exes.items():
                    gc.collect()
                    wall, cpu = cli_run(exe, family.model, path, tmp / "out.jsonl", family.options)
                    runs[checkout][family.name].append((ceiling_cpu, cpu, wall))
                    print(
                        f"  turn {turn + 1}: {checkout} {family.name} on {family.label}: "
                        f"ceiling {ceiling_cpu:.2f} s CPU, stream-nb run {cpu:.2f} s CPU "
                        f"({ceiling_cpu / cpu:.1%})",
                        file=sys.stderr,
                    )
    return runs


def _key(family: Family, events: int) -> StreamKey:
    return family.stream, family.params, family.events(events)


def family_row(
    family: Family,
    n: int,
    size: int,
    turns: list[tuple[float, float, float]],
    baseline: list[tuple[float, float, float]] | None = None,
) -> dict[str, Any]:
    """One family's figures over its turns (and a baseline checkout's, in the same turns)."""
    ratios = [c / r for c, r, _ in turns]
    run_rates = [n / r for _, r, _ in turns]
    ceiling_rates = [n / c for c, _, _ in turns]
    median_ratio = statistics.median(ratios)
    before = None
    if baseline is not None:
        base_ratios = [c / r for c, r, _ in baseline]
        before = {
            "run_events_per_cpu_s_median": statistics.median(n / r for _, r, _ in baseline),
            "ratio_to_ceiling_cpu": {
                "median": statistics.median(base_ratios),
                "best": max(base_ratios),
            },
            # this checkout's CPU time against the baseline's, turn by turn
            "speedup_median": statistics.median(
                b / r for (_, r, _), (_, b, _) in zip(turns, baseline, strict=True)
            ),
        }
    return {
        "model": family.name,
        "stream": family.label,
        "events": n,
        "file_bytes": size,
        "target_ratio": family.target,
        "run_events_per_cpu_s": {"median": statistics.median(run_rates), "best": max(run_rates)},
        "run_events_per_wall_s_best": n / min(w for _, _, w in turns),
        "ceiling_events_per_cpu_s": {
            "median": statistics.median(ceiling_rates),
            "best": max(ceiling_rates),
        },
        "ratio_to_ceiling_cpu": {"median": median_ratio, "best": max(ratios)},
        "turn_ratios_cpu": sorted(ratios),
        "target_met": None if family.target is None else median_ratio >= family.target,
        "baseline": before,
    }


def breakdown_rows(
    family: Family, path: Path, n: int, repeats: int, tmp: Path
) -> list[dict[str, Any]]:
    """In-process rows that explain a family's gap: the engine with and without the
    evaluator, the null learner, and the learner alone per event (at most 200k events)."""
    make = family.make
    rows: dict[str, tuple[float, float]] = {
        "engine in process + evaluator": _best(
            lambda: in_process(make(), path, tmp / "e.jsonl", True), repeats
        ),
        "engine in process, no evaluator": _best(
            lambda: in_process(make(), path, tmp / "e.jsonl", False), repeats
        ),
        "engine in process, null learner (per-event path), no evaluator": _best(
            lambda: in_process(_NullLearner(), path, tmp / "e.jsonl", False), repeats
        ),
    }
    limit = min(n, 200_000)
    wall, cpu = _best(lambda: learner_alone(make, path, limit), repeats)
    rows["learner alone, per event (predict_log_proba_one + learn_one)"] = (
        wall * n / limit,
        cpu * n / limit,
    )
    return [
        {
            "model": family.name,
            "name": name,
            "events_per_s_wall": n / wall,
            "events_per_s_cpu": n / cpu,
        }
        for name, (wall, cpu) in rows.items()
    ]


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"`stream-nb run` file → file, every learner family on its `stream-nb demo` stream; "
        f"{result['turns']} alternating turns (each: the stream's ceiling, then its learners' "
        f"runs); events per CPU-second of the whole process, start-up included; machine: "
        f"{m['cpu']}, {m['cores']} cores, load {m['load_average'][0]:.1f}, Python {m['python']}",
        "",
        "| learner | stream | events | stream-nb run, events/CPU-s (median) | best "
        "| ceiling, events/CPU-s (median) | share of the ceiling (median) | best | target |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["families"]:
        run, ceil, ratio = (
            row["run_events_per_cpu_s"],
            row["ceiling_events_per_cpu_s"],
            row["ratio_to_ceiling_cpu"],
        )
        if row["target_ratio"] is None:
            target = "—"
        else:
            target = f"{row['target_ratio']:.0%}" + ("" if row["target_met"] else " (missed)")
        lines.append(
            f"| {row['model']} | {row['stream']} | {row['events']:,} | {run['median']:,.0f} "
            f"| {run['best']:,.0f} | {ceil['median']:,.0f} | {ratio['median']:.1%} "
            f"| {ratio['best']:.1%} | {target} |"
        )
    if result.get("baseline"):
        lines += [
            "",
            f"The same turns with the baseline checkout `{result['baseline']}` (run right after "
            "this checkout, after the same ceiling):",
            "",
            "| learner | stream | baseline, events/CPU-s (median) | baseline share (median) "
            "| this checkout's speed-up (median of the turns) |",
            "|---|---|---:|---:|---:|",
        ]
        for row in result["families"]:
            base = row["baseline"]
            lines.append(
                f"| {row['model']} | {row['stream']} | {base['run_events_per_cpu_s_median']:,.0f} "
                f"| {base['ratio_to_ceiling_cpu']['median']:.1%} | {base['speedup_median']:.2f}× |"
            )
    lines += [
        "",
        f"Start-up of `stream-nb run` alone (empty input): {result['startup_seconds_wall']:.2f} s "
        f"wall, {result['startup_seconds_cpu']:.2f} s CPU. Batch size {result['batch_size']} "
        "(the CLI default).",
    ]
    if result["breakdown"]:
        lines += [
            "",
            f"In process (best of {result['repeats']}):",
            "",
            "| learner | measurement | events/s (wall) | events/s (CPU) |",
            "|---|---|---:|---:|",
        ]
        for row in result["breakdown"]:
            lines.append(
                f"| {row['model']} | {row['name']} | {row['events_per_s_wall']:,.0f} "
                f"| {row['events_per_s_cpu']:,.0f} |"
            )
    return "\n".join(lines)


def write_plot(result: dict[str, Any], path: Path) -> None:
    """Events per CPU-second of each learner (median; a tick at the best), grouped by
    stream, on a log scale, with each stream's ceiling as a line over its group."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["families"]
    fig, ax = plt.subplots(figsize=(3.6 + 0.8 * len(rows), 4.2))
    streams = list(dict.fromkeys(row["stream"] for row in rows))
    colours = matplotlib.colormaps["tab10"]
    x = 0.0
    ticks, names = [], []
    for s, stream in enumerate(streams):
        group = [row for row in rows if row["stream"] == stream]
        start = x
        for row in group:
            run = row["run_events_per_cpu_s"]
            ax.bar(x, run["median"], width=0.7, color=colours(s))
            ax.plot([x - 0.35, x + 0.35], [run["best"]] * 2, color="black", linewidth=0.8)
            ax.text(
                x,
                run["median"] * 1.08,
                f"{row['ratio_to_ceiling_cpu']['median']:.0%}",
                ha="center",
                fontsize=7,
            )
            ticks.append(x)
            names.append(row["model"].replace(", ", "\n"))
            x += 1.0
        ceiling_rate = statistics.median(r["ceiling_events_per_cpu_s"]["median"] for r in group)
        ax.plot(
            [start - 0.45, x - 0.55],
            [ceiling_rate] * 2,
            color=colours(s),
            linestyle="--",
            label=f"ceiling, {stream}",
        )
        x += 0.6
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_yscale("log")
    ax.set_xticks(ticks, names, rotation=30, ha="right")
    ax.set_ylabel("events per CPU-second (whole process)")
    ax.set_title(
        "stream-nb run, file → file: median of the turns (tick: best), "
        "share of the parse+emit ceiling above each bar",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--events", type=int, default=1_000_000, help="lines of the agrawal/categorical streams"
    )
    parser.add_argument("--turns", type=int, default=5, help="alternating turns")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each in-process row")
    parser.add_argument(
        "--model", default=None, help="comma-separated learners (default: every family)"
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--breakdown", action="store_true", help="add the in-process rows")
    parser.add_argument("--profile", action="store_true", help="profile the in-process engine")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--plot", default=str(PLOT), help="the plot ('' for none)")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout (with its .venv) whose stream-nb runs in the same turns",
    )
    args = parser.parse_args(argv)
    families = list(FAMILIES)
    if args.model is not None:
        wanted = args.model.split(",")
        unknown = sorted(set(wanted) - {f.model for f in FAMILIES})
        if unknown:
            parser.error(
                f"--model: no family for {unknown}; choose from "
                f"{list(dict.fromkeys(f.model for f in FAMILIES))}"
            )
        families = [f for f in FAMILIES if f.model in wanted]
    tune_malloc()  # as stream-nb run does, for the in-process rows
    compile_bytecode()
    exe = shutil.which("stream-nb") or str(Path(sys.executable).parent / "stream-nb")
    exes = {"this": exe}
    if args.baseline is not None:
        exes["baseline"] = str(args.baseline.resolve() / ".venv" / "bin" / "stream-nb")
        if not Path(exes["baseline"]).exists():
            parser.error(f"--baseline: no {exes['baseline']}; install that checkout's .venv")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        # Written as generated: a million events held in this process would slow the
        # measured subprocess down (memory the machine reclaims from the page cache).
        files: dict[StreamKey, Path] = {}
        sizes: dict[StreamKey, int] = {}
        for family in families:
            key = _key(family, args.events)
            if key not in files:
                files[key] = tmp / f"stream{len(files)}.jsonl"
                sizes[key] = write_stream(files[key], key, args.seed)
        if args.profile:
            family = families[0]
            profiler = cProfile.Profile()
            profiler.runcall(
                in_process, family.make(), files[_key(family, args.events)], tmp / "p", True
            )
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
            print(text.getvalue())
            return 0
        runs = run_turns(families, files, args.events, args.turns, exes, tmp)
        breakdown = []
        if args.breakdown:
            for family in families:
                key = _key(family, args.events)
                breakdown += breakdown_rows(family, files[key], key[2], args.repeats, tmp)
        empty = tmp / "empty.jsonl"
        empty.write_bytes(b"")
        startup = _best(lambda: cli_run(exe, families[0].model, empty, tmp / "s.jsonl"), 3)
    result = {
        "turns": args.turns,
        "repeats": args.repeats,
        "seed": args.seed,
        "batch_size": _cli_batch_size(),
        "machine": machine(),
        "startup_seconds_wall": startup[0],
        "startup_seconds_cpu": startup[1],
        "baseline": None if args.baseline is None else str(args.baseline),
        "families": [
            family_row(
                family,
                _key(family, args.events)[2],
                sizes[_key(family, args.events)],
                runs["this"][family.name],
                runs["baseline"][family.name] if "baseline" in runs else None,
            )
            for family in families
        ],
        "breakdown": breakdown,
    }
    table = markdown(result)
    print(table)
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "engine.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.output / "engine.md").write_text(table + "\n")
    if args.plot:
        write_plot(result, Path(args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
