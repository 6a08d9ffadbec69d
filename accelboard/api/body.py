"""Request bodies: content type, size, gzip and JSON decoding, before any schema sees them.

orjson decodes ~5x faster than the standard library, and refuses what JSON itself refuses and
Python's ``json`` accepts: ``NaN``, ``Infinity``, numbers that overflow a double. Gzip is inflated
with a cap on the output so that a small "zip bomb" cannot allocate gigabytes. A body nested
deeper than ``MAX_JSON_NESTING`` (100) levels is a 422 ``too_deep`` naming where, as the result
files and traces are (``importers.jsondepth``).
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

import orjson
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest
from django.http.multipartparser import MultiPartParserError

from accelboard.fleet.ingest_validation import IngestRejected
from accelboard.importers.jsondepth import MAX_JSON_NESTING, nesting_error

MAX_BODY_BYTES = 64 * 1024 * 1024
# A JSON body (telemetry, serving metrics, a run), as sent or once inflated: the largest batch the
# API takes (10,000 samples and 10,000 attribution intervals) is about 10 MiB of JSON. Parsed, a
# body costs several times its size (bytes, the objects, their re-encoding for the duplicate-key
# check), so this and ``MAX_JSON_VALUES`` keep one request under ~300 MB (bench/archive_bomb.py).
MAX_JSON_BYTES = 32 * 1024 * 1024
MAX_JSON_VALUES = 1_000_000
# What zlib inflates per call: the most a gzip body grows by before its size is checked again.
INFLATE_CHUNK = 1024 * 1024
_GZIP = {"gzip", "x-gzip"}
# The deepest value ``orjson.dumps`` writes (arrays and objects; it raises past it). A parsed body
# wrapped in (254 - MAX_JSON_NESTING) lists is written exactly when it nests at most
# MAX_JSON_NESTING levels: the depth check costs one re-encoding, which ``_unique_keys`` needs anyway.
_ORJSON_WRITE_NESTING = 254
# A JSON escape for NUL that is not itself escaped ("\\u0000" is a backslash and text, fine).
_NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


def _too_large(what: str, limit: int = MAX_BODY_BYTES) -> IngestRejected:
    return IngestRejected(
        f"{what} is larger than {limit // (1024 * 1024)} MiB; send smaller batches",
        code="too_large",
        status=413,
    )


def _inflate(raw: bytes, limit: int) -> bytearray:
    """Gunzip with a running cap on the output. Several gzip members (``cat a.gz b.gz``) are one
    body, as RFC 1952 says; bytes after the last member that are not gzip are a 400.

    Inflated ``INFLATE_CHUNK`` bytes at a time into one growing buffer: zlib is never asked for
    more than that at once (a single call with the whole limit as its cap holds the output in
    blocks and joins them, twice the body at its peak), and a body is refused as soon as it passes
    ``limit``, not once it is all inflated."""
    out = bytearray()
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = raw
        try:
            while not inflater.eof:
                chunk = inflater.decompress(pending, INFLATE_CHUNK)
                out += chunk
                if len(out) > limit:
                    raise _too_large("the decompressed body", limit)
                pending = inflater.unconsumed_tail
                if not chunk and not pending:
                    break  # all of the input read and the stream not ended: truncated
        except zlib.error as exc:
            raise IngestRejected(f"body is not valid gzip: {exc}", code="bad_encoding", status=400) from None
        if not inflater.eof:
            raise IngestRejected("gzip body is truncated", code="bad_encoding", status=400)
        raw = inflater.unused_data
        if not raw:
            return out
        if raw[:2] != b"\x1f\x8b":
            raise IngestRejected(
                f"{len(raw)} bytes after the end of the gzip data", code="bad_encoding", status=400
            )


def _values_within(raw: bytes | bytearray) -> None:
    """Refuse, before parsing, a body that would become more than ``MAX_JSON_VALUES`` Python
    objects: each costs 30-70 bytes (``[[],[],...]`` is a 56-byte list for every 3 bytes of
    text), so the text's size alone does not bound the memory. A value after the first of its
    array or object follows a comma, and an array or object opens with a bracket, so commas and
    opening brackets (those in strings too: an overcount) bound the values, and each of them is a
    byte of the text: a body shorter than the limit is within it, uncounted."""
    if len(raw) < MAX_JSON_VALUES:
        return
    values = raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1
    if values > MAX_JSON_VALUES:
        raise IngestRejected(
            f"the body holds more than {MAX_JSON_VALUES:,} JSON values; send smaller batches",
            code="too_large",
            status=413,
        )


def _nul_path(value: Any, path: str = "") -> str | None:
    """Where the first string (or key) holding NUL is: PostgreSQL cannot store that character."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _nul_path(item, f"{path}[{i}]")
            if found is not None:
                return found
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if "\x00" in key:
                return where
            found = _nul_path(item, where)
            if found is not None:
                return found
    return None


