"""Fill fresh copies of the rollup tables while the site reads the live ones, then swap them in.

The demo's older days are millions of minute rollups. Written into the live rollup tables they
cost most of the load: each row goes through six indexes, and into the WAL, because the pages
read those tables meanwhile. Here they go into copies created in the same transaction instead:

1. ``fresh_tables_create``: ``<table>__load`` for each of ``TABLES``, with the live table's
   columns, defaults, identity and checks but no index. With ``wal_level = minimal`` (the embedded
   server, ``accelboard.embedded``) rows written into a table created in the same transaction skip
   the WAL; elsewhere this is still a load without index upkeep.
2. The caller fills them (binary COPY of minute, hour and host rollups computed in numpy,
   ``accelboard.demo.rollups``). ``fresh_rows_copy`` adds the live tables' rows older than
   ``cutoff``, which nothing rewrites while the load runs; ``fresh_indexes_build`` builds the
   live tables' indexes once, over the full tables.
3. ``fresh_swap_in``, in a short transaction of its own: lock the live tables, copy their rows
   from ``cutoff`` on (what the live fleet's rollups may have changed meanwhile), drop them and
   give the copies their names, their indexes' and constraints' names and their sequences' names.
   Readers wait for that transaction only; the copies were committed (and synced) before it.

Row ids are not kept for the live rows (nothing refers to a rollup row by id); the copies' own
identity sequences number them and carry on after the swap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection

TABLES = ("fleet_telemetryrollup", "fleet_hostrollup")
SUFFIX = "__load"


@dataclass
class _Index:
    name: str  # the live table's
    temporary: str  # the copy's, until the swap
    definition: str  # CREATE INDEX ... on the copy
    constraint: str | None  # the primary key or unique constraint the index backs
    kind: str | None  # "p" or "u"


@dataclass
class FreshTables:
    """The copies being filled: for each live table, its copy and the indexes to give it."""

    cutoff: datetime
    indexes: dict[str, list[_Index]] = field(default_factory=dict)

    def fresh(self, table: str) -> str:
        return table + SUFFIX


def fresh_tables_drop() -> None:
    """Drop copies an interrupted load left behind."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {', '.join(t + SUFFIX for t in TABLES)}")


def _live_indexes(cursor: object, table: str) -> list[tuple[str, str, str | None, str | None]]:
    cursor.execute(  # type: ignore[attr-defined]
        """
        SELECT i.relname, pg_get_indexdef(i.oid), c.conname, c.contype
        FROM pg_index x
        JOIN pg_class i ON i.oid = x.indexrelid
        LEFT JOIN pg_constraint c ON c.conindid = i.oid AND c.conrelid = x.indrelid
        WHERE x.indrelid = %s::regclass
        ORDER BY i.relname
        """,
        [table],
    )
    return list(cursor.fetchall())  # type: ignore[attr-defined]


def fresh_tables_create(*, cutoff: datetime) -> FreshTables:
    """Create an index-less copy of each of ``TABLES`` in the caller's transaction."""
    fresh_tables_drop()
    result = FreshTables(cutoff=cutoff)
    with connection.cursor() as cursor:
        for table in TABLES:
            copy = result.fresh(table)
            cursor.execute(
                f"CREATE TABLE {copy} (LIKE {table} INCLUDING DEFAULTS INCLUDING IDENTITY "
                "INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION)"
            )
            indexes = []
            for n, (name, definition, constraint, kind) in enumerate(_live_indexes(cursor, table)):
                temporary = f"{copy}_{n}"
                pattern = r"^(CREATE (?:UNIQUE )?INDEX )\S+( ON (?:ONLY )?)\S+"
                rewritten, found = re.subn(pattern, rf"\g<1>{temporary}\g<2>public.{copy}", definition)
                if not found:
                    raise ValueError(f"unexpected index definition on {table}: {definition}")
                indexes.append(_Index(name, temporary, rewritten, constraint, kind))
            result.indexes[table] = indexes
    return result


def fresh_indexes_build(fresh: FreshTables) -> None:
    """Build the copies' indexes (the live tables' ones, under temporary names)."""
    with connection.cursor() as cursor:
        # One sort per index; the default 64 MB would spill a few million rows to disk.
        cursor.execute("SET LOCAL maintenance_work_mem = '256MB'")
        for indexes in fresh.indexes.values():
            for index in indexes:
                cursor.execute(index.definition)


def _columns(cursor: object, table: str) -> list[str]:
    cursor.execute(  # type: ignore[attr-defined]
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
        "AND NOT attisdropped AND attidentity = '' ORDER BY attnum",
        [table],
    )
    return [row[0] for row in cursor.fetchall()]  # type: ignore[attr-defined]


def _rows_copy(cursor: object, fresh: FreshTables, table: str, condition: str) -> int:
    columns = ", ".join(_columns(cursor, table))
    cursor.execute(  # type: ignore[attr-defined]
        f"INSERT INTO {fresh.fresh(table)} ({columns}) SELECT {columns} FROM {table} WHERE {condition}",
        [fresh.cutoff],
    )
    return int(cursor.rowcount)  # type: ignore[attr-defined]


def fresh_rows_copy(fresh: FreshTables) -> int:
    """Copy the live tables' rows older than the cutoff into the copies; return how many."""
    with connection.cursor() as cursor:
        return sum(_rows_copy(cursor, fresh, table, "bucket < %s") for table in TABLES)


def fresh_swap_in(fresh: FreshTables) -> int:
    """Swap the copies in (see the module's docstring, 3.); return the live rows carried over."""
    with connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {', '.join(TABLES)} IN ACCESS EXCLUSIVE MODE")
        carried = sum(_rows_copy(cursor, fresh, table, "bucket >= %s") for table in TABLES)
        for table in TABLES:
            copy = fresh.fresh(table)
            cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [copy])
            sequence = cursor.fetchone()[0]
            cursor.execute(f"DROP TABLE {table}")
            cursor.execute(f"ALTER TABLE {copy} RENAME TO {table}")
            if sequence:
                cursor.execute(f"ALTER SEQUENCE {sequence} RENAME TO {table}_id_seq")
            for index in fresh.indexes[table]:
                if index.kind in ("p", "u"):
                    kind = "PRIMARY KEY" if index.kind == "p" else "UNIQUE"
                    cursor.execute(
                        f"ALTER TABLE {table} ADD CONSTRAINT {index.constraint} {kind} USING INDEX {index.temporary}"
                    )
                else:
                    cursor.execute(f"ALTER INDEX {index.temporary} RENAME TO {index.name}")
            # Check and not-null constraints named after the copy take the live table's names.
            cursor.execute("SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass", [table])
            for (name,) in cursor.fetchall():
                if name.startswith(copy):
                    cursor.execute(
                        f"ALTER TABLE {table} RENAME CONSTRAINT {name} TO {table + name[len(copy) :]}"
                    )
    return carried
