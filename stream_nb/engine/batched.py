"""The batched path: a learner's ``predict_learn_many`` over each segment of decoded events.

The batch is decoded, cut into segments at its rejected and label-only events
and its records written by :func:`~stream_nb.engine.general.process_general`:
the same records, dead letters, evaluation and model as the per-event path
(:mod:`~stream_nb.engine.per_event`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stream_nb.connectors.base import Record
from stream_nb.engine.general import Features, Labels, Predicted, Weights, process_general

if TYPE_CHECKING:
    from stream_nb.engine.engine import Engine


class PredictMany:
    """A segment through one :meth:`Learner.predict_learn_many` call, then the
    engine's decision rule (a :class:`~stream_nb.engine.general.Predictor`)."""

    #: learning happens inside the batched call: its time counts as predicting
    learn_share = 0.0

    def __init__(self, engine: Engine) -> None:
        self.learner = engine.learner
        self.decide = engine.decide
        self.output = engine.output

    def predict(self, xs: Features, ys: Labels, ws: Weights) -> Predicted:
        log_probas, predictions, errors = self.learner.predict_learn_many(xs, ys, ws)
        last = log_probas[-1]
        if last is not None:
            self.output.classes = len(last)
        decide = self.decide
        if decide is not None:
            predictions = [
                decide(lp) if lp is not None and y_pred is not None else y_pred
                for lp, y_pred in zip(log_probas, predictions)  # noqa: B905 (same length)
            ]
        return log_probas, predictions, errors, None


def process_batched(engine: Engine, records: list[Record]) -> None:
    """The batched path (any batch the column and per-event paths do not take)."""
    process_general(engine, records, PredictMany(engine))
