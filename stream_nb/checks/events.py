"""Events suited to each stream-nb learner, and factories for its checks."""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from stream_nb.base import Learner
from stream_nb.checks._support import Event, Factory
from stream_nb.datasets import agrawal, categorical_stream, mixed_stream, zipf_text

__all__ = ["default_factory", "suitable_events"]


def _late_class(events: Sequence[Event], label: Hashable) -> list[Event]:
    """Relabel every third event of the last quarter: a class that appears late."""
    start = len(events) * 3 // 4
    return [(x, label if i >= start and i % 3 == 0 else y) for i, (x, y) in enumerate(events)]


def _categorical_events(seed: int, n: int) -> list[Event]:
    events = categorical_stream(seed, n, features=5, values=4, missing=0.15)
    return _late_class(list(events), "late")


def _numeric_events(seed: int, n: int) -> list[Event]:
    rng = random.Random(seed)
    events = [
        ({k: v for k, v in x.items() if rng.random() >= 0.1}, y)  # some features missing
        for x, y in agrawal(seed, n, function=2, nominal=False)
    ]
    return _late_class(events, 2)


def _token_events(seed: int, n: int) -> list[Event]:
    events = zipf_text(seed, n, vocabulary=300, length=(1, 12), classes=2)
    return _late_class(list(events), 2)


def _mixed_events(seed: int, n: int) -> list[Event]:
    return _late_class(list(mixed_stream(seed, n, classes=2, missing=0.1)), "late")


#: Event generator by learner class name; other learners get categorical events.
_EVENTS_BY_LEARNER: dict[str, Callable[[int, int], list[Event]]] = {
    "CategoricalNB": _categorical_events,
    "GaussianNB": _numeric_events,
    "MultinomialNB": _token_events,
    "BernoulliNB": _token_events,
    "ComplementNB": _token_events,
    "NaiveBayes": _mixed_events,
}


def suitable_events(learner: type[Learner] | str, n: int = 120, seed: int = 0) -> list[Event]:
    """Seeded events of the kind a stream-nb learner expects, with a class appearing late.

    Categorical values for :class:`~stream_nb.CategoricalNB` (and any learner
    not listed, e.g. AODE or TAN), Agrawal's numbers with some features
    missing for ``GaussianNB``, Zipf token counts for ``MultinomialNB``,
    ``BernoulliNB`` and ``ComplementNB``, and mixed str/bool/float features for
    ``NaiveBayes``.

    Examples
    --------
    >>> x, y = suitable_events("MultinomialNB", n=5)[0]
    >>> all(isinstance(count, int) for count in x.values())
    True
    """
    name = learner if isinstance(learner, str) else learner.__name__
    return _EVENTS_BY_LEARNER.get(name, _categorical_events)(seed, n)


#: Constructor arguments a learner needs that have no default.
_REQUIRED_PARAMS: dict[str, dict[str, Any]] = {"SPODE": {"parent": "f0"}}


def default_factory(learner: type[Learner], **params: Any) -> Factory:
    """A factory for ``learner`` with ``params``, filling arguments without a default.

    Examples
    --------
    >>> from stream_nb import CategoricalNB
    >>> default_factory(CategoricalNB, alpha=0.5)().alpha
    0.5
    """
    merged = {**_REQUIRED_PARAMS.get(learner.__name__, {}), **params}
    return lambda: learner(**merged)
