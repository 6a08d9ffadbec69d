"""A real Celery worker process runs a task enqueued from the test, against the test database.

The worker is ``python -m celery -A accelboard worker --pool=solo`` with ``DATABASE_URL`` built from
the test database (so its writes land where the test can see them, hence ``transaction=True``)
and the same broker the test process publishes to: ``CELERY_BROKER_URL`` when set (Redis in CI),
otherwise kombu's SQLAlchemy transport on the same PostgreSQL (``accelboard.embedded.broker_url_for``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, urlsplit

import pytest
from django.conf import settings
from django.db import connection

from accelboard.celery import app as celery_app
from accelboard.core.choices import JobStatus
from accelboard.core.models import JobRun
from accelboard.embedded import broker_url_for
from accelboard.env import database_url_with_name
from accelboard.fleet.partition_services import telemetry_partition_days
from accelboard.fleet.tasks import telemetry_partitions_maintain

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 60
WORKER_APP_NAME = "accelboard-test-worker"

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


def database_url_of_tests() -> str:
    """The URL of the database Django is connected to now: the test database."""
    db = settings.DATABASES["default"]
    user = quote(str(db["USER"] or ""), safe="")
    password = quote(str(db["PASSWORD"] or ""), safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = str(db["HOST"] or "")
    name = quote(str(db["NAME"]), safe="")
    # Named, so that teardown can wait for exactly the worker's sessions to end.
    query = f"application_name={WORKER_APP_NAME}"
    if host.startswith("/"):  # the embedded server listens on a unix socket
        return f"postgresql://{auth}/{name}?host={host}&{query}"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgresql://{auth}{host}{port}/{name}?{query}"


def broker_url() -> str:
    """Where the worker listens: where this process's Celery app publishes ``.delay()``."""
    configured = os.environ.get("CELERY_BROKER_URL")
    if configured:
        return configured
    # Settings derived the SQLAlchemy broker from the (non-test) database URL, on the same server.
    assert broker_url_for(settings.DATABASE_URL) == settings.CELERY_BROKER_URL
    return settings.CELERY_BROKER_URL


class Worker:
    def __init__(self, process: subprocess.Popen[str], log: IO[str]) -> None:
        self.process = process
        self.log = log

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return
            if self.process.poll() is not None:
                pytest.fail(f"celery worker exited with {self.process.returncode}:\n{self.output()[-4000:]}")
            time.sleep(0.25)
        pytest.fail(f"celery worker did not print {text!r} within {timeout:.0f}s:\n{self.output()[-4000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            # SIGTERM is Celery's warm shutdown; the whole session goes so no child outlives the test.
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        # A server backend outlives its client by a few milliseconds; pytest-django's DROP DATABASE
        # at the end of the session fails if the worker's session is still listed.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [WORKER_APP_NAME]
                )
                if cursor.fetchone()[0] == 0:
                    return
            time.sleep(0.1)


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    # Tasks that earlier tests enqueued on commit, with no worker to run them, wait in the shared
    # broker queue; a worker that ran them first would act on this test's rows (a stray
    # alerts_dispatch mailed a test's alerts before the test's own dispatch did).
    celery_app.control.purge()
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url_of_tests(),
        CELERY_BROKER_URL=broker_url(),
        DJANGO_SETTINGS_MODULE="accelboard.settings",
        # The worker must really consume from the broker, whatever the runner's env says.
        CELERY_TASK_ALWAYS_EAGER="0",
        CELERY_BROKER_POLLING_INTERVAL="0.2",
        PYTHONUNBUFFERED="1",
    )
    with (tmp_path / "worker.log").open("w+") as log:
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
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        handle = Worker(process, log)
        try:
            handle.wait_for("ready.", timeout=WAIT_S)
            yield handle
        finally:
            handle.stop()


def wait_for_job(task_id: str, worker: Worker) -> JobRun:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        job = JobRun.objects.filter(task_id=task_id).exclude(status=JobStatus.STARTED).first()
        if job is not None:
            return job
        if worker.process.poll() is not None:
            break
        time.sleep(0.25)
    pytest.fail(
        f"no finished JobRun for task {task_id} within {WAIT_S}s; worker log:\n{worker.output()[-4000:]}"
    )


def test_it_runs_an_enqueued_task_in_a_real_worker(worker: Worker) -> None:
    today = datetime.now(UTC).date()
    assert today + timedelta(days=1) not in telemetry_partition_days()

    result = telemetry_partitions_maintain.delay()

    job = wait_for_job(result.id, worker)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.name == "telemetry_partitions_maintain"
    assert job.finished_at is not None and job.duration_ms is not None
    expected = [today + timedelta(days=n) for n in range(-1, settings.TELEMETRY_PARTITIONS_AHEAD_DAYS + 1)]
    days = telemetry_partition_days()
    assert set(expected) <= set(days)
    assert job.rows == len(expected)
    assert sorted(job.detail["created"]) == [str(day) for day in expected]
    assert (
        f"Task accelboard.fleet.tasks.telemetry_partitions_maintain[{result.id}] succeeded" in worker.output()
    )


