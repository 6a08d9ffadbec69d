"""``accelboard detect FILE [--direction higher|lower] [--metric NAME]``: change points as JSON.

Runs the server's detector (``accelboard.alerts.detection``) on one series outside the server,
for the CI gate and offline analysis. Needs no database: the ``accelboard`` entry point routes
here before Django settings are loaded.

Input, in run order:
- CSV: one value per line, or ``time,value`` rows; a header line is optional. An empty value is
  a missing result (a gap), kept in the index.
- JSON (a file whose first character is ``[``): a list of numbers, or of objects with ``value``
  (and optionally ``time``); ``null`` is a missing result.

Output: ``{"direction", "metric", "points", "change_points": [...], "latest": {...}}`` where each
change point has index, time (when the input had times), level_before, level_after, pct_change,
confidence and kind, and ``latest`` is the incremental check of the newest result. Exit 0 on
success, 2 for a bad file or bad options, with one error line on stderr naming the line or item.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from accelboard.alerts.detection import DEFAULT_MIN_EFFECT, check_latest, segment
from accelboard.importers import jsondepth


class InputError(ValueError):
    """A malformed series file; the message names the line or item."""


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise InputError(f"{where}: {text!r} is not a finite number")
    return value


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_csv(text: str, name: str) -> tuple[list[float], list[str] | None]:
    values: list[float] = []
    times: list[str] = []
    columns: int | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        cells = [c.strip() for c in line.split(",")]
        if columns is None:
            columns = len(cells)
            if columns not in (1, 2):
                raise InputError(f"{name}:{lineno}: expected 'value' or 'time,value', got {columns} columns")
            if not _looks_numeric(cells[-1]) and cells[-1] != "":
                continue  # the optional header
        if len(cells) != columns:
            raise InputError(f"{name}:{lineno}: expected {columns} columns, got {len(cells)}")
        cell = cells[-1]
        values.append(math.nan if cell == "" else _number(cell, f"{name}:{lineno}"))
        if columns == 2:
            if not cells[0]:
                raise InputError(f"{name}:{lineno}: empty time")
            times.append(cells[0])
    return values, (times if columns == 2 else None)


def read_json(text: str, name: str) -> tuple[list[float], list[str] | None]:
    try:
        data = jsondepth.loads(text)
    except jsondepth.JsonTooDeep as exc:
        raise InputError(f"{name}:{exc.line}: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(data, list):
        raise InputError(f"{name}: expected a JSON list of numbers or objects with 'value'")
    values: list[float] = []
    times: list[str] = []
    for i, item in enumerate(data):
        where = f"{name}: item {i}"
        if isinstance(item, dict):
            if "value" not in item:
                raise InputError(f"{where}: object without 'value'")
            value = item["value"]
            if "time" in item:
                times.append(str(item["time"]))
        else:
            value = item
        if value is None:
            values.append(math.nan)
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"{where}: value {value!r} is not a number")
        elif not math.isfinite(float(value)):
            raise InputError(f"{where}: value {value!r} is not a finite number")
        else:
            values.append(float(value))
    if times and len(times) != len(values):
        raise InputError(f"{name}: 'time' given for {len(times)} of {len(values)} items")
    return values, (times or None)


def read_series(path: Path) -> tuple[list[float], list[str] | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    values, times = (
        read_json(text, str(path)) if text.lstrip()[:1] in ("[", "{") else read_csv(text, str(path))
    )
    if not any(math.isfinite(v) for v in values):
        raise InputError(f"{path}: no values")
    return values, times


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelboard detect",
        description="Find change points in one benchmark series (CSV or JSON) and print them as JSON.",
    )
    parser.add_argument("file", metavar="FILE", help="CSV (value or time,value per line) or JSON list")
    parser.add_argument("--direction", choices=["higher", "lower"], help="which way is better")
    parser.add_argument("--metric", help="metric name from the catalogue; sets the direction")
    parser.add_argument(
        "--min-effect",
        type=float,
        default=DEFAULT_MIN_EFFECT * 100,
        metavar="PCT",
        help=f"smallest relative change worth reporting, in %% (default {DEFAULT_MIN_EFFECT * 100:g})",
    )
    parser.add_argument("--compact", action="store_true", help="one-line JSON")
    return parser


def _clean(value: Any) -> Any:
    # JSON has no Infinity: a % change from a zero baseline is written as null.
    return None if isinstance(value, float) and not math.isfinite(value) else value


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed its message; keep the exit code contract (2)
        return 0 if exc.code == 0 else 2
    direction = args.direction
    if args.metric:
        from accelboard.importers.metrics import metric_spec

        spec = metric_spec(args.metric)
        if spec is None and direction is None:
            print(
                f"accelboard detect: --metric {args.metric!r} is not in the catalogue; give --direction",
                file=sys.stderr,
            )
            return 2
        direction = direction or (spec.direction if spec else None)
    direction = direction or "higher"
    if not 0 <= args.min_effect < 100:
        print("accelboard detect: --min-effect must be between 0 and 100 (percent)", file=sys.stderr)
        return 2
    try:
        values, times = read_series(Path(args.file))
    except InputError as exc:
        print(f"accelboard detect: {exc}", file=sys.stderr)
        return 2
    min_effect = args.min_effect / 100
    points = []
    for cp in segment(values, direction=direction, min_effect=min_effect):
        row: dict[str, Any] = {"index": cp.index}
        if times is not None:
            row["time"] = times[cp.index]
        row.update(
            level_before=cp.level_before,
            spread_before=cp.spread_before,
            level_after=cp.level_after,
            spread_after=cp.spread_after,
            pct_change=_clean(cp.pct_change),
            confidence=cp.confidence,
            kind=cp.kind,
        )
        points.append(row)
    verdict = check_latest(values, direction=direction, min_effect=min_effect)
    latest = verdict.to_dict()
    if times is not None and verdict.change_index is not None:
        latest["time"] = times[verdict.change_index]
    result = {
        "direction": direction,
        "metric": args.metric,
        "points": len(values),
        "change_points": points,
        "latest": {k: _clean(v) for k, v in latest.items()},
    }
    json.dump(result, sys.stdout, indent=None if args.compact else 2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
