"""Decoding and validating events at the boundary (one ``orjson.loads`` per event).

An event is one JSON object. Two shapes are accepted:

* **nested**: ``{"x": {...features...}, "y": label, "id": ..., "w": weight}``;
* **flat**: ``{"f1": ..., "f2": ..., "y": label, "id": ...}``, where the label,
  id and weight fields are removed and every remaining key is a feature.

``shape="auto"`` (the default) reads an object as nested when its features
field holds an object, as flat otherwise. Field names are configurable.

Validation is fused into decoding: one pass over the feature values checks
that each is a JSON scalar (string, finite number, boolean or null) and, for
learners that need counts, non-negative. A rejected event raises
:class:`~stream_nb.InvalidEventError` whose ``reason`` is one of the bounded
codes in :data:`REASONS`, so it can label a metric and a dead letter.

Identifiers and labels are exact: orjson decodes an integer beyond 64 bits
as the nearest float, so an event whose id or label decodes to a float of
magnitude ``>= 2**63`` is decoded again with the standard library
(:meth:`EventDecoder.exact`), which keeps every integer of the line exact
(``18446744073709551617`` and ``18446744073709551618`` stay two ids). The
check costs two type tests per event; other lines never take the slow
decoder. Feature values of other lines are read as orjson reads them (a
number beyond 64 bits as a float, what a numeric feature uses anyway); send
an identifier-like feature as a string to keep it exact.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Hashable
from typing import Any, Literal, NamedTuple

import orjson

from stream_nb._exceptions import ConfigError, InvalidEventError
from stream_nb.engine._json import is_wide, loads_exact
from stream_nb.engine.settings import check_positive_int

__all__ = ["REASONS", "Event", "EventDecoder", "dead_letter_record"]

#: Every reason code a rejected event can carry (bounded: used as a metric label).
#: The same set as ``stream_nb.engine.telemetry.DEAD_LETTER_REASONS``.
REASONS: tuple[str, ...] = (
    "invalid_utf8",  # bytes are not UTF-8
    "invalid_json",  # not parseable JSON
    "too_large",  # payload larger than max_bytes
    "not_object",  # the JSON value is not an object
    "missing_features",  # no features field (nested) / no feature (flat)
    "invalid_features",  # features field not an object, or a feature value not a scalar
    "invalid_label",  # label is an array or object
    "invalid_id",  # id is an array or object
    "invalid_weight",  # weight is not a positive finite number
    "non_finite",  # NaN, Infinity or a number overflowing a double
    "negative_count",  # a negative value for a learner that needs counts
    "out_of_range",  # a number or weight beyond the learner's range (stream_nb.limits)
    "too_many_classes",  # a new class beyond the learner's max_classes
    "invalid_event",  # the learner rejected the event (InvalidEventError without a code)
    "learn_error",  # learning raised TypeError/ValueError
    "predict_error",  # predicting raised TypeError/ValueError
)

_NUMBER_TOKENS = re.compile(rb"(?<![\"\w])-?(?:NaN|Infinity)(?![\"\w])")
#: JSON scalar types as orjson decodes them (bool is its own type, checked by identity).
_SCALARS = frozenset((str, int, float, bool, type(None)))
#: Builds an Event without NamedTuple.__new__'s Python-level call.
_new_event = tuple.__new__

#: Upper bound for the ``error`` text of a dead letter (characters).
_MAX_ERROR_CHARS = 300


class Event(NamedTuple):
    """A decoded event.

    Attributes
    ----------
    x
        Features by name, or ``None`` for a label-only event (delayed labels).
    y
        The label, ``None`` when the event is unlabelled.
    id
        The event's id, or ``None``.
    w
        Sample weight (1.0 unless given).
    """

    x: dict[str, Any] | None
    y: Hashable | None
    id: Hashable | None
    w: float


class EventDecoder:
    """Turn raw payloads into :class:`Event` tuples, rejecting bad input with a reason.

    Parameters
    ----------
    shape
        ``"auto"``, ``"nested"`` or ``"flat"``.
    features_field, label_field, id_field, weight_field
        Field names. ``weight_field=None`` disables weights (the field is then
        an ordinary feature in flat events).
    max_bytes
        Largest accepted payload in bytes; longer ones are rejected with
        ``too_large`` (sources hand over at most ``max_bytes + 1`` bytes
        of such a line).
    nonnegative
        Reject negative numeric feature values (``negative_count``); set it
        for learners over counts (multinomial, complement).

    Examples
    --------
    >>> d = EventDecoder()
    >>> d.decode(b'{"x": {"a": 1.5}, "y": "cat", "id": 7}')
    Event(x={'a': 1.5}, y='cat', id=7, w=1.0)
    >>> d.decode(b'{"a": 1.5, "b": "red", "y": true}')
    Event(x={'a': 1.5, 'b': 'red'}, y=True, id=None, w=1.0)
    >>> d.decode(b'{"x": {"a": 1}, "id": 18446744073709551617}').id  # exact beyond 64 bits
    18446744073709551617
    >>> d.decode(b'[1, 2]')
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.InvalidEventError: event must be a JSON object, got list
    """

    def __init__(
        self,
        *,
        shape: Literal["auto", "nested", "flat"] = "auto",
        features_field: str = "x",
        label_field: str = "y",
        id_field: str | None = "id",
        weight_field: str | None = "w",
        max_bytes: int = 1 << 20,
        nonnegative: bool = False,
    ) -> None:
        if shape not in ("auto", "nested", "flat"):
            raise ConfigError(f"shape must be 'auto', 'nested' or 'flat', got {shape!r}")
        names = [n for n in (features_field, label_field, id_field, weight_field) if n is not None]
        if len(set(names)) != len(names):
            raise ConfigError(
                f"features, label, id and weight fields must differ, got {names!r}; "
                "rename one of them"
            )
        check_positive_int("max_bytes", max_bytes)
        self.shape = shape
        self.features_field = features_field
        self.label_field = label_field
        self.id_field = id_field
        self.weight_field = weight_field
        self.max_bytes = max_bytes
        self.nonnegative = nonnegative

    def loads(self, payload: bytes) -> Any:
        """Parse ``payload`` as JSON, mapping every failure to a reason code."""
        if len(payload) > self.max_bytes:
            raise InvalidEventError(
                f"payload is longer than {self.max_bytes} bytes; raise --max-line-bytes "
                "if such events are legitimate",
                reason="too_large",
            )
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            message = str(exc)
            if "UTF-8" in message:
                reason = "invalid_utf8"
            elif "infinity" in message or _NUMBER_TOKENS.search(payload):
                reason = "non_finite"
            else:
                reason = "invalid_json"
            raise InvalidEventError(f"cannot decode event: {message}", reason=reason) from None

    def decode(self, payload: bytes) -> Event:
        """Decode and validate one payload.

        Raises
        ------
        InvalidEventError
            With ``reason`` in :data:`REASONS`.
        """
        event = self.validate(self.loads(payload), True)
        if type(event[1]) is float or type(event[2]) is float:
            return self.exact(payload, event)
        return event

    def exact(self, payload: bytes, event: tuple[Any, ...]) -> Event:
        """``event``, or ``payload`` decoded again with every integer exact when its
        label or id may be an integer orjson rounded (a float of magnitude ``>= 2**63``).

        The engine calls it for events whose label or id is a float.

        Examples
        --------
        >>> d = EventDecoder()
        >>> line = b'{"x": {"a": 1}, "y": 1180591620717411303424}'
        >>> d.exact(line, d.validate(__import__("orjson").loads(line))).y
        1180591620717411303424
        """
        if is_wide(event[1]) or is_wide(event[2]):
            return self.validate(loads_exact(payload), True)
        return event if type(event) is Event else _new_event(Event, tuple(event))

    def validate(self, obj: Any, from_json: bool = False) -> Event:
        """Validate an already parsed JSON value (takes ownership of it).

        Parameters
        ----------
        obj
            The parsed value; its label, id, weight and (nested) features
            fields are popped.
        from_json
            ``True`` when ``obj`` is what ``orjson.loads`` returned: orjson never
            produces NaN or infinities, so floats are not checked for them
            (otherwise they are; Python objects may hold them).

        Examples
        --------
        >>> EventDecoder().validate({"x": {"a": 1}, "y": "cat", "w": 2})
        Event(x={'a': 1}, y='cat', id=None, w=2.0)
        >>> EventDecoder().validate({"x": {"a": float("nan")}})
        Traceback (most recent call last):
        ...
        stream_nb._exceptions.InvalidEventError: feature 'a' must be finite, got nan
        """
        if type(obj) is not dict:
            raise InvalidEventError(
                f"event must be a JSON object, got {type(obj).__name__}", reason="not_object"
            )
        y = obj.pop(self.label_field, None)
        if y is not None and type(y) not in _SCALARS:
            raise InvalidEventError(
                f"label {self.label_field!r} must be a JSON scalar, got {type(y).__name__}",
                reason="invalid_label",
            )
        eid = None
        if self.id_field is not None:
            eid = obj.pop(self.id_field, None)
            if eid is not None and type(eid) not in _SCALARS:
                raise InvalidEventError(
                    f"id {self.id_field!r} must be a JSON scalar, got {type(eid).__name__}",
                    reason="invalid_id",
                )
        w = 1.0
        if self.weight_field is not None:
            raw_w = obj.pop(self.weight_field, None)
            if raw_w is not None:
                if (
                    type(raw_w) not in (int, float)
                    or not raw_w > 0
                    or raw_w - raw_w != 0  # inf - inf is NaN
                ):
                    raise InvalidEventError(
                        f"weight {self.weight_field!r} must be a positive finite number, "
                        f"got {raw_w!r}",
                        reason="invalid_weight",
                    )
                w = float(raw_w)
        x: Any
        shape = self.shape
        if shape == "flat":
            x = obj
        elif self.features_field in obj and (
            shape == "nested" or type(obj[self.features_field]) is dict
        ):
            x = obj.pop(self.features_field)
            if type(x) is not dict:
                raise InvalidEventError(
                    f"features {self.features_field!r} must be a JSON object, "
                    f"got {type(x).__name__}",
                    reason="invalid_features",
                )
        elif shape == "auto":
            x = obj
        else:
            x = None
        if not x:
            # A label-only event (delayed labels) needs an id and a label.
            if eid is not None and y is not None:
                return _new_event(Event, (None, y, eid, w))
            raise InvalidEventError(
                "event has no features; send them in "
                f"{self.features_field!r} (nested) or as top-level keys (flat)",
                reason="missing_features",
            )
        if self.nonnegative:
            for name, value in x.items():
                t = type(value)
                if t is float or t is int:
                    if not value >= 0 or value - value != 0:
                        self._bad_value(name, value)
                elif t not in _SCALARS:
                    self._bad_value(name, value)
        elif not _SCALARS.issuperset(map(type, x.values())):  # one C-level pass
            for name, value in x.items():
                if type(value) not in _SCALARS:
                    self._bad_value(name, value)
        if not from_json:
            for name, value in x.items():
                if type(value) is float and value - value != 0:
                    self._bad_value(name, value)
            if type(y) is float and y - y != 0:
                raise InvalidEventError(f"label must be finite, got {y!r}", reason="non_finite")
        return _new_event(Event, (x, y, eid, w))

    def _bad_value(self, name: str, value: Any) -> None:
        t = type(value)
        if t is float and value - value != 0:
            raise InvalidEventError(
                f"feature {name!r} must be finite, got {value!r}", reason="non_finite"
            )
        if t in (int, float):
            raise InvalidEventError(
                f"feature {name!r} is {value!r}, but this learner needs non-negative counts",
                reason="negative_count",
            )
        raise InvalidEventError(
            f"feature {name!r} must be a JSON scalar (string, number, boolean or null), "
            f"got {t.__name__}",
            reason="invalid_features",
        )


def dead_letter_record(
    payload: bytes, position: Any, reason: str, error: str, *, timestamp: float | None = None
) -> bytes:
    """Encode one dead letter as a JSON line (without the newline).

    The raw payload is kept as text when it is valid UTF-8 (JSON escapes make
    any text safe), as base64 otherwise.

    Examples
    --------
    >>> dead_letter_record(b"\\xff", {"line": 3}, "invalid_utf8", "bad")
    b'{"reason":"invalid_utf8","position":{"line":3},"error":"bad","payload_base64":"/w=="}'
    """
    record: dict[str, Any] = {
        "reason": reason,
        "position": position,
        "error": error[:_MAX_ERROR_CHARS],
    }
    if timestamp is not None:
        record["timestamp"] = timestamp
    try:
        record["payload"] = payload.decode("utf-8")
    except UnicodeDecodeError:
        record["payload_base64"] = base64.b64encode(payload).decode("ascii")
    return orjson.dumps(record)
