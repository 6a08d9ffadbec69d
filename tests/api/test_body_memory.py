"""A JSON body costs bounded memory whatever it holds: a gzip body is inflated a chunk at a time
and refused at the limit while inflating, and a body that would become too many Python objects
is refused before it is parsed (issue 34, finding 2; bench/archive_bomb.py measures the memory).

The checks count what the code asks for (how many bytes zlib may return per call, whether the
JSON parser ran), not time or resident memory."""

from __future__ import annotations

import gzip
import zlib
from typing import Any

import orjson
import pytest
from django.test import Client

from accelboard.api import body

from .conftest import post_json, row_counts, telemetry_payload

TELEMETRY = "/api/v1/telemetry"
RUNS = "/api/v1/runs"
MIB = 1024 * 1024
_DECOMPRESSOBJ = zlib.decompressobj  # the real one: the fixture replaces the module's attribute


class _CountingInflater:
    """zlib's decompressor, recording the most output each call was allowed and the total."""

    asked: list[int]
    produced = 0

    def __init__(self, wbits: int) -> None:
        self._inner = _DECOMPRESSOBJ(wbits)

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        _CountingInflater.asked.append(max_length)
        out = self._inner.decompress(data, max_length)
        _CountingInflater.produced += len(out)
        return out

    def flush(self, length: int = zlib.DEF_BUF_SIZE) -> bytes:
        _CountingInflater.asked.append(0)  # flush has no cap on its output
        out = self._inner.flush(length)
        _CountingInflater.produced += len(out)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture
def inflater(monkeypatch: pytest.MonkeyPatch) -> type[_CountingInflater]:
    _CountingInflater.asked = []
    _CountingInflater.produced = 0
    monkeypatch.setattr(body.zlib, "decompressobj", _CountingInflater)
    return _CountingInflater


def test_a_gzip_bomb_is_inflated_a_chunk_at_a_time_and_stopped_at_the_limit(
    client: Client, team: Any, ingest_token: str, inflater: type[_CountingInflater], monkeypatch: Any
) -> None:
    monkeypatch.setattr(body, "MAX_JSON_BYTES", 4 * MIB, raising=False)
    bomb = gzip.compress(b'{"batch_id": "' + b"a" * (40 * MIB) + b'"}')
    before = row_counts()
    response = post_json(client, TELEMETRY, None, ingest_token, raw=bomb, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413, response.content
    assert response.json()["error"]["code"] == "too_large"
    assert "4 MiB" in response.json()["error"]["message"]
    # zlib never returns more than one chunk per call, and inflating stops one chunk past the limit
    assert inflater.asked and all(0 < asked <= 1 * MIB for asked in inflater.asked), inflater.asked
    assert inflater.produced <= 5 * MIB, inflater.produced
    assert row_counts() == before


def test_a_gzip_body_within_the_limit_is_read_in_chunks_and_whole(
    client: Client, team: Any, ingest_token: str, inflater: type[_CountingInflater], monkeypatch: Any
) -> None:
    monkeypatch.setattr(body, "INFLATE_CHUNK", 4096, raising=False)
    payload = telemetry_payload(n=200)
    text = orjson.dumps(payload) + b" " * 50_000  # well over one chunk once inflated
    response = post_json(
        client, TELEMETRY, None, ingest_token, raw=gzip.compress(text), HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 200
    assert len(inflater.asked) > len(text) // 4096 and max(inflater.asked) == 4096
    assert inflater.produced == len(text)


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
def test_a_body_of_too_many_values_is_refused_before_it_is_parsed(
    client: Client, team: Any, rw_token: str, gzipped: bool, monkeypatch: Any
) -> None:
    """``[[],[],...]``: 3 bytes of text, a 56-byte Python list each; a body within the byte limit
    would have cost gigabytes once parsed."""
    parsed = []
    monkeypatch.setattr(body.orjson, "loads", lambda raw: parsed.append(1) or orjson.loads(raw))
    text = b'{"x": [' + b"[]," * 1_100_000 + b"[]]}"
    assert len(text) < body.MAX_BODY_BYTES
    before = row_counts()
    response = post_json(client, RUNS, None, rw_token, raw=text, gzipped=gzipped)
    assert response.status_code == 413, response.content
    error = response.json()["error"]
    assert error["code"] == "too_large" and "1,000,000 JSON values" in error["message"]
    assert parsed == []
    assert row_counts() == before


def test_a_json_body_over_the_json_limit_is_a_413_naming_it(
    client: Client, team: Any, ingest_token: str
) -> None:
    text = b'{"batch_id": "' + b"a" * (33 * MIB) + b'"}'
    response = post_json(
        client, TELEMETRY, None, ingest_token, raw=gzip.compress(text), HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 413, response.content
    assert "larger than 32 MiB" in response.json()["error"]["message"]
