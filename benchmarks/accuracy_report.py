"""The accuracy benchmark's markdown tables and plot, from its results payload.

``write_markdown`` and ``write_plot`` read only the JSON-able payload that
``benchmarks/results/accuracy.json`` holds, so both can be re-rendered from a
saved run (``python -m benchmarks.bench_accuracy --from-json FILE``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.accuracy_models import (
    BIN_EDGES,
    DEFAULT,
    HALF_LIFE,
    HALF_LIFE_EVENTS,
    VAR_SMOOTHING,
)

__all__ = ["TABLES", "write_markdown", "write_plot"]

Row = Mapping[str, Any]

#: Decimals shown; values equal at this precision are all marked best.
_DIGITS = 3
#: Accuracy below the row's best by more than this shows in the plot's darkest colour.
_PLOT_GAP = 0.15


@dataclasses.dataclass(frozen=True)
class Table:
    """One table of ``accuracy.md``: the configurations listing ``key`` in their tables,
    on the streams ``streams`` accepts (each stream's info dict of the payload)."""

    key: str
    title: str
    intro: str
    streams: Callable[[Mapping[str, Any]], bool]


def _every(stream: Mapping[str, Any]) -> bool:
    return True


def _has_numeric(stream: Mapping[str, Any]) -> bool:
    return bool(stream["has_numeric"])


def _drift(stream: Mapping[str, Any]) -> bool:
    return bool(stream["group"] == "drift")


TABLES = (
    Table(
        DEFAULT,
        "Every learner with its default parameters",
        "Each cell: prequential accuracy / log loss (nats); bold: the best of the row "
        "(highest accuracy, lowest log loss); —: the learner does not apply to the stream.",
        _every,
    ),
    Table(
        VAR_SMOOTHING,
        "Variance smoothing of the Gaussian learners",
        "`var_smoothing_mode='feature'` (the default): every class variance of feature f "
        "gets ε_f = var_smoothing × (f's variance over every event) added, default 1e-2 "
        "(a feature constant so far is left out); `var_smoothing_mode='global'`: every "
        "class variance gets ε = var_smoothing × (largest variance of any feature) "
        "added (scikit-learn's rule, its default 1e-9). river and MOA for reference.",
        _has_numeric,
    ),
    Table(
        BIN_EDGES,
        "Binned numbers: the discretiser's warm-up",
        "`AODE()` learns its equal-frequency cut points from the first 100 values of "
        "each numeric feature and leaves the feature out of predictions until then; "
        "`NaiveBayes(numeric='bins')` learns the same cut points and models the feature "
        "by its Gaussian until then (then replays its values as bins). "
        "`bin_edges=warm-up` gives it those same cut points up front (only the blind "
        "warm-up differs); `bin_edges=whole stream` gives the cut points of every value "
        "of the stream (a reference that knows the future).",
        _has_numeric,
    ),
)


def rows_by_key(payload: Mapping[str, Any]) -> dict[tuple[str, str], Row]:
    """``(stream, config) -> row`` of a results payload."""
    return {(r["stream"], r["config"]): r for r in payload["rows"]}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, _DIGITS)


def _cell(row: Row | None, best_acc: float | None, best_ll: float | None) -> str:
    if row is None:
        return "—"
    acc = _round(row["accuracy"])
    ll = _round(row["log_loss"])
    a = f"{acc:.{_DIGITS}f}"
    b = "—" if ll is None else f"{ll:.{_DIGITS}f}"
    if acc == best_acc:
        a = f"**{a}**"
    if ll is not None and ll == best_ll:
        b = f"**{b}**"
    return f"{a} / {b}"


def _bests(rows: Sequence[Row]) -> tuple[float | None, float | None]:
    accs = [_round(r["accuracy"]) for r in rows]
    lls = [v for r in rows if (v := _round(r["log_loss"])) is not None]
    return max((a for a in accs if a is not None), default=None), min(lls, default=None)


def _configs(payload: Mapping[str, Any], key: str) -> list[str]:
    return [c["name"] for c in payload["configs"] if key in c["tables"]]


