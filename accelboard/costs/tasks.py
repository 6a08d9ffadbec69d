"""Celery tasks of the costs app: thin interfaces to the services (ids and ISO dates in).

Retries only for a lost database connection (``OperationalError``); a malformed argument fails
at once. Each service records its own ``JobRun``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from celery import Task, shared_task
from django.db import transaction

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.core.tasks import RETRY_ON_LOST_DATABASE, day_parse

from . import services
from .run_cost_services import run_cost_compute
from .serving_cost_services import serving_cost_day_compute

# How far back the nightly pass looks for days whose telemetry changed after they were costed.
LATE_DATA_DAYS = 7


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def cost_daily_compute(self: Task, today_iso: str = "") -> dict[str, object]:
    """Nightly: cost yesterday (UTC), and re-cost any of the last 7 days whose rollups changed
    since (late telemetry); serving costs for the same days."""
    today = day_parse(today_iso) if today_iso else datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    late = services.cost_days_with_late_data(since=today - timedelta(days=LATE_DATA_DAYS), until=yesterday)
    days = sorted({yesterday, *late})
    results = services.cost_days_compute(days=days)
    for day in days:
        serving_cost_day_compute(day=day)
    return {"days": [d.isoformat() for d in days], "rows": sum(r.rows for r in results)}


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def cost_days_recompute(self: Task, day_isos: list[str]) -> dict[str, object]:
    """Re-cost the given days (a price correction, an operator's request): replaces their rows."""
    days = [day_parse(d) for d in day_isos]
    results = services.cost_days_compute(days=days)
    for day in sorted(set(days)):
        serving_cost_day_compute(day=day)
    return {"days": len(set(days)), "rows": sum(r.rows for r in results)}


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def run_cost(self: Task, run_id: int) -> dict[str, object]:
    """Enqueued after a benchmark run is recorded: its energy and cost per unit of work."""
    run = (
        BenchmarkRun.objects.select_related("host", "accelerator_type", "workload")
        .filter(pk=int(run_id))
        .first()
    )
    if run is None:  # deleted before the worker got to it
        return {"run_id": run_id, "cost": None}
    cost = run_cost_compute(run=run)
    return {"run_id": run.pk, "cost": cost.pk if cost else None}


def cost_recompute_enqueue(*, days: Iterable[date]) -> None:
    """After the current transaction commits, ask a worker to recompute ``days`` (and their
    serving costs). Called by price-book writes so a correction reaches the figures once."""
    days = sorted(set(days))
    if not days:
        return
    isos = [d.isoformat() for d in days]
    transaction.on_commit(lambda: cost_days_recompute.delay(isos))
