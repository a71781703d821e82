"""The envelope of a learner state: format, version, learner class, parameters, counters.

:meth:`stream_nb.base.Learner.to_state` writes it around the learner's own
statistics; :meth:`~stream_nb.base.Learner.from_state` reads it with the
functions here, builds the learner and hands it the statistics. Every error
becomes a :class:`~stream_nb.ModelStateError` naming the learner and the
field (:func:`malformed_state`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from stream_nb._exceptions import ModelStateError
from stream_nb._state import STATE_ERRORS, decode_value, field, read_count

__all__ = [
    "STATE_FORMAT",
    "STATE_VERSION",
    "malformed_state",
    "read_class",
    "read_params",
    "read_scale",
]

STATE_FORMAT = "stream-nb/learner"
STATE_VERSION = 1

T = TypeVar("T")


def read_class(state: Any, registry: Mapping[str, type[T]], expected: type[T]) -> type[T]:
    """The learner class a state names, checked: format, version, a registered
    class, and (unless ``expected`` is the registry's base) a subclass of ``expected``.

    Examples
    --------
    >>> from stream_nb import CategoricalNB, Learner
    >>> registry = {"CategoricalNB": CategoricalNB}
    >>> read_class(CategoricalNB().to_state(), registry, Learner).__name__
    'CategoricalNB'
    >>> read_class({"format": "other"}, registry, Learner)
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ModelStateError: not a stream-nb learner state (expected format ...
    """
    if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
        raise ModelStateError(f"not a stream-nb learner state (expected format {STATE_FORMAT!r})")
    if state.get("version") != STATE_VERSION:
        raise ModelStateError(
            f"unsupported learner state version {state.get('version')!r}; "
            f"this stream-nb reads version {STATE_VERSION}"
        )
    name = state.get("learner")
    target = registry.get(name) if isinstance(name, str) else None
    if target is None:
        raise ModelStateError(f"unknown learner {name!r} in state")
    if not issubclass(target, expected):
        raise ModelStateError(f"state holds a {name}, not a {expected.__name__}")
    return target


def read_params(state: Mapping[str, Any]) -> dict[str, Any]:
    """The constructor arguments a state holds, decoded (:func:`~stream_nb._state.decode_value`)."""
    raw = field(state, "params", "state")
    if not isinstance(raw, Mapping):
        raise ModelStateError(f"params: must be a JSON object, got {raw!r:.80}")
    return {k: decode_value(v) for k, v in raw.items()}


def read_scale(state: Mapping[str, Any], half_life: float | None) -> float:
    """The forgetting scale: in (0, 1] with ``half_life``, exactly 1 without."""
    scale = read_count(field(state, "scale", "state"), "scale", positive=True)
    if scale > 1.0 or (half_life is None and scale != 1.0):
        raise ModelStateError(
            f"scale: must be in (0, 1] with half_life and exactly 1 without, got {scale!r}"
        )
    return scale


@contextlib.contextmanager
def malformed_state(name: str) -> Iterator[None]:
    """Turn any error raised while loading a ``name`` state into a
    :class:`~stream_nb.ModelStateError` that starts "malformed <name> state"."""
    try:
        yield
    except ModelStateError as exc:
        if str(exc).startswith(f"malformed {name} state"):
            raise
        raise ModelStateError(f"malformed {name} state: {exc}") from exc
    except STATE_ERRORS as exc:
        raise ModelStateError(f"malformed {name} state: {exc!r}") from exc
