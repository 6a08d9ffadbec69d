"""Reads for the hardware comparison page: which model × scenario groups a caller may compare, and
each run's figures (metrics and stored per-run costs) as plain :class:`RunFigures`.

A comparison group is one model in one scenario, across its variants, accelerator types and
counts, batch sizes and concurrencies: strict workload identity (framework version, team) would
leave one accelerator per workload, and the question the page answers is "which hardware ×
precision", so those are what varies. Three queries whatever the fleet's size: the runs of the
group (``benchmarks.config_selectors``), their metrics, and their ``costs.RunCost``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, SupportsFloat

from django.db.models import Count, QuerySet

from accelboard.benchmarks.choices import Scenario
from accelboard.benchmarks.config_selectors import config_run_figures
from accelboard.benchmarks.configurations import LAST_N_RUNS, RunFigures
from accelboard.benchmarks.models import BenchmarkRun, Workload
from accelboard.core.access import Scope
from accelboard.costs.models import RunCost
from accelboard.costs.selectors import price_basis

__all__ = ["hardware_groups_for", "hardware_price_bases", "hardware_run_figures", "hardware_workload_get"]


@dataclass(frozen=True)
class ComparisonGroup:
    model_id: int
    model_name: str
    scenario: str
    scenario_label: str
    runs: int


def _comparable_runs(*, scope: Scope) -> QuerySet[BenchmarkRun]:
    return BenchmarkRun.objects.visible_to(scope).filter(valid=True, accelerator_type__isnull=False)


def hardware_groups_for(*, scope: Scope) -> list[ComparisonGroup]:
    """Model × scenario groups with valid runs the caller may see, most-run first."""
    rows = (
        _comparable_runs(scope=scope)
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


def hardware_workload_get(*, scope: Scope, workload_id: int) -> Workload | None:
    """A workload the caller may see (None otherwise), to open the page on its model and scenario."""
    return Workload.objects.visible_to(scope).select_related("variant").filter(pk=workload_id).first()


def _per_inference(cost: Mapping[str, Any]) -> float | None:
    """The stored cost's energy per unit, where its unit is one inference (a run that reported
    energy but not per inference)."""
    return cost["energy_per_unit_j"] if cost["unit"] == "inference" else None


def _to_train(training: Mapping[str, Any] | None) -> dict[str, float | None]:
    """A training run's stored figures to train (``RunCost.training``) as ``RunFigures`` fields."""
    training = training or {}
    return {
        name: _float(training.get(name))
        for name in (
            "time_to_train_s",
            "energy_to_train_j",
            "capacity_cost_to_train",
            "energy_cost_to_train",
            "cost_to_train",
        )
    }


def _float(value: SupportsFloat | None) -> float | None:
    return None if value is None else float(value)


def hardware_run_figures(
    *, scope: Scope, model_id: int, scenario: str, last_n: int = LAST_N_RUNS
) -> list[RunFigures]:
    """The last ``last_n`` valid runs of each configuration of a model in a scenario, with metrics
    (``benchmarks.config_selectors``) and their stored costs (one more query)."""
    figures = config_run_figures(scope=scope, model_id=model_id, scenario=scenario, last_n=last_n)
    costs = {
        row["run_id"]: row
        for row in RunCost.objects.filter(run_id__in=[f.run_id for f in figures]).values(
            "run_id",
            "capacity_cost_per_1m",
            "energy_cost_per_1m",
            "total_cost_per_1m",
            "currency",
            "unit",
            "price_stale",
            "energy_per_unit_j",
            "training",
        )
    }
    priced = []
    for figure in figures:
        cost = costs.get(figure.run_id)
        if cost is None:
            priced.append(figure)
            continue
        to_train = _to_train(cost["training"])
        priced.append(
            replace(
                figure,
                energy_per_inference_j=figure.energy_per_inference_j
                if figure.energy_per_inference_j is not None
                else _per_inference(cost),
                capacity_cost_per_1m=_float(cost["capacity_cost_per_1m"]),
                energy_cost_per_1m=_float(cost["energy_cost_per_1m"]),
                total_cost_per_1m=_float(cost["total_cost_per_1m"]),
                currency=cost["currency"] or "",
                cost_unit=cost["unit"] or "",
                price_stale=bool(cost["price_stale"]),
                time_to_train_s=to_train["time_to_train_s"],
                energy_to_train_j=to_train["energy_to_train_j"],
                capacity_cost_to_train=to_train["capacity_cost_to_train"],
                energy_cost_to_train=to_train["energy_cost_to_train"],
                cost_to_train=to_train["cost_to_train"],
            )
        )
    return priced


def hardware_price_bases(*, run_ids: list[int]) -> dict[int, str]:
    """Run id -> the price its cost was computed with, in words: ``0.80 USD/GPU-hour, on-prem
    (amortised)``, ``6.76 USD/GPU-hour, aws p5.48xlarge on-demand``. A configuration's cost per 1M
    depends on which price row its host used (an on-prem H100 at 0.80 against a cloud one at
    6.76), so the page says it beside each. One query."""
    bases = {}
    for cost in RunCost.objects.filter(run_id__in=run_ids, accelerator_price__isnull=False).select_related(
        "accelerator_price"
    ):
        price = cost.accelerator_price
        assert price is not None
        per_gpu = price.price_per_accelerator_hour
        bases[cost.run_id] = f"{per_gpu:,.2f} {price.currency}/GPU-hour, {price_basis(price)}"
    return bases
