"""The engine's column path against its general path, for a semi-naive kernel."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

import orjson

from stream_nb import Learner
from stream_nb.checks.engine import run_engine


def _run(lines: list[bytes], make: Callable[[], Learner], columns: bool) -> tuple[Any, ...]:
    class Counting(type(make())):  # type: ignore[misc]
        taken = 0

        def predict_learn_columns(self, *args: Any) -> Any:
            out = super().predict_learn_columns(*args)
            self.taken += out is not None
            return out

    learner = Counting(**make().get_params())
    run = run_engine(learner, lines, column_path=columns)
    return run.records, run.state, run.report, run.outcomes, learner.taken


def assert_engine_paths_agree(
    make: Callable[[], Learner],
    stream: Iterable[tuple[dict[str, Any], Hashable | None, float]],
) -> None:
    """Events of ``stream`` (with ids, weights, some unlabelled, and every 701st with
    another key set, so that batch takes the general path) through the column path and
    the general path: the same records byte for byte, model, evaluation and outcomes,
    and the kernel taking at least 10 batches."""
    lines = []
    for i, (x, y, w) in enumerate(stream):
        event: dict[str, Any] = {"id": f"e{i}", **x, "w": w}
        if y is not None:
            event["y"] = y
        if i % 701 == 0:
            del event["f3"]
        lines.append(orjson.dumps(event))
    fast = _run(lines, make, columns=True)
    slow = _run(lines, make, columns=False)
    assert fast[0] == slow[0]  # every prediction record, byte for byte
    assert fast[1] == slow[1]  # the model
    assert fast[2] == slow[2]  # the evaluation
    assert fast[3] == slow[3]
    assert slow[4] == 0 and fast[4] >= 10, fast[4]
