"""Reading JSON result files: one object, an array of objects, or one object per line.

Truncated or broken JSON is a ParseError with the line where the decoder stopped; so is JSON
nested deeper than ``jsondepth.MAX_JSON_NESTING`` levels (checked before decoding it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .base import ParseError
from .inputs import InputFile
from .jsondepth import JsonTooDeep, check_nesting


def json_object(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``data[key]`` when it is a JSON object, else an empty one: an optional object of a result
    file read without checking each level by hand (and typed, where ``data.get(key)`` is not)."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def json_array(data: Mapping[str, Any], key: str) -> list[Any]:
    """``data[key]`` when it is a JSON array, else an empty one."""
    value = data.get(key)
    return value if isinstance(value, list) else []


def _nesting(file: InputFile, text: str, *, line: int = 1) -> None:
    try:
        check_nesting(text)
    except JsonTooDeep as exc:
        raise ParseError(file.display, exc.reason, line=line - 1 + exc.line) from None


def load(file: InputFile) -> Any:
    text = file.text()
    _nesting(file, text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(file.display, f"broken or truncated JSON ({exc.msg})", line=exc.lineno) from exc


def load_records(file: InputFile) -> list[tuple[dict[str, Any], int]]:
    """Objects with the line each starts on: one object, an array, or JSON lines (--append-result)."""
    text = file.text()
    _nesting(file, text)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        if len(lines) < 2:
            raise ParseError(
                file.display, f"broken or truncated JSON ({whole.msg})", line=whole.lineno
            ) from whole
        for number, line in lines:
            _nesting(file, line, line=number)
        try:
            json.loads(lines[0][1])
        except json.JSONDecodeError:
            # a pretty-printed document that is broken, not JSON lines
            raise ParseError(
                file.display, f"broken or truncated JSON ({whole.msg})", line=whole.lineno
            ) from whole
        records = []
        for number, line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ParseError(file.display, f"broken JSON line ({exc.msg})", line=number) from exc
            if not isinstance(record, dict):
                raise ParseError(file.display, "expected a JSON object on each line", line=number) from None
            records.append((record, number))
        return records
    if isinstance(obj, dict):
        return [(obj, 1)]
    if isinstance(obj, list) and obj and all(isinstance(item, dict) for item in obj):
        return [(item, 1) for item in obj]
    raise ParseError(file.display, "expected a JSON object, an array of objects or JSON lines")


def head_text(file: InputFile, size: int = 65536) -> str:
    return file.head(size).decode("utf-8", "replace")