def request_json(request: HttpRequest) -> Any:
    """The request's JSON body, or ``IngestRejected`` with 400/413/415."""
    if request.content_type != "application/json":
        raise IngestRejected(
            f"Content-Type must be application/json, not {request.content_type or 'missing'!r}",
            code="unsupported_media_type",
            status=415,
        )
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in _GZIP | {"identity", ""}:
        raise IngestRejected(
            f"Content-Encoding {encoding!r} is not supported (use gzip or none)",
            code="unsupported_media_type",
            status=415,
        )
    limit = min(MAX_JSON_BYTES, MAX_BODY_BYTES)
    sent = _body_within(request, limit, _too_large("the body", limit))
    if len(sent) > limit:  # sent without a Content-Length
        raise _too_large("the body", limit)
    raw: bytes | bytearray = _inflate(sent, limit) if encoding in _GZIP else sent
    _values_within(raw)
    compact: bytes | None = None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = _loads_or_why(raw)
    else:
        compact = _compact_within(data)
        if compact is None:  # nested deeper than MAX_JSON_NESTING
            data = _loads_or_why(raw)
    # The substring tests first: the regexes scan every position of the body (1.4 ms of an
    # 80-sample batch's ~9 ms of CPU), a substring search is ~100x faster and almost always says
    # no; one search for both escapes they look for (NUL, a colon), each ~12 µs of a 27 KB body.
    escapes = b"\\u00" in raw
    if escapes and b"\\u0000" in raw and _NUL_ESCAPE.search(raw):
        path = _nul_path(data)
        if path is not None:
            raise IngestRejected(
                "text may not contain the NUL character (\\u0000)", path=path, code="invalid"
            )
    if compact is None or not _written_as_is(raw, compact):
        _unique_keys(raw, data, compact, escapes=escapes)
    return data


_WRAPPING = _ORJSON_WRITE_NESTING - MAX_JSON_NESTING


def _written_as_is(raw: bytes | bytearray, compact: bytes) -> bool:
    """Whether ``raw`` is byte for byte the compact encoding of what it parsed to (``compact``, inside
    ``_compact_within``'s arrays): an agent writes its body compactly, so it usually is. Then it
    names no key twice (each object's members are those of a parsed dict), without the two colon
    counts of ``_unique_keys`` (~25 µs of an 80-sample batch)."""
    # A slice and memcmp: ~1 µs for 27 KB (a memoryview compares byte by byte, ~40 µs).
    return len(compact) == len(raw) + 2 * _WRAPPING and compact[_WRAPPING:-_WRAPPING] == raw


