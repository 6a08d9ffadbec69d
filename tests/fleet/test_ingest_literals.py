"""The array literals the ingest's statements take in place of lists (``ingest_services``'s
``_ints_literal`` and ``_times_literal``) read back as the very values psycopg would send."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db import connection

from accelboard.fleet.ingest_services import _ints_literal, _times_literal

pytestmark = pytest.mark.django_db


def _read(sql: str, value: object) -> object:
    with connection.cursor() as cursor:
        cursor.execute(sql, [value])
        return cursor.fetchone()[0]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_literals_read_back_exactly(seed: int) -> None:
    rng = random.Random(seed)
    ints = [0, 1, -1, 2**63 - 1, -(2**63), *(rng.randrange(-(2**63), 2**63) for _ in range(50))]
    base = datetime(2026, 12, 7, 20, 0, tzinfo=UTC)
    times = [
        base,  # no microseconds: isoformat leaves them out
        base + timedelta(microseconds=1),
        datetime(1999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 30, 0, 5, tzinfo=timezone(timedelta(hours=5, minutes=45))),
        *(base + timedelta(microseconds=rng.randrange(-(10**15), 10**15)) for _ in range(50)),
    ]
    assert _read("SELECT %s::int8[]", _ints_literal(ints)) == ints
    assert _read("SELECT %s::timestamptz[]", _times_literal(times)) == times
    assert _read("SELECT %s::int8[]", _ints_literal([])) == []
    assert _read("SELECT %s::timestamptz[]", _times_literal([])) == []
    assert _read("SELECT %s::timestamptz[]", _times_literal([base, None])) == [base, None]
