"""``stream-nb inspect``: the informative feature ranks first for every learner family.

Each learner learns a seeded stream in which ``signal`` carries the label and
every other feature is noise; its snapshot is written as the daemon writes
them (``stream-nb run --checkpoint-dir`` in a real process for NaiveBayes and
TAN, the :class:`~stream_nb.engine.Checkpointer` otherwise) and ``inspect``
must list ``signal`` first, with the fields of its kind. The formulas
themselves are checked against brute force in ``test_informative.py``.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_nb import (
    AODE,
    KDB,
    SPODE,
    TAN,
    BernoulliNB,
    CategoricalNB,
    Checkpointer,
    ComplementNB,
    GaussianNB,
    Learner,
    MultinomialNB,
    NaiveBayes,
)
from stream_nb.cli import main

EXE = shutil.which("stream-nb") or str(Path(sys.executable).parent / "stream-nb")

Stream = Callable[[random.Random], tuple[dict[str, Any], Hashable]]


# ---------------------------------------------------------------------- streams
def categorical(rng: random.Random) -> tuple[dict[str, Any], Hashable]:
    y = rng.choice(["red", "green", "blue"])
    x = {
        "signal": y if rng.random() < 0.75 else rng.choice(["red", "green", "blue"]),
        "noise_a": rng.choice("abcd"),
        "noise_b": rng.random() < 0.5,
        "noise_c": rng.choice(["red", "green", "blue"]),
    }
    return x, y


def numeric(rng: random.Random) -> tuple[dict[str, Any], Hashable]:
    y = rng.choice([0, 1, 2])
    x = {
        "noise_wide": rng.gauss(50.0, 30.0),
        "signal": rng.gauss(1.5 * y, 1.0),
        "noise_unit": rng.gauss(0.0, 1.0),
        "noise_tiny": rng.gauss(1e-3, 1e-4),
    }
    return x, y


def mixed_numeric_signal(rng: random.Random) -> tuple[dict[str, Any], Hashable]:
    y = rng.choice(["churn", "stay"])
    x = {
        "plan": rng.choice(["free", "pro", "team"]),
        "signal": rng.gauss(3.0 if y == "stay" else 0.0, 1.0),
        "spend": rng.gauss(20.0, 5.0),
        "paid": rng.random() < 0.5,
    }
    return x, y


def mixed_categorical_signal(rng: random.Random) -> tuple[dict[str, Any], Hashable]:
    y = rng.choice(["churn", "stay"])
    x = {
        "spend": rng.gauss(20.0, 5.0),
        "signal": ("yes" if y == "stay" else "no") if rng.random() < 0.85 else "maybe",
        "plan": rng.choice(["free", "pro", "team"]),
        "age": rng.gauss(40.0, 12.0),
    }
    return x, y


_VOCAB = [f"w{i}" for i in range(60)]
_ZIPF = [1.0 / (i + 1) for i in range(60)]


def tokens(rng: random.Random) -> tuple[dict[str, Any], Hashable]:
    y = rng.choice(["spam", "ham", "news"])
    x: dict[str, Any] = {}
    for t in rng.choices(_VOCAB, _ZIPF, k=15):
        x[t] = x.get(t, 0) + 1
    if rng.random() < (0.7 if y == "spam" else 0.05):
        x["signal"] = rng.choice([1, 2, 3])
    if rng.random() < 0.002:  # rare tokens: huge ratios, no support
        x[f"rare{rng.randrange(10**6)}"] = 1
    return x, y


def binary(rng: random.Random) -> tuple[dict[str, Any], Hashable]:
    y = rng.choice(["spam", "ham"])
    x = {f"noise{i}": int(rng.random() < 0.2 + 0.06 * i) for i in range(10)}
    x["signal"] = int(rng.random() < (0.8 if y == "spam" else 0.2))
    if rng.random() < 0.003:
        x[f"rare{rng.randrange(10**6)}"] = 1
    return x, y


def seminaive_numeric(rng: random.Random) -> tuple[dict[str, Any], Hashable]:
    y = rng.choice(["a", "b"])
    x = {
        "noise": rng.choice("pqrs"),
        "signal": rng.gauss(2.5 if y == "b" else 0.0, 1.0),
        "level": rng.gauss(0.0, 1.0),
        "flag": rng.choice(["on", "off"]),
    }
    return x, y


def seminaive_dependent(rng: random.Random) -> tuple[dict[str, Any], Hashable]:
    """``signal`` follows the label, ``copy`` a noisy copy of ``signal`` (an edge for TAN/KDB)."""
    y = rng.choice(["a", "b"])
    s = y if rng.random() < 0.85 else rng.choice(["a", "b"])
    x = {
        "noise": rng.choice("pqrs"),
        "copy": s if rng.random() < 0.9 else rng.choice(["a", "b"]),
        "signal": s,
        "other": rng.choice(["u", "v", "w"]),
    }
    return x, y


def events(stream: Stream, seed: int, n: int) -> list[tuple[dict[str, Any], Hashable]]:
    rng = random.Random(seed)
    return [stream(rng) for _ in range(n)]


# ---------------------------------------------------------------------- helpers
@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("STREAM_NB_"):
            monkeypatch.delenv(name)
    yield


def write_snapshot(directory: Path, model: Learner) -> Path:
    """A snapshot of ``model`` as the daemon writes one (Checkpointer, same body keys)."""
    body = {
        "format": "stream-nb/engine",
        "created": time.time(),
        "learner": model.to_state(),
        "source": None,
        "sink": None,
        "dead_letters": None,
        "evaluator": None,
        "delayed": None,
        "counters": None,
        "extra": {},
    }
    snapshot_id = Checkpointer(directory).write(body)
    return directory / f"snapshot-{snapshot_id}.json"


def inspect(capsys: pytest.CaptureFixture[str], path: Path, top: int = 5) -> dict[str, Any]:
    """``stream-nb inspect`` in this process; its JSON output."""
    capsys.readouterr()
    assert main(["inspect", "--snapshot", str(path), "--top", str(top)]) == 0
    out: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return out


def cli(*args: Any) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_NB_")}
    proc = subprocess.run([EXE, *map(str, args)], capture_output=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return proc


KIND_FIELDS = {
    "categorical": {"value"},
    "gaussian": {"means", "stds"},
    "token": {"support"},
    "binary": {"support"},
}


def check_entries(info: dict[str, Any], kind: str, top: int = 5) -> None:
    """``signal`` first, sorted scores, every entry with the common and its kind's fields."""
    entries = info["most_informative_features"]
    assert 0 < len(entries) <= top
    assert entries[0]["feature"] == "signal", entries
    assert entries[0]["kind"] == kind
    scores = [e["score"] for e in entries]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    for e in entries:
        assert {"feature", "kind", "favours", "against", "log_ratio", "score"} <= set(e)
        assert KIND_FIELDS[e["kind"]] <= set(e)
        assert e["log_ratio"] >= 0 and e["favours"] != e["against"]


