"""What NVIDIA AIPerf and its predecessor GenAI-Perf share: metric blocks, their CSV, GPU telemetry.

Both write one summary per load point: a JSON object of metric blocks ``{"unit", "avg", "min",
"max", "p1".."p99", "std", ...}`` (scalar metrics carry only ``unit`` and ``avg``) beside the run's
``input_config``, and a CSV of the same statistics (``Metric,avg,min,max,p99,...`` rows such as
``Request Latency (ms)``, then ``Metric,Value`` rows, numbers written ``"4,023.50"``).

1. Names follow the definitions, not the tools' labels: ``inter_token_latency`` is each request's
   (latency - TTFT) / (output tokens - 1), i.e. vLLM's TPOT, so it is read as ``tpot_*``;
   ``request_latency`` is the end-to-end latency, ``time_to_first_token`` TTFT;
   ``output_token_throughput`` is output tokens / benchmark duration (all requests).
2. ``unit`` is authoritative (the AIPerf schema says so): latencies are converted from it to ms,
   rates must be per second, anything else is a ParseError naming the metric.
3. A non-streaming run has no token timings: TTFT equals the request latency there, so TTFT and
   TPOT are left out when ``input_config`` says ``streaming: false``.
4. GPU telemetry (AIPerf ``telemetry_data``, GenAI-Perf ``telemetry_stats``) gives the hardware:
   the busy GPUs' name and count and their summed power (``gpus``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from .base import ParsedRun, ParseError
from .csvfile import rows
from .gpus import busy_gpus
from .inputs import InputFile
from .units import UnitError, convert, percentile_token, to_float, to_int

_LATENCY = {"request_latency": "latency", "time_to_first_token": "ttft", "inter_token_latency": "tpot"}
_STREAMING_ONLY = {"time_to_first_token", "inter_token_latency"}
_RATES = {
    "request_throughput": "throughput_requests_per_s",
    "output_token_throughput": "throughput_tokens_per_s",
    "total_token_throughput": "throughput_total_tokens_per_s",
    "goodput": "goodput_requests_per_s",
    "request_goodput": "goodput_requests_per_s",
}
_PER_USER = {"output_token_throughput_per_user", "output_token_throughput_per_request"}
_STATS = ("avg", "min", "max", "std", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99")
_PER_SECOND = re.compile(r"^(requests?|req|tokens?|tok)\s*(/|per)\s*(s|sec|second)$", re.IGNORECASE)


def stat_name(stat: str) -> str:
    return {"avg": "mean", "min": "min", "max": "max", "std": "std"}.get(stat) or percentile_token(stat[1:])


def apply_metrics(run: ParsedRun, file: InputFile, blocks: dict[str, Any], *, streaming: bool | None) -> None:
    """Metric blocks (``{tag: {"unit", "avg", ...}}``) onto the run."""

    def number(block: dict[str, Any], tag: str, stat: str) -> float | None:
        try:
            return to_float(block.get(stat))
        except UnitError as exc:
            raise ParseError(file.display, str(exc), key=f"{tag}.{stat}") from exc

    skipped = []
    for tag, block in blocks.items():
        if not isinstance(block, dict) or "unit" not in block:
            continue
        unit = str(block.get("unit") or "").strip()
        if tag in _LATENCY:
            if streaming is False and tag in _STREAMING_ONLY:
                skipped.append(tag)
                continue
            for stat in _STATS:
                value = number(block, tag, stat)
                if value is None:
                    continue
                try:
                    ms = convert(value, unit, "ms")
                except UnitError as exc:
                    raise ParseError(file.display, f"unit {unit!r}: {exc}", key=f"{tag}.unit") from exc
                run.add_metric(
                    f"{_LATENCY[tag]}_{stat_name(stat)}_ms",
                    ms,
                    source=f"file:{file.name}:{tag}.{stat}",
                    raw_value=block.get(stat),
                    raw_unit=unit,
                    unit="ms",
                    direction="lower",
                )
        elif tag in _RATES or tag in _PER_USER:
            if not _PER_SECOND.match(unit.removesuffix("/user").removesuffix("/gpu").strip()):
                raise ParseError(
                    file.display, f"unit {unit!r}, expected a rate per second", key=f"{tag}.unit"
                )
            name = _RATES.get(tag, "output_tokens_per_s_per_user_mean")
            run.add_metric(
                name,
                number(block, tag, "avg"),
                source=f"file:{file.name}:{tag}.avg",
                raw_value=block.get("avg"),
                raw_unit=unit,
            )
        elif tag == "benchmark_duration":
            seconds = number(block, tag, "avg")
            try:
                seconds = convert(seconds, unit or "s", "s")
            except UnitError as exc:
                raise ParseError(file.display, f"unit {unit!r}: {exc}", key=f"{tag}.unit") from exc
            run.add_metric(
                "wall_time_s",
                seconds,
                source=f"file:{file.name}:{tag}.avg",
                raw_value=block.get("avg"),
                raw_unit=unit,
            )
    if skipped:
        run.warnings.append(
            f"not streaming: {', '.join(skipped)} left out (no token timings without streaming)"
        )
    ok = (
        number(blocks["request_count"], "request_count", "avg")
        if isinstance(blocks.get("request_count"), dict)
        else None
    )
    failed = (
        number(blocks["error_request_count"], "error_request_count", "avg")
        if isinstance(blocks.get("error_request_count"), dict)
        else None
    )
    if ok is not None:
        run.context["request_count"] = ok
        if failed is not None and ok + failed > 0:
            run.context["error_request_count"] = failed
            run.add_metric(
                "error_rate",
                failed / (ok + failed),
                source="derived:error_request_count/(request_count+error_request_count)",
            )
    for tag, field in (
        ("input_sequence_length", "workload.input_length"),
        ("output_sequence_length", "workload.output_length"),
    ):
        block = blocks.get(tag)
        if isinstance(block, dict) and (mean := number(block, tag, "avg")) is not None:
            run.context[f"{tag}_mean"] = mean
            run.fill(field, round(mean), f"file:{file.name}:{tag}.avg")


def apply_load(run: ParsedRun, source: str, *, concurrency: Any, request_rate: Any) -> None:
    """Concurrency and arrival rate: a finite request rate is LoadGen's Server pattern (as vLLM); a
    concurrency with no finite rate is a closed loop of N requests in flight, online serving
    ("serving"); neither leaves the scenario unset (the CSV export alone)."""
    try:
        run.put("workload.concurrency", to_int(concurrency), f"{source}:concurrency")
        rate = to_float(request_rate)
    except UnitError:
        rate = None
    if request_rate not in (None, ""):
        run.workload.options["request_rate"] = request_rate
    if rate is not None and 0 < rate < math.inf:
        run.put("workload.scenario", "server", "derived:request_rate")
    elif run.workload.concurrency or rate == math.inf:
        run.put("workload.scenario", "serving", "derived:concurrency")


def apply_gpus(run: ParsedRun, gpus: list[dict[str, Any]], source: str) -> None:
    """``gpus``: one dict per GPU with ``key``, ``name``, ``host``, ``power_avg_w``, ``util_avg_pct``,
    ``util_max_pct``. Hardware and power of the GPUs that worked."""
    if not gpus:
        return
    busy, idle = busy_gpus({g["key"]: g.get("util_max_pct") for g in gpus})
    chosen = [g for g in gpus if g["key"] in busy]
    if idle:
        run.context["idle_gpus"] = idle
        run.warnings.append(f"GPU {', '.join(idle)} idle throughout the run: left out of its figures")
    run.context["per_gpu"] = {g["key"]: {k: v for k, v in g.items() if k != "key"} for g in gpus}
    names = sorted({g["name"] for g in chosen if g.get("name")})
    which = f"{source}[{len(chosen)} busy GPU{'s' if len(chosen) > 1 else ''}]"
    if names:
        run.put("hardware.accelerator", names[0], f"{source}.gpu_name")
        if len(names) > 1:
            run.warnings.append(f"mixed GPU models: {names}")
    run.put("hardware.count", len(chosen), which)
    hosts = sorted({g["host"] for g in chosen if g.get("host")})
    if len(hosts) == 1:
        run.put("hardware.host", hosts[0], f"{source}.hostname")
    power = [g["power_avg_w"] for g in chosen if g.get("power_avg_w") is not None]
    if power:
        run.add_metric("power_avg_w", float(sum(power)), source=f"{which}.power.avg", raw_unit="W")
    util = [g["util_avg_pct"] for g in chosen if g.get("util_avg_pct") is not None]
    if util:
        run.add_metric("gpu_util_avg_pct", sum(util) / len(util), source=f"{which}.utilization.avg")


def csv_blocks(file: InputFile) -> dict[str, dict[str, Any]]:
    """The CSV's rows as metric blocks: ``Request Latency (ms),4023.50,...`` under ``Metric,avg,...``
    -> ``{"request_latency": {"unit": "ms", "avg": "4023.50", ...}}``; telemetry sections (a
    ``GPU`` column) are skipped."""
    blocks: dict[str, dict[str, Any]] = {}
    header: list[str] | None = None
    for line, cells in rows(file):
        if cells and cells[0].lower() == "metric":
            header = [cell.strip().lower() for cell in cells]
            continue
        if header is None:
            raise ParseError(file.display, "expected a 'Metric,...' header first", line=line)
        if "gpu" in header:
            continue
        match = re.match(r"^(.*?)\s*(?:\((.*)\))?$", cells[0])
        label, unit = (match.group(1), match.group(2) or "") if match else (cells[0], "")
        tag = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")
        block: dict[str, Any] = {"unit": unit or ("tokens" if "length" in tag else "")}
        for name, cell in zip(header[1:], cells[1:], strict=False):
            if cell.strip():
                block["avg" if name == "value" else name] = cell
        blocks[tag] = block
    return blocks
