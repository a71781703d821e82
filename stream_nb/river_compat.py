"""Use any stream-nb learner where river expects a classifier.

river is an optional dependency (``pip install 'stream-nb[river]'``): importing
:mod:`stream_nb` never imports it, only importing this module does.
:class:`RiverClassifier` wraps a learner in a ``river.base.Classifier``, so it
works in ``river.evaluate.progressive_val_score``, river pipelines (after river
preprocessors such as ``StandardScaler``), ``model_selection`` and ``river.checks``.

Examples
--------
>>> from stream_nb import CategoricalNB
>>> from stream_nb.river_compat import RiverClassifier
>>> model = RiverClassifier(CategoricalNB())
>>> model.learn_one({"colour": "red"}, "apple")
>>> model.predict_one({"colour": "red"})
'apple'
>>> str(model)
'CategoricalNB'
"""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import Any

try:
    from river import base as _river_base
except ImportError as exc:  # pragma: no cover - exercised only without river installed
    raise ImportError(
        "stream_nb.river_compat needs river, an optional dependency: pip install 'stream-nb[river]'"
    ) from exc

from stream_nb._exceptions import ConfigError
from stream_nb.base import Learner

__all__ = ["RiverClassifier"]

#: Learners whose features are counts (negative values are rejected): river
#: feeds them only non-negative data when told through its POSITIVE_INPUT tag.
_POSITIVE_INPUT = frozenset({"MultinomialNB", "ComplementNB"})


class RiverClassifier(_river_base.Classifier):
    """A ``river.base.Classifier`` delegating to a stream-nb learner.

    Parameters
    ----------
    learner
        Any :class:`stream_nb.base.Learner`; it is used (and trained) in place,
        so ``wrapper.learner`` is the trained model, ready for ``to_state``.

    Notes
    -----
    ``clone()`` returns a wrapper around ``learner.clone()`` (untrained, same
    parameters), as river's model selection expects. Sample weights are passed
    through: ``learn_one(x, y, w=2.0)``. The wrapper adds
    ``predict_log_proba_one`` next to river's methods.

    Examples
    --------
    >>> from river import compose, evaluate, metrics
    >>> from stream_nb import CategoricalNB
    >>> from stream_nb.datasets import categorical_stream
    >>> model = compose.Select("f0", "f1", "f2") | RiverClassifier(CategoricalNB())
    >>> evaluate.progressive_val_score(
    ...     categorical_stream(seed=1, n=500), model, metrics.Accuracy()
    ... )
    Accuracy: 74.55%
    """

    def __init__(self, learner: Learner) -> None:
        if not isinstance(learner, Learner):
            raise ConfigError(
                f"RiverClassifier wraps a stream-nb Learner, got {type(learner).__name__}; "
                "river models are classifiers already and need no wrapper"
            )
        self.learner = learner

    def learn_one(self, x: dict[Any, Any], y: Hashable, w: float = 1.0) -> None:
        """Learn one event (``w`` is the sample weight)."""
        self.learner.learn_one(x, y, w)

    def predict_proba_one(  # type: ignore[override]  # labels: any hashable
        self, x: dict[Any, Any], **kwargs: Any
    ) -> dict[Hashable, float]:
        """``P(y | x)`` of every class; ``{}`` before learning."""
        return self.learner.predict_proba_one(x)

    def predict_log_proba_one(self, x: dict[Any, Any]) -> dict[Hashable, float]:
        """``log P(y | x)`` of every class; ``{}`` before learning."""
        return self.learner.predict_log_proba_one(x)

    def predict_one(  # type: ignore[override]  # labels: any hashable
        self, x: dict[Any, Any], **kwargs: Any
    ) -> Hashable | None:
        """The most probable class; ``None`` before learning."""
        return self.learner.predict_one(x)

    @property
    def _multiclass(self) -> bool:
        return True

    def _more_tags(self) -> set[str]:
        if type(self.learner).__name__ in _POSITIVE_INPUT:
            return {_river_base.tags.POSITIVE_INPUT}
        return set()

    def clone(
        self, new_params: dict[str, Any] | None = None, include_attributes: bool = False
    ) -> RiverClassifier:
        """A fresh wrapper around an untrained learner with the same parameters.

        ``new_params`` may replace the learner (``{"learner": CategoricalNB(alpha=2)}``);
        ``include_attributes=True`` keeps the trained statistics (a deep copy).
        """
        new_params = dict(new_params or {})
        learner = new_params.pop("learner", None)
        if new_params:
            raise ConfigError(
                f"RiverClassifier has only the parameter 'learner', got {sorted(new_params)}"
            )
        if learner is None:
            learner = copy.deepcopy(self.learner) if include_attributes else self.learner.clone()
        return RiverClassifier(learner)

    def __str__(self) -> str:
        return type(self.learner).__name__

    def __repr__(self) -> str:
        return f"RiverClassifier({self.learner!r})"

    @classmethod
    def _unit_test_params(cls) -> Any:
        from stream_nb.naive_bayes.categorical import CategoricalNB

        yield {"learner": CategoricalNB()}
