"""Records within their topic's limit: sizes, carried headers, dead letters, predictions.

No single record may stop a partition: :func:`record_bytes` bounds a record's size as
the broker counts it, :func:`carry_headers` bounds the event headers a record carries,
:func:`fit_dead_letter` cuts a rejected payload to a bounded prefix (or drops it), and
:func:`shrink_prediction` leaves out a prediction's optional fields. A dead letter
also names its reason and source record in headers (:func:`dead_letter_headers`).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from kafka.errors import MessageSizeTooLargeError, RecordListTooLargeError

from stream_nb.connectors.base import Headers

__all__ = [
    "DEAD_LETTER_PAYLOAD_BYTES",
    "HEADER_OFFSET",
    "HEADER_PARTITION",
    "HEADER_PREFIX",
    "HEADER_REASON",
    "HEADER_TOPIC",
    "MAX_CARRIED_HEADERS",
    "MAX_CARRIED_HEADER_BYTES",
    "carry_headers",
    "dead_letter_headers",
    "fit_dead_letter",
    "is_too_large",
    "own_headers",
    "record_bytes",
    "shrink_prediction",
]

#: Largest part of a rejected payload a dead letter carries (bytes); a longer payload
#: is cut to this prefix, with its full size and SHA-256.
DEAD_LETTER_PAYLOAD_BYTES = 64 * 1024

#: Source headers carried to a prediction or dead letter, in total (names and values,
#: bytes), and in number; headers beyond either bound are dropped, in order.
MAX_CARRIED_HEADER_BYTES = 16 * 1024
MAX_CARRIED_HEADERS = 64

#: Prefix of the headers stream-nb writes itself.
HEADER_PREFIX = "stream_nb."
#: Header names written on dead letters: the reason, and where the event came from.
HEADER_REASON = "stream_nb.reason"
HEADER_TOPIC = "stream_nb.source.topic"
HEADER_PARTITION = "stream_nb.source.partition"
HEADER_OFFSET = "stream_nb.source.offset"

#: Upper bound of a record batch's and one record's framing (magic v2): the 61-byte
#: batch header, the record's attributes, varint lengths, offset and timestamp deltas.
_BATCH_OVERHEAD = 61 + 21 + 10
#: Per header: two varint lengths.
_HEADER_OVERHEAD = 10

#: Prediction fields left out of a prediction too large for its topic.
_OPTIONAL_PREDICTION_FIELDS = ("log_proba", "explain")


def record_bytes(
    key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]] | None
) -> int:
    """An upper bound of the size of a record batch holding only this record.

    A broker compares its ``max.message.bytes`` with that size (magic v2, no
    compression), kafka-python its ``max_request_size``.

    Examples
    --------
    >>> record_bytes(b"k", b"x" * 100, [("trace", b"abc")])
    211
    """
    size = _BATCH_OVERHEAD + len(value) + (0 if key is None else len(key))
    if headers:
        for name, data in headers:
            size += _HEADER_OVERHEAD + len(name.encode()) + len(data)
    return size


def is_too_large(exc: BaseException | None) -> bool:
    """Whether a send failed because the record (batch) exceeds a size limit.

    Examples
    --------
    >>> is_too_large(MessageSizeTooLargeError()), is_too_large(None)
    (True, False)
    """
    return isinstance(exc, (MessageSizeTooLargeError, RecordListTooLargeError))


def carry_headers(
    headers: Sequence[tuple[str, bytes]] | None, *, drop_own: bool = False
) -> Headers:
    """Source headers to carry: in order, up to :data:`MAX_CARRIED_HEADERS` of them and
    :data:`MAX_CARRIED_HEADER_BYTES` in total; with ``drop_own``, without the
    ``stream_nb.*`` ones (a dead letter writes its own).

    Examples
    --------
    >>> carry_headers([("trace", b"t1"), ("big", b"x" * 20000), ("span", b"s")])
    [('trace', b't1'), ('span', b's')]
    """
    out: Headers = []
    if not headers:
        return out
    total = 0
    for name, value in headers:
        if drop_own and name.startswith(HEADER_PREFIX):
            continue
        size = len(name.encode()) + len(value)
        if total + size > MAX_CARRIED_HEADER_BYTES:
            continue
        total += size
        out.append((name, value))
        if len(out) == MAX_CARRIED_HEADERS:
            break
    return out


def own_headers(headers: Sequence[tuple[str, bytes]] | None) -> Headers:
    """The ``stream_nb.*`` headers among ``headers``.

    Examples
    --------
    >>> own_headers([("trace", b"t"), (HEADER_REASON, b"invalid_json")])
    [('stream_nb.reason', b'invalid_json')]
    """
    return [(name, value) for name, value in headers or () if name.startswith(HEADER_PREFIX)]


def dead_letter_headers(value: bytes) -> Headers:
    """The headers naming a dead letter's reason and source record (topic, partition,
    offset), from the letter as the engine encodes it; ``[]`` for a value that is not
    a dead letter.

    Examples
    --------
    >>> letter = b'{"reason":"invalid_json","position":{"topic":"t","partition":2,"offset":41}}'
    >>> for name, value in dead_letter_headers(letter):
    ...     print(name, value)
    stream_nb.reason b'invalid_json'
    stream_nb.source.topic b't'
    stream_nb.source.partition b'2'
    stream_nb.source.offset b'41'
    >>> dead_letter_headers(b"[1, 2]")
    []
    """
    letter = _json_object(value)
    if letter is None:
        return []
    position = letter.get("position")
    found: list[tuple[str, Any]] = [(HEADER_REASON, letter.get("reason"))]
    if isinstance(position, dict):
        found += [
            (HEADER_TOPIC, position.get("topic")),
            (HEADER_PARTITION, position.get("partition")),
            (HEADER_OFFSET, position.get("offset")),
        ]
    return [(name, str(item).encode()) for name, item in found if item is not None]


def _json_object(value: bytes) -> dict[str, Any] | None:
    """``value`` decoded, if it is a JSON object (as dead letters and predictions are)."""
    try:
        decoded = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return decoded if isinstance(decoded, dict) else None


def _payload_bytes(letter: Mapping[str, Any]) -> bytes | None:
    """The rejected payload a dead letter embeds (``payload`` or ``payload_base64``)."""
    if isinstance(letter.get("payload"), str):
        return str(letter["payload"]).encode("utf-8", "surrogatepass")
    if isinstance(letter.get("payload_base64"), str):
        try:
            return base64.b64decode(str(letter["payload_base64"]), validate=True)
        except ValueError:
            return None
    return None


def fit_dead_letter(value: bytes, *, keep_payload: bool = True) -> bytes:
    """A dead letter whose embedded payload is at most :data:`DEAD_LETTER_PAYLOAD_BYTES`.

    A longer payload is cut to that prefix (as text when the payload is UTF-8, else
    base64) and the letter gains ``payload_truncated: true``, ``payload_bytes`` (the
    full size) and ``payload_sha256`` (of the full payload). With ``keep_payload``
    false the payload is left out entirely (size and hash kept). A value that is not
    a dead letter (a JSON object) is returned unchanged.

    Examples
    --------
    >>> letter = orjson.dumps({"reason": "too_large", "payload": "ab" * 40000})
    >>> cut = orjson.loads(fit_dead_letter(letter))
    >>> len(cut["payload"]), cut["payload_bytes"], cut["payload_truncated"]
    (65536, 80000, True)
    >>> sorted(orjson.loads(fit_dead_letter(letter, keep_payload=False)))
    ['payload_bytes', 'payload_omitted', 'payload_sha256', 'reason']
    """
    if keep_payload and len(value) <= DEAD_LETTER_PAYLOAD_BYTES:
        return value  # the payload is shorter still
    letter = _json_object(value)
    if letter is None:
        return value
    payload = _payload_bytes(letter)
    if payload is None or (keep_payload and len(payload) <= DEAD_LETTER_PAYLOAD_BYTES):
        return value
    letter.pop("payload", None)
    letter.pop("payload_base64", None)
    letter.setdefault("payload_bytes", len(payload))
    letter.setdefault("payload_sha256", hashlib.sha256(payload).hexdigest())
    if keep_payload:
        prefix = payload[:DEAD_LETTER_PAYLOAD_BYTES]
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError:
            letter["payload_base64"] = base64.b64encode(prefix).decode("ascii")
        else:  # a valid text cut at a character boundary
            letter["payload"] = prefix.decode("utf-8", "ignore")
        letter["payload_truncated"] = True
    else:
        letter.pop("payload_truncated", None)
        letter["payload_omitted"] = True
    return orjson.dumps(letter)


def shrink_prediction(value: bytes) -> bytes | None:
    """A prediction record without its ``log_proba`` and ``explain`` (listed under
    ``omitted``), or ``None`` if there is nothing to leave out.

    Examples
    --------
    >>> shrink_prediction(b'{"id":1,"y_pred":"a","log_proba":{"a":0.0},"n_learned":3}')
    b'{"id":1,"y_pred":"a","n_learned":3,"omitted":["log_proba"]}'
    """
    record = _json_object(value)
    if record is None:
        return None
    omitted = [f for f in _OPTIONAL_PREDICTION_FIELDS if record.pop(f, None) is not None]
    if not omitted:
        return None
    record["omitted"] = omitted
    return orjson.dumps(record)
