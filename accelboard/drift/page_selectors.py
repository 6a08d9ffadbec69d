"""Reads for the per-model quantization page: what each variant buys (speed, memory, cost,
energy against the reference on the same hardware and workload settings) next to what it costs
in accuracy (``selectors.drift_evaluate``).

A fixed number of queries whatever the model's history: accuracy (3), performance metrics (1),
run costs (1), production agreement (2).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import F

from accelboard.benchmarks.choices import Scenario
from accelboard.benchmarks.models import MetricValue, Model
from accelboard.core.access import Scope
from accelboard.costs.models import RunCost

from . import computation as c
from .selectors import (
    AgreementDrift,
    ModelDrift,
    TaskDrift,
    agreement_evaluate,
    agreement_rows,
    drift_evaluate,
)

THROUGHPUT = ("throughput_tokens_per_s", "throughput_samples_per_s", "throughput_requests_per_s")
MEMORY = "memory_peak_bytes"
ENERGY = "energy_per_inference_j"
# The figure of a configuration is the median of its newest runs: one noisy night moves nothing.
LATEST_RUNS = 5


@dataclass
class VariantRow:
    """One variant on one hardware configuration, against the reference on the same one."""

    variant_id: int
    variant_name: str
    precision: str
    method: str
    is_reference: bool
    hardware: str
    throughput: float | None = None
    throughput_unit: str = ""
    memory_bytes: float | None = None
    energy_j: float | None = None
    cost_per_1m: float | None = None
    currency: str = ""
    speedup: float | None = None
    memory_saving: float | None = None
    energy_saving: float | None = None
    cost_saving: float | None = None
    tasks: dict[str, TaskDrift] = field(default_factory=dict)
    verdict: str = c.NO_DATA
    worst_loss: float | None = None
    note: str = ""


@dataclass
class ModelReport:
    model: Model
    drift: ModelDrift
    rows: list[VariantRow]
    metrics: list[str]  # accuracy metrics (columns), in order
    agreement: list[dict[str, Any]]
    agreement_verdicts: list[AgreementDrift]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _hardware_label(key: tuple[Any, ...]) -> str:
    _, name, count, scenario, batch = key
    label = f"{count}× {name or 'unknown hardware'} · {scenario}"
    return f"{label} bs{batch}" if batch else label


def _worst(tasks: list[TaskDrift]) -> tuple[str, float | None]:
    if not tasks:
        return c.NO_DATA, None
    verdict = min((t.verdict for t in tasks), key=lambda v: c.VERDICT_ORDER[v])
    losses = [t.level for t in tasks if t.level is not None]
    return verdict, max(losses) if losses else None


def drift_model_report(*, model: Model, scope: Scope) -> ModelReport:
    drift = drift_evaluate(scope=scope, model_ids=[model.pk])[model.pk]
    queryset = (
        MetricValue.objects.visible_to(scope)
        .filter(
            series__workload__variant__model_id=model.pk,
            name__in=[*THROUGHPUT, MEMORY, ENERGY],
            run__valid=True,
        )
        .exclude(series__workload__scenario=Scenario.TRAINING)
    )  # quantization drift is of inference
    values = queryset.order_by("-measured_at", "-id").values(
        "name",
        "value",
        "unit",
        "run_id",
        variant_id=F("series__workload__variant_id"),
        type_id=F("series__accelerator_type_id"),
        type_name=F("series__accelerator_type__name"),
        count=F("series__accelerator_count"),
        scenario=F("series__workload__scenario"),
        batch=F("series__workload__batch_size"),
    )
    # (variant, hardware key) -> metric -> newest values; run ids of the newest throughput runs
    latest: dict[tuple[int, tuple[Any, ...]], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    runs: dict[tuple[int, tuple[Any, ...]], list[int]] = defaultdict(list)
    units: dict[tuple[int, tuple[Any, ...]], str] = {}
    for point in values:
        hw = (point["type_id"], point["type_name"], point["count"], point["scenario"], point["batch"])
        key = (point["variant_id"], hw)
        bucket = latest[key][point["name"]]
        if len(bucket) < LATEST_RUNS:
            bucket.append(point["value"])
            if point["name"] in THROUGHPUT:
                runs[key].append(point["run_id"])
                units[key] = point["unit"]
    costs: dict[int, tuple[float | None, float | None, str]] = {
        cost["run_id"]: (
            float(cost["total_cost_per_1m"]) if cost["total_cost_per_1m"] is not None else None,
            cost["energy_per_unit_j"],
            cost["currency"],
        )
        for cost in RunCost.objects.filter(run_id__in=[r for ids in runs.values() for r in ids]).values(
            "run_id", "total_cost_per_1m", "energy_per_unit_j", "currency"
        )
    }

    def figures(key: tuple[int, tuple[Any, ...]]) -> dict[str, Any]:
        metrics = latest.get(key, {})
        throughput = next((metrics[name] for name in THROUGHPUT if metrics.get(name)), [])
        run_costs = [costs[r] for r in runs.get(key, []) if r in costs]
        energy = metrics.get(ENERGY) or [e for _, e, _ in run_costs if e is not None]
        return {
            "throughput": _median(throughput),
            "memory": _median(metrics.get(MEMORY, [])),
            "energy": _median(list(energy)),
            "cost": _median([m for m, _, _ in run_costs if m is not None]),
            "currency": next((cur for _, _, cur in run_costs if cur), ""),
            "unit": units.get(key, ""),
        }

    reference_id = drift.reference.pk if drift.reference else None
    names = {v.pk: v for v in drift.variants}
    rows: list[VariantRow] = []
    for variant_id, hw in sorted(
        latest, key=lambda k: (k[0] != reference_id, names[k[0]].name, _hardware_label(k[1]))
    ):
        variant = names[variant_id]
        mine = figures((variant_id, hw))
        tasks = drift.for_variant(variant_id)
        verdict, worst = _worst(tasks)
        row = VariantRow(
            variant_id=variant_id,
            variant_name=variant.name,
            precision=variant.precision,
            method=variant.quantization_method,
            is_reference=variant_id == reference_id,
            hardware=_hardware_label(hw),
            throughput=mine["throughput"],
            throughput_unit=mine["unit"],
            memory_bytes=mine["memory"],
            energy_j=mine["energy"],
            cost_per_1m=mine["cost"],
            currency=mine["currency"],
            tasks={t.metric: t for t in tasks},
            verdict="reference" if variant_id == reference_id else verdict,
            worst_loss=0.0 if variant_id == reference_id else worst,
        )
        if reference_id is not None and (reference_id, hw) in latest:
            ref = figures((reference_id, hw))
            row.speedup = c.ratio_change(value=mine["throughput"], reference=ref["throughput"])
            row.memory_saving = c.saving(value=mine["memory"], reference=ref["memory"])
            row.energy_saving = c.saving(value=mine["energy"], reference=ref["energy"])
            if mine["currency"] == ref["currency"]:
                row.cost_saving = c.saving(value=mine["cost"], reference=ref["cost"])
        elif not row.is_reference:
            row.note = "no reference run on this hardware and workload: savings cannot be computed"
        rows.append(row)
    # A configuration without a reference twin says nothing about savings: keep it only when it is
    # all a variant has, and count the others on the variant's rows (batch sweeps, other GPUs).
    matched = {r.variant_id for r in rows if r.is_reference or r.speedup is not None}
    unmatched: dict[int, int] = defaultdict(int)
    kept: list[VariantRow] = []
    for row in rows:
        if (
            row.variant_id in matched
            and not row.is_reference
            and row.speedup is None
            or row.variant_id not in matched
            and any(k.variant_id == row.variant_id for k in kept)
        ):
            unmatched[row.variant_id] += 1
        else:
            kept.append(row)
    for row in kept:
        if unmatched.get(row.variant_id):
            count = unmatched[row.variant_id]
            extra = (
                f"also run on {count} other configuration{'s' if count > 1 else ''} without a reference run"
            )
            row.note = f"{row.note}; {extra}" if row.note else extra
    rows = kept
    # Variants with accuracy results but no performance runs still get their accuracy row.
    shown = {r.variant_id for r in rows}
    for variant in drift.variants:
        tasks = drift.for_variant(variant.pk)
        if variant.pk in shown or not tasks:
            continue
        verdict, worst = _worst(tasks)
        rows.append(
            VariantRow(
                variant_id=variant.pk,
                variant_name=variant.name,
                precision=variant.precision,
                method=variant.quantization_method,
                is_reference=False,
                hardware="—",
                tasks={t.metric: t for t in tasks},
                verdict=verdict,
                worst_loss=worst,
                note="no performance runs: only accuracy is known",
            )
        )
    metrics = sorted({t.metric for t in drift.tasks})
    return ModelReport(
        model=model,
        drift=drift,
        rows=rows,
        metrics=metrics,
        agreement=agreement_rows(scope=scope, model_id=model.pk),
        agreement_verdicts=agreement_evaluate(scope=scope, model_ids=[model.pk]),
    )
