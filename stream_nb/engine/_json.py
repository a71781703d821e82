"""JSON that keeps integers beyond 64 bits exact, around orjson's fast path.

orjson decodes integers in ``[-2**63, 2**64 - 1]`` exactly and every larger
one as the nearest double (``18446744073709551617`` and ``…618`` both become
``1.8446744073709552e+19``), and refuses to encode such integers. The
engine keeps orjson for every ordinary line and falls back here only when a
value can be one of those:

* decoding: a decoded float of magnitude ``>= 2**63`` may stand for an
  integer written in the text, so the line is decoded again with the
  standard library, which keeps every integer exact (:func:`loads_exact`);
* encoding: :func:`dumps_exact` writes what orjson writes, byte for byte,
  except that integers beyond 64 bits (values and, with
  ``OPT_NON_STR_KEYS``, keys) appear as their exact decimal digits.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

import orjson

__all__ = ["WIDE", "dumps_exact", "is_wide", "loads_exact"]

#: Floats of at least this magnitude may be integers orjson rounded (2**63).
WIDE = 9.223372036854775808e18
_INT_MIN = -(1 << 63)
_INT_MAX = (1 << 64) - 1


def is_wide(value: Any) -> bool:
    """Whether a decoded value may be an integer orjson rounded to a float.

    Examples
    --------
    >>> import orjson
    >>> is_wide(orjson.loads(b"18446744073709551617")), is_wide(2.5), is_wide(1 << 70)
    (True, False, False)
    """
    return type(value) is float and (value >= WIDE or value <= -WIDE)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def loads_exact(data: bytes | str) -> Any:
    """Decode JSON with every integer exact (the standard library's decoder).

    For text orjson has already accepted: the values are orjson's, except
    that integers beyond 64 bits stay integers.

    Examples
    --------
    >>> loads_exact(b'{"id": 18446744073709551617, "y": 1.5}')
    {'id': 18446744073709551617, 'y': 1.5}
    """
    return json.loads(data, parse_constant=_reject_constant)


def _is_wide_int(value: Any) -> bool:
    return type(value) is int and not _INT_MIN <= value <= _INT_MAX


def dumps_exact(obj: Any, *, option: int = 0) -> bytes:
    """``orjson.dumps(obj, option=option)``, with integers beyond 64 bits written exactly.

    Raises ``TypeError`` for anything else orjson refuses (with ``option``).

    Examples
    --------
    >>> dumps_exact({"id": 2**70, "log_proba": {2**70: -0.5}}, option=orjson.OPT_NON_STR_KEYS)
    b'{"id":1180591620717411303424,"log_proba":{"1180591620717411303424":-0.5}}'
    >>> dumps_exact([1.0, "a"])
    b'[1.0,"a"]'
    """
    try:
        return orjson.dumps(obj, option=option)
    except TypeError:
        pass
    marker = "\x1fint" + secrets.token_hex(8) + ":"
    keys_as_text = bool(option & orjson.OPT_NON_STR_KEYS)
    found = [0]

    def swap(value: Any) -> Any:
        if _is_wide_int(value):
            found[0] += 1
            return marker + str(value)
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if _is_wide_int(k):
                    if not keys_as_text:
                        raise TypeError("Dict key must be str")
                    k = str(k)  # what OPT_NON_STR_KEYS writes for an int key
                out[k] = swap(v)
            return out
        if isinstance(value, (list, tuple)):
            return [swap(v) for v in value]
        return value

    text = orjson.dumps(swap(obj), option=option)
    if not found[0]:
        return text
    # the marker is written as "\u001fint<hex>:<digits>" (orjson escapes \x1f)
    pattern = re.compile(rb'"\\u001fint' + marker[4:].encode() + rb'(-?[0-9]+)"')
    out, n = pattern.subn(rb"\1", text)
    if n != found[0]:  # pragma: no cover - a string holding the random marker
        raise TypeError("cannot encode an integer beyond 64 bits here")
    return out