# ---------------------------------------------------------------------- every family
#: ``favours`` of the top entry is the class named by its value (signal = "red" favours "red").
SAME = "same as value"

CASES = [
    pytest.param(CategoricalNB, {}, categorical, "categorical", SAME, id="CategoricalNB"),
    pytest.param(GaussianNB, {}, numeric, "gaussian", 2, id="GaussianNB"),
    pytest.param(NaiveBayes, {}, mixed_numeric_signal, "gaussian", "stay", id="NaiveBayes-numeric"),
    pytest.param(
        NaiveBayes, {}, mixed_categorical_signal, "categorical", None, id="NaiveBayes-categorical"
    ),
    pytest.param(MultinomialNB, {"alpha": 0.01}, tokens, "token", "spam", id="MultinomialNB"),
    pytest.param(ComplementNB, {"alpha": 0.01}, tokens, "token", "spam", id="ComplementNB"),
    pytest.param(ComplementNB, {"norm": True}, tokens, "token", "spam", id="ComplementNB-norm"),
    pytest.param(BernoulliNB, {"alpha": 0.01}, binary, "binary", "spam", id="BernoulliNB"),
    pytest.param(SPODE, {}, seminaive_numeric, "categorical", None, id="SPODE"),
    pytest.param(AODE, {}, seminaive_numeric, "categorical", None, id="AODE"),
    pytest.param(TAN, {"rebuild_every": 300}, seminaive_dependent, "categorical", None, id="TAN"),
    pytest.param(KDB, {"rebuild_every": 300}, seminaive_dependent, "categorical", None, id="KDB"),
]


