"""``:::MLLOG {json}`` lines, shared by MLPerf Inference detail logs and MLPerf Training results.

Lines may carry a launcher prefix (`` 0: :::MLLOG ...`` from srun), so the marker is matched
anywhere in the line. A line with the marker but broken JSON (a truncated file) is a ParseError
naming the line; lines without the marker (launcher chatter) are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from . import jsondepth
from .base import ParseError
from .inputs import InputFile
from .jsonfile import json_object

MARKER = ":::MLLOG"


@dataclass
class Event:
    key: str
    value: Any
    time_ms: float | None
    event_type: str
    namespace: str
    metadata: dict[str, Any] = field(default_factory=dict)
    line: int = 0


def has_marker(file: InputFile) -> bool:
    return MARKER.encode() in file.head(8192)


def read_events(file: InputFile) -> list[Event]:
    events: list[Event] = []
    for number, line in enumerate(file.text().splitlines(), start=1):
        start = line.find(MARKER)
        if start < 0:
            continue
        payload = line[start + len(MARKER) :].strip()
        try:
            record = jsondepth.loads(payload)
        except jsondepth.JsonTooDeep as exc:
            raise ParseError(file.display, f"JSON after {MARKER}: {exc.reason}", line=number) from None
        except json.JSONDecodeError as exc:
            raise ParseError(file.display, f"broken JSON after {MARKER} ({exc.msg})", line=number) from exc
        if not isinstance(record, dict) or "key" not in record:
            raise ParseError(file.display, f"{MARKER} record without a 'key'", line=number)
        time_ms = record.get("time_ms")
        events.append(
            Event(
                key=str(record["key"]),
                value=record.get("value"),
                time_ms=float(time_ms) if isinstance(time_ms, int | float) else None,
                event_type=str(record.get("event_type") or ""),
                namespace=str(record.get("namespace") or ""),
                metadata=json_object(record, "metadata"),
                line=number,
            )
        )
    return events


def first(events: list[Event], key: str) -> Event | None:
    return next((event for event in events if event.key == key), None)


def last(events: list[Event], key: str) -> Event | None:
    return next((event for event in reversed(events) if event.key == key), None)
