"""Scheduled and on-demand fleet jobs: partitions ahead and retention, and rollup refresh.

Rollups are coalesced: ingest marks each batch's range dirty in its transaction and then calls
``telemetry_rollups_request``. Across every web process (and machine) one of them claims the
next drain in the database (``services.telemetry_rollups_claim``) and enqueues one
``telemetry_rollups_drain`` due ``ROLLUP_INTERVAL_S`` later; the others find a drain already due
and enqueue nothing, and skip asking again until it is due. The drain refreshes every dirty range
in one set-based pass under an advisory lock. A batch committed before a drain is due is covered
by it. A drain's cost follows the rows it rolls up, so this does not make draining cheaper
(docs/scaling.md measured it); it keeps the drains to one per interval however many web processes
and machines ask. The per-minute beat pass is the safety net for a lost enqueue.

Each task is a thin interface to a service in ``services``: it parses primitives, records the run
in ``JobRun`` and returns a small JSON-able summary. Retries are for lost database connections
only; a malformed argument fails at once.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.db import OperationalError, transaction

from accelboard.core.services import job_run_record

from . import services

log = logging.getLogger(__name__)

# One drain for the whole fleet at most this often, this long after the batch that claimed it.
ROLLUP_INTERVAL_S = 10.0
# Those drains redo the hour rollups (an hour row sums every minute row of its hour so far) at
# most this often; the per-minute pass redoes them whenever it runs. Hour rows lag by up to this.
ROLLUP_HOUR_INTERVAL_S = 60.0
# A process that lost the claim skips asking until this long before the claimed drain is due
# (a margin for the clocks of the database and the claimer's Celery countdown).
_DUE_MARGIN_S = 1.0
_skip_until = -1e9
_request_lock = threading.Lock()

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
def telemetry_partitions_maintain(self) -> dict[str, int]:
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
        if not also and not services.telemetry_rollups_lock_try():
            job.detail = {"skipped": "a drain is running"}
            return {"rows": 0, "ranges": 0, "skipped": 1}
        result = services.telemetry_rollups_drain(also=also)
        job.rows = result.rows
        job.detail = {"ranges": result.ranges, "minute": result.minute_rows, "hour": result.hour_rows}
    return {"rows": result.rows, "ranges": result.ranges}


@shared_task(bind=True, **_RETRY)
def telemetry_rollups_refresh_range(self, start_iso: str, end_iso: str) -> dict[str, int]:
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


@shared_task(bind=True, expires=300, **_RETRY)
def telemetry_rollups_drain(self) -> dict[str, int]:
    """Refresh every dirty range at once (``telemetry_rollups_request`` asks for it)."""
    with job_run_record(name="telemetry_rollups_drain", task_id=self.request.id or "") as job:
        result = services.telemetry_rollups_drain(hours_every_s=ROLLUP_HOUR_INTERVAL_S)
        job.rows = result.rows
        job.detail = {"ranges": result.ranges, "minute": result.minute_rows, "hour": result.hour_rows}
    return {"rows": result.rows, "ranges": result.ranges}


def telemetry_rollups_request(*, now: float | None = None) -> bool:
    """Ask for a drain after a batch committed; True when this call enqueued one.

    Not a task: called by ingest after its commit. A process asks the database at most once per
    drain (``services.telemetry_rollups_claim``): the caller that claims it enqueues the drain
    with a ``ROLLUP_INTERVAL_S`` countdown; every other batch until then, in any process, is
    covered by that drain and costs nothing. A database or broker failure is logged and left to
    the beat pass: the batch is committed and its dirty mark waits in the database.
    """
    global _skip_until
    moment = time.monotonic() if now is None else now
    with _request_lock:
        if moment < _skip_until:
            return False
        # Other threads of this process skip meanwhile: the drain this one claims or finds due
        # covers their batches (if the claim fails, the beat pass does).
        _skip_until = moment + ROLLUP_INTERVAL_S - _DUE_MARGIN_S
    try:
        claimed, due_in = services.telemetry_rollups_claim(interval_s=ROLLUP_INTERVAL_S)
    except Exception:  # noqa: BLE001 - the beat pass drains within a minute
        log.warning("could not claim a rollup drain; the per-minute pass will", exc_info=True)
        claimed, due_in = False, 0.0
    with _request_lock:
        _skip_until = moment + max(0.0, due_in - _DUE_MARGIN_S)
    if not claimed:
        return False
    try:
        telemetry_rollups_drain.apply_async(countdown=ROLLUP_INTERVAL_S)
    except Exception:  # noqa: BLE001 - any broker failure: the beat pass drains within a minute
        log.warning("could not enqueue a rollup drain; the per-minute pass will", exc_info=True)
        with _request_lock:
            _skip_until = -1e9
        try:
            services.telemetry_rollups_claim_release()
        except Exception:  # noqa: BLE001
            log.warning("could not release the rollup drain claim", exc_info=True)
        return False
    return True


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
