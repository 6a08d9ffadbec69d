"""Scheduled and on-demand fleet jobs: partitions ahead and retention, and rollup refresh.

Ingest marks each batch's range dirty in its transaction and, after the commit, asks for one
drain for the whole fleet (``rollup_request_services.telemetry_rollups_request``), which enqueues
``telemetry_rollups_drain`` here. The drain refreshes every dirty range in one set-based pass
under an advisory lock; the per-minute beat pass is the safety net for a lost enqueue.

Each task is a thin interface to a service (``partition_services``, ``rollup_services``): it
parses primitives, records the run in ``JobRun`` and returns a small JSON-able summary. Retries
are for lost database connections only; a malformed argument fails at once.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.db import transaction

from accelboard.core.services import job_run_record
from accelboard.core.tasks import RETRY_ON_LOST_DATABASE

from . import partition_services, rollup_services

log = logging.getLogger(__name__)

# Those drains redo the hour rollups (an hour row sums every minute row of its hour so far) at
# most this often; the per-minute pass redoes them whenever it runs. Hour rows lag by up to this.
ROLLUP_HOUR_INTERVAL_S = 60.0


def _parse_iso(name: str, value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} is not an ISO 8601 timestamp") from None
    if moment.tzinfo is None:
        raise ValueError(f"{name}={value!r} has no timezone")
    return moment.astimezone(UTC)


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def telemetry_partitions_maintain(self) -> dict[str, int]:
    """Create today's and the next days' partitions, then apply retention."""
    now = datetime.now(UTC)
    with job_run_record(name="telemetry_partitions_maintain", task_id=self.request.id or "") as job:
        created = partition_services.telemetry_partitions_ensure(
            start=now - timedelta(days=1), end=now + timedelta(days=settings.TELEMETRY_PARTITIONS_AHEAD_DAYS)
        )
        dropped = partition_services.telemetry_retention_apply(today=now.date())
        job.rows = len(created) + len(dropped)
        job.detail = {"created": [str(d) for d in created], "dropped": [str(d) for d in dropped]}
    return {"created": len(created), "dropped": len(dropped)}


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def telemetry_rollups_refresh(self, minutes: int = 0) -> dict[str, int]:
    """The periodic pass: drain the dirty ranges (a batch whose drain request was lost still
    reaches the rollups within a minute: its mark committed with its samples), and recompute
    the last ``minutes`` too when asked (0 by default: at 16,000 samples/s a 10-minute
    recompute every minute would be 10x the ingest's own rollup work).

    When a drain is running (its lock is held), the plain pass does nothing: the drains are
    alive, and each takes every mark committed before it starts; waiting for the lock would
    hold a process of the scheduled worker for as long as the drains run, which under a full
    fleet is most of the time. A mark whose request was lost while drains ran is taken by the
    next drain, or by this pass a minute later once they stop."""
    now = datetime.now(UTC)
    also = [(now - timedelta(minutes=int(minutes)), now)] if int(minutes) > 0 else []
    with (
        job_run_record(name="telemetry_rollups_refresh", task_id=self.request.id or "") as job,
        transaction.atomic(),
    ):
        if not also and not rollup_services.telemetry_rollups_lock_try():
            job.detail = {"skipped": "a drain is running"}
            return {"rows": 0, "ranges": 0, "skipped": 1}
        result = rollup_services.telemetry_rollups_drain(also=also)
        job.rows = result.rows
        job.detail = {"ranges": result.ranges, "minute": result.minute_rows, "hour": result.hour_rows}
    return {"rows": result.rows, "ranges": result.ranges}


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def telemetry_rollups_refresh_range(self, start_iso: str, end_iso: str) -> dict[str, int]:
    """Enqueued by ingest after a batch commits: roll up [start, end] of sample times.

    The range is first recorded as dirty (its own commit), then every dirty range is drained
    at once: of many batches enqueued in a burst, the first drain does the work for all and the
    others find nothing left. If the drain fails for good, the mark stays for the periodic pass.
    """
    start = _parse_iso("start_iso", start_iso)
    end = _parse_iso("end_iso", end_iso)
    rollup_services.telemetry_rollups_mark_dirty(start=start, end=end)
    with job_run_record(name="telemetry_rollups_refresh_range", task_id=self.request.id or "") as job:
        result = rollup_services.telemetry_rollups_drain()
        job.rows = result.rows
        job.detail = {"ranges": result.ranges, "start": start.isoformat(), "end": end.isoformat()}
    return {"rows": result.rows, "ranges": result.ranges}


@shared_task(bind=True, expires=300, **RETRY_ON_LOST_DATABASE)
def telemetry_rollups_drain(self) -> dict[str, int]:
    """Refresh every dirty range at once (``rollup_request_services.telemetry_rollups_request``
    asks for it)."""
    with job_run_record(name="telemetry_rollups_drain", task_id=self.request.id or "") as job:
        result = rollup_services.telemetry_rollups_drain(hours_every_s=ROLLUP_HOUR_INTERVAL_S)
        job.rows = result.rows
        job.detail = {"ranges": result.ranges, "minute": result.minute_rows, "hour": result.hour_rows}
    return {"rows": result.rows, "ranges": result.ranges}


@shared_task(bind=True, expires=50)
def pipeline_check(self) -> dict[str, object]:
    """Every minute, on the scheduled queue: log an error naming what lags (the bulk queue's
    oldest task, the rollup lag), which reaches the admins through Django's logging. A stalled
    scheduled queue cannot report itself: ``/healthz?detail=1`` and ``accelboard status`` do."""
    from accelboard.core.pipeline_selectors import pipeline_status

    with job_run_record(name="pipeline_check", task_id=self.request.id or "") as job:
        status = pipeline_status()
        lagging = [check.name for check in status.checks if not check.ok]
        job.rows = len(lagging)
        job.detail = status.as_dict()
    if lagging:
        log.error("the pipeline is lagging: %s (accelboard status)", ", ".join(lagging))
    return {"status": "ok" if not lagging else "lagging", "lagging": lagging}
