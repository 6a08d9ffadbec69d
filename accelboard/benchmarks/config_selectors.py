"""Reads of benchmark configurations: each valid run's figures as plain :class:`RunFigures`.

Shared by the hardware comparison page (one model × scenario) and the capacity plan (one model,
every scenario). Two queries whatever the history's length: the runs of the model, newest first,
of which each configuration keeps its last ``last_n``; then the metrics of those runs. Runs
without an accelerator type are left out: they compare with nothing. Costs are not read here
(they belong to the costs app, above this one); a caller that shows them adds them.
"""

from __future__ import annotations

from typing import SupportsFloat

from django.db.models import QuerySet

from accelboard.core.access import Scope

from .configurations import LAST_N_RUNS, RunFigures
from .models import BenchmarkRun, MetricValue

# Throughput metric per run: the first of these the run has (one unit per group in practice).
THROUGHPUT_METRICS = ("throughput_tokens_per_s", "throughput_samples_per_s", "throughput_requests_per_s")
THROUGHPUT_UNITS = {
    "throughput_tokens_per_s": "tokens/s",
    "throughput_samples_per_s": "samples/s",
    "throughput_requests_per_s": "requests/s",
}
_METRICS = (
    *THROUGHPUT_METRICS,
    "latency_p50_ms",
    "latency_p99_ms",
    "ttft_p99_ms",
    "itl_p99_ms",
    "tpot_p99_ms",
    "power_avg_w",
    "energy_per_inference_j",
    "energy_per_token_j",
    "memory_peak_bytes",
)


def _comparable_runs(*, scope: Scope) -> QuerySet[BenchmarkRun]:
    return BenchmarkRun.objects.visible_to(scope).filter(valid=True, accelerator_type__isnull=False)


def _float(value: SupportsFloat | None) -> float | None:
    return None if value is None else float(value)


def config_run_figures(
    *,
    scope: Scope,
    model_id: int,
    scenario: str | None = None,
    last_n: int = LAST_N_RUNS,
) -> list[RunFigures]:
    """The last ``last_n`` valid runs of each configuration of a model (in one scenario, or in all
    of them when ``scenario`` is None), with their metrics, newest first, from the runs the caller
    may see."""
    runs = _comparable_runs(scope=scope).filter(workload__variant__model_id=model_id)
    if scenario is not None:
        runs = runs.filter(workload__scenario=scenario)
    rows = list(
        runs.order_by("-started_at", "-id").values(
            "id",
            "started_at",
            "accelerator_count",
            "workload__variant__name",
            "workload__variant__precision",
            "workload__scenario",
            "workload__batch_size",
            "workload__concurrency",
            "workload__framework",
            "workload__input_length",
            "workload__output_length",
            "accelerator_type__name",
            "accelerator_type__slug",
            "accelerator_type__memory_bytes",
        )
    )
    # Newest first: keep each configuration's first ``last_n`` rows, so the metric query stays small
    # however long the history is.
    seen: dict[tuple, int] = {}
    kept = []
    for row in rows:
        key = (
            row["workload__variant__name"],
            row["accelerator_type__name"],
            row["accelerator_count"],
            row["workload__batch_size"] or 0,
            row["workload__concurrency"] or 0,
            row["workload__framework"],
            row["workload__scenario"],
        )
        if seen.get(key, 0) < last_n:
            seen[key] = seen.get(key, 0) + 1
            kept.append(row)
    metrics: dict[int, dict[str, float]] = {}
    for run_id, name, value in MetricValue.objects.filter(
        run_id__in=[row["id"] for row in kept], name__in=_METRICS
    ).values_list("run_id", "name", "value"):
        metrics.setdefault(run_id, {})[name] = value
    figures = []
    for row in kept:
        values = metrics.get(row["id"], {})
        throughput_name = next((name for name in THROUGHPUT_METRICS if name in values), None)
        figures.append(
            RunFigures(
                run_id=row["id"],
                started_at=row["started_at"],
                variant=row["workload__variant__name"],
                precision=row["workload__variant__precision"],
                accelerator=row["accelerator_type__name"],
                accelerator_slug=row["accelerator_type__slug"],
                accelerator_count=row["accelerator_count"],
                batch_size=row["workload__batch_size"],
                concurrency=row["workload__concurrency"],
                framework=row["workload__framework"],
                scenario=row["workload__scenario"],
                input_length=row["workload__input_length"],
                output_length=row["workload__output_length"],
                throughput=values.get(throughput_name) if throughput_name else None,
                throughput_unit=THROUGHPUT_UNITS.get(throughput_name or "", ""),
                p50_ms=values.get("latency_p50_ms"),
                p99_ms=values.get("latency_p99_ms"),
                ttft_p99_ms=values.get("ttft_p99_ms"),
                # Inter-token latency and time per output token measure the same gap; tools name it
                # either way.
                itl_p99_ms=values.get("itl_p99_ms", values.get("tpot_p99_ms")),
                power_w=values.get("power_avg_w"),
                energy_per_inference_j=values.get("energy_per_inference_j"),
                energy_per_token_j=values.get("energy_per_token_j"),
                memory_peak_bytes=values.get("memory_peak_bytes"),
                memory_total_bytes=_float(row["accelerator_type__memory_bytes"]),
            )
        )
    return figures
