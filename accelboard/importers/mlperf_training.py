"""MLPerf Training result logs (``result_N.txt``: ``:::MLLOG`` lines) with their system JSON.

1. Time to train = ``run_stop.time_ms - run_start.time_ms`` (stored in s; MLPerf reports minutes).
2. The run is valid when ``run_stop``'s ``metadata.status`` is ``success``; ``aborted`` or no
   ``run_stop`` at all (a log cut short) marks it invalid with a warning.
3. Throughput: samples trained (the last ``samples_count`` seen) / time to train, so evaluation
   pauses are included, which makes it comparable across submissions; the framework's own
   ``tracked_stats`` throughput is kept in the context.
4. Quality: the last ``eval_accuracy``, whose meaning is per benchmark (accuracy for ResNet,
   eval loss for Llama-2 LoRA, log-perplexity for GPT-3), hence its direction comes from a table.
Model = ``submission_benchmark``; batch size = ``global_batch_size``; hardware from
``systems/<system>.json`` (or ``submission_platform`` as a fallback).
"""

from __future__ import annotations

from datetime import UTC, datetime

from .base import AccuracyResult, ParsedRun, ParseError
from .inputs import InputFile, Tree
from .mllog import first, has_marker, last, read_events
from .mlperf_common import apply_system, result_path
from .naming import accelerator_from_text
from .units import to_float, to_int

NAME = "mlperf-training"

# eval_accuracy that is a loss or perplexity: lower is better
_LOWER_IS_BETTER = {"llama2_70b_lora", "gpt3", "stable_diffusion", "llama31_405b", "llama31_8b"}


def sniff(file: InputFile) -> bool:
    if not has_marker(file):
        return False
    head = file.head(65536).decode("utf-8", "replace")
    if "mlperf::logging" in head or '"loadgen_version"' in head:
        return False  # an inference detail log
    return any(key in head for key in ('"submission_benchmark"', '"init_start"', '"run_start"'))


def parse(file: InputFile, *, tree: Tree) -> list[ParsedRun]:
    events = read_events(file)
    if not events:
        raise ParseError(file.display, "no :::MLLOG lines")
    run = ParsedRun(source_format=NAME, source_file=file.display)
    run.put("workload.scenario", "training", f"file:{file.name}:format")

    def src(key: str) -> str:
        return f"file:{file.name}:{key}"

    benchmark = first(events, "submission_benchmark")
    if benchmark is None:
        raise ParseError(file.display, "no submission_benchmark line", key="submission_benchmark")
    run.put("model", str(benchmark.value), src("submission_benchmark"))
    for key in ("submission_org", "submission_division", "submission_status", "submission_platform", "seed"):
        event = first(events, key)
        if event is not None:
            run.context[key] = event.value
    batch = first(events, "global_batch_size")
    if batch is not None:
        run.put("workload.batch_size", to_int(batch.value), src("global_batch_size"))

    start, stop = first(events, "run_start"), last(events, "run_stop")
    if start is None or start.time_ms is None:
        raise ParseError(file.display, "no run_start line with time_ms", key="run_start")
    run.put("started_at", _iso(start.time_ms), src("run_start.time_ms"))
    samples_count = max(
        (to_int(e.metadata.get("samples_count")) or 0 for e in events if "samples_count" in e.metadata),
        default=0,
    )
    if stop is None or stop.time_ms is None:
        run.put("valid", False, src("run_stop"))
        run.context["status"] = "incomplete"
        run.warnings.append(f"{file.name}: no run_stop line: the run did not finish or the log is cut short")
    else:
        status = str(stop.metadata.get("status", "")).lower()
        run.context["status"] = status or "unknown"
        run.put("valid", status == "success", src("run_stop.metadata.status"))
        run.put("finished_at", _iso(stop.time_ms), src("run_stop.time_ms"))
        elapsed_ms = stop.time_ms - start.time_ms
        if elapsed_ms <= 0:
            raise ParseError(file.display, "run_stop is not after run_start", line=stop.line, key="run_stop")
        run.add_metric(
            "time_to_train_s",
            elapsed_ms / 1000.0,
            source="derived:run_stop.time_ms-run_start.time_ms",
            raw_value=elapsed_ms,
            raw_unit="ms",
        )
        run.context["time_to_train_min"] = round(elapsed_ms / 60000.0, 4)
        if samples_count:
            run.add_metric(
                "throughput_samples_per_s",
                samples_count / (elapsed_ms / 1000.0),
                source="derived:samples_count/time_to_train",
            )
    if samples_count:
        run.context["samples_count"] = samples_count
    tracked = [
        to_float(e.value.get("throughput"))
        for e in events
        if e.key == "tracked_stats" and isinstance(e.value, dict)
    ]
    tracked = [t for t in tracked if t is not None]
    if tracked:
        run.context["tracked_stats_throughput_mean"] = sum(tracked) / len(tracked)
    quality = last(events, "eval_accuracy")
    if quality is not None and (value := to_float(quality.value)) is not None:
        higher = str(benchmark.value) not in _LOWER_IS_BETTER
        run.accuracy.append(
            AccuracyResult(
                task=str(benchmark.value),
                metric="eval_accuracy",
                value=value,
                higher_is_better=higher,
                source=f"file:{file.name}:{quality.line}",
            )
        )
        run.add_metric(
            f"accuracy:{benchmark.value}:eval_accuracy",
            value,
            source=f"file:{file.name}:{quality.line}",
            raw_value=quality.value,
            raw_unit="score",
            direction="higher" if higher else "lower",
        )

    info = result_path(file.path)
    if info is None or not apply_system(run, tree, info):
        platform = str(run.context.get("submission_platform") or "")
        accelerator, count = accelerator_from_text(platform)
        if accelerator:
            # "1xNVIDIA HGX H200" counts nodes, not GPUs: keep the name, leave the count to the user.
            run.put("hardware.accelerator", accelerator, src("submission_platform"))
    return [run]


def _iso(time_ms: float) -> str:
    return datetime.fromtimestamp(time_ms / 1000.0, tz=UTC).isoformat().replace("+00:00", "Z")
