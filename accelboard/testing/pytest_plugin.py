"""Loaded first by pytest (``-p accelboard.testing.pytest_plugin``), before Django settings.

Tests use ``DATABASE_URL`` and ``CELERY_BROKER_URL`` when set (CI points them at the machine's
PostgreSQL and Redis). Otherwise settings fall back to the embedded PostgreSQL, which the tests
keep apart from the demo's data under ``.accelboard/test``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")
if not os.environ.get("DATABASE_URL"):
    os.environ.setdefault("ACCELBOARD_HOME", str(ROOT / ".accelboard" / "test"))
# Tests never send real email unless a test points Django at its own SMTP server.
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")


def pytest_configure(config: pytest.Config) -> None:
    # WhiteNoise warns that STATIC_ROOT is missing; tests serve static files through the finders
    # and never run collectstatic, so the warning is noise that would hide real ones.
    config.addinivalue_line("filterwarnings", "ignore:No directory at:UserWarning")


def _is_transactional(request: pytest.FixtureRequest) -> bool:
    marker = request.node.get_closest_marker("django_db")
    if marker is not None and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")):
        return True
    return bool({"transactional_db", "live_server", "django_db_reset_sequences"} & set(request.fixturenames))


@pytest.fixture(autouse=True)
def _raw_telemetry_reset(request: pytest.FixtureRequest) -> Iterator[None]:
    """Drop raw telemetry partitions after a transactional test.

    Django's flush truncates only managed tables, and the raw telemetry table is created by SQL
    (unmanaged), so its rows would outlive the test and point at GPUs the flush deleted: the next
    test's rollups would fail on a foreign key or count foreign samples. Dropping the partitions
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
            WHERE p.relname = 'fleet_telemetrysample'
            """
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP TABLE IF EXISTS "{name}"')
