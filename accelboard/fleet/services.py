"""Writes for the fleet: partitions of raw telemetry, COPY loading, rollups and retention.

1. Raw samples go to ``fleet_telemetrysample``, range-partitioned by day (UTC) on ``time``. There
   is no default partition: a sample outside every partition is rejected by PostgreSQL, so ingest
   calls ``telemetry_partitions_ensure`` for the days a batch needs before it is copied, and the
   scheduled job creates the next days ahead of time.
2. Rows are loaded with psycopg 3's binary COPY; the ORM is far too slow for this path.
3. Rollups: 1-minute rollups per GPU are computed from raw samples, 1-hour rollups per GPU from
   the minute rollups (exact: energy and counts are sums, averages are re-weighted by the count of
   non-NULL samples behind each), and per-host rollups of both widths from the GPU rollups of the
   same bucket. Each is an upsert of whole buckets, so re-running a range replaces what was
   there, and every refresh holds one transaction-level advisory lock, so two refreshes never
   interleave. See ``telemetry_rollups_refresh`` for the energy rules. The raw rows of a range
   are read by time (BRIN) and sorted once; a long range goes in chunks of
   ``ROLLUP_CHUNK_SAMPLES`` so each sort stays in memory. JIT is off for these statements.
   Minute rollups are computed from the partial aggregates ingest writes (fleet/partials.py:
   about one row per GPU and minute) where they are exact, from raw rows elsewhere (a GPU whose
   partials overlap in time, a range near raw rows copied without partials,
   ``TelemetryRawRange``); both give the same numbers.
4. Coalescing: ingest marks the time range of each batch dirty (``telemetry_rollups_mark_dirty``);
   ``telemetry_rollups_drain`` takes every dirty range at once, merges them and refreshes each
   merged range once, so a burst of small batches costs one recompute.
5. Retention drops whole partitions older than ``TELEMETRY_RETENTION_DAYS``; no DELETE. Rollups
   stay; dirty ranges are drained first so late samples reach the rollups before their day goes.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from .models import (
    TELEMETRY_COLUMNS,
    Accelerator,
    AcceleratorType,
    Host,
    RollupHourBacklog,
    TelemetryDirtyRange,
)
from .partials import (
    PARTIAL_COLUMNS,
    PARTIAL_TABLE,
    ROLLUP_INSERT,
    array_literal,
    partial_merge_sql,
    partial_minute_sql,
    partials_compute,
)

TABLE = "fleet_telemetrysample"
_PARTITION_RE = re.compile(r"^fleet_telemetrysample_p(\d{8})$")
# A gap longer than this between two samples is a gap, not energy drawn at the last power reading.
MAX_INTEGRATION_GAP_S = 30
# A counter delta across a longer gap (agent down for hours) is not attributed to anything: the
# driver may have reloaded in between, and the bound keeps each refresh's look-back an index probe.
MAX_COUNTER_GAP_S = 6 * 3600
# One partition call may not create more days than this: a sample stamped 1970 must not create
# twenty thousand tables. Ingest rejects such timestamps before they get here.
MAX_PARTITION_DAYS_PER_CALL = 400
# Dirty ranges closer than this are merged: recomputing a short gap is cheaper than a second pass.
DIRTY_MERGE_GAP = timedelta(minutes=2)
_ADVISORY_PARTITIONS = 7_310_001
_ADVISORY_ROLLUPS = 7_310_002
_BUCKET_ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)
# A long range is rolled up in chunks of about this many raw samples, so that each chunk's sort
# and hash stay in ROLLUP_WORK_MEM (250,000 whole rows sort in ~45 MB).
ROLLUP_CHUNK_SAMPLES = 250_000
ROLLUP_FIRST_CHUNK = timedelta(hours=1)
ROLLUP_WORK_MEM = "64MB"


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


def telemetry_partitions_ensure(*, start: datetime, end: datetime, remembered: bool = False) -> list[date]:
    """Create the daily partitions covering [start, end] (UTC days); return the days created.

    Safe to call from concurrent requests: the check is repeated under an advisory lock, so each
    day is created once and reported as created by exactly one caller. ``remembered``: trust the
    days this process saw exist (no query); for callers that recover from a missing partition
    (telemetry ingest retries after ``telemetry_partitions_forget``): a database dropped and
    created again under the same process (a bench, a test) would otherwise fail their COPY.
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
    created = []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADVISORY_PARTITIONS])
        existing = set(telemetry_partition_days())
        for day in wanted:
            if day in existing:
                continue
            lower = datetime(day.year, day.month, day.day, tzinfo=UTC)
            upper = lower + timedelta(days=1)
            # DDL takes no bind parameters; the bounds are dates we formatted ourselves.
            bounds = f"FOR VALUES FROM ('{lower.isoformat()}') TO ('{upper.isoformat()}')"
            cursor.execute(f"CREATE TABLE {_partition_name(day)} PARTITION OF {TABLE} {bounds}")
            # The day's partial aggregates (fleet/partials.py) live and go with its raw rows. IF NOT
            # EXISTS: a raw day dropped by hand leaves its partial day behind.
            # Pages half empty: merging a batch into its minute's row is then a HOT update.
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {PARTIAL_TABLE}_p{day:%Y%m%d} PARTITION OF {PARTIAL_TABLE} "
                f"{bounds} WITH (fillfactor = 50)"
            )
            created.append(day)
    _partitions_remember_on_commit(set(wanted))
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


