"""Plain-data encoding of learner states (JSON-able, never pickle), and their validation.

Encoding
--------
JSON objects only have string keys, while labels, feature names and feature
values may be any of ``str``, ``int``, ``float``, ``bool`` (and ``None`` for
the "other" bucket). Mappings are therefore stored as lists of ``[key, value]``
pairs, which keep key types.

Integers are kept exactly whatever their size: those outside the signed 64-bit
range (which JSON libraries such as orjson cannot write, or read back as
floats) are written as ``{"$int": "<decimal digits>"}`` (hexadecimal,
``"0x…"``, beyond :data:`_MAX_DECIMAL_BITS` bits, where Python limits decimal
conversion). States never hold a JSON object where a label or key is
expected, so the tag cannot be confused with data, and states written before
the tag existed read unchanged.

Validation
----------
A state may come from untrusted storage. Every reader goes through the helpers
below, which raise :class:`~stream_nb.ModelStateError` naming the field (a
path such as ``stats.class_weight[3]``), the bad value and what was expected;
nothing else (``KeyError``, ``TypeError``, a later NaN) escapes. Each helper
costs O(size of what it reads).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, cast

from stream_nb._exceptions import InvalidEventError, ModelStateError

__all__ = [
    "CATEGORY_TYPES",
    "LABEL_TYPES",
    "NAME_TYPES",
    "STATE_ERRORS",
    "check_at_most",
    "check_categories",
    "check_consistent",
    "check_feature_names",
    "check_label",
    "check_mapping",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "field",
    "from_pairs",
    "pairs",
    "read_count",
    "read_finite",
    "read_key",
    "read_keys",
    "read_label",
    "read_list",
    "read_mapping",
    "read_n_learned",
    "read_pairs",
]

_SCALARS = (str, int, float, bool, type(None))
_INT_TAG = "$int"
#: Integers in [-2**63, 2**63) are plain JSON numbers; others are tagged.
_INT_LOW = -(1 << 63)
_INT_HIGH = (1 << 63) - 1
#: Python refuses decimal conversions of more than 4300 digits (about 14,000
#: bits); bigger integers are tagged in hexadecimal, which has no such limit.
_MAX_DECIMAL_BITS = 14_000

#: Relative tolerance when a stored total is compared with the sum of its parts:
#: both are float sums of the same weights taken in different orders.
CONSISTENCY_TOLERANCE = 1e-6

#: What reading a malformed state can raise besides :class:`~stream_nb.ModelStateError`,
#: from code that does not check every value first (a missing key, ``float()`` of a
#: list, an index past a list's end, a state nested deeper than the recursion limit):
#: every state reader turns these into a ``ModelStateError`` naming the state.
STATE_ERRORS: tuple[type[Exception], ...] = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    ArithmeticError,
    RecursionError,
)

_isfinite = math.isfinite


# ---------------------------------------------------------------------- encoding
def _tag_int(value: int) -> dict[str, str]:
    if value.bit_length() > _MAX_DECIMAL_BITS:
        return {_INT_TAG: hex(value)}
    return {_INT_TAG: str(value)}


def encode_key(key: Any) -> Any:
    """A label, feature name or value as JSON data: itself, or an exact integer tag.

    Examples
    --------
    >>> encode_key("a"), encode_key(7), encode_key(2**70)
    ('a', 7, {'$int': '1180591620717411303424'})
    """
    if type(key) is int and not _INT_LOW <= key <= _INT_HIGH:
        return _tag_int(key)
    return key


def decode_key(value: Any) -> Any:
    """Inverse of :func:`encode_key`; a malformed tag raises ``ValueError``.

    Examples
    --------
    >>> decode_key({"$int": "1180591620717411303424"}) == 2**70
    True
    """
    if type(value) is dict:
        text = value.get(_INT_TAG) if len(value) == 1 else None
        if type(text) is not str or len(text) > 20_000:
            raise ValueError(f"expected a scalar or {{'$int': 'digits'}}, got {value!r}")
        try:
            if text.startswith(("0x", "-0x")):
                return int(text, 16)
            if not text.lstrip("-").isdigit():
                raise ValueError(text)
            return int(text)
        except ValueError:
            raise ValueError(f"malformed integer tag {value!r}") from None
    return value


def pairs(mapping: Mapping[Any, Any]) -> list[list[Any]]:
    """``{k: v}`` as ``[[k, v], ...]``, keeping key types (integers exactly).

    Examples
    --------
    >>> pairs({1: 2.0, "a": 3, 2**64: 1.0})
    [[1, 2.0], ['a', 3], [{'$int': '18446744073709551616'}, 1.0]]
    """
    low, high = _INT_LOW, _INT_HIGH
    return [
        [k if type(k) is not int or low <= k <= high else _tag_int(k), v]
        for k, v in mapping.items()
    ]


def from_pairs(items: Iterable[Any]) -> dict[Hashable, Any]:
    """Inverse of :func:`pairs`; rejects non-scalar keys.

    Examples
    --------
    >>> from_pairs([[1, 2.0], ["a", 3]])
    {1: 2.0, 'a': 3}
    """
    return read_pairs(items, "pairs", lambda v, where: v, key=_scalar_key)


def encode_value(value: Any) -> Any:
    """Encode a parameter value: mappings become ``{"$map": pairs}``, tuples lists.

    Examples
    --------
    >>> encode_value({"a": (1, 2**64)})
    {'$map': [['a', [1, {'$int': '18446744073709551616'}]]]}
    """
    if isinstance(value, Mapping):
        return {"$map": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [encode_value(v) for v in value]
    if isinstance(value, _SCALARS):
        return encode_key(value)
    raise TypeError(f"cannot encode parameter value of type {type(value).__name__}")


def decode_value(value: Any) -> Any:
    """Inverse of :func:`encode_value`."""
    if isinstance(value, dict):
        if set(value) == {_INT_TAG}:
            return decode_key(value)
        if set(value) != {"$map"}:
            raise ValueError("encoded mappings must be {'$map': [[key, value], ...]}")
        return {decode_value(k): decode_value(v) for k, v in value["$map"]}
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    return value


# ---------------------------------------------------------------------- validation
def _fail(where: str, message: str) -> ModelStateError:
    return ModelStateError(f"{where}: {message}")


def field(state: Any, name: str, where: str) -> Any:
    """``state[name]``, or :class:`ModelStateError` naming the missing field.

    Examples
    --------
    >>> field({"a": 1}, "b", "stats")
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ModelStateError: stats: missing field 'b'
    """
    if not isinstance(state, Mapping):
        raise _fail(where, f"must be a JSON object, got {_show(state)}")
    if name not in state:
        raise _fail(where, f"missing field {name!r}")
    return state[name]


def read_mapping(state: Any, where: str, fields: Iterable[str]) -> Mapping[str, Any]:
    """``state`` if it is a mapping with exactly these ``fields``.

    An unexpected field usually means the state was written by another learner
    (e.g. a MultinomialNB state relabelled BernoulliNB): the error says so.
    """
    if not isinstance(state, Mapping):
        raise _fail(where, f"must be a JSON object, got {_show(state)}")
    expected = set(fields)
    missing = sorted(expected - state.keys())
    if missing:
        raise _fail(where, f"missing field {missing[0]!r}")
    extra = sorted(map(str, state.keys() - expected))
    if extra:
        raise _fail(
            where,
            f"unexpected field {extra[0]!r} (expected {sorted(expected)}); is it the "
            "state of another learner?",
        )
    return state


def read_list(value: Any, where: str, length: int | None = None) -> list[Any]:
    """``value`` if it is a JSON array (of ``length`` items when given)."""
    if not isinstance(value, list):
        raise _fail(where, f"must be a list, got {_show(value)}")
    if length is not None and len(value) != length:
        raise _fail(where, f"must hold {length} items, got {len(value)}")
    return value


def read_finite(value: Any, where: str) -> float:
    """A finite number (``bool`` is not one) as a float."""
    t = value.__class__
    if t is float:
        if value - value == 0.0:
            return float(value)  # (the same float: a cast for the type checker)
    elif t is int:
        if -(1 << 1000) < value < (1 << 1000):
            return float(value)
    else:
        raise _fail(where, f"must be a number, got {_show(value)}")
    raise _fail(where, f"must be finite, got {_show(value)}")


def read_count(value: Any, where: str, *, positive: bool = False) -> float:
    """A weight: finite and ≥ 0 (> 0 with ``positive``), as a float.

    Examples
    --------
    >>> read_count(-1.0, "stats.classes[3].count")
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ModelStateError: stats.classes[3].count: must be finite and ≥ 0, got -1.0
    """
    t = value.__class__
    if t is float:
        if value >= 0.0 and value - value == 0.0 and (value > 0.0 or not positive):
            return float(value)  # (the same float: a cast for the type checker)
    elif t is int and 0 <= value < (1 << 1000) and (value > 0 or not positive):
        return float(value)
    sign = "> 0" if positive else "≥ 0"
    if t is bool or not isinstance(value, (int, float)):
        raise _fail(where, f"must be a finite number {sign}, got {_show(value)}")
    raise _fail(where, f"must be finite and {sign}, got {_short(value)}")


def read_n_learned(value: Any, where: str = "n_learned") -> int:
    """A finite, non-negative integer count of events (``5.0`` reads as 5), below 2**63."""
    if value.__class__ is int and 0 <= value <= _INT_HIGH:
        return int(value)
    if value.__class__ is float and 0.0 <= value < 2.0**63 and value.is_integer():
        return int(value)
    raise _fail(where, f"must be a finite integer ≥ 0, got {_show(value)}")


def _scalar_key(value: Any, where: str) -> Hashable:
    key = decode_key(value) if type(value) is dict else value
    if not isinstance(key, _SCALARS):
        raise _fail(where, f"state keys must be scalars, got {type(key).__name__}")
    return key


def read_label(value: Any, where: str) -> Hashable:
    """A class label: ``str``, ``int`` (tagged when large), ``bool`` or a finite ``float``."""
    try:
        label = decode_key(value) if type(value) is dict else value
    except ValueError as exc:
        raise _fail(where, str(exc)) from None
    t = label.__class__
    if t is str or t is int or t is bool or (t is float and label - label == 0.0):
        return cast(Hashable, label)  # (decoded JSON: a scalar of one of these types)
    raise _fail(
        where, f"a label must be a string, an integer, a bool or a finite float, got {_show(label)}"
    )


def read_key(value: Any, where: str, *, allow_none: bool = False) -> Hashable:
    """A feature name or a categorical value: as :func:`read_label` (``None`` if allowed)."""
    if value is None and allow_none:
        return None
    try:
        return read_label(value, where)
    except ModelStateError:
        raise _fail(
            where,
            "a feature name or value must be a string, an integer, a bool or a finite float"
            + (" (or null for the 'other' bucket)" if allow_none else "")
            + f", got {_show(value)}",
        ) from None


def read_pairs(
    items: Any,
    where: str,
    value: Callable[[Any, str], Any],
    *,
    key: Callable[[Any, str], Hashable] = read_key,
) -> dict[Hashable, Any]:
    """A ``[[key, value], ...]`` list as a dict; keys through ``key``, values through ``value``.

    Duplicate keys are rejected (they would not survive a round trip). Field
    names in errors are ``where[i]`` (the key) and ``where[key]`` (the value).

    Examples
    --------
    >>> read_pairs([["a", 1.0], ["b", 2.0]], "stats.class_weight", read_count)
    {'a': 1.0, 'b': 2.0}
    >>> read_pairs([["a", 1.0], ["a", 2.0]], "stats.class_weight", read_count)
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ModelStateError: stats.class_weight[1]: duplicate key 'a'
    """
    if not isinstance(items, list):
        raise _fail(where, f"must be a list of [key, value] pairs, got {_show(items)}")
    out: dict[Hashable, Any] = {}
    for i, item in enumerate(items):
        if not isinstance(item, list) or len(item) != 2:
            raise _fail(f"{where}[{i}]", f"must be a [key, value] pair, got {_show(item)}")
        # The readers are pure: they run with ``where`` itself, and only when one fails
        # again with the item's own field name (no string is built per item: O(size)
        # with a small constant on large states).
        try:
            k = key(item[0], where)
        except ValueError:
            try:
                k = key(item[0], f"{where}[{i}]")
            except ValueError as exc:  # a malformed tag
                if isinstance(exc, ModelStateError):
                    raise
                raise _fail(f"{where}[{i}]", str(exc)) from None
            raise  # pragma: no cover - a reader that fails only once
        if k in out:
            raise _fail(f"{where}[{i}]", f"duplicate key {k!r}")
        try:
            out[k] = value(item[1], where)
        except ValueError:
            out[k] = value(item[1], f"{where}[{k!r}]")
            raise  # pragma: no cover - a reader that fails only once
    return out


def read_keys(items: Any, where: str, *, allow_none: bool = False) -> list[Hashable]:
    """A list of distinct feature names (or values)."""
    out = [
        read_key(v, f"{where}[{i}]", allow_none=allow_none)
        for i, v in enumerate(read_list(items, where))
    ]
    if len(set(out)) != len(out):
        seen: set[Hashable] = set()
        for i, k in enumerate(out):
            if k in seen:
                raise _fail(f"{where}[{i}]", f"duplicate key {k!r}")
            seen.add(k)
    return out


def check_consistent(total: float, parts: Iterable[float], where: str, what: str) -> None:
    """``total`` equals ``Σ parts`` up to :data:`CONSISTENCY_TOLERANCE` (relative).

    Examples
    --------
    >>> check_consistent(3.0, [1.0, 2.0], "stats.total_weight", "the class weights")
    >>> check_consistent(5.0, [1.0, 2.0], "stats.total_weight", "the class weights")
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ModelStateError: stats.total_weight: 5.0 is not the sum of ...
    """
    expected = math.fsum(parts)
    if abs(total - expected) > CONSISTENCY_TOLERANCE * max(abs(total), abs(expected)):
        raise _fail(where, f"{total!r} is not the sum of {what} ({expected!r})")


def check_at_most(value: float, bound: float, where: str, what: str) -> None:
    """``value ≤ bound`` up to :data:`CONSISTENCY_TOLERANCE` (relative)."""
    if value > bound * (1.0 + CONSISTENCY_TOLERANCE):
        raise _fail(where, f"{value!r} exceeds {what} ({bound!r})")


def _short(value: Any) -> str:
    """``repr`` of a value, cut to a bounded length for messages."""
    try:
        text = repr(value)
    except ValueError:  # an integer too long for decimal
        text = f"<int of {value.bit_length()} bits>"
    return text if len(text) <= 80 else text[:77] + "..."


def _show(value: Any) -> str:
    """:func:`_short` with the type name."""
    return f"{_short(value)} ({type(value).__name__})"


# ---------------------------------------------------------------------- events
#: Label types accepted without further checks (a float must also be finite).
LABEL_TYPES = frozenset((str, int, bool))
#: Feature-name types accepted without further checks.
NAME_TYPES = frozenset((str, int))
#: Categorical value types accepted without further checks (None: missing).
CATEGORY_TYPES = frozenset((str, int, bool, type(None)))

_SCALAR_HINT = "a string, an integer, a bool or a finite float"


def check_label(y: Any) -> Hashable:
    """A label that survives a state round trip, or :class:`~stream_nb.InvalidEventError`.

    Labels are ``str``, ``int`` (any size), ``bool`` or a finite ``float``.
    Subclasses (``numpy.str_``, ``numpy.float64``) and numpy scalars
    (``numpy.int64``, ``numpy.bool_``) are converted to the built-in type.
    ``None`` (no label), NaN (never equal to itself: one new class per
    event), infinities, tuples, bytes and other objects are rejected with
    ``reason="invalid_label"``.

    Examples
    --------
    >>> check_label("spam"), check_label(2**70) == 2**70
    ('spam', True)
    >>> check_label(float("nan"))
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.InvalidEventError: label nan (float) cannot be learned: NaN is not ...
    """
    t = y.__class__
    if t is str or t is int or t is bool:
        return cast(Hashable, y)  # (exactly one of these types)
    if t is float:
        if y - y == 0.0:
            return float(y)  # (the same float: a cast for the type checker)
        if y != y:
            raise InvalidEventError(
                f"label {_show(y)} cannot be learned: NaN is not equal to itself, so every "
                "such event would make a new class; send the event without a label to have "
                "it predicted only",
                reason="invalid_label",
            )
        raise InvalidEventError(
            f"label {_show(y)} cannot be learned: labels must be {_SCALAR_HINT}",
            reason="invalid_label",
        )
    if y is None:
        raise InvalidEventError(
            "label None cannot be learned: None means 'no label'; predict the event instead",
            reason="invalid_label",
        )
    if isinstance(y, str):
        return str.__str__(y)
    if isinstance(y, float):
        return check_label(float(y))
    if isinstance(y, int):
        return bool(y) if isinstance(y, bool) else int(y)
    if type(y).__module__ == "numpy" and hasattr(y, "item"):  # numpy scalars: np.bool_, np.int64
        item = y.item()
        if item.__class__ in LABEL_TYPES or item.__class__ is float:
            return check_label(item)
    raise InvalidEventError(
        f"label {_show(y)} cannot be learned: labels must be {_SCALAR_HINT} so that the "
        "model can be saved and restored; convert it (e.g. str(y))",
        reason="invalid_label",
    )


def check_mapping(x: Any) -> Mapping[Any, Any]:
    """``x`` if it is a mapping, else ``InvalidEventError(reason="invalid_features")``."""
    if isinstance(x, Mapping):
        return x
    raise InvalidEventError(
        f"features must be a mapping name -> value (a dict), got {_show(x)}",
        reason="invalid_features",
    )


def _valid_name(name: Any) -> bool:
    if isinstance(name, str):
        return True
    if isinstance(name, int):
        return True
    return name.__class__ is float and name - name == 0.0


def check_feature_names(x: Iterable[Any]) -> None:
    """Every feature name of ``x`` survives a state round trip, else ``InvalidEventError``.

    Names are ``str``, ``int``, ``bool`` or finite ``float`` (``reason="invalid_features"``
    otherwise: tuples, bytes, ``None``, NaN, objects).

    Examples
    --------
    >>> check_feature_names({"a": 1, 3: 2})
    >>> check_feature_names({("a", "b"): 1})
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.InvalidEventError: feature name ('a', 'b') (tuple) cannot be learned: ...
    """
    for name in x:
        if not _valid_name(name):
            raise InvalidEventError(
                f"feature name {_show(name)} cannot be learned: names must be {_SCALAR_HINT} "
                "so that the model can be saved; join the parts into a string",
                reason="invalid_features",
            )


def check_categories(x: Mapping[Any, Any], names: Iterable[Any] | None = None) -> None:
    """Every categorical value of ``x`` (of ``names`` only, when given) survives a state.

    Values are ``str``, ``int``, ``bool``, finite ``float`` or ``None`` (missing);
    anything else (NaN, infinities, tuples, bytes, lists, objects) raises
    ``InvalidEventError(reason="invalid_features")`` naming the feature.

    Examples
    --------
    >>> check_categories({"a": "x", "b": None, "c": 1.5})
    >>> check_categories({"a": b"x"})
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.InvalidEventError: feature 'a' has value b'x' (bytes), which cannot ...
    """
    for name in x if names is None else names:
        value = x[name]
        if value is None or isinstance(value, (str, int)):
            continue
        if value.__class__ is float:
            if value - value == 0.0:
                continue
            hint = "send None for a missing value" if value != value else "send a finite number"
        else:
            hint = "decode or convert it"
        raise InvalidEventError(
            f"feature {_short(name)} has value {_show(value)}, which cannot be a category: "
            f"values must be {_SCALAR_HINT} (None: missing); {hint}",
            reason="invalid_features",
        )
