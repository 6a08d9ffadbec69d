"""Writes for the fleet: partitions of raw telemetry, COPY loading, rollups and retention.

1. Raw samples go to ``fleet_telemetrysample``, range-partitioned by day on ``time``. There is no
   default partition: a sample outside every partition would be silently kept forever, so
   ``telemetry_partitions_ensure`` creates the days a batch needs before it is copied.
2. Rows are loaded with psycopg 3's binary COPY; the ORM is far too slow for this path.
3. Rollups (1 minute and 1 hour per GPU) are recomputed for a time range with one
   ``INSERT ... SELECT ... ON CONFLICT DO UPDATE`` each, so re-running a range (late samples)
   replaces what was there. Energy per bucket: non-negative counter deltas attributed to the later
   sample's bucket; without a counter, power × the time since the previous sample (capped).
4. Retention drops whole partitions older than ``TELEMETRY_RETENTION_DAYS``; no DELETE.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from .models import TELEMETRY_COLUMNS

TABLE = "fleet_telemetrysample"
_PARTITION_RE = re.compile(r"^fleet_telemetrysample_p(\d{8})$")
# A gap longer than this between two samples is a gap, not energy drawn at the last power reading.
MAX_INTEGRATION_GAP_S = 30
_ADVISORY_PARTITIONS = 7_310_001


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


def telemetry_partitions_ensure(*, start: datetime, end: datetime) -> list[date]:
    """Create the daily partitions covering [start, end]; return the days created."""
    first = start.astimezone(UTC).date()
    last = end.astimezone(UTC).date()
    wanted = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    existing = set(telemetry_partition_days())
    missing = [day for day in wanted if day not in existing]
    if not missing:
        return []
    created = []
    with transaction.atomic(), connection.cursor() as cursor:
        # Two ingest requests needing the same new day must not race on CREATE TABLE.
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADVISORY_PARTITIONS])
        for day in missing:
            lower = datetime(day.year, day.month, day.day, tzinfo=UTC)
            upper = lower + timedelta(days=1)
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {_partition_name(day)} PARTITION OF {TABLE} "
                "FOR VALUES FROM (%s) TO (%s)",
                [lower, upper],
            )
            created.append(day)
    return created


def telemetry_partitions_drop_older(*, before: date) -> list[date]:
    """Drop whole raw partitions for days before ``before``. Rollups are untouched."""
    dropped = []
    with connection.cursor() as cursor:
        for day in telemetry_partition_days():
            if day < before:
                cursor.execute(f"DROP TABLE IF EXISTS {_partition_name(day)}")
                dropped.append(day)
    return dropped


def telemetry_retention_apply(*, today: date | None = None) -> list[date]:
    today = today or datetime.now(UTC).date()
    return telemetry_partitions_drop_older(before=today - timedelta(days=settings.TELEMETRY_RETENTION_DAYS))


def telemetry_copy(*, rows: Iterable[Sequence[object]], columns: Sequence[str] = TELEMETRY_COLUMNS) -> int:
    """Binary-COPY rows (tuples in ``columns`` order) into the raw table; return the row count.

    The caller makes sure the partitions exist (``telemetry_partitions_ensure``). Runs inside the
    caller's transaction, so a failed batch leaves nothing behind.
    """
    types = {
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
    count = 0
    connection.ensure_connection()
    with connection.connection.cursor() as cursor:
        with cursor.copy(f"COPY {TABLE} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([types.get(column, "float4") for column in columns])
            for row in rows:
                copy.write_row(row)
                count += 1
    return count


_ROLLUP_SQL = """
WITH s AS (
    SELECT
        time, host_id, accelerator_id, power_w, energy_mj, gpu_util, mem_util, mem_used_bytes,
        mem_total_bytes, temperature_c, sm_clock_mhz, mem_clock_mhz, throttle_reasons, ecc_errors, xid_errors,
        energy_mj - lag(energy_mj) OVER w AS d_energy_mj,
        extract(epoch FROM time - lag(time) OVER w) AS dt_s
    FROM fleet_telemetrysample
    WHERE time >= %(lookback)s AND time < %(end)s {gpu_filter}
    WINDOW w AS (PARTITION BY accelerator_id ORDER BY time)
)
INSERT INTO fleet_telemetryrollup (
    width_s, bucket, host_id, accelerator_id, samples, power_avg_w, power_max_w, energy_j,
    gpu_util_avg, gpu_util_max, mem_util_avg, mem_used_avg_bytes, mem_used_max_bytes, mem_total_bytes,
    temperature_max_c, sm_clock_avg_mhz, mem_clock_avg_mhz, throttled_samples, ecc_errors_max, xid_errors_max
)
SELECT
    %(width)s,
    to_timestamp(floor(extract(epoch FROM time) / %(width)s) * %(width)s) AS bucket,
    max(host_id), accelerator_id, count(*),
    avg(power_w), max(power_w),
    sum(CASE
        WHEN d_energy_mj IS NOT NULL AND d_energy_mj >= 0 THEN d_energy_mj / 1000.0
        WHEN d_energy_mj IS NULL AND energy_mj IS NULL AND power_w IS NOT NULL AND dt_s <= %(max_gap)s
            THEN power_w * dt_s
        ELSE NULL END),
    avg(gpu_util), max(gpu_util), avg(mem_util), avg(mem_used_bytes), max(mem_used_bytes), max(mem_total_bytes),
    max(temperature_c), avg(sm_clock_mhz), avg(mem_clock_mhz),
    count(*) FILTER (WHERE throttle_reasons IS NOT NULL AND (throttle_reasons & %(throttle_mask)s) <> 0),
    max(ecc_errors), max(xid_errors)
