"""The learners stream_nb exports, for the tests that run against every one of them.

Discovered from ``stream_nb.__all__``, so a learner exported later is tested
without editing a list.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import stream_nb
from stream_nb import Learner


def public_learners() -> list[type[Learner]]:
    """Every concrete learner class in ``stream_nb.__all__``, by name."""
    found = []
    for name in stream_nb.__all__:
        obj = getattr(stream_nb, name)
        if (
            isinstance(obj, type)
            and issubclass(obj, Learner)
            and obj is not Learner
            and not inspect.isabstract(obj)
        ):
            found.append(obj)
    return sorted(found, key=lambda cls: cls.__name__)


def learner_params() -> list[Any]:
    """:func:`public_learners` as ``pytest.param`` values named by class."""
    return [pytest.param(cls, id=cls.__name__) for cls in public_learners()]