def telemetry_partitions_drop_older(*, before: date) -> list[date]:
    """Drop whole raw partitions (and their partial aggregates) for days before ``before``.
    Rollups are untouched."""
    dropped = []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADVISORY_PARTITIONS])
        for day in telemetry_partition_days():
            if day < before:
                cursor.execute(f"DROP TABLE IF EXISTS {_partition_name(day)}")
                cursor.execute(f"DROP TABLE IF EXISTS {PARTIAL_TABLE}_p{day:%Y%m%d}")
                dropped.append(day)
                _partitions_seen.discard(day)
        lower = datetime(before.year, before.month, before.day, tzinfo=UTC)
        cursor.execute('DELETE FROM fleet_telemetryrawrange WHERE "end" < %s', [lower])
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
_PARTIAL_MERGE_SQL = partial_merge_sql()


def telemetry_partials_write(
    *,
    host_id: int,
    accelerator_ids: Sequence[int],
    times: Sequence[datetime],
    columns: Mapping[str, Sequence[Any]],
) -> int:
    """Write the partial aggregates (fleet/partials.py) of one batch just copied with
    ``telemetry_copy(partials_follow=True)``, in the same transaction; return the rows written.
    ``times`` are the datetimes COPY wrote, ``columns`` the sample fields by name."""
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
    params: dict[str, Any] = {"max_gap": MAX_INTEGRATION_GAP_S, "max_counter_gap": MAX_COUNTER_GAP_S}
    for index, (name, _) in enumerate(PARTIAL_COLUMNS):
        params[name] = array_literal([row[index] for row in rows])
    # Server-side binding, prepared once per connection: parsing and planning this statement
    # cost more server CPU than running it (Django's cursors bind on the client).
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(_PARTIAL_MERGE_SQL, params, prepare=True)
    return len(rows)


# --- Rollups ------------------------------------------------------------------------------------

# Minute rollups from raw samples. Besides the rows of the range (one index/BRIN range scan),
# each GPU contributes, through index probes: the sample just before the range (the first delta
# of the range needs it) and the bucket of its first sample after the range (that sample's delta
# changes when a late sample lands before it, so its bucket is recomputed too).
_RAW_COLUMNS = """r.id, r.time, r.host_id, r.accelerator_id, r.power_w, r.energy_mj, r.gpu_util, r.mem_util,
        r.mem_used_bytes, r.mem_total_bytes, r.temperature_c, r.sm_clock_mhz, r.mem_clock_mhz,
        r.throttle_reasons, r.ecc_errors, r.xid_errors"""
_UPSERT = """
ON CONFLICT (width_s, host_id, accelerator_id, bucket) DO UPDATE SET
    samples = EXCLUDED.samples,
    power_samples = EXCLUDED.power_samples, power_avg_w = EXCLUDED.power_avg_w,
    power_max_w = EXCLUDED.power_max_w, energy_j = EXCLUDED.energy_j,
    gpu_util_samples = EXCLUDED.gpu_util_samples, gpu_util_avg = EXCLUDED.gpu_util_avg,
    gpu_util_max = EXCLUDED.gpu_util_max, mem_util_samples = EXCLUDED.mem_util_samples,
    mem_util_avg = EXCLUDED.mem_util_avg, mem_used_samples = EXCLUDED.mem_used_samples,
    mem_used_avg_bytes = EXCLUDED.mem_used_avg_bytes, mem_used_max_bytes = EXCLUDED.mem_used_max_bytes,
    mem_total_bytes = EXCLUDED.mem_total_bytes, temperature_max_c = EXCLUDED.temperature_max_c,
    sm_clock_samples = EXCLUDED.sm_clock_samples, sm_clock_avg_mhz = EXCLUDED.sm_clock_avg_mhz,
    mem_clock_samples = EXCLUDED.mem_clock_samples, mem_clock_avg_mhz = EXCLUDED.mem_clock_avg_mhz,
    throttled_samples = EXCLUDED.throttled_samples, ecc_errors_max = EXCLUDED.ecc_errors_max,
    xid_errors_max = EXCLUDED.xid_errors_max
"""

