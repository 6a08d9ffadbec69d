"""MLPerf Inference (LoadGen) results: summary and detail logs, with their sibling files.

1. The run's performance log is ``mlperf_log_detail.txt`` (``:::MLLOG`` JSON lines; preferred) or
   ``mlperf_log_summary.txt`` (``label : value`` lines whose spacing and capitalisation vary by
   round, so labels are matched case-insensitively with a tolerant regex). When both sit in the
   same folder both are read: the detail's values win, the summary fills gaps, and a disagreement
   is a warning.
2. System, model and scenario come from the path ``results/<system>/<model>/<scenario>/...``;
   hardware from ``systems/<system>.json``; precision from
   ``measurements/<system>/<model>/<scenario>/*.json``; accuracy from ``accuracy/accuracy.txt``
   (no common format: the last dict-like or ``key=value`` line before ``hash=``).
3. Power (MLPerf Power): mean Watts of ``spl.txt`` samples between the detail log's
   ``power_begin`` and ``power_end``; efficiency = samples/s / W for Offline and Server, energy
   per query = W / QPS for the stream scenarios.
Latencies are ns in the files and ms here. Compliance audits and the power ranging pass are not
results and are ignored.
"""

from __future__ import annotations

import ast
import json
import re
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from .base import AccuracyResult, ParsedRun, ParseError
from .inputs import InputFile, Tree
from .mllog import Event, has_marker, read_events
from .mlperf_common import ResultPath, apply_system, load_json, result_path
from .naming import hints_from_model_name, normalise_precision
from .units import UnitError, ns_to_ms, percentile_token, to_float

NAME = "mlperf-inference"

SCENARIOS = {
    "offline": "offline",
    "server": "server",
    "singlestream": "single-stream",
    "multistream": "multi-stream",
    "interactive": "interactive",
}
_STREAM = {"single-stream", "multi-stream"}
_NOT_RESULTS = {"compliance", "ranging", "audit"}
_SUMMARY_HEADER = re.compile(r"MLPerf Results Summary", re.IGNORECASE)
_SUMMARY_KEYS = re.compile(r"^\s*SUT name\s*:.*$", re.IGNORECASE | re.MULTILINE)
_LABEL = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")
_HASH = re.compile(r"^hash=[0-9a-fA-F]+\s*$")
_NON_METRIC_ACCURACY = {"gen_len", "gen_num", "gen_tok_len", "tokens_per_sample", "good", "total", "samples"}


def _kind(file: InputFile) -> str | None:
    if any(part.lower() in _NOT_RESULTS or part.upper().startswith("TEST0") for part in file.path.parts[:-1]):
        return None
    head = file.head(8192)
    if has_marker(file):
        text = head.decode("utf-8", "replace")
        if "mlperf::logging" in text or '"loadgen_version"' in text:
            return "detail"
        return None
    text = head.decode("utf-8", "replace")
    if _SUMMARY_HEADER.search(text) or (_SUMMARY_KEYS.search(text) and re.search(r"Scenario\s*:", text)):
        return "summary"
    if file.name == "accuracy.txt" or any(_HASH.match(line) for line in file.text().splitlines()[-3:]):
        if file.name == "accuracy.txt" or file.path.parent.name == "accuracy":
            return "accuracy"
    return None


def sniff(file: InputFile) -> bool:
    return _kind(file) is not None


def companions(file: InputFile, tree: Tree) -> list[PurePosixPath]:
    """The files this run reads besides ``file``: the other log, and the accuracy folder."""
    folder = file.path.parent
    found = [folder / "mlperf_log_summary.txt", folder / "mlperf_log_detail.txt", folder / "spl.txt"]
    scenario_dir = _scenario_dir(file.path)
    if scenario_dir is not None and _kind(file) != "accuracy":
        accuracy_dir = scenario_dir / "accuracy"
        found += [p for p in tree.files() if accuracy_dir in p.parents]
    return [p for p in found if p != file.path]


def _scenario_dir(path: PurePosixPath) -> PurePosixPath | None:
    for parent in path.parents:
        if parent.name.lower() in SCENARIOS:
            return parent
    return None


