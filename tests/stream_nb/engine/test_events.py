"""Event decoding: shapes, field names, and one bounded reason per kind of bad input."""

from __future__ import annotations

import base64

import orjson
import pytest

from stream_nb import ConfigError, InvalidEventError
from stream_nb.engine.events import REASONS, Event, EventDecoder, dead_letter_record
from stream_nb.engine.telemetry import DEAD_LETTER_REASONS


def test_reasons_are_the_metric_label_set():
    assert set(REASONS) == set(DEAD_LETTER_REASONS)


def test_nested_and_flat_shapes():
    d = EventDecoder()
    assert d.decode(b'{"x": {"a": 1, "b": "u"}, "y": 0, "id": "e1", "w": 2}') == Event(
        {"a": 1, "b": "u"}, 0, "e1", 2.0
    )
    assert d.decode(b'{"a": 1, "b": null, "y": false}') == Event(
        {"a": 1, "b": None}, False, None, 1.0
    )
    # auto: a scalar under the features field name is an ordinary flat feature
    assert d.decode(b'{"x": 3, "y": "k"}') == Event({"x": 3}, "k", None, 1.0)


def test_flat_shape_rejects_object_feature():
    with pytest.raises(InvalidEventError, match="feature 'x' must be a JSON scalar") as info:
        EventDecoder(shape="flat").decode(b'{"x": {"a": 1}, "y": 1}')
    assert info.value.reason == "invalid_features"


def test_configurable_field_names():
    d = EventDecoder(features_field="f", label_field="label", id_field="key", weight_field=None)
    assert d.decode(b'{"f": {"a": 1}, "label": "s", "key": 9, "w": 3}') == Event(
        {"a": 1}, "s", 9, 1.0
    )
    assert d.decode(b'{"a": 1, "w": 3, "label": "s"}') == Event({"a": 1, "w": 3}, "s", None, 1.0)


def test_unlabelled_and_label_only_events():
    d = EventDecoder()
    assert d.decode(b'{"x": {"a": 1}, "id": 4}') == Event({"a": 1}, None, 4, 1.0)
    assert d.decode(b'{"x": {"a": 1}, "y": null}').y is None
    assert d.decode(b'{"id": 4, "y": "late"}') == Event(None, "late", 4, 1.0)


def test_label_json_types_are_kept():
    d = EventDecoder()
    labels = [d.decode(orjson.dumps({"a": 1, "y": y})).y for y in ("1", 1, 1.5, True)]
    assert [type(v) for v in labels] == [str, int, float, bool]


@pytest.mark.parametrize(
    ("payload", "reason", "match"),
    [
        (b"\xff\xfe{}", "invalid_utf8", "UTF-8"),
        (b'{"a": "\xc3\x28"}', "invalid_utf8", "UTF-8"),
        (b"{not json", "invalid_json", "cannot decode"),
        (b'{"a": 1', "invalid_json", "cannot decode"),
        (b'{"a": NaN, "y": 1}', "non_finite", "cannot decode"),
        (b'{"a": -Infinity, "y": 1}', "non_finite", "cannot decode"),
        (b'{"a": 1e999, "y": 1}', "non_finite", "infinity"),
        (b"[1, 2]", "not_object", "JSON object, got list"),
        (b'"text"', "not_object", "got str"),
        (b"null", "not_object", "got NoneType"),
        (b'{"y": 1}', "missing_features", "no features"),
        (b"{}", "missing_features", "no features"),
        (b'{"x": [1], "y": 1}', "invalid_features", "feature 'x' must be a JSON scalar"),
        (b'{"x": {"a": [1, {"b": 2}]}, "y": 1}', "invalid_features", "feature 'a'"),
        (b'{"a": {"deep": {"er": 1}}, "y": 1}', "invalid_features", "feature 'a'"),
        (b'{"a": 1, "y": [1]}', "invalid_label", "label 'y' must be a JSON scalar"),
        (b'{"a": 1, "y": {"k": 1}}', "invalid_label", "got dict"),
        (b'{"a": 1, "id": [1]}', "invalid_id", "id 'id'"),
        (b'{"a": 1, "w": -1}', "invalid_weight", "positive finite"),
        (b'{"a": 1, "w": "2"}', "invalid_weight", "positive finite"),
        (b'{"a": 1, "w": 0}', "invalid_weight", "positive finite"),
    ],
)
def test_bad_input_reasons(payload, reason, match):
    with pytest.raises(InvalidEventError, match=match) as info:
        EventDecoder().decode(payload)
    assert info.value.reason == reason
    assert reason in REASONS


def test_nested_shape_requires_an_object_of_features():
    with pytest.raises(InvalidEventError, match="features 'x' must be a JSON object, got list"):
        EventDecoder(shape="nested").decode(b'{"x": [1], "y": 1}')
    with pytest.raises(InvalidEventError, match="no features") as info:
        EventDecoder(shape="nested").decode(b'{"a": 1, "y": 1}')
    assert info.value.reason == "missing_features"


def test_too_large():
    d = EventDecoder(max_bytes=20)
    assert d.decode(b'{"a": 1}').x == {"a": 1}
    with pytest.raises(InvalidEventError, match="longer than 20 bytes") as info:
        d.decode(b'{"a": "' + b"z" * 30 + b'"}')
    assert info.value.reason == "too_large"


def test_negative_counts_only_when_asked():
    assert EventDecoder().decode(b'{"tok": -2, "y": 1}').x == {"tok": -2}
    with pytest.raises(InvalidEventError, match="non-negative counts") as info:
        EventDecoder(nonnegative=True).decode(b'{"tok": -2, "y": 1}')
    assert info.value.reason == "negative_count"
    assert EventDecoder(nonnegative=True).decode(b'{"tok": 0, "s": "a", "y": 1}').x == {
        "tok": 0,
        "s": "a",
    }


def test_config_errors():
    with pytest.raises(ConfigError, match="shape must be"):
        EventDecoder(shape="tree")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must differ"):
        EventDecoder(label_field="x")
    with pytest.raises(ConfigError, match="max_bytes must be a positive integer"):
        EventDecoder(max_bytes=0)


def test_dead_letter_record_keeps_payload_safely():
    text = orjson.loads(dead_letter_record(b'{"a": \x01}', {"line": 1}, "invalid_json", "e"))
    assert text["payload"] == '{"a": \x01}'
    binary = orjson.loads(dead_letter_record(b"\xff\x00", {"line": 2}, "invalid_utf8", "e" * 999))
    assert base64.b64decode(binary["payload_base64"]) == b"\xff\x00"
    assert len(binary["error"]) == 300 and binary["position"] == {"line": 2}


def test_validate_checks_python_floats_for_finiteness():
    d = EventDecoder()
    with pytest.raises(InvalidEventError, match="feature 'a' must be finite, got nan") as info:
        d.validate({"a": float("nan"), "y": 1})
    assert info.value.reason == "non_finite"
    with pytest.raises(InvalidEventError, match="label must be finite, got inf"):
        d.validate({"a": 1.0, "y": float("inf")})
    assert d.validate({"a": 1.0, "y": 2.5}) == Event({"a": 1.0}, 2.5, None, 1.0)
