"""The text learners' counts in the kernels' array, inside the engine: batches the kernel
takes between batches the general path takes (bad events, short batches), checkpoints
(a snapshot reads every row) and a restart from a checkpoint give the same records,
dead letters, model and evaluation on the row path as on the general path."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_nb import BernoulliNB, ComplementNB, Engine, EventDecoder, Learner, MultinomialNB
from stream_nb.checks.engine import run_engine
from stream_nb.connectors.memory import ListSource, MemorySink
from stream_nb.datasets import zipf_text
from stream_nb.engine.checkpoint import Checkpointer

LEARNERS: dict[str, Callable[[], Learner]] = {
    "multinomial": MultinomialNB,
    "complement-norm": lambda: ComplementNB(norm=True),
    "bernoulli": BernoulliNB,
}


def _lines(n: int, *, seed: int, bad: float) -> list[bytes]:
    """Flat Zipf events, two classes then a third; some with a negative count (a dead
    letter for the count learners) or with no tokens (rejected)."""
    rng = random.Random(seed)
    out = []
    for i, (x, y) in enumerate(zipf_text(seed, n, vocabulary=3000, length=(5, 40), classes=2)):
        obj: dict[str, Any] = dict(x)
        if rng.random() < bad:
            obj[next(iter(obj))] = -1
        if rng.random() < bad / 3:
            obj = {}
        obj["y"] = "third" if i > n // 2 and rng.random() < 0.05 else y
        out.append(orjson.dumps(obj))
    return out


def _decoder(learner: Learner) -> EventDecoder:
    return EventDecoder(nonnegative=type(learner).capabilities.nonnegative_counts)


@pytest.mark.parametrize("name", sorted(LEARNERS))
@pytest.mark.parametrize("batch_size", [70, 333])
def test_kernel_and_general_batches_interleaved(name: str, batch_size: int) -> None:
    lines = _lines(2600, seed=batch_size, bad=0.004)
    runs, learners = [], []
    for rows in (True, False):
        learner = LEARNERS[name]()
        learners.append(learner)
        runs.append(
            run_engine(
                learner, lines, column_path=rows, batch_size=batch_size, decoder=_decoder(learner)
            )
        )
    fast, slow = runs
    assert fast == slow  # records, dead letters, model, evaluation, outcomes
    assert learners[0]._store is not None  # (the kernel's array: it took batches)
    assert sum(fast.outcomes.values()) == len(lines)


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_checkpoints_and_a_restart(name: str, tmp_path: Path) -> None:
    """Checkpoints every few batches (each reads the model's rows), a stop half-way and a
    restart from the newest checkpoint: the output of one uninterrupted run."""
    lines = _lines(3000, seed=4, bad=0.002)
    outputs = []
    for rows in (True, False):
        directory = tmp_path / f"ck-{rows}"
        sink = MemorySink()
        learner = LEARNERS[name]()
        first = Engine(
            learner,
            ListSource(list(lines)),
            sink,
            decoder=_decoder(learner),
            batch_size=256,
            column_path=rows,
            checkpointer=Checkpointer(directory),
            checkpoint_every=600,
        )
        first.run(max_events=1700)
        restored = LEARNERS[name]()
        second = Engine(
            restored,
            ListSource(list(lines)),
            sink,
            decoder=_decoder(restored),
            batch_size=256,
            column_path=rows,
            checkpointer=Checkpointer(directory),
            checkpoint_every=600,
        )
        assert second.restore()
        second.run()
        outputs.append((sink.values(), second.learner.to_state()))
    assert outputs[0] == outputs[1]
