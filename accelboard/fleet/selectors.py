"""Reads for the fleet. Charts spanning more than a few hours read rollups, never raw samples."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
from django.db import connection
from django.db.models import QuerySet

from .models import Host


def host_list(*, team_ids: list[int] | None = None) -> QuerySet[Host]:
    hosts = Host.objects.select_related("team", "site").prefetch_related("accelerators__accelerator_type")
    if team_ids is not None:
        hosts = hosts.filter(team_id__in=team_ids)
    return hosts


def fleet_utilisation_hourly(
    *, start: datetime, end: datetime, team_ids: list[int] | None = None
) -> pd.DataFrame:
    """Per hour and accelerator type: mean GPU utilisation (%), mean power (W) and energy (kWh)."""
    team_filter = "AND h.team_id = ANY(%(teams)s)" if team_ids is not None else ""
    sql = f"""
        SELECT r.bucket, coalesce(t.name, 'unknown') AS accelerator_type,
               avg(r.gpu_util_avg) AS gpu_util, avg(r.power_avg_w) AS power_w,
               sum(r.energy_j) / 3.6e6 AS energy_kwh, count(DISTINCT r.accelerator_id) AS gpus
        FROM fleet_telemetryrollup r
        JOIN fleet_accelerator a ON a.id = r.accelerator_id
        JOIN fleet_host h ON h.id = r.host_id
        LEFT JOIN fleet_acceleratortype t ON t.id = a.accelerator_type_id
        WHERE r.width_s = 3600 AND r.bucket >= %(start)s AND r.bucket < %(end)s {team_filter}
        GROUP BY r.bucket, t.name
        ORDER BY r.bucket, t.name
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {"start": start, "end": end, "teams": team_ids or []})
        rows = cursor.fetchall()
    return pd.DataFrame(
        rows, columns=["bucket", "accelerator_type", "gpu_util", "power_w", "energy_kwh", "gpus"]
    )
