"""Queues that cannot starve: a scheduled job runs on time while a backlog of bulk work, or of
ingest's rollup drains, waits.

Real workers, as docker-compose runs them (``-Q bulk``, ``-Q scheduled``, ``-Q rollups``), on the
test database and the configured broker (Redis in CI). Thousands of bulk tasks are queued first,
the way a burst of uploads queues their cost checks; then the per-minute job is published as beat
publishes it. It must finish within seconds while most of the backlog is still waiting, and
``accelboard status`` must show that backlog: its depth and the age of its oldest task.

The ingest case: telemetry batches are stored through the API's service and the drains they ask
for are queued, many more than a fleet's web processes would queue in that time; the
first drain is kept busy the way a long drain is (the rollups' advisory lock held). beat's
per-minute jobs must run and finish while every drain still waits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from accelboard.api.services import telemetry_batch_ingest
from accelboard.celery import BULK_QUEUE, ROLLUPS_QUEUE, SCHEDULED_QUEUE, app, task_queue
from accelboard.core.choices import JobStatus
from accelboard.core.models import JobRun
from accelboard.core.pipeline_selectors import pipeline_status, queue_states
from accelboard.costs.tasks import run_cost
from accelboard.fleet.models import TelemetryDirtyRange
from accelboard.fleet.rollup_services import _ADVISORY_ROLLUPS
from accelboard.fleet.tasks import (
    pipeline_check,
    telemetry_partitions_maintain,
    telemetry_rollups_drain,
    telemetry_rollups_refresh,
)
from tests.api.conftest import telemetry_payload
from tests.test_celery_worker import ROOT, WAIT_S, Worker, broker_url, database_url_of_tests, wait_for_job

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]

BACKLOG = 3_000
# Drains queued by much more than a fleet's web processes ask for in a minute (one per
# ROLLUP_INTERVAL_S across all of them); before that, one per process every 5 s.
DRAINS = 60


def _start(queue: str, tmp_path: Path) -> Worker:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url_of_tests(),
        CELERY_BROKER_URL=broker_url(),
        DJANGO_SETTINGS_MODULE="accelboard.settings",
        CELERY_TASK_ALWAYS_EAGER="0",
        CELERY_BROKER_POLLING_INTERVAL="0.2",
        PYTHONUNBUFFERED="1",
    )
    log = (tmp_path / f"{queue}.log").open("w+")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "accelboard",
            "worker",
            "-Q",
            queue,
            "--pool=solo",
            "-l",
            "info",
            "-n",
            f"test-{queue}-{uuid.uuid4().hex[:8]}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],  # fmt: skip
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    return Worker(process, log)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[dict[str, Worker]]:
    app.control.purge()
    started = {queue: _start(queue, tmp_path) for queue in (BULK_QUEUE, SCHEDULED_QUEUE, ROLLUPS_QUEUE)}
    try:
        for worker in started.values():
            worker.wait_for("ready.", timeout=WAIT_S)
        yield started
    finally:
        for worker in started.values():
            worker.stop()
            worker.log.close()
        app.control.purge()


def test_beat_jobs_and_alerts_go_to_the_scheduled_queue_drains_to_rollups_and_uploads_work_to_bulk() -> None:
    assert task_queue("accelboard.fleet.tasks.telemetry_rollups_refresh") == SCHEDULED_QUEUE
    assert task_queue("accelboard.alerts.tasks.production_signals_check") == SCHEDULED_QUEUE
    assert task_queue("accelboard.notifications.tasks.delivery_send") == SCHEDULED_QUEUE
    assert task_queue("accelboard.fleet.tasks.telemetry_rollups_refresh_range") == ROLLUPS_QUEUE
    assert task_queue("accelboard.fleet.tasks.telemetry_rollups_drain") == ROLLUPS_QUEUE
    assert task_queue("accelboard.costs.tasks.run_cost") == BULK_QUEUE
    assert task_queue("accelboard.alerts.tasks.run_check") == BULK_QUEUE
    assert task_queue("accelboard.drift.tasks.drift_check_variant") == BULK_QUEUE


def test_a_scheduled_job_runs_on_time_while_a_backlog_of_bulk_work_waits(workers: dict[str, Worker]) -> None:
    for _ in range(BACKLOG):
        run_cost.delay(0)  # a deleted run: each is a quick no-op, but there are thousands
    before = dict((name, depth) for name, depth, _age, _error in queue_states())
    assert before[BULK_QUEUE] is not None and before[BULK_QUEUE] > BACKLOG // 2

    published = time.monotonic()
    result = telemetry_partitions_maintain.apply_async()  # as beat publishes it
    job = wait_for_job(result.id, workers[SCHEDULED_QUEUE])
    waited = time.monotonic() - published

    assert job.status == JobStatus.SUCCEEDED, job.error
    # On time: seconds, not the minutes the backlog takes to drain on one bulk worker.
    assert waited < 15, f"the scheduled job took {waited:.1f}s behind {BACKLOG} bulk tasks"
    states = {name: (depth, age) for name, depth, age, _error in queue_states()}
    depth, age = states[BULK_QUEUE]
    assert depth is not None and depth > BACKLOG // 4, (
        f"the backlog drained too fast to show anything: {depth}"
    )
    assert age is not None and age > 0
    # The bulk worker is working through it (not stuck), and staff can see the backlog.
    assert "accelboard.costs.tasks.run_cost" in workers[BULK_QUEUE].output()
    checks = {check.name: check for check in pipeline_status().checks}
    assert checks["queue.bulk"].detail["depth"] > 0 and checks["queue.bulk"].value is not None
    assert checks["queue.scheduled"].detail["depth"] == 0


def test_scheduled_jobs_run_on_time_while_a_backlog_of_ingest_work_waits(
    workers: dict[str, Worker], team: Any
) -> None:
    for n in range(20):  # 20 batches of 2 hosts' GPUs, each marking its range dirty
        payload = telemetry_payload(n=40, hostname=f"backlog-{n % 2}", start=time.time() - 120 + n)
        assert telemetry_batch_ingest(team=team, payload=payload)["accepted"] == 40
    assert TelemetryDirtyRange.objects.count() == 20

    # A long drain: the rollups' advisory lock held (here by the test), as a drain holds it
    # while it recomputes a fleet's rollups.
    holder = connections.create_connection("default")
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [_ADVISORY_ROLLUPS])
        drains = [telemetry_rollups_drain.apply_async() for _ in range(DRAINS)]
        # The first drain to start (ingest's own request, or one of these) waits for the lock.
        first = wait_for_started("telemetry_rollups_drain", workers[ROLLUPS_QUEUE])

        # As beat publishes them, while the drains wait.
        jobs = [pipeline_check.apply_async(), telemetry_rollups_refresh.apply_async()]
        finished = [wait_for_job(result.id, workers[SCHEDULED_QUEUE]) for result in jobs]

        assert [job.status for job in finished] == [JobStatus.SUCCEEDED] * 2, [j.error for j in finished]
        # The per-minute rollup pass leaves the marks to the running drain instead of waiting for it.
        assert finished[1].detail == {"skipped": "a drain is running"}
        # Every drain is still waiting: the first one for the lock, the others in their queue.
        first.refresh_from_db()
        assert first.status == JobStatus.STARTED
        assert JobRun.objects.filter(name="telemetry_rollups_drain").count() == 1
        depth = dict((name, depth) for name, depth, _age, _error in queue_states())[ROLLUPS_QUEUE]
        assert depth is not None and depth >= DRAINS - 1, depth
        assert TelemetryDirtyRange.objects.count() == 20
    finally:
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_ADVISORY_ROLLUPS])
        holder.close()

    # Then that drain takes every mark, and the queued ones run after it.
    assert wait_for_job(first.task_id, workers[ROLLUPS_QUEUE]).status == JobStatus.SUCCEEDED
    assert not TelemetryDirtyRange.objects.exists()
    assert wait_for_job(drains[-1].id, workers[ROLLUPS_QUEUE]).status == JobStatus.SUCCEEDED


def wait_for_started(name: str, worker: Worker) -> JobRun:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        job = JobRun.objects.filter(name=name).first()
        if job is not None:
            return job
        if worker.process.poll() is not None:
            break
        time.sleep(0.25)
    pytest.fail(f"no {name} started within {WAIT_S}s; worker log:\n{worker.output()[-4000:]}")
