"""Reads behind the dashboard pages. Every query is bounded by what the page draws."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Count, Q
from django.db.models.functions import Abs
from django.utils import timezone

from accelboard.alerts.choices import AlertKind, AlertState
from accelboard.alerts.models import Alert
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.costs.selectors import cost_daily_series, cost_days_totals
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


_SUMMED = ("alloc_hours", "busy_hours", "idle_hours", "energy_kwh", "carbon_kg", "total_cost", "idle_cost")


def _period_figures(totals: dict[str, Any], *, start: date, end: date) -> dict[str, Any]:
    """Sums of the days in [start, end) of ``costs.selectors.cost_days_totals``."""
    days = [row for day, row in totals["days"].items() if start <= day < end]
    sums: dict[str, Any] = {
        field: sum((row[field] for row in days), Decimal(0) if field.endswith("cost") else 0.0)
        for field in _SUMMED
    }
    alloc = sums["alloc_hours"]
    return {
        "start": start,
        "end": end - timedelta(days=1),
        "gpu_hours": alloc,
        "utilisation_pct": (sums["busy_hours"] / alloc * 100) if alloc else None,
        "idle_hours": sums["idle_hours"],
        "energy_kwh": sums["energy_kwh"],
        "carbon_kg": sums["carbon_kg"],
        "spend": sums["total_cost"],
        "idle_cost": sums["idle_cost"],
        "currency": totals["currency"],
        "unconverted": any(start <= row["key"] < end for row in totals["unconverted"]),
        "stale": any(row["stale_rows"] for row in days),
        "rows": sum(row["rows"] for row in days),
        "days_with_data": len(days),
    }


def _change_pct(now: Decimal | float | None, before: Decimal | float | None) -> float | None:
    if now is None or not before:
        return None
    return float((now - before) / before * 100)


def overview_periods(*, team_ids: list[int] | None, today: date) -> dict[str, dict[str, Any]]:
    """This week (the last 7 days, today so far included) and this month so far, from the daily
    cost rows. The change of spend and GPU-hours compares complete days only (today's partial day
    would read as a drop): the 7 days before today against the 7 before them, and the month's
    complete days against as many first days of last month. One grouped query."""
    end = today + timedelta(days=1)
    month_start = today.replace(day=1)
    prev_month_start = (month_start - timedelta(days=1)).replace(day=1)
    complete = (today - month_start).days
    prev_month_end = min(prev_month_start + timedelta(days=complete), month_start)
    totals = cost_days_totals(
        team_ids=team_ids, start=min(today - timedelta(days=14), prev_month_start), end=end
    )
    week = _period_figures(totals, start=today - timedelta(days=6), end=end)
    month = _period_figures(totals, start=month_start, end=end)
    pairs = (
        (week, (today - timedelta(days=7), today), (today - timedelta(days=14), today - timedelta(days=7))),
        (month, (month_start, today), (prev_month_start, prev_month_end)),
    )
    for period, (start, stop), (prev_start, prev_stop) in pairs:
        now_ = _period_figures(totals, start=start, end=stop)
        before = _period_figures(totals, start=prev_start, end=prev_stop)
        # A change against a period with fewer days of data (a fleet that started in it) would
        # read as growth that is not there: no change is shown then.
        comparable = now_["days_with_data"] > 0 and before["days_with_data"] >= now_["days_with_data"]
        period["spend_change_pct"] = _change_pct(now_["spend"], before["spend"]) if comparable else None
        period["gpu_hours_change_pct"] = (
            _change_pct(now_["gpu_hours"], before["gpu_hours"]) if comparable else None
        )
    return {"week": week, "month": month}


def overview_movers(
    *, team_ids: list[int] | None, now: datetime, days: int = 7, limit: int = 5
) -> dict[str, list[Alert]]:
    """The biggest regressions and improvements detected since last week, by size of the change.
    Dismissed changes (false alarms, expected) are not movers."""
    alerts = (
        Alert.objects.filter(
            opened_at__gte=now - timedelta(days=days),
            kind__in=[AlertKind.REGRESSION, AlertKind.IMPROVEMENT],
            pct_change__isnull=False,
        )
        .exclude(state=AlertState.DISMISSED)
        .select_related("series__workload__variant__model", "series__accelerator_type")
        .annotate(size=Abs("pct_change"))
        .order_by("-size", "-opened_at")
    )
    if team_ids is not None:
        alerts = alerts.filter(team_id__in=team_ids)
    return {
        "regressions": list(alerts.filter(kind=AlertKind.REGRESSION)[:limit]),
        "improvements": list(alerts.filter(kind=AlertKind.IMPROVEMENT)[:limit]),
    }


# Thresholds of "saturated": a GPU busy above 90% of the time, memory above 95% of its total.
SATURATED_UTIL_PCT = 90.0
MEMORY_PRESSURE = 0.95


def overview_saturation(*, team_ids: list[int] | None, now: datetime, hours: int = 24) -> dict[str, Any]:
    """Per GPU over the last ``hours`` (hour rollups): the share of GPUs whose mean utilisation was
    above 90%, whose memory peaked above 95% of its total, and that were throttled at all.
    One aggregate query over at most GPUs × hours rows."""
    team_filter = "AND h.team_id = ANY(%(teams)s)" if team_ids is not None else ""
    sql = f"""
        WITH per_gpu AS (
            SELECT r.accelerator_id,
                   sum(r.gpu_util_avg * r.gpu_util_samples) / nullif(sum(r.gpu_util_samples), 0) AS util,
                   max(r.mem_used_max_bytes::float8 / nullif(r.mem_total_bytes, 0)) AS mem_peak,
                   sum(r.throttled_samples) AS throttled
            FROM fleet_telemetryrollup r
            JOIN fleet_host h ON h.id = r.host_id
            WHERE r.width_s = 3600 AND r.bucket >= %(start)s AND r.bucket < %(end)s {team_filter}
            GROUP BY r.accelerator_id
        )
        SELECT count(*),
               count(*) FILTER (WHERE util > %(util)s),
               count(*) FILTER (WHERE mem_peak > %(mem)s),
               count(*) FILTER (WHERE throttled > 0)
        FROM per_gpu
    """
    params = {
        "start": now - timedelta(hours=hours),
        "end": now,
        "teams": team_ids or [],
        "util": SATURATED_UTIL_PCT,
        "mem": MEMORY_PRESSURE,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        gpus, busy, memory, throttled = cursor.fetchone()

    def share(count: int) -> float | None:
        return count / gpus * 100 if gpus else None

    return {
        "hours": hours,
        "gpus": gpus,
        "busy": busy,
        "busy_pct": share(busy),
        "memory": memory,
        "memory_pct": share(memory),
        "throttled": throttled,
        "throttled_pct": share(throttled),
    }


def overview_spend_days(*, team_ids: list[int] | None, today: date, days: int = 30) -> dict[str, Any]:
    """Spend per day of the last ``days`` days, split by team, for the overview's stacked chart."""
    return cost_daily_series(
        team_ids=team_ids, start=today - timedelta(days=days - 1), end=today + timedelta(days=1), by="team"
    )
