"""NVIDIA GenAI-Perf: ``profile_export_genai_perf.json`` and ``.csv`` (older ``*_llm_genai_perf.csv``).

The JSON is the statistics (``perf_export``: ``request_throughput``, ``request_latency``,
``time_to_first_token``, ``inter_token_latency``, ``output_token_throughput``,
``output_token_throughput_per_request``, ``input_sequence_length``...) beside ``input_config``,
the command line's arguments: ``model`` (a list), ``service_kind`` (openai/triton), ``backend``
(tensorrtllm/vllm, meaningful for Triton only: it defaults to tensorrtllm whatever the server),
``streaming``, ``concurrency``, ``request_rate``, ``synthetic_input_tokens_mean``,
``output_tokens_mean`` (-1 when unset). ``telemetry_stats`` (per GPU ``gpu0``...: no names) gives
the count of busy GPUs and their power. The CSV alone has the statistics only; the artifact
folder's default name (``<model>-<service_kind>-<endpoint_type>-concurrency<N>``) gives the load.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from .aiperf import is_csv_export
from .base import ParsedRun, ParseError
from .inputs import InputFile, Tree
from .jsonfile import head_text, json_object, load
from .perf_export import apply_gpus, apply_load, apply_metrics, csv_blocks

NAME = "genai-perf"
_METRIC_KEYS = (
    '"request_throughput"',
    '"request_latency"',
    '"time_to_first_token"',
    '"output_token_throughput"',
)
_CONFIG_KEYS = ('"service_kind"', '"formatted_model_name"', '"subcommand"', '"endpoint_type"')
_FRAMEWORKS = {"tensorrtllm": "TensorRT-LLM", "vllm": "vLLM"}
_ARTIFACT_DIR = re.compile(
    r"^(?P<model>.+)-(?P<service>openai|triton|tensorrtllm_engine|dynamic_grpc)-(?P<endpoint>[a-z_]+)-(?P<mode>concurrency|request_rate)(?P<value>[\d.]+)$"
)


def _is_json(file: InputFile) -> bool:
    head = head_text(file).lstrip()
    if not head.startswith("{") or '"unit"' not in head or not any(k in head for k in _METRIC_KEYS):
        return False
    return any(k in head for k in _CONFIG_KEYS) or "genai_perf" in file.name.lower()


def _is_csv(file: InputFile) -> bool:
    if not is_csv_export(file) or "aiperf" in file.name.lower():
        return False
    return "genai_perf" in file.name.lower() or ",p1," not in head_text(file, 256).lower()


def sniff(file: InputFile) -> bool:
    return _is_json(file) or _is_csv(file)


def priority(file: InputFile) -> int:
    return 1 if file.name.lower().endswith(".csv") else 0


def companions(file: InputFile, tree: Tree) -> list[PurePosixPath]:
    if file.name.lower().endswith(".csv"):
        return []
    return [
        file.path.with_suffix(".csv"),
        file.path.with_name(file.path.stem.replace("_genai_perf", "_llm_genai_perf") + ".csv"),
    ]


def parse(file: InputFile, *, tree: Tree) -> list[ParsedRun]:
    run = ParsedRun(source_format=NAME, source_file=file.display)
    if file.name.lower().endswith(".csv") or not head_text(file).lstrip().startswith("{"):
        apply_metrics(run, file, csv_blocks(file), streaming=None)
        _from_artifact_dir(run, file.path)
        run.warnings.append("the CSV export holds statistics only: model and hardware from context")
    else:
        data = load(file)
        if not isinstance(data, dict):
            raise ParseError(file.display, "expected a JSON object of metric blocks")
        config = json_object(data, "input_config")
        _apply_config(run, file, config)
        streaming = config.get("streaming")
        apply_metrics(run, file, data, streaming=streaming if isinstance(streaming, bool) else None)
        apply_gpus(run, _gpus(data.get("telemetry_stats")), f"file:{file.name}:telemetry_stats")
        if not run.model:
            _from_artifact_dir(run, file.path)
    if not run.metrics:
        raise ParseError(file.display, "no metric block (request_latency, request_throughput...) found")
    return [run]


def _apply_config(run: ParsedRun, file: InputFile, config: dict[str, Any]) -> None:
    def src(key: str) -> str:
        return f"file:{file.name}:input_config.{key}"

    models = config.get("model") if config.get("model") is not None else config.get("model_names")
    names = [str(m) for m in (models if isinstance(models, list) else [models]) if m]
    if names:
        run.put("model", names[0], src("model"))
        if len(names) > 1:
            run.warnings.append(
                f"several models benchmarked together ({', '.join(names)}): the first is the run's"
            )
    service = str(config.get("service_kind") or "")
    backend = str(config.get("backend") or "")
    if service == "triton" and backend:
        run.put("workload.framework", _FRAMEWORKS.get(backend, backend), src("backend"))
    for key in ("service_kind", "endpoint_type", "endpoint", "tokenizer"):
        if config.get(key):
            run.context[key] = config[key]
    apply_load(
        run,
        f"file:{file.name}:input_config",
        concurrency=config.get("concurrency"),
        request_rate=config.get("request_rate"),
    )
    for key, field in (
        ("synthetic_input_tokens_mean", "workload.input_length"),
        ("output_tokens_mean", "workload.output_length"),
    ):
        value = config.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            run.put(field, int(value), src(key))
    extra = config.get("extra_inputs")
    if isinstance(extra, dict) and extra:
        run.workload.options["extra_inputs"] = extra


def _from_artifact_dir(run: ParsedRun, path: PurePosixPath) -> None:
    match = _ARTIFACT_DIR.match(path.parent.name)
    if match is None:
        return
    # "/" in the model id is written "_" there: the name is kept as written, for the uploader to confirm
    run.fill("model", match.group("model"), "path")
    if match.group("mode") == "concurrency":
        apply_load(run, "path", concurrency=match.group("value"), request_rate=None)
    else:
        apply_load(run, "path", concurrency=None, request_rate=match.group("value"))


def _gpus(stats: Any) -> list[dict[str, Any]]:
    """``telemetry_stats``: ``{metric: {"unit": .., "avg": {"gpu0": v, ...}, "max": {...}}}``."""
    if not isinstance(stats, dict):
        return []
    power = json_object(stats, "gpu_power_usage")
    util = json_object(stats, "gpu_utilization")
    keys: list[str] = []
    for block in (power, util):
        for stat in ("avg", "max"):
            if isinstance(block.get(stat), dict):
                keys += [k for k in block[stat] if k not in keys]

    def value(block: dict[str, Any], stat: str, key: str) -> float | None:
        per_gpu = block.get(stat)
        number = per_gpu.get(key) if isinstance(per_gpu, dict) else None
        return float(number) if isinstance(number, int | float) and not isinstance(number, bool) else None

    return [
        {
            "key": key,
            "name": "",
            "power_avg_w": value(power, "avg", key),
            "util_avg_pct": value(util, "avg", key),
            "util_max_pct": value(util, "max", key),
        }
        for key in keys
    ]
