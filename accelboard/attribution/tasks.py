"""Celery tasks of attribution: thin interfaces to the services (ISO dates in).

Retries only for a lost database connection (``OperationalError``); a malformed argument fails
at once. The services record their own ``JobRun``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from celery import Task, shared_task
from django.db import transaction

from accelboard.core.tasks import RETRY_ON_LOST_DATABASE, day_parse
from accelboard.fleet.models import Workload

from . import services
from .selectors import allocation_days_stale
from .training_alerts import training_regression_check

# How far back the nightly pass looks for days whose costs were recomputed after their allocation
# (the cost pass re-costs late telemetry up to 7 days back; price corrections reach further).
STALE_DAYS = 31


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def allocation_daily_compute(self: Task, today_iso: str = "") -> dict[str, object]:
    """Nightly, after the cost pass: allocate yesterday (UTC), and any day of the last month
    whose costs were recomputed since it was allocated."""
    today = day_parse(today_iso) if today_iso else datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    results = [services.allocation_day_compute(day=yesterday)]
    stale = allocation_days_stale(since=today - timedelta(days=STALE_DAYS), until=yesterday)
    if stale:
        results += services.allocation_days_compute(days=stale)
    return {"days": [r.day.isoformat() for r in results], "rows": sum(r.rows for r in results)}


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def allocation_days_recompute(self: Task, day_isos: list[str]) -> dict[str, object]:
    """Re-apply the current rules to the given days (an admin's explicit action)."""
    results = services.allocation_days_compute(days=[day_parse(d) for d in day_isos])
    return {"days": len(results), "rows": sum(r.rows for r in results)}


def allocation_recompute_enqueue(*, days: Iterable[date]) -> int:
    """After the current transaction commits, ask a worker to recompute ``days``; how many."""
    isos = sorted({d.isoformat() for d in days})
    if isos:
        transaction.on_commit(lambda: allocation_days_recompute.delay(isos))
    return len(isos)


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def training_regression_check_task(self: Task, workload_id: int) -> dict[str, object]:
    """After a batch of a training job's progress: its step-time check (``training_services``)."""
    workload = Workload.objects.filter(pk=workload_id).select_related("team").first()
    if workload is None:
        return {"alert": None}
    alert = training_regression_check(workload=workload)
    return {"alert": alert.pk if alert is not None else None}


def training_regression_check_enqueue(*, workload_id: int) -> None:
    """After the current transaction commits, ask a worker to check the job's step time."""
    transaction.on_commit(lambda: training_regression_check_task.delay(workload_id))
