"""Read a large JSON document a piece at a time: its top-level keys, and one array element by element.

A Chrome/Kineto trace is one object whose ``traceEvents`` array holds almost all of the file;
``json.load`` would hold the whole text and every event as Python objects at once (gigabytes for
a trace of a few hundred MB). ``stream_document`` decodes the text in chunks with an incremental
UTF-8 decoder and hands each element of the streamed array to the caller as soon as it is
decoded, with the C scanner of the standard library (``JSONDecoder.raw_decode``), so memory stays
at one chunk plus one element, whatever the file's size.

The document may also be a bare array (the Chrome "JSON array format"): its elements are streamed.
Errors are ``JsonStreamError`` with the character offset where reading stopped. A value nested
deeper than ``MAX_JSON_NESTING`` levels is an error found before it is decoded (the standard
library's decoder recurses once a level): orjson refuses it in the fast path, ``jsondepth``'s scan
names it (``traceEvents[12].args.a.a…``) before the standard library's decoder would see it.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from .jsondepth import MAX_JSON_NESTING, JsonTooDeep, NestingScan, fits_orjson, nesting_error

try:  # a dependency of the server; the fast path only, the standard library does the rest
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]  # the module or None: mypy types the name as the module

CHUNK_CHARS = 1 << 20
# A single element (or header value) larger than this is a broken file, not a trace event.
MAX_ELEMENT_CHARS = 64 << 20

_WS = re.compile(r"[ \t\n\r]*")
_WS_COMMA = re.compile(r"[ \t\n\r,]*")


class ByteStream(Protocol):
    """What a document is read from: a file opened "rb", ``io.BytesIO``, ``gzip.GzipFile``."""

    def read(self, size: int = -1, /) -> bytes: ...


class JsonStreamError(ValueError):
    """The text is not the JSON it should be; ``offset`` is the character where reading stopped."""

    def __init__(self, message: str, offset: int):
        self.offset = offset
        super().__init__(f"{message} (at character {offset})")


class _Reader:
    def __init__(self, stream: ByteStream):
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="strict")
        self.buf = ""
        self.pos = 0
        self.base = 0  # characters dropped from the front of buf so far
        self.eof = False
        self.json = json.JSONDecoder()

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def more(self) -> bool:
        """Append a chunk (keeping what is not consumed yet); False at the end of the input."""
        if self.eof:
            return False
        try:
            raw = self.stream.read(CHUNK_CHARS)
            text = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise JsonStreamError(f"not UTF-8 text: {exc.reason}", self.offset) from None
        except (OSError, EOFError) as exc:  # a truncated or corrupt gzip stream
            raise JsonStreamError(f"cannot read the file: {exc}", self.offset) from None
        if not raw:
            self.eof = True
        if len(self.buf) - self.pos > MAX_ELEMENT_CHARS:
            raise JsonStreamError(
                f"an element is larger than {MAX_ELEMENT_CHARS >> 20} M characters or is not valid JSON",
                self.offset,
            )
        self.base += self.pos
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        return bool(raw) or bool(text)

    def skip(self, pattern: re.Pattern[str] = _WS) -> str:
        """Skip whitespace (and commas with ``_WS_COMMA``); the next character, "" at the end."""
        while True:
            self.pos = pattern.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # matches "": never None
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def nesting(self, pos: int, where: str, depth: int) -> None:
        """Refuse the value at ``pos`` (inside ``depth`` open levels) when the part of it in the
        buffer nests deeper than the limit, before a recursive decoder sees it."""
        error = nesting_error(self.buf, pos, depth=depth, prefix=where, base=self.base)
        if error is not None:
            raise JsonStreamError(error.reason, error.offset)

    def value(self, where: str = "", depth: int = 0) -> Any:
        """Decode one JSON value at the current position, reading more text as long as needed.
        Its nesting is scanned first, as far as the buffer goes, each chunk once."""
        self.skip()
        scan = NestingScan(depth=depth, prefix=where)
        scan.resume = self.offset
        while True:
            if not scan.done:
                try:
                    scan.feed(self.buf, scan.resume - self.base, base=self.base)
                except JsonTooDeep as exc:
                    raise JsonStreamError(exc.reason, exc.offset) from None
            try:
                obj, end = self.json.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # Either the value is cut by the chunk's end (read on) or it is broken (report it
                # now, without reading the rest of the file in search of an end).
                at = self.base + exc.pos
                unterminated = exc.msg.startswith("Unterminated string")
                if (unterminated or exc.pos >= len(self.buf) - 16) and self.more():
                    continue
                if unterminated or at - self.base >= len(self.buf.rstrip()):
                    raise JsonStreamError("the file ends inside a value (truncated?)", at) from None
                raise JsonStreamError(f"invalid JSON: {exc.msg}", at) from None
            # A number at the very end of the buffer may continue in the next chunk.
            if end == len(self.buf) and not self.eof and self.more():
                continue
            self.pos = end
            return obj

    def expect(self, char: str, what: str) -> None:
        found = self.skip()
        if found != char:
            shown = repr(found) if found else "the end of the file"
            raise JsonStreamError(f"expected {char!r} {what}, found {shown}", self.offset)
        self.pos += 1

    def elements(self, key: str, depth: int) -> Iterator[Any]:
        """The elements of the array whose '[' was just consumed; stops after its ']'.

        The hot loop of a trace. Fast path: the complete elements in the buffer are decoded by one
        ``orjson.loads`` of ``"[" + text + "]"``, the text cut after a ``}`` followed by ``,`` and
        ``{`` (an element boundary when the result is valid JSON: a cut inside a string or a nested
        object leaves it unbalanced, so it cannot parse). Where that fails (a NaN, an integer
        beyond 64 bits, a single element bigger than the buffer), the text up to the cut is read
        element by element with the standard library's decoder.

        ``key`` names the array in errors, ``depth`` counts the levels open around its elements
        (the array's included): the fast path's orjson parse is wrapped in as many arrays as
        make it fail for an element nesting deeper than the limit."""
        decode = self.json.raw_decode
        index = 0
        element_limit = MAX_JSON_NESTING - depth + 1  # the batch's own array is one level
        skip = _WS_COMMA.match
        careful_until = -1  # absolute offset up to which the fast path failed once
        while True:
            buf = self.buf
            pos = skip(buf, self.pos).end()  # type: ignore[union-attr]  # matches "": never None
            if pos >= len(buf):
                self.pos = pos
                if not self.more():
                    raise JsonStreamError("the file ends inside an array (truncated?)", self.offset)
                continue
            if buf[pos] == "]":
                self.pos = pos + 1
                return
            if orjson is not None and self.base + pos >= careful_until:
                cut = _boundary(buf, pos)
                if cut > pos:
                    try:
                        batch = fits_orjson("[" + buf[pos:cut] + "]", limit=element_limit)
                    except orjson.JSONDecodeError:
                        careful_until = self.base + cut
                    else:
                        self.pos = cut
                        index += len(batch)
                        yield from batch
                        continue
            where = f"{key}[{index}]"
            self.nesting(pos, where, depth)
            try:
                obj, end = decode(buf, pos)
            except json.JSONDecodeError:
                end = len(buf)
            index += 1
            if end < len(buf):
                self.pos = end
                yield obj
            else:
                self.pos = pos
                yield self.value(where, depth)


def _boundary(buf: str, pos: int) -> int:
    """The end (exclusive) of the last ``}`` in ``buf[pos:]`` followed by a comma and a ``{``: a
    candidate end of the last complete element; ``pos`` when there is none."""
    end = len(buf)
    for _ in range(4):
        at = buf.rfind("}", pos, end)
        if at < 0:
            return pos
        rest = _WS_COMMA.match(buf, at + 1).end()  # type: ignore[union-attr]  # matches "": never None
        if rest < len(buf) and (buf[rest] == "]" or (buf[rest] == "{" and "," in buf[at + 1 : rest])):
            return at + 1
        end = at
    return pos


def stream_document(
    stream: ByteStream, *, array_key: str, on_header: Callable[[str, Any], None]
) -> Iterator[Any]:
    """Yield the elements of ``document[array_key]`` (or of a bare top-level array) one at a time;
    every other top-level key's value is passed to ``on_header(key, value)`` when it is read
    (before or after the array, in file order)."""
    reader = _Reader(stream)
    first = reader.skip()
    if first == "[":
        reader.pos += 1
        yield from reader.elements("", 1)
        _end(reader)
        return
    if first != "{":
        shown = repr(first) if first else "an empty file"
        raise JsonStreamError(f"expected a JSON object or array, found {shown}", reader.offset)
    reader.pos += 1
    while True:
        char = reader.skip(_WS_COMMA)
        if char == "}":
            reader.pos += 1
            break
        if char != '"':
            shown = repr(char) if char else "the end of the file"
            raise JsonStreamError(f"expected a key, found {shown}", reader.offset)
        key = reader.value()
        reader.expect(":", f"after key {key!r}")
        if key == array_key and reader.skip() == "[":
            reader.pos += 1
            yield from reader.elements(key, 2)
        else:
            on_header(key, reader.value(key, 1))
    _end(reader)


def _end(reader: _Reader) -> None:
    rest = reader.skip()
    if rest:
        raise JsonStreamError(f"unexpected {rest!r} after the end of the document", reader.offset)
