"""Reads for the fleet. Charts spanning more than a few hours read rollups, never raw samples.

Resolution by span (``resolution_for``): raw samples under 2 hours, minute rollups under 2 days,
hour rollups beyond. Fleet-wide reads use the per-host rollups (8 GPUs per row on a typical host).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from django.conf import settings
from django.db import connection
from django.db.models import Prefetch, QuerySet

from accelboard.core.access import Scope
from accelboard.core.pipeline_selectors import Check

from .models import Accelerator, Host, Workload
from .partials import PROFILING_FIELDS
from .rollup_services import THROTTLE_MASK

RAW_MAX_SPAN = timedelta(hours=2)
MINUTE_MAX_SPAN = timedelta(days=2)
RESOLUTIONS = ("raw", "minute", "hour")

METRIC_COLUMNS = ["time", "power_w", "power_max_w", "gpu_util", "mem_util", "mem_used_bytes", "temperature_c"]


def host_list(*, scope: Scope) -> QuerySet[Host]:
    return (
        Host.objects.visible_to(scope)
        .select_related("team", "site")
        .prefetch_related(
            # The GPUs, not their MIG instances: a host's grid and GPU count are physical devices.
            Prefetch(
                "accelerators", queryset=Accelerator.objects.physical().select_related("accelerator_type")
            )
        )
    )


def host_accelerators(*, host: Host) -> list[Accelerator]:
    """A host's GPUs (prefetched by ``host_list`` and ``host_get_visible``)."""
    return list(host.accelerators.all())


def resolution_for(*, start: datetime, end: datetime) -> str:
    """The coarsest resolution a chart of [start, end) still shows well. Pure."""
    span = end - start
    if span < RAW_MAX_SPAN:
        return "raw"
    if span < MINUTE_MAX_SPAN:
        return "minute"
    return "hour"


def _frame(sql: str, params: dict[str, Any], columns: list[str]) -> pd.DataFrame:
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
    params: dict[str, Any] = {"gpu": accelerator_id, "start": start, "end": end}
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


def fleet_utilisation_hourly(*, start: datetime, end: datetime, scope: Scope) -> pd.DataFrame:
    """Per hour and accelerator type: mean GPU utilisation (%), mean power per GPU (W), energy
    (kWh) and GPUs reporting. Means are sample-weighted across GPUs."""
    team_filter, team_params = scope.sql_filter("h.team_id")
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
        {"start": start, "end": end, **team_params},
        ["bucket", "accelerator_type", "gpu_util", "power_w", "energy_kwh", "gpus"],
    )


def host_energy_top(*, start: datetime, end: datetime, scope: Scope, limit: int = 10) -> pd.DataFrame:
    """The ``limit`` hosts that drew the most GPU energy in [start, end), most first.

    Whole hours come from hour rollups and the ragged edges from minute rollups, so "this week"
    starting mid-hour is exact to the minute.
    """
    hour_start = _ceil_hour(start)
    hour_end = max(hour_start, _floor_hour(end))
    team_filter, team_params = scope.sql_filter("h.team_id")
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
    params: dict[str, Any] = {
        "start": start,
        "end": end,
        "hour_start": hour_start if hour_start < end else end,
        "hour_end": hour_end if hour_end > start else start,
        "limit": limit,
        **team_params,
    }
    return _frame(sql, params, ["host_id", "hostname", "energy_kwh"])


def _floor_hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _ceil_hour(moment: datetime) -> datetime:
    floored = _floor_hour(moment)
    return floored if floored == moment else floored + timedelta(hours=1)


# --- The hosts pages: live grid and per-host telemetry ------------------------------------------

# Ranges the host page offers. Up to a day reads minute rollups (at most 1,440 points a GPU);
# beyond, hour rollups (at most 720): what a chart costs grows with the points drawn, not with the
# raw rows behind them (a 30-day range of one 8-GPU host at 1 s would be 20M raw rows).
HOST_RANGES: dict[str, timedelta] = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
HOST_RANGE_DEFAULT = "6h"
MINUTE_ROLLUP_MAX_SPAN = timedelta(hours=24)
# An agent is stale when it has not reported for three of its intervals, and never sooner than
# ``settings.HOST_STALE_SECONDS`` (5 minutes): a 1 s agent that misses 3 s behind a slow network
# is not down.
STALE_INTERVALS = 3

