"""AODE one event at a time: stream-nb next to Weka's AODE on the same LED-24 events.

One command::

    python -m benchmarks.bench_weka_aode              # 20,000 events, 5 alternating turns
    python -m benchmarks.bench_weka_aode --quick      # smoke run (few events, one turn)

The stream is river's ``LED(noise_percentage=0.1, irrelevant_features=True)``
(24 binary features, 10 classes), values as strings for stream-nb and the same
events as nominal attributes in an ARFF file for Weka (both written first, not
timed). Each turn runs, one after the other:

``Weka``
    ``weka.classifiers.bayes.AODE -F 1`` (updateable), in a JVM of its own:
    ``benchmarks/java/AodeLoop.java`` loops ``distributionForInstance`` then
    ``updateClassifier`` over the instances, starting from an empty model, and
    reports the CPU time of that loop (the thread's, JIT compilation included;
    JVM start and ARFF parsing excluded). Weka comes from Maven Central
    (``nz.ac.waikato.cms.weka:weka-stable``, 3.6.14: the last line whose jar
    holds AODE, moved to a package in 3.7) into ``.cache/m2``; the class is
    compiled with ``javac`` into ``.cache/weka``.
``stream-nb``
    ``AODE()`` in this process: ``predict_proba_one(x)`` then ``learn_one(x, y)``
    per event, timed with ``time.process_time``.

The ratio of each turn (stream-nb events/CPU-s over Weka's) is reported with
the median over turns, and the ratio of the two best figures. An untimed pass
also compares the two models' probabilities on every event once every value
and class has been seen. Results go to ``benchmarks/results/weka_aode.json``
and ``weka_aode.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from stream_nb import AODE

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "AodeLoop.java"
CACHE = ROOT / ".cache"
WEKA = ("nz.ac.waikato.cms.weka", "weka-stable", "3.6.14")

Event = tuple[dict[str, str], Hashable]


def led_events(n: int, seed: int = 1) -> list[Event]:
    """river's LED-24 stream with the values as strings (categorical for stream-nb)."""
    from river.datasets import synth

    stream = synth.LED(seed=seed, noise_percentage=0.1, irrelevant_features=True)
    return [({f"s{k}": str(v) for k, v in x.items()}, y) for x, y in stream.take(n)]


def write_arff(events: list[Event], path: Path) -> None:
    """The events as an ARFF file: nominal ``{0,1}`` attributes, then the class."""
    names = list(events[0][0])
    classes = sorted({y for _x, y in events} | set(range(10)), key=str)
    lines = ["@relation led24"]
    lines += [f"@attribute {name} {{0,1}}" for name in names]
    lines += ["@attribute class {" + ",".join(map(str, classes)) + "}", "@data"]
    lines += [",".join([*(x[name] for name in names), str(y)]) for x, y in events]
    path.write_text("\n".join(lines) + "\n")


def weka_jar(cache: Path = CACHE) -> Path:
    """Weka's jar from Maven Central into ``cache/m2`` (``mvn dependency:get``), once."""
    group, artifact, version = WEKA
    repo = cache / "m2"
    jar = repo.joinpath(*group.split("."), artifact, version, f"{artifact}-{version}.jar")
    if not jar.exists():
        subprocess.run(
            [
                "mvn",
                "-q",
                "-B",
                f"-Dmaven.repo.local={repo}",
                "dependency:get",
                f"-Dartifact={group}:{artifact}:{version}",
                "-Dtransitive=false",
            ],
            check=True,
        )
    return jar


def compile_loop(jar: Path, cache: Path = CACHE) -> Path:
    """``AodeLoop.class`` compiled against ``jar`` into ``cache/weka`` (when stale)."""
    out = cache / "weka"
    target = out / "AodeLoop.class"
    if not target.exists() or target.stat().st_mtime < JAVA_SOURCE.stat().st_mtime:
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-cp", str(jar), "-d", str(out), str(JAVA_SOURCE)], check=True)
    return out


def run_weka(
    jar: Path, classes: Path, arff: Path, probabilities: Path | None = None
) -> dict[str, float]:
    """One JVM: Weka's prequential loop over ``arff`` (see the module docstring)."""
    command = ["java", "-cp", f"{jar}{os.pathsep}{classes}", "AodeLoop", str(arff)]
    if probabilities is not None:
        command.append(str(probabilities))
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    n, cpu_ns, wall_ns, hits = (int(v) for v in done.stdout.split())
    return {"events": n, "cpu_s": cpu_ns / 1e9, "wall_s": wall_ns / 1e9, "hits": hits}


def run_stream_nb(events: list[Event]) -> dict[str, float]:
    """stream-nb's AODE, ``predict_proba_one`` then ``learn_one`` per event."""
    model = AODE()
    predict = model.predict_proba_one
    learn = model.learn_one
    hits = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for x, y in events:
        p = predict(x)
        if p and max(p, key=p.__getitem__) == y:
            hits += 1
        learn(x, y)
    cpu = time.process_time() - cpu
    wall = time.perf_counter() - wall
    return {"events": len(events), "cpu_s": cpu, "wall_s": wall, "hits": hits}


def all_seen_at(events: list[Event]) -> int:
    """The first event by which every (feature, value) and class had been learned."""
    items = {(f, v) for x, _y in events for f, v in x.items()}
    labels = {y for _x, y in events}
    seen: set[Any] = set()
    for t, (x, y) in enumerate(events):
        if len(seen) == len(items) + len(labels):
            return t
        seen.update(x.items())
        seen.add(("class", y))
    return len(events)