_MINUTE_SQL = f"""
WITH gpus AS (SELECT g.id FROM fleet_accelerator g {{gpu_filter}}),
rows_ AS (
    -- The range itself by time (BRIN): at 1 Hz a 5-minute window of 128 GPUs lies in ~500
    -- consecutive heap blocks, while reading it GPU by GPU through (accelerator_id, time) visits
    -- one block per row (38,400) because ingest interleaves the GPUs.
    SELECT {_RAW_COLUMNS} FROM fleet_telemetrysample r
    WHERE r.time >= %(start)s AND r.time < %(end)s {{raw_filter}}
    UNION ALL
    -- Per GPU through the (accelerator_id, time) index: the sample just before the range (the
    -- first delta of the range needs it) and the bucket of the first sample after it (its first
    -- delta changes when a late sample lands before it).
    SELECT x.* FROM gpus g CROSS JOIN LATERAL (
        (SELECT {_RAW_COLUMNS} FROM fleet_telemetrysample r
         WHERE r.accelerator_id = g.id AND r.time < %(start)s AND r.time >= %(lookback)s
         ORDER BY r.time DESC, r.id DESC LIMIT 1)
        UNION ALL
        (SELECT {_RAW_COLUMNS} FROM fleet_telemetrysample r
         WHERE r.accelerator_id = g.id AND r.time >= %(end)s AND r.time < (
            SELECT date_bin('60 seconds', n.time, %(origin)s) + interval '60 seconds'
            FROM fleet_telemetrysample n
            WHERE n.accelerator_id = g.id AND n.time >= %(end)s AND n.time < %(lookahead)s
            ORDER BY n.time LIMIT 1))
    ) x
),
s AS (
    SELECT *,
        -- float8 throughout: extract() and bigint / 1000.0 would compute in numeric, 5x slower
        (energy_mj - lag(energy_mj) OVER w)::float8 AS d_energy_mj,
        date_part('epoch', time - lag(time) OVER w) AS dt_s
    FROM (SELECT *, date_bin('60 seconds', time, %(origin)s) AS bucket FROM rows_) b
    -- Ordered by bucket first (the same order as by time): the rows leave the one sort already
    -- grouped, so the aggregate below streams instead of hashing one state per bucket (at one
    -- sample a minute, as in the demo, that is one 20-aggregate state per sample).
    WINDOW w AS (PARTITION BY accelerator_id ORDER BY bucket, time, id)
),
written AS (
    {ROLLUP_INSERT}
    SELECT
        60, bucket, host_id, accelerator_id, count(*),
        count(power_w), avg(power_w), max(power_w),
        sum(CASE
            WHEN d_energy_mj >= 0 AND dt_s <= %(max_counter_gap)s THEN d_energy_mj / 1000.0
            WHEN energy_mj IS NULL AND d_energy_mj IS NULL AND power_w IS NOT NULL AND dt_s <= %(max_gap)s
                THEN power_w * dt_s
            END),
        count(gpu_util), avg(gpu_util), max(gpu_util), count(mem_util), avg(mem_util),
        count(mem_used_bytes), avg(mem_used_bytes::float8), max(mem_used_bytes), max(mem_total_bytes),
        max(temperature_c), count(sm_clock_mhz), avg(sm_clock_mhz), count(mem_clock_mhz), avg(mem_clock_mhz),
        count(*) FILTER (WHERE (throttle_reasons & %(throttle_mask)s) <> 0),
        max(ecc_errors), max(xid_errors)
    FROM s
    WHERE time >= %(start)s
    GROUP BY host_id, accelerator_id, bucket
    {_UPSERT}
    RETURNING bucket, samples
)
-- A summary, not the rows: returning 1.7M rows of a 14-day backfill to Python cost ~15 s.
SELECT count(*) FILTER (WHERE bucket < %(end)s), count(*) FILTER (WHERE bucket >= %(final_end)s),
    max(bucket), coalesce(sum(samples), 0)
FROM written
"""
# The same from the partial aggregates written at ingest (fleet/partials.py), ~10x fewer rows.
_PARTIAL_MINUTE_SQL = partial_minute_sql(_UPSERT)


def _weighted(column: str, count: str) -> str:
    return f"sum({column} * {count}) / nullif(sum({count}), 0)"


# Hour rollups from the minute rollups of the same GPU: sums stay sums, maxima stay maxima and
# each average is re-weighted by its own count, so the result equals a computation from raw rows.
_HOUR_SQL = f"""
INSERT INTO fleet_telemetryrollup (
    width_s, bucket, host_id, accelerator_id, samples,
    power_samples, power_avg_w, power_max_w, energy_j,
    gpu_util_samples, gpu_util_avg, gpu_util_max, mem_util_samples, mem_util_avg,
    mem_used_samples, mem_used_avg_bytes, mem_used_max_bytes, mem_total_bytes, temperature_max_c,
    sm_clock_samples, sm_clock_avg_mhz, mem_clock_samples, mem_clock_avg_mhz,
    throttled_samples, ecc_errors_max, xid_errors_max
)
SELECT
    3600, date_bin('3600 seconds', bucket, %(origin)s) AS hour, host_id, accelerator_id, sum(samples),
    sum(power_samples), {_weighted("power_avg_w", "power_samples")}, max(power_max_w), sum(energy_j),
    sum(gpu_util_samples), {_weighted("gpu_util_avg", "gpu_util_samples")}, max(gpu_util_max),
    sum(mem_util_samples), {_weighted("mem_util_avg", "mem_util_samples")},
    sum(mem_used_samples), {_weighted("mem_used_avg_bytes", "mem_used_samples")},
    max(mem_used_max_bytes), max(mem_total_bytes), max(temperature_max_c),
    sum(sm_clock_samples), {_weighted("sm_clock_avg_mhz", "sm_clock_samples")},
    sum(mem_clock_samples), {_weighted("mem_clock_avg_mhz", "mem_clock_samples")},
    sum(throttled_samples), max(ecc_errors_max), max(xid_errors_max)
FROM fleet_telemetryrollup
WHERE width_s = 60 AND bucket >= %(start)s AND bucket < %(end)s {{gpu_filter}}
GROUP BY host_id, accelerator_id, hour
{_UPSERT}
"""


