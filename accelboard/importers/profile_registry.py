"""Profiler traces and reports (Kineto JSON, nsys stats CSV, nsys SQLite export): detected by content and read into one
``ProfileData``. They are not runs: a profile attaches to one (``profiles.services``); the result
formats' registry is ``registry.py``.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from . import kineto, nsys, nsys_sqlite
from .base import ParseError, UnrecognisedFormat
from .profile_data import ProfileData

PROFILE_FORMATS: dict[str, ModuleType] = {module.NAME: module for module in (kineto, nsys, nsys_sqlite)}


def _profile_head(source: Any) -> bytes:
    if isinstance(source, bytes):
        return source[:65536]
    if isinstance(source, (str, Path)):
        try:
            with open(source, "rb") as handle:
                return handle.read(65536)
        except OSError:
            return b""
    position = source.tell()
    head = source.read(65536)
    source.seek(position)
    return head


def profile_detect(source: Any) -> str | None:
    """The profile format of a file (path, bytes or seekable binary stream), or None."""
    head = _profile_head(source)
    for name, module in PROFILE_FORMATS.items():
        if module.sniff(head):
            return name
    return None


def profile_parse(sources: list[tuple[str, Any]]) -> ProfileData:
    """Read the files of one profile (``(name, path | bytes | binary stream)``): Kineto traces, one
    per rank, or nsys stats reports. All files must be of one format; raises ParseError or
    UnrecognisedFormat naming the file."""
    if not sources:
        raise ParseError("profile", "no files")
    found: dict[str, str] = {}
    for name, source in sources:
        fmt = profile_detect(source)
        if fmt is None:
            raise UnrecognisedFormat(name, list(PROFILE_FORMATS), hint="not a profiler trace or report")
        found[name] = fmt
    formats = set(found.values())
    if len(formats) > 1:
        first, second = sorted(formats)
        one = next(n for n, f in found.items() if f == second)
        raise ParseError(
            one, f"is {second} while other files are {first}: upload one profile's files together"
        )
    return PROFILE_FORMATS[formats.pop()].parse(sources)