@pytest.mark.parametrize(("cls", "params", "stream", "kind", "favours"), CASES)
def test_informative_feature_ranks_first(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cls: type[Learner],
    params: dict[str, Any],
    stream: Stream,
    kind: str,
    favours: Any,
) -> None:
    data = events(stream, 42, 1500)
    model = cls(**params)
    for x, y in data:
        model.learn_one(x, y)
    info = inspect(capsys, write_snapshot(tmp_path / "ck", model))
    assert info["learner"] == cls.__name__ and info["n_learned"] == 1500
    check_entries(info, kind)
    top = info["most_informative_features"][0]
    if favours is SAME:
        assert top["favours"] == top["value"]
    elif favours is not None:
        assert top["favours"] == favours
    # class counts and features are listed for every family (semi-naive included)
    assert sum(c["count"] for c in info["classes"]) == pytest.approx(1500)
    if kind != "token" and kind != "binary":
        assert set(info["features"]) == set(data[0][0])
    if cls in (TAN, KDB):
        parents = {d["feature"]: d["parents"] for d in info["structure"]["parents"]}
        assert parents["copy"] == ["signal"] or parents["signal"] == ["copy"]
        assert parents == {f: list(pa) for f, pa in model.parents.items()}
    elif cls is SPODE:
        assert info["structure"]["super_parent"] == "signal"
    else:
        assert info["structure"] is None


def test_seminaive_numeric_bins_show_their_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = AODE(n_bins=5)
    for x, y in events(seminaive_numeric, 7, 800):
        model.learn_one(x, y)
    info = inspect(capsys, write_snapshot(tmp_path / "ck", model), top=3)
    top = info["most_informative_features"][0]
    assert top["feature"] == "signal" and top["mutual_information"] > 0
    low, high = top["interval"]
    # an extreme bin: open on one side, and it favours the class on that side
    assert (low is None and top["favours"] == "a") or (high is None and top["favours"] == "b")


def test_rare_tokens_do_not_dominate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = MultinomialNB(alpha=0.01)
    data = events(tokens, 3, 3000)
    for x, y in data:
        model.learn_one(x, y)
    info = inspect(capsys, write_snapshot(tmp_path / "ck", model), top=10_000)
    entries = info["most_informative_features"]
    rare = [e for e in entries if e["feature"].startswith("rare")]
    signal = next(e for e in entries if e["feature"] == "signal")
    assert rare and all(e["log_ratio"] > signal["log_ratio"] for e in rare)
    assert entries[0] == signal
    assert max(e["score"] for e in rare) < 0.01 * signal["score"]


def test_top_zero_and_old_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = CategoricalNB()
    for x, y in events(categorical, 1, 300):
        model.learn_one(x, y)
    path = write_snapshot(tmp_path / "ck", model)
    assert inspect(capsys, path, top=0)["most_informative_features"] == []
    # the fields inspect printed before (feature, value, favours, against, log_ratio) stay
    for e in inspect(capsys, path, top=50)["most_informative_features"]:
        assert e["score"] == e["log_ratio"] and e["kind"] == "categorical"
        assert {"feature", "value", "favours", "against", "log_ratio"} <= set(e)


# ---------------------------------------------------------------------- the real process
@pytest.mark.parametrize(
    ("model", "params", "stream"),
    [
        pytest.param("NaiveBayes", "{}", mixed_numeric_signal, id="NaiveBayes"),
        pytest.param("TAN", '{"rebuild_every": 300}', seminaive_dependent, id="TAN"),
    ],
)
def test_run_then_inspect_in_a_real_process(
    tmp_path: Path, model: str, params: str, stream: Stream
) -> None:
    data = events(stream, 11, 1500)
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(orjson.dumps({**x, "y": y}) + b"\n" for x, y in data))
    cli(
        "run",
        "--model",
        model,
        "--params",
        params,
        "--source",
        source,
        "--sink",
        tmp_path / "out.jsonl",
        "--checkpoint-dir",
        tmp_path / "ck",
    )
    info = orjson.loads(cli("inspect", "--snapshot", tmp_path / "ck", "--top", "4").stdout)
    assert info["learner"] == model and info["n_learned"] == 1500
    check_entries(info, "gaussian" if model == "NaiveBayes" else "categorical", top=4)
    if model == "TAN":
        parents = {d["feature"]: d["parents"] for d in info["structure"]["parents"]}
        assert set(parents) == set(data[0][0])
        assert parents["copy"] == ["signal"] or parents["signal"] == ["copy"]
        assert sum(1 for pa in parents.values() if not pa) >= 1  # a tree (forest) has a root
    else:
        assert info["structure"] is None
        # every feature listed, each scored as its kind: numbers as Gaussians
        every = orjson.loads(cli("inspect", "--snapshot", tmp_path / "ck", "--top", "50").stdout)
        kinds = {e["feature"]: e["kind"] for e in every["most_informative_features"]}
        assert kinds == {
            "signal": "gaussian",
            "spend": "gaussian",
            "plan": "categorical",
            "paid": "categorical",
        }
