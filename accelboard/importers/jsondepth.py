"""How deeply JSON text nests, checked before a recursive decoder sees it.

Python's ``json`` decodes nested arrays and objects by recursion: a 315-byte file nested 100,000
deep raises ``RecursionError`` (a 500, a crashed CLI) instead of a parse error. orjson stops at
1,024 levels on its own. Every reader of JSON from outside (result files, profiler traces, API
bodies, a CI server's answers) refuses text nested deeper than ``MAX_JSON_NESTING`` levels first,
with a ``JsonTooDeep`` naming where: the line, the character offset and the path
(``traceEvents[0].args.a.a…``).

1. ``nesting_error(text, start)``: one pass over the text by a regular expression that jumps
   over strings and stops at brackets, commas and string keys; it stops at the end of the value
   that starts at ``start`` and returns ``None``, or the error at the first bracket too deep.
2. ``loads(text)``: ``json.loads`` after the check. The common case costs one orjson parse (a
   few ms per MB): the text wrapped in ``1024 - MAX_JSON_NESTING`` arrays parses exactly when no
   value in it nests deeper than the limit; only when orjson fails (also for NaN or an integer
   beyond 64 bits, which ``json`` accepts) does the slower scan run.
"""

from __future__ import annotations

import json
import re
from typing import Any

try:  # a dependency of the server and the CLI; the scan alone is exact, only slower
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]  # the module or None: mypy types the name as the module

# Real files nest a handful of levels (a trace event's args, an lm-eval config); 100 leaves room
# and keeps the recursive decoder (one C stack frame a level) far from Python's limit of 1,000.
MAX_JSON_NESTING = 100
# orjson's own limit: a value wrapped in (1024 - limit) arrays parses when it nests <= limit.
_ORJSON_NESTING = 1024
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*(")?|[\[\]{},]')
_LEADING = re.compile(r"[\ufeff \t\n\r]*")
_SHOWN_PARTS = 6


class JsonTooDeep(ValueError):
    """Text nested deeper than the limit: where (offset, line, path) and the limit."""

    def __init__(self, *, offset: int, line: int, path: str, limit: int):
        self.offset = offset
        self.line = line
        self.path = path
        self.limit = limit
        where = f"{path}: " if path else ""
        self.reason = f"{where}nested deeper than {limit} levels"
        super().__init__(f"{self.reason} (line {line}, character {offset})")


def _path(parts: list[str | int], shown: int | None) -> str:
    text = ""
    for part in parts[:shown]:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text + ("…" if shown is not None and len(parts) > shown else "")


class NestingScan:
    """The scan of one value, fed the text as it comes (a stream's buffer, read on): ``feed``
    resumes where the last call stopped, so a value longer than the buffer is scanned once."""

    def __init__(
        self,
        *,
        limit: int = MAX_JSON_NESTING,
        depth: int = 0,
        prefix: str = "",
        shown: int | None = _SHOWN_PARTS,
    ):
        self.limit = limit
        self.depth = depth  # levels open around the value already
        self.prefix = prefix
        self.shown = shown
        self.kinds: list[str] = []  # "[" or "{" for each open level
        self.parts: list[str | int] = []  # the key or index inside each open level
        self.expect_key = False
        self.done = False
        self.resume = 0  # absolute offset the next ``feed`` starts at

    def feed(self, text: str, start: int, *, base: int = 0) -> bool:
        """Scan ``text[start:]`` (``base``: the absolute offset of ``text[0]``); True once the
        value ended (a scalar, or its last bracket closed), False when the text ran out first.
        Raises ``JsonTooDeep`` at the first bracket too deep."""
        kinds, parts = self.kinds, self.parts
        for match in _TOKEN.finditer(text, start):
            token = match.group()
            char = token[0]
            if char == '"':
                if match.group(1) is None:  # the text ends inside the string: read it again
                    self.resume = base + match.start()
                    return False
                if self.expect_key:
                    parts[-1] = token[1:-1]
                    self.expect_key = False
                elif not kinds:
                    self.done = True  # a bare string value
            elif char == "{" or char == "[":
                if len(kinds) + self.depth >= self.limit:
                    offset = match.start()
                    line = text.count("\n", 0, offset) + 1
                    full = ([self.prefix] if self.prefix else []) + parts
                    raise JsonTooDeep(
                        offset=base + offset, line=line, path=_path(full, self.shown), limit=self.limit
                    )
                kinds.append(char)
                parts.append("" if char == "{" else 0)
                self.expect_key = char == "{"
            elif char == ",":
                if not kinds:
                    self.done = True
                elif kinds[-1] == "[":
                    parts[-1] = int(parts[-1]) + 1
                else:
                    self.expect_key = True
            else:  # "]" or "}"
                if kinds:
                    kinds.pop()
                    parts.pop()
                    self.expect_key = False
                self.done = not kinds
            if self.done:
                return True
        self.resume = base + len(text)
        return False


def nesting_error(
    text: str,
    start: int = 0,
    *,
    limit: int = MAX_JSON_NESTING,
    depth: int = 0,
    prefix: str = "",
    base: int = 0,
    shown: int | None = _SHOWN_PARTS,
) -> JsonTooDeep | None:
    """The error for the first bracket of the value at ``text[start:]`` that nests deeper than
    ``limit``, else None (also when the value is cut short: the decoder reports that).
    ``depth`` levels are open around the value already; ``prefix`` starts the path
    (``traceEvents[3]``); ``base`` is added to offsets (for text that is a window of a longer
    stream); the path names its first ``shown`` parts, then "…" (None: all of them)."""
    try:
        NestingScan(limit=limit, depth=depth, prefix=prefix, shown=shown).feed(text, start, base=base)
    except JsonTooDeep as exc:
        return exc
    return None


def fits_orjson(text: str | bytes | bytearray, *, limit: int = MAX_JSON_NESTING) -> Any:
    """``orjson.loads(text)`` when it parses and nests at most ``limit`` levels; raises
    ``orjson.JSONDecodeError`` otherwise (the caller then looks for why)."""
    wrap = _ORJSON_NESTING - limit
    if isinstance(text, (bytes, bytearray)):
        data = orjson.loads(b"[" * wrap + text + b"]" * wrap)
    else:
        data = orjson.loads("[" * wrap + text + "]" * wrap)
    for _ in range(wrap):
        # Each wrapper holds exactly the one value the text is: a blank text ("[[]]"), or one that
        # closes the wrappers itself ("1],[2" -> "[[1],[2]]"), is not one JSON value.
        if not isinstance(data, list) or len(data) != 1:
            raise orjson.JSONDecodeError("Expecting one JSON value", "", 0)
        data = data[0]
    return data


def check_nesting(text: str, *, limit: int = MAX_JSON_NESTING) -> None:
    """Raise ``JsonTooDeep`` when a value in ``text`` (one document) nests deeper than ``limit``."""
    if orjson is not None:
        try:
            fits_orjson(text, limit=limit)
        except orjson.JSONDecodeError:
            pass
        else:
            return
    error = nesting_error(text, _first(text), limit=limit)
    if error is not None:
        raise error


def _first(text: str) -> int:
    return _LEADING.match(text).end()  # type: ignore[union-attr]  # matches "": never None


def loads(text: str, *, limit: int = MAX_JSON_NESTING) -> Any:
    """``json.loads(text)``, refusing with ``JsonTooDeep`` text nested deeper than ``limit``."""
    check_nesting(text, limit=limit)
    return json.loads(text)
