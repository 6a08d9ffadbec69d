"""Writes of raw telemetry: its daily partitions, COPY into them, their partial aggregates, retention.

1. Raw samples go to ``fleet_telemetrysample``, range-partitioned by day (UTC) on ``time``. There
   is no default partition: a sample outside every partition is rejected by PostgreSQL, so ingest
   calls ``telemetry_partitions_ensure`` for the days a batch needs before it is copied, and the
   scheduled job creates the next days ahead of time.
2. Rows are loaded with psycopg 3's binary COPY; the ORM is far too slow for this path. Ingest
   appends each batch's partial aggregates (fleet/partials.py: one row per batch, GPU and minute)
   beside its rows (``telemetry_partials_write``); rows copied without them are recorded as a
   raw-only range (``TelemetryRawRange``), which the rollups then read raw (``rollup_services``).
3. Retention drops whole partitions older than ``TELEMETRY_RETENTION_DAYS``, the GPU attribution
   intervals' days (``fleet_gpuattribution``, made with telemetry's) with them; no DELETE. Rollups
   stay; dirty ranges are drained first so late samples reach the rollups before their day goes.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeVar

import numpy as np
import psycopg
from django.conf import settings
from django.db import OperationalError, connection, transaction

from .models import TELEMETRY_COLUMNS
from .partials import PARTIAL_COLUMNS, PARTIAL_TABLE, partials_compute
from .rollup_services import MAX_COUNTER_GAP_S, MAX_INTEGRATION_GAP_S, THROTTLE_MASK, telemetry_rollups_drain

TABLE = "fleet_telemetrysample"
_T = TypeVar("_T")
# Attribution intervals (docs/attribution.md) are partitioned by the same days and kept as long.
ATTRIBUTION_TABLE = "fleet_gpuattribution"
_PARTITION_RE = re.compile(r"^fleet_telemetrysample_p(\d{8})$")
# One partition call may not create more days than this: a sample stamped 1970 must not create
# twenty thousand tables. Ingest rejects such timestamps before they get here.
MAX_PARTITION_DAYS_PER_CALL = 400
_ADVISORY_PARTITIONS = 7_310_001
# How long one try at a parent's exclusive lock waits (``_partitions_create``), and how long the
# tries go on. The scheduled job makes days ahead (``TELEMETRY_PARTITIONS_AHEAD_DAYS``), so a job
# that gives up leaves the next run plenty of time.
PARTITION_LOCK_TRY = "250ms"
PARTITION_LOCK_WAIT_S = 120.0


def _partition_name(day: date) -> str:
    return f"{TABLE}_p{day:%Y%m%d}"


def telemetry_partition_days() -> list[date]:
    """The days that have a raw telemetry partition, oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname FROM pg_inherits i
            JOIN pg_class c ON c.oid = i.inhrelid
            JOIN pg_class p ON p.oid = i.inhparent
            WHERE p.relname = %s
            """,
            [TABLE],
        )
        names = [row[0] for row in cursor.fetchall()]
    days = []
    for name in names:
        match = _PARTITION_RE.match(name)
        if match:
            days.append(datetime.strptime(match.group(1), "%Y%m%d").date())
    return sorted(days)


def telemetry_partitions_ensure(
    *, start: datetime, end: datetime, remembered: bool = False, lock_wait_s: float = PARTITION_LOCK_WAIT_S
) -> list[date]:
    """Create the daily partitions covering [start, end] (UTC days); return the days created.

    Safe to call from concurrent requests: the check is repeated under an advisory lock, so each
    day is created once and reported as created by exactly one caller. ``remembered``: trust the
    days this process saw exist (no query); for callers that recover from a missing partition
    (telemetry ingest retries after ``telemetry_partitions_forget``): a database dropped and
    created again under the same process (a bench, a test) would otherwise fail their COPY.
    Creating takes each parent's lock in short tries (``_partitions_create``), paused between
    them, for at most ``lock_wait_s``; then ``LockNotAvailable`` (as ``OperationalError``).
    """
    first = start.astimezone(UTC).date()
    last = end.astimezone(UTC).date()
    if last < first:
        raise ValueError(f"partition range ends ({end.isoformat()}) before it starts ({start.isoformat()})")
    span = (last - first).days + 1
    if span > MAX_PARTITION_DAYS_PER_CALL:
        raise ValueError(
            f"partition range {first}..{last} spans {span} days; at most {MAX_PARTITION_DAYS_PER_CALL}"
        )
    wanted = [first + timedelta(days=n) for n in range(span)]
    # The common case costs nothing: days this process saw exist, from yesterday on (retention
    # never drops those), are remembered. Otherwise one catalogue read, and a lock to create.
    if remembered and not set(wanted) - _partitions_seen:
        return []
    existing = set(telemetry_partition_days())
    _partitions_remember_on_commit(existing)
    if not set(wanted) - existing:
        return []
    created = _in_lock_tries(lambda: _partitions_create(wanted), wait_s=lock_wait_s)
    _partitions_remember_on_commit(set(wanted))
    return created


def _in_lock_tries(work: Callable[[], _T], *, wait_s: float) -> _T:
    """``work()`` (a transaction that takes its tables' locks through ``_lock_timeout_short``),
    again after a pause while it gets ``LockNotAvailable``, for at most ``wait_s``."""
    deadline = time.monotonic() + wait_s
    pause = 0.05
    while True:
        try:
            return work()
        except OperationalError as exc:
            if not isinstance(exc.__cause__, psycopg.errors.LockNotAvailable) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def _lock_timeout_short(cursor: Any) -> str:
    """Set the transaction's ``lock_timeout`` to ``PARTITION_LOCK_TRY``; return the one before."""
    cursor.execute(
        "SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)", [PARTITION_LOCK_TRY]
    )
    return str(cursor.fetchone()[0])


def _partitions_create(wanted: list[date]) -> list[date]:
    """Create the ``wanted`` days that do not exist yet; return them. Each ``CREATE ... PARTITION
    OF`` waits for its parent's ``ACCESS EXCLUSIVE`` lock at most ``PARTITION_LOCK_TRY``: a waiting
    request for that lock queues every later writer and reader of the parent behind it, so one
    that waited for a long rollup drain (seconds under a full fleet) held up every telemetry post
    with it (timed out at the agent's 10 s, seen at 4,000 hosts). ``LockNotAvailable`` when it did
    not get it: the caller tries again a moment later."""
    created = []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADVISORY_PARTITIONS])
        previous = _lock_timeout_short(cursor)
        existing = set(telemetry_partition_days())
        for day in wanted:
            if day in existing:
                continue
            lower = datetime(day.year, day.month, day.day, tzinfo=UTC)
            upper = lower + timedelta(days=1)
            # DDL takes no bind parameters; the bounds are dates we formatted ourselves.
            bounds = f"FOR VALUES FROM ('{lower.isoformat()}') TO ('{upper.isoformat()}')"
            # Each CREATE ... PARTITION OF locks its parent exclusively to the commit. The parents
            # in the order an ingest transaction writes them (attribution intervals, raw rows,
            # partials: ``ingest_services.telemetry_batches_store``, remote-write's pods first), or
            # a batch holding the intervals' parent and waiting for the raw rows' deadlocks with
            # this (seen 2026-12-07 in bench/remote_write.py when beat made the next days').
            # The day's GPU attribution intervals (migration 0012) live and go with its raw rows.
            # IF NOT EXISTS: a raw day dropped by hand leaves its other tables' day behind.
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {ATTRIBUTION_TABLE}_p{day:%Y%m%d} PARTITION OF {ATTRIBUTION_TABLE} "
                f"{bounds}"
            )
            cursor.execute(f"CREATE TABLE {_partition_name(day)} PARTITION OF {TABLE} {bounds}")
            # So do the day's partial aggregates (fleet/partials.py).
            # Pages half empty: merging a batch into its minute's row is then a HOT update.
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {PARTIAL_TABLE}_p{day:%Y%m%d} PARTITION OF {PARTIAL_TABLE} "
                f"{bounds} WITH (fillfactor = 50)"
            )
            created.append(day)
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])
    return created