# Host rollups are rebuilt (delete, then insert) rather than upserted: a GPU that changed host or
# accelerator type would otherwise leave its old contribution behind in another row.
def _host_scope(prefix: str) -> str:
    # The hosts to redo: every host (a whole-fleet refresh), the hosts named (a drain knows which
    # hosts sent samples, and their rows carry that host), else those holding rows of the GPUs
    # named in the range (a GPU's rows keep the host it was on when sampled).
    return f"""
    {prefix}width_s = %(width)s AND {prefix}bucket >= %(start)s AND {prefix}bucket < %(end)s
    AND (%(all_hosts)s OR {prefix}host_id = ANY(%(hosts)s) OR {prefix}host_id IN (
        SELECT DISTINCT host_id FROM fleet_telemetryrollup
        WHERE width_s = %(width)s AND bucket >= %(start)s AND bucket < %(end)s
          AND accelerator_id = ANY(%(host_gpus)s)))
"""


_HOST_DELETE_SQL = f"DELETE FROM fleet_hostrollup WHERE {_host_scope('')}"
_HOST_INSERT_SQL = f"""
INSERT INTO fleet_hostrollup (
    width_s, bucket, host_id, accelerator_type_id, gpus, samples, power_samples, power_avg_w,
    power_sum_w, power_max_w, energy_j, gpu_util_samples, gpu_util_avg, gpu_util_max,
    temperature_max_c, throttled_samples
)
SELECT
    r.width_s, r.bucket, r.host_id, a.accelerator_type_id, count(*), sum(r.samples), sum(r.power_samples),
    {_weighted("r.power_avg_w", "r.power_samples")}, sum(r.power_avg_w), max(r.power_max_w), sum(r.energy_j),
    sum(r.gpu_util_samples), {_weighted("r.gpu_util_avg", "r.gpu_util_samples")}, max(r.gpu_util_max),
    max(r.temperature_max_c), sum(r.throttled_samples)
FROM fleet_telemetryrollup r
JOIN fleet_accelerator a ON a.id = r.accelerator_id
WHERE {_host_scope("r.")}
GROUP BY r.width_s, r.bucket, r.host_id, a.accelerator_type_id
"""

# NVML clocks-event reasons that mean the GPU was slowed by something other than idling or the
# application's own clock setting: SW power cap (0x4), HW slowdown (0x8), HW thermal (0x40),
# HW power brake (0x80), SW thermal (0x20).
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def _floor(moment: datetime, width_s: int) -> datetime:
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % width_s, tz=UTC)


def _ceil(moment: datetime, width_s: int) -> datetime:
    floored = _floor(moment, width_s)
    return floored if floored == moment else floored + timedelta(seconds=width_s)


@dataclass(frozen=True)
class RollupRefresh:
    """What one refresh did: rows upserted per kind and the bucket range it covered;
    ``partial_rows``: the minute rows of them computed from partial aggregates."""

    minute_rows: int = 0
    hour_rows: int = 0
    host_rows: int = 0
    ranges: int = 0
    partial_rows: int = 0
    # The hour buckets whose hour rollups a refresh with ``hours=False`` left to be done.
    hour_ranges: tuple[tuple[datetime, datetime], ...] = ()

    def __add__(self, other: RollupRefresh) -> RollupRefresh:
        return RollupRefresh(
            self.minute_rows + other.minute_rows,
            self.hour_rows + other.hour_rows,
            self.host_rows + other.host_rows,
            self.ranges + other.ranges,
            self.partial_rows + other.partial_rows,
            self.hour_ranges + other.hour_ranges,
        )

    @property
    def rows(self) -> int:
        return self.minute_rows + self.hour_rows + self.host_rows


@contextlib.contextmanager
def _rollup_settings(cursor: Any) -> Iterator[None]:
    """JIT off and ``ROLLUP_WORK_MEM`` for the rollup statements, put back afterwards (the caller's
    transaction may go on: a drain, the demo load). JIT compiling them cost ~60 ms of a 5-minute
    refresh and never paid back; the sorts and hashes of an hour of a 128-GPU fleet need ~50 MB
    to stay in memory. On an error the transaction's rollback puts them back."""
    cursor.execute(
        "SELECT current_setting('jit'), current_setting('work_mem'), "
        "set_config('jit', 'off', true), set_config('work_mem', %s, true)",
        [ROLLUP_WORK_MEM],
    )
    saved_jit, saved_work_mem = cursor.fetchone()[:2]
    yield
    cursor.execute(
        "SELECT set_config('jit', %s, true), set_config('work_mem', %s, true)", [saved_jit, saved_work_mem]
    )


