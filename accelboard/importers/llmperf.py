"""llmperf (ray-project/llmperf) ``*_summary.json`` from ``token_benchmark_ray.py``.

A flat object: ``results_<metric>_quantiles_pNN`` and ``results_<metric>_{mean,min,max,stddev}``
for ``inter_token_latency_s``, ``ttft_s``, ``end_to_end_latency_s`` (seconds -> ms), the
aggregate ``results_mean_output_throughput_token_per_s`` and
``results_num_completed_requests_per_min`` (-> requests/s). Some versions write min/max as strings
("550"); ``results_error_code_frequency`` is a JSON string. When the sibling
``*_individual_responses.json`` is present (a directory upload), its per-request values become the
samples of the mean metrics.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from . import jsondepth
from .base import ParsedRun, ParseError
from .inputs import InputFile, Tree
from .jsonfile import head_text, load
from .units import UnitError, to_float, to_int

NAME = "llmperf"

# llmperf metric -> (accelboard family, llmperf key); all in seconds
_FAMILIES = {
    "ttft": ("ttft", "ttft_s"),
    "itl": ("itl", "inter_token_latency_s"),
    "e2e": ("latency", "end_to_end_latency_s"),
}
_STATS = {
    "quantiles_p25": "p25",
    "quantiles_p50": "p50",
    "quantiles_p75": "p75",
    "quantiles_p90": "p90",
    "quantiles_p95": "p95",
    "quantiles_p99": "p99",
    "mean": "mean",
    "min": "min",
    "max": "max",
    "stddev": "std",
}


def sniff(file: InputFile) -> bool:
    head = head_text(file).lstrip()
    return head.startswith("{") and '"results_' in head and '"num_concurrent_requests"' in head


def _responses_path(file: InputFile) -> PurePosixPath:
    return file.path.with_name(file.name.replace("_summary.json", "_individual_responses.json"))


def companions(file: InputFile, tree: Tree) -> list[PurePosixPath]:
    return [_responses_path(file)] if file.name.endswith("_summary.json") else []


def parse(file: InputFile, *, tree: Tree) -> list[ParsedRun]:
    data = load(file)
    if not isinstance(data, dict):
        raise ParseError(file.display, "expected a JSON object")
    run = ParsedRun(source_format=NAME, source_file=file.display)

    def src(key: str) -> str:
        return f"file:{file.name}:{key}"

    def num(key: str) -> float | None:
        try:
            return to_float(data.get(key))
        except UnitError as exc:
            raise ParseError(file.display, str(exc), key=key) from exc

    run.put("model", str(data.get("model") or ""), src("model"))
    # llmperf keeps N requests in flight against a serving endpoint (a closed loop): online serving
    # whose load is the concurrency below, never Offline.
    try:
        run.put(
            "workload.concurrency",
            to_int(data.get("num_concurrent_requests")),
            src("num_concurrent_requests"),
        )
        if run.workload.concurrency:
            run.put("workload.scenario", "serving", "derived:num_concurrent_requests")
        mean_in, mean_out = num("mean_input_tokens"), num("mean_output_tokens")
        run.put(
            "workload.input_length", round(mean_in) if mean_in is not None else None, src("mean_input_tokens")
        )
        run.put(
            "workload.output_length",
            round(mean_out) if mean_out is not None else None,
            src("mean_output_tokens"),
        )
    except UnitError as exc:
        raise ParseError(file.display, str(exc), key="num_concurrent_requests") from exc
    for name, key in _FAMILIES.values():
        for stat_key, stat in _STATS.items():
            full = f"results_{key}_{stat_key}"
            if full in data:
                value = num(full)
                run.add_metric(
                    f"{name}_{stat}_ms",
                    None if value is None else value * 1000.0,
                    source=src(full),
                    raw_value=data[full],
                    raw_unit="s",
                )
    run.add_metric(
        "throughput_tokens_per_s",
        num("results_mean_output_throughput_token_per_s"),
        source=src("results_mean_output_throughput_token_per_s"),
        raw_value=data.get("results_mean_output_throughput_token_per_s"),
        raw_unit="tokens/s",
    )
    per_min = num("results_num_completed_requests_per_min")
    run.add_metric(
        "throughput_requests_per_s",
        None if per_min is None else per_min / 60.0,
        source=src("results_num_completed_requests_per_min"),
        raw_value=data.get("results_num_completed_requests_per_min"),
        raw_unit="requests/min",
    )
    run.add_metric(
        "output_tokens_per_s_per_user_mean",
        num("results_request_output_throughput_token_per_s_mean"),
        source=src("results_request_output_throughput_token_per_s_mean"),
    )
    run.add_metric("error_rate", num("results_error_rate"), source=src("results_error_rate"))
    codes = data.get("results_error_code_frequency")
    if isinstance(codes, str) and codes.strip():
        try:
            run.context["error_code_frequency"] = jsondepth.loads(codes)
        except (json.JSONDecodeError, jsondepth.JsonTooDeep):
            run.context["error_code_frequency"] = codes
    timestamp = num("timestamp")
    if timestamp is not None:
        run.put(
            "started_at",
            datetime.fromtimestamp(timestamp, tz=UTC).isoformat().replace("+00:00", "Z"),
            src("timestamp"),
        )
    for key in (
        "version",
        "name",
        "framework",
        "model_size",
        "api",
        "results_num_completed_requests",
        "results_number_errors",
    ):
        if data.get(key) not in (None, ""):
            run.context[key] = data[key]
    _samples(run, file, tree)
    return [run]


def _samples(run: ParsedRun, file: InputFile, tree: Tree) -> None:
    if not file.name.endswith("_summary.json"):
        return
    sibling = tree.open(_responses_path(file))
    if sibling is None:
        return
    responses: Any = load(sibling)
    if not isinstance(responses, list):
        raise ParseError(sibling.display, "expected an array of responses")
    for name, key in _FAMILIES.values():
        values = []
        for index, response in enumerate(responses):
            if not isinstance(response, dict) or response.get("error_code"):
                continue
            try:
                value = to_float(response.get(key))
            except UnitError as exc:
                raise ParseError(sibling.display, f"[{index}] {exc}", key=key) from exc
            if value is not None:
                values.append(value * 1000.0)
        metric = run.metric(f"{name}_mean_ms")
        if metric is not None and values:
            metric.samples = values
