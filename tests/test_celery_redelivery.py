"""A task whose worker is killed mid-task runs again on the next worker (late acknowledgement).

Real worker processes on the tests' broker: the embedded default's (kombu's SQLAlchemy
transport with ``accelboard.broker``'s channel) or ``CELERY_BROKER_URL``'s Redis, where the
second worker is given a visibility timeout of a second so that the wait stays short.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from accelboard.celery import app as celery_app

from .test_celery_worker import ROOT, WAIT_S, Worker, broker_url, database_url_of_tests

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]

TASK = "tests.celery_test_tasks.wait_for_file"


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()
        worker.log.close()


def worker_start(workers: list[Worker], tmp_path: Path, **extra_env: str) -> Worker:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url_of_tests(),
        CELERY_BROKER_URL=broker_url(),
        DJANGO_SETTINGS_MODULE="accelboard.settings",
        CELERY_TASK_ALWAYS_EAGER="0",
        CELERY_BROKER_POLLING_INTERVAL="0.2",
        PYTHONUNBUFFERED="1",
        **extra_env,
    )
    log = (tmp_path / f"worker-{len(workers)}.log").open("w+")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "accelboard",
            "worker",
            "--pool=solo",
            "-l",
            "info",
            "-n",
            f"test-{uuid.uuid4().hex[:8]}@%h",
            "--include",
            "tests.celery_test_tasks",
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
    worker = Worker(process, log)
    workers.append(worker)
    worker.wait_for("ready.", timeout=WAIT_S)
    return worker


def journal_wait(journal: Path, line: str, worker: Worker) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if journal.exists() and line in journal.read_text().splitlines():
            return
        time.sleep(0.1)
    text = journal.read_text() if journal.exists() else "(no journal)"
    pytest.fail(
        f"no {line!r} in the task's journal within {WAIT_S} s:\n{text}\nworker log:\n{worker.output()[-4000:]}"
    )


def test_a_task_whose_worker_is_killed_mid_task_runs_again_on_the_next_worker(
    tmp_path: Path, workers: list[Worker]
) -> None:
    celery_app.control.purge()
    go, journal = tmp_path / "go", tmp_path / "journal"
    first = worker_start(workers, tmp_path)
    result = celery_app.send_task(TASK, args=[str(go), str(journal)])
    journal_wait(journal, f"started {first.process.pid}", first)

    # kill -9 mid-task: no acknowledgement, no clean shutdown putting the message back.
    os.killpg(first.process.pid, signal.SIGKILL)
    first.process.wait(timeout=10)
    go.touch()

    redis = settings.CELERY_BROKER_URL.startswith("redis")
    second = worker_start(workers, tmp_path, **({"CELERY_BROKER_VISIBILITY_TIMEOUT": "1"} if redis else {}))
    journal_wait(journal, f"done {second.process.pid}", second)
    assert journal.read_text().splitlines() == [
        f"started {first.process.pid}",
        f"started {second.process.pid}",
        f"done {second.process.pid}",
    ]
    second.wait_for(f"Task {TASK}[{result.id}] succeeded", timeout=WAIT_S)
    if not redis:
        # Acknowledged means gone: the embedded broker keeps no row of a finished task.
        import psycopg  # noqa: PLC0415

        url = broker_url().removeprefix("sqla+").replace("postgresql+psycopg://", "postgresql://", 1)
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT count(*) FROM kombu_message WHERE payload LIKE %s", [f"%{result.id}%"])
            assert row.fetchone() == (0,)
