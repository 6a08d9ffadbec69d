"""optimum-benchmark's 2023 layout: a Hydra run folder with ``inference_results.csv`` (one row,
columns ``<pass>.<measure>(<unit>)``) and the experiment's ``hydra_config.yaml`` (or Hydra's own
``.hydra/config.yaml``) beside it; both are needed for model, hardware and precision.

1. Passes: ``forward`` is one forward pass over the batch, which for a generative model is the
   prefill (the tool's own reports label it so): time to first token when ``generate.*`` columns
   exist, the request latency otherwise. ``generate`` is the whole generation (request latency,
   tokens/s = batch x new tokens / latency), ``decode`` the decoding part.
2. Units come from the column: latency s -> ms; memory MB = 1e6 bytes (the tool divides by 1e6);
   energy ``kWh/sample`` (or ``/token``) -> J per inference (per token), plain ``kWh`` kept in
   context. Columns not understood are kept in the context, never guessed.
3. Config keys (``hydra_config.yaml``): ``model``, ``device`` (``cuda:0``: one GPU; ``cuda``: every
   GPU of ``environment.gpus``, with a warning, as that lists the host's GPUs),
   ``backend.name/version/torch_dtype/quantization_scheme/quantization_config.bits``,
   ``benchmark.input_shapes.batch_size/sequence_length``, ``benchmark.new_tokens``
   (or ``generate_kwargs.max_new_tokens``), ``environment.cpu``, ``experiment_name``.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from .base import ParsedRun, ParseError
from .csvfile import first_line, rows
from .inputs import InputFile, Tree
from .jsonfile import json_array, json_object
from .naming import normalise_precision
from .units import UnitError, to_float, to_int
from .yamlsubset import YamlError, loads

_COLUMN = re.compile(r"^(?P<target>[a-z_]+)\.(?P<measure>[a-z_]+)\((?P<unit>[^)]*)\)$")
_CONFIGS = ("hydra_config.yaml", ".hydra/config.yaml")


def is_results_csv(file: InputFile) -> bool:
    line = first_line(file)
    return "," in line and any(
        column in line
        for column in ("forward.latency(s)", "forward.throughput(samples/s)", "generate.throughput(tokens/s)")
    )


def auxiliary(file: InputFile) -> str | None:
    if file.name == "hydra_config.yaml" or (file.name == "config.yaml" and file.path.parent.name == ".hydra"):
        text = file.head(4096).decode("utf-8", "replace")
        if re.search(r"^(backend|benchmark|experiment_name):", text, re.MULTILINE):
            return f"an optimum-benchmark experiment configuration ({file.name})"
    return None


def companions(file: InputFile) -> list[PurePosixPath]:
    folder = file.path.parent
    return [folder / name for name in (*_CONFIGS, ".hydra/hydra.yaml", ".hydra/overrides.yaml")]


def parse(file: InputFile, *, tree: Tree, name: str) -> list[ParsedRun]:
    table = rows(file, skipinitialspace=False)
    if len(table) < 2:
        raise ParseError(file.display, "a header but no result row", line=table[0][0] if table else 1)
    header = table[0][1]
    runs = []
    config, config_name = _config(file, tree)
    for line, cells in table[1:]:
        if len(cells) != len(header):
            raise ParseError(file.display, f"{len(cells)} cells for {len(header)} columns", line=line)
        run = ParsedRun(source_format=name, source_file=file.display)
        values = dict(zip(header, cells, strict=True))
        _apply_results(run, file, values, line)
        if config is not None:
            _apply_config(run, config, config_name)
        else:
            run.warnings.append(
                "no hydra_config.yaml beside the results: model, hardware and precision from context"
            )
        if not run.metrics:
            raise ParseError(file.display, "no measurement in the row", line=line)
        runs.append(run)
    return runs


def _config(file: InputFile, tree: Tree) -> tuple[dict[str, Any] | None, str]:
    for relative in _CONFIGS:
        config = tree.open(file.path.parent / relative)
        if config is None:
            continue
        try:
            data = loads(config.text())
        except YamlError as exc:
            raise ParseError(config.display, str(exc).split(": ", 1)[-1], line=exc.line) from exc
        if not isinstance(data, dict):
            raise ParseError(config.display, "expected a mapping of the experiment's configuration")
        return data, relative
    return None, ""


def _apply_results(run: ParsedRun, file: InputFile, values: dict[str, str], line: int) -> None:
    columns: dict[tuple[str, str], tuple[str, float, str]] = {}
    for column, cell in values.items():
        match = _COLUMN.match(column.strip())
        if match is None:
            continue
        try:
            number = to_float(cell)
        except UnitError as exc:
            raise ParseError(file.display, f"column {column}: {exc}", line=line) from exc
        if number is None:
            continue
        columns[(match["target"], match["measure"])] = (match["unit"], number, column)
    generative = any(target in ("generate", "decode") for target, _ in columns)

    def add(name: str, key: tuple[str, str], factor: float = 1.0, *, unit: str | None = None) -> None:
        found = columns.pop(key, None)
        if found is None:
            return
        raw_unit, number, column = found
        run.add_metric(
            name,
            number * factor,
            source=f"file:{file.name}:{column}",
            raw_value=number,
            raw_unit=raw_unit,
            unit=unit,
            direction="lower" if unit else None,
        )

    add("ttft_mean_ms" if generative else "latency_mean_ms", ("forward", "latency"), 1000.0)
    if not generative:
        add("throughput_samples_per_s", ("forward", "throughput"))
    add("latency_mean_ms", ("generate", "latency"), 1000.0)
    add("decode_latency_mean_ms", ("decode", "latency"), 1000.0)
    add("throughput_tokens_per_s", ("decode", "throughput"))  # decode's tokens/s first, as the report
    add("throughput_tokens_per_s", ("generate", "throughput"))
    memory: dict[str, tuple[float, str]] = {}
    for (target, measure), (unit, number, column) in list(columns.items()):
        name = {
            "peak_memory": "memory_peak_bytes",
            "max_memory_used": "memory_peak_bytes",
            "max_memory_allocated": "memory_allocated_peak_bytes",
            "max_memory_reserved": "memory_reserved_peak_bytes",
        }.get(measure)
        if name is not None and unit == "MB":
            columns.pop((target, measure))
            if name not in memory or number * 1e6 > memory[name][0]:
                memory[name] = (number * 1e6, column)
        elif measure == "energy_consumption" and unit in ("kWh/sample", "kWh/token"):
            columns.pop((target, measure))
            per = "energy_per_token_j" if unit.endswith("token") else "energy_per_inference_j"
            run.add_metric(
                per, number * 3.6e6, source=f"file:{file.name}:{column}", raw_value=number, raw_unit=unit
            )
    for name, (value, column) in memory.items():
        run.add_metric(name, value, source=f"file:{file.name}:{column}", raw_value=value / 1e6, raw_unit="MB")
    for (_target, _measure), (_unit, number, column) in columns.items():
        run.context[column] = number  # understood by no rule above: kept, not guessed


def _apply_config(run: ParsedRun, config: dict[str, Any], name: str) -> None:
    def src(key: str) -> str:
        return f"file:{name}:{key}"

    def section(key: str) -> dict[str, Any]:
        value = config.get(key)
        return value if isinstance(value, dict) else {}

    backend, benchmark, environment = section("backend"), section("benchmark"), section("environment")
    run.put("model", str(config.get("model") or ""), src("model"))
    run.put("workload.framework", str(backend.get("name") or ""), src("backend.name"))
    run.put("workload.framework_version", str(backend.get("version") or ""), src("backend.version"))
    # "inference" runs fixed batches in the process, no server: Offline; any other name, none.
    run.put(
        "workload.scenario",
        {"inference": "offline", "training": "training"}.get(str(benchmark.get("name") or "")),
        src("benchmark.name"),
    )
    shapes = json_object(benchmark, "input_shapes")
    generate = json_object(benchmark, "generate_kwargs")
    try:
        run.put(
            "workload.batch_size", to_int(shapes.get("batch_size")), src("benchmark.input_shapes.batch_size")
        )
        run.put(
            "workload.input_length",
            to_int(shapes.get("sequence_length")),
            src("benchmark.input_shapes.sequence_length"),
        )
        if benchmark.get("can_generate") is not False:
            run.put(
                "workload.output_length", to_int(benchmark.get("new_tokens")), src("benchmark.new_tokens")
            )
            run.fill(
                "workload.output_length",
                to_int(generate.get("max_new_tokens")),
                src("benchmark.generate_kwargs.max_new_tokens"),
            )
    except UnitError as exc:
        raise ParseError(name, str(exc), key="benchmark") from exc
    run.put(
        "variant.precision",
        normalise_precision(str(backend.get("torch_dtype") or "")),
        src("backend.torch_dtype"),
    )
    scheme = backend.get("quantization_scheme")
    if scheme:
        method = str(scheme).upper() if str(scheme).lower() in {"gptq", "awq"} else str(scheme)
        run.put("variant.quantization_method", method, src("backend.quantization_scheme"))
        qconfig = json_object(backend, "quantization_config")
        bits = qconfig.get("bits")
        if bits in (4, 8):
            run.put("variant.precision", f"int{bits}", src("backend.quantization_config.bits"))
    device = str(config.get("device") or "")
    run.context["device"] = device
    run.put("hardware.cpu", str(environment.get("cpu") or "").strip(), src("environment.cpu"))
    gpus = json_array(environment, "gpus")
    if device.startswith(("cuda", "rocm", "xpu")) and gpus:
        run.put("hardware.accelerator", str(gpus[0]), src("environment.gpus"))
        if ":" in device:
            run.put("hardware.count", 1, src("device"))
        else:
            run.put("hardware.count", len(gpus), src("environment.gpus"))
            run.warnings.append(
                "device 'cuda' with no index: counted every GPU of environment.gpus (the host's)"
            )
    elif device == "cpu":
        run.put("hardware.count", 0, src("device"))
    for key in ("experiment_name", "task"):
        if config.get(key):
            run.context[key] = config[key]
    for key in ("optimum_version", "transformers_version"):
        if environment.get(key):
            run.context[key] = environment[key]
