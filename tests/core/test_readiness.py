"""Ready means ready: while the database lacks a migration, ``/healthz``, the API and every page
say the site is starting (503, Retry-After) instead of "ok" or a 500; static files still load;
once migrated, everything answers as usual."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.db import connection
from django.test import Client

from accelboard.core.readiness import readiness, readiness_reset

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_migration_missing() -> Iterator[tuple[str, str]]:
    """The newest migration of the fleet app unrecorded (the test's transaction undoes it)."""
    readiness_reset()
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM django_migrations WHERE id = "
            "(SELECT max(id) FROM django_migrations WHERE app = 'fleet') RETURNING app, name"
        )
        row = cursor.fetchone()
    assert row is not None
    try:
        yield row
    finally:
        readiness_reset()


def test_health_the_api_and_the_login_page_say_starting_until_migrated(
    one_migration_missing: tuple[str, str],
) -> None:
    client = Client()
    health = client.get("/healthz")
    assert health.status_code == 503 and health["Retry-After"] == "2"
    assert json.loads(health.content) == {
        "status": "starting",
        "detail": "1 database migration still to apply",
    }
    login = client.get("/accounts/login/")
    assert login.status_code == 503 and b"accelboard is starting" in login.content
    assert b'http-equiv="refresh"' in login.content
    posted = client.post("/accounts/login/", {"username": "someone", "password": "x"})
    assert posted.status_code == 503
    api = client.get("/api/v1/runs", HTTP_AUTHORIZATION="Bearer abc")
    assert api.status_code == 503 and json.loads(api.content)["error"]["code"] == "starting"
    assert readiness() == (False, 1)


def test_once_migrated_the_site_is_ready_and_stays_so_without_asking_again(
    one_migration_missing: tuple[str, str],
) -> None:
    app, name = one_migration_missing
    assert readiness() == (False, 1)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_migrations (app, name, applied) VALUES (%s, %s, now())", [app, name]
        )
    readiness_reset()  # the next request asks again (a process waits RECHECK_S)
    assert Client().get("/healthz").status_code == 200
    assert Client().get("/accounts/login/").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_migrations WHERE app = %s AND name = %s", [app, name])
    assert readiness() == (True, 0)  # ready once, ready for good: no graph loaded per request
