"""Celery tasks of the drift app: thin interfaces to ``services.drift_check``.

Ids in, ids out (JSON serializer). Retries only for a lost database connection (a restart or a
failover), with backoff; anything else is a bug and fails loudly in the job record.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from accelboard.benchmarks.models import ModelVariant
from accelboard.core.models import Team
from accelboard.core.services import job_run_record

from .services import drift_check, drift_check_all

_RETRY = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": True,
    "retry_jitter": True,
    "max_retries": 3,
}


@shared_task(bind=True, **_RETRY)
def drift_check_variant(self: Any, team_id: int, variant_id: int) -> dict[str, int]:
    """Re-check the variant's model for one team after new accuracy results were recorded."""
    team = Team.objects.filter(pk=team_id).first()
    model_id = ModelVariant.objects.filter(pk=variant_id).values_list("model_id", flat=True).first()
    if team is None or model_id is None:  # deleted meanwhile: nothing to check
        return {"findings": 0, "alerts_created": 0}
    with job_run_record(name="drift_check_variant", task_id=self.request.id or "") as job:
        findings = drift_check(team=team, model_ids=[model_id])
        job.rows = len(findings)
        job.detail = {"team": team_id, "model": model_id, "verdicts": [f.verdict for f in findings]}
    return {"findings": len(findings), "alerts_created": sum(1 for f in findings if f.created)}


@shared_task(bind=True, **_RETRY)
def drift_check_daily(self: Any) -> dict[str, int]:
    """The daily pass over every team (the beat schedule): trends move even without new runs."""
    with job_run_record(name="drift_check_daily", task_id=self.request.id or "") as job:
        counts = drift_check_all()
        job.rows = counts["findings"]
        job.detail = counts
    return counts
