"""Reads behind the overview. Every query is bounded by what the page draws and scoped by the
caller's ``Scope``: hosts, runs and alerts of the teams the caller views, money under the one rule
for money (``core.access`` rule 7: a finance member sees every team's spend, as on ``/costs/``)."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pandas as pd
from django.db import connection
from django.db.models import Count, Q
from django.db.models.functions import Abs
from django.utils import timezone

from accelboard.alerts.choices import AlertKind, AlertState
from accelboard.alerts.models import Alert
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.core.access import Scope
from accelboard.costs.periods import month_comparison, trailing_comparison
from accelboard.costs.selectors import cost_daily_series, cost_days_totals
from accelboard.fleet.models import Accelerator, Host
from accelboard.fleet.selectors import fleet_busy, fleet_live, fleet_throttling, fleet_utilisation_hourly


def overview_summary(
    *, scope: Scope, now: datetime | None = None, live: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The overview's cards. Hosts and GPUs are counted as the hosts page counts them: from
    ``live`` (``overview_live``'s figures) where the caller has them, so the two pages agree."""
    now = now or timezone.now()
    runs = BenchmarkRun.objects.visible_to(scope)
    alerts = Alert.objects.visible_to(scope).filter(state__in=[AlertState.OPEN, AlertState.ACKNOWLEDGED])
    by_severity = alerts.aggregate(
        critical=Count("id", filter=Q(severity="critical")),
        warning=Count("id", filter=Q(severity="warning")),
        info=Count("id", filter=Q(severity="info")),
    )
    if live is None:
        hosts = Host.objects.visible_to(scope).count()
        gpus = Accelerator.objects.visible_to(scope).physical().count()
    else:
        hosts, gpus = live["hosts"], live["gpus"]
    return {
        "hosts": hosts,
        "gpus": gpus,
        "runs_week": runs.filter(started_at__gte=now - timedelta(days=7)).count(),
        "alerts": by_severity,
    }


