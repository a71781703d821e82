"""Model deltas: what a learner learned since the last cut, and how to add it to another model.

Model sync (e.g. Kafka consumer groups, :mod:`stream_nb.connectors.kafka`) exchanges
these deltas between workers: every worker folds every delta, in one agreed order,
into the same base model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["DeltaTracker", "defer_binning"]


class DeltaTracker:
    """Keeps the statistics a learner learned since the last :meth:`cut`, for any learner.

    The learner's ``learn_one`` is teed (an instance attribute) into a second
    learner of the same class and parameters (``learner.clone()``); :meth:`cut`
    returns that delta with the total weight it learned and starts a new one.
    :meth:`apply` adds a delta to a model: counts add, Welford moments combine
    by Chan's formula (:meth:`Learner.merge`). With ``half_life`` the model is
    first decayed by ``γ^W`` for the delta's weight ``W`` (``γ = 2^(-1/half_life)``)
    — exactly what learning those events would have done to it — so replaying
    one worker's deltas in order rebuilds its model exactly.

    Examples
    --------
    >>> from stream_nb import CategoricalNB
    >>> model = CategoricalNB(half_life=3)
    >>> tracker = DeltaTracker(model)
    >>> rebuilt = model.clone()
    >>> for i, (x, y) in enumerate([({"a": 1}, "p"), ({"a": 2}, "q"), ({"a": 1}, "p")]):
    ...     model.learn_one(x, y)
    ...     if i != 1:
    ...         DeltaTracker.apply(rebuilt, *tracker.cut())
    >>> x = {"a": 1}
    >>> abs(rebuilt.predict_proba_one(x)["p"] - model.predict_proba_one(x)["p"]) < 1e-12
    True
    """

    def __init__(self, learner: Any) -> None:
        self.learner: Any = learner
        self.delta: Any = None
        self.weight = 0.0
        self.adopt(learner)

    def adopt(self, learner: Any, *, keep_delta: bool = False) -> None:
        """Track ``learner`` from now on, with an empty delta (or, with ``keep_delta``, the
        current one: the new learner already holds what it learned)."""
        if keep_delta:
            delta, weight = self.delta, self.weight
        else:
            delta, weight = learner.clone(), 0.0
            _delta_bins(learner, delta)
        learn_main = type(learner).learn_one.__get__(learner)
        learn_delta = delta.learn_one
        tracker = self
        self._in_batch = False

        def learn_one(x: Mapping[str, Any], y: Any, w: float = 1.0) -> None:
            learn_main(x, y, w)
            if not tracker._in_batch:
                learn_delta(x, y, w)
                tracker.weight += w

        learner.learn_one = learn_one
        batch = getattr(type(learner), "predict_learn_many", None)
        if batch is not None:
            batch_main = batch.__get__(learner)

            def predict_learn_many(xs: Any, ys: Any, ws: Any) -> Any:
                # A learner's own batch path may bypass learn_one: replay what it learned.
                tracker._in_batch = True
                try:
                    out = batch_main(xs, ys, ws)
                finally:
                    tracker._in_batch = False
                errors = out[2]
                for i, (x, y, w) in enumerate(zip(xs, ys, ws, strict=True)):
                    if y is not None and i not in errors:
                        learn_delta(x, y, w)
                        tracker.weight += w
                return out

            learner.predict_learn_many = predict_learn_many
        self.learner, self.delta, self.weight = learner, delta, weight

    def cut(self) -> tuple[Any, float]:
        """``(delta, weight)`` learned since the previous cut; a new delta starts."""
        delta, weight = self.delta, self.weight
        self.adopt(self.learner)
        return delta, weight

    @staticmethod
    def apply(model: Any, delta: Any, weight: float) -> None:
        """Add ``delta`` (which learned total weight ``weight``) to ``model`` in place.

        ``model.merge`` is the learner's own: TAN and KDB rebuild their structure from
        the merged statistics there.
        """
        from stream_nb.base import _RENORMALISE_BELOW

        half_life = model.half_life
        if half_life is not None and weight > 0:
            # Decay as learning weight W would have: true = raw × scale, so scale *= γ^W.
            scale = model._scale * 0.5 ** (weight / half_life)
            if scale < _RENORMALISE_BELOW:
                model._rescale(scale)
                scale = 1.0
            model._scale = scale
        model.merge(delta)


def _delta_bins(learner: Any, delta: Any) -> None:
    """Semi-naive learners: a delta bins numeric values with the model's frozen cut points
    and never freezes any of its own; values of features still warming up stay raw in it
    (pending, with their sample), to be binned by whichever model it is merged into."""
    source, target = getattr(learner, "_disc", None), getattr(delta, "_disc", None)
    if source is None or target is None:
        return
    for feature, edges in source.edges.items():
        target.edges.setdefault(feature, list(edges))
    target.warmup = math.inf


def defer_binning(learner: Any) -> None:
    """Semi-naive learners under sync: cut points freeze only in the base (the fold of the
    sync topic), never from one worker's own sample, so every worker uses the same bins."""
    disc = getattr(learner, "_disc", None)
    if disc is not None:
        disc.warmup = math.inf
