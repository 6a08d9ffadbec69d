"""``nvidia-smi --query-gpu=... --format=csv`` logs, as telemetry rows.

1. The header names the queried fields with units in brackets (``power.draw [W]``); cells repeat
   the unit (``22.89 W``, ``92 %``, ``25073 MiB``) unless ``nounits`` was given. ``[N/A]`` and
   ``[Not Supported]`` become None: a gap stays a gap.
2. ``timestamp`` is local time ``YYYY/MM/DD HH:MM:SS.mmm`` without a zone (kept without one).
3. Multi-GPU logs interleave GPUs: rows are keyed by ``index`` (or ``uuid``/``pci.bus_id``).
4. Summary metrics: mean and peak power, energy as the trapezoidal integral of power over time
   per GPU, summed; duration; mean utilisation; peak memory and temperature. The hardware is the
   ``name`` column and the number of distinct GPUs; logs of only ``power.draw`` have no name.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime

import numpy as np

from .base import ParsedRun, ParseError, TelemetryRow
from .csvfile import first_line, rows
from .inputs import InputFile, Tree
from .units import UnitError, convert, parse_quantity

NAME = "nvidia-smi"

# query field -> (telemetry value name as in the telemetry API, canonical unit)
_FIELDS = {
    "power.draw": ("power_w", "W"),
    "power.draw.instant": ("power_w", "W"),
    "power.draw.average": ("power_w", "W"),
    "power.limit": ("power_limit_w", "W"),
    "utilization.gpu": ("gpu_util", "%"),
    "utilization.memory": ("mem_util", "%"),
    "memory.used": ("mem_used_bytes", "bytes"),
    "memory.total": ("mem_total_bytes", "bytes"),
    "memory.free": ("mem_free_bytes", "bytes"),
    "clocks.sm": ("sm_clock_mhz", "MHz"),
    "clocks.current.sm": ("sm_clock_mhz", "MHz"),
    "clocks.mem": ("mem_clock_mhz", "MHz"),
    "clocks.current.memory": ("mem_clock_mhz", "MHz"),
    "clocks.gr": ("graphics_clock_mhz", "MHz"),
    "temperature.gpu": ("temperature_c", "°C"),
    "temperature.memory": ("memory_temperature_c", "°C"),
    "fan.speed": ("fan_pct", "%"),
    "pstate": ("pstate", ""),
    "enforced.power.limit": ("power_limit_w", "W"),
}
# header unit when a cell has none (nounits), by the field's canonical unit
_DEFAULT_UNIT = {"W": "W", "%": "%", "bytes": "MiB", "MHz": "MHz", "°C": "°C"}
_IDENTITY = {"timestamp", "name", "index", "uuid", "pci.bus_id", "serial", "driver_version"}
_HEADER_FIELD = re.compile(r"^\s*([a-z_][a-z0-9_.]*)\s*(?:\[(.+?)\])?\s*$", re.IGNORECASE)
_TIME = re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?$")


def _header(line: str) -> list[tuple[str, str]] | None:
    fields = []
    for cell in line.split(","):
        match = _HEADER_FIELD.match(cell)
        if not match:
            return None
        fields.append((match.group(1).lower(), match.group(2) or ""))
    names = {name for name, _ in fields}
    return (
        fields
        if names & (set(_FIELDS) | {"name", "uuid", "pci.bus_id"})
        and names <= set(_FIELDS) | _IDENTITY | _other(names)
        else None
    )


def _other(names: set[str]) -> set[str]:
    # any dotted nvidia-smi query field (clocks_throttle_reasons.active, ecc.errors...) is accepted
    return {name for name in names if "." in name or name in {"pstate", "count", "serial"}}


def sniff(file: InputFile) -> bool:
    line = first_line(file)
    return (
        "," in line and _header(line) is not None and ("[" in line or "timestamp" in line or "index" in line)
    )


def parse(file: InputFile, *, tree: Tree) -> list[ParsedRun]:
    table = rows(file)
    if not table:
        raise ParseError(file.display, "empty file", line=1)
    header = _header(",".join(table[0][1]))
    if header is None:
        raise ParseError(
            file.display, "first line is not an nvidia-smi --format=csv header", line=table[0][0]
        )
    names = [name for name, _ in header]
    run = ParsedRun(source_format=NAME, source_file=file.display)
    gpu_names: dict[str, str] = {}
    for line, cells in table[1:]:
        if len(cells) != len(header):
            raise ParseError(
                file.display, f"{len(cells)} cells for {len(header)} columns (truncated row?)", line=line
            )
        row = dict(zip(names, cells, strict=True))
        time = row.get("timestamp")
        if time is not None:
            if not _TIME.match(time):
                raise ParseError(
                    file.display, f"timestamp {time!r} is not YYYY/MM/DD HH:MM:SS.mmm", line=line
                )
            time = datetime.strptime(
                time, "%Y/%m/%d %H:%M:%S.%f" if "." in time else "%Y/%m/%d %H:%M:%S"
            ).isoformat()
        index = None
        if row.get("index", "").strip().isdigit():
            index = int(row["index"])
        values: dict[str, float | None] = {}
        for (name, unit), cell in zip(header, cells, strict=True):
            if name in _IDENTITY or name not in _FIELDS:
                continue
            key, canonical = _FIELDS[name]
            if not canonical:
                values[key] = _pstate(cell)
                continue
            try:
                number, cell_unit = parse_quantity(cell)
                values[key] = convert(number, cell_unit or unit or _DEFAULT_UNIT[canonical], canonical)
            except UnitError as exc:
                raise ParseError(file.display, f"column {name}: {exc}", line=line) from exc
        gpu_key = row.get("uuid") or row.get("pci.bus_id") or (str(index) if index is not None else "0")
        if row.get("name"):
            gpu_names[gpu_key] = row["name"]
        run.telemetry.append(
            TelemetryRow(
                time=time,
                gpu_index=index,
                gpu_name=row.get("name", ""),
                gpu_uuid=row.get("uuid", ""),
                values=values,
                line=line,
            )
        )
    if not run.telemetry:
        raise ParseError(file.display, "a header but no sample row", line=table[0][0])
    _summarise(run, file)
    if gpu_names:
        run.put("hardware.accelerator", sorted(set(gpu_names.values()))[0], f"file:{file.name}:name")
        run.put("hardware.count", len(gpu_names), f"file:{file.name}:index")
        if len(set(gpu_names.values())) > 1:
            run.warnings.append(f"mixed GPU models in one log: {sorted(set(gpu_names.values()))}")
    if run.telemetry[0].time is not None:
        run.put("started_at", run.telemetry[0].time, f"file:{file.name}:{run.telemetry[0].line}")
        run.put("finished_at", run.telemetry[-1].time, f"file:{file.name}:{run.telemetry[-1].line}")
        run.warnings.append("nvidia-smi timestamps are local time without a timezone")
    run.context["columns"] = names
    return [run]


def _pstate(cell: str) -> float | None:
    match = re.match(r"^P(\d+)$", cell.strip())
    return float(match.group(1)) if match else None


def _summarise(run: ParsedRun, file: InputFile) -> None:
    by_gpu: dict[str, list[TelemetryRow]] = defaultdict(list)
    for row in run.telemetry:
        by_gpu[row.gpu_uuid or str(row.gpu_index)].append(row)
    power = [r.values.get("power_w") for r in run.telemetry]
    power = [p for p in power if p is not None]
    source = f"file:{file.name}:power.draw"
    if power:
        run.add_metric("power_avg_w", float(np.mean(power)), source=source, raw_unit="W")
        run.add_metric("power_max_w", float(np.max(power)), source=source, raw_unit="W")
    energy = 0.0
    seconds = 0.0
    for rows_ in by_gpu.values():
        points = [
            (datetime.fromisoformat(r.time).timestamp(), r.values["power_w"])
            for r in rows_
            if r.time is not None and r.values.get("power_w") is not None
        ]
        if len(points) >= 2:
            t, w = np.array(points).T
            # a gap (None) splits nothing here: missing samples are skipped, never read as 0 W
            energy += float(np.sum((w[1:] + w[:-1]) / 2.0 * np.diff(t)))
            seconds = max(seconds, float(t[-1] - t[0]))
    if energy > 0:
        run.add_metric("energy_j", energy, source="derived:trapezoid(power.draw, timestamp)")
    if seconds > 0:
        run.add_metric("wall_time_s", seconds, source="derived:last-first timestamp")
    util = [r.values.get("gpu_util") for r in run.telemetry if r.values.get("gpu_util") is not None]
    if util:
        run.add_metric("gpu_util_avg_pct", float(np.mean(util)), source=f"file:{file.name}:utilization.gpu")
    mem = [
        r.values.get("mem_used_bytes") for r in run.telemetry if r.values.get("mem_used_bytes") is not None
    ]
    if mem:
        run.add_metric("memory_used_peak_bytes", float(np.max(mem)), source=f"file:{file.name}:memory.used")
    temp = [r.values.get("temperature_c") for r in run.telemetry if r.values.get("temperature_c") is not None]
    if temp:
        run.add_metric("temperature_max_c", float(np.max(temp)), source=f"file:{file.name}:temperature.gpu")