def _compact_within(data: Any) -> bytes | None:
    """``data`` written compactly (inside ``_ORJSON_WRITE_NESTING - MAX_JSON_NESTING`` arrays, which
    add no colon), or None when it nests deeper than ``MAX_JSON_NESTING`` levels.

    Replaces parsing the text inside 924 arrays (orjson reads 1,024 levels): those cost ~170 µs
    of an 80-sample batch's parse (~60 µs unwrapped), the 154 arrays written here a few µs."""
    wrapped = data
    for _ in range(_ORJSON_WRITE_NESTING - MAX_JSON_NESTING):
        wrapped = [wrapped]
    try:
        return orjson.dumps(wrapped)
    except orjson.JSONEncodeError:
        return None


_DEEPER_THAN_ORJSON = object()


def _loads_or_why(raw: bytes | bytearray) -> Any:
    """The body that the nesting-limited parse refused: malformed (400), too deep (422 naming
    where, found by a scan of the text), or, should orjson and the scan disagree, decoded."""
    data: Any = _DEEPER_THAN_ORJSON
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if not str(exc).startswith("depth limit exceeded"):
            raise IngestRejected(f"malformed JSON: {exc}", code="malformed_json", status=400) from None
    text = raw.decode("utf-8", "replace")
    start = len(text) - len(text.lstrip(" \t\r\n"))
    deep = nesting_error(text, start, limit=MAX_JSON_NESTING, shown=None)
    if deep is not None:
        raise IngestRejected(
            f"nested deeper than {deep.limit} levels (line {deep.line}, character {deep.offset})",
            path=deep.path,
            code="too_deep",
        )
    if data is _DEEPER_THAN_ORJSON:  # yet not found by the scan: never expected
        raise IngestRejected("malformed JSON: nested too deep", code="too_deep")
    return data


# ``\u003a`` written as an escape: a colon the byte count below cannot see.
_COLON_ESCAPE = re.compile(rb"\\u003[aA]")


def _unique_keys(
    raw: bytes | bytearray, data: Any, compact: bytes | None = None, *, escapes: bool = True
) -> None:
    """Refuse an object that names a key twice (JSON parsers keep the last one, silently).

    Exact and cheap: every member of an object in ``raw`` has one colon outside strings, and
    colons inside strings appear in ``raw`` as they do in the compact re-encoding of ``data``
    (which orjson writes without escaping them). So the two colon counts are equal exactly when no
    member was dropped; a body that writes a colon as ``\\u003a`` takes the slow exact path."""
    if compact is None:  # nested at most MAX_JSON_NESTING deep: orjson writes up to 254
        compact = orjson.dumps(data)
    escaped = escapes and b"\\u003" in raw and _COLON_ESCAPE.search(raw) is not None
    if compact and not escaped and raw.count(b":") == compact.count(b":"):
        return
    path = _duplicate_key_path(raw)
    if path is not None:
        raise IngestRejected(
            "this key appears twice in its object", path=path, code="duplicate_key", status=400
        )


class _Pairs(list[tuple[str, Any]]):
    """An object's members as written, duplicates included (standard library parser hook)."""


def _duplicate_key_path(raw: bytes | bytearray) -> str | None:
    """Where the first duplicate key is (``samples[1].power_w``), by a second, slower parse."""
    try:  # nested at most MAX_JSON_NESTING deep (``request_json``): no RecursionError
        tree = json.loads(raw, object_pairs_hook=_Pairs)
    except ValueError:
        return None

    def find(value: Any, path: str) -> str | None:
        if isinstance(value, _Pairs):
            seen: set[str] = set()
            for key, item in value:
                where = f"{path}.{key}" if path else key
                if key in seen:
                    return where
                seen.add(key)
                found = find(item, where)
                if found is not None:
                    return found
        elif isinstance(value, list):
            for i, item in enumerate(value):
                found = find(item, f"{path}[{i}]")
                if found is not None:
                    return found
        return None

    return find(tree, "")


