"""MLPerf Inference (LoadGen) results: summary and detail logs, with their sibling files.

1. The run's performance log is ``mlperf_log_detail.txt`` (``:::MLLOG`` JSON lines; preferred) or
   ``mlperf_log_summary.txt`` (``label : value`` lines whose spacing and capitalisation vary by
   round, so labels are matched case-insensitively with a tolerant regex). When both sit in the
   same folder both are read: the detail's values win, the summary fills gaps, and a disagreement
   is a warning. Each LoadGen key is read for what it means (``_DETAIL_THROUGHPUT``): the official
   tokens/s is ``result_tokens_per_second`` (Offline) or ``result_completed_tokens_per_second``
   (Server), never ``result_token_throughput``; SingleStream and MultiStream results are the
   early-stopping estimates (``latency_early_stopping_p90_ms``, ``..._p99_ms``).
2. One scenario folder is one run: the performance run claims its ``accuracy/`` folder (the
   accuracy-mode logs and ``accuracy.txt``), so an accuracy is never counted twice (``priority``).
3. System, model and scenario come from the path ``results/<system>/<model>/<scenario>/...``;
   hardware from ``systems/<system>.json``; precision from
   ``measurements/<system>/<model>/<scenario>/*.json``; accuracy from ``accuracy/accuracy.txt``
   (``mlperf_accuracy``). Loose files given together (no such path) are one run too: the system
   and measurement descriptions and ``accuracy.txt`` given beside the logs are used (the model is
   then not known: the uploader states it). The scenario the logs state wins over the folder's;
   accuracy metrics are ``accuracy:mlperf:<key>`` in both shapes (never the folder's model name).
4. Power (MLPerf Power, ``mlperf_power``): mean Watts of ``spl.txt`` samples inside the run.
Latencies are ns in the files and ms here. Compliance audits and the power ranging pass are not
results and are ignored.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from .base import AccuracyResult, ParsedRun, ParseError
from .inputs import InputFile, Tree
from .mllog import Event, has_marker, read_events
from .mlperf_accuracy import read_accuracy
from .mlperf_common import ResultPath, apply_system, describes, flat_siblings, load_json, result_path
from .mlperf_power import apply_power
from .naming import hints_from_model_name, normalise_precision
from .units import UnitError, ns_to_ms, percentile_token, to_float

NAME = "mlperf-inference"
# The task of every MLPerf Inference accuracy figure: ``accuracy:mlperf:<checker key>``.
ACCURACY_TASK = "mlperf"

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


def auxiliary(file: InputFile) -> str | None:
    """What a file that completes a run (but holds no result) is, for a clear message when it comes
    alone: the system and measurement descriptions."""
    kind = describes(file.head())
    if kind == "system":
        return "an MLPerf system description (systems/<system>.json)"
    if kind == "measurement":
        return "an MLPerf measurement description (measurements/.../<system>_<Scenario>.json)"
    return None


def priority(file: InputFile) -> int:
    """Parse order inside a submission: the performance run first, so that it claims the accuracy
    folder (its accuracy-mode logs and accuracy.txt) instead of each becoming a run of its own;
    detail logs before summaries, accuracy.txt last."""
    kind = _kind(file) or _guess_kind(file)
    in_accuracy_dir = any(part.lower() == "accuracy" for part in file.path.parts[:-1])
    return (3 if in_accuracy_dir else 0) + {"detail": 0, "summary": 1}.get(kind, 2)


def companions(file: InputFile, tree: Tree) -> list[PurePosixPath]:
    """The files this run reads besides ``file``: the other log, and the accuracy folder (or, for
    loose files, the accuracy.txt given beside the logs)."""
    folder = file.path.parent
    found = [folder / "mlperf_log_summary.txt", folder / "mlperf_log_detail.txt", folder / "spl.txt"]
    scenario_dir = _scenario_dir(file.path)
    if _kind(file) != "accuracy":
        if scenario_dir is not None:
            accuracy_dir = scenario_dir / "accuracy"
            found += [p for p in tree.files() if accuracy_dir in p.parents]
        else:
            found.append(folder / "accuracy.txt")
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
    folder = file.path.parent
    if kind == "accuracy":
        _apply_accuracy(run, file)
        run.context["mode"] = "AccuracyOnly"
    else:
        detail = file if kind == "detail" else tree.open(folder / "mlperf_log_detail.txt")
        summary = file if kind == "summary" else tree.open(folder / "mlperf_log_summary.txt")
        events: list[Event] = []
        if detail is not None:
            events = read_events(detail)
            _apply_detail(run, detail, events)
        if summary is not None:
            _apply_summary(run, summary)
        accuracy_path = (scenario_dir / "accuracy" if scenario_dir is not None else folder) / "accuracy.txt"
        accuracy = tree.open(accuracy_path)
        if accuracy is not None:
            _apply_accuracy(run, accuracy)
        if run.context.get("mode") == "AccuracyOnly":
            if not run.accuracy:
                raise ParseError(file.display, "an AccuracyOnly log without its accuracy.txt holds no result")
            _keep_accuracy_only(run)
        elif not any(m.name.startswith(("throughput_", "latency_")) for m in run.metrics):
            lines = file.text().count("\n") + 1
            raise ParseError(
                file.display,
                "no result found (no samples per second or latency line): the log looks truncated",
                line=lines,
            )
        spl = tree.open(folder / "spl.txt")
        if spl is not None:
            apply_power(run, spl)
    if info is not None:
        apply_system(run, tree, info)
        _apply_measurements(run, tree, info)
    else:
        # loose files: the system and measurement descriptions given with the logs
        apply_system(run, tree, None, folder=folder)
        _apply_flat_measurement(run, tree, folder)
    return [run]


def _keep_accuracy_only(run: ParsedRun) -> None:
    """An accuracy-mode pass is not a performance result: its throughput and latencies go, and
    LoadGen's INVALID (an accuracy pass never meets the duration rules) does not mark the run."""
    dropped = [m.name for m in run.metrics if not m.name.startswith("accuracy:")]
    run.metrics = [m for m in run.metrics if m.name.startswith("accuracy:")]
    run.warnings = [w for w in run.warnings if not any(w.startswith(f"{name}:") for name in dropped)]
    if dropped:
        run.context["accuracy_mode_figures_ignored"] = dropped
    run.valid = True
    run.field_sources["valid"] = "derived:accuracy mode"


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
# What each LoadGen key means (loadgen/results.cc; the summary prints the same figures):
# - result_samples_per_second (Offline), result_completed_samples_per_sec (Server, v4.1+ official),
#   result_scheduled_samples_per_sec (Server before v4.1, read below as a fallback).
# - result_tokens_per_second (Offline) and result_completed_tokens_per_second (Server/Interactive,
#   v5.0+): token_count / run time, the official tokens/s of the LLM benchmarks.
# - result_token_throughput: token_count / (mean sample latency in **ns** x sample count), the
#   "without LoadGen overhead" figure with a unit slip (tokens/ns, ~1e-8): never a throughput.
# - result_token_throughput_with_loadgen_overhead: token_count / time the last query was *issued*.
# - result_inferred_*tokens_per_second: samples x a fixed tokens-per-sample factor, for models whose
#   SUT reports no tokens: used only when no measured figure exists.
_DETAIL_THROUGHPUT = {
    "result_samples_per_second": "throughput_samples_per_s",
    "result_completed_samples_per_sec": "throughput_samples_per_s",
    "result_tokens_per_second": "throughput_tokens_per_s",
    "result_completed_tokens_per_second": "throughput_tokens_per_s",
}
_DETAIL_INFERRED = {"result_inferred_tokens_per_second", "result_inferred_completed_tokens_per_second"}
_DETAIL_CONTEXT = {
    "loadgen_version",
    "sut_name",
    "effective_samples_per_query",
    "effective_target_qps",
    "effective_target_latency_ns",
    "effective_target_latency_percentile",
    "power_begin",
    "power_end",
    "result_qps_with_loadgen_overhead",
    "result_qps_without_loadgen_overhead",
    "result_min_duration_met",
    "result_min_queries_met",
    "result_perf_constraints_met",
    "early_stopping_met",
    "result_token_throughput",
    "result_token_throughput_with_loadgen_overhead",
    "early_stopping_latency_ss",
    "early_stopping_latency_ms",
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
    inferred: Event | None = None
    for event in events:
        source = f"file:{file.name}:{event.key}"
        key = event.key
        if event.metadata.get("is_error"):
            run.warnings.append(f"{file.name}:{event.line}: LoadGen error {key}: {event.value}")
        if key in _DETAIL_THROUGHPUT:
            run.add_metric(
                _DETAIL_THROUGHPUT[key],
                _event_number(event, file),
                source=source,
                raw_value=event.value,
                raw_unit="1/s",
            )
        elif key in _DETAIL_INFERRED:
            inferred = event
        elif key == "result_scheduled_samples_per_sec":
            scheduled = event
        elif key == "effective_scenario":
            scenario = SCENARIOS.get(str(event.value).lower().replace(" ", ""))
            if scenario is None:
                raise ParseError(file.display, f"unknown scenario {event.value!r}", line=event.line, key=key)
            if run.workload.scenario and run.workload.scenario != scenario:
                run.warnings.append(
                    f"workload.scenario: the folder says {run.workload.scenario!r}, {file.name} says "
                    f"{scenario!r}; the log's applies"
                )
            run.put("workload.scenario", scenario, source)
        elif key == "effective_test_mode":
            run.context["mode"] = event.value
        elif key == "test_datetime":
            run.put("started_at", str(event.value), source)
        elif key == "result_validity":
            run.put("valid", str(event.value).upper() == "VALID", source)
            run.context["result_validity"] = event.value
        elif key in _DETAIL_CONTEXT:
            run.context[key] = event.value
        else:
            for pattern, family in _DETAIL_LATENCY:
                match = pattern.match(key)
                if match:
                    _add_latency(
                        run, family, _stat(match.group(1)), event.value, source, file.display, event.line
                    )
                    break
    _early_stopping_from_detail(run, file, events)
    if scheduled is not None:
        run.context["result_scheduled_samples_per_sec"] = scheduled.value
        if run.metric("throughput_samples_per_s") is None:  # rounds before completed-samples existed
            run.add_metric(
                "throughput_samples_per_s",
                _event_number(scheduled, file),
                source=f"file:{file.name}:result_scheduled_samples_per_sec",
                raw_value=scheduled.value,
                raw_unit="1/s",
            )
    if inferred is not None:
        run.context[inferred.key] = inferred.value
        if run.metric("throughput_tokens_per_s") is None:
            run.add_metric(
                "throughput_tokens_per_s",
                _event_number(inferred, file),
                source=f"file:{file.name}:{inferred.key}",
                raw_value=inferred.value,
                raw_unit="1/s",
            )
            run.warnings.append(
                f"{file.name}: tokens/s is LoadGen's inferred figure (samples x a fixed tokens per sample)"
            )


def _event_number(event: Event, file: InputFile) -> float | None:
    try:
        return to_float(event.value)
    except UnitError as exc:
        raise ParseError(file.display, str(exc), line=event.line, key=event.key) from exc


# The official SingleStream and MultiStream results are LoadGen's early-stopping estimates of the
# target percentile (90th for SingleStream, 99th for MultiStream), not the plain percentiles: a
# SingleStream detail log's early_stopping_latency_ms is the 99th-percentile helper estimate used
# to infer MultiStream, kept in the context only.
_EARLY_STOPPING_KEY = {
    "single-stream": "early_stopping_latency_ss",
    "multi-stream": "early_stopping_latency_ms",
}
_DEFAULT_TARGET = {"single-stream": 0.9, "multi-stream": 0.99}


def _early_stopping_from_detail(run: ParsedRun, file: InputFile, events: list[Event]) -> None:
    if any(e.key == "requested_use_token_latencies" and e.value is True for e in events):
        return  # LLM runs estimate TTFT and TPOT there, not the request latency: context only
    key = _EARLY_STOPPING_KEY.get(run.workload.scenario)
    event = next((e for e in reversed(events) if e.key == key), None) if key else None
    if event is None:
        return
    value = _event_number(event, file)
    if not value or value <= 0:  # LoadGen writes 0 when too few queries ran for an estimate
        return
    target = to_float(run.context.get("effective_target_latency_percentile"))
    percentile = (target or _DEFAULT_TARGET[run.workload.scenario]) * 100
    _add_early_stopping(
        run, percentile, event.value, f"file:{file.name}:{event.key}", file.display, event.line
    )


def _add_early_stopping(
    run: ParsedRun, percentile: float, raw: Any, source: str, where: str, line: int
) -> None:
    token = percentile_token(f"{percentile:.6g}")
    try:
        value = to_float(raw)
    except UnitError as exc:
        raise ParseError(where, str(exc), line=line) from exc
    run.add_metric(
        f"latency_early_stopping_{token}_ms",
        ns_to_ms(value),
        source=source,
        raw_value=raw,
        raw_unit="ns",
        unit="ms",
        direction="lower",
    )


# -- summary log --------------------------------------------------------------------------------
_SUMMARY_THROUGHPUT = {
    "samples per second": "throughput_samples_per_s",
    "completed samples per second": "throughput_samples_per_s",
    "tokens per second": "throughput_tokens_per_s",
    "completed tokens per second": "throughput_tokens_per_s",
}
_SUMMARY_INFERRED = {"tokens per second (inferred)", "completed tokens per second (inferred)"}
_SUMMARY_CONTEXT = {
    "qps w/ loadgen overhead": "result_qps_with_loadgen_overhead",
    "qps w/o loadgen overhead": "result_qps_without_loadgen_overhead",
    "tps w/ loadgen overhead": "result_token_throughput_with_loadgen_overhead",
    "tps w/o loadgen overhead": "tps_without_loadgen_overhead",
}
_SUMMARY_EARLY_STOPPING = re.compile(r"^\* early stopping (\d+(?:\.\d+)?)(?:th)? percentile estimate$")
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
    inferred: tuple[str, int] | None = None
    early_estimates = 0
    params: dict[str, str] = {}
    text = file.text()
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.lower().startswith("test parameters used"):
            section = "parameters"
            continue
        if stripped.lower().startswith("additional stats"):
            section = "stats"
            continue
        if stripped.lower().startswith(
            ("early stopping result", "ttft early stopping", "tpot early stopping")
        ):
            # the token sections (TTFT/TPOT) of LLM runs estimate token latencies, not the result
            section = "early-stopping" if stripped.lower().startswith("early") else "token-early-stopping"
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
        elif label in _SUMMARY_INFERRED:
            inferred = (value, number)
        elif section == "early-stopping" and (estimate := _SUMMARY_EARLY_STOPPING.match(label)):
            early_estimates += 1
            # the first estimate is the scenario's target percentile; SingleStream adds a 99th one
            if early_estimates == 1 and run.workload.scenario in _STREAM:
                _number(value, file, number)
                _add_early_stopping(run, float(estimate.group(1)), value, source, file.display, number)
            else:
                run.context.setdefault(f"early_stopping_p{estimate.group(1)}_estimate_ns", value)
        elif label == "scheduled samples per second":
            scheduled = (value, number)
        elif label == "scenario":
            scenario = SCENARIOS.get(value.lower().replace(" ", ""))
            if scenario is None:
                raise ParseError(file.display, f"unknown scenario {value!r}", line=number)
            if run.field_sources.get("workload.scenario") == "path":  # the log wins over the folder
                if run.workload.scenario != scenario:
                    run.warnings.append(
                        f"workload.scenario: the folder says {run.workload.scenario!r}, {file.name} "
                        f"says {scenario!r}; the log's applies"
                    )
                run.put("workload.scenario", scenario, source)
            else:
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
        elif label in _SUMMARY_CONTEXT:
            run.context.setdefault(_SUMMARY_CONTEXT[label], _number(value, file, number))
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
    if inferred is not None and run.metric("throughput_tokens_per_s") is None:
        value, number = inferred
        run.add_metric(
            "throughput_tokens_per_s",
            _number(value, file, number),
            source=f"file:{file.name}:{number}",
            raw_value=value,
            raw_unit="1/s",
        )
        run.warnings.append(
            f"{file.name}: tokens/s is LoadGen's inferred figure (samples x a fixed tokens per sample)"
        )
    if params:
        run.context.setdefault("test_parameters", params)
    _check_complete(run, file, text)


# LoadGen closes every summary with "No errors encountered during test." (or "N ERRORS encountered.
# See detailed log."): a summary without it was cut short (a run killed, a partial copy).
_SUMMARY_END = re.compile(r"^\s*(?:no|\d+)\s+errors?\s+encountered", re.IGNORECASE | re.MULTILINE)


def _check_complete(run: ParsedRun, file: InputFile, text: str) -> None:
    """Flag a summary cut short: never read as valid (its VALID line, if any, is not the end)."""
    if _SUMMARY_END.search(text):
        return
    run.context["truncated"] = file.name
    run.warnings.append(
        f"{file.name}: cut short (no closing 'No errors encountered during test.' line): "
        "the run is not marked valid"
    )
    source = run.field_sources.get("valid", "")
    if not source or source.startswith(f"file:{file.name}:"):
        run.put("valid", False, f"derived:{file.name} truncated")


def _number(value: str, file: InputFile, line: int) -> float:
    try:
        number = to_float(value)
    except UnitError as exc:
        raise ParseError(file.display, str(exc), line=line) from exc
    if number is None:
        raise ParseError(file.display, "value missing", line=line)
    return number


# -- accuracy.txt -------------------------------------------------------------------------------
def _apply_accuracy(run: ParsedRun, file: InputFile) -> None:
    result = read_accuracy(file)
    # The task is the file's (MLPerf's accuracy check), not the model folder's name: loose files
    # have no such folder, and one result must give one metric name whatever the upload's shape.
    # The model is the series' own identity already.
    task = ACCURACY_TASK
    target = str(run.context.get("accuracy_target", ""))
    for key, value in result.counts.items():
        run.context[f"accuracy_{key}"] = value
    run.warnings.extend(f"{file.name}: {warning}" for warning in result.warnings)
    for figure in result.figures:
        source = f"file:{file.name}:{figure.key}"
        run.accuracy.append(
            AccuracyResult(
                task=task,
                metric=figure.key,
                value=figure.scaled.value,
                higher_is_better=figure.higher_is_better,
                target=target,
                source=source,
                unit=figure.scaled.unit,
                raw=figure.raw,
            )
        )
        run.add_metric(
            f"accuracy:{task}:{figure.key}",
            figure.scaled.value,
            source=source,
            raw_value=figure.raw,
            raw_unit=figure.scaled.raw_unit,
            unit=figure.scaled.unit,
            direction="higher" if figure.higher_is_better else "lower",
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
            name = f"measurements/{info.system}/{info.model}/{folder.name}/{path.name}"
            _apply_measurement(run, loaded[0], name)
            return


def _apply_flat_measurement(run: ParsedRun, tree: Tree, folder: PurePosixPath) -> None:
    """Loose files: the measurement description given with the logs; among several, the one named
    ``<system>_<Scenario>.json`` for this run's scenario."""
    found = flat_siblings(tree, folder, "measurement")
    if len(found) > 1:
        found = [
            item
            for item in found
            if SCENARIOS.get(PurePosixPath(item[1]).stem.rsplit("_", 1)[-1].lower()) == run.workload.scenario
        ]
    if len(found) == 1:
        measurement, name, path = found[0]
        tree.read(path)  # used by this run
        _apply_measurement(run, measurement, name)
    elif found:
        run.warnings.append(f"several measurement descriptions for {run.workload.scenario}: none used")


def _apply_measurement(run: ParsedRun, measurement: dict[str, Any], name: str) -> None:
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