def parse(file: InputFile, *, tree: Tree) -> list[ParsedRun]:
    kind = _kind(file) or _guess_kind(file)
    run = ParsedRun(source_format=NAME, source_file=file.display)
    info = result_path(file.path)
    if info is not None:
        _apply_path(run, info)
    scenario_dir = _scenario_dir(file.path)
    if kind == "accuracy":
        _apply_accuracy(run, file)
        run.context["mode"] = "AccuracyOnly"
    else:
        folder = file.path.parent
        detail = file if kind == "detail" else tree.open(folder / "mlperf_log_detail.txt")
        summary = file if kind == "summary" else tree.open(folder / "mlperf_log_summary.txt")
        events: list[Event] = []
        if detail is not None:
            events = read_events(detail)
            _apply_detail(run, detail, events)
        if summary is not None:
            _apply_summary(run, summary)
        if scenario_dir is not None:
            accuracy = tree.open(scenario_dir / "accuracy" / "accuracy.txt")
            if accuracy is not None:
                _apply_accuracy(run, accuracy)
        if run.context.get("mode") == "AccuracyOnly":
            if not run.accuracy:
                raise ParseError(file.display, "an AccuracyOnly log without its accuracy.txt holds no result")
        elif not any(m.name.startswith(("throughput_", "latency_")) for m in run.metrics):
            lines = file.text().count("\n") + 1
            raise ParseError(
                file.display,
                "no result found (no samples per second or latency line): the log looks truncated",
                line=lines,
            )
        spl = tree.open(folder / "spl.txt")
        if spl is not None:
            _apply_power(run, spl)
    if info is not None:
        apply_system(run, tree, info)
        _apply_measurements(run, tree, info)
    return [run]


def _guess_kind(file: InputFile) -> str:
    # --format mlperf-inference forced on a file that sniffing did not place
    if has_marker(file):
        return "detail"
    return "accuracy" if file.name == "accuracy.txt" else "summary"


def _apply_path(run: ParsedRun, info: ResultPath) -> None:
    run.put("model", info.model, "path")
    for part in info.rest:
        if part.lower() in SCENARIOS:
            run.put("workload.scenario", SCENARIOS[part.lower()], "path")
            break
    run.context.update({"mlperf_system": info.system, "mlperf_division": info.division})
    run.context["submitter"] = info.submitter
    # The accuracy target is part of the model folder's name: llama2-70b-99 vs llama2-70b-99.9.
    if target := re.search(r"-(99(?:\.9)?)$", info.model):
        run.context["accuracy_target"] = f"{target.group(1)}% of reference"


# -- detail log ---------------------------------------------------------------------------------
_DETAIL_THROUGHPUT = {
    "result_samples_per_second": "throughput_samples_per_s",
    "result_completed_samples_per_sec": "throughput_samples_per_s",
    "result_tokens_per_second": "throughput_tokens_per_s",
    "result_completed_tokens_per_second": "throughput_tokens_per_s",
    "result_token_throughput": "throughput_tokens_per_s",
}
_DETAIL_LATENCY = [
    (re.compile(r"^result_(min|max|mean)_latency_ns$"), "latency"),
    (re.compile(r"^result_(\d+(?:\.\d+)?)_percentile_latency_ns$"), "latency"),
    (re.compile(r"^result_first_token_(min|max|mean)_latency_ns$"), "ttft"),
    (re.compile(r"^result_first_token_(\d+(?:\.\d+)?)_percentile_latency_ns$"), "ttft"),
    (
        re.compile(r"^result_(?:time_per_output_token|time_to_output_token)_(min|max|mean)(?:_latency)?_ns$"),
        "tpot",
    ),
    (
        re.compile(
            r"^result_(?:time_per_output_token|time_to_output_token)_(\d+(?:\.\d+)?)_percentile(?:_latency)?_ns$"
        ),
        "tpot",
    ),
]


def _stat(token: str) -> str:
    return token if token in {"min", "max", "mean"} else percentile_token(token)


def _add_latency(
    run: ParsedRun, family: str, stat: str, raw: Any, source: str, where: str, line: int
) -> None:
    try:
        value = to_float(raw)
    except UnitError as exc:
        raise ParseError(where, str(exc), line=line) from exc
    run.add_metric(
        f"{family}_{stat}_ms",
        ns_to_ms(value),
        source=source,
        raw_value=raw,
        raw_unit="ns",
        unit="ms",
        direction="lower",
    )


