"""Prequential throughput of every stream-nb learner next to river's (and sklearn's, MOA's).

One command, one process, one run::

    python -m benchmarks.bench_learners            # full run, ~2-4 minutes
    python -m benchmarks.bench_learners --moa-jar /path/to/moa.jar   # + MOA in the JVM
    python -m benchmarks.bench_learners --moa      # moa.jar from $MOA_JAR or capymoa
    python -m benchmarks.bench_learners --profile GaussianNB          # where the time goes

For each row the same seeded stream is generated first (not timed), then each
model runs the prequential loop one event at a time::

    for x, y in events:
        model.predict_log_proba_one(x)   # river: predict_proba_one (it has no log variant)
        model.learn_one(x, y)

Each timing is the best of ``--repeats`` runs on a fresh model, in CPU time of
the process (``time.process_time``; wall-clock figures are kept in the JSON:
on a shared machine they also count time spent waiting for a core). Results go to
``benchmarks/results/learners.json`` and ``learners.md`` (a table for the
README), with the machine (CPU model, cores, load average, Python, library
versions). Benchmarks are not run in CI; ``tests/benchmarks`` runs a tiny
smoke version without timing assertions.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import gc
import io
import json
import os
import platform
import pstats
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import stream_nb
from stream_nb.datasets import categorical_stream, zipf_text

RESULTS = Path(__file__).resolve().parent / "results"

#: MOA NaiveBayes on MOA's Agrawal with the loop inside the JVM: a reference figure
#: quoted in the project's performance targets, not measured on this machine.
MOA_REFERENCE_EVENTS_PER_S = 280_000.0

Event = tuple[dict[str, Any], Any]

#: Floor for a measured CPU time (process_time ticks can be coarse): avoids a
#: division by zero on the tiny smoke-test runs.
_CLOCK_RESOLUTION = 1e-6


@dataclass
class Side:
    """One model of a comparison: how to build it and which events it runs on."""

    label: str
    make: Callable[[], Any]
    events: Sequence[Any]
    loop: Callable[[Any, Sequence[Any]], None]
    #: Events learned (``learn_one`` only, untimed) before the timed loop, so both
    #: sides of a comparison are timed on the same events with the same vocabulary.
    warmup: Sequence[Any] = ()


@dataclass
class Row:
    learner: str
    baseline: str
    stream: str
    events_ours: int
    events_baseline: int | None
    ours_per_s: float | None = None
    baseline_per_s: float | None = None
    ratio: float | None = None
    target: float | None = None
    passed: bool | None = None
    accuracy_ours: float | None = None
    accuracy_baseline: float | None = None
    note: str = ""
    ours_wall_per_s: float | None = None
    baseline_wall_per_s: float | None = None
    cpu_runs_ours: list[float] = field(default_factory=list)
    cpu_runs_baseline: list[float] = field(default_factory=list)
    wall_runs_ours: list[float] = field(default_factory=list)
    wall_runs_baseline: list[float] = field(default_factory=list)


# ---------------------------------------------------------------------- loops
def stream_nb_loop(model: Any, events: Sequence[Event]) -> None:
    predict = model.predict_log_proba_one
    learn = model.learn_one
    for x, y in events:
        predict(x)
        learn(x, y)


def river_loop(model: Any, events: Sequence[Event]) -> None:
    predict = model.predict_proba_one
    learn = model.learn_one
    for x, y in events:
        predict(x)
        learn(x, y)


def sklearn_loop(model: Any, events: Sequence[Any]) -> None:
    """``events`` is ``(classes, [(row, label_array), ...])`` pre-encoded as numpy arrays."""
    classes, rows = events[0], events[1]
    predict = model.predict_log_proba
    learn = model.partial_fit
    first = True
    for row, label in rows:
        if first:  # sklearn cannot predict before its first partial_fit
            learn(row, label, classes=classes)
            first = False
            continue
        predict(row)
        learn(row, label)


def best_time(side: Side, repeats: int) -> tuple[list[float], list[float]]:
    """CPU seconds and wall-clock seconds of each repeat, each on a fresh model.

    CPU time (``time.process_time``) is the headline: on a shared machine the
    wall clock also counts the time other processes held the CPU.
    """
    cpu, wall = [], []
    for _ in range(repeats):
        model = side.make()
        for x, y in side.warmup:
            model.learn_one(x, y)
        gc.collect()
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        side.loop(model, side.events)
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
    return cpu, wall


def accuracy(model: Any, events: Sequence[Event]) -> float:
    """Prequential accuracy (untimed): predict_one then learn_one; cold start counts as wrong."""
    correct = 0
    for x, y in events:
        correct += model.predict_one(x) == y
        model.learn_one(x, y)
    return correct / max(1, len(events))


# ---------------------------------------------------------------------- streams
def river_agrawal(n: int, seed: int = 42) -> list[Event]:
    from river.datasets import synth

    return list(synth.Agrawal(seed=seed).take(n))


def zipf(n: int, seed: int = 42) -> list[Event]:
    return list(zipf_text(seed=seed, n=n, vocabulary=20_000, length=(10, 60), classes=2))


def sklearn_categorical(events: Sequence[Event]) -> tuple[Any, list[Any], list[int]]:
    """Encode categorical events for sklearn: every category is known up front."""
    import numpy as np

    features = sorted({f for x, _ in events for f in x})
    values = [sorted({x[f] for x, _ in events if f in x}) for f in features]
    index = [{v: i for i, v in enumerate(vs)} for vs in values]
    labels = sorted({y for _, y in events})
    rows = [
        (
            np.array([[index[j][x[f]] for j, f in enumerate(features)]]),
            np.array([labels.index(y)]),
        )
        for x, y in events
    ]
    return np.arange(len(labels)), rows, [len(vs) for vs in values]


# ---------------------------------------------------------------------- rows
def _ours(name: str) -> type | None:
    obj = getattr(stream_nb, name, None)
    return obj if isinstance(obj, type) else None


def build_rows(sizes: dict[str, int]) -> list[tuple[Row, Side | None, Side | None]]:
    from river import naive_bayes as river_nb
    from sklearn.naive_bayes import CategoricalNB as SkCategoricalNB

    plan: list[tuple[Row, Side | None, Side | None]] = []
    agrawal = river_agrawal(sizes["agrawal"])
    river_gaussian = Side("river GaussianNB", river_nb.GaussianNB, agrawal, river_loop)
    for name in ("GaussianNB", "NaiveBayes"):
        cls = _ours(name)
        row = Row(
            name,
            "river GaussianNB",
            "river Agrawal(seed=42)",
            len(agrawal),
            len(agrawal),
            target=10.0 if name == "GaussianNB" else None,
        )
        ours = Side(name, cls, agrawal, stream_nb_loop) if cls else None
        if cls is None:
            row.note = f"{name} is not exported by stream_nb yet"
        plan.append((row, ours, river_gaussian))

    text = zipf(sizes["text"])
    # river's Bernoulli/Complement scan the vocabulary per prediction: both sides learn
    # the first events untimed and are timed on the same last ``text_slow`` events, when
    # the vocabulary is near its 20,000 words.
    split = len(text) - sizes["text_slow"]
    head, tail = text[:split], text[split:]
    for name, river_cls, target, their_events in (
        ("MultinomialNB", river_nb.MultinomialNB, 10.0, text),
        ("BernoulliNB", river_nb.BernoulliNB, 100.0, tail),
        ("ComplementNB", river_nb.ComplementNB, 100.0, tail),
    ):
        cls = _ours(name)
        row = Row(
            name,
            f"river {name}",
            "Zipf text, 20,000-word vocabulary (seed=42)",
            len(text),
            len(their_events),
            target=target,
        )
        warmup: Sequence[Event] = ()
        if len(their_events) < len(text):
            warmup = head
            row.events_ours = len(their_events)
            row.note = (
                f"both timed on the last {len(their_events):,} of {len(text):,} events, after "
                f"learning the first {len(head):,} untimed (river scans its whole vocabulary "
                "per prediction)"
            )
        ours = Side(name, cls, their_events, stream_nb_loop, warmup) if cls else None
        plan.append((row, ours, Side(f"river {name}", river_cls, their_events, river_loop, warmup)))

    cat = list(categorical_stream(seed=42, n=sizes["categorical"], features=10, values=5))
    cat_slow = cat[: sizes["categorical_slow"]]
    classes, rows, n_categories = sklearn_categorical(cat_slow)
    row = Row(
        "CategoricalNB",
        "sklearn CategoricalNB.partial_fit",
        "categorical_stream(seed=42): 10 features × 5 values, 3 classes",
        len(cat),
        len(cat_slow),
        note="river has no categorical NB; sklearn needs every category and class up front",
    )
    sk = Side(
        "sklearn CategoricalNB",
        lambda: SkCategoricalNB(min_categories=n_categories),
        (classes, rows),
        sklearn_loop,
    )
    plan.append((row, Side("CategoricalNB", stream_nb.CategoricalNB, cat, stream_nb_loop), sk))
    return plan


def run_rows(sizes: dict[str, int], repeats: int, log: Callable[[str], None]) -> list[Row]:
    done = []
    for row, ours, theirs in build_rows(sizes):
        if ours is not None:
            row.cpu_runs_ours, row.wall_runs_ours = best_time(ours, repeats)
            row.ours_per_s = row.events_ours / max(min(row.cpu_runs_ours), _CLOCK_RESOLUTION)
            row.ours_wall_per_s = row.events_ours / min(row.wall_runs_ours)
            row.accuracy_ours = accuracy(ours.make(), ours.events[: sizes["accuracy"]])
        if theirs is not None:
            row.cpu_runs_baseline, row.wall_runs_baseline = best_time(theirs, repeats)
            assert row.events_baseline is not None
            cpu = max(min(row.cpu_runs_baseline), _CLOCK_RESOLUTION)
            row.baseline_per_s = row.events_baseline / cpu
            row.baseline_wall_per_s = row.events_baseline / min(row.wall_runs_baseline)
            if theirs.loop is river_loop:
                row.accuracy_baseline = accuracy(theirs.make(), theirs.events[: sizes["accuracy"]])
        if row.ours_per_s and row.baseline_per_s:
            row.ratio = row.ours_per_s / row.baseline_per_s
            if row.target is not None:
                row.passed = row.ratio >= row.target
        log(
            f"{row.learner:14s} {_fmt(row.ours_per_s):>12s} ev/s   {row.baseline:34s} "
            f"{_fmt(row.baseline_per_s):>10s} ev/s   ratio {_fmt_ratio(row.ratio)}"
        )
        done.append(row)
    return done


# ---------------------------------------------------------------------- MOA
def run_moa(jar: str, n: int, log: Callable[[str], None]) -> dict[str, Any]:
    """MOA's NaiveBayes on MOA's Agrawal, prequential, the whole loop inside the JVM.

    Uses MOA's own ``EvaluatePrequential`` task (test then train on each
    instance) and its reported CPU time for the evaluation loop.
    """
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java not found on PATH; MOA needs a JVM (Java 11+)")
    task = (
        f"EvaluatePrequential -l bayes.NaiveBayes -s (generators.AgrawalGenerator -i 42) "
        f"-e BasicClassificationPerformanceEvaluator -i {n} -f {n}"
    )
    cpu_runs, wall_runs = [], []
    for _ in range(3):
        start = time.perf_counter()
        out = subprocess.run(
            [java, "-Xmx1g", "-cp", jar, "moa.DoTask", task],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        ).stdout
        wall_runs.append(time.perf_counter() - start)
        cpu_runs.append(_moa_cpu_seconds(out))
        log(
            f"MOA NaiveBayes: {n:,} events, evaluation cpu {cpu_runs[-1]:.3f} s, "
            f"JVM wall {wall_runs[-1]:.2f} s (with JVM start)"
        )
    return {
        "events": n,
        "events_per_s": n / min(cpu_runs),
        "wall_events_per_s_including_jvm_start": n / min(wall_runs),
        "cpu_runs": cpu_runs,
        "wall_runs": wall_runs,
        "task": task,
        "measured": True,
        "how": "moa.DoTask EvaluatePrequential, CPU seconds of MOA's evaluation thread "
        "(JIT and GC threads not counted), best of 3",
    }


def find_capymoa_jar() -> str | None:
    """``moa.jar`` shipped inside an importable capymoa package, if any."""
    import importlib.util

    spec = importlib.util.find_spec("capymoa")
    if spec is None or spec.origin is None:
        return None
    jar = Path(spec.origin).parent / "jar" / "moa.jar"
    return str(jar) if jar.is_file() else None


def _moa_cpu_seconds(output: str) -> float:
    lines = [line for line in output.splitlines() if line.strip()]
    header_index = next(i for i, line in enumerate(lines) if "evaluation time" in line)
    header = lines[header_index].split(",")
    values = lines[-1].split(",")
    column = next(i for i, name in enumerate(header) if "evaluation time" in name)
    return float(values[column])


# ---------------------------------------------------------------------- report
def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        match = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        if match:
            cpu = match.group(1).strip()
    except OSError:
        pass
    versions: dict[str, str | None] = {
        "python": platform.python_version(),
        "stream_nb": stream_nb.__version__,
    }
    for module in ("river", "sklearn", "numpy"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:
            versions[module] = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "platform": platform.platform(),
        "versions": versions,
        "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"),
    }


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:,.0f}"


def _fmt_ratio(v: float | None) -> str:
    return "—" if v is None else f"{v:,.1f}×"


def markdown(rows: Iterable[Row], info: dict[str, Any], moa: dict[str, Any], repeats: int) -> str:
    lines = [
        "| learner | stream | stream-nb events/s | baseline | baseline events/s "
        "| ratio | target | pass | prequential accuracy (ours / baseline) |",
        "|---|---|---:|---|---:|---:|---:|:---:|---|",
    ]
    notes = []
    for row in rows:
        verdict = "—" if row.passed is None else ("✅" if row.passed else "❌")
        target = "—" if row.target is None else f"≥{row.target:.0f}×"
        acc = "—"
        if row.accuracy_ours is not None:
            acc = f"{row.accuracy_ours:.3f} / " + (
                "—" if row.accuracy_baseline is None else f"{row.accuracy_baseline:.3f}"
            )
        lines.append(
            f"| {row.learner} | {row.stream} | {_fmt(row.ours_per_s)} | {row.baseline} "
            f"| {_fmt(row.baseline_per_s)} | {_fmt_ratio(row.ratio)} | {target} | {verdict} "
            f"| {acc} |"
        )
        if row.note:
            notes.append(f"- {row.learner}: {row.note}.")
    gaussian = next((r for r in rows if r.learner == "GaussianNB" and r.ours_per_s), None)
    how = ("measured here, " if moa["measured"] else "") + moa["how"]
    moa_line = (
        "MOA NaiveBayes on MOA's Agrawal, loop inside the JVM: "
        f"{_fmt(moa['events_per_s'])} events/s ({how})"
    )
    if gaussian and gaussian.ours_per_s:
        share = gaussian.ours_per_s / moa["events_per_s"]
        moa_line += f"; stream-nb GaussianNB from Python reaches {share:.2f}× of it"
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v)
    out = [
        f"Prequential loop (`predict_log_proba_one` then `learn_one`, one event at a time; "
        f"river: `predict_proba_one`), events per CPU second, best of {repeats} runs, "
        f"measured {info['date_utc']} UTC on {info['cpu']}, {info['cores']} cores "
        f"(load average {info['load_average'][0]} at the end: the machine was shared, "
        f"figures are noisy), {versions}.",
        "",
        *lines,
        "",
        *notes,
        f"- {moa_line}.",
        "",
        "Reproduce: `python -m benchmarks.bench_learners` "
        "(writes benchmarks/results/learners.json and learners.md).",
    ]
    return "\n".join(out) + "\n"


def profile(name: str, sizes: dict[str, int]) -> str:
    """cProfile of one stream-nb learner's prequential loop (top 15 by own time)."""
    for row, ours, _ in build_rows(sizes):
        if row.learner == name and ours is not None:
            profiler = cProfile.Profile()
            model = ours.make()
            profiler.enable()
            ours.loop(model, ours.events)
            profiler.disable()
            buffer = io.StringIO()
            pstats.Stats(profiler, stream=buffer).sort_stats("tottime").print_stats(15)
            return buffer.getvalue()
    raise SystemExit(f"--profile: no stream-nb learner named {name!r} in the benchmark")