def test_it_uses_the_configured_broker(worker: Worker) -> None:
    configured = os.environ.get("CELERY_BROKER_URL", "")
    banner = worker.output()
    transport = next(line for line in banner.splitlines() if "transport:" in line)
    if configured.startswith(("redis://", "rediss://")):
        assert "redis://" in transport
        import redis

        # kombu declares both queues' bindings (a worker without -Q consumes both) in the
        # configured Redis database.
        client: Any = redis.Redis.from_url(configured)
        assert client.exists("_kombu.binding.scheduled") == 1
        assert client.exists("_kombu.binding.bulk") == 1
        result = telemetry_partitions_maintain.delay()
        assert wait_for_job(result.id, worker).status == JobStatus.SUCCEEDED
    else:
        # No broker configured: the SQLAlchemy transport on the very PostgreSQL server in use. Under
        # pytest-xdist the test plugin gave each worker a broker database of its own on that server.
        assert "sqla+postgresql+psycopg://" in transport
        derived = broker_url_for(settings.DATABASE_URL)
        if os.environ.get("PYTEST_XDIST_WORKER"):
            mine, server = urlsplit(broker_url()), urlsplit(derived)
            assert (mine.scheme, mine.netloc, mine.query) == (server.scheme, server.netloc, server.query)
            assert mine.path != server.path
        else:
            assert broker_url() == derived
        result = telemetry_partitions_maintain.delay()
        assert wait_for_job(result.id, worker).status == JobStatus.SUCCEEDED


@pytest.fixture
def scratch_database() -> Iterator[str]:
    """A new, empty database on the tests' server; dropped after. Named anew each time: kombu's
    SQLAlchemy transport remembers, per URL and process, that it made its tables."""
    import psycopg  # noqa: PLC0415

    name = f"accelboard_scratch_{uuid.uuid4().hex[:12]}"
    admin = database_url_with_name(settings.DATABASE_URL, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield database_url_with_name(settings.DATABASE_URL, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_the_migrate_step_creates_the_embedded_brokers_tables_once_for_everyone(
    scratch_database: str,
) -> None:
    """kombu's SQLAlchemy transport creates its tables in every process that opens it (look, then
    create), and each queue's row on first use: two at once on a new database raced, one died
    with DuplicateTable (the demo's worker, once in a suite run) or a unique violation on the
    queue's name (beat and the worker, CI). ``migrate`` creates both first; doing it again is
    harmless; another broker is left alone."""
    import psycopg  # noqa: PLC0415
    from django.db.models.signals import post_migrate  # noqa: PLC0415
    from django.test import override_settings  # noqa: PLC0415

    from accelboard.celery import QUEUES  # noqa: PLC0415
    from accelboard.core.apps import _broker_tables_create  # noqa: PLC0415
    from accelboard.embedded import broker_tables_create  # noqa: PLC0415

    url = broker_url_for(scratch_database)
    # The migrate step's hook, with that broker configured; then again, directly.
    assert _broker_tables_create in [r[1]() for r in post_migrate.receivers]
    with override_settings(CELERY_BROKER_URL=url):
        _broker_tables_create()
    assert broker_tables_create(url, QUEUES)  # again, on rows that exist
    with psycopg.connect(scratch_database) as conn:
        tables = {
            r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'kombu_%'")
        }
        # And every queue's row, once: beat's first publish to ``scheduled`` raced the
        # worker's consumer making it (a unique violation killed the demo in CI).
        queues = [r[0] for r in conn.execute("SELECT name FROM kombu_queue ORDER BY name")]
    assert tables == {"kombu_queue", "kombu_message"}
    assert queues == sorted(QUEUES)
    assert not broker_tables_create("redis://127.0.0.1:6379/0")


def test_status_reads_each_queues_depth_and_oldest_age_on_the_embedded_broker(scratch_database: str) -> None:
    """The embedded default's broker (kombu's SQLAlchemy transport, whose driver *type* is 'sql'):
    the queue check read its depth but never the age of its oldest message, so a backlog there
    never showed as lagging. CI's suite runs on Redis; this reads the embedded broker itself."""
    from kombu import Connection  # noqa: PLC0415

    from accelboard.celery import QUEUES  # noqa: PLC0415
    from accelboard.core.pipeline_selectors import queue_states  # noqa: PLC0415
    from accelboard.embedded import broker_tables_create  # noqa: PLC0415

    url = broker_url_for(scratch_database)
    broker_tables_create(url, QUEUES)
    published = time.time() - 90  # as accelboard.celery stamps every task it publishes
    with Connection(url) as conn:
        queue = conn.SimpleQueue("bulk")
        for offset in (0, 30):
            queue.put({"task": "x"}, headers={"published_at": published + offset})
        queue.close()
    states = {name: (depth, age) for name, depth, age, error in queue_states(broker_url=url) if not error}
    depth, age = states["bulk"]
    assert depth == 2
    assert age is not None and 90 <= age < 90 + 60  # the older of the two
    assert states["scheduled"] == (0, None)