def _apply_detail(run: ParsedRun, file: InputFile, events: list[Event]) -> None:
    scheduled: Event | None = None
    for event in events:
        source = f"file:{file.name}:{event.key}"
        key = event.key
        if event.metadata.get("is_error"):
            run.warnings.append(f"{file.name}:{event.line}: LoadGen error {key}: {event.value}")
        if key in _DETAIL_THROUGHPUT:
            try:
                value = to_float(event.value)
            except UnitError as exc:
                raise ParseError(file.display, str(exc), line=event.line, key=key) from exc
            run.add_metric(
                _DETAIL_THROUGHPUT[key], value, source=source, raw_value=event.value, raw_unit="1/s"
            )
        elif key == "result_scheduled_samples_per_sec":
            scheduled = event
        elif key == "effective_scenario":
            scenario = SCENARIOS.get(str(event.value).lower().replace(" ", ""))
            if scenario is None:
                raise ParseError(file.display, f"unknown scenario {event.value!r}", line=event.line, key=key)
            run.put("workload.scenario", scenario, source)
        elif key == "effective_test_mode":
            run.context["mode"] = event.value
        elif key == "test_datetime":
            run.put("started_at", str(event.value), source)
        elif key == "result_validity":
            run.put("valid", str(event.value).upper() == "VALID", source)
            run.context["result_validity"] = event.value
        elif key in {
            "loadgen_version",
            "sut_name",
            "effective_samples_per_query",
            "effective_target_qps",
            "effective_target_latency_ns",
            "power_begin",
            "power_end",
            "result_qps_with_loadgen_overhead",
            "result_min_duration_met",
            "result_min_queries_met",
            "result_perf_constraints_met",
            "early_stopping_met",
        }:
            run.context[key] = event.value
        else:
            for pattern, family in _DETAIL_LATENCY:
                match = pattern.match(key)
                if match:
                    _add_latency(
                        run, family, _stat(match.group(1)), event.value, source, file.display, event.line
                    )
                    break
    if scheduled is not None:
        run.context["result_scheduled_samples_per_sec"] = scheduled.value
        if run.metric("throughput_samples_per_s") is None:  # rounds before completed-samples existed
            run.add_metric(
                "throughput_samples_per_s",
                to_float(scheduled.value),
                source=f"file:{file.name}:result_scheduled_samples_per_sec",
                raw_value=scheduled.value,
                raw_unit="1/s",
            )


# -- summary log --------------------------------------------------------------------------------
_SUMMARY_THROUGHPUT = {
    "samples per second": "throughput_samples_per_s",
    "completed samples per second": "throughput_samples_per_s",
    "tokens per second": "throughput_tokens_per_s",
    "completed tokens per second": "throughput_tokens_per_s",
}
_SUMMARY_LATENCY = [
    (re.compile(r"^(min|max|mean) latency \(ns\)$"), "latency"),
    (re.compile(r"^(\d+(?:\.\d+)?)(?:th)? percentile latency \(ns\)$"), "latency"),
    (re.compile(r"^(min|max|mean) first token latency \(ns\)$"), "ttft"),
    (
        re.compile(
            r"^(\d+(?:\.\d+)?)(?:th)? (?:first token percentile|percentile first token) latency \(ns\)$"
        ),
        "ttft",
    ),
    (re.compile(r"^(min|max|mean) time to output token \(ns\)$"), "tpot"),
    (re.compile(r"^(\d+(?:\.\d+)?)(?:th)? percentile time to output token \(ns\)$"), "tpot"),
]


