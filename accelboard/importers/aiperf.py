"""NVIDIA AIPerf: ``profile_export_aiperf.json`` (and its ``.csv``), one run per load point.

Schema (``schema_version`` 1.x): metric blocks (``perf_export``), ``start_time``/``end_time``
(UTC), ``was_cancelled``, ``input_config`` (the resolved configuration: models under
``endpoint.model_names`` or ``models.items[].name``, ``endpoint.streaming``, load under
``loadgen`` or ``phases[]``, prompt lengths under ``input.prompt``), ``telemetry_data`` (DCGM per
GPU; names ``gpu_power_usage`` or, from schema 1.5, ``nvidia_power_usage``/``amd_...``).
``input_config`` is documented as not stable across versions, so every path is optional.
The CSV alone has the statistics only: model, load and hardware then come from the context.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from .base import ParsedRun, ParseError
from .inputs import InputFile, Tree
from .jsonfile import head_text, json_object, load
from .perf_export import apply_gpus, apply_load, apply_metrics, csv_blocks

NAME = "aiperf"
_METRIC_KEYS = (
    '"request_throughput"',
    '"request_latency"',
    '"time_to_first_token"',
    '"output_token_throughput"',
)


def _is_json(file: InputFile) -> bool:
    head = head_text(file).lstrip()
    if not head.startswith("{") or '"unit"' not in head or not any(k in head for k in _METRIC_KEYS):
        return False
    return any(k in head for k in ('"aiperf_version"', '"schema_version"', '"benchmark_id"')) or (
        "aiperf" in file.name.lower() and "genai_perf" not in file.name.lower()
    )


def is_csv_export(file: InputFile) -> bool:
    head = head_text(file, 4096).lstrip("\ufeff").lower()
    return head.startswith("metric,") and any(
        label in head for label in ("request latency", "time to first token", "request throughput")
    )


def _is_csv(file: InputFile) -> bool:
    if not is_csv_export(file) or "genai_perf" in file.name.lower():
        return False
    return "aiperf" in file.name.lower() or ",p1," in head_text(file, 256).lower()


def sniff(file: InputFile) -> bool:
    return _is_json(file) or _is_csv(file)


def auxiliary(file: InputFile) -> str | None:
    if file.name.endswith("profile_export.jsonl") and head_text(file, 4096).lstrip().startswith(
        '{"metadata"'
    ):
        return "AIPerf per-request records (profile_export.jsonl)"
    return None


def priority(file: InputFile) -> int:
    return 1 if file.name.lower().endswith(".csv") else 0


def companions(file: InputFile, tree: Tree) -> list[PurePosixPath]:
    if file.name.lower().endswith(".csv"):
        return []
    return [file.path.with_suffix(".csv"), file.path.with_name("profile_export.jsonl")]


def parse(file: InputFile, *, tree: Tree) -> list[ParsedRun]:
    run = ParsedRun(source_format=NAME, source_file=file.display)
    if file.name.lower().endswith(".csv") or not head_text(file).lstrip().startswith("{"):
        apply_metrics(run, file, csv_blocks(file), streaming=None)
        run.warnings.append("the CSV export holds statistics only: model, load and hardware from context")
    else:
        data = load(file)
        if not isinstance(data, dict):
            raise ParseError(file.display, "expected a JSON object of metric blocks")
        config = json_object(data, "input_config")
        _apply_config(run, file, config)
        apply_metrics(run, file, data, streaming=_streaming(config))
        for key, field in (("start_time", "started_at"), ("end_time", "finished_at")):
            if isinstance(data.get(key), str) and data[key]:
                stamp = data[key] if data[key].endswith("Z") or "+" in data[key][10:] else data[key] + "Z"
                run.put(field, stamp, f"file:{file.name}:{key}")  # AIPerf writes UTC
        if data.get("was_cancelled") is True:
            run.put("valid", False, f"file:{file.name}:was_cancelled")
            run.warnings.append("the benchmark was cancelled before it finished")
        for key in ("aiperf_version", "schema_version", "benchmark_id"):
            if data.get(key):
                run.context[key] = data[key]
        if isinstance(data.get("error_summary"), list) and data["error_summary"]:
            run.context["error_summary"] = data["error_summary"]
        apply_gpus(run, _gpus(data.get("telemetry_data")), f"file:{file.name}:telemetry_data")
    if not run.metrics:
        raise ParseError(file.display, "no metric block (request_latency, request_throughput...) found")
    return [run]


def _streaming(config: dict[str, Any]) -> bool | None:
    endpoint = json_object(config, "endpoint")
    value = endpoint.get("streaming", config.get("streaming"))
    return value if isinstance(value, bool) else None


def _apply_config(run: ParsedRun, file: InputFile, config: dict[str, Any]) -> None:
    def src(key: str) -> str:
        return f"file:{file.name}:input_config.{key}"

    endpoint = json_object(config, "endpoint")
    models: list[Any] = []
    source = ""
    for path, value in (
        ("endpoint.model_names", endpoint.get("model_names")),
        (
            "models.items",
            (config.get("models") or {}).get("items") if isinstance(config.get("models"), dict) else None,
        ),
        ("model_names", config.get("model_names")),
    ):
        if isinstance(value, list) and value:
            models, source = value, path
            break
    names = [str(n) for m in models if (n := m.get("name") if isinstance(m, dict) else m)]
    if names:
        run.put("model", names[0], src(source))
        if len(names) > 1:
            run.warnings.append(
                f"several models benchmarked together ({', '.join(names)}): the first is the run's"
            )
    tokenizer = config.get("tokenizer")
    if isinstance(tokenizer, dict):
        tokenizer = tokenizer.get("name")
    if tokenizer:
        run.context["tokenizer"] = tokenizer
    if endpoint.get("type"):
        run.context["endpoint_type"] = endpoint["type"]
    loadgen = json_object(config, "loadgen")
    concurrency, rate = loadgen.get("concurrency"), loadgen.get("request_rate")
    for phase in config.get("phases") or []:
        if isinstance(phase, dict) and phase.get("type") in ("concurrency", "request_rate", None):
            concurrency = concurrency if concurrency is not None else phase.get("concurrency")
            rate = rate if rate is not None else phase.get("request_rate")
    apply_load(run, f"file:{file.name}:input_config.loadgen", concurrency=concurrency, request_rate=rate)
    prompt = (
        ((config.get("input") or {}).get("prompt") or {}) if isinstance(config.get("input"), dict) else {}
    )
    for key, field in (
        ("input_tokens", "workload.input_length"),
        ("output_tokens", "workload.output_length"),
    ):
        block = prompt.get(key) if isinstance(prompt, dict) else None
        mean = block.get("mean") if isinstance(block, dict) else None
        if isinstance(mean, int | float) and not isinstance(mean, bool) and mean > 0:
            run.put(field, int(mean), src(f"input.prompt.{key}.mean"))
    if config.get("cli_command"):
        run.context["cli_command"] = config["cli_command"]


def _gpus(telemetry: Any) -> list[dict[str, Any]]:
    gpus: list[dict[str, Any]] = []
    if not isinstance(telemetry, dict) or not isinstance(telemetry.get("endpoints"), dict):
        return gpus
    for endpoint, body in telemetry["endpoints"].items():
        for key, gpu in ((body or {}).get("gpus") or {}).items():
            if not isinstance(gpu, dict):
                continue
            metrics = {
                name.removeprefix("nvidia_").removeprefix("amd_"): block
                for name, block in (gpu.get("metrics") or {}).items()
                if isinstance(block, dict)
            }
            power = metrics.get("gpu_power_usage") or metrics.get("power_usage") or {}
            util = metrics.get("gpu_utilization") or metrics.get("utilization") or {}
            gpus.append(
                {
                    "key": f"{endpoint}/{gpu.get('gpu_index', key)}",
                    "name": gpu.get("gpu_name") or "",
                    "uuid": gpu.get("gpu_uuid") or "",
                    "host": gpu.get("hostname") or "",
                    "power_avg_w": _w(power.get("avg"), power.get("unit")),
                    "util_avg_pct": _number(util.get("avg")),
                    "util_max_pct": _number(util.get("max")),
                }
            )
    return gpus


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _w(value: Any, unit: Any) -> float | None:
    number = _number(value)
    if number is None:
        return None
    return number / 1000.0 if str(unit or "W").strip().lower() == "mw" else number