def overview_live(*, scope: Scope, now: datetime) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The visible GPUs' live state and the live figures, exactly as the hosts page counts them
    (``fleet.selectors.fleet_live``: hosts live and stale, GPUs reporting now, as of ``now``)."""
    grid, live = fleet_live(scope=scope, now=now)
    return [gpu for item in grid for gpu in item["gpus"]], live


def overview_fleet_frame(*, scope: Scope, days: int = 14, now: datetime | None = None) -> pd.DataFrame:
    now = now or timezone.now()
    return fleet_utilisation_hourly(start=now - timedelta(days=days), end=now, scope=scope)


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


def overview_periods(*, scope: Scope, today: date) -> dict[str, dict[str, Any]]:
    """This week (the last 7 days, today so far included) and this month so far, from the daily
    cost rows. Their change compares like with like (``costs.periods``): the 7 complete days
    before today against the 7 before them, and the month's complete days against the same days
    of last month, each shown only where both windows have costs on every day, and named
    (``comparison``). One grouped query."""
    end = today + timedelta(days=1)
    month_start = today.replace(day=1)
    prev_month_start = (month_start - timedelta(days=1)).replace(day=1)
    totals = cost_days_totals(scope=scope, start=min(today - timedelta(days=14), prev_month_start), end=end)
    week = _period_figures(totals, start=today - timedelta(days=6), end=end)
    month = _period_figures(totals, start=month_start, end=end)
    for period, comparison in (
        (week, trailing_comparison(today=today, days=7)),
        (month, month_comparison(month=month_start, today=today)),
    ):
        period["spend_change_pct"] = period["gpu_hours_change_pct"] = None
        period["comparison"] = None
        if comparison is None:
            continue
        now_ = _period_figures(totals, start=comparison.now_start, end=comparison.now_end)
        before = _period_figures(totals, start=comparison.before_start, end=comparison.before_end)
        coverage = {"covered_now": now_["days_with_data"], "covered_before": before["days_with_data"]}
        period["comparison"] = {
            "window": comparison.label,
            "days_now": comparison.days_now,
            "days_before": comparison.days_before,
            **coverage,
        }
        period["spend_change_pct"] = comparison.change_pct(
            now=now_["spend"], before=before["spend"], **coverage
        )
        period["gpu_hours_change_pct"] = comparison.change_pct(
            now=now_["gpu_hours"], before=before["gpu_hours"], **coverage
        )
    return {"week": week, "month": month}


def overview_movers(*, scope: Scope, now: datetime, days: int = 7, limit: int = 5) -> dict[str, list[Alert]]:
    """The biggest regressions and improvements detected since last week, by size of the change.
    Dismissed changes (false alarms, expected) are not movers."""
    alerts = (
        Alert.objects.visible_to(scope)
        .filter(
            opened_at__gte=now - timedelta(days=days),
            kind__in=[AlertKind.REGRESSION, AlertKind.IMPROVEMENT],
            pct_change__isnull=False,
        )
        .exclude(state=AlertState.DISMISSED)
        .select_related("series__workload__variant__model", "series__accelerator_type")
        .annotate(size=Abs("pct_change"))
        .order_by("-size", "-opened_at")
    )
    return {
        "regressions": list(alerts.filter(kind=AlertKind.REGRESSION)[:limit]),
        "improvements": list(alerts.filter(kind=AlertKind.IMPROVEMENT)[:limit]),
    }


# Threshold of memory pressure: memory above 95% of its total. "Busy" is ``fleet.selectors``'s
# (``fleet_busy``), one definition with the hosts page.
MEMORY_PRESSURE = 0.95


def overview_saturation(
    *, scope: Scope, now: datetime, hours: int = 24, live: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Per GPU over the last ``hours`` (hour rollups): the share of GPUs whose memory peaked above
    95% of its total; busy GPUs (now, and the share of GPU-time) and throttling as the hosts page shows
    it (``fleet.selectors.fleet_throttling``: the share of GPU-time slowed for power or heat, and
    the GPUs throttled now), not "any GPU with one power-cap sample", which read as 100%.
    ``gpus`` are the GPUs that reported in the window; the "now" figures count live GPUs only
    (``live``: ``overview_live``'s, else read). Two aggregate queries over at most GPUs × hours
    rows, and the GPUs' live state."""
    team_filter, team_params = scope.sql_filter("h.team_id")
    sql = f"""
        WITH per_gpu AS (
            SELECT r.accelerator_id,
                   max(r.mem_used_max_bytes::float8 / nullif(r.mem_total_bytes, 0)) AS mem_peak
            FROM fleet_telemetryrollup r
            JOIN fleet_host h ON h.id = r.host_id
            WHERE r.width_s = 3600 AND r.bucket >= %(start)s AND r.bucket < %(end)s {team_filter}
            GROUP BY r.accelerator_id
        )
        SELECT count(*),
               count(*) FILTER (WHERE mem_peak > %(mem)s)
        FROM per_gpu
    """
    params: dict[str, Any] = {
        "start": now - timedelta(hours=hours),
        "end": now,
        **team_params,
        "mem": MEMORY_PRESSURE,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        gpus, memory = cursor.fetchone()

    if live is None:  # the GPUs' live state, read once for both figures
        live = [gpu for item in fleet_live(scope=scope, now=now)[0] for gpu in item["gpus"]]

    def share(count: int) -> float | None:
        return count / gpus * 100 if gpus else None

    return {
        "hours": hours,
        "gpus": gpus,
        "busy": fleet_busy(scope=scope, now=now, hours=hours, live=live),
        "memory": memory,
        "memory_pct": share(memory),
        "throttling": fleet_throttling(scope=scope, now=now, hours=hours, live=live),
    }


def overview_spend_days(*, scope: Scope, today: date, days: int = 30) -> dict[str, Any]:
    """Spend per day of the last ``days`` days, split by team, for the overview's stacked chart."""
    return cost_daily_series(
        scope=scope,
        start=today - timedelta(days=days - 1),
        end=today + timedelta(days=1),
        by="team",
    )
