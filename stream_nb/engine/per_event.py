"""The per-event path: predict, explain and learn one event at a time.

Taken for explanations (they read the model as it predicts the event) and
for the error policy ``raise`` (it stops at the first bad event, before the
events after it are learned). The batch is decoded, cut into segments and
its records written by :func:`~stream_nb.engine.general.process_general`.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from stream_nb._exceptions import InvalidEventError
from stream_nb.base import log_softmax_argmax
from stream_nb.connectors.base import Record
from stream_nb.engine.explain import explain as explain_event
from stream_nb.engine.general import Features, Labels, Predicted, Weights, process_general
from stream_nb.engine.settings import ErrorPolicy

if TYPE_CHECKING:
    from stream_nb.engine.engine import Engine


class PredictEach:
    """A segment's events predicted (and explained), then learned, one at a time.

    A :class:`~stream_nb.engine.general.Predictor`. Under the error policy
    ``raise`` it stops at the first event the learner rejects. With metrics,
    one event in ``latency_every`` is timed, to split the segment's time
    between predicting and learning.
    """

    def __init__(self, engine: Engine) -> None:
        self.learner = engine.learner
        self.decide = engine.decide
        self.explain = engine.explain
        self.stop_at_error = engine.error_policy is ErrorPolicy.RAISE
        self.every = engine.latency_every if engine.metrics is not None else 0
        self.counter = 0
        self.predict_seconds = 0.0  # of the timed events
        self.learn_seconds = 0.0
        self.classes: int | None = None  # in the newest prediction

    @property
    def learn_share(self) -> float:
        """Share of the timed events' time spent learning."""
        total = self.predict_seconds + self.learn_seconds
        return self.learn_seconds / total if total else 0.0

    def predict(self, xs: Features, ys: Labels, ws: Weights) -> Predicted:
        """Predict (and explain) each event of the segment, then learn it when labelled."""
        learner = self.learner
        jll_of, learn = learner.joint_log_likelihood_one, learner.learn_one
        decide, stop, every = self.decide, self.stop_at_error, self.every
        counter = self.counter
        perf = time.perf_counter
        log_probas: list[dict[Hashable, float] | None] = []
        predictions: list[Hashable | None] = []
        errors: dict[int, Exception] = {}
        explanations: list[Any] | None = [] if self.explain else None
        add_lp, add_pred = log_probas.append, predictions.append
        timed = False
        t1 = t2 = t_predict = t_learn = 0.0
        for i, x in enumerate(xs):
            if every:
                counter += 1
                timed = counter % every == 0
                if timed:
                    t1 = perf()
            try:
                jll = jll_of(x)
            except (InvalidEventError, TypeError, ValueError) as exc:
                errors[i] = exc
                add_lp(None)
                add_pred(None)
                if explanations is not None:
                    explanations.append(None)
                if stop:
                    break
                continue
            lp: dict[Hashable, float]
            if jll:
                lp, y_pred = log_softmax_argmax(jll)
                if decide is not None:
                    y_pred = decide(lp)
            else:
                lp = {}
                y_pred = None
            add_lp(lp)
            add_pred(y_pred)
            if explanations is not None:
                # explanations read the model as it predicted the event
                explanations.append(
                    explain_event(learner, x, jll, predicted=y_pred) if jll else None
                )
            if timed:
                t2 = perf()
            y = ys[i]
            if y is not None:
                try:
                    learn(x, y, ws[i])
                except (InvalidEventError, TypeError, ValueError) as exc:
                    errors[i] = exc
                    if stop:
                        break
            if timed:
                t_predict += t2 - t1
                t_learn += perf() - t2
        self.counter = counter
        self.predict_seconds += t_predict
        self.learn_seconds += t_learn
        for lp_or_none in reversed(log_probas):
            if lp_or_none is not None:
                self.classes = len(lp_or_none)
                break
        return log_probas, predictions, errors, explanations


def process_each(engine: Engine, records: list[Record]) -> None:
    """The per-event path (explanations, error policy ``raise``) for one batch."""
    predictor = PredictEach(engine)
    process_general(engine, records, predictor)
    if predictor.classes is not None:  # (a batch stopped by the error policy leaves it)
        engine.output.classes = predictor.classes
