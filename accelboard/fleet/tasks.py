"""Scheduled and on-demand fleet jobs: partitions ahead and retention, and rollup refresh.

Each task is a thin interface to a service in ``services``: it parses primitives, records the run
in ``JobRun`` and returns a small JSON-able summary. Retries are for lost database connections
only; a malformed argument fails at once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.db import OperationalError

from accelboard.core.services import job_run_record

from . import services

_RETRY = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "retry_jitter": True,
    "max_retries": 3,
}


def _parse_iso(name: str, value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} is not an ISO 8601 timestamp") from None
    if moment.tzinfo is None:
        raise ValueError(f"{name}={value!r} has no timezone")
    return moment.astimezone(UTC)


@shared_task(bind=True, **_RETRY)
def telemetry_partitions_maintain(self) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Create today's and the next days' partitions, then apply retention."""
    now = datetime.now(UTC)
    with job_run_record(name="telemetry_partitions_maintain", task_id=self.request.id or "") as job:
        created = services.telemetry_partitions_ensure(
            start=now - timedelta(days=1), end=now + timedelta(days=settings.TELEMETRY_PARTITIONS_AHEAD_DAYS)
        )
        dropped = services.telemetry_retention_apply(today=now.date())
        job.rows = len(created) + len(dropped)
        job.detail = {"created": [str(d) for d in created], "dropped": [str(d) for d in dropped]}
    return {"created": len(created), "dropped": len(dropped)}


@shared_task(bind=True, **_RETRY)
def telemetry_rollups_refresh(self, minutes: int = 10) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """The periodic pass: drain dirty ranges and recompute the last ``minutes`` as a safety net
    (a batch whose enqueue was lost still reaches the rollups within a minute)."""
    now = datetime.now(UTC)
    with job_run_record(name="telemetry_rollups_refresh", task_id=self.request.id or "") as job:
        result = services.telemetry_rollups_drain(also=[(now - timedelta(minutes=int(minutes)), now)])
        job.rows = result.rows
        job.detail = {"ranges": result.ranges, "minute": result.minute_rows, "hour": result.hour_rows}
    return {"rows": result.rows, "ranges": result.ranges}


@shared_task(bind=True, **_RETRY)
def telemetry_rollups_refresh_range(self, start_iso: str, end_iso: str) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Enqueued by ingest after a batch commits: roll up [start, end] of sample times.

    The range is first recorded as dirty (its own commit), then every dirty range is drained
    at once: of many batches enqueued in a burst, the first drain does the work for all and the
    others find nothing left. If the drain fails for good, the mark stays for the periodic pass.
    """
    start = _parse_iso("start_iso", start_iso)
    end = _parse_iso("end_iso", end_iso)
    services.telemetry_rollups_mark_dirty(start=start, end=end)
    with job_run_record(name="telemetry_rollups_refresh_range", task_id=self.request.id or "") as job:
        result = services.telemetry_rollups_drain()
        job.rows = result.rows
        job.detail = {"ranges": result.ranges, "start": start.isoformat(), "end": end.isoformat()}
    return {"rows": result.rows, "ranges": result.ranges}
