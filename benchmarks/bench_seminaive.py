"""Prequential throughput, memory and accuracy of AODE, TAN and KDB next to Naive Bayes.

One command::

    python -m benchmarks.bench_seminaive              # full run, a few minutes
    python -m benchmarks.bench_seminaive --quick      # small smoke run
    python -m benchmarks.bench_seminaive --profile    # + cProfile of AODE on LED
    python -m benchmarks.bench_seminaive --engine --baseline ../main   # stream-nb run

Streams (generated first, not timed):

* ``led24``: river's ``LED(noise_percentage=0.1, irrelevant_features=True)``,
  24 binary features (7 segments + 17 irrelevant), 10 classes; values as
  strings so every learner sees categorical features from the first event.
* ``tree-d10`` / ``tree-d20`` / ``tree-d40``: a random tree-structured Bayesian
  network with ``d`` ternary features, 3 classes (each feature copies its
  tree parent with probability 0.7, else ``(parent + y) mod 3``).
* ``agrawal``: river's ``Agrawal(classification_function=2)``, 9 mixed
  numeric features (discretised online by the semi-naive learners).

Each model runs the prequential loop one event at a time (timed)::

    for x, y in events:
        model.predict_log_proba_one(x)
        model.learn_one(x, y)

then, in a second untimed pass under ``tracemalloc``, the peak memory of
building the model. ``model_size()`` reports the stored counts. The baseline
is ``stream_nb.NaiveBayes`` when it exists, else ``CategoricalNB`` (on
``agrawal``: ``GaussianNB`` when it exists). Results go to
``benchmarks/results/seminaive.json`` and ``seminaive.md``.

``--engine`` measures instead ``stream-nb run`` file → file (each learner with
its defaults, a subprocess per run) on ``stream-nb demo --demo categorical``
events, as a share of the parse+emit ceiling of
:func:`benchmarks.bench_engine.ceiling` on the same lines: CPU seconds of the
whole process, turns alternating ceiling, this checkout and (``--baseline
PATH``) another checkout of stream-nb run with the same interpreter. Results
go to ``benchmarks/results/seminaive_engine.json`` and ``seminaive_engine.md``.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import json
import os
import platform
import pstats
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stream_nb
from benchmarks.bench_engine import ceiling
from stream_nb import AODE, KDB, TAN, CategoricalNB, Learner

RESULTS = Path(__file__).resolve().parent / "results"

Event = tuple[dict[str, Any], Any]


def led_stream(n: int, seed: int = 1) -> list[Event]:
    from river.datasets import synth

    stream = synth.LED(seed=seed, noise_percentage=0.1, irrelevant_features=True)
    return [({f"s{k}": str(v) for k, v in x.items()}, y) for x, y in stream.take(n)]


def agrawal_stream(n: int, seed: int = 1) -> list[Event]:
    from river.datasets import synth

    return list(synth.Agrawal(classification_function=2, seed=seed).take(n))


def tree_stream(n: int, d: int, seed: int = 1) -> list[Event]:
    """A random tree BN: feature k > 0 has a parent drawn among features 0..k-1."""
    rng = random.Random(seed)
    parents = [None] + [rng.randrange(k) for k in range(1, d)]
    out: list[Event] = []
    for _ in range(n):
        y = rng.randrange(3)
        v: list[int] = []
        for k in range(d):
            p = parents[k]
            if p is None:
                v.append(y if rng.random() < 0.5 else rng.randrange(3))
            else:
                v.append(v[p] if rng.random() < 0.7 else (v[p] + y) % 3)
        out.append(({f"x{k}": f"v{val}" for k, val in enumerate(v)}, y))
    return out


def baselines(numeric: bool) -> list[tuple[str, Callable[[], Learner]]]:
    nb = getattr(stream_nb, "NaiveBayes", None)
    if nb is not None:
        return [("NaiveBayes", nb)]
    if numeric and getattr(stream_nb, "GaussianNB", None) is not None:
        return [("GaussianNB", stream_nb.GaussianNB)]
    return [("CategoricalNB", CategoricalNB)]


SEMI: list[tuple[str, Callable[[], Learner]]] = [
    ("AODE", AODE),
    ("TAN", TAN),
    ("KDB(k=2)", lambda: KDB(k=2)),
]


def prequential(model: Learner, events: list[Event]) -> tuple[float, float, float]:
    """(events/s wall, events/s CPU, accuracy) of predict_log_proba_one then learn_one.

    CPU time (``time.process_time``) is less distorted than wall time when
    other processes share the cores; both are reported.
    """
    hits = 0
    predict = model.predict_log_proba_one
    learn = model.learn_one
    start = time.perf_counter()
    cpu = time.process_time()
    for x, y in events:
        lp = predict(x)
        if lp and max(lp, key=lp.__getitem__) == y:
            hits += 1
        learn(x, y)
    cpu = time.process_time() - cpu
    elapsed = time.perf_counter() - start
    return len(events) / elapsed, len(events) / max(cpu, 1e-9), hits / len(events)


def peak_memory(factory: Callable[[], Learner], events: list[Event]) -> int:
    """Peak bytes traced while building and using the model (tracemalloc)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    model = factory()
    for x, y in events:
        model.predict_log_proba_one(x)
        model.learn_one(x, y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def run(n_events: dict[str, int]) -> list[dict[str, Any]]:
    streams: dict[str, tuple[list[Event], bool]] = {
        "led24": (led_stream(n_events["led24"]), False),
        "tree-d10": (tree_stream(n_events["tree"], 10), False),
        "tree-d20": (tree_stream(n_events["tree"], 20), False),
        "tree-d40": (tree_stream(n_events["tree"], 40), False),
        "agrawal": (agrawal_stream(n_events["agrawal"]), True),
    }
    rows = []
    for name, (events, numeric) in streams.items():
        d = len(events[0][0])
        for label, factory in baselines(numeric) + SEMI:
            model = factory()
            eps, eps_cpu, acc = prequential(model, events)
            size = model.model_size()
            peak = peak_memory(factory, events)
            row = {
                "stream": name,
                "features": d,
                "events": len(events),
                "learner": label,
                "events_per_s": round(eps, 1),
                "events_per_cpu_s": round(eps_cpu, 1),
                "accuracy": round(acc, 4),
                "stored_counts": size["stored_counts"],
                "size_bytes_estimate": size["bytes"],
                "tracemalloc_peak_bytes": peak,
            }
            rows.append(row)
            print(
                f"{name:9} d={d:2} {label:13} {eps:9.0f} ev/s {eps_cpu:9.0f} ev/cpu-s  "
                f"acc {acc:.3f}  counts {size['stored_counts']:8d}  peak {peak / 1e6:7.1f} MB",
                flush=True,
            )
    return rows


def profile_aode(n: int) -> str:
    events = led_stream(n)
    model = AODE()
    profiler = cProfile.Profile()
    profiler.enable()
    for x, y in events:
        model.predict_log_proba_one(x)
        model.learn_one(x, y)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(8)
    return out.getvalue()


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def write(rows: list[dict[str, Any]], info: dict[str, Any], profile: str | None, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    payload = {"machine": info, "rows": rows, "profile_aode_led24": profile}
    (out / "seminaive.json").write_text(json.dumps(payload, indent=2) + "\n")
    lines = [
        "# Semi-naive Bayes: prequential throughput, memory, accuracy",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores, load average {info['load_average']}, "
        f"Python {info['python']}, {info['date']}. One event at a time "
        "(predict_log_proba_one then learn_one); the semi-naive learners keep their pair "
        "counts in a dense numpy block (stream_nb/seminaive/_dense.py). "
        "The machine is shared with other jobs: CPU time is the steadier figure.",
        "",
        "| stream | d | events | learner | events/s (wall) | events/CPU-s | accuracy "
        "| stored counts | size estimate (MB) | tracemalloc peak (MB) |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['stream']} | {r['features']} | {r['events']} | {r['learner']} "
            f"| {r['events_per_s']:,.0f} | {r['events_per_cpu_s']:,.0f} | {r['accuracy']:.3f} "
            f"| {r['stored_counts']:,} "
            f"| {r['size_bytes_estimate'] / 1e6:.1f} | {r['tracemalloc_peak_bytes'] / 1e6:.1f} |"
        )
    if profile:
        lines += ["", "AODE on led24, cProfile (tottime):", "", "```", profile.strip(), "```"]
    (out / "seminaive.md").write_text("\n".join(lines) + "\n")


ENGINE_MODELS = ("AODE", 'SPODE:{"parent": "f0"}', "TAN", "KDB")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cli_run(checkout: Path, model: str, src: Path, dst: Path) -> float:
    """CPU seconds of ``stream-nb run`` (this interpreter, ``checkout`` first on the path;
    run from ``src``'s directory, so that no other checkout in the working directory
    comes first)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    args = [sys.executable, "-m", "stream_nb.cli", "run", "--model", model]
    args += ["--source", str(src), "--sink", str(dst), "--report", os.devnull]
    args += ["--log-level", "WARNING"]
    cpu = _children_cpu()
    subprocess.run(args, check=True, env=env, stdout=subprocess.DEVNULL, cwd=src.parent)
    return _children_cpu() - cpu


def engine_shares(
    n: int, repeats: int, models: tuple[str, ...], checkouts: dict[str, Path]
) -> dict[str, Any]:
    """Events per CPU-s of ``stream-nb run`` and its share of the ceiling, by model and
    checkout, turns alternating (median and best of the per-turn shares)."""
    root = Path(__file__).resolve().parent.parent
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        demo = [sys.executable, "-m", "stream_nb.cli", "demo", "--demo", "categorical"]
        env = {**os.environ, "PYTHONPATH": str(root)}
        with open(src, "wb") as out:
            subprocess.run([*demo, "--limit", str(n)], check=True, stdout=out, env=env, cwd=tmp)
        empty = Path(tmp) / "empty.jsonl"
        empty.write_bytes(b"")
        # start-up (imports, CLI, engine set-up): the same command on no events, best of 3
        startup = {
            name: min(cli_run(path, models[0], empty, dst) for _ in range(3))
            for name, path in checkouts.items()
        }
        for model in models:
            cpu: dict[str, list[float]] = {"ceiling": [], **{name: [] for name in checkouts}}
            for _ in range(repeats):
                cpu["ceiling"].append(ceiling(src, dst)[1])
                for name, path in checkouts.items():
                    cpu[name].append(cli_run(path, model, src, dst))
            for name in checkouts:
                shares = [c / r for c, r in zip(cpu["ceiling"], cpu[name], strict=True)]
                less = [
                    c / max(r - startup[name], 1e-9)
                    for c, r in zip(cpu["ceiling"], cpu[name], strict=True)
                ]
                rows.append(
                    {
                        "model": model,
                        "checkout": name,
                        "events_per_cpu_s": n / min(cpu[name]),
                        "ceiling_events_per_cpu_s": n / min(cpu["ceiling"]),
                        "share_median": statistics.median(shares),
                        "share_best": max(shares),
                        "startup_cpu_seconds": startup[name],
                        "share_less_startup_median": statistics.median(less),
                        "cpu_seconds": cpu[name],
                        "ceiling_cpu_seconds": cpu["ceiling"],
                    }
                )
                row = rows[-1]
                print(
                    f"{model:26} {name:9} {row['events_per_cpu_s']:9,.0f} ev/CPU-s  "
                    f"share median {row['share_median']:.3f} best {row['share_best']:.3f}",
                    flush=True,
                )
    return {"events": n, "repeats": repeats, "stream": "stream-nb demo categorical", "rows": rows}


def write_engine(payload: dict[str, Any], info: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    payload = {"machine": info, **payload}
    (out / "seminaive_engine.json").write_text(json.dumps(payload, indent=2) + "\n")
    lines = [
        "# Semi-naive Bayes through `stream-nb run`: share of the parse+emit ceiling",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores, load average {info['load_average']}, "
        f"Python {info['python']}, {info['date']}. {payload['events']:,} `{payload['stream']}` "
        f"events, file to file, {payload['repeats']} turns alternating ceiling and checkouts; "
        "CPU time of the whole process.",
        "",
        "| model | checkout | events/CPU-s (best) | ceiling events/CPU-s | share (median) "
        "| share (best) | start-up CPU-s | share less start-up (median) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in payload["rows"]:
        lines.append(
            f"| {r['model']} | {r['checkout']} | {r['events_per_cpu_s']:,.0f} "
            f"| {r['ceiling_events_per_cpu_s']:,.0f} | {r['share_median']:.3f} "
            f"| {r['share_best']:.3f} | {r['startup_cpu_seconds']:.2f} "
            f"| {r['share_less_startup_median']:.3f} |"
        )
    lines += [
        "",
        "Start-up: the same command on an empty file (imports, CLI, engine set-up), best of "
        "3; the last column is the ceiling's CPU time over the run's less that start-up.",
    ]
    (out / "seminaive_engine.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small smoke run (few events)")
    parser.add_argument("--events", type=int, default=3000, help="events per stream")
    parser.add_argument("--profile", action="store_true", help="add a cProfile of AODE on LED")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for the results")
    parser.add_argument("--no-write", action="store_true", help="do not write any results")
    parser.add_argument(
        "--engine", action="store_true", help="measure stream-nb run against the ceiling instead"
    )
    parser.add_argument(
        "--baseline", type=Path, default=None, help="another checkout to run alongside (--engine)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="alternating turns (--engine)")
    parser.add_argument(
        "--models", default=";".join(ENGINE_MODELS), help="--model values, ';'-separated (--engine)"
    )
    args = parser.parse_args(argv)
    if args.engine:
        checkouts = {"this": Path(__file__).resolve().parent.parent}
        if args.baseline is not None:
            checkouts["baseline"] = args.baseline.resolve()
        models = tuple(args.models.split(";"))
        n = 2000 if args.quick else 10 * args.events
        payload = engine_shares(n, 1 if args.quick else args.repeats, models, checkouts)
        if not args.no_write:
            write_engine(payload, machine(), args.out)
        return 0
    n = 30 if args.quick else args.events
    if n < 10:
        parser.error(f"--events must be at least 10, got {n}")
    rows = run({"led24": n, "tree": n, "agrawal": n})
    profile = profile_aode(min(n, 1000)) if args.profile else None
    if profile:
        print(profile)
    if not args.no_write:
        write(rows, machine(), profile, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
