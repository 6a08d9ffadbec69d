"""Server time of the capacity plan page for each of the demo's served models.

Usage::

    .venv/bin/python bench/plan.py                        # the demo fleet, 15 timed requests a page
    .venv/bin/python bench/plan.py --repeat 5             # quicker
    .venv/bin/python bench/plan.py --telemetry-interval 60  # the demo exactly as `accelboard demo`

It creates ``accelboard_bench_plan`` on DATABASE_URL's server (the embedded default when unset),
loads the demo fleet with the product's own loader (``demo_fleet_load``: 31 days of 5-minute
serving metrics for five deployments, 90 nights of benchmarks, the price book, the drift data and
the serving costs the plan reads), then requests ``/plan/`` for every model with traffic,
through Django's test client, as the LLM team's lead and as finance (who see every team), and
reports the median and p95 server time of each, with the machine's load average beside them.

The plan reads no GPU telemetry, so by default the telemetry is sampled every 300 s instead of
the demo's 60 s: the same serving, benchmark and cost rows, a fifth of the load time.

The reference figure, measured in the same process, is the cheapest possible page (``/healthz``).
Target (issue 20): every plan under 300 ms server time on the demo's data. The last line is
``worst_p95_ms=… worst_page=… load_1m=…``; the exit status is 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from common import bench_database, quick_parse

TARGET_MS = 300.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=15, help="timed requests per page (default 15)")
    parser.add_argument(
        "--days", type=int, default=31, help="days of telemetry and serving metrics (default 31)"
    )
    parser.add_argument(
        "--telemetry-interval", type=int, default=300, help="GPU sampling interval, s (default 300; demo: 60)"
    )
    parser.add_argument("--hosts", type=int, default=0, help="hosts of the demo fleet (default: the demo's)")
    parser.add_argument("--days-runs", type=int, default=90, help="nights of benchmark runs (default 90)")
    parser.add_argument(
        "--serving-interval", type=int, default=300, help="serving metrics interval, s (default 300)"
    )
    args = quick_parse(
        parser, repeat=3, days=1, telemetry_interval=3600, hosts=1, days_runs=10, serving_interval=3600
    )
    if args.repeat < 3 or args.days < 1:
        parser.error("--repeat must be at least 3 and --days at least 1")
    return args


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _time(fn: Callable[[], Any], repeat: int) -> list[float]:
    fn()  # warm-up: template compilation, first connection
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def main() -> None:
    args = parse_args()
    with bench_database("accelboard_bench_plan"):
        from django.contrib.auth import get_user_model
        from django.db import connection
        from django.test import Client
        from django.test.utils import setup_test_environment

        setup_test_environment()  # responses carry their template context (the plan's answer)

        from accelboard.core.access import EVERY_TEAM
        from accelboard.demo.generator import DemoConfig
        from accelboard.demo.loader import demo_fleet_load
        from accelboard.planning.selectors import plan_models

        started = time.perf_counter()
        now = datetime.now(UTC)
        result = demo_fleet_load(
            config=DemoConfig(
                now=now,
                days_telemetry=args.days,
                telemetry_interval_s=args.telemetry_interval,
                days_runs=args.days_runs,
                serving_interval_s=args.serving_interval,
                **({"hosts": args.hosts} if args.hosts else {}),
            ),
            progress=lambda line: None,
        )
        print(
            f"loaded the demo ({sum(result.rows.values()):,} rows) in {time.perf_counter() - started:.0f} s"
        )
        # A server that has run a while has statistics (autovacuum analyses a table once a tenth of
        # it changed); without them PostgreSQL plans the freshly loaded tables as empty.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        end = now.replace(minute=0, second=0, microsecond=0)
        models = plan_models(scope=EVERY_TEAM, start=end - timedelta(weeks=4), end=end)
        clients = {}
        for who in ("llm-lead", "llm-finance"):
            clients[who] = Client()
            clients[who].force_login(get_user_model().objects.get(username=who))
        reference = statistics.median(_time(lambda: Client().get("/healthz"), args.repeat))
        load_before = os.getloadavg()[0]
        print(f"reference /healthz median {reference:.1f} ms; load average (1 min) {load_before:.2f} "
              f"on {os.cpu_count()} CPUs")  # fmt: skip
        print(f"  {'model':<16} {'who':<12} {'median ms':>10} {'p95 ms':>8} {'x ref':>7}  answer")
        figures: dict[str, float] = {}
        for model in models:
            for who, client in clients.items():
                url = f"/plan/?model={model.model_id}"

                def get(client: Any = client, url: str = url) -> Any:
                    response = client.get(url)
                    if response.status_code != 200:
                        raise SystemExit(f"{url} answered {response.status_code}")
                    return response

                samples = _time(get, args.repeat)
                plan = get().context["plan"]
                best = plan.best.option.label if plan and plan.best else "—"
                median, p95 = statistics.median(samples), _percentile(samples, 0.95)
                figures[f"{model.name}/{who}"] = p95
                print(
                    f"  {model.name:<16} {who:<12} {median:>10.1f} {p95:>8.1f} {median / reference:>7.1f}  {best}"
                )
        load_after = os.getloadavg()[0]
        worst = max(figures, key=lambda k: figures[k])
        verdict = "meets" if figures[worst] <= TARGET_MS else "MISSES"
        print(f"\nworst p95 {figures[worst]:.1f} ms ({worst}) {verdict} the {TARGET_MS:.0f} ms target; "
              f"load average {load_before:.2f} before, {load_after:.2f} after")  # fmt: skip
        print(f"worst_p95_ms={figures[worst]:.1f} worst_page={worst} load_1m={load_after:.2f}")
        if figures[worst] > TARGET_MS:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
