"""How the cost of a new feature and of a restore grows with the number of features.

Rows, for GaussianNB, NaiveBayes and CategoricalNB::

    python -m benchmarks.bench_scaling              # full run, ~1 minute
    python -m benchmarks.bench_scaling --features 50000 --snapshot-features 300000

- **one event, 50,000 new features**: ``learn_one`` of one event whose 50,000
  keys the model has never seen (numbers; strings for CategoricalNB), on a
  model that learned two events, then ``predict_log_proba_one`` of it;
- **restore a 300,000-feature snapshot**: ``orjson.loads`` of the state of a
  model with 300,000 features and 2 classes, then ``Learner.from_state``
  (what ``stream-nb run`` does on a restart and with ``--initial-model``);
- **inspect it**: ``stream-nb inspect`` on that snapshot, in a subprocess
  (wall-clock time, start-up included).

Times are CPU seconds of this process (``time.process_time``), best of
``--repeats``; the machine and versions go with the results to
``benchmarks/results/scaling.json`` and ``scaling.md``. Benchmarks are not
run in CI; ``tests/benchmarks`` runs a small version without timing
assertions, and ``tests/stream_nb/test_scaling.py`` guards the complexity by
counting operations.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

import stream_nb
from stream_nb import CategoricalNB, GaussianNB, Learner, NaiveBayes
from stream_nb.engine.checkpoint import Checkpointer
from stream_nb.engine.settings import ENGINE_STATE_FORMAT

RESULTS = Path(__file__).resolve().parent / "results"
LEARNERS: dict[str, Callable[[], Learner]] = {
    "GaussianNB": GaussianNB,
    "NaiveBayes": NaiveBayes,
    "CategoricalNB": CategoricalNB,
}


@dataclass
class Row:
    learner: str
    features: int
    learn_new_event_s: float
    predict_new_event_s: float
    snapshot_features: int
    snapshot_bytes: int
    restore_s: float
    inspect_wall_s: float


def _value(name: str, i: int, k: int) -> Any:
    """Feature ``i``'s value in the ``k``-th event: a number, a string for CategoricalNB."""
    return f"v{(i + k) % 3}" if name == "CategoricalNB" else float((i * 7 + k * 3) % 11)


def _wide(name: str, prefix: str, n: int, k: int) -> dict[str, Any]:
    return {f"{prefix}{i}": _value(name, i, k) for i in range(n)}


def _best(repeats: int, run: Callable[[], float]) -> float:
    return min(run() for _ in range(repeats))


def new_features(name: str, n: int, repeats: int) -> tuple[float, float]:
    """CPU seconds of learning, then predicting, one event of ``n`` never-seen features."""
    learn_s, predict_s = [], []
    for _ in range(repeats):
        model = LEARNERS[name]()
        model.learn_one({"a": _value(name, 0, 0), "b": _value(name, 1, 0)}, 0)
        model.learn_one({"a": _value(name, 0, 1), "b": _value(name, 1, 1)}, 1)
        x = _wide(name, "new", n, 2)
        t0 = time.process_time()
        model.learn_one(x, 0)
        t1 = time.process_time()
        model.predict_log_proba_one(x)
        t2 = time.process_time()
        learn_s.append(t1 - t0)
        predict_s.append(t2 - t1)
    return min(learn_s), min(predict_s)


def big_model(name: str, n: int) -> Learner:
    """A model with ``n`` features and two classes (three wide events)."""
    model = LEARNERS[name]()
    for k in range(3):
        model.learn_one(_wide(name, "f", n, k), k % 2)
    return model


def restore(payload: bytes, repeats: int) -> float:
    def once() -> float:
        t0 = time.process_time()
        Learner.from_state(orjson.loads(payload))
        return time.process_time() - t0

    return _best(repeats, once)


def inspect_wall(model: Learner, repeats: int) -> float:
    exe = str(Path(sys.executable).with_name("stream-nb"))
    with tempfile.TemporaryDirectory() as tmp:
        body = {"format": ENGINE_STATE_FORMAT, "learner": model.to_state(), "source": None}
        snapshot_id = Checkpointer(tmp).write(body)
        path = Path(tmp) / f"snapshot-{snapshot_id}.json"

        def once() -> float:
            t0 = time.perf_counter()
            subprocess.run(
                [exe, "inspect", "--snapshot", str(path), "--top", "10"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            return time.perf_counter() - t0

        return _best(repeats, once)


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
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
        "stream_nb": stream_nb.__version__,
        "measured": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def run(features: int, snapshot_features: int, repeats: int, learners: list[str]) -> list[Row]:
    rows = []
    for name in learners:
        learn_s, predict_s = new_features(name, features, repeats)
        model = big_model(name, snapshot_features)
        payload = orjson.dumps(model.to_state())
        rows.append(
            Row(
                learner=name,
                features=features,
                learn_new_event_s=learn_s,
                predict_new_event_s=predict_s,
                snapshot_features=snapshot_features,
                snapshot_bytes=len(payload),
                restore_s=restore(payload, repeats),
                inspect_wall_s=inspect_wall(model, repeats),
            )
        )
    return rows


def table(rows: list[Row], info: dict[str, Any]) -> str:
    lines = [
        f"Cost of new features and of restores, CPU seconds (inspect: wall-clock seconds of "
        f"the `stream-nb inspect` subprocess, start-up included), best of the repeats, "
        f"measured {info['measured']} on {info['cpu']}, {info['cores']} cores (load average "
        f"{info['load_average'][0]:.1f}), python {info['python']}, stream_nb {info['stream_nb']}.",
        "",
        "| learner | one event of N new features: learn | then predict it | restore a "
        "snapshot of M features | `stream-nb inspect` of it |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.learner} | N = {r.features:,}: {r.learn_new_event_s:.3f} s | "
            f"{r.predict_new_event_s:.3f} s | M = {r.snapshot_features:,} "
            f"({r.snapshot_bytes / 1e6:.1f} MB): {r.restore_s:.2f} s | {r.inspect_wall_s:.2f} s |"
        )
    lines += ["", "Reproduce: `python -m benchmarks.bench_scaling`."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--features", type=int, default=50_000)
    parser.add_argument("--snapshot-features", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--learners", nargs="*", default=list(LEARNERS))
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory of the results")
    args = parser.parse_args(argv)
    rows = run(args.features, args.snapshot_features, args.repeats, args.learners)
    info = machine()
    text = table(rows, info)
    print(text, end="")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scaling.json").write_text(
        json.dumps({"machine": info, "rows": [asdict(r) for r in rows]}, indent=2) + "\n"
    )
    (args.out / "scaling.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
