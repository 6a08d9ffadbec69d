"""accelboard.demo.forked: a step of the demo load in a forked child, beside the parent's."""

from __future__ import annotations

import os
import signal

import pytest
from django.db import connection

from accelboard.demo import forked

pytestmark = pytest.mark.django_db(transaction=True)


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def test_the_child_works_on_its_own_session_and_leaves_the_parents_alone() -> None:
    parent_pid = os.getpid()
    parent_backend = _backend_pid()
    computed = {"rows": 1234}  # the parent's memory, which the child gets a copy of
    with connection.cursor() as cursor:
        # A session lock, as the demo load holds one while its child works.
        cursor.execute("SELECT pg_advisory_lock(424242)")

    def step() -> dict[str, int]:
        assert os.getpid() != parent_pid
        return {"rows": computed["rows"], "backend": _backend_pid()}

    wait = forked.start(step)
    result = wait()
    assert result["rows"] == 1234
    assert result["backend"] != parent_backend
    # The parent's session went on: same backend, its lock still held.
    assert _backend_pid() == parent_backend
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 424242 AND pid = %s",
            [parent_backend],
        )
        assert cursor.fetchone()[0] == 1
        cursor.execute("SELECT pg_advisory_unlock(424242)")


def test_an_error_in_the_child_is_raised_in_the_parent_with_its_traceback() -> None:
    def step() -> dict[str, int]:
        raise ValueError("the older days did not fit")

    with pytest.raises(forked.ChildFailed, match="ValueError: the older days did not fit") as failed:
        forked.start(step)()
    assert "Traceback" in str(failed.value)
    assert _backend_pid() > 0  # the parent's connection still works


def test_a_child_that_dies_without_a_result_is_a_failure() -> None:
    def step() -> dict[str, int]:
        os.kill(os.getpid(), signal.SIGKILL)
        return {}

    with pytest.raises(forked.ChildFailed, match="killed by signal 9"):
        forked.start(step)()