def _grid(payload: Mapping[str, Any], table: Table) -> list[str]:
    index = rows_by_key(payload)
    streams = [s["name"] for s in payload["streams"] if table.streams(s)]
    configs = _configs(payload, table.key)
    configs = [c for c in configs if any((s, c) in index for s in streams)]
    streams = [s for s in streams if any((s, c) in index for c in configs)]
    if not configs or not streams:
        return []
    lines = [
        f"## {table.title}",
        "",
        table.intro,
        "",
        "| stream | " + " | ".join(f"`{c}`" for c in configs) + " |",
        "|---|" + "---:|" * len(configs),
    ]
    for s in streams:
        present = [index[s, c] for c in configs if (s, c) in index]
        best_acc, best_ll = _bests(present)
        cells = [_cell(index.get((s, c)), best_acc, best_ll) for c in configs]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _half_life(payload: Mapping[str, Any]) -> list[str]:
    """Learners × (drift stream, without / with forgetting)."""
    index = rows_by_key(payload)
    streams = [s["name"] for s in payload["streams"] if _drift(s)]
    configs = [c for c in payload["configs"] if HALF_LIFE in c["tables"]]
    learners = list(dict.fromkeys(c["learner"] for c in configs))
    if not streams or not configs:
        return []
    variants: dict[tuple[str, bool], str] = {
        (c["learner"], "half_life=" in c["name"]): c["name"] for c in configs
    }
    label = f"half_life={HALF_LIFE_EVENTS}"
    lines = [
        "## Concept drift: without and with forgetting",
        "",
        f"Each cell: accuracy / log loss without forgetting | with `{label}` (stream-nb "
        "learners; river's and MOA's Naive Bayes have no forgetting). Bold: the best of "
        "the stream.",
        "",
        "| learner | " + " | ".join(f"{s} | {s}, `{label}`" for s in streams) + " |",
        "|---|" + "---:|" * (2 * len(streams)),
    ]
    bests = {}
    for s in streams:
        bests[s] = _bests(
            [r for (st, _c), r in index.items() if st == s and _c in variants.values()]
        )
    for learner in learners:
        cells = []
        for s in streams:
            for forget in (False, True):
                name = variants.get((learner, forget))
                row = None if name is None else index.get((s, name))
                cells.append(_cell(row, *bests[s]))
        if any(c != "—" for c in cells):
            lines.append(f"| {learner} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _best_vs_baselines(payload: Mapping[str, Any]) -> list[str]:
    index = rows_by_key(payload)
    online = {c["name"] for c in payload["configs"] if c["family"] == "stream-nb"}
    online -= {c["name"] for c in payload["configs"] if c.get("lookahead")}
    baselines = [c["name"] for c in payload["configs"] if c["family"] != "stream-nb"]
    lines = [
        "## The best stream-nb configuration against river and MOA",
        "",
        "Best accuracy of any stream-nb configuration of this page (half_life variants "
        "included; not the `bin_edges` measurements, built from the stream's own events) "
        "against river's GaussianNB and MOA's NaiveBayes; difference to the better of the "
        "two in accuracy points (positive: stream-nb ahead).",
        "",
        "| stream | best stream-nb | accuracy | "
        + " | ".join(f"`{b}`" for b in baselines)
        + " | difference |",
        "|---|---|---:|" + "---:|" * len(baselines) + "---:|",
    ]
    for s in (s["name"] for s in payload["streams"]):
        ours = [r for (st, c), r in index.items() if st == s and c in online]
        if not ours:
            continue
        best = max(ours, key=lambda r: r["accuracy"])
        theirs = [index.get((s, b)) for b in baselines]
        cells = ["—" if r is None else f"{r['accuracy']:.{_DIGITS}f}" for r in theirs]
        present = [r["accuracy"] for r in theirs if r is not None]
        diff = "—" if not present else f"{100 * (best['accuracy'] - max(present)):+.1f}"
        lines.append(
            f"| {s} | `{best['config']}` | {best['accuracy']:.{_DIGITS}f} | "
            + " | ".join(cells)
            + f" | {diff} |"
        )
    return [*lines, ""]


def _moa_loops(payload: Mapping[str, Any]) -> list[str]:
    rows = [r for r in payload["rows"] if "jvm_accuracy" in r.get("notes", {})]
    if not rows:
        return []
    lines = [
        "## MOA: the JVM loop and the Python loop",
        "",
        "The tables score capymoa's Python loop (`predict_proba`, then `train`), which "
        "gives the probabilities log loss needs; the JVM loop "
        "(`prequential_evaluation(optimise=True)`, MOA's own evaluator) runs the same "
        "learner on the same instances. Disagreements: events whose predicted class "
        "differs where the Python loop predicts.",
        "",
        "| stream | accuracy, Python loop | accuracy, JVM loop | disagreements "
        "| CPU s, JVM loop | CPU s, Python loop |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        n = r["notes"]
        lines.append(
            f"| {r['stream']} | {r['accuracy']:.4f} | {n['jvm_accuracy']:.4f} "
            f"| {n['jvm_python_disagreements']} | {n['jvm_cpu_seconds']:.2f} "
            f"| {r['cpu_seconds']:.2f} |"
        )
    return [*lines, ""]


def _runtime(payload: Mapping[str, Any]) -> list[str]:
    lines = [
        "## Runtime",
        "",
        f"Whole run: {payload['wall_seconds']:,.0f} s wall clock. Per configuration, over "
        "the streams it ran on (process CPU time of the prequential loop; streams built "
        "before, not timed; MOA: its Python loop):",
        "",
        "| configuration | streams | events | CPU s | events per CPU s |",
        "|---|---:|---:|---:|---:|",
    ]
    for c in payload["configs"]:
        rows = [r for r in payload["rows"] if r["config"] == c["name"]]
        if not rows:
            continue
        events = sum(r["events"] for r in rows)
        cpu = sum(r["cpu_seconds"] for r in rows)
        rate = f"{events / cpu:,.0f}" if cpu > 0 else "—"
        lines.append(f"| `{c['name']}` | {len(rows)} | {events:,} | {cpu:,.1f} | {rate} |")
    return [*lines, ""]


def _streams(payload: Mapping[str, Any]) -> list[str]:
    lines = [
        "## Streams",
        "",
        "| stream | source | events | features | classes | values |",
        "|---|---|---:|---:|---:|---|",
    ]
    for s in payload["streams"]:
        kinds = (
            "counts (whole numbers ≥ 0)"
            if s["counts"]
            else "numbers"
            if s["numeric"]
            else "numbers and categories"
            if s["has_numeric"]
            else "categories"
        )
        if s["discrete"]:
            kinds += f", ≤ {payload['settings']['discrete_max_values']} values per feature"
        lines.append(
            f"| {s['name']} | {s['source']} | {s['events']:,} | {s['features']} "
            f"| {s['classes']} | {kinds} |"
        )
    return [*lines, ""]


def write_markdown(payload: Mapping[str, Any], path: Path) -> None:
    m = payload["machine"]
    st = payload["settings"]
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    data = "whole" if st["data_events"] is None else f"first {st['data_events']:,} events"
    lines = [
        "# Prequential accuracy and log loss",
        "",
        f"`{st['command'].strip()}` — {m['date']}, {m['cpu']}, {m['cores']} cores, "
        f"load average {m['load_average']}; {versions}.",
        "",
        f"Test then train on every event, the same events in the same order for every "
        f"model. Generated streams: {st['synthetic_events']:,} events, seed "
        f"{st['synthetic_seed']}; data sets: {data} (scikit-learn's in the order of seed "
        f"{st['sklearn_order_seed']}). Accuracy counts an event without a prediction as "
        "wrong. Log loss: mean −ln P(true class), floored at "
        f"{st['log_loss_floor']:g} (at most {-math.log(st['log_loss_floor']):.2f} "
        "per event), over the events whose class occurred before (the first event of each "
        "class is left out for every model); a model without a prediction counts as the "
        "uniform distribution over the classes seen. Method and reading: "
        "docs/benchmarks.md.",
        "",
    ]
    for table in TABLES[:1]:
        lines += _grid(payload, table)
    lines += _best_vs_baselines(payload)
    for table in TABLES[1:]:
        lines += _grid(payload, table)
    lines += _half_life(payload)
    lines += _moa_loops(payload)
    lines += _streams(payload)
    lines += _runtime(payload)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines).rstrip("\n") + "\n")


