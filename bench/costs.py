"""How long the monthly cost aggregation takes for the demo fleet and for 10x it.

    .venv/bin/python bench/costs.py                  # 3 measured days per fleet, month = 30 days
    .venv/bin/python bench/costs.py --days 30        # the whole month measured (slow on 2 cores)

1. Creates ``accelboard_bench_costs`` on DATABASE_URL's server (dropped on exit), registers the
   demo fleet's shape (15 hosts, 85 GPUs, the demo templates' GPU counts) and, separately, 10x
   it (150 hosts, 850 GPUs), with one price row and one site electricity row.
2. Loads ``--days`` days of 60 s rollups per GPU with binary COPY (utilisation and energy vary
   by minute), as the rollup refresh would have left them.
3. Times ``cost_days_compute`` over those days (the nightly job's work: minute rollups ->
   CostDaily) and the month's report read (``report_selectors.cost_report``: totals, every
   breakdown, the daily series and the forecast, as the finance page asks for them) on the result.
4. The month figure is compute per day × 30 + the report; with ``--days 30`` nothing is
   extrapolated. Reference: the compute time per host-day and per GPU-day, whose ratio between
   the two fleets shows whether the work grows linearly with the fleet.
Last line: ``monthly_demo_s=… monthly_10x_s=… per_host_day_ms_demo=… per_host_day_ms_10x=…``.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import numpy as np
from common import bench_database, copy_into, quick_parse, to_pg_micros

MONTH_DAYS = 30
DEMO_GPUS = [8, 8, 8, 4, 1, 8, 8, 8, 8, 8, 1, 4, 1, 2, 8]  # accelboard.demo.plan.HOST_TEMPLATES


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--days", type=int, default=3, help="days of minute rollups measured (1-30, default 3)"
    )
    parser.add_argument("--scale", type=int, default=10, help="the larger fleet is this many demo fleets")
    args = quick_parse(parser, days=1, scale=2)
    if not 1 <= args.days <= MONTH_DAYS or args.scale < 2:
        parser.error("--days must be 1-30 and --scale at least 2")
    return args


def fleet_make(*, copies: int, prefix: str) -> list[tuple[int, list[int]]]:
    from accelboard.core.models import Team
    from accelboard.fleet.host_services import host_register
    from accelboard.fleet.models import Host, Site

    site = Site.objects.get(name="bench-site")
    teams = [
        Team.objects.get_or_create(slug=f"bench-team-{i}", defaults={"name": f"Bench team {i}"})[0]
        for i in range(4)
    ]
    fleet = []
    for c in range(copies):
        for h, gpus in enumerate(DEMO_GPUS):
            name = f"{prefix}-{c:02d}-{h:02d}"
            accelerators = [
                {"uuid": f"GPU-{name}-{g}", "index": g, "name": "NVIDIA H100 80GB HBM3"} for g in range(gpus)
            ]
            host, by_uuid = host_register(hostname=name, team_id=teams[h % 4].pk, accelerators=accelerators)
            Host.objects.filter(pk=host.pk).update(site=site, project=f"project-{h % 3}")
            fleet.append((host.pk, [by_uuid[a["uuid"]].pk for a in accelerators]))
    return fleet


def rollups_load(fleet: list[tuple[int, list[int]]], start: datetime, days: int) -> int:
    """60 s rollups for every GPU, a day per COPY; utilisation 0-100 % and energy ~ power × 60 s."""
    from django.db import connection, transaction

    rng = np.random.default_rng(7)
    gpu_ids = np.array([g for _, gpus in fleet for g in gpus], dtype=np.int64)
    host_ids = np.array([h for h, gpus in fleet for _ in gpus], dtype=np.int64)
    minutes = np.arange(1440, dtype=np.float64) * 60.0
    rows = 0
    for d in range(days):
        t0 = (start + timedelta(days=d)).timestamp()
        bucket = to_pg_micros(np.repeat(t0 + minutes[None, :], len(gpu_ids), axis=0).ravel())
        n = len(bucket)
        util = rng.uniform(0, 100, n)
        power = 70 + util * 6.3
        ones = np.ones(n, dtype=np.int32)
        cols = [
            ("width_s", "int4", np.full(n, 60, dtype=np.int32)),
            ("bucket", "timestamptz", bucket),
            ("host_id", "int8", np.repeat(host_ids, 1440)),
            ("accelerator_id", "int8", np.repeat(gpu_ids, 1440)),
            ("samples", "int4", ones),
            ("power_samples", "int4", ones),
            ("power_avg_w", "float8", power),
            ("energy_j", "float8", power * 60.0),
            ("gpu_util_samples", "int4", ones),
            ("gpu_util_avg", "float8", util),
            ("mem_util_samples", "int4", ones * 0),
            ("mem_used_samples", "int4", ones * 0),
            ("sm_clock_samples", "int4", ones * 0),
            ("mem_clock_samples", "int4", ones * 0),
            ("throttled_samples", "int4", ones * 0),
        ]
        with transaction.atomic(), connection.cursor() as cursor:
            rows += copy_into(cursor, "fleet_telemetryrollup", cols)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE fleet_telemetryrollup")
    return rows


def measure(fleet: list[tuple[int, list[int]]], days: list[date]) -> dict[str, float]:
    from accelboard.costs.filters import CostFilters
    from accelboard.costs.report_selectors import cost_report
    from accelboard.costs.services import cost_days_compute

    host_ids = [h for h, _ in fleet]
    from accelboard.core.access import EVERY_TEAM

    started = time.perf_counter()
    results = cost_days_compute(days=days)
    compute_s = time.perf_counter() - started
    rows = sum(r.rows for r in results)
    started = time.perf_counter()
    report = cost_report(
        scope=EVERY_TEAM, filters=CostFilters(month=days[0]), today=days[-1] + timedelta(days=1)
    )
    report_s = time.perf_counter() - started
    host_days = len(host_ids) * len(days)
    gpu_days = sum(len(g) for _, g in fleet) * len(days)
    return {
        "compute_s": compute_s,
        "per_day_s": compute_s / len(days),
        "report_s": report_s,
        "monthly_s": compute_s / len(days) * MONTH_DAYS + report_s,
        "per_host_day_ms": compute_s / host_days * 1000,
        "per_gpu_day_ms": compute_s / gpu_days * 1000,
        "rows": rows,
        "total": float(report.total.total_cost),
    }


def main() -> None:
    args = parse_args()
    with bench_database("accelboard_bench_costs"):
        from django.db import connection

        from accelboard.costs.models import AcceleratorPrice, CostDaily, ElectricityPrice
        from accelboard.fleet.models import AcceleratorType, Site, TelemetryRollup

        h100, _ = AcceleratorType.objects.get_or_create(
            slug="h100-sxm-80gb", defaults={"name": "H100 SXM 80GB", "match_names": ["H100 80GB HBM3"]}
        )
        site = Site.objects.create(name="bench-site")
        today = datetime.now(UTC).date()
        AcceleratorPrice.objects.create(
            accelerator_type=h100,
            accelerator_count=8,
            provider="on-prem",
            pricing_model="on-prem",
            price_per_hour=Decimal("20.00"),
            source="bench",
            fetched_on=today,
            valid_from=date(2020, 1, 1),
        )
        ElectricityPrice.objects.create(
            site=site,
            price_per_kwh=Decimal("0.10"),
            source="bench",
            fetched_on=today,
            valid_from=date(2020, 1, 1),
        )
        start = datetime(2026, 10, 1, tzinfo=UTC)
        days = [start.date() + timedelta(days=i) for i in range(args.days)]
        figures = {}
        for label, copies in (("demo", 1), (f"{args.scale}x", args.scale)):
            TelemetryRollup.objects.all().delete()
            CostDaily.objects.all().delete()
            fleet = fleet_make(copies=copies, prefix=f"bench-{label}")
            began = time.perf_counter()
            loaded = rollups_load(fleet, start, args.days)
            print(
                f"{label}: {len(fleet)} hosts, {sum(len(g) for _, g in fleet)} GPUs, {loaded:,} minute rollups "
                f"loaded in {time.perf_counter() - began:.1f} s"
            )
            # Only this fleet's hosts have rollups; the other fleet's hosts cost nothing here.
            figures[label] = measure(fleet, days)
            f = figures[label]
            print(
                f"{label}: compute {f['compute_s']:.2f} s for {args.days} day(s) ({f['per_day_s']:.2f} s/day, "
                f"{f['rows']} CostDaily rows), report reads {f['report_s'] * 1000:.0f} ms, "
                f"month ~{f['monthly_s']:.1f} s; {f['per_host_day_ms']:.1f} ms per host-day, "
                f"{f['per_gpu_day_ms']:.2f} ms per GPU-day"
            )
            with connection.cursor() as cursor:
                cursor.execute("DELETE FROM fleet_telemetryrollup")
        big = f"{args.scale}x"
        ratio = figures[big]["per_host_day_ms"] / figures["demo"]["per_host_day_ms"]
        print(
            f"per-host-day cost ratio {big}/demo = {ratio:.2f} (1.00 = linear in the fleet)"
            + ("" if args.days == MONTH_DAYS else f"; month extrapolated from {args.days} measured day(s)")
        )
        print(
            f"monthly_demo_s={figures['demo']['monthly_s']:.1f} monthly_{big}_s={figures[big]['monthly_s']:.1f} "
            f"per_host_day_ms_demo={figures['demo']['per_host_day_ms']:.1f} "
            f"per_host_day_ms_{big}={figures[big]['per_host_day_ms']:.1f} measured_days={args.days}"
        )


if __name__ == "__main__":
    main()