def telemetry_rollups_refresh(
    *,
    start: datetime,
    end: datetime,
    accelerator_ids: Sequence[int] | None = None,
    host_ids: Sequence[int] | None = None,
    hours: bool = True,
) -> RollupRefresh:
    """Recompute the minute, hour and host rollups of every bucket touching [start, end).

    Energy per bucket, per GPU, for each sample against the one before it (ordered by time):
    1. with an energy counter, the delta in J, attributed to the bucket of the later sample; a
       counter that went down (driver reload) starts a new segment and contributes nothing, as
       does a delta across a gap over ``MAX_COUNTER_GAP_S``;
    2. with no counter on this sample nor the one before, power × the time between them, if that
       gap is at most ``MAX_INTEGRATION_GAP_S`` (a longer one is a gap, not energy);
    3. a bucket where nothing contributed has NULL energy, never 0.
    The bucket of each GPU's first sample after ``end`` is recomputed too (its delta changes when
    a late sample lands before it). Runs in one transaction under an advisory lock: safe to run
    twice and in parallel; a second run waits, then writes the same rows. A range holding more
    than ``ROLLUP_CHUNK_SAMPLES`` raw samples is rolled up in consecutive chunks, each exact on
    its own (its look-back and look-ahead samples are read like the range's). ``host_ids`` (or
    ``accelerator_ids``) limit the refresh to those hosts' (GPUs') rows. ``hours=False`` leaves
    the hour rollups (of GPUs and hosts) alone and returns their range in ``hour_ranges``, for
    ``telemetry_rollups_hours_refresh`` to do later.
    """
    explicit_gpus = list(accelerator_ids or [])
    if host_ids:
        accelerator_ids = [
            *(accelerator_ids or []),
            # No ordering: the model's (by host, then index) adds a join and a sort that took up
            # to 180 ms of a drain under a fleet's load, for ids that need no order.
            *Accelerator.objects.filter(host_id__in=list(host_ids)).order_by().values_list("pk", flat=True),
        ]
        if not accelerator_ids:
            return RollupRefresh(ranges=1)
    minute_start = _floor(start, 60)
    minute_end = _ceil(end, 60)
    if minute_end <= minute_start:
        minute_end = minute_start + timedelta(seconds=60)
    gpus = list(accelerator_ids or [])
    params: dict[str, Any] = {
        "origin": _BUCKET_ORIGIN,
        "max_gap": MAX_INTEGRATION_GAP_S,
        "max_counter_gap": MAX_COUNTER_GAP_S,
        "throttle_mask": THROTTLE_MASK,
        "gpus": gpus,
    }
    minute_sql = _MINUTE_SQL.format(
        gpu_filter="WHERE g.id = ANY(%(gpus)s)" if gpus else "",
        raw_filter="AND r.accelerator_id = ANY(%(gpus)s)" if gpus else "",
    )
    raw_sql = _MINUTE_SQL.format(
        gpu_filter="WHERE g.id = ANY(%(raw_gpus)s)", raw_filter="AND r.accelerator_id = ANY(%(raw_gpus)s)"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADVISORY_ROLLUPS])
        # From partials unless raw-only rows (a backfill, the demo's history) lie within reach of
        # a delta: MAX_COUNTER_GAP_S either side of the range.
        reach = timedelta(seconds=MAX_COUNTER_GAP_S)
        cursor.execute(
            'SELECT NOT EXISTS (SELECT 1 FROM fleet_telemetryrawrange WHERE start < %s AND "end" >= %s)',
            [minute_end + reach, minute_start - reach],
        )
        if cursor.fetchone()[0]:
            minute_sql = _PARTIAL_MINUTE_SQL.format(
                gpu_filter="WHERE g.id = ANY(%(gpus)s)" if gpus else "",
                part_filter="AND p.accelerator_id = ANY(%(gpus)s)" if gpus else "",
            )
        else:
            raw_sql = ""
        with _rollup_settings(cursor):
            # A long range (a backfill, the demo's 14 days) goes in chunks so each one's sort and
            # hash fit in memory. The bucket after a chunk is computed by both neighbours alike.
            minute_rows, partial_rows, last_minute = 0, 0, minute_end - timedelta(seconds=60)
            chunk_start, chunk = minute_start, ROLLUP_FIRST_CHUNK
            while chunk_start < minute_end:
                chunk_end = min(chunk_start + chunk, minute_end)
                chunk_params = {
                    **params,
                    "start": chunk_start,
                    "end": chunk_end,
                    "final_end": minute_end,
                    "lookback": chunk_start - timedelta(seconds=MAX_COUNTER_GAP_S),
                    "lookahead": chunk_end + timedelta(seconds=MAX_COUNTER_GAP_S),
                }
                cursor.execute(minute_sql, chunk_params)
                inside, beyond, newest, samples, *rest = cursor.fetchone()
                if raw_sql:
                    partial_rows += inside + (beyond if chunk_end == minute_end else 0)
                if raw_sql and rest[0]:
                    # GPUs whose partials overlap in time: from their raw rows, as without partials.
                    cursor.execute(raw_sql, {**chunk_params, "raw_gpus": rest[0]})
                    more = cursor.fetchone()
                    inside, beyond, samples = inside + more[0], beyond + more[1], samples + more[3]
                    newest = max(filter(None, (newest, more[2])), default=None)
                # A bucket past a chunk is computed again by a later chunk; past the whole range it
                # is computed alike by every chunk, so the last chunk's count is the one to keep.
                minute_rows += inside + (beyond if chunk_end == minute_end else 0)
                if newest is not None:
                    last_minute = max(last_minute, newest)
                # The next chunk's length follows the sample density just seen, in whole minutes.
                minutes = (chunk_end - chunk_start) / timedelta(minutes=1)
                scaled = minutes * ROLLUP_CHUNK_SAMPLES / max(samples, 1)
                chunk = timedelta(minutes=int(min(max(scaled, 1), 7 * 24 * 60)))
                chunk_start = chunk_end
            # The next-sample buckets may lie past ``end``: the hours and hosts to redo follow them.
            hour_start = _floor(minute_start, 3600)
            hour_end = _floor(last_minute, 3600) + timedelta(seconds=3600)
            hour_rows, host_rows = 0, 0
            # Hosts' rows to redo: of the hosts named, else of the GPUs named (looked up by their
            # rows: GPUs named on their own, not as a named host's), else of every host.
            scope = {
                "all_hosts": not gpus,
                "hosts": list(host_ids or []),
                "host_gpus": explicit_gpus if host_ids else gpus,
            }
            host_rows += _host_rollups(
                cursor, width=60, start=minute_start, end=last_minute + timedelta(seconds=60), scope=scope
            )
            if hours:
                more_hours, more_hosts = _hour_rollups(
                    cursor, start=hour_start, end=hour_end, gpus=gpus, scope=scope
                )
                hour_rows, host_rows = more_hours, host_rows + more_hosts
    return RollupRefresh(
        minute_rows=minute_rows,
        hour_rows=hour_rows,
        host_rows=host_rows,
        ranges=1,
        partial_rows=partial_rows,
        hour_ranges=() if hours else ((hour_start, hour_end),),
    )