def _apply_summary(run: ParsedRun, file: InputFile) -> None:
    section = "results"
    scheduled: tuple[str, int] | None = None
    params: dict[str, str] = {}
    for number, line in enumerate(file.text().splitlines(), start=1):
        stripped = line.strip()
        if stripped.lower().startswith("test parameters used"):
            section = "parameters"
            continue
        if stripped.lower().startswith("additional stats"):
            section = "stats"
            continue
        match = _LABEL.match(line)
        if not match:
            continue
        label = re.sub(r"\s+", " ", match.group(1)).strip().lower()
        value = match.group(2)
        source = f"file:{file.name}:{number}"
        if section == "parameters":
            params[label] = value
            continue
        if label in _SUMMARY_THROUGHPUT:
            run.add_metric(
                _SUMMARY_THROUGHPUT[label],
                _number(value, file, number),
                source=source,
                raw_value=value,
                raw_unit="1/s",
            )
        elif label == "scheduled samples per second":
            scheduled = (value, number)
        elif label == "scenario":
            scenario = SCENARIOS.get(value.lower().replace(" ", ""))
            if scenario is None:
                raise ParseError(file.display, f"unknown scenario {value!r}", line=number)
            run.fill("workload.scenario", scenario, source)
        elif label == "mode":
            run.context.setdefault("mode", value)
        elif label == "sut name":
            run.context.setdefault("sut_name", value)
        elif label == "result is":
            if value.upper() not in {"VALID", "INVALID"}:
                raise ParseError(
                    file.display, f"'Result is' should be VALID or INVALID, got {value!r}", line=number
                )
            if "valid" not in run.field_sources:
                run.put("valid", value.upper() == "VALID", source)
        elif label in {"qps w/ loadgen overhead", "qps w/o loadgen overhead"}:
            key = (
                "result_qps_with_loadgen_overhead"
                if "w/ " in label
                else "result_qps_without_loadgen_overhead"
            )
            run.context.setdefault(key, _number(value, file, number))
        else:
            for pattern, family in _SUMMARY_LATENCY:
                latency = pattern.match(label)
                if latency:
                    _number(value, file, number)  # a missing or broken value is the line's fault
                    _add_latency(run, family, _stat(latency.group(1)), value, source, file.display, number)
                    break
    if scheduled is not None:
        value, number = scheduled
        run.context.setdefault("result_scheduled_samples_per_sec", _number(value, file, number))
        if run.metric("throughput_samples_per_s") is None:  # older Server summaries
            run.add_metric(
                "throughput_samples_per_s",
                _number(value, file, number),
                source=f"file:{file.name}:{number}",
                raw_value=value,
                raw_unit="1/s",
            )
    if params:
        run.context.setdefault("test_parameters", params)


def _number(value: str, file: InputFile, line: int) -> float:
    try:
        number = to_float(value)
    except UnitError as exc:
        raise ParseError(file.display, str(exc), line=line) from exc
    if number is None:
        raise ParseError(file.display, "value missing", line=line)
    return number


# -- accuracy.txt -------------------------------------------------------------------------------
def read_accuracy(file: InputFile) -> dict[str, float]:
    """The checker's figures: the last dict-like or ``key=value`` line before ``hash=``."""
    lines = file.text().splitlines()
    end = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("hash=")), len(lines))
    for index in range(end - 1, -1, -1):
        text = lines[index].strip()
        if not text:
            continue
        values = _dict_line(text)
        if values:
            return values
    raise ParseError(
        file.display, "no accuracy values (a dict or key=value line) before 'hash='", line=end or 1
    )


