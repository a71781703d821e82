"""The WeightedNB step-size sweep on two short streams, against the learners run directly."""

from __future__ import annotations

from pathlib import Path

import stream_nb.naive_bayes.weighted as weighted
from benchmarks.accuracy_streams import load_streams
from benchmarks.bench_accuracy import score
from benchmarks.bench_weighted import main
from stream_nb import NaiveBayes, WeightedNB


def test_the_sweep_reports_each_setting(tmp_path: Path) -> None:
    out = tmp_path / "weighted_step.md"
    argv = ["--events=80", "--stream=iris", "--stream=agrawal-f0", f"--out={out}"]
    assert main(argv) == 0
    assert weighted.GRADIENT_CLIP == 2.0  # restored after the sweep
    cells = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in out.read_text().splitlines()
        if line.startswith("| ") and not line.startswith("| stream |")
    ]
    rows = {row[0]: row for row in cells}
    stream = load_streams(["agrawal-f0"], 80, 80)[0]
    labels = [y for _, y in stream.events]
    losses = []
    for make in (NaiveBayes, WeightedNB):  # the default: clip 2, eta0 0.02
        model, predictions = make(), []
        for x, y in stream.events:
            predictions.append(model.predict_log_proba_one(x))
            model.learn_one(x, y)
        losses.append(f"{score(labels, predictions).log_loss:.3f}")
    assert rows["agrawal-f0"][2] == losses[0] and rows["agrawal-f0"][5] == losses[1]
    assert rows["iris"][1] == "80"
    streams = [rows["iris"], rows["agrawal-f0"]]
    better = [
        f"{sum(float(r[k]) < float(r[2]) for r in streams)}/2" for k in range(3, 9)
    ]  # each setting's column against NaiveBayes's, stream by stream
    assert rows["streams better than NaiveBayes"][3:] == better