def _host_rollups(cursor: Any, *, width: int, start: datetime, end: datetime, scope: dict[str, Any]) -> int:
    """Rebuild the host rollups of ``width`` in [start, end) for the hosts ``scope`` names."""
    params = {"width": width, "start": start, "end": end, **scope}
    cursor.execute(_HOST_DELETE_SQL, params)
    cursor.execute(_HOST_INSERT_SQL, params)
    return int(cursor.rowcount)


def _hour_rollups(
    cursor: Any, *, start: datetime, end: datetime, gpus: Sequence[int], scope: dict[str, Any]
) -> tuple[int, int]:
    """The hour rollups of hour buckets [start, end) from their minute rollups, of ``gpus`` (of
    every GPU: empty), and the hosts' hour rollups; returns (hour rows, host rows)."""
    cursor.execute(
        _HOUR_SQL.format(gpu_filter="AND accelerator_id = ANY(%(gpus)s)" if gpus else ""),
        {"origin": _BUCKET_ORIGIN, "start": start, "end": end, "gpus": list(gpus)},
    )
    hour_rows = int(cursor.rowcount)
    return hour_rows, _host_rollups(cursor, width=3600, start=start, end=end, scope=scope)


def telemetry_rollups_hours_refresh(*, ranges: Sequence[tuple[datetime, datetime]]) -> RollupRefresh:
    """Recompute the hour rollups (of every GPU and host) of the hour buckets in ``ranges`` from
    the minute rollups there; the rollups' lock and settings as ``telemetry_rollups_refresh``."""
    result = RollupRefresh()
    if not ranges:
        return result
    scope = {"all_hosts": True, "hosts": [], "host_gpus": []}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADVISORY_ROLLUPS])
        with _rollup_settings(cursor):
            for start, end in time_ranges_merge(ranges, gap=timedelta(0)):
                hour_rows, host_rows = _hour_rollups(
                    cursor, start=_floor(start, 3600), end=_ceil(end, 3600), gpus=(), scope=scope
                )
                result += RollupRefresh(hour_rows=hour_rows, host_rows=host_rows, ranges=1)
    return result


def time_ranges_merge(
    ranges: Iterable[tuple[datetime, datetime]], *, gap: timedelta = DIRTY_MERGE_GAP
) -> list[tuple[datetime, datetime]]:
    """Merge ranges that overlap or lie closer than ``gap``; return them sorted. Pure."""
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted((min(a, b), max(a, b)) for a, b in ranges):
        if merged and start <= merged[-1][1] + gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def telemetry_rollups_mark_dirty(
    *, start: datetime, end: datetime, host_id: int | None = None
) -> TelemetryDirtyRange:
    """Record that samples of ``host_id`` (of any host: None) landed in [start, end]; the next
    drain rolls them up. Call it inside the writing transaction so the mark commits with the
    samples or not at all (telemetry ingest writes its mark in its final statement)."""
    if end < start:
        start, end = end, start
    return TelemetryDirtyRange.objects.create(start=start, end=end, host_id=host_id)


def telemetry_rollups_claim(*, interval_s: float) -> tuple[bool, float]:
    """Claim the next rollup drain for every web process at once: ``(True, interval_s)`` when
    the drain due before now is this caller's to enqueue (it becomes due ``interval_s`` from now),
    ``(False, seconds)`` when another caller's drain is due in that many seconds. One statement;
    concurrent claims queue on the row and only the first finds it due. A drain due at D covers
    every batch committed before D, so a caller that lost the claim has nothing to enqueue."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO fleet_rollupdrainschedule (id, due)
            VALUES (1, now() + make_interval(secs => %(interval)s))
            ON CONFLICT (id) DO UPDATE SET due = EXCLUDED.due
            WHERE fleet_rollupdrainschedule.due <= now()
            RETURNING due
            """,
            {"interval": interval_s},
        )
        if cursor.fetchone() is not None:
            return True, interval_s
        cursor.execute("SELECT EXTRACT(EPOCH FROM due - now()) FROM fleet_rollupdrainschedule WHERE id = 1")
        row = cursor.fetchone()
    return False, max(0.0, float(row[0])) if row else 0.0


