"""Scheduled serving jobs: forgetting the Prometheus counters of series that went away."""

from __future__ import annotations

import time

from celery import shared_task

from accelboard.core.services import job_run_record
from accelboard.core.tasks import RETRY_ON_LOST_DATABASE

from .remote_write_services import prometheus_series_state_prune


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def prometheus_series_state_forget(self) -> dict[str, int]:
    """Drop the remembered counters of vLLM and Triton series unseen for over a day."""
    with job_run_record(name="prometheus_series_state_forget", task_id=self.request.id or "") as job:
        forgotten = prometheus_series_state_prune(now_ms=int(time.time() * 1000))
        job.rows = forgotten
    return {"forgotten": forgotten}
