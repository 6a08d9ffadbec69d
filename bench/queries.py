"""Query and rollup latency over a realistic fleet: 128 GPUs at 1 Hz for ~22 h (~10M samples).

Usage::

    .venv/bin/python bench/queries.py                 # full size: 16 hosts x 8 GPUs, 22 h, 30 days
    .venv/bin/python bench/queries.py --gpus 16 --hours 2 --days 7 --repeat 5     # quick run

Creates ``accelboard_bench`` on DATABASE_URL's server (the embedded default when unset), loads
raw samples with numpy-built binary COPY, builds rollups with the product's own service, adds
``--days`` of synthetic hour rollups for the fleet query, then prints the median latency of each
read and refresh next to a reference computed in the same process, and drops the database.
The last line is ``gpu_24h_ms=… fleet_30d_ms=… top10_ms=… rollup_5min_ms=… rollup_1h_ms=…``.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta

import numpy as np
from common import bench_database, copy_into, fleet_create, median_ms, quick_parse, to_pg_micros

TARGETS = {"gpu_24h": 50, "fleet_30d": 50, "top10": 50, "rollup_5min": 50, "rollup_1h": 1000}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gpus", type=int, default=128, help="GPUs in the fleet, 8 per host (default 128)")
    parser.add_argument("--hours", type=float, default=22.0, help="hours of 1 Hz raw samples (default 22)")
    parser.add_argument("--days", type=int, default=30, help="days of hour rollups for the fleet query")
    parser.add_argument("--repeat", type=int, default=15, help="timed runs per figure (median reported)")
    args = quick_parse(parser, gpus=8, hours=1.0, days=2, repeat=1)
    if args.gpus < 1 or args.hours < 1 or args.days < 2 or args.repeat < 1:
        parser.error("--gpus, --hours and --repeat must be at least 1, --days at least 2")
    return args


def partials_copy(cursor, rows: list[tuple[object, ...]]) -> int:  # type: ignore[no-untyped-def]
    """COPY partial rows as ``partials_compute`` returns them (times in epoch µs)."""
    from accelboard.fleet.partials import PARTIAL_COLUMNS, PARTIAL_TABLE

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    stamps: dict[object, datetime] = {}
    names = ", ".join(name for name, _ in PARTIAL_COLUMNS)
    with cursor.copy(f"COPY {PARTIAL_TABLE} ({names}, slot) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types([*(kind for _, kind in PARTIAL_COLUMNS), "int8"])
        for row in rows:
            times = []
            for us in (row[0], row[3], row[4]):
                if us not in stamps:
                    stamps[us] = epoch + timedelta(microseconds=us)  # type: ignore[arg-type]
                times.append(stamps[us])
            copy.write_row((times[0], row[1], row[2], times[1], times[2], *row[5:], 0))
    return len(rows)


def load_raw(fleet: list[tuple[int, list[int]]], start: datetime, end: datetime) -> tuple[int, int]:
    """1 Hz samples for every GPU, an hour per COPY, rows ordered by time as ingest writes them,
    and the partial aggregates ingest leaves beside them when batches arrive in time order: one
    per GPU and minute (``partials_compute``, the ingest's own function, over each host's hour;
    ingest merges each batch's partial into the minute's); return (samples, partials)."""
    from django.db import connection, transaction

    from accelboard.fleet.partials import partials_compute
    from accelboard.fleet.partition_services import TABLE, telemetry_partitions_ensure
    from accelboard.fleet.rollup_services import MAX_COUNTER_GAP_S, MAX_INTEGRATION_GAP_S, THROTTLE_MASK

    rng = np.random.default_rng(42)
    gpu_ids = np.array([g for _, gpus in fleet for g in gpus], dtype=np.int64)
    host_ids = np.array([h for h, gpus in fleet for _ in gpus], dtype=np.int64)
    n = len(gpu_ids)
    base_power = rng.uniform(150.0, 650.0, n)
    counter = rng.integers(10**9, 10**11, n).astype(np.int64)
    telemetry_partitions_ensure(start=start, end=end)
    total = partials = 0
    chunk_start = start
    connection.ensure_connection()
    while chunk_start < end:
        chunk_end = min(chunk_start + timedelta(hours=1), end)
        seconds = np.arange(chunk_start.timestamp(), chunk_end.timestamp(), 1.0)
        power = np.clip(base_power[None, :] + rng.normal(0, 40.0, (len(seconds), n)), 60.0, 700.0)
        energy = counter[None, :] + np.cumsum((power * 1000).astype(np.int64), axis=0)
        counter = energy[-1]
        util = np.clip(power / 7.0 + rng.normal(0, 5.0, power.shape), 0, 100)
        columns = [
            ("time", "timestamptz", np.repeat(to_pg_micros(seconds), n)),
            ("host_id", "int8", np.tile(host_ids, len(seconds))),
            ("accelerator_id", "int8", np.tile(gpu_ids, len(seconds))),
            ("power_w", "float4", power.ravel()),
            ("energy_mj", "int8", energy.ravel()),
            ("gpu_util", "float4", util.ravel()),
            ("mem_util", "float4", (util / 2).ravel()),
            ("mem_used_bytes", "int8", np.full(power.size, 40 * 2**30, dtype=np.int64)),
            ("temperature_c", "float4", (35 + power / 20).ravel()),
        ]
        with transaction.atomic(), connection.connection.cursor() as cursor:
            total += copy_into(cursor, TABLE, columns)
            micros = (seconds * 1_000_000).astype(np.int64)
            first = 0
            for host_id, gpus in fleet:
                mine = slice(first, first + len(gpus))
                first += len(gpus)
                shape = (len(seconds), len(gpus))
                nulls = [None] * (shape[0] * shape[1])
                rows = partials_compute(
                    host_id=host_id,
                    accelerator_ids=np.broadcast_to(np.asarray(gpus), shape).ravel(),
                    micros=np.repeat(micros, len(gpus)),
                    columns={
                        "power_w": power[:, mine].ravel(),
                        "energy_mj": energy[:, mine].ravel().tolist(),
                        "gpu_util": util[:, mine].ravel(),
                        "mem_util": (util[:, mine] / 2).ravel(),
                        "mem_used_bytes": [40 * 2**30] * len(nulls),
                        "temperature_c": (35 + power[:, mine] / 20).ravel(),
                        **dict.fromkeys(
                            ("mem_total_bytes", "sm_clock_mhz", "mem_clock_mhz", "throttle_reasons"), nulls
                        ),
                        **dict.fromkeys(("ecc_errors", "xid_errors"), nulls),
                    },
                    max_gap_s=MAX_INTEGRATION_GAP_S,
                    max_counter_gap_s=MAX_COUNTER_GAP_S,
                    throttle_mask=THROTTLE_MASK,
                )
                partials += partials_copy(cursor, rows)
        chunk_start = chunk_end
    return total, partials


def load_hour_rollups(fleet: list[tuple[int, list[int]]], start: datetime, end: datetime) -> int:
    """Synthetic GPU hour rollups for [start, end): the history before the raw day."""
    from django.db import connection, transaction

    rng = np.random.default_rng(7)
    hours = np.arange(start.timestamp(), end.timestamp(), 3600.0)
    gpu_ids = np.array([g for _, gpus in fleet for g in gpus], dtype=np.int64)
    host_ids = np.array([h for h, gpus in fleet for _ in gpus], dtype=np.int64)
    rows = len(hours) * len(gpu_ids)
    power = rng.uniform(100.0, 650.0, rows)
    full = np.full(rows, 3600, dtype=np.int32)
    columns = [
        ("width_s", "int4", np.full(rows, 3600, dtype=np.int32)),
        ("bucket", "timestamptz", np.repeat(to_pg_micros(hours), len(gpu_ids))),
        ("host_id", "int8", np.tile(host_ids, len(hours))),
        ("accelerator_id", "int8", np.tile(gpu_ids, len(hours))),
        ("samples", "int4", full),
        ("power_samples", "int4", full),
        ("power_avg_w", "float8", power),
        ("power_max_w", "float8", power * 1.1),
        ("energy_j", "float8", power * 3600),
        ("gpu_util_samples", "int4", full),
        ("gpu_util_avg", "float8", power / 7),
        ("gpu_util_max", "float8", np.minimum(100, power / 6)),
        ("mem_util_samples", "int4", full),
        ("mem_used_samples", "int4", full),
        ("sm_clock_samples", "int4", np.zeros(rows, dtype=np.int32)),
        ("mem_clock_samples", "int4", np.zeros(rows, dtype=np.int32)),
        ("throttled_samples", "int4", np.zeros(rows, dtype=np.int32)),
    ]
    connection.ensure_connection()
    with transaction.atomic(), connection.connection.cursor() as cursor:
        return copy_into(cursor, "fleet_telemetryrollup", columns)


def _sql_frame(sql: str, params: dict[str, object]) -> object:
    import pandas as pd
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return pd.DataFrame(cursor.fetchall())


def _raw_hour_rollup(start: datetime, end: datetime) -> None:
    """The reference for refreshes: hour rollups straight from raw rows (what the draft did),
    run and rolled back so the stored rollups stay as the product wrote them."""
    from django.db import connection, transaction

    from accelboard.fleet import rollup_services

    sql = rollup_services._MINUTE_SQL.replace("'60 seconds'", "'3600 seconds'").replace(
        "    60, bucket,", "    3600, bucket,"
    )
    params = {
        "origin": rollup_services._BUCKET_ORIGIN,
        "start": start,
        "end": end,
        "final_end": end,
        "lookback": start - timedelta(seconds=rollup_services.MAX_COUNTER_GAP_S),
        "lookahead": end,
        "max_gap": rollup_services.MAX_INTEGRATION_GAP_S,
        "max_counter_gap": rollup_services.MAX_COUNTER_GAP_S,
        "throttle_mask": rollup_services.THROTTLE_MASK,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.format(gpu_filter="", raw_filter=""), params)
        transaction.set_rollback(True)


def _raw_refresh(start: datetime, end: datetime) -> None:
    """The refresh as it ran before partial aggregates: a raw-only range makes it read raw rows
    (rolled back afterwards, with the rollups it wrote, which equal the partials' anyway)."""
    from django.db import transaction

    from accelboard.fleet import rollup_services
    from accelboard.fleet.models import TelemetryRawRange

    with transaction.atomic():
        TelemetryRawRange.objects.create(start=start, end=end)
        assert rollup_services.telemetry_rollups_refresh(start=start, end=end).partial_rows == 0
        transaction.set_rollback(True)


def main() -> None:
    args = parse_args()
    hosts = max(1, args.gpus // 8)
    gpus_per_host = min(8, args.gpus)
    with bench_database():
        from django.db import connection

        from accelboard.core.access import EVERY_TEAM
        from accelboard.fleet import rollup_services, selectors

        now = datetime.now(UTC).replace(second=0, microsecond=0)
        raw_start = now - timedelta(hours=args.hours)
        fleet = fleet_create(hosts=hosts, gpus_per_host=gpus_per_host)
        print(
            f"fleet: {hosts} hosts x {gpus_per_host} GPUs; raw {raw_start:%Y-%m-%d %H:%M} .. {now:%H:%M} UTC"
        )

        started = time.perf_counter()
        rows, partial_rows = load_raw(fleet, raw_start, now)
        load_s = time.perf_counter() - started
        print(
            f"loaded {rows:,} raw samples and {partial_rows:,} partial aggregates in {load_s:.1f} s "
            "(binary COPY)"
        )

        started = time.perf_counter()
        hour_times = []
        moment = raw_start
        while moment < now:
            step = time.perf_counter()
            rollup_services.telemetry_rollups_refresh(start=moment, end=min(moment + timedelta(hours=1), now))
            hour_times.append(time.perf_counter() - step)
            moment += timedelta(hours=1)
        print(
            f"built minute/hour/host rollups of the raw span in {time.perf_counter() - started:.1f} s "
            f"({len(hour_times)} hourly refreshes, median {np.median(hour_times) * 1000:.0f} ms cold)"
        )
        history_start = (now - timedelta(days=args.days)).replace(minute=0)
        history_end = raw_start.replace(minute=0)
        history = load_hour_rollups(fleet, history_start, history_end)
        rollup_services.telemetry_rollups_refresh(start=history_start, end=history_end)
        print(f"added {history:,} synthetic GPU hour rollups ({args.days} days) and their host rollups")
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE fleet_telemetrysample")
            cursor.execute("VACUUM ANALYZE fleet_telemetrypartial")
            cursor.execute("VACUUM ANALYZE fleet_telemetryrollup")
            cursor.execute("VACUUM ANALYZE fleet_hostrollup")

        gpu = fleet[0][1][0]
        figures: dict[str, float] = {}
        references: dict[str, tuple[str, float]] = {}
        repeat = args.repeat

        day_start = now - timedelta(hours=24)
        figures["gpu_24h"] = median_ms(
            lambda: selectors.accelerator_metrics(
                accelerator_id=gpu, start=day_start, end=now, resolution="minute"
            ),
            repeat=repeat,
        )
        raw_minutes = """
            SELECT date_bin('60 seconds', time, %(origin)s) AS b, avg(power_w), max(power_w), avg(gpu_util)
            FROM fleet_telemetrysample WHERE accelerator_id = %(gpu)s AND time >= %(start)s AND time < %(end)s
            GROUP BY b ORDER BY b
        """
        params = {"gpu": gpu, "start": day_start, "end": now, "origin": rollup_services._BUCKET_ORIGIN}
        references["gpu_24h"] = (
            "same minutes from raw rows",
            median_ms(lambda: _sql_frame(raw_minutes, params), repeat=max(3, repeat // 3)),
        )

        month_start = now - timedelta(days=args.days)
        figures["fleet_30d"] = median_ms(
            lambda: selectors.fleet_utilisation_hourly(start=month_start, end=now, scope=EVERY_TEAM),
            repeat=repeat,
        )
        gpu_rollup_fleet = """
            SELECT r.bucket, coalesce(t.name, 'unknown'),
                   sum(r.gpu_util_avg * r.gpu_util_samples) / nullif(sum(r.gpu_util_samples), 0),
                   sum(r.power_avg_w * r.power_samples) / nullif(sum(r.power_samples), 0),
                   sum(r.energy_j) / 3.6e6, count(*)
            FROM fleet_telemetryrollup r JOIN fleet_accelerator a ON a.id = r.accelerator_id
            LEFT JOIN fleet_acceleratortype t ON t.id = a.accelerator_type_id
            WHERE r.width_s = 3600 AND r.bucket >= %(start)s AND r.bucket < %(end)s
            GROUP BY r.bucket, t.name ORDER BY r.bucket, t.name
        """
        references["fleet_30d"] = (
            "same from per-GPU hour rollups",
            median_ms(
                lambda: _sql_frame(gpu_rollup_fleet, {"start": month_start, "end": now}), repeat=repeat
            ),
        )

        week_start = now - timedelta(days=7) + timedelta(minutes=17)  # a ragged edge, as "now" has
        figures["top10"] = median_ms(
            lambda: selectors.host_energy_top(start=week_start, end=now, scope=EVERY_TEAM, limit=10),
            repeat=repeat,
        )
        raw_energy = """
            WITH d AS (
                SELECT host_id, energy_mj - lag(energy_mj) OVER (PARTITION BY accelerator_id ORDER BY time) AS d
                FROM fleet_telemetrysample WHERE time >= %(start)s AND time < %(end)s
            )
            SELECT host_id, sum(d) FILTER (WHERE d >= 0) / 3.6e9 AS kwh FROM d
            GROUP BY host_id ORDER BY kwh DESC LIMIT 10
        """
        references["top10"] = (
            f"same from raw rows ({args.hours:g} h, not 7 days)",
            median_ms(lambda: _sql_frame(raw_energy, {"start": week_start, "end": now}), repeat=1, warmup=0),
        )

        last_hour_end = now.replace(minute=0)
        last_hour = (last_hour_end - timedelta(hours=1), last_hour_end)
        five = (now - timedelta(minutes=5), now)
        figures["rollup_5min"] = median_ms(
            lambda: rollup_services.telemetry_rollups_refresh(start=five[0], end=five[1]), repeat=repeat
        )
        figures["rollup_1h"] = median_ms(
            lambda: rollup_services.telemetry_rollups_refresh(start=last_hour[0], end=last_hour[1]),
            repeat=max(3, repeat // 3),
        )
        references["rollup_5min"] = (
            "the same refresh from raw rows (no partials)",
            median_ms(lambda: _raw_refresh(*five), repeat=max(3, repeat // 3)),
        )
        references["rollup_1h"] = (
            "the same refresh from raw rows (no partials)",
            median_ms(lambda: _raw_refresh(*last_hour), repeat=max(3, repeat // 3)),
        )
        print(
            "hour rollups alone straight from raw rows (the first draft): "
            f"{median_ms(lambda: _raw_hour_rollup(*last_hour), repeat=max(3, repeat // 3)):.0f} ms"
        )

        # Coalescing: 60 batches of 5 s each (the last 5 minutes) as one drain vs one refresh each.
        marks = [
            (now - timedelta(seconds=300 - 5 * i), now - timedelta(seconds=295 - 5 * i)) for i in range(60)
        ]

        def drain() -> None:
            for mark_start, mark_end in marks:
                rollup_services.telemetry_rollups_mark_dirty(start=mark_start, end=mark_end)
            rollup_services.telemetry_rollups_drain()

        def one_by_one() -> None:
            for mark_start, mark_end in marks:
                rollup_services.telemetry_rollups_refresh(start=mark_start, end=mark_end)

        drain_ms = median_ms(drain, repeat=3)
        each_ms = median_ms(one_by_one, repeat=1)
        print(
            f"coalescing: 60 five-second batches drained at once {drain_ms:.0f} ms "
            f"vs refreshed one by one {each_ms:.0f} ms ({each_ms / drain_ms:.1f}x)"
        )

        print(f"\n{'figure':<12} {'median ms':>10} {'target':>8}  reference")
        for name, value in figures.items():
            label, ref = references[name]
            verdict = "ok" if value < TARGETS[name] else "OVER"
            print(
                f"{name:<12} {value:>10.1f} {'<' + str(TARGETS[name]):>8} {verdict:<4}  "
                f"{label}: {ref:.1f} ms (ratio {ref / value:.1f}x)"
            )
    print(
        f"gpu_24h_ms={figures['gpu_24h']:.1f} fleet_30d_ms={figures['fleet_30d']:.1f} "
        f"top10_ms={figures['top10']:.1f} rollup_5min_ms={figures['rollup_5min']:.1f} "
        f"rollup_1h_ms={figures['rollup_1h']:.1f}"
    )


if __name__ == "__main__":
    main()
