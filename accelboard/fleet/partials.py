"""Partial aggregates written at ingest, so that a rollup refresh reads ~10x fewer rows.

1. Each ingested batch computes one partial per GPU and minute it covers (``partials_compute``):
   the sample count and non-NULL count, sum and maximum of each signal, the first and last time,
   the first and last counter reading, the first power reading, and the energy of every sample of
   the partial but its first (the rules of ``rollup_services.telemetry_rollups_refresh``, against the
   previous sample of the same partial). ``partition_services.telemetry_partials_write`` appends
   them in the batch's transaction (one binary COPY, each partial in a slot of its own: no
   conflict check, no update; issue 37), so an agent's 10 s batches leave about six rows per GPU
   and minute. Values are rounded to float4 as the raw table stores them, times are the
   microseconds COPY wrote, so a minute rebuilt from partials equals the one from raw rows (to
   the order of float8 additions).
2. The refresh (``PARTIAL_MINUTE_SQL``) sums a GPU's partials of a minute and stitches the first
   sample of each partial to the last sample of the GPU's partial before it (a window over
   partials ordered by time): counter deltas, resets, ``MAX_COUNTER_GAP_S`` and power
   integration over at most ``MAX_INTEGRATION_GAP_S`` exactly as from raw rows.
3. Stitching is exact only where a GPU's partials do not overlap in time. A GPU whose partials
   in the refresh overlap or touch (two batches with samples at the same instant: the raw order
   is by row id, unknown here) is rolled up from raw rows instead, by the same statement as
   before. Read with them: every partial of the GPU's minute after the range, and of its minute
   before the range the two that end last (the first delta needs only the last sample before the
   range; the second partial overlaps or touches the last one when that sample's place is not
   known from them; an overlap earlier in that minute cannot reach the range).
4. Rows copied by anything but ingest (backfills, the demo loader, tests' factories) have no
   partials: ``partition_services.telemetry_copy`` records their time range in ``fleet_telemetryrawrange``
   and a refresh within ``MAX_COUNTER_GAP_S`` of such a range reads raw rows, as it always did.
5. The table is partitioned by day on ``bucket`` beside the raw table: created and dropped with it
   (``partition_services.telemetry_partitions_ensure`` / ``telemetry_partitions_drop_older``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

PARTIAL_TABLE = "fleet_telemetrypartial"
# DCGM's profiling counters (DCGM_FI_PROF_*) as sample fields, in % (DCGM's ratio x 100): each
# has a count and a sum here and a count and a mean in the GPU rollups; the host and run pages
# show them where a GPU has them.
PROFILING_FIELDS = ("gr_engine_active", "sm_active", "sm_occupancy", "tensor_active", "dram_active")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MINUTE_US = 60_000_000
_INT64_MIN = np.iinfo(np.int64).min

# Column order of the partial table (COPY) and the types COPY sends.
PARTIAL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("bucket", "timestamptz"),
    ("host_id", "int8"),
    ("accelerator_id", "int8"),
    ("first_time", "timestamptz"),
    ("last_time", "timestamptz"),
    ("samples", "int4"),
    ("first_energy_mj", "int8"),
    ("last_energy_mj", "int8"),
    ("first_power_w", "float4"),
    ("energy_j", "float8"),
    ("power_samples", "int4"),
    ("power_sum", "float8"),
    ("power_max_w", "float4"),
    ("gpu_util_samples", "int4"),
    ("gpu_util_sum", "float8"),
    ("gpu_util_max", "float4"),
    ("mem_util_samples", "int4"),
    ("mem_util_sum", "float8"),
    ("mem_used_samples", "int4"),
    ("mem_used_sum", "float8"),
    ("mem_used_max_bytes", "int8"),
    ("mem_total_bytes", "int8"),
    ("temperature_max_c", "float4"),
    ("sm_clock_samples", "int4"),
    ("sm_clock_sum", "float8"),
    ("mem_clock_samples", "int4"),
    ("mem_clock_sum", "float8"),
    ("throttled_samples", "int4"),
    ("ecc_errors_max", "int8"),
    ("xid_errors_max", "int4"),
    *(
        (column, kind)
        for name in PROFILING_FIELDS
        for column, kind in ((f"{name}_samples", "int4"), (f"{name}_sum", "float8"))
    ),
)


def _floats(values: Sequence[Any]) -> np.ndarray:
    """A float4 column as PostgreSQL stores it (rounded to float4), widened to float8; NULL=NaN."""
    return np.array(values, dtype=np.float64).astype(np.float32).astype(np.float64)


def _ints(values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """An integer column as (values with NULL as 0, present mask)."""
    present = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    if present.all():
        return np.array(values, dtype=np.int64), present
    return np.array([0 if v is None else v for v in values], dtype=np.int64), present


def _none(values: Sequence[Any] | None) -> bool:
    """Whether a column is missing or all NULL (``list.count`` runs in C: ~50x a numpy pass)."""
    return values is None or (
        values.count(None) == len(values) if isinstance(values, list) else all(v is None for v in values)
    )


def _out(values: np.ndarray, present: np.ndarray) -> list[Any]:
    return [value if ok else None for value, ok in zip(values.tolist(), present.tolist(), strict=True)]


def partials_compute(
    *,
    host_id: int | Sequence[int],
    accelerator_ids: Sequence[int],
    micros: np.ndarray,
    columns: Mapping[str, Sequence[Any]],
    max_gap_s: float,
    max_counter_gap_s: float,
    throttle_mask: int,
) -> list[tuple[Any, ...]]:
    """The partial rows (``PARTIAL_COLUMNS`` order, times as epoch microseconds) of one batch, or
    of several hosts' (``host_id`` then one per sample): one per GPU and minute. Pure: ``micros`` are the samples' times in µs since the epoch as
    stored, ``columns`` the sample fields by name (None for a missing reading; the profiling
    counters may be left out: none read)."""
    n = len(micros)
    gpus = np.asarray(accelerator_ids, dtype=np.int64)
    # Per GPU by time; a stable sort keeps the batch order (the raw rows' id order) for ties.
    order = np.lexsort((micros, gpus))
    gpus, t = gpus[order], micros[order]
    bucket = t - t % _MINUTE_US
    starts = np.flatnonzero(np.r_[True, (gpus[1:] != gpus[:-1]) | (bucket[1:] != bucket[:-1])])
    firsts = np.zeros(n, dtype=bool)
    firsts[starts] = True
    lasts = np.r_[starts[1:] - 1, n - 1]

    def floats(name: str) -> np.ndarray:
        return _floats(columns[name])[order]

    def ints(name: str) -> tuple[np.ndarray, np.ndarray]:
        values, present = _ints(columns[name])
        return values[order], present[order]

    def count(mask: np.ndarray) -> np.ndarray:
        return np.add.reduceat(mask.astype(np.int64), starts)

    def fsum(values: np.ndarray) -> np.ndarray:
        return np.add.reduceat(np.where(np.isnan(values), 0.0, values), starts)

    def fmax(values: np.ndarray) -> np.ndarray:
        return np.fmax.reduceat(values, starts)

    def imax(values: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.maximum.reduceat(np.where(present, values, _INT64_MIN), starts), count(present) > 0

    power = floats("power_w")
    energy, has_energy = ints("energy_mj")
    # Energy of each sample against the one before it in the same partial (as the raw rollup's
    # CASE): a non-negative counter delta over at most max_counter_gap_s, else, with no counter
    # on this sample, power x the gap when the gap is at most max_gap_s.
    prev = np.r_[0, np.arange(n - 1)]
    dt = (t - t[prev]) / 1_000_000
    delta = np.where(has_energy & has_energy[prev], energy - energy[prev], -1).astype(np.float64) / 1000.0
    counted = has_energy & has_energy[prev] & (delta >= 0) & (dt <= max_counter_gap_s) & ~firsts
    integrated = ~has_energy & ~np.isnan(power) & (dt <= max_gap_s) & ~firsts
    joules = np.where(counted, delta, np.where(integrated, power * dt, 0.0))
    energy_j = np.add.reduceat(joules, starts)
    energy_present = count(counted | integrated) > 0

    result: dict[str, list[Any]] = {}
    result["bucket"] = bucket[starts].tolist()
    if isinstance(host_id, int):
        result["host_id"] = [host_id] * len(starts)
    else:  # one per sample (several hosts' batches at once)
        result["host_id"] = np.asarray(host_id, dtype=np.int64)[order][starts].tolist()
    result["accelerator_id"] = gpus[starts].tolist()
    result["first_time"] = t[starts].tolist()
    result["last_time"] = t[lasts].tolist()
    result["samples"] = (lasts - starts + 1).tolist()
    result["first_energy_mj"] = _out(energy[starts], has_energy[starts])
    result["last_energy_mj"] = _out(energy[lasts], has_energy[lasts])
    result["first_power_w"] = _out(power[starts], ~np.isnan(power[starts]))
    result["energy_j"] = _out(energy_j, energy_present)
    for name, prefix in (
        ("power_w", "power"),
        ("gpu_util", "gpu_util"),
        ("mem_util", "mem_util"),
        ("sm_clock_mhz", "sm_clock"),
        ("mem_clock_mhz", "mem_clock"),
        *((name, name) for name in PROFILING_FIELDS),
    ):
        if name in PROFILING_FIELDS and _none(columns.get(name)):  # most GPUs send none of them
            result[f"{prefix}_samples"] = [0] * len(starts)
            result[f"{prefix}_sum"] = [0.0] * len(starts)
            continue
        values = power if name == "power_w" else floats(name)
        result[f"{prefix}_samples"] = count(~np.isnan(values)).tolist()
        result[f"{prefix}_sum"] = fsum(values).tolist()
    for name, out in (("power_w", "power_max_w"), ("gpu_util", "gpu_util_max")):
        maxima = fmax(power if name == "power_w" else floats(name))
        result[out] = _out(maxima, ~np.isnan(maxima))
    temperature = fmax(floats("temperature_c"))
    result["temperature_max_c"] = _out(temperature, ~np.isnan(temperature))
    used, has_used = ints("mem_used_bytes")
    result["mem_used_samples"] = count(has_used).tolist()
    result["mem_used_sum"] = np.add.reduceat(
        np.where(has_used, used.astype(np.float64), 0.0), starts
    ).tolist()
    for name, out in (
        ("mem_used_bytes", "mem_used_max_bytes"),
        ("mem_total_bytes", "mem_total_bytes"),
        ("ecc_errors", "ecc_errors_max"),
        ("xid_errors", "xid_errors_max"),
    ):
        values, present = (used, has_used) if name == "mem_used_bytes" else ints(name)
        result[out] = _out(*imax(values, present))
    throttle, has_throttle = ints("throttle_reasons")
    result["throttled_samples"] = count(has_throttle & ((throttle & throttle_mask) != 0)).tolist()
    return list(zip(*(result[name] for name, _ in PARTIAL_COLUMNS), strict=True))


_PARTS = """p.bucket, p.host_id, p.accelerator_id, p.first_time, p.last_time, p.samples,
        p.first_energy_mj, p.last_energy_mj, p.first_power_w, p.energy_j, p.power_samples, p.power_sum,
        p.power_max_w, p.gpu_util_samples, p.gpu_util_sum, p.gpu_util_max, p.mem_util_samples,
        p.mem_util_sum, p.mem_used_samples, p.mem_used_sum, p.mem_used_max_bytes, p.mem_total_bytes,
        p.temperature_max_c, p.sm_clock_samples, p.sm_clock_sum, p.mem_clock_samples, p.mem_clock_sum,
        p.throttled_samples, p.ecc_errors_max, p.xid_errors_max""" + "".join(
    f", p.{name}_samples, p.{name}_sum" for name in PROFILING_FIELDS
)


def _avg(name: str) -> str:
    return f"sum({name}_sum) / nullif(sum({name}_samples), 0)"


# The GPU rollup's columns in the order both minute statements (from partials here, from raw rows
# in ``services``) select them.
ROLLUP_INSERT = """INSERT INTO fleet_telemetryrollup (
        width_s, bucket, host_id, accelerator_id, samples,
        power_samples, power_avg_w, power_max_w, energy_j,
        gpu_util_samples, gpu_util_avg, gpu_util_max, mem_util_samples, mem_util_avg,
        mem_used_samples, mem_used_avg_bytes, mem_used_max_bytes, mem_total_bytes, temperature_max_c,
        sm_clock_samples, sm_clock_avg_mhz, mem_clock_samples, mem_clock_avg_mhz,
        throttled_samples, ecc_errors_max, xid_errors_max{profiling}
    )""".format(profiling="".join(f", {name}_samples, {name}_avg" for name in PROFILING_FIELDS))

_ROLLUP_VALUES = ", ".join(
    f"@{name}"
    for name in [
        "samples",
        "power_samples",
        "power_avg_w",
        "power_max_w",
        "energy_j",
        "gpu_util_samples",
        "gpu_util_avg",
        "gpu_util_max",
        "mem_util_samples",
        "mem_util_avg",
        "mem_used_samples",
        "mem_used_avg_bytes",
        "mem_used_max_bytes",
        "mem_total_bytes",
        "temperature_max_c",
        "sm_clock_samples",
        "sm_clock_avg_mhz",
        "mem_clock_samples",
        "mem_clock_avg_mhz",
        "throttled_samples",
        "ecc_errors_max",
        "xid_errors_max",
        *(f"{name}_{part}" for name in PROFILING_FIELDS for part in ("samples", "avg")),
    ]
)


_PROFILING_SUMS = "".join(
    f",\n        sum({name}_samples) AS {name}_samples, {_avg(name)} AS {name}_avg"
    for name in PROFILING_FIELDS
)
_PROFILING_ROLLUPS = "".join(f", m.{name}_samples, m.{name}_avg" for name in PROFILING_FIELDS)


def partial_minute_sql(upsert: str) -> str:
    """Minute rollups from partials (``{gpu_filter}``/``{part_filter}`` to fill, as the raw
    statement's). Returns (inside, beyond, newest bucket, samples, GPUs to roll up from raw)."""
    return f"""
WITH gpus AS (SELECT g.id FROM fleet_accelerator g {{gpu_filter}}),
parts AS (
    SELECT {_PARTS} FROM {PARTIAL_TABLE} p
    WHERE p.bucket >= %(start)s AND p.bucket < %(end)s {{part_filter}}
    UNION ALL
    -- Per GPU: the two partials that end last in its last minute before the range (the first
    -- delta of the range needs the last sample before it; the second partial shows a tie or an
    -- overlap with it) and every partial of its first minute after it.
    SELECT x.* FROM gpus g CROSS JOIN LATERAL (
        (SELECT {_PARTS} FROM {PARTIAL_TABLE} p
         WHERE p.accelerator_id = g.id AND p.bucket = (
            SELECT q.bucket FROM {PARTIAL_TABLE} q
            WHERE q.accelerator_id = g.id AND q.bucket < %(start)s AND q.bucket >= %(lookback)s
            ORDER BY q.bucket DESC LIMIT 1)
         ORDER BY p.last_time DESC LIMIT 2)
        UNION ALL
        (SELECT {_PARTS} FROM {PARTIAL_TABLE} p
         WHERE p.accelerator_id = g.id AND p.bucket = (
            SELECT q.bucket FROM {PARTIAL_TABLE} q
            WHERE q.accelerator_id = g.id AND q.bucket >= %(end)s AND q.bucket < %(lookahead)s
            ORDER BY q.bucket LIMIT 1))
    ) x
),
-- The window sorts only what stitching needs; the sums are hashed by minute without a sort.
edges AS (
    SELECT host_id, accelerator_id, bucket, first_time, first_energy_mj, first_power_w,
        (first_energy_mj - lag(last_energy_mj) OVER w)::float8 AS d_energy_mj,
        date_part('epoch', first_time - lag(last_time) OVER w) AS dt_s
    FROM parts
    WINDOW w AS (PARTITION BY accelerator_id ORDER BY first_time, last_time)
),
-- Partials that overlap or touch: the order of their samples is the raw rows' id order.
bad AS (SELECT DISTINCT accelerator_id FROM edges WHERE dt_s <= 0),
stitched AS (
    SELECT host_id, accelerator_id, bucket, count(j) AS n, sum(j) AS j
    FROM (SELECT host_id, accelerator_id, bucket, CASE
        WHEN d_energy_mj >= 0 AND dt_s <= %(max_counter_gap)s THEN d_energy_mj / 1000.0
        WHEN first_energy_mj IS NULL AND d_energy_mj IS NULL AND first_power_w IS NOT NULL
            AND dt_s <= %(max_gap)s THEN first_power_w * dt_s
        END AS j
        FROM edges WHERE bucket >= %(start)s) e
    GROUP BY host_id, accelerator_id, bucket
),
sums AS (
    SELECT
        bucket, host_id, accelerator_id, sum(samples) AS samples,
        sum(power_samples) AS power_samples, {_avg("power")} AS power_avg_w, max(power_max_w) AS power_max_w,
        count(energy_j) AS energy_n, sum(energy_j) AS energy_j,
        sum(gpu_util_samples) AS gpu_util_samples, {_avg("gpu_util")} AS gpu_util_avg,
        max(gpu_util_max) AS gpu_util_max,
        sum(mem_util_samples) AS mem_util_samples, {_avg("mem_util")} AS mem_util_avg,
        sum(mem_used_samples) AS mem_used_samples, {_avg("mem_used")} AS mem_used_avg_bytes,
        max(mem_used_max_bytes) AS mem_used_max_bytes, max(mem_total_bytes) AS mem_total_bytes,
        max(temperature_max_c) AS temperature_max_c,
        sum(sm_clock_samples) AS sm_clock_samples, {_avg("sm_clock")} AS sm_clock_avg_mhz,
        sum(mem_clock_samples) AS mem_clock_samples, {_avg("mem_clock")} AS mem_clock_avg_mhz,
        sum(throttled_samples) AS throttled_samples, max(ecc_errors_max) AS ecc_errors_max,
        max(xid_errors_max) AS xid_errors_max{_PROFILING_SUMS}
    FROM parts
    WHERE bucket >= %(start)s AND accelerator_id NOT IN (SELECT accelerator_id FROM bad)
    GROUP BY host_id, accelerator_id, bucket
),
rollups AS (
    SELECT 60 AS width_s, m.bucket, m.host_id, m.accelerator_id, m.samples,
        m.power_samples, m.power_avg_w, m.power_max_w,
        CASE WHEN m.energy_n + e.n > 0 THEN coalesce(m.energy_j, 0) + coalesce(e.j, 0) END AS energy_j,
        m.gpu_util_samples, m.gpu_util_avg, m.gpu_util_max, m.mem_util_samples, m.mem_util_avg,
        m.mem_used_samples, m.mem_used_avg_bytes, m.mem_used_max_bytes, m.mem_total_bytes,
        m.temperature_max_c, m.sm_clock_samples, m.sm_clock_avg_mhz, m.mem_clock_samples,
        m.mem_clock_avg_mhz, m.throttled_samples, m.ecc_errors_max, m.xid_errors_max{_PROFILING_ROLLUPS}
    FROM sums m JOIN stitched e USING (host_id, accelerator_id, bucket)
),
written AS (
    {ROLLUP_INSERT}
    SELECT * FROM rollups
    {upsert}
    -- A minute whose rollup is unchanged (most of a refreshed range) is not rewritten.
    WHERE ({_ROLLUP_VALUES.replace("@", "fleet_telemetryrollup.")})
        IS DISTINCT FROM ({_ROLLUP_VALUES.replace("@", "EXCLUDED.")})
)
SELECT count(*) FILTER (WHERE bucket < %(end)s), count(*) FILTER (WHERE bucket >= %(final_end)s),
    max(bucket), coalesce(sum(samples), 0)::bigint, (SELECT coalesce(array_agg(accelerator_id), '{{{{}}}}') FROM bad)
FROM rollups
"""


def partials_from_raw_sql() -> str:
    """Append the partials (``partials_compute``'s rows, by the same rules) of the raw rows that
    the given transactions wrote: parameters ``xids``, ``hosts``, ``starts``, ``ends`` (one per
    dirty mark: its ``xmin``, its host and time range), ``origin``,
    ``max_gap``, ``max_counter_gap``, ``throttle_mask``. A mark's rows are found through the raw
    table's key (host, time) and kept when their ``xmin`` is the mark's own (the (sub)transaction
    that wrote both): rows another one wrote in the same range are not counted twice. One partial per transaction, GPU
    and minute (as ``partials_compute`` per batch), in a random slot of its own."""
    # A partial's first row has no previous one: its ``dt_s`` (and ``d_energy_mj``) is NULL, so
    # neither branch counts it, and it is the row that the first readings come from.
    energy = """CASE
            WHEN d_energy_mj >= 0 AND dt_s <= %(max_counter_gap)s THEN d_energy_mj / 1000.0
            WHEN energy_mj IS NULL AND power_w IS NOT NULL AND dt_s <= %(max_gap)s THEN power_w * dt_s
        END"""
    signals = [
        ("power", "power_w"),
        ("gpu_util", "gpu_util"),
        ("mem_util", "mem_util"),
        ("mem_used", "mem_used_bytes"),
        ("sm_clock", "sm_clock_mhz"),
        ("mem_clock", "mem_clock_mhz"),
        *((name, name) for name in PROFILING_FIELDS),
    ]
    values = {
        "bucket": "bucket",
        "host_id": "host_id",
        "accelerator_id": "accelerator_id",
        "first_time": "min(time)",
        "last_time": "max(time)",
        "samples": "count(*)",
        # The first and last rows' readings, each from the one row the window marks: no sort per group.
        "first_energy_mj": "min(energy_mj) FILTER (WHERE dt_s IS NULL)",
        "last_energy_mj": "min(energy_mj) FILTER (WHERE last)",
        "first_power_w": "min(power_w) FILTER (WHERE dt_s IS NULL)",
        "energy_j": f"sum({energy})",
        "power_max_w": "max(power_w)",
        "gpu_util_max": "max(gpu_util)",
        "mem_used_max_bytes": "max(mem_used_bytes)",
        "mem_total_bytes": "max(mem_total_bytes)",
        "temperature_max_c": "max(temperature_c)",
        "throttled_samples": "count(*) FILTER (WHERE (throttle_reasons & %(throttle_mask)s) <> 0)",
        "ecc_errors_max": "max(ecc_errors)",
        "xid_errors_max": "max(xid_errors)",
    }
    for prefix, column in signals:
        values[f"{prefix}_samples"] = f"count({column})"
        values[f"{prefix}_sum"] = f"coalesce(sum({column}::float8), 0)"
    names = [name for name, _ in PARTIAL_COLUMNS]
    raw = (
        "r.id, r.time, r.host_id, r.accelerator_id, r.power_w, r.energy_mj, r.gpu_util, r.mem_util, "
        "r.mem_used_bytes, r.mem_total_bytes, r.temperature_c, r.sm_clock_mhz, r.mem_clock_mhz, "
        "r.throttle_reasons, r.ecc_errors, r.xid_errors" + "".join(f", r.{name}" for name in PROFILING_FIELDS)
    )
    return f"""
WITH m AS (
    SELECT x AS xid, h AS host_id, min(s) AS start, max(e) AS "end"
    FROM unnest(%(xids)s::int8[], %(hosts)s::int8[], %(starts)s::timestamptz[], %(ends)s::timestamptz[])
        AS u(x, h, s, e)
    GROUP BY x, h
),
rows_ AS (
    SELECT m.xid, date_bin('60 seconds', r.time, %(origin)s) AS bucket, r.*
    FROM m CROSS JOIN LATERAL (
        SELECT {raw} FROM fleet_telemetrysample r
        WHERE r.host_id = m.host_id AND r.time >= m.start AND r.time <= m."end"
          AND r.xmin = m.xid::text::xid
        -- Not pulled up into a hash join over the whole day: one index range scan per mark.
        OFFSET 0
    ) r
),
s AS (
    SELECT *,
        (energy_mj - lag(energy_mj) OVER w)::float8 AS d_energy_mj,
        date_part('epoch', time - lag(time) OVER w) AS dt_s,
        lead(id) OVER w IS NULL AS last
    FROM rows_
    WINDOW w AS (PARTITION BY xid, host_id, accelerator_id, bucket ORDER BY time, id)
)
INSERT INTO {PARTIAL_TABLE} ({", ".join(names)}, slot)
SELECT {", ".join(values[name] for name in names)}, floor(random() * 9007199254740991)::bigint + 1
FROM s
GROUP BY xid, host_id, accelerator_id, bucket
"""
