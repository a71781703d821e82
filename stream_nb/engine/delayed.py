"""A bounded cache of predictions waiting for their label (delayed labels).

When labels arrive later than the features (``{"id": 7, "x": {...}}`` now,
``{"id": 7, "y": "spam"}`` later), the engine keeps what it needs to learn
and to score the earlier prediction: the features, the weight, the predicted
label and the emitted log-probabilities. The cache is bounded by size (the
oldest entry is evicted first) and by age in seconds; evictions are counted.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, NamedTuple

from stream_nb._exceptions import CheckpointError, ConfigError
from stream_nb.engine.settings import check_positive_int

__all__ = ["DelayedLabelCache", "Pending"]


class Pending(NamedTuple):
    """One prediction waiting for its label."""

    x: dict[str, Any]
    w: float
    y_pred: Hashable | None
    log_proba: dict[Hashable, float]
    inserted: float


class DelayedLabelCache:
    """Pending predictions by event id, bounded by size and age.

    Parameters
    ----------
    max_size
        Most entries kept; adding one more evicts the oldest.
    max_age
        Entries older than this many seconds are evicted (checked on every
        insertion, oldest first, so the cost is amortised O(1)). ``None``
        disables the age limit.
    clock
        Seconds since the epoch (wall clock, so ages survive a restart).

    Examples
    --------
    >>> cache = DelayedLabelCache(max_size=1)
    >>> cache.put("a", {"f": 1}, 1.0, "yes", {"yes": 0.0})
    >>> cache.put("b", {"f": 2}, 1.0, "no", {"no": 0.0})
    >>> cache.evicted, len(cache), cache.pop("a") is None, cache.pop("b").y_pred
    (1, 1, True, 'no')
    """

    def __init__(
        self,
        max_size: int = 100_000,
        max_age: float | None = 3600.0,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        check_positive_int("max_size", max_size)
        if max_age is not None and not (
            isinstance(max_age, (int, float)) and not isinstance(max_age, bool) and max_age > 0
        ):
            raise ConfigError(
                f"max_age must be a positive number of seconds or None, got {max_age!r}"
            )
        self.max_size = max_size
        self.max_age = None if max_age is None else float(max_age)
        self._clock = clock
        self._entries: OrderedDict[Hashable, Pending] = OrderedDict()
        #: Entries dropped because of the size or age limit (cumulative).
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(
        self,
        key: Hashable,
        x: dict[str, Any],
        w: float,
        y_pred: Hashable | None,
        log_proba: dict[Hashable, float],
    ) -> None:
        """Keep a prediction until its label arrives (a repeated id replaces the entry)."""
        now = self._clock()
        entries = self._entries
        if key in entries:
            del entries[key]
        entries[key] = Pending(x, w, y_pred, log_proba, now)
        self.expire(now)
        while len(entries) > self.max_size:
            entries.popitem(last=False)
            self.evicted += 1

    def pop(self, key: Hashable) -> Pending | None:
        """The pending prediction for ``key`` (removed), or ``None`` if unknown/evicted."""
        return self._entries.pop(key, None)

    def expire(self, now: float | None = None) -> None:
        """Evict entries older than ``max_age``."""
        if self.max_age is None:
            return
        limit = (self._clock() if now is None else now) - self.max_age
        entries = self._entries
        while entries:
            key, oldest = next(iter(entries.items()))
            if oldest.inserted >= limit:
                break
            del entries[key]
            self.evicted += 1

    def to_state(self) -> dict[str, Any]:
        """JSON-able state (ids and labels keep their JSON types via pair lists)."""
        return {
            "evicted": self.evicted,
            "entries": [
                [k, p.x, p.w, p.y_pred, [[c, v] for c, v in p.log_proba.items()], p.inserted]
                for k, p in self._entries.items()
            ],
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Replace the content with :meth:`to_state` output (unchanged if it is malformed).

        Raises
        ------
        CheckpointError
            If ``state`` is malformed.
        """
        other = self.loaded(state)
        self._entries, self.evicted = other._entries, other.evicted

    def loaded(self, state: Mapping[str, Any]) -> DelayedLabelCache:
        """A new cache with this one's limits and clock holding :meth:`to_state` output.

        Raises
        ------
        CheckpointError
            If ``state`` is malformed (entries must be ``[id, features object,
            weight, prediction, [[class, log-probability], ...], time]``).

        Examples
        --------
        >>> cache = DelayedLabelCache(max_size=10)
        >>> cache.put(7, {"f": 1}, 1.0, "yes", {"yes": 0.0})
        >>> copy = DelayedLabelCache(max_size=10).loaded(cache.to_state())
        >>> copy.pop(7).y_pred, copy.max_size
        ('yes', 10)
        """
        try:
            entries: OrderedDict[Hashable, Pending] = OrderedDict()
            for key, x, w, y_pred, lp, inserted in state["entries"]:
                if not isinstance(x, dict):
                    raise TypeError(f"features must be an object, got {type(x).__name__}")
                hash(key)
                hash(y_pred)
                entries[key] = Pending(
                    dict(x), float(w), y_pred, {c: float(v) for c, v in lp}, float(inserted)
                )
            evicted = state["evicted"]
            if isinstance(evicted, bool) or not isinstance(evicted, int) or evicted < 0:
                raise ValueError(f"evicted must be a non-negative integer, got {evicted!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"malformed delayed-label cache state: {exc!r}") from exc
        other = DelayedLabelCache(self.max_size, self.max_age, clock=self._clock)
        other._entries = entries
        other.evicted = evicted
        return other
