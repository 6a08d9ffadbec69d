"""Loaded first by pytest (``-p accelboard.testing.pytest_plugin``), before Django settings.

Tests use ``DATABASE_URL`` and ``CELERY_BROKER_URL`` when set (CI points them at the machine's
PostgreSQL and Redis). Otherwise settings fall back to the embedded PostgreSQL, which the tests
keep apart from the demo's data under ``.accelboard/test``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")
if not os.environ.get("DATABASE_URL"):
    os.environ.setdefault("ACCELBOARD_HOME", str(ROOT / ".accelboard" / "test"))


# --- pytest-xdist: one broker per worker ----------------------------------------------------------
# Each xdist worker ("gw0", "gw1", ...) has its own test database (pytest-django appends the worker
# id to its name). The Celery broker must be apart too: a real worker started by one xdist worker
# would otherwise take tasks the other one enqueued, and run them against the wrong database. xdist
# sets PYTEST_XDIST_WORKER before this plugin is imported, so the broker URL is rewritten here,
# before Django's settings read it, and the Celery worker processes the tests start inherit it.
#
# - Redis: a database number of its own per worker: ACCELBOARD_TEST_REDIS_DBS="10,11" names them
#   (one per worker, in worker order); otherwise the configured database + 1 + the worker's index
#   (CI's redis://.../0 gives workers 1 and 2).
# - No broker configured (kombu's SQLAlchemy transport on PostgreSQL): a broker database of its own
#   per worker on the same server, created when missing.
# - memory:// is private to each process already.
REDIS_DBS_VARIABLE = "ACCELBOARD_TEST_REDIS_DBS"
_BROKER_DONE_VARIABLE = "ACCELBOARD_TEST_BROKER_WORKER"


def xdist_worker_index(worker: str) -> int:
    """``gw3`` -> 3."""
    if not worker.startswith("gw") or not worker[2:].isdigit():
        raise pytest.UsageError(f"PYTEST_XDIST_WORKER={worker!r}: expected gw<number>")
    return int(worker[2:])


def redis_url_for_worker(url: str, worker: str, dbs: str | None = None) -> str:
    """The Redis broker URL of one xdist worker: the same server, a database of its own."""
    index = xdist_worker_index(worker)
    parts = urlsplit(url)
    if dbs:
        listed = [item.strip() for item in dbs.split(",") if item.strip()]
        if index >= len(listed) or not all(item.isdigit() for item in listed):
            raise pytest.UsageError(
                f"{REDIS_DBS_VARIABLE}={dbs!r}: needs one Redis database number per xdist worker "
                f"(worker {worker} has none); pass fewer workers (-n) or list more numbers"
            )
        db = int(listed[index])
    else:
        path = parts.path.strip("/") or "0"
        if not path.isdigit():
            raise pytest.UsageError(f"CELERY_BROKER_URL: {url!r} names no Redis database number")
        db = int(path) + 1 + index
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, parts.fragment))


def _sqlalchemy_broker_for_worker(worker: str) -> str:
    """A broker database of the worker's own on the PostgreSQL server the tests use."""
    from accelboard.embedded import broker_url_for, embedded_database_url
    from accelboard.env import database_url_with_name

    database_url = os.environ.get("DATABASE_URL")
    if not database_url:
        return broker_url_for(embedded_database_url(Path(os.environ["ACCELBOARD_HOME"]), f"broker_{worker}"))
    import psycopg

    parts = urlsplit(database_url)
    name = f"{parts.path.strip('/')}_broker_{worker}"
    with psycopg.connect(database_url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')
    return broker_url_for(database_url_with_name(database_url, name))


def _isolate_broker(worker: str) -> None:
    # A pytest started by a test (a subprocess inherits PYTEST_XDIST_WORKER) keeps what it was given.
    if os.environ.get(_BROKER_DONE_VARIABLE) == worker:
        return
    url = os.environ.get("CELERY_BROKER_URL", "")
    if url.startswith(("redis://", "rediss://")):
        os.environ["CELERY_BROKER_URL"] = redis_url_for_worker(
            url, worker, os.environ.get(REDIS_DBS_VARIABLE)
        )
    elif not url:
        os.environ["CELERY_BROKER_URL"] = _sqlalchemy_broker_for_worker(worker)
    elif not url.startswith("memory://"):
        raise pytest.UsageError(
            f"CELERY_BROKER_URL={url.split('://')[0]}://...: tests under pytest-xdist know how to keep "
            "Redis, memory:// or the embedded broker apart per worker, not this transport; run without -n"
        )
    os.environ[_BROKER_DONE_VARIABLE] = worker


if os.environ.get("PYTEST_XDIST_WORKER"):
    _isolate_broker(os.environ["PYTEST_XDIST_WORKER"])
# Tests never send real email unless a test points Django at its own SMTP server.
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")


# PBKDF2 at Django's production work factor costs ~0.7 s per password on a CI core, and a third
# of the suite creates or logs in users. Tests hash with MD5 first (fast); the real hasher stays
# in the list so hashes made by it still verify, and tests/core/test_password_hashing.py checks the
# production setting itself.
FAST_PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]