def telemetry_rollups_claim_release() -> None:
    """Give the claim back (its drain could not be enqueued): the next batch claims again."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE fleet_rollupdrainschedule SET due = now() WHERE id = 1")


def telemetry_rollups_lock_try() -> bool:
    """Take the rollups' advisory lock for the caller's transaction unless a refresh or drain
    holds it now; False when one does (nothing is taken). The lock is re-entrant: a drain run
    in the same transaction afterwards takes it again without waiting."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("telemetry_rollups_lock_try must run inside a transaction")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [_ADVISORY_ROLLUPS])
        return bool(cursor.fetchone()[0])


def telemetry_rollups_drain(
    *, also: Sequence[tuple[datetime, datetime]] = (), hours_every_s: float = 0.0
) -> RollupRefresh:
    """Refresh every dirty range (and ``also``) at once, merged; the marks go in the same commit.

    The advisory lock is taken before the marks are read, so a drain that waited for another
    finds the marks that one already consumed gone and does only what arrived since.

    ``hours_every_s`` > 0 (ingest's drains): the minute rollups now, the hour rollups of what
    changed at most once per that many seconds; until then their ranges wait in the backlog
    (``RollupHourBacklog``). 0 (the per-minute pass): hours now, and the backlog with them.

    Either way the refreshes below leave the hours to ``_hour_backlog_settle``, which redoes them
    for every GPU of the merged ranges at once: the per-minute pass's hours for a host mark's
    GPUs (``accelerator_id = ANY`` of 16,000 ids) took 1.7 s where the unfiltered ones take 0.2.
    """
    result = RollupRefresh()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADVISORY_ROLLUPS])
        cursor.execute('DELETE FROM fleet_telemetrydirtyrange RETURNING start, "end", host_id')
        marks = cursor.fetchall()
        everyone = [(row[0], row[1]) for row in marks if row[2] is None]
        for start, end in time_ranges_merge([*everyone, *also]):
            # A range is [start, end] of sample times: the sample at ``end`` must be included.
            result += telemetry_rollups_refresh(
                start=start, end=end + timedelta(microseconds=1), hours=False
            )
        # Host marks: merged by time, each merged range refreshed for the hosts that sent in it.
        by_host = [(row[0], row[1], row[2]) for row in marks if row[2] is not None]
        for start, end in time_ranges_merge([(a, b) for a, b, _ in by_host]):
            hosts = sorted({host for a, b, host in by_host if a >= start and b <= end})
            result += telemetry_rollups_refresh(
                start=start, end=end + timedelta(microseconds=1), host_ids=hosts, hours=False
            )
        result += _hour_backlog_settle(result.hour_ranges, every_s=hours_every_s)
    return result


def _hour_backlog_settle(ranges: Sequence[tuple[datetime, datetime]], *, every_s: float) -> RollupRefresh:
    """Add ``ranges`` to the hour backlog; redo the backlog's hours if ``every_s`` has passed
    since they were last redone (at once when 0). Inside a drain: under the rollups' lock."""
    backlog, _ = RollupHourBacklog.objects.get_or_create(pk=1)
    pending = [(datetime.fromisoformat(a), datetime.fromisoformat(b)) for a, b in backlog.ranges]
    pending = time_ranges_merge([*pending, *ranges], gap=timedelta(0))
    now = timezone.now()
    if (
        every_s > 0
        and backlog.refreshed_at is not None
        and (now - backlog.refreshed_at).total_seconds() < every_s
    ):
        if ranges:
            backlog.ranges = [[a.isoformat(), b.isoformat()] for a, b in pending]
            backlog.save(update_fields=["ranges"])
        return RollupRefresh()
    result = telemetry_rollups_hours_refresh(ranges=pending)
    backlog.ranges, backlog.refreshed_at = [], now
    backlog.save(update_fields=["ranges", "refreshed_at"])
    return RollupRefresh(hour_rows=result.hour_rows, host_rows=result.host_rows)


# --- Registration of hosts and GPUs (keyed by UUID) ---------------------------------------------


def accelerator_type_match(*, name: str) -> AcceleratorType | None:
    """The accelerator type whose ``match_names`` (or name) occur in a driver-reported model name."""
    lowered = name.lower()
    best: tuple[int, AcceleratorType] | None = None
    for accel_type in AcceleratorType.objects.all():
        for candidate in [accel_type.name, *accel_type.match_names]:
            if candidate and candidate.lower() in lowered:
                if best is None or len(candidate) > best[0]:
                    best = (len(candidate), accel_type)
    return best[1] if best else None


class AcceleratorTypeRejected(ValueError):
    """A new accelerator type that cannot be added as given; ``field`` names what to fix."""

    def __init__(self, message: str, *, field: str) -> None:
        self.message = message
        self.field = field
        super().__init__(message)