# Partition days known to exist, from yesterday (UTC) on: retention drops only older days, so a
# remembered day stays true for this process. ``telemetry_partitions_drop_older`` forgets too.
_partitions_seen: set[date] = set()


def telemetry_partitions_forget() -> None:
    """Forget the remembered partition days (a COPY found one missing: a day dropped by hand, or
    a test's transaction that created it rolled back); the next ``ensure`` reads the catalogue."""
    _partitions_seen.clear()


def _partitions_remember_on_commit(days: set[date]) -> None:
    """Remember ``days`` once the caller's transaction commits (at once outside one): a day
    created in a transaction that rolls back (a test's) must not be remembered."""
    transaction.on_commit(lambda: _partitions_remember(days))


def _partitions_remember(days: set[date]) -> None:
    floor = datetime.now(UTC).date() - timedelta(days=1)
    _partitions_seen.difference_update([day for day in _partitions_seen if day < floor])
    _partitions_seen.update(day for day in days if day >= floor)


def telemetry_partitions_drop_older(
    *, before: date, lock_wait_s: float = PARTITION_LOCK_WAIT_S
) -> list[date]:
    """Drop whole raw partitions (and their partial aggregates and GPU attribution intervals) for
    days before ``before``. Rollups and workloads are untouched. Dropping a partition locks its
    parent exclusively, as creating one does: taken in short tries (``_in_lock_tries``)."""
    dropped = _in_lock_tries(lambda: _partitions_drop(before), wait_s=lock_wait_s)
    for day in dropped:
        _partitions_seen.discard(day)
    return dropped