# --- --no-db: the tests that need no database (make test-fast) -------------------------------------
# A test needs the database when it is marked django_db or uses a fixture that opens it (directly or
# through other fixtures: pytest lists the whole closure in ``item.fixturenames``). Those are
# deselected, and counted in the summary. A test that touches the database without saying so fails
# loudly in both runs: pytest-django refuses the query ("Database access not allowed"), and
# `make test-fast` points DATABASE_URL nowhere, for subprocesses too. (``django_db_blocker`` is not
# in the list: pytest-django's own autouse fixtures request it for every test.)
DATABASE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "django_db_setup",
        "live_server",
    }
)


def needs_database(item: pytest.Item) -> bool:
    if item.get_closest_marker("django_db") is not None:
        return True
    return bool(DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--no-db",
        action="store_true",
        default=False,
        help="run only the tests that need no database (make test-fast); the others are deselected",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("no_db"):
        return
    keep = [item for item in items if not needs_database(item)]
    if len(keep) == len(items):
        return
    dropped = [item for item in items if needs_database(item)]
    config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("no_db"):
        return "--no-db: tests that need the database are deselected (make test runs them)"
    return None


def pytest_configure(config: pytest.Config) -> None:
    # WhiteNoise warns that STATIC_ROOT is missing; tests serve static files through the finders
    # and never run collectstatic, so the warning is noise that would hide real ones.
    config.addinivalue_line("filterwarnings", "ignore:No directory at:UserWarning")


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashing() -> Iterator[None]:
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=FAST_PASSWORD_HASHERS):
        yield


def _is_transactional(request: pytest.FixtureRequest) -> bool:
    marker = request.node.get_closest_marker("django_db")
    if marker is not None and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")):
        return True
    return bool({"transactional_db", "live_server", "django_db_reset_sequences"} & set(request.fixturenames))


@pytest.fixture(autouse=True)
def _readiness_known() -> None:
    """The test database is migrated before any test: the readiness gate (``core.readiness``) need
    not ask, so a test's first request costs no extra queries, whichever test runs first in its
    process. The gate's own tests reset it to ask."""
    from accelboard.core.readiness import readiness_reset

    readiness_reset(ready=True)


@pytest.fixture(autouse=True)
def _raw_telemetry_reset(request: pytest.FixtureRequest) -> Iterator[None]:
    """Drop raw telemetry and attribution partitions after a transactional test.

    Django's flush truncates only managed tables, and the raw telemetry and attribution tables are
    created by SQL (unmanaged), so their rows would outlive the test and point at GPUs and
    workloads the flush deleted: the next test's rollups would fail on a foreign key or count
    foreign samples, and its attribution counts would include another test's intervals (a demo's
    intervals once let the agent integration test stop before its own arrived). Dropping the partitions
    also restores the "no partitions yet" state the partition-maintenance tests start from.
    """
    yield
    if not _is_transactional(request):
        return
    blocker = request.getfixturevalue("django_db_blocker")
    from django.db import connection

    with blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname FROM pg_inherits i
            JOIN pg_class c ON c.oid = i.inhrelid
            JOIN pg_class p ON p.oid = i.inhparent
            WHERE p.relname IN ('fleet_telemetrysample', 'fleet_telemetrypartial', 'fleet_gpuattribution')
            """
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP TABLE IF EXISTS "{name}"')
