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
from typing import Any, TypeVar

from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from accelboard.core.models import Team
from accelboard.fleet.models import AcceleratorType, Host
from accelboard.importers.metrics import metric_spec

from .catalogue import BUILTIN_MODELS, model_defaults
from .events import run_recorded
from .models import BenchmarkRun, MetricValue, Model, ModelVariant, Series, Workload
from .selectors import model_resolve, variant_resolve


@dataclass(frozen=True)
class WorkloadSpec:
    scenario: str = "unstated"  # Scenario.UNSTATED: nothing said, nothing claimed
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
    fine_tune: str = "",
    team: Team | None = None,
) -> ModelVariant:
    """The variant a write names, both made when the writer cannot see them by those names.

    ``team`` is the writing team: a name resolves to the team's own model (or variant) first, then
    to a shared one; a new one is the team's own, so what one team names stays its own and never
    tells it whether another team uses that name. A name the built-in catalogue knows is a public
    model: made shared, with what the catalogue knows of it (family, size, fine-tune) unless the
    caller gives it. Without ``team`` (the demo, an admin) only shared rows are read and made. A
    shared model's reference variant is only ever a shared variant."""
    model_obj = model_resolve(team=team, name=model)
    if model_obj is None:
        known = model_defaults(model)
        given = {"family": family, "task": task, "parameters_b": parameters_b, "fine_tune": fine_tune}
        defaults = {**known, **{key: value for key, value in given.items() if value not in ("", None)}}
        defaults.setdefault("family", "")
        defaults.setdefault("task", "")
        owner = None if model in BUILTIN_MODEL_NAMES else team
        model_obj = _get_or_create(
            Model.objects.filter(team=owner, name=model), team=owner, name=model, **defaults
        )
    # A team's own model has only that team's variants; a shared one, shared ones and teams' own.
    owner_id = model_obj.team_id if model_obj.team_id is not None else (team.pk if team else None)
    variant_obj = variant_resolve(team=owner_id, model=model_obj, name=variant)
    if variant_obj is None:
        variant_obj = _get_or_create(
            # team_id=None is "IS NULL" (a shared variant); spelt as a dict for the type checker
            ModelVariant.objects.filter(model=model_obj, name=variant, **{"team_id": owner_id}),
            model=model_obj,
            team_id=owner_id,
            name=variant,
            precision=precision,
            quantization_method=quantization_method,
        )
    if (
        model_obj.reference_variant_id is None
        and variant_obj.team_id == model_obj.team_id
        and precision in {"fp32", "bf16", "fp16"}
        and not quantization_method
    ):
        Model.objects.filter(pk=model_obj.pk, reference_variant__isnull=True).update(
            reference_variant=variant_obj
        )
    return variant_obj


# The built-in catalogue's canonical names: public models, shared by every team whoever names them first.
BUILTIN_MODEL_NAMES = frozenset(entry.name for entry in BUILTIN_MODELS)

_Row = TypeVar("_Row", Model, ModelVariant)


def _get_or_create(existing: QuerySet[_Row], **fields: Any) -> _Row:
    """``existing.get()`` or a new row of ``fields``; a concurrent writer's row wins the race."""
    found = existing.first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return existing.model.objects.create(**fields)
    except IntegrityError:
        return existing.get()


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


# The run's identity fields and their lengths.
_IDENTITY_FIELDS = {"model_name": 200, "model_match": 8, "accelerator_name": 120, "accelerator_match": 8}


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
    identity: dict[str, str] | None = None,
) -> tuple[BenchmarkRun, bool]:
    """Store one run and its metrics; return (run, created). Idempotent on ``run_uuid``.

    ``identity``: the names as read and how they resolved (``model_name``, ``model_match``,
    ``accelerator_name``, ``accelerator_match``: the run's fields of those names)."""
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
        **{key: value[: _IDENTITY_FIELDS[key]] for key, value in (identity or {}).items()},
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
    # After commit, the apps above react (cost per unit of work, regression and drift checks).
    run_recorded.publish(
        run_id=run.pk,
        team_id=team.pk,
        variant_id=workload.variant_id,
        metric_names=sorted({v.name for v in values}),
    )
    return run, True