def request_files(request: HttpRequest, field: str) -> list[Any]:
    """A multipart request's ``field`` parts; 415 for another content type, 400 for a malformed
    body (a missing boundary included), 413 past the API's limit."""
    if request.content_type != "multipart/form-data":
        raise IngestRejected(
            f"Content-Type must be multipart/form-data, not {request.content_type or 'missing'!r}",
            code="unsupported_media_type",
            status=415,
        )
    try:
        return list(request.FILES.getlist(field))
    except RequestDataTooBig:
        raise _too_large("the upload") from None
    except (MultiPartParserError, TooManyFieldsSent, TooManyFilesSent) as exc:
        raise IngestRejected(f"malformed multipart body: {exc}", code="malformed_body", status=400) from None


# Files of one multipart upload (``POST /api/v1/runs`` with ``file`` parts); Django caps the count.
MAX_UPLOAD_FILES = 100


def request_upload(request: HttpRequest) -> tuple[list[tuple[str, bytes]], dict[str, str]]:
    """A multipart request's ``file`` parts as (name, bytes) and its form fields (last value wins).

    400 for a malformed body, 413 when it is larger than the API's limit, 422 without a file."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > MAX_BODY_BYTES:
        raise _too_large("the upload")
    try:
        uploads = request.FILES.getlist("file")
        fields = {key: request.POST[key] for key in request.POST}
        others = [key for key in request.FILES if key not in ("file", "profile")]
    except RequestDataTooBig:
        raise _too_large("the upload") from None
    except (MultiPartParserError, TooManyFieldsSent, TooManyFilesSent) as exc:
        raise IngestRejected(f"malformed multipart body: {exc}", code="malformed_body", status=400) from None
    if others:
        raise IngestRejected(
            "files go in the 'file' field (profiler traces in 'profile')",
            path=others[0],
            code="extra_forbidden",
        )
    if not uploads:
        raise IngestRejected(
            "is required: one or more result files (or an archive)", path="file", code="missing"
        )
    if len(uploads) > MAX_UPLOAD_FILES:
        raise IngestRejected(f"at most {MAX_UPLOAD_FILES} files per upload", path="file", code="too_many")
    files = []
    total = 0
    for upload in uploads:
        total += upload.size or 0
        if total > MAX_BODY_BYTES:
            raise _too_large("the upload")
        files.append((upload.name or "upload", upload.read()))
    for key, value in fields.items():
        if "\x00" in value:
            raise IngestRejected("text may not contain the NUL character", path=key, code="invalid")
    return files, fields


def request_snappy(request: HttpRequest, *, max_bytes: int) -> bytes:
    """A Prometheus remote-write body as sent (snappy, decoded by the caller), or ``IngestRejected``:
    413 past ``max_bytes``, 415 for another content encoding."""
    proto = (request.content_params or {}).get("proto", "prometheus.WriteRequest")
    if proto != "prometheus.WriteRequest":  # remote-write 2.0 names its message; a sender falls back on a 415
        raise IngestRejected(
            f"{proto!r} is not supported: accelboard reads remote-write 1.0 (prometheus.WriteRequest)",
            code="unsupported_media_type",
            status=415,
        )
    encoding = request.headers.get("Content-Encoding", "snappy").strip().lower()
    if encoding != "snappy":
        raise IngestRejected(
            f"Content-Encoding {encoding!r} is not supported (remote-write sends snappy)",
            code="unsupported_media_type",
            status=415,
        )
    too_large = IngestRejected(
        f"the body is larger than {max_bytes:,} bytes; lower queue_config.max_samples_per_send",
        code="too_large",
        status=413,
    )
    raw = _body_within(request, max_bytes, too_large)
    if len(raw) > max_bytes:
        raise too_large
    return raw


def _body_within(request: HttpRequest, max_bytes: int, too_large: IngestRejected) -> bytes:
    """The request's body, refused with ``too_large`` when its Content-Length says more than
    ``max_bytes`` (before reading it) or Django's own upload limit stops the read."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > max_bytes:
        raise too_large
    try:
        return request.body
    except RequestDataTooBig:
        raise too_large from None
