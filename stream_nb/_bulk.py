"""Building and reading large states: the cyclic garbage collector paused meanwhile."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_paused"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the duration of the block.

    A model's state holds about one small list or dict per stored number and
    none of them can form a reference cycle. While millions of them are
    created, the collector would otherwise rescan the growing heap again and
    again: most of the time of parsing the snapshot of a 300,000-feature
    CategoricalNB, and half of ranking its informative features
    (docs/benchmarks.md). Objects are freed by reference counting as usual;
    the collector's state is restored afterwards.

    Examples
    --------
    >>> import gc
    >>> with collector_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
