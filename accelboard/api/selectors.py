"""Reads of the API, always through the caller's ``Scope`` (``accelboard.core.access``); the
response schemas (``schemas.RunOut``...) shape the rows, the filter schemas narrow them."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Prefetch, QuerySet

from accelboard.alerts.models import Alert
from accelboard.benchmarks.models import BenchmarkRun, MetricValue, Series
from accelboard.core.access import Scope
from accelboard.profiles.models import Profile
from accelboard.profiles.selectors import profile_answer

from .models import ApiToken


def token_list(*, team_id: int) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(team_id=team_id).select_related("team").order_by("-created_at")


def run_list(*, scope: Scope) -> QuerySet[BenchmarkRun]:
    """The runs the caller may read, newest first, with what ``schemas.RunOut`` reads."""
    return (
        BenchmarkRun.objects.visible_to(scope)
        .select_related("team", "workload__variant__model", "accelerator_type", "host")
        .prefetch_related(Prefetch("metrics", queryset=MetricValue.objects.order_by("name")))
        .order_by("-started_at", "-id")
    )


def run_get_visible(*, scope: Scope, run_ref: str) -> BenchmarkRun | None:
    """A visible run by its number (``id``) or its client id (``run_id``, a UUID)."""
    runs = run_list(scope=scope)
    if run_ref.isdigit():
        return runs.filter(pk=int(run_ref)).first()
    try:
        return runs.filter(uuid=uuid.UUID(run_ref)).first()
    except ValueError:
        return None


def run_profile_get(*, scope: Scope, run_ref: str) -> dict[str, Any] | None:
    """The profile of a visible run (``profiles.selectors.profile_answer``), or None."""
    run = run_get_visible(scope=scope, run_ref=run_ref)
    profile = Profile.objects.filter(run=run).select_related("run").first() if run else None
    return profile_answer(profile=profile) if profile else None


def series_list(*, scope: Scope) -> QuerySet[Series]:
    return (
        Series.objects.visible_to(scope)
        .select_related("team", "workload__variant__model", "accelerator_type")
        .order_by("id")
    )


def series_get_visible(*, scope: Scope, series_id: int) -> Series | None:
    return Series.objects.visible_to(scope).filter(pk=series_id).first()


def series_points(*, series: Series) -> QuerySet[MetricValue]:
    """A visible series' points, oldest first (the series was found with ``series_get_visible``)."""
    return MetricValue.objects.filter(series=series).select_related("run").order_by("measured_at", "id")


def alert_list(*, scope: Scope) -> QuerySet[Alert]:
    return (
        Alert.objects.visible_to(scope)
        .select_related("host")
        .prefetch_related("metrics__series")
        .order_by("-opened_at", "-id")
    )
