"""Celery tasks of the alerts app: thin interfaces to the checks (ids and primitives in, a small
JSON-able summary out, each run recorded in JobRun). Retries are for lost database connections
only; a missing run is not an error (it was deleted since)."""

from __future__ import annotations

from datetime import timedelta

from celery import Task, shared_task
from django.utils import timezone

from accelboard.benchmarks.models import Series
from accelboard.core.services import job_run_record
from accelboard.core.tasks import RETRY_ON_LOST_DATABASE

from .production_services import production_check
from .regression_services import run_check as _run_check
from .regression_services import series_rescore


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def run_check(self: Task, run_id: int) -> dict[str, list[int]]:
    """Check every series of a newly recorded run; enqueued by run_record after commit."""
    with job_run_record(name="alerts_run_check", task_id=self.request.id or "") as job:
        checks = _run_check(run_id=int(run_id))
        raised = [pk for c in checks for pk in c.raised]
        resolved = [pk for c in checks for pk in c.resolved]
        job.rows = len(checks)
        job.detail = {"run": int(run_id), "raised": raised, "resolved": resolved}
    return {"raised": raised, "resolved": resolved}


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def production_signals_check(self: Task, window_minutes: int = 15) -> dict[str, int]:
    """The beat pass over the last window of serving metrics and GPU rollups."""
    with job_run_record(name="alerts_production_check", task_id=self.request.id or "") as job:
        summary = production_check(now=timezone.now(), window=timedelta(minutes=int(window_minutes)))
        job.rows = summary.findings
        job.detail = {"skipped": summary.skipped, "raised": summary.raised, "resolved": summary.resolved}
    return {"findings": summary.findings, "raised": len(summary.raised), "resolved": len(summary.resolved)}


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def series_rescore_task(self: Task, series_id: int) -> list[dict[str, object]]:
    """Re-segment one series' history with the thresholds now in force (after a settings change)."""
    series = Series.objects.filter(pk=int(series_id)).first()
    if series is None:
        return []
    return [cp.to_dict() for cp in series_rescore(series=series)]