FROM s
WHERE time >= %(start)s
GROUP BY accelerator_id, bucket
ON CONFLICT (width_s, accelerator_id, bucket) DO UPDATE SET
    host_id = EXCLUDED.host_id, samples = EXCLUDED.samples,
    power_avg_w = EXCLUDED.power_avg_w, power_max_w = EXCLUDED.power_max_w, energy_j = EXCLUDED.energy_j,
    gpu_util_avg = EXCLUDED.gpu_util_avg, gpu_util_max = EXCLUDED.gpu_util_max,
    mem_util_avg = EXCLUDED.mem_util_avg, mem_used_avg_bytes = EXCLUDED.mem_used_avg_bytes,
    mem_used_max_bytes = EXCLUDED.mem_used_max_bytes, mem_total_bytes = EXCLUDED.mem_total_bytes,
    temperature_max_c = EXCLUDED.temperature_max_c, sm_clock_avg_mhz = EXCLUDED.sm_clock_avg_mhz,
    mem_clock_avg_mhz = EXCLUDED.mem_clock_avg_mhz, throttled_samples = EXCLUDED.throttled_samples,
    ecc_errors_max = EXCLUDED.ecc_errors_max, xid_errors_max = EXCLUDED.xid_errors_max
"""

# NVML clocks-event reasons that mean the GPU was slowed by something other than idling or the
# application's own clock setting: SW power cap (0x4), HW slowdown (0x8), HW thermal (0x40),
# HW power brake (0x80), SW thermal (0x20).
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def _floor(moment: datetime, width_s: int) -> datetime:
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % width_s, tz=UTC)


def telemetry_rollups_refresh(
    *, start: datetime, end: datetime, widths: Sequence[int] = (60, 3600), accelerator_ids: Sequence[int] | None = None
) -> int:
    """Recompute the rollups of every bucket touching [start, end); return rows upserted."""
    total = 0
    gpu_filter = "AND accelerator_id = ANY(%(gpus)s)" if accelerator_ids else ""
    with connection.cursor() as cursor:
        for width in widths:
            bucket_start = _floor(start, width)
            bucket_end = _floor(end - timedelta(microseconds=1), width) + timedelta(seconds=width)
            cursor.execute(
                _ROLLUP_SQL.format(gpu_filter=gpu_filter),
                {
                    "width": width,
                    "start": bucket_start,
                    "end": bucket_end,
                    "lookback": bucket_start - timedelta(seconds=MAX_INTEGRATION_GAP_S * 4),
                    "max_gap": MAX_INTEGRATION_GAP_S,
                    "throttle_mask": THROTTLE_MASK,
                    "gpus": list(accelerator_ids or []),
                },
            )
            total += cursor.rowcount
    return total
