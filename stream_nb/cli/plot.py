"""The learning curve of ``stream-nb eval``: CSV rows and a matplotlib plot."""

from __future__ import annotations

import argparse
import math
from typing import Any

from stream_nb.base import Learner

_CURVE_FIELDS = (
    "events",
    "model",
    "accuracy",
    "window_accuracy",
    "fading_accuracy",
    "log_loss",
    "window_log_loss",
    "kappa",
    "window_kappa",
    "macro_f1",
)


def _curve_rows(
    n: int, models: list[tuple[str, Learner]], evaluators: list[Any]
) -> list[dict[str, Any]]:
    rows = []
    for (spec, _), ev in zip(models, evaluators, strict=True):
        r = ev.report(confusion=False)
        c, w, f = r["cumulative"], r["window"], r["fading"]
        rows.append(
            {
                "events": n,
                "model": spec,
                "accuracy": c["accuracy"],
                "window_accuracy": w["accuracy"],
                "fading_accuracy": f["accuracy"],
                "log_loss": c["log_loss"],
                "window_log_loss": w["log_loss"],
                "kappa": c["kappa"],
                "window_kappa": w["kappa"],
                "macro_f1": c["macro_f1"],
            }
        )
    return rows


def _plot(
    parser: argparse.ArgumentParser, rows: list[dict[str, Any]], specs: list[str], path: str
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        parser.error("--plot needs matplotlib: pip install 'stream-nb[plot]'")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for spec in specs:
        mine = [r for r in rows if r["model"] == spec]
        xs = [r["events"] for r in mine]
        top.plot(xs, [_nan(r["window_accuracy"]) for r in mine], label=spec)
        bottom.plot(xs, [_nan(r["window_log_loss"]) for r in mine], label=spec)
    top.set_ylabel("accuracy (window)")
    bottom.set_ylabel("log loss (window, nats)")
    bottom.set_xlabel("labelled events")
    top.legend(loc="lower right")
    top.grid(alpha=0.3)
    bottom.grid(alpha=0.3)
    fig.suptitle("stream-nb prequential learning curve")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _nan(value: Any) -> float:
    return math.nan if value is None else float(value)
