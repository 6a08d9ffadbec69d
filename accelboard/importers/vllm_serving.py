"""vLLM serving benchmarks: ``benchmark_serving.py`` and ``vllm bench serve --save-result`` JSON.

1. One object per file, an array (``vllm bench sweep`` summary) or one object per line
   (``--append-result``): one run each.
2. Latency keys are ``<stat>_<metric>_<unit>`` with stat mean/median/std/pNN and metric
   ttft/tpot/itl/e2el (2025) or ``latency`` (2024's e2e); the unit comes from the suffix, never
   assumed: ``_ms`` is ms, no suffix (forks such as InferenceMAX) is s.
3. Per-request arrays ``ttfts`` and ``itls`` are seconds; they become the samples of
   ``ttft_mean_ms`` and ``itl_mean_ms`` for significance tests.
4. Goodput is ``request_goodput``, or ``request_goodput:`` (trailing colon) as some 2025 releases
   wrote it; 2024 files have none.
Model = ``model_id`` (a local path is reduced to its last folder); hardware and precision are not
in the file: from ``--metadata`` keys (``gpu``), the path, the model name or the context. The
scenario is what ``request_rate`` says: a finite rate is an arrival rate ("server"); ``inf`` sends
every request at once, bounded by ``max_concurrency`` ("serving": online serving, load set by
concurrency); no rate at all leaves it unset. Never "offline": these are online benchmarks.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from .base import ParsedRun, ParseError
from .inputs import InputFile, Tree
from .jsonfile import head_text, load_records
from .naming import accelerator_from_text
from .units import UnitError, percentile_token, to_float, to_int

NAME = "vllm-serving"

_LATENCY_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el|latency)(?:_(ms|s))?$")
_FAMILY = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "latency", "latency": "latency"}
_THROUGHPUT = {
    "request_throughput": "throughput_requests_per_s",
    "output_throughput": "throughput_tokens_per_s",
    "total_token_throughput": "throughput_total_tokens_per_s",
    "input_throughput": "throughput_input_tokens_per_s",
    "request_goodput": "goodput_requests_per_s",
    "request_goodput:": "goodput_requests_per_s",
}
_KNOWN = {
    "date",
    "backend",
    "endpoint_type",
    "label",
    "model_id",
    "tokenizer_id",
    "best_of",
    "use_beam_search",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "generated_texts",
    "errors",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "rtfx",
    "run_number",
}
_HARDWARE_KEYS = ("gpu", "gpus", "accelerator", "hardware", "gpu_type", "device")


def sniff(file: InputFile) -> bool:
    head = head_text(file).lstrip()
    if not head.startswith(("{", "[")):
        return False
    has_latency = any(
        key in head for key in ('"mean_ttft_ms"', '"median_ttft_ms"', '"median_ttft"', '"ttfts"')
    )
    return has_latency and any(key in head for key in ('"request_throughput"', '"model_id"', '"backend"'))


def parse(file: InputFile, *, tree: Tree) -> list[ParsedRun]:
    return [_run(file, record, line) for record, line in load_records(file)]


def _num(record: dict[str, Any], key: str, file: InputFile, line: int) -> float | None:
    try:
        return to_float(record.get(key))
    except UnitError as exc:
        raise ParseError(file.display, str(exc), line=line, key=key) from exc


def _run(file: InputFile, record: dict[str, Any], line: int) -> ParsedRun:
    run = ParsedRun(source_format=NAME, source_file=file.display)

    def src(key: str) -> str:
        return f"file:{file.name}:{key}"

    if not any(key in record for key in _THROUGHPUT) and not any(_LATENCY_KEY.match(k) for k in record):
        raise ParseError(file.display, "no throughput or latency keys in this record", line=line)
    model_id = str(record.get("model_id") or "")
    if model_id.startswith(("/", "./", "~")) or model_id.count("/") > 1:
        run.put("model", model_id.rstrip("/").rsplit("/", 1)[-1], src("model_id"))
        run.context["model_path"] = model_id
    else:
        run.put("model", model_id, src("model_id"))
    backend = str(record.get("backend") or "")
    run.put(
        "workload.framework",
        "vLLM" if backend.startswith(("vllm", "openai")) or not backend else backend,
        src("backend"),
    )
    # No file names a scenario; request_rate says which. A finite rate is an open-loop arrival
    # process at a target rate (Poisson, or gamma with burstiness): LoadGen's Server pattern. "inf"
    # sends everything at once through the server (bounded by max_concurrency): an online serving
    # benchmark whose load is its concurrency, never Offline.
    rate = record.get("request_rate")
    try:
        rate_value = to_float(rate) if rate is not None else None
    except UnitError:
        rate_value = None  # unreadable: kept below as an option, no scenario claimed
    if rate_value is not None and 0 < rate_value < float("inf"):
        run.put("workload.scenario", "server", "derived:request_rate")
    elif rate_value == float("inf"):
        run.put("workload.scenario", "serving", "derived:request_rate")
    concurrency = record.get("max_concurrency")
    try:
        run.put("workload.concurrency", to_int(concurrency), src("max_concurrency"))
    except UnitError as exc:
        raise ParseError(file.display, str(exc), line=line, key="max_concurrency") from exc
    for key in ("request_rate", "burstiness", "num_prompts"):
        if record.get(key) is not None:
            value = record[key]
            # JSON's Infinity (Python's json writes it) is not JSON to anything else: kept as "inf"
            run.workload.options[key] = "inf" if value == float("inf") else value
            run.field_sources[f"workload.options.{key}"] = src(key)
    date = record.get("date")
    if isinstance(date, str) and date:
        try:
            started = datetime.strptime(date, "%Y%m%d-%H%M%S")
        except ValueError as exc:
            raise ParseError(
                file.display, f"date {date!r} is not YYYYMMDD-HHMMSS", line=line, key="date"
            ) from exc
        run.put("started_at", started.isoformat(), src("date"))
        run.warnings.append("started_at has no timezone in the file (local time of the benchmark client)")

    for key, name in _THROUGHPUT.items():
        if key in record:
            run.add_metric(
                name, _num(record, key, file, line), source=src(key), raw_value=record[key], raw_unit="1/s"
            )
    for key, raw in record.items():
        match = _LATENCY_KEY.match(key)
        if not match:
            continue
        stat, metric, unit = match.groups()
        value = _num(record, key, file, line)
        unit = unit or "s"
        if value is not None and unit == "s":
            value *= 1000.0
        stat_name = {"mean": "mean", "median": "p50", "std": "std"}.get(stat) or percentile_token(stat[1:])
        run.add_metric(
            f"{_FAMILY[metric]}_{stat_name}_ms",
            value,
            source=src(key),
            raw_value=raw,
            raw_unit=unit,
            unit="ms",
            direction="lower",
        )
    completed = _num(record, "completed", file, line)
    failed = _num(record, "failed", file, line)
    if completed is not None and failed is not None and completed + failed > 0:
        run.add_metric(
            "error_rate", failed / (completed + failed), source="derived:failed/(completed+failed)"
        )
    _samples(run, file, record, line)
    for key in (
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "tokenizer_id",
        "label",
    ):
        if record.get(key) not in (None, ""):
            run.context[key] = record[key]
    for key, value in record.items():
        # --metadata k=v pairs arrive as top-level strings
        if (
            key not in _KNOWN
            and not _LATENCY_KEY.match(key)
            and key not in _THROUGHPUT
            and isinstance(value, str)
        ):
            run.context[key] = value
            if key in _HARDWARE_KEYS and not run.hardware.accelerator:
                accelerator, count = accelerator_from_text(value)
                run.put("hardware.accelerator", accelerator or value, src(key))
                run.put("hardware.count", count, src(key))
    return run


def _samples(run: ParsedRun, file: InputFile, record: dict[str, Any], line: int) -> None:
    ttfts = record.get("ttfts")
    if ttfts is not None:
        values = _seconds_list(ttfts, file, line, "ttfts")
        mean = run.metric("ttft_mean_ms")
        if mean is not None:
            mean.samples = values
    itls = record.get("itls")
    if itls is not None:
        if not isinstance(itls, list) or not all(isinstance(item, list) for item in itls):
            raise ParseError(file.display, "itls should be a list of lists of seconds", line=line, key="itls")
        values = [v for item in itls for v in _seconds_list(item, file, line, "itls")]
        mean = run.metric("itl_mean_ms")
        if mean is not None:
            mean.samples = values


def _seconds_list(values: Any, file: InputFile, line: int, key: str) -> list[float]:
    if not isinstance(values, list):
        raise ParseError(file.display, f"{key} should be a list of seconds", line=line, key=key)
    out = []
    for value in values:
        try:
            number = to_float(value)
        except UnitError as exc:
            raise ParseError(file.display, f"{key}: {exc}", line=line, key=key) from exc
        if number is not None:
            out.append(number * 1000.0)
    return out
