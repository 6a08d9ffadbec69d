"""Hugging Face optimum-benchmark: ``benchmark.json`` (``{"config", "report"}``) or the split pair
``benchmark_report.json`` + ``benchmark_config.json``; and the 2023 layout (``optimum_legacy``):
``inference_results.csv`` with ``hydra_config.yaml`` (or ``.hydra/config.yaml``) beside it.

1. The report has one entry per target (``load``, ``forward``, ``prefill``, ``decode``,
   ``per_token``, ``generate``, ``call``, training ``overall``/``train``), each with ``latency``
   (s, with ``values[]``), ``throughput``, ``memory`` (MB = 1e6 bytes), ``energy`` (kWh) and
   ``efficiency``; disabled trackers are null.
2. Targets map onto accelboard's names by what they measure: ``forward``/``call``/``generate``
   latency is request latency, ``prefill`` latency is time to first token, ``per_token`` is
   inter-token latency, ``decode`` throughput is output tokens/s, ``load`` is load time. Other
   targets keep their own prefix (``<target>_latency_mean_ms``).
3. The config gives model (``backend.model``), framework (``backend.name``/``version``), precision
   (``torch_dtype``, ``dtype``, ``quantization_scheme``/``quantization_config``, ``quantize``), batch
   size and lengths (``scenario.input_shapes``, ``new_tokens``) and hardware
   (``environment.gpu``/``gpu_count``; ``cpu`` when ``backend.device`` is cpu: ``environment.gpu``
   lists the host's GPUs even then).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from . import optimum_legacy
from .base import ParsedRun, ParseError
from .inputs import InputFile, Tree
from .jsonfile import head_text, json_array, json_object, load
from .naming import normalise_precision
from .units import UnitError, kwh_to_j, to_float, to_int

NAME = "optimum-benchmark"
# ``scenario.name`` -> the workload's scenario; a name not here claims none.
_SCENARIOS = {"inference": "offline", "energy_star": "offline", "training": "training"}

_TARGET_KEYS = {"memory", "latency", "throughput", "energy", "efficiency"}
# target -> latency family
_LATENCY_FAMILY = {
    "forward": "latency",
    "call": "latency",
    "generate": "latency",
    "prefill": "ttft",
    "per_token": "itl",
    "decode": "decode_latency",
}
# (target, throughput unit) -> metric
_THROUGHPUT = {
    ("forward", "samples/s"): "throughput_samples_per_s",
    ("call", "samples/s"): "throughput_samples_per_s",
    ("train", "samples/s"): "throughput_samples_per_s",
    ("decode", "tokens/s"): "throughput_tokens_per_s",
    ("generate", "tokens/s"): "throughput_tokens_per_s",
    ("prefill", "tokens/s"): "throughput_prefill_tokens_per_s",
}
_STATS = {"mean": "mean", "p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "stdev": "std"}


def _is_report(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and bool(obj)
        and all(
            isinstance(v, dict) and set(v) <= _TARGET_KEYS | {"unit"} and set(v) & _TARGET_KEYS
            for v in obj.values()
        )
    )


def sniff(file: InputFile) -> bool:
    if optimum_legacy.is_results_csv(file):
        return True
    head = head_text(file).lstrip()
    if not head.startswith("{"):
        return False
    if '"report"' in head and '"config"' in head and '"backend"' in head:
        return True
    return (
        '"latency"' in head
        and '"throughput"' in head
        and (
            '"forward"' in head
            or '"load"' in head
            or '"prefill"' in head
            or '"decode"' in head
            or '"train"' in head
            or '"call"' in head
        )
    )


def auxiliary(file: InputFile) -> str | None:
    if file.name == "benchmark_config.json" and '"backend"' in head_text(file):
        return "an optimum-benchmark configuration (benchmark_config.json)"
    return optimum_legacy.auxiliary(file)


def companions(file: InputFile, tree: Tree) -> list[PurePosixPath]:
    if optimum_legacy.is_results_csv(file):
        return optimum_legacy.companions(file)
    return [file.path.with_name("benchmark_config.json")]


def parse(file: InputFile, *, tree: Tree) -> list[ParsedRun]:
    if optimum_legacy.is_results_csv(file):
        return optimum_legacy.parse(file, tree=tree, name=NAME)
    data = load(file)
    if isinstance(data, dict) and "report" in data and "config" in data:
        report, config, config_name = data["report"], data["config"], file.name
    elif _is_report(data):
        report, config, config_name = data, None, ""
        sibling = tree.open(file.path.with_name("benchmark_config.json"))
        if sibling is not None:
            config, config_name = load(sibling), sibling.name
    else:
        raise ParseError(
            file.display, "neither {config, report} nor a report of targets (forward, decode...)"
        )
    if not _is_report(report):
        raise ParseError(
            file.display, "report: expected targets with latency/throughput/memory/energy", key="report"
        )
    run = ParsedRun(source_format=NAME, source_file=file.display)
    if isinstance(config, dict):
        _apply_config(run, config, config_name, prefix="config." if config_name == file.name else "")
    else:
        run.warnings.append("no benchmark_config.json: model, hardware and precision from context")
    prefix = "report." if "report" in data else ""
    peak: dict[str, tuple[float, str]] = {}
    for target, entry in report.items():
        _apply_target(run, file, target, entry, f"{prefix}{target}", peak)
    for name, (value, source) in peak.items():
        run.add_metric(name, value, source=source, raw_value=value / 1e6, raw_unit="MB")
    if not run.metrics:
        raise ParseError(file.display, "the report holds no measurement (every tracker was disabled)")
    return [run]


def _apply_target(
    run: ParsedRun,
    file: InputFile,
    target: str,
    entry: dict[str, Any],
    where: str,
    peak: dict[str, tuple[float, str]],
) -> None:
    def src(key: str) -> str:
        return f"file:{file.name}:{where}.{key}"

    def num(obj: dict[str, Any], key: str, path: str) -> float | None:
        try:
            return to_float(obj.get(key))
        except UnitError as exc:
            raise ParseError(file.display, str(exc), key=f"{where}.{path}") from exc

    latency = entry.get("latency")
    if isinstance(latency, dict):
        unit = str(latency.get("unit") or "s")
        if unit != "s":
            raise ParseError(
                file.display, f"latency unit {unit!r}, expected 's'", key=f"{where}.latency.unit"
            )
        values = latency.get("values") or []
        if not isinstance(values, list):
            raise ParseError(file.display, "latency.values should be a list", key=f"{where}.latency.values")
        samples = [v * 1000.0 for v in (to_float(x) for x in values) if v is not None]
        if target == "load":
            run.add_metric(
                "load_time_ms",
                _ms(num(latency, "mean", "latency.mean")),
                source=src("latency.mean"),
                raw_unit="s",
            )
        elif target == "overall":
            total = num(latency, "total", "latency.total")
            run.add_metric("wall_time_s", total, source=src("latency.total"), raw_value=total, raw_unit="s")
        else:
            family = _LATENCY_FAMILY.get(target, f"{target}_latency")
            for key, stat in _STATS.items():
                raw = num(latency, key, f"latency.{key}")
                metric = run.add_metric(
                    f"{family}_{stat}_ms",
                    _ms(raw),
                    source=src(f"latency.{key}"),
                    raw_value=raw,
                    raw_unit="s",
                    unit="ms",
                    direction="lower",
                )
                if metric is not None and stat == "mean":
                    metric.samples = samples
    throughput = entry.get("throughput")
    if isinstance(throughput, dict):
        unit = str(throughput.get("unit") or "")
        value = num(throughput, "value", "throughput.value")
        name = _THROUGHPUT.get((target, unit))
        if name is None:
            per = unit.split("/")[0] if "/" in unit else "samples"
            name, metric_unit = f"{target}_throughput_{per}_per_s", unit or "samples/s"
            run.add_metric(
                name,
                value,
                source=src("throughput.value"),
                raw_unit=unit,
                unit=metric_unit,
                direction="higher",
            )
        else:
            run.add_metric(name, value, source=src("throughput.value"), raw_value=value, raw_unit=unit)
    memory = entry.get("memory")
    if isinstance(memory, dict):
        if str(memory.get("unit") or "MB") != "MB":
            raise ParseError(
                file.display, f"memory unit {memory.get('unit')!r}, expected 'MB'", key=f"{where}.memory.unit"
            )
        for key, name in (
            ("max_process_vram", "memory_peak_bytes"),
            ("max_global_vram", "memory_peak_bytes"),
            ("max_allocated", "memory_allocated_peak_bytes"),
            ("max_reserved", "memory_reserved_peak_bytes"),
            ("max_ram", "memory_ram_peak_bytes"),
        ):
            value = num(memory, key, f"memory.{key}")
            if value is None:
                continue
            value *= 1e6
            # process VRAM is preferred to global VRAM (other processes' memory); the max over targets
            if name in peak and key == "max_global_vram" and "max_process_vram" in peak[name][1]:
                continue
            if name not in peak or value > peak[name][0]:
                peak[name] = (value, src(f"memory.{key}"))
    energy = entry.get("energy")
    if isinstance(energy, dict) and target not in {"load"}:
        unit = str(energy.get("unit") or "kWh")
        if unit != "kWh":
            raise ParseError(
                file.display, f"energy unit {unit!r}, expected 'kWh'", key=f"{where}.energy.unit"
            )
        total = num(energy, "total", "energy.total")
        if total is not None:
            name = "energy_j" if target in {"forward", "call", "generate", "train"} else f"{target}_energy_j"
            run.add_metric(
                name,
                kwh_to_j(total),
                source=src("energy.total"),
                raw_value=total,
                raw_unit="kWh",
                unit="J",
                direction="lower",
            )
    efficiency = entry.get("efficiency")
    if isinstance(efficiency, dict):
        value = num(efficiency, "value", "efficiency.value")
        unit = str(efficiency.get("unit") or "")
        # samples/kWh -> J per sample (whole requests); tokens/kWh -> J per output token (decode).
        # Prefill efficiency counts input tokens: kept in the context, not mixed with decode's.
        name = {
            "forward": "energy_per_inference_j",
            "call": "energy_per_inference_j",
            "decode": "energy_per_token_j",
        }.get(target)
        if value and name:
            run.add_metric(
                name, 3.6e6 / value, source=src("efficiency.value"), raw_value=value, raw_unit=unit
            )
        elif value:
            run.context[f"{target}_efficiency"] = {"value": value, "unit": unit}


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


def _apply_config(run: ParsedRun, config: dict[str, Any], name: str, *, prefix: str) -> None:
    def src(key: str) -> str:
        return f"file:{name}:{prefix}{key}"

    backend = json_object(config, "backend")
    scenario = json_object(config, "scenario")
    environment = json_object(config, "environment")
    run.put("model", str(backend.get("model") or ""), src("backend.model"))
    run.put("workload.framework", str(backend.get("name") or ""), src("backend.name"))
    run.put("workload.framework_version", str(backend.get("version") or ""), src("backend.version"))
    # "inference" and "energy_star" run fixed batches in the process, no server: Offline.
    run.put("workload.scenario", _SCENARIOS.get(str(scenario.get("name") or "")), src("scenario.name"))
    shapes = json_object(scenario, "input_shapes")
    try:
        run.put(
            "workload.batch_size", to_int(shapes.get("batch_size")), src("scenario.input_shapes.batch_size")
        )
        run.put(
            "workload.input_length",
            to_int(shapes.get("sequence_length")),
            src("scenario.input_shapes.sequence_length"),
        )
        run.put("workload.output_length", to_int(scenario.get("new_tokens")), src("scenario.new_tokens"))
    except UnitError as exc:
        raise ParseError(name, str(exc), key=f"{prefix}scenario") from exc
    for key in ("torch_dtype", "dtype"):
        run.fill("variant.precision", normalise_precision(str(backend.get(key) or "")), src(f"backend.{key}"))
    scheme = backend.get("quantization_scheme") or backend.get("quantize")
    if scheme:
        run.put(
            "variant.quantization_method",
            str(scheme).upper() if str(scheme).lower() in {"gptq", "awq"} else str(scheme),
            src("backend.quantization_scheme"),
        )
        qconfig = json_object(backend, "quantization_config")
        bits = qconfig.get("bits") or qconfig.get("w_bit")
        if bits in (4, "4"):
            run.put("variant.precision", "int4", src("backend.quantization_config.bits"))
        elif bits in (8, "8"):
            run.put("variant.precision", "int8", src("backend.quantization_config.bits"))
    device = str(backend.get("device") or "")
    run.context["device"] = device
    cpu = str(environment.get("cpu") or "").strip()
    run.put("hardware.cpu", cpu, src("environment.cpu"))
    gpus = json_array(environment, "gpu")
    if device.startswith("cuda") or device.startswith("rocm") or device.startswith("xpu"):
        if gpus:
            run.put("hardware.accelerator", str(gpus[0]), src("environment.gpu"))
        ids = backend.get("device_ids")
        count = len(str(ids).split(",")) if ids not in (None, "") else to_int(environment.get("gpu_count"))
        run.put(
            "hardware.count",
            count,
            src("backend.device_ids" if ids not in (None, "") else "environment.gpu_count"),
        )
    elif device == "cpu":
        run.put("hardware.count", 0, src("backend.device"))
        if gpus:
            run.context["host_gpus"] = gpus
    for key in ("optimum_benchmark_version", "transformers_version", "platform"):
        if environment.get(key):
            run.context[key] = environment[key]
    if config.get("name"):
        run.context["benchmark_name"] = config["name"]