# ``bucket`` is the bucket start in epoch seconds: charts send numbers, not ISO strings (a 24-hour
# page of an 8-GPU host has 11,520 rows; building and sending strings for them cost most of a second).
HOST_TELEMETRY_COLUMNS = [
    "bucket",
    "accelerator_id",
    "power_avg_w",
    "energy_j",
    "gpu_util_avg",
    "mem_used_avg_bytes",
    "mem_total_bytes",
    "sm_clock_avg_mhz",
    "mem_clock_avg_mhz",
    "temperature_max_c",
    *(f"{name}_{part}" for name in PROFILING_FIELDS for part in ("avg", "samples")),
]


def rollup_width_for(*, span: timedelta) -> int:
    """Bucket width (s) of the rollups a chart over ``span`` reads: 60 up to a day, 3600 beyond. Pure."""
    return 60 if span <= MINUTE_ROLLUP_MAX_SPAN else 3600


def stale_min() -> timedelta:
    """The shortest stale limit, whatever the agent's interval (``HOST_STALE_SECONDS``)."""
    return timedelta(seconds=settings.HOST_STALE_SECONDS)


def stale_after(*, interval_s: float | None) -> timedelta:
    """How long without a report before an agent counts as stale."""
    if not interval_s or interval_s <= 0:
        return stale_min()
    return max(stale_min(), timedelta(seconds=STALE_INTERVALS * float(interval_s)))


def agent_is_stale(*, last_seen_at: datetime | None, now: datetime, interval_s: float | None = None) -> bool:
    """True when the agent never reported or has been silent past ``stale_after``. Pure."""
    if last_seen_at is None:
        return True
    return now - last_seen_at > stale_after(interval_s=interval_s)


# The one freshness rule behind every live figure ("now", "reporting", live power and
# utilisation): a GPU's newest sample counts only while its host is live (``agent_is_stale``) and
# the sample itself is within the same limit. A stale GPU keeps its last state on the grid, marked
# as such, but no live figure counts it.
def freshness_definition() -> str:
    """The freshness rule in words, for the pages that show live figures."""
    return (
        "Live figures count only GPUs whose host reported and whose newest sample is no older than "
        f"the stale limit: three of the agent's sampling intervals, and never under "
        f"{_duration_text(stale_min())}. A stale host's GPUs are left out of every live figure."
    )


def _duration_text(limit: timedelta) -> str:
    seconds = limit.total_seconds()
    return f"{round(seconds / 60)} min" if seconds >= 120 else f"{round(seconds)} s"


def stale_limit_text(limits: Sequence[timedelta]) -> str:
    """The stale limit of the hosts shown, in words: "5 min", or "5-15 min" where agents sample
    at different intervals."""
    if not limits:
        return _duration_text(stale_min())
    low, high = _duration_text(min(limits)), _duration_text(max(limits))
    if low == high:
        return low
    return f"{low.removesuffix(' min')}-{high}" if high.endswith(" min") else f"{low}-{high}"