# ---------------------------------------------------------------------- CLI
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_learners",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--agrawal-events", type=int, default=100_000, help="Agrawal events")
    parser.add_argument("--text-events", type=int, default=20_000, help="Zipf text events")
    parser.add_argument(
        "--text-slow-events",
        type=int,
        default=2_000,
        help="events for river's BernoulliNB/ComplementNB (they scan the vocabulary)",
    )
    parser.add_argument("--categorical-events", type=int, default=20_000)
    parser.add_argument(
        "--categorical-slow-events", type=int, default=2_000, help="events for sklearn"
    )
    parser.add_argument("--accuracy-events", type=int, default=10_000, help="untimed accuracy pass")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the best is kept")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for learners.*")
    parser.add_argument(
        "--moa",
        action="store_true",
        help="also time MOA NaiveBayes on MOA's Agrawal inside the JVM; moa.jar is taken from "
        "--moa-jar, else $MOA_JAR, else an installed capymoa package",
    )
    parser.add_argument(
        "--moa-jar",
        default=os.environ.get("MOA_JAR"),
        help="path to moa.jar (e.g. capymoa/jar/moa.jar from the capymoa wheel); implies --moa "
        "(env MOA_JAR)",
    )
    parser.add_argument("--moa-events", type=int, default=1_000_000)
    parser.add_argument("--profile", metavar="LEARNER", help="print a cProfile of one learner")
    args = parser.parse_args(argv)
    for name in (
        "agrawal_events",
        "text_events",
        "text_slow_events",
        "categorical_events",
        "categorical_slow_events",
        "repeats",
    ):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    sizes = {
        "agrawal": args.agrawal_events,
        "text": args.text_events,
        "text_slow": min(args.text_slow_events, args.text_events),
        "categorical": args.categorical_events,
        "categorical_slow": min(args.categorical_slow_events, args.categorical_events),
        "accuracy": args.accuracy_events,
    }

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.profile:
        print(profile(args.profile, sizes))
        return 0

    jar = args.moa_jar
    if args.moa and jar is None:
        jar = find_capymoa_jar()
        if jar is None:
            parser.error(
                "--moa needs moa.jar: pass --moa-jar PATH, set MOA_JAR, or install capymoa "
                "in a separate venv and point --moa-jar at its capymoa/jar/moa.jar"
            )
    rows = run_rows(sizes, args.repeats, log)
    if jar:
        moa = run_moa(jar, args.moa_events, log)
    else:
        moa = {
            "events_per_s": MOA_REFERENCE_EVENTS_PER_S,
            "measured": False,
            "how": "reference figure quoted in issue #2, NOT measured here; "
            "pass --moa or --moa-jar to measure",
        }
    info = machine()
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": info,
        "repeats": args.repeats,
        "sizes": sizes,
        "rows": [asdict(r) for r in rows],
        "moa": moa,
    }
    (args.out / "learners.json").write_text(json.dumps(payload, indent=2) + "\n")
    table = markdown(rows, info, moa, args.repeats)
    (args.out / "learners.md").write_text(table)
    print(table, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