def _partitions_drop(before: date) -> list[date]:
    dropped = []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADVISORY_PARTITIONS])
        previous = _lock_timeout_short(cursor)
        for day in telemetry_partition_days():
            if day < before:
                cursor.execute(f"DROP TABLE IF EXISTS {_partition_name(day)}")
                cursor.execute(f"DROP TABLE IF EXISTS {PARTIAL_TABLE}_p{day:%Y%m%d}")
                cursor.execute(f"DROP TABLE IF EXISTS {ATTRIBUTION_TABLE}_p{day:%Y%m%d}")
                dropped.append(day)
        lower = datetime(before.year, before.month, before.day, tzinfo=UTC)
        cursor.execute('DELETE FROM fleet_telemetryrawrange WHERE "end" < %s', [lower])
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])
    return dropped


def telemetry_retention_apply(*, today: date | None = None) -> list[date]:
    """Drop raw days older than ``TELEMETRY_RETENTION_DAYS``, after rolling up what is pending."""
    today = today or datetime.now(UTC).date()
    before = today - timedelta(days=settings.TELEMETRY_RETENTION_DAYS)
    if any(day < before for day in telemetry_partition_days()):
        telemetry_rollups_drain()
    return telemetry_partitions_drop_older(before=before)


_COPY_TYPES = {
    "time": "timestamptz",
    "host_id": "int8",
    "accelerator_id": "int8",
    "energy_mj": "int8",
    "mem_used_bytes": "int8",
    "mem_total_bytes": "int8",
    "throttle_reasons": "int8",
    "ecc_errors": "int8",
    "xid_errors": "int4",
    "mem_free_bytes": "int8",
    "mem_reserved_bytes": "int8",
    "pcie_replay_errors": "int8",
    "remapped_rows_correctable": "int8",
    "remapped_rows_uncorrectable": "int8",
}