def agreement(events: list[Event], weka_csv: Path) -> dict[str, Any]:
    """Largest |P_stream-nb − P_Weka| over the events after :func:`all_seen_at`."""
    rows = [[float(v) for v in line.split(",")] for line in weka_csv.read_text().split()]
    start = all_seen_at(events)
    model = AODE()
    worst = 0.0
    for t, (x, y) in enumerate(events):
        if t >= start:
            p = model.predict_proba_one(x)
            worst = max(worst, max(abs(p.get(k, 0.0) - q) for k, q in enumerate(rows[t])))
        model.learn_one(x, y)
    return {"from_event": start, "events_compared": len(events) - start, "max_abs_diff": worst}


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
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": sys.version.split()[0],
        "java": java.splitlines()[0] if java else None,
        "weka": ":".join(WEKA),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def measure(n: int, repeats: int, workdir: Path) -> dict[str, Any]:
    """Alternating turns of Weka and stream-nb on the same ``n`` events."""
    events = led_events(n)
    arff = workdir / "led24.arff"
    write_arff(events, arff)
    jar = weka_jar()
    classes = compile_loop(jar)
    turns = []
    for turn in range(repeats):
        order = ("weka", "stream-nb") if turn % 2 == 0 else ("stream-nb", "weka")
        row: dict[str, Any] = {}
        for who in order:
            row[who] = run_weka(jar, classes, arff) if who == "weka" else run_stream_nb(events)
        for who in ("weka", "stream-nb"):
            row[who]["events_per_cpu_s"] = n / max(row[who]["cpu_s"], 1e-9)
        row["ratio"] = row["stream-nb"]["events_per_cpu_s"] / row["weka"]["events_per_cpu_s"]
        turns.append(row)
        print(
            f"turn {turn + 1}: Weka {row['weka']['events_per_cpu_s']:9,.0f} ev/CPU-s  "
            f"stream-nb {row['stream-nb']['events_per_cpu_s']:9,.0f} ev/CPU-s  "
            f"ratio {row['ratio']:.3f}",
            flush=True,
        )
    csv = workdir / "weka_probabilities.csv"
    run_weka(jar, classes, arff, csv)
    best = {w: max(t[w]["events_per_cpu_s"] for t in turns) for w in ("weka", "stream-nb")}
    return {
        "stream": "LED-24 (river, noise 0.1, irrelevant features), values as strings",
        "events": n,
        "turns": turns,
        "median_ratio": statistics.median(t["ratio"] for t in turns),
        "best_ratio": best["stream-nb"] / best["weka"],
        "best_events_per_cpu_s": best,
        "accuracy": {w: turns[0][w]["hits"] / n for w in ("weka", "stream-nb")},
        "agreement": agreement(events, csv),
    }


def write(payload: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "weka_aode.json").write_text(json.dumps(payload, indent=2) + "\n")
    info = payload["machine"]
    agree = payload["agreement"]
    lines = [
        "# AODE one event at a time: stream-nb and Weka",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores, load average "
        f"{', '.join(f'{v:.2f}' for v in info['load_average'])}; Python {info['python']}, "
        f"{info['java']}, Weka {info['weka']}; {info['date']}.",
        "",
        f"{payload['events']:,} LED-24 events, prequential (predict, then learn), "
        "events per CPU-second of the loop, turns alternating "
        "(see benchmarks/bench_weka_aode.py).",
        "",
        "| turn | Weka AODE -F 1 | stream-nb AODE | ratio |",
        "|---:|---:|---:|---:|",
    ]
    for t, row in enumerate(payload["turns"], 1):
        lines.append(
            f"| {t} | {row['weka']['events_per_cpu_s']:,.0f} "
            f"| {row['stream-nb']['events_per_cpu_s']:,.0f} | {row['ratio']:.3f} |"
        )
    best = payload["best_events_per_cpu_s"]
    lines += [
        "",
        f"Median ratio {payload['median_ratio']:.3f}; best stream-nb "
        f"{best['stream-nb']:,.0f} / best Weka {best['weka']:,.0f} = "
        f"{payload['best_ratio']:.3f}. Prequential accuracy: Weka "
        f"{payload['accuracy']['weka']:.4f}, stream-nb {payload['accuracy']['stream-nb']:.4f}.",
        f"Probabilities from event {agree['from_event']} on (every value and class seen), "
        f"{agree['events_compared']:,} events: largest difference {agree['max_abs_diff']:.2e}.",
    ]
    (out / "weka_aode.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=20_000, help="LED-24 events")
    parser.add_argument("--repeats", type=int, default=5, help="alternating turns")
    parser.add_argument("--quick", action="store_true", help="smoke run: 300 events, 1 turn")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for the results")
    parser.add_argument("--no-write", action="store_true", help="do not write any results")
    args = parser.parse_args(argv)
    n, repeats = (300, 1) if args.quick else (args.events, args.repeats)
    if n < 100:
        parser.error(f"--events must be at least 100, got {n}")
    if repeats < 1:
        parser.error(f"--repeats must be at least 1, got {repeats}")
    with tempfile.TemporaryDirectory() as tmp:
        payload = measure(n, repeats, Path(tmp))
    payload["machine"] = machine()
    print(
        f"median ratio {payload['median_ratio']:.3f}, best ratio {payload['best_ratio']:.3f}, "
        f"max |ΔP| {payload['agreement']['max_abs_diff']:.2e}"
    )
    if not args.no_write:
        write(payload, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