def write_plot(payload: Mapping[str, Any], path: Path) -> None:
    """Heat map of the default table: accuracy in each cell, coloured by its gap to the
    row's best."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    index = rows_by_key(payload)
    streams = [s["name"] for s in payload["streams"]]
    configs = [c for c in _configs(payload, DEFAULT) if any((s, c) in index for s in streams)]
    streams = [s for s in streams if any((s, c) in index for c in configs)]
    if not configs or not streams:
        return
    acc = np.full((len(streams), len(configs)), np.nan)
    for i, s in enumerate(streams):
        for j, c in enumerate(configs):
            if (s, c) in index:
                acc[i, j] = index[s, c]["accuracy"]
    gap = acc - np.nanmax(acc, axis=1, keepdims=True)
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * len(configs), 1.6 + 0.32 * len(streams)))
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#eeeeee")
    image = ax.imshow(
        np.ma.masked_invalid(gap), cmap=cmap, vmin=-_PLOT_GAP, vmax=0.0, aspect="auto"
    )
    for i in range(len(streams)):
        for j in range(len(configs)):
            if not np.isnan(acc[i, j]):
                best = gap[i, j] == 0.0
                ax.text(
                    j,
                    i,
                    f"{acc[i, j]:.3f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    fontweight="bold" if best else "normal",
                    color="black" if gap[i, j] > -_PLOT_GAP / 2 else "white",
                )
    ax.set_xticks(
        range(len(configs)), [c.replace("()", "") for c in configs], rotation=45, ha="right"
    )
    ax.set_yticks(range(len(streams)), streams)
    ax.set_title(
        "Prequential accuracy, default parameters (colour: gap to the row's best; grey: n/a)",
        fontsize=10,
    )
    fig.colorbar(image, ax=ax, label="accuracy − best of the row", shrink=0.6)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
