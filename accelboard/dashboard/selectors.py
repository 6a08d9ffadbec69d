"""Reads behind the dashboard pages. Every query is bounded by what the page draws."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from accelboard.alerts.choices import AlertState
from accelboard.alerts.models import Alert
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.fleet.models import Accelerator, Host
from accelboard.fleet.selectors import fleet_utilisation_hourly


def overview_summary(*, team_ids: list[int] | None, now: datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    hosts = Host.objects.all()
    gpus = Accelerator.objects.all()
    runs = BenchmarkRun.objects.all()
    alerts = Alert.objects.filter(state__in=[AlertState.OPEN, AlertState.ACKNOWLEDGED])
    if team_ids is not None:
        hosts = hosts.filter(team_id__in=team_ids)
        gpus = gpus.filter(host__team_id__in=team_ids)
        runs = runs.filter(team_id__in=team_ids)
        alerts = alerts.filter(team_id__in=team_ids)
    by_severity = alerts.aggregate(
        critical=Count("id", filter=Q(severity="critical")),
        warning=Count("id", filter=Q(severity="warning")),
        info=Count("id", filter=Q(severity="info")),
    )
    return {
        "hosts": hosts.count(),
        "gpus": gpus.count(),
        "runs_week": runs.filter(started_at__gte=now - timedelta(days=7)).count(),
        "alerts": by_severity,
    }


def overview_fleet_frame(*, team_ids: list[int] | None, days: int = 14, now: datetime | None = None):  # type: ignore[no-untyped-def]
    now = now or timezone.now()
    return fleet_utilisation_hourly(start=now - timedelta(days=days), end=now, team_ids=team_ids)
