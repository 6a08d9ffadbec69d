"""New accuracy results enqueue a drift check that a real Celery worker runs (Redis broker)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from accelboard.alerts.models import Alert
from accelboard.core.choices import JobStatus
from accelboard.core.models import JobRun
from tests.test_celery_worker import WAIT_S, Worker, worker  # noqa: F401 - the worker fixture

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


def test_it_alerts_on_drift_after_accuracy_results_are_recorded(
    worker: Worker,  # noqa: F811
    team: Any,
    drift_series: Callable[..., None],
) -> None:
    # Three nights of an int4 variant 3% below its reference: over the 1% budget.
    drift_series(team=team, losses=[0.03, 0.03, 0.03])
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and not Alert.objects.filter(kind="drift").exists():
        time.sleep(0.25)
    alert = Alert.objects.filter(kind="drift").first()
    assert alert is not None, worker.output()[-4000:]
    assert (alert.team_id, alert.severity) == (team.pk, "critical")
    assert "Drifty-8B int4" in alert.title
    # Let the queued checks finish: each recorded run enqueued one; all agree on one alert.
    # A JobRun row appears when a check starts and is marked when it ends: wait for six ended.
    finished = JobRun.objects.filter(name="drift_check_variant").exclude(status=JobStatus.STARTED)
    while time.monotonic() < deadline and finished.count() < 6:
        time.sleep(0.25)
    jobs = JobRun.objects.filter(name="drift_check_variant")
    assert jobs.count() == 6, worker.output()[-4000:]
    assert set(jobs.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
    assert Alert.objects.filter(kind="drift").count() == 1
