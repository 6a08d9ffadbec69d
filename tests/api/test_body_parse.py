"""The JSON body's nesting limit at its edge (``api/body.py``: the depth is checked by writing the
parsed body inside 154 arrays, which ``orjson.dumps`` refuses past 254 levels)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.test import RequestFactory

from accelboard.api.body import MAX_JSON_VALUES, request_json
from accelboard.fleet.ingest_validation import IngestRejected
from accelboard.importers.jsondepth import MAX_JSON_NESTING


def _read(raw: bytes) -> Any:
    return request_json(RequestFactory().post("/api/v1/telemetry", data=raw, content_type="application/json"))


def _nested(levels: int, kind: str, bottom: bytes) -> bytes:
    """``levels`` arrays or objects, the innermost holding ``bottom`` (itself a level when it is
    ``[]`` or ``{}``)."""
    if kind == "array":
        return b"[" * levels + bottom + b"]" * levels
    return b'{"a":' * levels + bottom + b"}" * levels


@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize(("bottom", "own"), [(b"1", 0), (b"[]", 1), (b"{}", 1)])
def test_it_reads_a_body_nested_exactly_to_the_limit_and_refuses_one_level_more(
    kind: str, bottom: bytes, own: int
) -> None:
    edge = _nested(MAX_JSON_NESTING - own, kind, bottom)
    assert orjson.dumps(_read(edge)) == edge
    with pytest.raises(IngestRejected) as refused:
        _read(_nested(MAX_JSON_NESTING - own + 1, kind, bottom))
    assert refused.value.code == "too_deep" and refused.value.status == 422


@pytest.mark.parametrize("levels", [254, 255, 1024, 1025, 5000])
def test_deeper_bodies_are_too_deep_wherever_the_parsers_own_limits_fall(levels: int) -> None:
    with pytest.raises(IngestRejected) as refused:
        _read(_nested(levels, "object", b"1"))
    assert refused.value.code == "too_deep"
    assert refused.value.path == ".".join(["a"] * MAX_JSON_NESTING)  # where the 101st level opens


def test_a_duplicate_key_at_the_deepest_level_is_still_found() -> None:
    raw = b'{"a":' * (MAX_JSON_NESTING - 1) + b'{"k":1,"k":2}' + b"}" * (MAX_JSON_NESTING - 1)
    with pytest.raises(IngestRejected) as refused:
        _read(raw)
    assert refused.value.code == "duplicate_key"
    assert refused.value.path == ".".join(["a"] * (MAX_JSON_NESTING - 1) + ["k"])


def test_only_a_body_long_enough_to_hold_too_many_values_is_counted() -> None:
    # Each value counted is a byte of the text: one under the limit in bytes cannot be refused.
    short = b"[" + b"0," * (MAX_JSON_VALUES // 2 - 2) + b"0]"
    assert len(short) < MAX_JSON_VALUES
    assert len(_read(short)) == MAX_JSON_VALUES // 2 - 1
    many = b"[" + b"0," * MAX_JSON_VALUES + b"0]"
    with pytest.raises(IngestRejected) as refused:
        _read(many)
    assert (refused.value.code, refused.value.status) == ("too_large", 413)


@pytest.mark.parametrize(
    ("raw", "path", "code"),
    [
        (b'{"a":1,"a":1}', "a", "duplicate_key"),  # the same member twice: not the text orjson writes
        (b'{"a":{"b":1},"a":{"b":1}}', "a", "duplicate_key"),
        (b'{"a":"x\\u003ay","a\\u003a":1,"a:":2}', "a:", "duplicate_key"),  # a colon escaped
        (b'{"a":"\\u0000"}', "a", "invalid"),  # NUL, in the text orjson writes
        (b'{"k\\u0000":1}', "k\x00", "invalid"),
    ],
)
def test_a_body_is_refused_for_its_keys_and_nul_whether_written_as_orjson_writes_it_or_not(
    raw: bytes, path: str, code: str
) -> None:
    with pytest.raises(IngestRejected) as refused:
        _read(raw)
    assert (refused.value.path, refused.value.code) == (path, code)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1,"b":[1.5,"x:y",{"c":null}]}',  # as orjson writes it: read without counting colons
        b'{"a": 1, "b": [1.5, "x:y", {"c": null}]}',  # spaced: the colons counted
        b'{"a":1,"b":[1.5,"x\\u003ay",{"c":null}]}',  # an escaped colon: the exact, slow path
    ],
)
def test_bodies_without_duplicate_keys_are_read_however_written(raw: bytes) -> None:
    assert _read(raw) == {"a": 1, "b": [1.5, "x:y", {"c": None}]}
