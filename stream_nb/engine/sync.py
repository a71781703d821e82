"""Model deltas: what a learner learned since the last cut, and how to add it to another model.

Model sync (e.g. Kafka consumer groups, :mod:`stream_nb.connectors.kafka`) exchanges
these deltas between workers: every worker folds every delta, in one agreed order,
into the same base model. The recording itself is the learner's public API
(:meth:`~stream_nb.base.Learner.track_delta`, :meth:`~stream_nb.base.Learner.cut_delta`,
:meth:`~stream_nb.base.Learner.apply_delta`); :class:`DeltaTracker` follows the
learner a sync protocol currently treats as its main model.
"""

from __future__ import annotations

from stream_nb.base import Learner

__all__ = ["DeltaTracker", "defer_binning"]


class DeltaTracker:
    """Keeps the statistics a learner learned since the last :meth:`cut`, for any learner.

    The learner records every learned event into a second learner of the same
    class and parameters (:meth:`Learner.track_delta`); :meth:`cut` returns
    that delta with the total weight it learned and starts a new one.
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

    def __init__(self, learner: Learner) -> None:
        self.learner = learner
        self.adopt(learner)

    @property
    def delta(self) -> Learner:
        """What the tracked learner learned since the last cut."""
        delta = self.learner.delta
        assert delta is not None, "the learner stopped tracking its delta"
        return delta

    @property
    def weight(self) -> float:
        """The total weight :attr:`delta` learned."""
        return self.learner.delta_weight

    def adopt(self, learner: Learner, *, keep_delta: bool = False) -> None:
        """Track ``learner`` from now on, with an empty delta (or, with ``keep_delta``, the
        current one: the new learner already holds what it learned)."""
        previous = self.learner
        if keep_delta and previous.delta is not None:
            delta, weight = previous.delta, previous.delta_weight
            if previous is not learner:
                previous.stop_delta()
            learner.track_delta(delta, weight)
        else:
            if previous is not learner:
                previous.stop_delta()
            learner.track_delta()
        self.learner = learner

    def cut(self) -> tuple[Learner, float]:
        """``(delta, weight)`` learned since the previous cut; a new delta starts."""
        return self.learner.cut_delta()

    @staticmethod
    def apply(model: Learner, delta: Learner, weight: float) -> None:
        """Add ``delta`` (which learned total weight ``weight``) to ``model`` in place
        (:meth:`Learner.apply_delta`)."""
        model.apply_delta(delta, weight)


def defer_binning(learner: Learner) -> None:
    """Learners that discretise numbers: cut points freeze only in the base (the fold of
    the sync topic), never from one worker's own sample (:meth:`Learner.defer_binning`)."""
    learner.defer_binning()