def fleet_live_summary(*, grid: Sequence[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """The live figures of a hosts grid (``host_grid``), as the hosts page and the overview both
    show them, so the two always agree.

    - ``hosts`` = ``hosts_live`` + ``hosts_stale`` (by ``agent_is_stale``);
    - ``gpus`` = ``gpus_live`` + ``gpus_stale``: a GPU is live ("reporting now") when it has a
      sample and neither it nor its host is stale; a GPU that never sent one counts as stale;
    - ``throttled_now``: live GPUs whose newest sample is throttled;
    - ``as_of`` and ``stale_limit``: how fresh the live figures are.
    """
    gpus = [gpu for item in grid for gpu in item["gpus"]]
    hosts_stale = sum(1 for item in grid if item["stale"])
    gpus_live = sum(1 for gpu in gpus if gpu["live"])
    return {
        "hosts": len(grid),
        "hosts_live": len(grid) - hosts_stale,
        "hosts_stale": hosts_stale,
        "gpus": len(gpus),
        "gpus_live": gpus_live,
        "gpus_stale": len(gpus) - gpus_live,
        "throttled_now": sum(1 for gpu in gpus if gpu["throttled"]),
        "as_of": now,
        "stale_limit": stale_limit_text([item["stale_after"] for item in grid]),
        "definition": freshness_definition(),
    }


def fleet_live(*, scope: Scope, now: datetime) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The visible hosts grid and its live figures (``fleet_live_summary``). Three queries."""
    grid = host_grid(scope=scope, now=now)
    return grid, fleet_live_summary(grid=grid, now=now)


def _number(value: Any) -> float | None:
    """A JSON value as a float, or None for missing and non-numeric (sentinels are NULL already)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def host_interval_s(*, host: Host) -> float | None:
    """The agent's sampling interval (s) if it reported one in its facts. No query."""
    return _number((host.facts or {}).get("interval_s"))


def gpu_live_state(
    *, accelerator: Accelerator, now: datetime, interval_s: float | None = None, host_stale: bool = False
) -> dict[str, Any]:
    """One GPU's newest sample (``last_state``) as the grid shows it, with derived flags. No query.

    Memory total falls back to the GPU's registered memory and the power limit to its registered
    limit, so a sample without them still shows "used of total" and "draw of limit". ``stale``
    follows ``freshness_definition`` (the GPU's sample or its host, ``host_stale``, past the stale
    limit); ``live`` is a fresh sample, and ``throttled`` means throttled now, so a stale GPU is
    never counted throttled (``was_throttled`` keeps what its last sample said).
    """
    state = accelerator.last_state or {}
    power = _number(state.get("power_w"))
    limit = accelerator.power_limit_w
    mem_used = _number(state.get("mem_used_bytes"))
    mem_total = _number(state.get("mem_total_bytes")) or (
        float(accelerator.memory_bytes) if accelerator.memory_bytes else None
    )
    reasons = state.get("throttle_reasons")
    throttled = isinstance(reasons, int) and (reasons & THROTTLE_MASK) != 0
    stale = host_stale or agent_is_stale(
        last_seen_at=accelerator.last_seen_at, now=now, interval_s=interval_s
    )
    return {
        "id": accelerator.pk,
        "index": accelerator.index,
        "uuid": accelerator.uuid,
        "name": accelerator.name
        or (str(accelerator.accelerator_type) if accelerator.accelerator_type else ""),
        "type": accelerator.accelerator_type.name if accelerator.accelerator_type else "unknown",
        "gpu_util": _number(state.get("gpu_util")),
        "power_w": power,
        "power_limit_w": limit,
        "power_pct": round(100.0 * power / limit, 1) if power is not None and limit else None,
        "mem_used_gib": mem_used / 2**30 if mem_used is not None else None,
        "mem_total_gib": mem_total / 2**30 if mem_total is not None else None,
        "mem_pct": round(100.0 * mem_used / mem_total, 1) if mem_used is not None and mem_total else None,
        "temperature_c": _number(state.get("temperature_c")),
        "throttled": throttled and not stale,
        "was_throttled": throttled and stale,
        "throttle_reasons": throttle_reason_names(reasons),
        "last_seen_at": accelerator.last_seen_at,
        "stale": stale,
        "has_state": bool(state),
        "live": bool(state) and not stale,
    }


def host_grid(*, scope: Scope, now: datetime) -> list[dict[str, Any]]:
    """Every visible host with its GPUs' live state, for the hosts grid. Three queries.

    Reads ``Accelerator.last_state`` (kept by ingest), never raw telemetry, so the grid costs the
    same whatever the sampling rate.
    """
    grid = []
    for host in host_list(scope=scope):
        interval = host_interval_s(host=host)
        stale = agent_is_stale(last_seen_at=host.last_seen_at, now=now, interval_s=interval)
        gpus = [
            gpu_live_state(accelerator=gpu, now=now, interval_s=interval, host_stale=stale)
            for gpu in host.accelerators.all()
        ]
        grid.append(
            {
                "host": host,
                "gpus": gpus,
                "stale": stale,
                "stale_after": stale_after(interval_s=interval),
                "throttled": sum(1 for gpu in gpus if gpu["throttled"]),
                "gpu_types": gpu_types_summary([gpu["type"] for gpu in gpus]),
                "mixed_types": len({gpu["type"] for gpu in gpus}) > 1,
            }
        )
    return grid


def gpu_types_summary(types: list[str]) -> str:
    """A host's GPUs by type, most common first: 8× H100 SXM 80GB, or 4× H100 SXM 80GB + 2× L4. Pure."""
    counts = Counter(types)
    return " + ".join(
        f"{n}× {name}" for name, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    )


def host_get_visible(*, host_id: int, scope: Scope) -> Host:
    """The host if the caller may see it; ``Host.DoesNotExist`` otherwise (a 404, not a 403)."""
    return host_list(scope=scope).get(pk=host_id)


def point_step_for(*, span: timedelta) -> int:
    """Seconds between points drawn over ``span``: about 300 points or fewer per GPU, never finer
    than the rollup read. A day of minute rollups is drawn as 5-minute means (1,440 points per GPU
    is more than the chart has pixels, and cost 0.35 s a page for an 8-GPU host). Pure."""
    width = rollup_width_for(span=span)
    if span <= timedelta(hours=6):
        return width
    if span <= MINUTE_ROLLUP_MAX_SPAN:
        return 300
    return width


def host_telemetry(*, host_id: int, start: datetime, end: datetime) -> tuple[int, int, pd.DataFrame]:
    """Per-GPU telemetry of one host over [start, end): ``(width_s, step_s, frame)``. One query.

    Reads the rollups of ``rollup_width_for`` through the index ``(width_s, host, bucket)`` and
    merges them into ``point_step_for`` bins in the database: sample-weighted means (each rollup
    carries its sample counts), summed energy, maxima of memory total and temperature; the DCGM
    profiling counters' means come with their counts (``{name}_avg``, ``{name}_samples``).
    """
    width = rollup_width_for(span=end - start)
    step = point_step_for(span=end - start)
    sql = """
        SELECT extract(epoch FROM date_bin(make_interval(secs => %(step)s), bucket, %(origin)s))::float8 AS bin,
               accelerator_id,
               sum(power_avg_w * power_samples) / nullif(sum(power_samples), 0),
               sum(energy_j),
               sum(gpu_util_avg * gpu_util_samples) / nullif(sum(gpu_util_samples), 0),
               sum(mem_used_avg_bytes * mem_used_samples) / nullif(sum(mem_used_samples), 0),
               max(mem_total_bytes)::float8,
               sum(sm_clock_avg_mhz * sm_clock_samples) / nullif(sum(sm_clock_samples), 0),
               sum(mem_clock_avg_mhz * mem_clock_samples) / nullif(sum(mem_clock_samples), 0),
               max(temperature_max_c){profiling}
        FROM fleet_telemetryrollup
        WHERE width_s = %(width)s AND host_id = %(host)s AND bucket >= %(start)s AND bucket < %(end)s
        GROUP BY bin, accelerator_id
        ORDER BY bin, accelerator_id
    """
    params: dict[str, Any] = {
        "width": width,
        "step": step,
        "origin": datetime(2000, 1, 1, tzinfo=UTC),
        "host": host_id,
        "start": start,
        "end": end,
    }
    return width, step, _frame(sql.format(profiling=_PROFILING_MEANS_COUNTED), params, HOST_TELEMETRY_COLUMNS)


# Each profiling counter's sample-weighted mean over the rollups read (NULL where none).
_PROFILING_MEANS = "".join(
    f",\n               sum({name}_avg * {name}_samples) / nullif(sum({name}_samples), 0)"
    for name in PROFILING_FIELDS
)
# The same with the count behind each mean (the host page's card re-weights the bins by it).
_PROFILING_MEANS_COUNTED = "".join(
    f",\n               sum({name}_avg * {name}_samples) / nullif(sum({name}_samples), 0), sum({name}_samples)"
    for name in PROFILING_FIELDS
)


def run_window_profiling(
    *, host_id: int | None, accelerator_type_id: int | None, start: datetime, end: datetime | None
) -> tuple[list[dict[str, Any]], dict[int, dict[str, float | None]]]:
    """A run's DCGM profiling counters (the run page's card): the GPUs of its host of its
    accelerator type, as costing picks them (``costs.run_cost_services``: ``id``, ``index``,
    ``uuid``), and ``gpu_profiling_averages`` over the minute rollups from ``start`` to ``end``
    (``charts.profiling_rows`` makes the card's rows of the two). Nothing without a host or an
    end. Two queries."""
    if host_id is None or end is None:
        return [], {}
    rows = list(
        Accelerator.objects.physical()
        .filter(host_id=host_id, accelerator_type_id=accelerator_type_id)
        .order_by("index", "uuid")
        .values_list("pk", "index", "uuid")
    )
    gpus: list[dict[str, Any]] = [{"id": pk, "index": index, "uuid": uuid} for pk, index, uuid in rows]
    averages = gpu_profiling_averages(
        accelerator_ids=[pk for pk, _, _ in rows], start=start, end=end, width_s=60
    )
    return gpus, averages


def gpu_profiling_averages(
    *, accelerator_ids: Sequence[int], start: datetime, end: datetime, width_s: int | None = None
) -> dict[int, dict[str, float | None]]:
    """Each GPU's DCGM profiling counters (``partials.PROFILING_FIELDS``, in %) over [start,
    end): the sample-weighted means of its rollups (``width_s``, else minute rollups up to a
    day and hour rollups beyond, as the host page's charts), None for a counter it never sent. GPUs that sent none of
    them are absent: a page shows nothing for them, never 0. One query."""
    if not accelerator_ids:
        return {}
    sql = f"""
        SELECT accelerator_id{_PROFILING_MEANS}
        FROM fleet_telemetryrollup
        WHERE width_s = %(width)s AND accelerator_id = ANY(%(gpus)s)
          AND bucket >= %(start)s AND bucket < %(end)s
          AND ({" OR ".join(f"{name}_samples > 0" for name in PROFILING_FIELDS)})
        GROUP BY accelerator_id
    """
    params: dict[str, Any] = {
        "width": width_s or rollup_width_for(span=end - start),
        "gpus": list(accelerator_ids),
        "start": start,
        "end": end,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0]: dict(zip(PROFILING_FIELDS, row[1:], strict=True)) for row in cursor.fetchall()}


# --- Throttling and GPU health: one definition for the overview and the hosts pages -------------

# NVML clocks-event reasons counted as throttling (``rollup_services.THROTTLE_MASK``), by name.
THROTTLE_REASONS: dict[int, str] = {
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x20: "thermal (software)",
    0x40: "thermal (hardware)",
    0x80: "power brake",
}
THROTTLING_DEFINITION = (
    "Share of GPU-time in which the driver slowed the clocks for power or heat (power cap, "
    "power brake, thermal or hardware slowdown), from the hour rollups' samples."
)


def throttle_reason_names(reasons: Any) -> list[str]:
    """The throttling reasons set in an NVML bitmask, by name (none for an idle or app clock). Pure."""
    if not isinstance(reasons, int):
        return []
    return [name for bit, name in THROTTLE_REASONS.items() if reasons & bit]


def fleet_throttling(
    *, scope: Scope, now: datetime, hours: int = 24, live: Sequence[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Throttling of the visible fleet, as the overview and the hosts page both show it:

    - ``share_pct``: throttled samples over all samples of the last ``hours`` (hour rollups), the
      share of GPU-time slowed for power or heat (``THROTTLING_DEFINITION``), None without data;
    - ``gpus`` and ``gpus_throttled``: the GPUs that reported in the window, and how many of them
      were throttled at all in it (the old "throttled" figure, kept for the hover text);
    - ``now``: live GPUs whose newest sample is throttled (the hosts grid's badges), of
      ``reporting``, the live GPUs (``freshness_definition``: a stale GPU is in neither).

    ``live``: the GPUs' ``gpu_live_state`` where the caller has them (the hosts grid), else
    they are read (``host_grid``). One aggregate over at most GPUs × hours rollup rows, and the
    grid's three queries without ``live``.
    """
    team_filter, team_params = scope.sql_filter("h.team_id")
    sql = f"""
        SELECT count(*), sum(samples), sum(throttled), count(*) FILTER (WHERE throttled > 0)
        FROM (
            SELECT r.accelerator_id, sum(r.samples) AS samples, sum(r.throttled_samples) AS throttled
            FROM fleet_telemetryrollup r
            JOIN fleet_host h ON h.id = r.host_id
            WHERE r.width_s = 3600 AND r.bucket >= %(start)s AND r.bucket < %(end)s {team_filter}
            GROUP BY r.accelerator_id
        ) per_gpu
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {"start": now - timedelta(hours=hours), "end": now, **team_params})
        gpus, samples, throttled, gpus_throttled = cursor.fetchone()
    if live is None:
        live = [gpu for item in host_grid(scope=scope, now=now) for gpu in item["gpus"]]
    # Live figures by ``freshness_definition``: a stale GPU's last sample is not "now".
    throttled_now = sum(1 for gpu in live if gpu["throttled"])
    reporting = sum(1 for gpu in live if gpu["live"])
    return {
        "hours": hours,
        "gpus": gpus or 0,
        "gpus_throttled": gpus_throttled or 0,
        "share_pct": (float(throttled) / float(samples) * 100.0) if samples else None,
        "now": throttled_now,
        "reporting": reporting,
        "definition": THROTTLING_DEFINITION,
    }


# "Busy": one definition for the overview's saturation card and the hosts page. A GPU counts as
# busy when its utilisation, as the hosts grid writes it (a whole per cent, half up), is 90% or
# more: a GPU shown at "90%" is busy, one at 89.4% is not. The overview said "0% above 90% busy"
# beside a hosts page whose GPUs read 90-97%: it took each GPU's mean over 24 h, with "> 90".
BUSY_UTIL_PCT = 90
BUSY_DEFINITION = (
    "A GPU is busy when its utilisation, in whole per cent as the hosts page shows it, is 90% or "
    "more. Now: by each GPU's newest sample. Over the window: the share of GPU-time in hours whose "
    "mean (the hour rollups) is busy."
)


def is_busy(util: float | None) -> bool:
    """Whether a utilisation (%) counts as busy (``BUSY_DEFINITION``): shown as 90% or more."""
    return util is not None and math.isfinite(util) and math.floor(util + 0.5) >= BUSY_UTIL_PCT


def fleet_busy(
    *, scope: Scope, now: datetime, hours: int = 24, live: Sequence[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """How busy the visible fleet is, as the overview and the hosts page both show it:

    - ``now``: live GPUs whose newest sample is busy (``is_busy``), of ``reporting`` (live GPUs
      with a utilisation in their newest sample, ``freshness_definition``: a stale GPU is in
      neither): the hosts grid's "Util" figures, counted;
    - ``share_pct``: the share of GPU-time of the last ``hours`` in hours whose mean is busy (hour
      rollups, weighted by their samples, the rule of ``is_busy`` in SQL), None without data.

    ``live``: the GPUs' ``gpu_live_state`` where the caller has them (the hosts grid), else they
    are read (``host_grid``). One aggregate query over at most GPUs × hours rollup rows, and the
    grid's three queries without ``live``."""
    team_filter, team_params = scope.sql_filter("h.team_id")
    sql = f"""
        SELECT sum(r.gpu_util_samples),
               sum(r.gpu_util_samples) FILTER (WHERE floor(r.gpu_util_avg + 0.5) >= %(busy)s)
        FROM fleet_telemetryrollup r
        JOIN fleet_host h ON h.id = r.host_id
        WHERE r.width_s = 3600 AND r.bucket >= %(start)s AND r.bucket < %(end)s
              AND r.gpu_util_avg IS NOT NULL {team_filter}
    """
    with connection.cursor() as cursor:
        cursor.execute(
            sql, {"start": now - timedelta(hours=hours), "end": now, "busy": BUSY_UTIL_PCT, **team_params}
        )
        samples, busy = cursor.fetchone()
    if live is None:
        live = [gpu for item in host_grid(scope=scope, now=now) for gpu in item["gpus"]]
    shown = [gpu["gpu_util"] for gpu in live if gpu["live"] and gpu["gpu_util"] is not None]
    return {
        "hours": hours,
        "threshold": BUSY_UTIL_PCT,
        "now": sum(1 for u in shown if is_busy(u)),
        "reporting": len(shown),
        "share_pct": (float(busy or 0) / float(samples) * 100.0) if samples else None,
        "definition": BUSY_DEFINITION,
    }


# The host page's health charts, next to ``HOST_TELEMETRY_COLUMNS``.
HOST_HEALTH_COLUMNS = ["bucket", "accelerator_id", "throttled_pct", "ecc_errors", "xid_errors"]


def host_health_telemetry(*, host_id: int, start: datetime, end: datetime) -> pd.DataFrame:
    """Per GPU and bin of one host over [start, end), from the same rollups and bins as
    ``host_telemetry``: the share of samples throttled for power or heat (%), and the ECC and XID
    error counters (the bin's maxima: counters only grow, so a step is a new error). One query."""
    width = rollup_width_for(span=end - start)
    step = point_step_for(span=end - start)
    sql = """
        SELECT extract(epoch FROM date_bin(make_interval(secs => %(step)s), bucket, %(origin)s))::float8 AS bin,
               accelerator_id,
               100.0 * sum(throttled_samples) / nullif(sum(samples), 0),
               max(ecc_errors_max)::float8,
               max(xid_errors_max)::float8
        FROM fleet_telemetryrollup
        WHERE width_s = %(width)s AND host_id = %(host)s AND bucket >= %(start)s AND bucket < %(end)s
        GROUP BY bin, accelerator_id
        ORDER BY bin, accelerator_id
    """
    params: dict[str, Any] = {
        "width": width,
        "step": step,
        "origin": datetime(2000, 1, 1, tzinfo=UTC),
        "host": host_id,
        "start": start,
        "end": end,
    }
    return _frame(sql, params, HOST_HEALTH_COLUMNS)


def telemetry_rollup_backlog() -> tuple[int, float | None]:
    """Dirty ranges waiting for the rollups, and the age in seconds of the oldest (the rollup lag)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), extract(epoch FROM now() - min(created_at))::float8 FROM fleet_telemetrydirtyrange"
        )
        count, age = cursor.fetchone()
    return int(count), None if age is None else max(0.0, float(age))


def hour_rollup_backlog() -> tuple[int, float | None]:
    """Hour ranges whose hour rollups the drains left for later (``RollupHourBacklog``), and how
    long ago the hours were last redone while some wait (None when none wait)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT jsonb_array_length(ranges), extract(epoch FROM now() - refreshed_at)::float8 "
            "FROM fleet_rolluphourbacklog WHERE id = 1"
        )
        row = cursor.fetchone()
    if row is None or not row[0]:
        return 0, None
    count, age = row
    return int(count), None if age is None else max(0.0, float(age))


def rollup_lag_checks() -> list[Check]:
    """The fleet's pipeline probe: the rollup lag, and the hour rollups' (redone about once a
    minute by the drains), each against ``PIPELINE_ROLLUP_LAG_LIMIT_S``."""
    pending, age = telemetry_rollup_backlog()
    hour_ranges, hour_age = hour_rollup_backlog()
    limit = float(settings.PIPELINE_ROLLUP_LAG_LIMIT_S)
    return [
        Check(
            name="rollups.lag",
            value=None if age is None else round(age, 1),
            limit=limit,
            ok=age is None or age <= limit,
            detail={"dirty_ranges": pending},
        ),
        Check(
            name="rollups.hour_lag",
            value=None if hour_age is None else round(hour_age, 1),
            limit=limit,
            ok=hour_age is None or hour_age <= limit,
            detail={"hour_ranges": hour_ranges},
        ),
    ]


# --- The host page: who ran on each GPU -----------------------------------------------------------


@dataclass(frozen=True)
class GpuHolder:
    """One workload's hold on a device over a period: ``seconds`` is its ∫ share dt (device-seconds
    held), ``share`` that over the period's seconds (the fraction of the device's time)."""

    workload: Workload
    seconds: float
    share: float

    @property
    def share_pct(self) -> float:
        return self.share * 100

    @property
    def hours(self) -> float:
        return self.seconds / 3600


@dataclass(frozen=True)
class GpuHolders:
    """Who held one GPU or MIG instance over a period. ``held`` is the holders' shares added up (at
    most 1: shares held at any instant add up to at most 1, and one workload never overlaps itself on
    a device), ``idle`` the rest. A MIG GPU whose instances held anything lists them in
    ``instances`` (each carrying ``weight`` = its slices of the GPU's); its own ``held`` is then the
    instances' weighted sum, as the allocation splits it (docs/attribution.md)."""

    accelerator: Accelerator
    holders: list[GpuHolder]
    held: float
    idle: float
    weight: float = 1.0
    instances: list[GpuHolders] = field(default_factory=list)

    @property
    def idle_pct(self) -> float:
        return self.idle * 100

    @property
    def held_pct(self) -> float:
        return self.held * 100


_HELD_SQL = """
SELECT a.accelerator_id, a.workload_id,
       SUM(a.share * EXTRACT(EPOCH FROM LEAST(a."end", %(end)s) - GREATEST(a.start, %(start)s))) AS held
FROM fleet_gpuattribution a
WHERE a.host_id = %(host_id)s AND a.start < %(end)s AND a."end" > %(start)s
GROUP BY a.accelerator_id, a.workload_id
"""


def _device_holders(
    accelerator: Accelerator, held: dict[int, float], workloads: dict[int, Workload], seconds: float
) -> GpuHolders:
    holders = sorted(
        (GpuHolder(workload=workloads[w], seconds=s, share=s / seconds) for w, s in held.items()),
        key=lambda h: (-h.seconds, h.workload.pk),
    )
    total = min(1.0, sum(h.share for h in holders))
    return GpuHolders(accelerator=accelerator, holders=holders, held=total, idle=1.0 - total)


def host_gpu_holders(*, host: Host, start: datetime, end: datetime) -> list[GpuHolders]:
    """Per physical GPU of ``host`` (by index), the workloads that held it in [start, end) with
    their share of the time, and the idle rest; MIG instances under their GPU. One query, and one
    each for the workloads and the MIG instances where any held a device."""
    seconds = (end - start).total_seconds()
    with connection.cursor() as cursor:
        cursor.execute(_HELD_SQL, {"host_id": host.pk, "start": start, "end": end})
        rows = cursor.fetchall()
    held: dict[int, dict[int, float]] = {}
    for accelerator_id, workload_id, value in rows:
        held.setdefault(accelerator_id, {})[workload_id] = float(value)
    workloads = Workload.objects.in_bulk({w for by in held.values() for w in by}) if held else {}
    gpus = sorted(host_accelerators(host=host), key=lambda a: (a.index, a.uuid))
    # MIG instances are read only where one was held (the GPUs come prefetched with the host).
    others = set(held) - {gpu.pk for gpu in gpus}
    instances: dict[str, list[Accelerator]] = {}
    if others:
        for device in (
            Accelerator.objects.filter(pk__in=others).exclude(parent_uuid="").order_by("index", "uuid")
        ):
            instances.setdefault(device.parent_uuid, []).append(device)
    out = []
    for gpu in gpus:
        parts = []
        total = gpu.compute_slices or 0
        for instance in instances.get(gpu.uuid, []):
            if instance.pk not in held:
                continue
            weight = (instance.compute_slices or 0) / total if total else 0.0
            part = _device_holders(instance, held[instance.pk], workloads, seconds)
            parts.append(
                GpuHolders(
                    accelerator=instance, holders=part.holders, held=part.held, idle=part.idle, weight=weight
                )
            )
        if parts:
            busy = min(1.0, sum(p.weight * p.held for p in parts))
            out.append(GpuHolders(accelerator=gpu, holders=[], held=busy, idle=1.0 - busy, instances=parts))
        else:
            out.append(_device_holders(gpu, held.get(gpu.pk, {}), workloads, seconds))
    return out
