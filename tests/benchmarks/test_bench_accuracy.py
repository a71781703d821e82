"""The accuracy benchmark on a few streams, models and events, against independent computations."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from river import evaluate, metrics, naive_bayes
from river.datasets import synth
from sklearn.datasets import load_iris

from benchmarks.accuracy_models import CONFIGS, snb
from benchmarks.accuracy_streams import Stream
from benchmarks.bench_accuracy import LOG_FLOOR, main, score
from stream_nb import NaiveBayes, PrequentialEvaluator

ROOT = Path(__file__).resolve().parents[2]


def _iris() -> list[tuple[dict[str, float], int]]:
    """iris in the documented order, built here rather than by the benchmark."""
    bunch = load_iris()
    order = np.random.default_rng(0).permutation(150)
    names = list(bunch.feature_names)
    return [
        ({n: float(bunch.data[i, j]) for j, n in enumerate(names)}, int(bunch.target[i]))
        for i in order
    ]


def _rows(payload: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["stream"], r["config"]): r for r in payload["rows"]}


def test_score_counts_no_prediction_as_wrong_and_leaves_new_classes_out_of_log_loss() -> None:
    s = score(["a", "a", "b", "a", "b"], [{}, {"a": 0.0}, {"a": 0.0}, {}, {"a": -0.1, "b": -2.4}])
    assert (s.events, s.no_prediction, s.log_loss_events) == (5, 2, 3)
    assert s.accuracy == pytest.approx(1 / 5)  # event 2 only; event 5 predicts "a"
    # events 2, 4 and 5: log 1 = 0, the uniform log 1/2 over {a, b}, then log P(b) = -2.4
    assert s.log_loss == pytest.approx((0.0 + math.log(2) + 2.4) / 3)


def test_score_floors_log_loss_and_ignores_nan() -> None:
    s = score(["a", "a", "a"], [{}, {"b": 0.0}, {"a": float("nan"), "b": -1.0}])
    assert s.accuracy == 0.0 and s.no_prediction == 1
    # a class left out has probability 0 and NaN counts as the floor: both cost -LOG_FLOOR
    assert s.log_loss == pytest.approx(-LOG_FLOOR)
    assert score([], []).log_loss is None


def test_bench_accuracy_matches_river_and_the_prequential_evaluator(tmp_path: Path) -> None:
    argv = [
        "--stream=iris",
        "--stream=agrawal-f0",
        "--stream=led-categories",
        "--events=300",
        "--model=river GaussianNB()",
        "--model=NaiveBayes()",
        "--model=CategoricalNB()",
        "--model=AODE",
        "--no-moa",
        f"--out={tmp_path}",
    ]
    assert main(argv) == 0
    payload = json.loads((tmp_path / "accuracy.json").read_text())
    rows = _rows(payload)
    streams = {s["name"]: s for s in payload["streams"]}
    assert streams["iris"]["events"] == 150 and streams["agrawal-f0"]["events"] == 300
    assert streams["led-categories"]["discrete"] and not streams["iris"]["discrete"]
    # applicability: river's Gaussian needs numbers, CategoricalNB discrete values
    assert ("led-categories", "river GaussianNB()") not in rows
    assert ("iris", "CategoricalNB()") not in rows and ("led-categories", "CategoricalNB()") in rows
    assert {c for s, c in rows if s == "iris"} == {
        "river GaussianNB()",
        "NaiveBayes()",
        "AODE()",
        "AODE(weighting='mutual_information')",
        "AODE(bin_edges=warm-up)",
        "AODE(bin_edges=whole stream)",
    }

    # river's own prequential evaluation of its GaussianNB on the same iris order; it
    # leaves out the events its model predicts nothing for (the first), we count them wrong
    accuracy = evaluate.progressive_val_score(_iris(), naive_bayes.GaussianNB(), metrics.Accuracy())
    row = rows["iris", "river GaussianNB()"]
    assert row["no_prediction"] == 1
    assert row["accuracy"] * 150 == pytest.approx(accuracy.get() * 149)
    # its log loss by hand: classes seen before only, floored at 1e-15
    model, seen, losses = naive_bayes.GaussianNB(), set(), []
    for x, y in _iris():
        p = model.predict_proba_one(x).get(y, 0.0)
        if y in seen:
            losses.append(-math.log(max(p, 1e-15)))
        seen.add(y)
        model.learn_one(x, y)
    assert rows["iris", "river GaussianNB()"]["log_loss"] == pytest.approx(np.mean(losses))

    # stream-nb's evaluator on NaiveBayes: the same accuracy; its log loss also counts
    # the first event of each class, at the floor
    events = list(synth.Agrawal(classification_function=0, seed=42).take(300))
    model, evaluator = NaiveBayes(), PrequentialEvaluator()
    for x, y in events:
        x = {str(k): v for k, v in x.items()}
        evaluator.update(y, model.predict_one(x), model.predict_log_proba_one(x))
        model.learn_one(x, y)
    report = evaluator.report()["cumulative"]
    row = rows["agrawal-f0", "NaiveBayes()"]
    assert row["accuracy"] == pytest.approx(report["accuracy"])
    k = len({y for _x, y in events})
    assert row["log_loss"] == pytest.approx((report["log_loss"] * 300 + k * LOG_FLOOR) / (300 - k))
    assert row["log_loss_events"] == 300 - k and row["no_prediction"] == 1

    # during the warm-up the default AODE scores iris's numbers with a Gaussian term: it
    # is within 2 points of AODE given the edges up front
    assert (
        rows["iris", "AODE()"]["accuracy"]
        >= rows["iris", "AODE(bin_edges=warm-up)"]["accuracy"] - 0.02
    )

    table = (tmp_path / "accuracy.md").read_text()
    header = (
        "| stream | `CategoricalNB()` | `NaiveBayes()` | `AODE()` | "
        "`AODE(weighting='mutual_information')` | `river GaussianNB()` |"
    )
    assert header in table
    assert "| iris | " in table and "**" in table  # best of a row marked
    assert "## Binned numbers: the discretiser's warm-up" in table
    assert (tmp_path / "accuracy.png").stat().st_size > 0
    # the report re-renders from the JSON alone, to the same bytes
    again = tmp_path / "again"
    assert main([f"--from-json={tmp_path / 'accuracy.json'}", f"--out={again}", "--no-plot"]) == 0
    assert (again / "accuracy.md").read_text() == table


def test_a_configuration_is_one_call() -> None:
    config = snb(NaiveBayes, var_smoothing=1e-12)
    assert config.name == "NaiveBayes(var_smoothing=1e-12)" and config.family == "stream-nb"
    stream = Stream("tiny", "synthetic", "test", [({"a": float(i % 3)}, i % 2) for i in range(20)])
    run = config.run(stream)
    assert len(run.predictions) == 20 and run.predictions[0] == {}
    assert set(run.predictions[-1]) == {0, 1}
    names = [c.name for c in CONFIGS]
    assert len(names) == len(set(names))
    assert "GaussianNB(var_smoothing=0)" in names and "AODE(half_life=1000)" in names


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--stream=nope"], "--stream 'nope' is not a stream; see --list"),
        (["--model=nope"], "--model 'nope' is not a configuration or learner; see --list"),
        (["--events=5"], "--events must be at least 10, got 5"),
    ],
)
def test_bench_accuracy_rejects_bad_arguments(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_moa_naive_bayes_through_capymoa(tmp_path: Path) -> None:
    # looked up, not imported: importing capymoa starts a JVM inside the test process
    # the test extra installs capymoa: a missing one fails here instead of hiding the column
    assert importlib.util.find_spec("capymoa") is not None, "pip install -e '.[test]'"
    command = [
        sys.executable,
        "-m",
        "benchmarks.bench_accuracy",
        "--stream=iris",
        "--stream=led-categories",
        "--events=300",
        "--model=MOA NaiveBayes",
        f"--out={tmp_path}",
        "--no-plot",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    payload = json.loads((tmp_path / "accuracy.json").read_text())
    assert payload["machine"]["versions"]["capymoa"]
    for row in payload["rows"]:
        notes = row["notes"]
        # MOA's own evaluator in the JVM loop agrees wherever the Python loop predicts;
        # it counts "no prediction" as class 0, which may be right
        assert notes["jvm_python_disagreements"] == 0
        n = row["events"]
        assert row["accuracy"] <= notes["jvm_accuracy"] + 1e-12
        assert notes["jvm_accuracy"] - row["accuracy"] <= row["no_prediction"] / n + 1e-12
        assert 0.5 < row["accuracy"] < 1.0 and 0.0 < row["log_loss"] < 5.0
    assert {r["stream"] for r in payload["rows"]} == {"iris", "led-categories"}
    assert "## MOA: the JVM loop and the Python loop" in (tmp_path / "accuracy.md").read_text()
