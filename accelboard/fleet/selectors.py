"""Reads for the fleet. Charts spanning more than a few hours read rollups, never raw samples.

Resolution by span (``resolution_for``): raw samples under 2 hours, minute rollups under 2 days,
hour rollups beyond. Fleet-wide reads use the per-host rollups (8 GPUs per row on a typical host).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
from django.db import connection
from django.db.models import QuerySet

from .models import Host

RAW_MAX_SPAN = timedelta(hours=2)
MINUTE_MAX_SPAN = timedelta(days=2)
RESOLUTIONS = ("raw", "minute", "hour")

METRIC_COLUMNS = ["time", "power_w", "power_max_w", "gpu_util", "mem_util", "mem_used_bytes", "temperature_c"]


def host_list(*, team_ids: list[int] | None = None) -> QuerySet[Host]:
    hosts = Host.objects.select_related("team", "site").prefetch_related("accelerators__accelerator_type")
    if team_ids is not None:
        hosts = hosts.filter(team_id__in=team_ids)
    return hosts


def resolution_for(*, start: datetime, end: datetime) -> str:
    """The coarsest resolution a chart of [start, end) still shows well. Pure."""
    span = end - start
    if span < RAW_MAX_SPAN:
        return "raw"
    if span < MINUTE_MAX_SPAN:
        return "minute"
    return "hour"


def _frame(sql: str, params: dict[str, object], columns: list[str]) -> pd.DataFrame:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return pd.DataFrame(rows, columns=columns)


def accelerator_metrics(
    *, accelerator_id: int, start: datetime, end: datetime, resolution: str | None = None
) -> tuple[str, pd.DataFrame]:
    """One GPU's metrics over [start, end): ``(resolution, frame)`` with ``METRIC_COLUMNS``.

    For rollups ``time`` is the bucket start, values are bucket means (``power_max_w`` the
    bucket's maximum and ``temperature_c`` its maximum); for raw rows both are the sample.
    """
    resolution = resolution or resolution_for(start=start, end=end)
    if resolution not in RESOLUTIONS:
        raise ValueError(f"resolution={resolution!r} is not one of {', '.join(RESOLUTIONS)}")
    params = {"gpu": accelerator_id, "start": start, "end": end}
    if resolution == "raw":
        sql = """
            SELECT time, power_w, power_w, gpu_util, mem_util, mem_used_bytes, temperature_c
            FROM fleet_telemetrysample
            WHERE accelerator_id = %(gpu)s AND time >= %(start)s AND time < %(end)s
            ORDER BY time
        """
    else:
        params["width"] = 60 if resolution == "minute" else 3600
        sql = """
            SELECT bucket, power_avg_w, power_max_w, gpu_util_avg, mem_util_avg, mem_used_avg_bytes,
                   temperature_max_c
            FROM fleet_telemetryrollup
            WHERE width_s = %(width)s AND accelerator_id = %(gpu)s
              AND bucket >= %(start)s AND bucket < %(end)s
            ORDER BY bucket
        """
    return resolution, _frame(sql, params, METRIC_COLUMNS)


def fleet_utilisation_hourly(
    *, start: datetime, end: datetime, team_ids: list[int] | None = None
) -> pd.DataFrame:
    """Per hour and accelerator type: mean GPU utilisation (%), mean power per GPU (W), energy
    (kWh) and GPUs reporting. Means are sample-weighted across GPUs."""
    team_filter = "AND h.team_id = ANY(%(teams)s)" if team_ids is not None else ""
    sql = f"""
        SELECT r.bucket, coalesce(t.name, 'unknown') AS accelerator_type,
               sum(r.gpu_util_avg * r.gpu_util_samples) / nullif(sum(r.gpu_util_samples), 0),
               sum(r.power_avg_w * r.power_samples) / nullif(sum(r.power_samples), 0),
               sum(r.energy_j) / 3.6e6, sum(r.gpus)
        FROM fleet_hostrollup r
        JOIN fleet_host h ON h.id = r.host_id
        LEFT JOIN fleet_acceleratortype t ON t.id = r.accelerator_type_id
        WHERE r.width_s = 3600 AND r.bucket >= %(start)s AND r.bucket < %(end)s {team_filter}
        GROUP BY r.bucket, t.name
        ORDER BY r.bucket, t.name
    """
    return _frame(
        sql,
        {"start": start, "end": end, "teams": team_ids or []},
        ["bucket", "accelerator_type", "gpu_util", "power_w", "energy_kwh", "gpus"],
    )


def host_energy_top(
    *, start: datetime, end: datetime, limit: int = 10, team_ids: list[int] | None = None
) -> pd.DataFrame:
    """The ``limit`` hosts that drew the most GPU energy in [start, end), most first.

    Whole hours come from hour rollups and the ragged edges from minute rollups, so "this week"
    starting mid-hour is exact to the minute.
    """
    hour_start = _ceil_hour(start)
    hour_end = max(hour_start, _floor_hour(end))
    team_filter = "AND h.team_id = ANY(%(teams)s)" if team_ids is not None else ""
    sql = f"""
        WITH e AS (
            SELECT host_id, energy_j FROM fleet_hostrollup
            WHERE width_s = 3600 AND bucket >= %(hour_start)s AND bucket < %(hour_end)s
            UNION ALL
            SELECT host_id, energy_j FROM fleet_hostrollup
            WHERE width_s = 60 AND ((bucket >= %(start)s AND bucket < %(hour_start)s)
                OR (bucket >= %(hour_end)s AND bucket < %(end)s))
        )
        SELECT h.id, h.hostname, sum(e.energy_j) / 3.6e6 AS energy_kwh
        FROM e JOIN fleet_host h ON h.id = e.host_id
        WHERE e.energy_j IS NOT NULL {team_filter}
        GROUP BY h.id, h.hostname
        ORDER BY energy_kwh DESC, h.hostname
        LIMIT %(limit)s
    """
    params = {
        "start": start,
        "end": end,
        "hour_start": hour_start if hour_start < end else end,
        "hour_end": hour_end if hour_end > start else start,
        "limit": limit,
        "teams": team_ids or [],
    }
    return _frame(sql, params, ["host_id", "hostname", "energy_kwh"])


def _floor_hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _ceil_hour(moment: datetime) -> datetime:
    floored = _floor_hour(moment)
    return floored if floored == moment else floored + timedelta(hours=1)
