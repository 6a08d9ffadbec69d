"""Every telemetry and rollup key includes the host: the tables can be distributed by host
(Citus, docs/scaling.md) without changing a key."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

TABLES = ("fleet_telemetrysample", "fleet_telemetrypartial", "fleet_telemetryrollup", "fleet_hostrollup")


def _keys(table: str) -> dict[str, list[str]]:
    """Primary-key and unique constraints (and unique indexes) of ``table``: name -> columns."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT i.relname, array_agg(a.attname ORDER BY k.ord)
            FROM pg_index x
            JOIN pg_class t ON t.oid = x.indrelid
            JOIN pg_class i ON i.oid = x.indexrelid
            CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
            WHERE t.relname = %s AND (x.indisunique OR x.indisprimary)
            GROUP BY i.relname
            """,
            [table],
        )
        return dict(cursor.fetchall())


@pytest.mark.parametrize("table", TABLES)
def test_every_key_of_the_table_includes_the_host(table: str) -> None:
    keys = _keys(table)
    assert keys, f"{table} has no primary key or unique constraint"
    for name, columns in keys.items():
        assert "host_id" in columns, f"{table}.{name} {columns} lacks host_id"


def test_the_raw_primary_key_also_serves_one_host_over_time() -> None:
    assert _keys("fleet_telemetrysample")["fleet_telemetrysample_pkey"][:2] == ["host_id", "time"]
