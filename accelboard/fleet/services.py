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

from .models import TELEMETRY_COLUMNS, Accelerator, AcceleratorType, Host

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
    *,
    start: datetime,
    end: datetime,
    widths: Sequence[int] = (60, 3600),
    accelerator_ids: Sequence[int] | None = None,
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
    host_fields = {
        key: facts.pop(key)
        for key in (
            "driver_version",
            "cuda_version",
            "agent_version",
            "provider",
            "region",
            "instance_type",
            "simulated",
        )
        if key in facts
    }
    with transaction.atomic():
        host, created = Host.objects.select_for_update().get_or_create(
            hostname=hostname,
            defaults={"team_id": team_id, **host_fields, "facts": facts, "last_seen_at": seen_at},
        )
        if not created:
            changed = {key: value for key, value in host_fields.items() if getattr(host, key) != value}
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
            fields = {
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
                changed_gpu = {key: value for key, value in fields.items() if getattr(gpu, key) != value}
                if gpu.host_id != host.pk:
                    changed_gpu["host_id"] = host.pk
                for key, value in changed_gpu.items():
                    setattr(gpu, key, value)
                if changed_gpu:
                    gpu.save(update_fields=list(changed_gpu))
            result[gpu_uuid] = gpu
    return host, result
