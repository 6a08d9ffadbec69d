"""Celery tasks of the canary app: thin interfaces to ``services.canary_checks_run``."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from accelboard.core.services import job_run_record

from .services import canary_checks_run


@shared_task(
    bind=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=3,
)
def canary_checks(self: Any) -> dict[str, int]:
    """Evaluate the active canary checks; a failing one opens (or refreshes) its alert."""
    with job_run_record(name="canary_checks", task_id=self.request.id or "") as job:
        outcomes = canary_checks_run()
        job.rows = len(outcomes)
        job.detail = {"verdicts": {str(o.check_id): o.verdict for o in outcomes}}
    return {"checks": len(outcomes), "alerts_created": sum(1 for o in outcomes if o.created)}
