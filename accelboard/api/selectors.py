"""Reads of the API, always scoped to the caller's teams, shaped for the response schemas."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Prefetch, Q, QuerySet

from accelboard.alerts.models import Alert
from accelboard.benchmarks.models import BenchmarkRun, MetricValue, Series

from .models import ApiToken


def token_list(*, team_id: int) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(team_id=team_id).select_related("team").order_by("-created_at")


def _accelerator_q(prefix: str, accelerator: str) -> Q:
    return Q(**{f"{prefix}accelerator_type__name__iexact": accelerator}) | Q(
        **{f"{prefix}accelerator_type__slug__iexact": accelerator}
    )


def run_list(
    *,
    team_ids: list[int],
    model: str | None = None,
    variant: str | None = None,
    accelerator: str | None = None,
    branch: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[BenchmarkRun]:
    runs = (
        BenchmarkRun.objects.filter(team_id__in=team_ids)
        .select_related("team", "workload__variant__model", "accelerator_type", "host")
        .prefetch_related(Prefetch("metrics", queryset=MetricValue.objects.order_by("name")))
        .order_by("-started_at", "-id")
    )
    if model:
        runs = runs.filter(workload__variant__model__name=model)
    if variant:
        runs = runs.filter(workload__variant__name=variant)
    if accelerator:
        runs = runs.filter(_accelerator_q("", accelerator))
    if branch:
        runs = runs.filter(branch=branch)
    if since:
        runs = runs.filter(started_at__gte=since)
    if until:
        runs = runs.filter(started_at__lt=until)
    return runs


def run_out(run: BenchmarkRun) -> dict[str, Any]:
    workload = run.workload
    return {
        "id": run.pk,
        "run_id": str(run.uuid),
        "url": f"/runs/{run.pk}/",
        "team": run.team.slug,
        "model": workload.variant.model.name,
        "variant": {
            "name": workload.variant.name,
            "precision": workload.variant.precision,
            "quantization_method": workload.variant.quantization_method,
        },
        "workload": {
            "scenario": workload.scenario,
            "batch_size": workload.batch_size,
            "concurrency": workload.concurrency,
            "input_length": workload.input_length,
            "output_length": workload.output_length,
            "framework": workload.framework,
            "framework_version": workload.framework_version,
            "options": workload.options,
        },
        "hardware": {
            "accelerator": run.accelerator_type.name if run.accelerator_type else None,
            "count": run.accelerator_count,
            "host": run.host.hostname if run.host else None,
            "driver_version": run.driver_version,
            "cuda_version": run.cuda_version,
        },
        "provenance": {
            "git_commit": run.git_commit,
            "branch": run.branch,
            "ci_url": run.ci_url,
            "source_format": run.source_format,
        },
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "valid": run.valid,
        "metrics": [
            {
                "name": m.name,
                "value": m.value,
                "unit": m.unit,
                "direction": m.direction,
                "samples": m.samples,
                "series_id": m.series_id,
            }
            for m in run.metrics.all()
        ],
        "context": run.context,
    }


def series_list(
    *,
    team_ids: list[int],
    model: str | None = None,
    variant: str | None = None,
    accelerator: str | None = None,
    metric: str | None = None,
) -> QuerySet[Series]:
    series = (
        Series.objects.filter(team_id__in=team_ids)
        .select_related("team", "workload__variant__model", "accelerator_type")
        .order_by("id")
    )
    if model:
        series = series.filter(workload__variant__model__name=model)
    if variant:
        series = series.filter(workload__variant__name=variant)
    if accelerator:
        series = series.filter(_accelerator_q("", accelerator))
    if metric:
        series = series.filter(metric=metric)
    return series


def series_out(series: Series) -> dict[str, Any]:
    return {
        "id": series.pk,
        "team": series.team.slug,
        "metric": series.metric,
        "unit": series.unit,
        "direction": series.direction,
        "model": series.workload.variant.model.name,
        "variant": series.workload.variant.name,
        "workload_id": series.workload_id,
        "accelerator": series.accelerator_type.name if series.accelerator_type else None,
        "accelerator_count": series.accelerator_count,
        "last_value": series.last_value,
        "last_run_at": series.last_run_at,
    }


def series_points(
    *, series: Series, since: datetime | None = None, until: datetime | None = None
) -> QuerySet[MetricValue]:
    points = MetricValue.objects.filter(series=series).select_related("run").order_by("measured_at", "id")
    if since:
        points = points.filter(measured_at__gte=since)
    if until:
        points = points.filter(measured_at__lt=until)
    return points


def point_out(point: MetricValue) -> dict[str, Any]:
    return {
        "run": point.run_id,
        "run_id": str(point.run.uuid),
        "measured_at": point.measured_at,
        "value": point.value,
        "samples": point.samples,
        "git_commit": point.run.git_commit,
        "branch": point.run.branch,
    }


def alert_list(*, team_ids: list[int], state: str | None = None, kind: str | None = None) -> QuerySet[Alert]:
    alerts = Alert.objects.filter(team_id__in=team_ids).select_related("host").order_by("-opened_at", "-id")
    if state:
        alerts = alerts.filter(state=state)
    if kind:
        alerts = alerts.filter(kind=kind)
    return alerts


def alert_out(alert: Alert) -> dict[str, Any]:
    return {
        "id": alert.pk,
        "kind": alert.kind,
        "severity": alert.severity,
        "state": alert.state,
        "title": alert.title,
        "series_id": alert.series_id,
        "host": alert.host.hostname if alert.host else None,
        "opened_at": alert.opened_at,
        "resolved_at": alert.resolved_at,
        "before_mean": alert.before_mean,
        "after_mean": alert.after_mean,
        "pct_change": alert.pct_change,
        "confidence": alert.confidence,
    }
