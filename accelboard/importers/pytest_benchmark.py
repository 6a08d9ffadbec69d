"""pytest-benchmark JSON (``--benchmark-json``, ``--benchmark-autosave``): one run per benchmark.

Times are seconds per call (-> ms); ``ops`` is calls per second; ``stats.data`` (when saved) holds
the rounds, kept as samples of the mean. Model, precision and batch size exist only if the user
put them in ``params``/``extra_info`` (read as free-form metadata: ``model``, ``precision``,
``batch_size``, ``gpu``/``accelerator``); otherwise the benchmark's name is the model. Hardware is
the CPU from ``machine_info``. Old 2.x files lack ``ops`` and ``total``.
"""

from __future__ import annotations

from typing import Any

from .base import ParsedRun, ParseError
from .inputs import InputFile, Tree
from .jsonfile import head_text, json_object, load
from .naming import normalise_precision
from .units import UnitError, to_float, to_int

NAME = "pytest-benchmark"

_STATS = {
    "min": "min",
    "max": "max",
    "mean": "mean",
    "median": "p50",
    "stddev": "std",
    "q1": "p25",
    "q3": "p75",
}


def sniff(file: InputFile) -> bool:
    head = head_text(file).lstrip()
    return head.startswith("{") and '"benchmarks"' in head and ('"machine_info"' in head or '"stats"' in head)


def parse(file: InputFile, *, tree: Tree) -> list[ParsedRun]:
    data = load(file)
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ParseError(file.display, "expected an object with a 'benchmarks' list", key="benchmarks")
    machine = json_object(data, "machine_info")
    commit = json_object(data, "commit_info")
    cpu = json_object(machine, "cpu")
    runs = []
    for index, bench in enumerate(data["benchmarks"]):
        where = f"benchmarks[{index}]"
        if not isinstance(bench, dict) or not isinstance(bench.get("stats"), dict):
            raise ParseError(file.display, "expected an object with 'stats'", key=where)
        run = ParsedRun(source_format=NAME, source_file=file.display)

        def src(key: str, where: str = where) -> str:
            return f"file:{file.name}:{where}.{key}"

        meta: dict[str, Any] = {}
        meta_sources: dict[str, str] = {}
        for key in ("params", "extra_info"):
            if isinstance(bench.get(key), dict):
                meta.update(bench[key])
                meta_sources.update({name: src(f"{key}.{name}") for name in bench[key]})

        def origin(name: str, meta_sources: dict[str, str] = meta_sources, src=src) -> str:
            return meta_sources.get(name, src(name))

        run.put(
            "model",
            str(meta.get("model") or bench.get("fullname") or bench.get("name") or ""),
            origin("model") if meta.get("model") else src("fullname"),
        )
        run.put(
            "variant.precision",
            normalise_precision(str(meta.get("precision") or meta.get("dtype") or "")),
            origin("precision"),
        )
        for key in ("batch_size", "concurrency", "input_length", "output_length"):
            try:
                run.put(f"workload.{key}", to_int(meta.get(key)), origin(key))
            except UnitError as exc:
                raise ParseError(file.display, str(exc), key=f"{where}.extra_info.{key}") from exc
        for key in ("gpu", "accelerator"):
            if meta.get(key):
                run.put("hardware.accelerator", str(meta[key]), origin(key))
        # py-cpuinfo >= 5 writes brand_raw, older versions brand; "processor" is platform's guess.
        for key, brand in (
            ("machine_info.cpu.brand_raw", cpu.get("brand_raw")),
            ("machine_info.cpu.brand", cpu.get("brand")),
            ("machine_info.processor", machine.get("processor")),
        ):
            if brand:
                run.put("hardware.cpu", str(brand), f"file:{file.name}:{key}")
                break
        run.put("hardware.host", str(machine.get("node") or ""), f"file:{file.name}:machine_info.node")
        run.put("workload.framework", "pytest-benchmark", f"file:{file.name}:format")
        run.put("workload.framework_version", str(data.get("version") or ""), f"file:{file.name}:version")
        run.put("started_at", str(data.get("datetime") or "") or None, f"file:{file.name}:datetime")
        stats = bench["stats"]
        samples = _samples(stats.get("data"), run)
        for key, stat in _STATS.items():
            try:
                value = to_float(stats.get(key))
            except UnitError as exc:
                raise ParseError(file.display, str(exc), key=f"{where}.stats.{key}") from exc
            metric = run.add_metric(
                f"latency_{stat}_ms",
                None if value is None else value * 1000.0,
                source=src(f"stats.{key}"),
                raw_value=stats.get(key),
                raw_unit="s",
            )
            if metric is not None and stat == "mean":
                metric.samples = samples
        try:
            run.add_metric(
                "throughput_ops_per_s",
                to_float(stats.get("ops")),
                source=src("stats.ops"),
                raw_value=stats.get("ops"),
                raw_unit="ops/s",
            )
        except UnitError as exc:
            raise ParseError(file.display, str(exc), key=f"{where}.stats.ops") from exc
        if run.metric("latency_mean_ms") is None:
            raise ParseError(file.display, "stats without a mean", key=f"{where}.stats.mean")
        for key in ("rounds", "iterations"):
            if stats.get(key) is not None:
                run.workload.options[key] = stats[key]
        run.context.update(
            {k: v for k, v in meta.items() if k not in {"model", "precision", "dtype", "gpu", "accelerator"}}
        )
        run.context["benchmark"] = bench.get("fullname") or bench.get("name")
        if bench.get("group"):
            run.context["group"] = bench["group"]
        if commit.get("id"):
            run.context["git_commit"] = commit["id"]
            run.context["git_dirty"] = bool(commit.get("dirty"))
        if commit.get("branch"):
            run.context["branch"] = commit["branch"]
        runs.append(run)
    return runs


def _samples(data: Any, run: ParsedRun) -> list[float]:
    if not isinstance(data, list):
        return []
    numbers = [v for v in data if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) != len(data):
        run.warnings.append(f"stats.data: ignored {len(data) - len(numbers)} non-numeric entries")
    return [v * 1000.0 for v in numbers]