def _dict_line(text: str) -> dict[str, float]:
    obj: Any = None
    if text.startswith("{") and text.endswith("}"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            try:
                obj = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                obj = None
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[str(key)] = float(value)
        return out
    pairs = re.findall(r"([A-Za-z_][\w.\-]*)\s*=\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*%?", text)
    return {key: float(value) for key, value in pairs}


def _apply_accuracy(run: ParsedRun, file: InputFile) -> None:
    values = read_accuracy(file)
    task = run.model or "mlperf"
    target = str(run.context.get("accuracy_target", ""))
    for key, value in values.items():
        source = f"file:{file.name}:{key}"
        if key in _NON_METRIC_ACCURACY:
            run.context[f"accuracy_{key}"] = value
            continue
        run.accuracy.append(AccuracyResult(task=task, metric=key, value=value, target=target, source=source))
        run.add_metric(f"accuracy:{task}:{key}", value, source=source, raw_value=value, raw_unit="score")


# -- power ---------------------------------------------------------------------------------------
_POWER_TIME = "%m-%d-%Y %H:%M:%S.%f"


def _apply_power(run: ParsedRun, file: InputFile) -> None:
    times: list[datetime] = []
    watts: list[float] = []
    for number, line in enumerate(file.text().splitlines(), start=1):
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        fields = dict(zip(cells[0::2], cells[1::2], strict=False))
        try:
            times.append(datetime.strptime(fields["Time"], _POWER_TIME))
            value = to_float(fields["Watts"])
        except (KeyError, ValueError, UnitError) as exc:
            raise ParseError(
                file.display, f"expected 'Time,<MM-DD-YYYY hh:mm:ss.fff>,Watts,<W>,...' ({exc})", line=number
            ) from exc
        watts.append(value if value is not None else float("nan"))
    begin, end = run.context.get("power_begin"), run.context.get("power_end")
    window = list(zip(times, watts, strict=True))
    if begin and end:
        start, stop = datetime.strptime(str(begin), _POWER_TIME), datetime.strptime(str(end), _POWER_TIME)
        window = [(t, w) for t, w in window if start <= t <= stop and w == w]
        duration_s = (stop - start).total_seconds()
    else:
        run.warnings.append(f"{file.name}: no power_begin/power_end in a detail log: averaged every sample")
        window = [(t, w) for t, w in window if w == w]
        duration_s = (times[-1] - times[0]).total_seconds() if len(times) > 1 else 0.0
    if not window:
        run.warnings.append(f"{file.name}: no power sample inside the run's window")
        return
    values = [w for _, w in window]
    mean_w = sum(values) / len(values)
    source = f"file:{file.name}:Watts[{len(values)} samples]"
    run.add_metric("power_avg_w", mean_w, source=source, samples=values, raw_unit="W")
    run.add_metric("power_max_w", max(values), source=source, raw_unit="W")
    if duration_s > 0:
        run.add_metric("energy_j", mean_w * duration_s, source="derived:power_avg_w*(power_end-power_begin)")
    samples = run.metric("throughput_samples_per_s")
    tokens = run.metric("throughput_tokens_per_s")
    if run.workload.scenario in _STREAM:
        qps = to_float(run.context.get("result_qps_with_loadgen_overhead"))
        if qps:
            run.add_metric(
                "energy_per_inference_j", mean_w / qps, source="derived:power_avg_w/qps_with_loadgen_overhead"
            )
    elif samples is not None and samples.value > 0:
        run.add_metric(
            "samples_per_j", samples.value / mean_w, source="derived:throughput_samples_per_s/power_avg_w"
        )
        run.add_metric(
            "energy_per_inference_j",
            mean_w / samples.value,
            source="derived:power_avg_w/throughput_samples_per_s",
        )
    if tokens is not None and tokens.value > 0:
        run.add_metric(
            "energy_per_token_j", mean_w / tokens.value, source="derived:power_avg_w/throughput_tokens_per_s"
        )


# -- measurements (precision) -------------------------------------------------------------------
def _apply_measurements(run: ParsedRun, tree: Tree, info: ResultPath) -> None:
    model_dir = info.root / "measurements" / info.system / info.model
    scenario = run.workload.scenario
    folders = [p for p in tree.listdir(model_dir) if SCENARIOS.get(p.name.lower()) == scenario]
    for folder in folders:
        for path in tree.listdir(folder):
            if path.suffix != ".json":
                continue
            loaded = load_json(tree, path)
            if loaded is None or "weight_data_types" not in loaded[0]:
                continue
            measurement = loaded[0]
            name = f"measurements/{info.system}/{info.model}/{folder.name}/{path.name}"
            weights = str(measurement.get("weight_data_types") or "")
            run.fill("variant.precision", normalise_precision(weights), f"file:{name}:weight_data_types")
            starting = str(measurement.get("starting_weights_filename") or "")
            precision, method = hints_from_model_name(starting)
            run.fill("variant.precision", precision, f"file:{name}:starting_weights_filename")
            run.fill("variant.quantization_method", method, f"file:{name}:starting_weights_filename")
            for key in (
                "weight_data_types",
                "input_data_types",
                "weight_transformations",
                "starting_weights_filename",
            ):
                if measurement.get(key):
                    run.context[key] = measurement[key]
            return
