"""Reads for the hardware comparison page: which model × scenario groups a user may compare, and
each run's figures (metrics and stored per-run costs) as plain :class:`RunFigures`.

A comparison group is one model in one scenario, across its variants, accelerator types and
counts, batch sizes and concurrencies: strict workload identity (framework version, team) would
leave one accelerator per workload, and the question the page answers is "which hardware ×
precision", so those are what varies. Three queries whatever the fleet's size: the runs of the
group, their metrics, and (joined into the first) their ``costs.RunCost``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q

from accelboard.benchmarks.choices import Scenario
from accelboard.benchmarks.models import BenchmarkRun, MetricValue, Workload

from .hardware import LAST_N_RUNS, RunFigures

# Throughput metric per run: the first of these the run has (one unit per group in practice).
THROUGHPUT_METRICS = ("throughput_tokens_per_s", "throughput_samples_per_s", "throughput_requests_per_s")
_METRICS = (
    *THROUGHPUT_METRICS,
    "latency_p50_ms",
    "latency_p99_ms",
    "power_avg_w",
    "energy_per_inference_j",
    "memory_peak_bytes",
)
_THROUGHPUT_UNITS = {
    "throughput_tokens_per_s": "tokens/s",
    "throughput_samples_per_s": "samples/s",
    "throughput_requests_per_s": "requests/s",
}


@dataclass(frozen=True)
class ComparisonGroup:
    model_id: int
    model_name: str
    scenario: str
    scenario_label: str
    runs: int


def _scoped_runs(*, team_ids: list[int] | None):  # noqa: ANN202 - a QuerySet of BenchmarkRun
    runs = BenchmarkRun.objects.filter(valid=True, accelerator_type__isnull=False)
    if team_ids is not None:
        runs = runs.filter(team_id__in=team_ids)
    return runs


def hardware_groups_for(*, team_ids: list[int] | None) -> list[ComparisonGroup]:
    """Model × scenario groups with valid runs the user may see, most-run first."""
    rows = (
        _scoped_runs(team_ids=team_ids)
        .values("workload__variant__model_id", "workload__variant__model__name", "workload__scenario")
        .annotate(runs=Count("id"))
        .order_by("-runs", "workload__variant__model__name", "workload__scenario")
    )
    labels = dict(Scenario.choices)
    return [
        ComparisonGroup(
            model_id=row["workload__variant__model_id"],
            model_name=row["workload__variant__model__name"],
            scenario=row["workload__scenario"],
            scenario_label=str(labels.get(row["workload__scenario"], row["workload__scenario"])),
            runs=row["runs"],
        )
        for row in rows
    ]


def hardware_workload_get(*, team_ids: list[int] | None, workload_id: int) -> Workload | None:
    """A workload the user may see (None otherwise), to open the page on its model and scenario."""
    workloads = Workload.objects.select_related("variant")
    if team_ids is not None:
        workloads = workloads.filter(team_id__in=team_ids)
    return workloads.filter(pk=workload_id).first()


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def _per_inference(row: dict) -> float | None:
    """The stored cost's energy per unit, where its unit is one inference (a run that reported
    energy but not per inference)."""
    return row["cost__energy_per_unit_j"] if row["cost__unit"] == "inference" else None


def hardware_run_figures(
    *, team_ids: list[int] | None, model_id: int, scenario: str, last_n: int = LAST_N_RUNS
) -> list[RunFigures]:
    """The last ``last_n`` valid runs of each configuration of a model in a scenario, with metrics
    and stored costs. Runs without an accelerator type are left out: they compare with nothing."""
    rows = list(
        _scoped_runs(team_ids=team_ids)
        .filter(Q(workload__variant__model_id=model_id) & Q(workload__scenario=scenario))
        .order_by("-started_at", "-id")
        .values(
            "id",
            "started_at",
            "accelerator_count",
            "workload__variant__name",
            "workload__variant__precision",
            "workload__batch_size",
            "workload__concurrency",
            "workload__framework",
            "accelerator_type__name",
            "accelerator_type__slug",
            "accelerator_type__memory_bytes",
            "cost__capacity_cost_per_1m",
            "cost__energy_cost_per_1m",
            "cost__total_cost_per_1m",
            "cost__currency",
            "cost__unit",
            "cost__price_stale",
            "cost__energy_per_unit_j",
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
                throughput=values.get(throughput_name) if throughput_name else None,
                throughput_unit=_THROUGHPUT_UNITS.get(throughput_name or "", ""),
                p50_ms=values.get("latency_p50_ms"),
                p99_ms=values.get("latency_p99_ms"),
                power_w=values.get("power_avg_w"),
                energy_per_inference_j=values.get("energy_per_inference_j", _per_inference(row)),
                memory_peak_bytes=values.get("memory_peak_bytes"),
                memory_total_bytes=_float(row["accelerator_type__memory_bytes"]),
                capacity_cost_per_1m=_float(row["cost__capacity_cost_per_1m"]),
                energy_cost_per_1m=_float(row["cost__energy_cost_per_1m"]),
                total_cost_per_1m=_float(row["cost__total_cost_per_1m"]),
                currency=row["cost__currency"] or "",
                cost_unit=row["cost__unit"] or "",
                price_stale=bool(row["cost__price_stale"]),
            )
        )
    return figures
