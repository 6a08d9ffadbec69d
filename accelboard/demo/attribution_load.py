"""The demo load's GPU attribution: who ran on each GPU over the telemetry days.

``attribution_write`` stores ``accelboard.demo.attribution_generator``'s intervals as the ingest
path (``fleet.attribution_services``) would: the workloads per (team of the host, kind, uid) in
one bulk insert, the intervals (already cut at midnight UTC) by binary COPY into the daily
partitions of ``fleet_gpuattribution``, made with telemetry's (``telemetry_partitions_ensure``).
Called by ``accelboard.demo.loader`` (its *attribution* step); the MIG instances are registered
with the hosts (``fleet_load.hosts_create``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import connection

from accelboard.fleet.models import ATTRIBUTION_COLUMNS, Accelerator, Workload
from accelboard.fleet.partition_services import ATTRIBUTION_TABLE, telemetry_partitions_ensure

from . import attribution_generator, generator, serving_plan

_COPY_TYPES = ("timestamptz", "timestamptz", "int8", "int8", "int8", "float8", "text", "int8", "float4")


def _moment(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def attribution_write(
    *,
    config: generator.DemoConfig,
    hosts: list[generator.HostPlan],
    telemetry: list[generator.HostTelemetry],
    team_ids: dict[str, int],
    host_ids: dict[str, int],
) -> dict[str, int]:
    """Store every host's intervals over the telemetry days; return the rows written."""
    instances = attribution_generator.fleet_instances(config.seed, hosts)
    history = attribution_generator.attribution_history(
        hosts=hosts,
        telemetry=telemetry,
        instances=instances,
        interval_s=config.telemetry_interval_s,
        canary_window=serving_plan.canary_window(
            config.telemetry_start, config.telemetry_end, config.serving_interval_s
        ),
    )
    devices = dict(Accelerator.objects.filter(host_id__in=host_ids.values()).values_list("uuid", "id"))
    seen: dict[tuple[int, str, str], tuple[attribution_generator.WorkloadPlan, int, int]] = {}
    for host in hosts:
        team_id = team_ids[host.team]
        for interval in history[host.hostname]:
            key = (team_id, interval.workload.kind, interval.workload.uid)
            was = seen.get(key)
            first, last = (
                (interval.start, interval.end)
                if was is None
                else (min(was[1], interval.start), max(was[2], interval.end))
            )
            seen[key] = (interval.workload, first, last)
    if not seen:
        return {}
    Workload.objects.bulk_create(
        [
            Workload(
                team_id=team_id,
                kind=kind,
                uid=uid,
                namespace=workload.namespace,
                name=workload.name,
                container=workload.container,
                labels=dict(workload.labels),
                user=workload.user,
                account=workload.account,
                partition=workload.partition,
                first_seen_at=_moment(first),
                last_seen_at=_moment(last),
            )
            for (team_id, kind, uid), (workload, first, last) in seen.items()
        ],
        batch_size=2000,
    )
    workload_ids = {
        (team_id, kind, uid): pk
        for pk, team_id, kind, uid in Workload.objects.filter(team_id__in=set(team_ids.values())).values_list(
            "id", "team_id", "kind", "uid"
        )
    }
    telemetry_partitions_ensure(start=_moment(config.telemetry_start), end=_moment(config.telemetry_end - 1))
    rows: list[tuple[Any, ...]] = []
    for host in hosts:
        team_id, host_id = team_ids[host.team], host_ids[host.hostname]
        for interval in history[host.hostname]:
            workload = interval.workload
            rows.append(
                (
                    _moment(interval.start),
                    _moment(interval.end),
                    host_id,
                    devices[interval.device],
                    workload_ids[(team_id, workload.kind, workload.uid)],
                    interval.share,
                    interval.basis,
                    None,
                    interval.sm_util,
                )
            )
    connection.ensure_connection()
    with connection.connection.cursor() as cursor:
        columns = ", ".join(f'"{name}"' for name in ATTRIBUTION_COLUMNS)
        with cursor.copy(f"COPY {ATTRIBUTION_TABLE} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(_COPY_TYPES))
            for row in rows:
                copy.write_row(row)
        cursor.execute(f"ANALYZE {ATTRIBUTION_TABLE}")
    return {"gpu_workloads": len(seen), "gpu_attribution_intervals": len(rows)}
