"""MLPerf Training result logs (``result_N.txt``: ``:::MLLOG`` lines) with their system JSON.

1. Time to train = ``run_stop.time_ms - run_start.time_ms`` (stored in s; MLPerf reports minutes).
2. The run is valid when ``run_stop``'s ``metadata.status`` is ``success``; ``aborted`` or no
   ``run_stop`` at all (a log cut short) marks it invalid with a warning.
3. Throughput: samples trained / time to train, so evaluation pauses are included, which makes it
   comparable across submissions. Samples trained = the largest ``samples_count`` of a training
   event (``block_*``, ``epoch_*``, ``train_loss``, ``run_stop``), else the last training ``step``
   x ``global_batch_size``; never the ``samples_count`` of an evaluation event, which some
   benchmarks use for the number of samples evaluated (10,002 where 3.15 M were trained). With
   neither, the figure is left out. The framework's ``tracked_stats`` throughput stays in context.
4. Quality: the last ``eval_accuracy``, whose meaning is per benchmark (accuracy for ResNet,
   eval loss for Llama-2 LoRA, log-perplexity for GPT-3), hence its direction and scale come from
   a table: fractions are stored as ratios, losses and perplexities as scores.
Model = ``submission_benchmark``; batch size = ``global_batch_size``; hardware from
``systems/<system>.json`` (or ``submission_platform`` as a fallback).
"""

from __future__ import annotations

from datetime import UTC, datetime

from .accuracy import FRACTION, SCORE, scaled
from .base import AccuracyResult, ParsedRun, ParseError
from .inputs import InputFile, Tree
from .mllog import Event, first, has_marker, last, read_events
from .mlperf_common import apply_system, result_path
from .naming import accelerator_from_text
from .units import to_float, to_int

NAME = "mlperf-training"

# eval_accuracy that is a loss or perplexity: lower is better, on its own scale
_LOWER_IS_BETTER = {"llama2_70b_lora", "gpt3", "stable_diffusion", "llama31_405b", "llama31_8b"}
# eval_accuracy written as a fraction: top-1 (resnet), MLM accuracy (bert), AUC (dlrm), mAP
# (ssd/retinanet/maskrcnn), DICE (unet3d), node accuracy (rgat)
_FRACTION = {"resnet", "bert", "dlrm", "dlrm_dcnv2", "ssd", "retinanet", "maskrcnn", "unet3d", "rgat", "gnn"}
# events whose samples_count counts training progress (evaluation events may count eval samples)
_TRAINING_EVENTS = {"block_start", "block_stop", "epoch_start", "epoch_stop", "train_loss", "run_stop"}


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
    samples, samples_source = _samples_trained(events, run.workload.batch_size)
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
        if samples:
            run.add_metric(
                "throughput_samples_per_s",
                samples / (elapsed_ms / 1000.0),
                source=f"derived:{samples_source}/time_to_train",
            )
        else:
            run.warnings.append(f"{file.name}: no training samples_count or step count: throughput left out")
    if samples:
        run.context["samples_trained"] = samples
        run.context["samples_trained_from"] = samples_source
    tracked = [
        t
        for e in events
        if e.key == "tracked_stats" and isinstance(e.value, dict)
        if (t := to_float(e.value.get("throughput"))) is not None
    ]
    if tracked:
        run.context["tracked_stats_throughput_mean"] = sum(tracked) / len(tracked)
    quality = last(events, "eval_accuracy")
    if quality is not None and (value := to_float(quality.value)) is not None:
        name = str(benchmark.value)
        higher = name not in _LOWER_IS_BETTER
        result = scaled(value, FRACTION if name in _FRACTION else SCORE, what=f"{name} eval_accuracy")
        if result.warning:
            run.warnings.append(f"{file.name}: {result.warning}")
        run.accuracy.append(
            AccuracyResult(
                task=name,
                metric="eval_accuracy",
                value=result.value,
                higher_is_better=higher,
                source=f"file:{file.name}:{quality.line}",
                unit=result.unit,
                raw=str(quality.value),
            )
        )
        run.add_metric(
            f"accuracy:{name}:eval_accuracy",
            result.value,
            source=f"file:{file.name}:{quality.line}",
            raw_value=quality.value,
            raw_unit=result.raw_unit,
            unit=result.unit,
            direction="higher" if higher else "lower",
        )

    info = result_path(file.path)
    if not apply_system(run, tree, info, folder=file.path.parent if info is None else None):
        platform = str(run.context.get("submission_platform") or "")
        accelerator, count = accelerator_from_text(platform)
        if accelerator:
            # "1xNVIDIA HGX H200" counts nodes, not GPUs: keep the name, leave the count to the user.
            run.put("hardware.accelerator", accelerator, src("submission_platform"))
    return [run]


def _samples_trained(events: list[Event], batch_size: int | None) -> tuple[int, str]:
    """(samples trained, how it was found), (0, "") when the log does not say."""
    counted = [
        to_int(e.metadata.get("samples_count")) or 0
        for e in events
        if e.key in _TRAINING_EVENTS and "samples_count" in e.metadata
    ]
    if counted and max(counted) > 0:
        return max(counted), "samples_count"
    steps = [to_int(e.metadata.get("step")) or 0 for e in events if "step" in e.metadata]
    if steps and max(steps) > 0 and batch_size:
        return max(steps) * batch_size, "step*global_batch_size"
    return 0, ""


def _iso(time_ms: float) -> str:
    return datetime.fromtimestamp(time_ms / 1000.0, tz=UTC).isoformat().replace("+00:00", "Z")
