"""Writes for benchmarks: models and variants, workloads, runs with their metrics, and series.

``run_record`` is the one path by which a run enters the database (API, upload page, CLI, agent,
demo): it resolves the workload and hardware, creates or finds each metric's series, stores the
metric values and moves the series' last value, all in one transaction. It is idempotent on the
run's client id (``uuid``): recording the same run twice returns the first one.
"""

from __future__ import annotations

import hashlib
import json
import uuid as uuid_lib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from accelboard.core.models import Team
from accelboard.fleet.models import AcceleratorType, Host

from .metrics import metric_spec
from .models import BenchmarkRun, MetricValue, Model, ModelVariant, Series, Workload


@dataclass(frozen=True)
class WorkloadSpec:
    scenario: str = "offline"
    batch_size: int | None = None
    concurrency: int | None = None
    input_length: int | None = None
    output_length: int | None = None
    framework: str = ""
    framework_version: str = ""
    options: dict[str, Any] = field(default_factory=dict)

    def identity(self, variant_id: int) -> str:
        payload = {
            "variant": variant_id,
            "scenario": self.scenario,
            "batch_size": self.batch_size,
            "concurrency": self.concurrency,
            "input_length": self.input_length,
            "output_length": self.output_length,
            "framework": self.framework.lower(),
            "framework_version": self.framework_version,
            "options": self.options,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class MetricInput:
    name: str
    value: float
    unit: str
    direction: str | None = None
    samples: tuple[float, ...] = ()
    raw_value: str = ""
    raw_unit: str = ""
    source: str = ""


def model_variant_get_or_create(
    *,
    model: str,
    variant: str,
    precision: str,
    quantization_method: str = "",
    family: str = "",
    task: str = "",
    parameters_b: float | None = None,
) -> ModelVariant:
    model_obj, _ = Model.objects.get_or_create(
        name=model, defaults={"family": family, "task": task, "parameters_b": parameters_b}
    )
    variant_obj, _ = ModelVariant.objects.get_or_create(
        model=model_obj,
        name=variant,
        defaults={"precision": precision, "quantization_method": quantization_method},
    )
    if (
        model_obj.reference_variant_id is None
        and precision in {"fp32", "bf16", "fp16"}
        and not quantization_method
    ):
        Model.objects.filter(pk=model_obj.pk, reference_variant__isnull=True).update(
            reference_variant=variant_obj
        )
    return variant_obj


def workload_get_or_create(*, team: Team, variant: ModelVariant, spec: WorkloadSpec) -> Workload:
    identity = spec.identity(variant.pk)
    try:
        with transaction.atomic():
            workload, _ = Workload.objects.get_or_create(
                team=team,
                identity=identity,
                defaults={
                    "variant": variant,
                    "scenario": spec.scenario,
                    "batch_size": spec.batch_size,
                    "concurrency": spec.concurrency,
                    "input_length": spec.input_length,
                    "output_length": spec.output_length,
                    "framework": spec.framework,
                    "framework_version": spec.framework_version,
                    "options": spec.options,
                },
            )
    except IntegrityError:  # a concurrent request created it first
        workload = Workload.objects.get(team=team, identity=identity)
    return workload


def series_get_or_create(
    *,
    team: Team,
    workload: Workload,
    accelerator_type: AcceleratorType | None,
    accelerator_count: int,
    metric: str,
    unit: str,
    direction: str,
) -> Series:
    try:
        with transaction.atomic():
            series, _ = Series.objects.get_or_create(
                workload=workload,
                accelerator_type=accelerator_type,
                accelerator_count=accelerator_count,
                metric=metric,
                defaults={"team": team, "unit": unit, "direction": direction},
            )
    except IntegrityError:
        series = Series.objects.get(
            workload=workload,
            accelerator_type=accelerator_type,
            accelerator_count=accelerator_count,
            metric=metric,
        )
    return series


def _direction_for(metric: MetricInput) -> str:
    if metric.direction in {"higher", "lower"}:
        return metric.direction
    spec = metric_spec(metric.name)
    if spec is None:
        raise ValueError(f"metric {metric.name!r} is not in the catalogue; give its direction")
    return spec.direction


def _costs_run_cost_enqueue(run_id: int) -> None:
    from accelboard.costs.tasks import run_cost  # noqa: PLC0415 - costs imports benchmarks

    run_cost.delay(run_id)


@transaction.atomic
def run_record(
    *,
    team: Team,
    workload: Workload,
    accelerator_type: AcceleratorType | None,
    accelerator_count: int,
    started_at: datetime,
    metrics: list[MetricInput],
    run_uuid: uuid_lib.UUID | str | None = None,
    finished_at: datetime | None = None,
    host: Host | None = None,
    git_commit: str = "",
    branch: str = "",
    ci_url: str = "",
    uploaded_by: Any = None,
    uploaded_via: str = "api",
    source_format: str = "accelboard",
    field_sources: dict[str, str] | None = None,
    context: dict[str, Any] | None = None,
    driver_version: str = "",
    cuda_version: str = "",
    valid: bool = True,
) -> tuple[BenchmarkRun, bool]:
    """Store one run and its metrics; return (run, created). Idempotent on ``run_uuid``."""
    run_uuid = uuid_lib.UUID(str(run_uuid)) if run_uuid else uuid_lib.uuid4()
    existing = BenchmarkRun.objects.filter(uuid=run_uuid).first()
    if existing is not None:
        return existing, False
    run = BenchmarkRun.objects.create(
        uuid=run_uuid,
        team=team,
        workload=workload,
        accelerator_type=accelerator_type,
        accelerator_count=accelerator_count,
        host=host,
        started_at=started_at,
        finished_at=finished_at,
        git_commit=git_commit,
        branch=branch,
        ci_url=ci_url,
        uploaded_by=uploaded_by,
        uploaded_via=uploaded_via,
        source_format=source_format,
        field_sources=field_sources or {},
        context=context or {},
        driver_version=driver_version,
        cuda_version=cuda_version,
        valid=valid,
    )
    values = []
    for metric in metrics:
        direction = _direction_for(metric)
        series = series_get_or_create(
            team=team,
            workload=workload,
            accelerator_type=accelerator_type,
            accelerator_count=accelerator_count,
            metric=metric.name,
            unit=metric.unit,
            direction=direction,
        )
        values.append(
            MetricValue(
                run=run,
                series=series,
                name=metric.name,
                value=metric.value,
                unit=metric.unit,
                direction=direction,
                samples=list(metric.samples),
                raw_value=metric.raw_value,
                raw_unit=metric.raw_unit,
                source=metric.source,
                measured_at=started_at,
            )
        )
        if series.last_run_at is None or started_at >= series.last_run_at:
            Series.objects.filter(pk=series.pk).update(last_value=metric.value, last_run_at=started_at)
    MetricValue.objects.bulk_create(values)
    # Energy and cost per unit of work (costs app), once the metrics are visible to the worker.
    transaction.on_commit(lambda: _costs_run_cost_enqueue(run.pk))
    if any(v.name == "accuracy" or v.name.startswith("accuracy:") for v in values):
        from accelboard.drift.services import drift_check_enqueue  # noqa: PLC0415 - drift imports benchmarks

        drift_check_enqueue(team_id=team.pk, variant_id=workload.variant_id)
    # Regression check of each series the run touched, once the rows are visible to the worker.
    transaction.on_commit(lambda: _alerts_run_check_enqueue(run.pk))
    return run, True


def _alerts_run_check_enqueue(run_id: int) -> None:
    from accelboard.alerts.tasks import run_check  # noqa: PLC0415 - alerts imports benchmarks

    run_check.delay(run_id)