def accelerator_type_create(
    *,
    name: str,
    vendor: str,
    product: str = "",
    form_factor: str = "",
    memory_bytes: int | None = None,
    board_power_w: float | None = None,
) -> AcceleratorType:
    """Add an accelerator type to the catalogue (an uploader's new hardware); its slug comes from
    its name. Raises ``AcceleratorTypeRejected`` naming the field (a taken name, a bad vendor)."""
    from django.utils.text import slugify

    from .choices import FormFactor, Vendor

    name = " ".join(name.split())
    slug = slugify(name)[:80]
    if not name or not slug or len(name) > 80:
        raise AcceleratorTypeRejected("give the type a name of 1 to 80 characters", field="name")
    if vendor not in Vendor.values:
        raise AcceleratorTypeRejected(f"vendor must be one of {', '.join(Vendor.values)}", field="vendor")
    if form_factor and form_factor not in FormFactor.values:
        raise AcceleratorTypeRejected(
            f"form factor must be one of {', '.join(FormFactor.values)}", field="form_factor"
        )
    if memory_bytes is not None and not 0 < memory_bytes <= 16 * 1024**4:
        raise AcceleratorTypeRejected("memory must be between 0 and 16 TiB", field="memory")
    if board_power_w is not None and not 0 < board_power_w <= 10_000:
        raise AcceleratorTypeRejected("board power must be between 0 and 10,000 W", field="board_power_w")
    if (
        AcceleratorType.objects.filter(name__iexact=name).exists()
        or AcceleratorType.objects.filter(slug=slug).exists()
    ):
        raise AcceleratorTypeRejected(f"an accelerator type named {name!r} exists: pick it", field="name")
    return AcceleratorType.objects.create(
        name=name,
        slug=slug,
        vendor=vendor,
        product=product.strip()[:40],
        form_factor=form_factor,
        memory_bytes=memory_bytes,
        board_power_w=board_power_w,
    )


# The facts a host's registration keeps in its own columns (the rest stay in ``facts``).
HOST_FIELDS = (
    "driver_version",
    "cuda_version",
    "agent_version",
    "provider",
    "region",
    "instance_type",
    "simulated",
)


def host_register(
    *,
    hostname: str,
    team_id: int | None,
    facts: dict[str, object] | None = None,
    accelerators: Sequence[dict[str, object]] = (),
    seen_at: datetime | None = None,
) -> tuple[Host, dict[str, Accelerator]]:
    """Create or update a host and its GPUs; return the host and its GPUs by UUID.

    A GPU that moved to another host (re-seated card) follows its UUID. Facts not given are kept.
    ``accelerators`` items: uuid (required), index, name, serial, memory_bytes, power_limit_w,
    driver_version, mig_mode, parent_uuid, unsupported.
    """
    facts = dict(facts or {})
    seen_at = seen_at or datetime.now(UTC)
    host_fields: dict[str, Any] = {key: facts.pop(key) for key in HOST_FIELDS if key in facts}
    with transaction.atomic():
        host, created = Host.objects.select_for_update().get_or_create(
            hostname=hostname,
            defaults={"team_id": team_id, **host_fields, "facts": facts, "last_seen_at": seen_at},
        )
        if not created:
            changed: dict[str, Any] = {
                key: value for key, value in host_fields.items() if getattr(host, key) != value
            }
            if facts and {**host.facts, **facts} != host.facts:
                changed["facts"] = {**host.facts, **facts}
            if host.team_id is None and team_id is not None:
                changed["team_id"] = team_id
            if host.last_seen_at is None or seen_at > host.last_seen_at:
                changed["last_seen_at"] = seen_at
            for key, value in changed.items():
                setattr(host, key, value)
            if changed:
                host.save(update_fields=list(changed))
        existing = {
            gpu.uuid: gpu for gpu in Accelerator.objects.filter(uuid__in=[a["uuid"] for a in accelerators])
        }
        result: dict[str, Accelerator] = {}
        for item in accelerators:
            gpu_uuid = str(item["uuid"])
            fields: dict[str, Any] = {
                key: item[key]
                for key in (
                    "index",
                    "name",
                    "serial",
                    "memory_bytes",
                    "power_limit_w",
                    "driver_version",
                    "mig_mode",
                    "parent_uuid",
                    "unsupported",
                )
                if key in item and item[key] is not None
            }
            gpu = existing.get(gpu_uuid)
            if gpu is None:
                accel_type = accelerator_type_match(name=str(item.get("name", "")))
                gpu = Accelerator.objects.create(
                    uuid=gpu_uuid, host=host, accelerator_type=accel_type, last_seen_at=seen_at, **fields
                )
            else:
                changed_gpu: dict[str, Any] = {
                    key: value for key, value in fields.items() if getattr(gpu, key) != value
                }
                if gpu.host_id != host.pk:
                    changed_gpu["host_id"] = host.pk
                for key, value in changed_gpu.items():
                    setattr(gpu, key, value)
                if changed_gpu:
                    gpu.save(update_fields=list(changed_gpu))
            result[gpu_uuid] = gpu
    return host, result
