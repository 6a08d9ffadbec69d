"""``nvidia-smi --query-gpu=... --format=csv`` logs, as telemetry rows.

1. The header names the queried fields with units in brackets (``power.draw [W]``); cells repeat
   the unit (``22.89 W``, ``92 %``, ``25073 MiB``) unless ``nounits`` was given. ``[N/A]`` and
   ``[Not Supported]`` become None: a gap stays a gap.
2. ``timestamp`` is local time ``YYYY/MM/DD HH:MM:SS.mmm`` without a zone (kept without one).
3. Multi-GPU logs interleave GPUs: rows are keyed by ``uuid`` or else ``index``.
4. Summary metrics describe the GPUs that did the work (``gpus``: an idle GPU of the host is left
   out, never averaged in): power summed over them (mean and peak of one sampling pass), energy
   as the trapezoidal integral of power over time per GPU, summed; duration; mean utilisation;
   peak memory and temperature. Each GPU's own figures are in ``context["per_gpu"]``.
   The hardware is the ``name`` column and every GPU in the log, idle ones included (the run held
   them); ``context["active_gpus"]`` counts the busy ones. Logs of only ``power.draw`` have no name.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime

import numpy as np

from .base import ParsedRun, ParseError, TelemetryRow
from .csvfile import first_line, rows
from .gpus import BUSY_UTIL_PCT, busy_gpus
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
        telemetry = TelemetryRow(
            time=time,
            gpu_index=index,
            gpu_name=row.get("name", ""),
            gpu_uuid=row.get("uuid", ""),
            values=values,
            line=line,
        )
        if row.get("name"):
            gpu_names[_gpu_key(telemetry)] = row["name"]
        run.telemetry.append(telemetry)
    if not run.telemetry:
        raise ParseError(file.display, "a header but no sample row", line=table[0][0])
    busy = _summarise(run, file)
    # The hardware is every GPU the log shows (the run held them, and they cost money); which were
    # active is in the utilisation figures (``active_gpus``, ``idle_gpus``).
    if gpu_names:
        run.put("hardware.accelerator", sorted(set(gpu_names.values()))[0], f"file:{file.name}:name")
        run.put("hardware.count", len(gpu_names), f"file:{file.name}:index")
        if len(set(gpu_names.values())) > 1:
            run.warnings.append(f"mixed GPU models in one log: {sorted(set(gpu_names.values()))}")
    if len(gpu_names) > 1:
        run.context["active_gpus"] = len([key for key in gpu_names if key in busy])
    if run.telemetry[0].time is not None:
        run.put("started_at", run.telemetry[0].time, f"file:{file.name}:{run.telemetry[0].line}")
        run.put("finished_at", run.telemetry[-1].time, f"file:{file.name}:{run.telemetry[-1].line}")
        run.warnings.append("nvidia-smi timestamps are local time without a timezone")
    # The fields the log was queried for, as its header names them (units dropped).
    run.context["columns"] = names
    return [run]


def _pstate(cell: str) -> float | None:
    match = re.match(r"^P(\d+)$", cell.strip())
    return float(match.group(1)) if match else None


@dataclass
class _Gpu:
    """One GPU's own figures over the log (None: never measured)."""

    name: str
    index: int | None
    samples: int
    power_avg_w: float | None
    power_max_w: float | None
    energy_j: float | None
    seconds: float | None
    util_avg_pct: float | None
    util_max_pct: float | None
    mem_peak_bytes: float | None
    temp_max_c: float | None