def telemetry_copy(
    *,
    rows: Iterable[Sequence[object]],
    columns: Sequence[str] = TELEMETRY_COLUMNS,
    partials_follow: bool = False,
) -> int:
    """Binary-COPY rows (tuples in ``columns`` order) into the raw table; return the row count.

    The caller makes sure the partitions exist (``telemetry_partitions_ensure``). Runs inside the
    caller's transaction, so a failed batch leaves nothing behind. The rows' time range is
    recorded as raw-only (``TelemetryRawRange``: rollups of it read raw rows) unless
    ``partials_follow``: the caller writes their partial aggregates itself (telemetry ingest,
    ``partials.telemetry_partials_write``).
    """
    count = 0
    connection.ensure_connection()
    at = columns.index("time")
    first = last = None
    # Django's error classes (a missing partition is an IntegrityError), as for ORM queries.
    with connection.wrap_database_errors, connection.connection.cursor() as cursor:
        with cursor.copy(f"COPY {TABLE} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([_COPY_TYPES.get(column, "float4") for column in columns])
            for row in rows:
                copy.write_row(row)
                count += 1
                if not partials_follow:
                    moment = row[at]
                    if first is None or moment < first:  # type: ignore[operator]
                        first = moment
                    if last is None or moment > last:  # type: ignore[operator]
                        last = moment
        if first is not None:
            cursor.execute(
                'INSERT INTO fleet_telemetryrawrange (start, "end", created_at) VALUES (%s, %s, now())',
                [first, last],
            )
    return count


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PARTIAL_COPY_SQL = f"COPY {PARTIAL_TABLE} ({', '.join(name for name, _ in PARTIAL_COLUMNS)}, slot) FROM STDIN (FORMAT BINARY)"
_PARTIAL_TIMES = [index for index, (_, kind) in enumerate(PARTIAL_COLUMNS) if kind == "timestamptz"]


def telemetry_partials_write(
    *,
    host_id: int | Sequence[int],
    accelerator_ids: Sequence[int],
    times: Sequence[datetime],
    columns: Mapping[str, Sequence[Any]],
) -> int:
    """Write the partial aggregates (fleet/partials.py) of the rows just copied with
    ``telemetry_copy(partials_follow=True)``, in the same transaction, by one binary COPY; return
    the rows written. ``host_id``: the batch's host, or one per row (several hosts' batches);
    ``times`` are the datetimes COPY wrote, ``columns`` the sample fields by name.

    Appended, never merged (issue 37): each partial gets a slot of its own, a random positive
    63-bit number (``os.urandom``: no sequence round trip, fork-safe; two of a GPU-minute's ~6
    partials alike once in ~10^17), and the refresh sums and stitches a minute's slots. The upsert
    into one row per GPU and minute this replaces cost 1.2 ms of PostgreSQL CPU a batch (a conflict
    check and a new 60-column row version six times a minute), the append about a tenth of it;
    the refresh reads ~6 partials per GPU-minute instead of one (docs/scaling.md)."""
    if not times:
        return 0
    # A 1 Hz batch repeats each instant once per GPU: convert each datetime once, exactly.
    cache: dict[datetime, int] = {}
    for moment in times:
        if moment not in cache:
            cache[moment] = (moment - _EPOCH) // timedelta(microseconds=1)
    micros = np.fromiter(map(cache.__getitem__, times), dtype=np.int64, count=len(times))
    rows = partials_compute(
        host_id=host_id,
        accelerator_ids=accelerator_ids,
        micros=micros,
        columns=columns,
        max_gap_s=MAX_INTEGRATION_GAP_S,
        max_counter_gap_s=MAX_COUNTER_GAP_S,
        throttle_mask=THROTTLE_MASK,
    )
    instants = {micro: moment for moment, micro in cache.items()}
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.cursor() as cursor:
        with cursor.copy(_PARTIAL_COPY_SQL) as copy:
            copy.set_types([kind for _, kind in PARTIAL_COLUMNS] + ["int8"])
            for row in rows:
                values = list(row)
                for index in _PARTIAL_TIMES:
                    micro = values[index]
                    stamp = instants.get(micro)
                    values[index] = stamp if stamp is not None else _EPOCH + timedelta(microseconds=micro)
                values.append(int.from_bytes(os.urandom(8), "big") >> 1 or 1)
                copy.write_row(values)
    return len(rows)
