"""Scheduled fleet jobs: partitions ahead and retention, and rollup refresh."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.db import OperationalError

from accelboard.core.services import job_run_record

from . import services


@shared_task(
    bind=True, autoretry_for=(OperationalError,), retry_backoff=True, retry_jitter=True, max_retries=3
)
def telemetry_partitions_maintain(self) -> dict[str, int]:  # type: ignore[no-untyped-def]
    now = datetime.now(UTC)
    with job_run_record(name="telemetry_partitions_maintain", task_id=self.request.id or "") as job:
        created = services.telemetry_partitions_ensure(
            start=now - timedelta(days=1), end=now + timedelta(days=settings.TELEMETRY_PARTITIONS_AHEAD_DAYS)
        )
        dropped = services.telemetry_retention_apply(today=now.date())
        job.rows = len(created) + len(dropped)
        job.detail = {"created": [str(d) for d in created], "dropped": [str(d) for d in dropped]}
    return {"created": len(created), "dropped": len(dropped)}


@shared_task(
    bind=True, autoretry_for=(OperationalError,), retry_backoff=True, retry_jitter=True, max_retries=3
)
def telemetry_rollups_refresh(self, minutes: int = 10) -> int:  # type: ignore[no-untyped-def]
    """Recompute the last ``minutes`` of minute rollups and the hours they touch."""
    now = datetime.now(UTC)
    with job_run_record(name="telemetry_rollups_refresh", task_id=self.request.id or "") as job:
        job.rows = services.telemetry_rollups_refresh(start=now - timedelta(minutes=minutes), end=now)
    return job.rows