def _summarise(run: ParsedRun, file: InputFile) -> list[str]:
    """Run-level figures of the busy GPUs (see ``gpus``); returns the keys of the busy GPUs."""
    by_gpu: dict[str, list[TelemetryRow]] = defaultdict(list)
    for row in run.telemetry:
        by_gpu[_gpu_key(row)].append(row)
    per_gpu = {key: _gpu_figures(rows_) for key, rows_ in by_gpu.items()}
    busy, idle = busy_gpus({key: gpu.util_max_pct for key, gpu in per_gpu.items()})
    if len(by_gpu) > 1:
        run.context["per_gpu"] = {key: asdict(gpu) for key, gpu in per_gpu.items()}
    if idle:
        run.context["idle_gpus"] = idle
        run.warnings.append(
            f"GPU {', '.join(idle)} idle throughout (utilisation never above {BUSY_UTIL_PCT:g} %): "
            "counted in the run's hardware (it was held), left out of its power and utilisation "
            "figures, kept in per_gpu"
        )
    chosen = [per_gpu[key] for key in busy]
    which = "" if len(by_gpu) == 1 else f"[{len(busy)} busy GPU{'s' if len(busy) > 1 else ''}]"
    power = [gpu.power_avg_w for gpu in chosen if gpu.power_avg_w is not None]
    if power:
        source = f"file:{file.name}:power.draw{which}"
        run.add_metric("power_avg_w", sum(power), source=source, raw_unit="W")
        passes = _aligned_total_power([by_gpu[key] for key in busy])
        peaks = [gpu.power_max_w for gpu in chosen if gpu.power_max_w is not None]
        run.add_metric("power_max_w", max(passes) if passes else max(peaks), source=source, raw_unit="W")
        if len(power) < len(chosen):
            run.warnings.append("power.draw missing for some busy GPUs: power figures cover the others only")
    energy = [gpu.energy_j for gpu in chosen if gpu.energy_j]
    if energy:
        run.add_metric("energy_j", sum(energy), source="derived:trapezoid(power.draw, timestamp)")
    seconds = max((gpu.seconds or 0.0 for gpu in chosen), default=0.0)
    if seconds:
        run.add_metric("wall_time_s", seconds, source="derived:last-first timestamp")
    for name, values, column, combine in (
        ("gpu_util_avg_pct", [gpu.util_avg_pct for gpu in chosen], "utilization.gpu", "mean"),
        ("memory_used_peak_bytes", [gpu.mem_peak_bytes for gpu in chosen], "memory.used", "max"),
        ("temperature_max_c", [gpu.temp_max_c for gpu in chosen], "temperature.gpu", "max"),
    ):
        known = [value for value in values if value is not None]
        if known:
            value = sum(known) / len(known) if combine == "mean" else max(known)
            run.add_metric(name, value, source=f"file:{file.name}:{column}{which}")
    return busy


def _gpu_key(row: TelemetryRow) -> str:
    return row.gpu_uuid or ("" if row.gpu_index is None else str(row.gpu_index))


def _gpu_figures(rows_: list[TelemetryRow]) -> _Gpu:
    def present(name: str) -> list[float]:
        return [value for r in rows_ if (value := r.values.get(name)) is not None]

    power, util = present("power_w"), present("gpu_util")
    mem, temp = present("mem_used_bytes"), present("temperature_c")
    points = [
        (datetime.fromisoformat(r.time).timestamp(), r.values["power_w"])
        for r in rows_
        if r.time is not None and r.values.get("power_w") is not None
    ]
    energy = seconds = None
    if len(points) >= 2:
        t, w = np.array(points).T
        # a gap (None) splits nothing here: missing samples are skipped, never read as 0 W
        energy = float(np.sum((w[1:] + w[:-1]) / 2.0 * np.diff(t)))
        seconds = float(t[-1] - t[0])
    return _Gpu(
        name=rows_[0].gpu_name,
        index=rows_[0].gpu_index,
        samples=len(rows_),
        power_avg_w=float(np.mean(power)) if power else None,
        power_max_w=float(np.max(power)) if power else None,
        energy_j=energy,
        seconds=seconds,
        util_avg_pct=float(np.mean(util)) if util else None,
        util_max_pct=float(np.max(util)) if util else None,
        mem_peak_bytes=float(np.max(mem)) if mem else None,
        temp_max_c=float(np.max(temp)) if temp else None,
    )


def _aligned_total_power(gpus: list[list[TelemetryRow]]) -> list[float]:
    """Summed power of one sampling pass (nvidia-smi writes every GPU once per pass, in order):
    the i-th sample of each GPU, kept only where every GPU has a value."""
    totals = []
    for samples in zip(*gpus, strict=False):
        values = [row.values.get("power_w") for row in samples]
        if all(value is not None for value in values):
            totals.append(float(sum(v for v in values if v is not None)))
    return totals
