"""Cost probes of the text learners: prove that a prediction never scans the vocabulary.

No public hook counts how a learner reads its token store, so
:func:`guard_vocabulary` is the one place the tests reach into a learner's
private store (``_counts``, in :mod:`stream_nb.naive_bayes._text`), and
:func:`count_logs` counts the logarithms a learner module takes.
"""

from __future__ import annotations

import math
from collections.abc import KeysView
from types import ModuleType
from typing import Any

import pytest


class ScanGuard(dict):  # type: ignore[type-arg]
    """A dict that counts lookups and fails on any scan of its contents."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.lookups = 0

    def get(self, key: Any, default: Any = None) -> Any:
        self.lookups += 1
        return super().get(key, default)

    def _scan(self, *args: Any) -> Any:
        raise AssertionError("the vocabulary was scanned")

    items = values = __iter__ = _scan  # type: ignore[assignment]

    def keys(self) -> Any:  # type: ignore[override]
        """A view that answers membership (O(1)) but fails if iterated."""
        return _GuardedKeys(self)


class _GuardedKeys(KeysView):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        raise AssertionError("the vocabulary was scanned")


def guard_vocabulary(model: Any) -> ScanGuard:
    """Put a :class:`ScanGuard` in place of a text learner's token store and return it."""
    guard = ScanGuard(model._counts)
    model._counts = guard
    return guard


def count_logs(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[float]:
    """The arguments of every ``log`` (and ``log1p``, as ``log(1 + v)``) that ``module``
    takes through its ``_log`` and ``_log1p`` names from now on."""
    logs: list[float] = []

    def counting_log(v: float) -> float:
        logs.append(v)
        return math.log(v)

    monkeypatch.setattr(module, "_log", counting_log)
    monkeypatch.setattr(module, "_log1p", lambda v: counting_log(1.0 + v))
    return logs
