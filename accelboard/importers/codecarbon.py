"""CodeCarbon ``emissions.csv``: an append-only CSV, one row per tracked run, one run each.

Columns are read by name, never position, because every generation added some: 1.x has 12
(``timestamp, experiment_id, project_name, duration, emissions, energy_consumed, ...``); 2.x adds
``run_id``, per-device power (W) and energy (kWh), ``cpu_model``, ``gpu_count``, ``gpu_model``,
``pue``; 3.x adds ``experiment_id`` back and then utilisation and water columns. Units: duration s,
emissions kg CO2eq (-> g), energy kWh (-> J), power W. ``gpu_model`` is ``"1 x NVIDIA A100..."``
(count first) or empty on CPU-only hosts; ``gpu_count`` may be ``1.0``. A row with fewer cells
than the header (a file cut while being appended) is a ParseError with its line.
"""

from __future__ import annotations

from datetime import datetime

from .base import ParsedRun, ParseError
from .csvfile import first_line, rows
from .inputs import InputFile, Tree
from .naming import accelerator_from_text
from .units import UnitError, kwh_to_j, to_float, to_int

NAME = "codecarbon"

_REQUIRED = {"timestamp", "duration", "emissions", "energy_consumed"}
_ENERGY = {
    "energy_consumed": "energy_j",
    "cpu_energy": "energy_cpu_j",
    "gpu_energy": "energy_gpu_j",
    "ram_energy": "energy_ram_j",
}
_POWER = {"cpu_power": "power_cpu_avg_w", "gpu_power": "power_gpu_avg_w", "ram_power": "power_ram_avg_w"}
_CONTEXT = (
    "project_name",
    "experiment_id",
    "run_id",
    "country_name",
    "country_iso_code",
    "region",
    "cloud_provider",
    "cloud_region",
    "on_cloud",
    "os",
    "python_version",
    "codecarbon_version",
    "tracking_mode",
    "pue",
    "ram_total_size",
    "water_consumed",
)


def sniff(file: InputFile) -> bool:
    header = {cell.strip().lower() for cell in first_line(file).split(",")}
    return header >= _REQUIRED


def parse(file: InputFile, *, tree: Tree) -> list[ParsedRun]:
    table = rows(file)
    if not table:
        raise ParseError(file.display, "empty file", line=1)
    _, header = table[0]
    header = [cell.lower() for cell in header]
    missing = _REQUIRED - set(header)
    if missing:
        raise ParseError(file.display, f"header lacks {', '.join(sorted(missing))}", line=1)
    runs = []
    for line, cells in table[1:]:
        if len(cells) != len(header):
            raise ParseError(
                file.display, f"{len(cells)} cells for {len(header)} columns (truncated row?)", line=line
            )
        runs.append(_run(file, dict(zip(header, cells, strict=True)), line))
    if not runs:
        raise ParseError(file.display, "a header but no data row", line=table[0][0])
    return runs


def _run(file: InputFile, row: dict[str, str], line: int) -> ParsedRun:
    run = ParsedRun(source_format=NAME, source_file=file.display)

    def src(key: str) -> str:
        return f"file:{file.name}:{line}:{key}"

    def num(key: str) -> float | None:
        try:
            return to_float(row.get(key))
        except UnitError as exc:
            raise ParseError(file.display, f"column {key}: {exc}", line=line) from exc

    try:
        started = datetime.fromisoformat(row["timestamp"])
    except ValueError as exc:
        raise ParseError(
            file.display, f"column timestamp: not an ISO time {row['timestamp']!r}", line=line
        ) from exc
    # CodeCarbon writes the time the tracker stopped; the run started `duration` seconds earlier.
    run.put("finished_at", started.isoformat(), src("timestamp"))
    duration = num("duration")
    if duration is not None:
        from datetime import timedelta

        run.put(
            "started_at", (started - timedelta(seconds=duration)).isoformat(), "derived:timestamp-duration"
        )
        run.add_metric(
            "wall_time_s", duration, source=src("duration"), raw_value=row["duration"], raw_unit="s"
        )
    if started.tzinfo is None:
        run.warnings.append("timestamp has no timezone in the file")
    for key, name in _ENERGY.items():
        if key in row:
            run.add_metric(name, kwh_to_j(num(key)), source=src(key), raw_value=row[key], raw_unit="kWh")
    for key, name in _POWER.items():
        if key in row:
            run.add_metric(name, num(key), source=src(key), raw_value=row[key], raw_unit="W")
    emissions = num("emissions")
    run.add_metric(
        "emissions_gco2e",
        None if emissions is None else emissions * 1000.0,
        source=src("emissions"),
        raw_value=row["emissions"],
        raw_unit="kgCO2eq",
    )
    gpu_model = row.get("gpu_model", "").strip()
    if gpu_model:
        accelerator, count = accelerator_from_text(gpu_model)
        run.put("hardware.accelerator", accelerator or gpu_model, src("gpu_model"))
        try:
            gpu_count = to_int(row.get("gpu_count"))
        except UnitError as exc:
            raise ParseError(file.display, f"column gpu_count: {exc}", line=line) from exc
        run.put("hardware.count", gpu_count if gpu_count is not None else count, src("gpu_count"))
    run.put("hardware.cpu", row.get("cpu_model", "").strip(), src("cpu_model"))
    for key in _CONTEXT:
        if row.get(key, "").strip():
            run.context[key] = row[key].strip()
    run.put("model", "", src("project_name"))  # CodeCarbon never names the model: context
    return run
