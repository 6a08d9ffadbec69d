"""The test plugin's own rules: one Redis database per pytest-xdist worker, and `--no-db` (make
test-fast) leaving out exactly the tests that need the database, while a test that touches it
without saying so fails loudly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelboard.testing.pytest_plugin import redis_url_for_worker, xdist_worker_index

ROOT = Path(__file__).resolve().parents[1]


def test_each_worker_gets_the_next_redis_databases() -> None:
    assert redis_url_for_worker("redis://127.0.0.1:6379/0", "gw0") == "redis://127.0.0.1:6379/1"
    assert redis_url_for_worker("redis://127.0.0.1:6379/0", "gw1") == "redis://127.0.0.1:6379/2"
    assert redis_url_for_worker("redis://:secret@redis:6379/4", "gw1") == "redis://:secret@redis:6379/6"
    # No database in the URL is Redis's database 0.
    assert redis_url_for_worker("redis://redis:6379", "gw0") == "redis://redis:6379/1"


def test_listed_redis_databases_are_taken_in_worker_order() -> None:
    assert redis_url_for_worker("redis://127.0.0.1:6379/4", "gw0", "10,11") == "redis://127.0.0.1:6379/10"
    assert redis_url_for_worker("redis://127.0.0.1:6379/4", "gw1", "10, 11") == "redis://127.0.0.1:6379/11"
    with pytest.raises(pytest.UsageError, match=r"ACCELBOARD_TEST_REDIS_DBS='10,11'.*gw2 has none"):
        redis_url_for_worker("redis://127.0.0.1:6379/4", "gw2", "10,11")
    with pytest.raises(pytest.UsageError, match="ACCELBOARD_TEST_REDIS_DBS"):
        redis_url_for_worker("redis://127.0.0.1:6379/4", "gw0", "ten")


def test_it_refuses_what_it_cannot_split() -> None:
    assert xdist_worker_index("gw12") == 12
    with pytest.raises(pytest.UsageError, match="expected gw<number>"):
        xdist_worker_index("master")
    with pytest.raises(pytest.UsageError, match="names no Redis database number"):
        redis_url_for_worker("redis://127.0.0.1:6379/cache", "gw0")


PROBE = """
import pytest


def test_pure():
    assert 1 + 1 == 2


@pytest.mark.django_db
def test_marked():
    pass


def test_through_a_fixture(db):
    pass


@pytest.fixture
def world(transactional_db):
    return 1


def test_through_a_fixture_of_a_fixture(world):
    pass


def test_touches_the_database_without_saying_so():
    from django.contrib.auth.models import User

    User.objects.count()
"""


@pytest.mark.process
def test_no_db_leaves_out_the_database_tests_and_fails_one_that_hides_its_use(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(DATABASE_URL="postgresql://test-fast.invalid/no-database", CELERY_BROKER_URL="memory://")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
         "-p", "no:cacheprovider", "--no-db", "-rA", str(probe)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "1 failed, 1 passed, 3 deselected" in out, out
    assert "PASSED ::test_pure" in out
    assert "FAILED ::test_touches_the_database_without_saying_so" in out
    assert "Database access not allowed" in out, out
