"""WeightedNB's step size and gradient clip, swept on the accuracy benchmark's streams.

For each stream of :mod:`benchmarks.accuracy_streams` (the same events, order and
scoring as ``bench_accuracy``), the prequential log loss of NaiveBayes and of
WeightedNB for every ``eta0`` × clip (``stream_nb.naive_bayes.weighted.GRADIENT_CLIP``,
set for the run), and for each setting how many streams it beats NaiveBayes on,
its worst and its mean ratio to NaiveBayes's log loss. Results go to
``benchmarks/results/weighted_step.md``.

    python -m benchmarks.bench_weighted --events 500 --events 3000
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import stream_nb.naive_bayes.weighted as weighted
from benchmarks.accuracy_streams import Stream, load_streams
from benchmarks.bench_accuracy import score
from stream_nb import Learner, NaiveBayes, WeightedNB

RESULTS = Path(__file__).parent / "results" / "weighted_step.md"
STREAMS = (
    "phishing",
    "image-segments",
    "shuttle",
    "iris",
    "wine",
    "breast-cancer",
    "digits",
    "hyperplane",
    "random-rbf",
    "led",
    "led-categories",
    "agrawal-f0",
    "agrawal-f2",
)
ETA0 = (0.02, 0.05)
CLIPS = (10.0, 2.0, 0.5)


def log_loss(make: Callable[[], Learner], stream: Stream) -> float:
    model = make()
    predictions = []
    for x, y in stream.events:
        predictions.append(model.predict_log_proba_one(x))
        model.learn_one(x, y)
    loss = score([y for _, y in stream.events], predictions).log_loss
    assert loss is not None
    return loss


def sweep(events: int, names: Sequence[str]) -> str:
    """The markdown table of one stream length."""
    streams = load_streams(names, events, events)
    settings = list(itertools.product(CLIPS, ETA0))
    header = "| stream | events | NaiveBayes | " + " | ".join(
        f"clip {c:g}, eta0 {e:g}" for c, e in settings
    )
    lines = [header + " |", "|---" * (3 + len(settings)) + "|"]
    ratios: dict[tuple[float, float], list[float]] = {s: [] for s in settings}
    saved = weighted.GRADIENT_CLIP
    try:
        for stream in streams:
            plain = log_loss(NaiveBayes, stream)
            cells = []
            for clip, eta0 in settings:
                weighted.GRADIENT_CLIP = clip
                loss = log_loss(lambda eta0=eta0: WeightedNB(eta0=eta0), stream)
                ratios[clip, eta0].append(loss / plain)
                cells.append(f"{loss:.3f}")
            row = [stream.name, str(len(stream.events)), f"{plain:.3f}", *cells]
            lines.append("| " + " | ".join(row) + " |")
    finally:
        weighted.GRADIENT_CLIP = saved
    for label, summary in (
        ("streams better than NaiveBayes", lambda r: f"{sum(v < 1 for v in r)}/{len(r)}"),
        ("worst ratio to NaiveBayes", lambda r: f"{max(r):.3f}"),
        ("mean ratio to NaiveBayes", lambda r: f"{statistics.fmean(r):.3f}"),
    ):
        lines.append(f"| {label} | | | " + " | ".join(summary(ratios[s]) for s in settings) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, action="append", help="events per stream (repeat)")
    parser.add_argument("--stream", action="append", default=None, help="a stream (repeat)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    parts = ["# WeightedNB: prequential log loss by step size and gradient clip", ""]
    for events in args.events or [500]:
        parts += [f"## {events} events per stream (data sets: at most {events})", ""]
        parts += [sweep(events, args.stream or STREAMS), ""]
    text = "\n".join(parts)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
