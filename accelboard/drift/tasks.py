"""Celery tasks of the drift app: thin interfaces to ``services.drift_check``.

Ids in, ids out (JSON serializer). Retries only for a lost database connection (a restart or a
failover), with backoff; anything else is a bug and fails loudly in the job record.
"""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from accelboard.core.models import Team
from accelboard.core.services import job_run_record

from .services import drift_check, drift_check_all

_RETRY = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": True,
    "retry_jitter": True,
    "max_retries": 3,
}


@shared_task(name="drift.check_model", **_RETRY)
def drift_check_model(team_id: int, model_id: int) -> dict[str, int]:
    """Re-check one model for one team after new accuracy results were recorded."""
    team = Team.objects.filter(pk=team_id).first()
    if team is None:  # deleted meanwhile: nothing to check
        return {"findings": 0, "alerts_created": 0}
    findings = drift_check(team=team, model_ids=[model_id])
    return {"findings": len(findings), "alerts_created": sum(1 for f in findings if f.created)}


@shared_task(name="drift.check_all", **_RETRY)
def drift_check_daily() -> dict[str, int]:
    """The daily pass over every team (the beat schedule): trends move even without new runs."""
    with job_run_record(name="drift_check") as job:
        counts = drift_check_all()
        job.rows = counts["findings"]
        job.detail = counts
    return counts
