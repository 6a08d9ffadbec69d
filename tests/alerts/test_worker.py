"""A run recorded through the real write path reaches a real Celery worker, which raises the alert."""

from __future__ import annotations

import time
from typing import Any

import pytest

from accelboard.alerts.models import Alert
from accelboard.core.choices import JobStatus
from accelboard.core.models import JobRun
from tests.test_celery_worker import WAIT_S, Worker, worker  # noqa: F401 - the fixture

from .history import history_record, noisy

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


def _wait(predicate: Any, what: str, handle: Worker) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    pytest.fail(f"{what} within {WAIT_S}s; worker log:\n{handle.output()[-4000:]}")


def test_it_raises_an_alert_from_a_run_upload_in_a_real_worker(worker: Worker, team: Any) -> None:  # noqa: F811
    x = noisy(22, pct=1.0, seed=11)
    values = x[:20] + [v * 0.88 for v in x[20:]]
    runs = history_record(team=team, values=values)  # each run enqueues its check on commit

    _wait(lambda: Alert.objects.exists(), "no alert", worker)
    alert = Alert.objects.get()
    assert (alert.kind, alert.first_run_id, alert.state) == ("regression", runs[20].pk, "open")
    _wait(
        lambda: (
            JobRun.objects.filter(name="alerts_run_check", detail__run=runs[-1].pk)
            .exclude(status=JobStatus.STARTED)
            .exists()
        ),
        "no finished check of the last run",
        worker,
    )
    # (A broker shared with earlier sessions may hold more checks of the same run ids: harmless.)
    checks = JobRun.objects.filter(name="alerts_run_check", detail__run__in=[r.pk for r in runs])
    assert {job.detail["run"] for job in checks} == {r.pk for r in runs}
    assert set(checks.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
    assert [job.detail["raised"] for job in checks if job.detail["raised"]] == [[alert.pk]]
    # The new alert was handed to the notifications app after commit.
    _wait(lambda: JobRun.objects.filter(name="alerts_dispatch").exists(), "no alerts_dispatch run", worker)
