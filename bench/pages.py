"""Server time of every dashboard page on the demo fleet and on a fleet 10x larger.

Usage::

    .venv/bin/python bench/pages.py                     # demo fleet, then 10x hosts
    .venv/bin/python bench/pages.py --repeat 5 --scale 3   # quicker

For each fleet size it creates ``accelboard_bench_pages`` on DATABASE_URL's server (the embedded
default when unset), loads the demo fleet with the product's own loader (``demo_fleet_load``; the
larger fleet has ``--scale`` times the hosts, the same history of runs and ``--days-10x`` days of
telemetry so that the load stays within minutes on a laptop), computes what the demo's jobs
compute, then requests every page through Django's test client as the users who live in them (a
team lead, and finance for the cost pages) and reports the median and p95 server time of each.

The reference figure, measured in the same process, is the cheapest possible page (``/healthz``),
so the ratio says how much of a page's time is its own work rather than Django's overhead.
Targets: p95 under 300 ms on the demo fleet and under 500 ms on the 10x fleet.
The last line is ``worst_p95_ms=… worst_p95_10x_ms=…`` (plus the worst page of each).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from common import bench_database, quick_parse

TARGET_MS = {"demo": 300.0, "10x": 500.0}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=15, help="timed requests per page (default 15)")
    parser.add_argument(
        "--scale", type=int, default=10, help="hosts multiplier of the larger fleet (default 10)"
    )
    parser.add_argument(
        "--days", type=int, default=31, help="days of telemetry of the demo fleet (default 31, as the demo)"
    )
    parser.add_argument(
        "--days-10x", type=int, default=3, help="days of telemetry of the larger fleet (default 3)"
    )
    parser.add_argument("--hosts", type=int, default=0, help="hosts of the demo fleet (default: the demo's)")
    parser.add_argument("--days-runs", type=int, default=90, help="nights of benchmark runs (default 90)")
    parser.add_argument(
        "--interval",
        type=int,
        default=0,
        help="telemetry and serving sampling interval, s (default: the demo's)",
    )
    args = quick_parse(parser, repeat=3, scale=2, days=1, days_10x=1, hosts=1, days_runs=10, interval=3600)
    if args.repeat < 3 or args.scale < 2 or args.days < 1 or args.days_10x < 1:
        parser.error("--repeat must be at least 3, --scale at least 2, the days at least 1")
    return args


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _time(fn: Callable[[], Any], repeat: int) -> list[float]:
    fn()  # warm-up: template compilation, first connection
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _pages() -> list[tuple[str, str, str]]:
    """(label, url, who) for every page of the product, with real object ids from the loaded fleet."""
    from django.urls import NoReverseMatch, reverse

    from accelboard.alerts.models import Alert
    from accelboard.benchmarks.models import BenchmarkRun, Model, Series
    from accelboard.fleet.models import Host

    run = BenchmarkRun.objects.order_by("-started_at").first()
    host = Host.objects.filter(team__slug="llm-serving").order_by("hostname").first()
    series = Series.objects.filter(team__slug="llm-serving").order_by("pk")[:3]
    alert = Alert.objects.filter(team__slug="llm-serving").order_by("-opened_at").first()
    model = Model.objects.order_by("pk").first()
    month = datetime.now(UTC).strftime("%Y-%m")
    wanted: list[tuple[str, str, tuple[Any, ...], str, str]] = [
        ("overview", "dashboard:overview", (), "", "lead"),
        ("trends", "dashboard:trends", (), "?" + "&".join(f"series={s.pk}" for s in series), "lead"),
        ("hardware", "dashboard:hardware", (), "", "lead"),
        ("runs", "benchmarks:run_list", (), "", "lead"),
        ("run detail", "benchmarks:run_detail", (run.pk,) if run else (), "", "lead"),
        ("quantization", "drift:overview", (), "", "lead"),
        ("quantization model", "drift:model", (model.pk,) if model else (), "", "lead"),
        ("costs", "costs:report", (), f"?month={month}", "finance"),
        ("alerts", "alerts:list", (), "", "lead"),
        ("alert detail", "alerts:detail", (alert.pk,) if alert else (), "", "lead"),
        ("hosts", "fleet:hosts", (), "", "lead"),
        ("host detail", "fleet:host_detail", (host.pk,) if host else (), "?range=24h", "lead"),
        ("subscriptions", "notifications:subscriptions", (), "", "lead"),
        ("team", "core:team_detail", ("llm-serving",), "", "lead"),
        ("costs drill-down", "costs:drill", (), f"?month={month}", "finance"),
        ("plan", "planning:plan", (), "", "lead"),
        ("plan finance", "planning:plan", (), "", "finance"),
    ]
    pages = []
    for label, name, args, query, who in wanted:
        try:
            pages.append((label, reverse(name, args=args) + query, who))
        except NoReverseMatch:
            print(f"  (no page {name}{args}: skipped)")
    return pages


def _measure(label: str, repeat: int) -> dict[str, tuple[float, float]]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    users = {"lead": "llm-lead", "finance": "llm-finance"}
    clients = {}
    for who, username in users.items():
        client = Client()
        client.force_login(get_user_model().objects.get(username=username))
        clients[who] = client
    reference = _time(lambda: Client().get("/healthz"), repeat)
    ref_median = statistics.median(reference)
    print(f"\n{label}: reference /healthz median {ref_median:.1f} ms")
    print(f"  {'page':<20} {'median ms':>10} {'p95 ms':>8} {'x ref':>7}  url")
    figures: dict[str, tuple[float, float]] = {}
    for name, url, who in _pages():

        def get(url: str = url, who: str = who) -> None:
            response = clients[who].get(url)
            if response.status_code != 200:
                raise SystemExit(f"{url} answered {response.status_code} for {who}")

        samples = _time(get, repeat)
        median, p95 = statistics.median(samples), _percentile(samples, 0.95)
        figures[name] = (median, p95)
        print(f"  {name:<20} {median:>10.1f} {p95:>8.1f} {median / ref_median:>7.1f}  {url}")
    return figures


def _load(*, hosts: int, days: int, days_runs: int, interval: int) -> None:
    from accelboard.demo import plan
    from accelboard.demo.generator import DemoConfig
    from accelboard.demo.loader import demo_fleet_load

    started = time.perf_counter()
    intervals = {"telemetry_interval_s": interval, "serving_interval_s": interval} if interval else {}
    config = DemoConfig(
        now=datetime.now(UTC), hosts=hosts, days_telemetry=days, days_runs=days_runs, **intervals
    )
    result = demo_fleet_load(config=config, progress=lambda line: None)
    rows = sum(result.rows.values())
    print(f"loaded {hosts} hosts (default {plan.DEFAULT_HOSTS}), {days} days of telemetry: "
          f"{rows:,} rows in {time.perf_counter() - started:.0f} s")  # fmt: skip


def main() -> None:
    args = parse_args()
    from accelboard.demo import plan

    results = {}
    demo_hosts = args.hosts or plan.DEFAULT_HOSTS
    for label, hosts, days in (
        ("demo", demo_hosts, args.days),
        (
            "10x" if args.scale == 10 else f"{args.scale}x (asked for instead of 10x)",
            demo_hosts * args.scale,
            args.days_10x,
        ),
    ):
        with bench_database("accelboard_bench_pages"):
            _load(hosts=hosts, days=days, days_runs=args.days_runs, interval=args.interval)
            results[label] = _measure(label, args.repeat)
    print()
    summary = []
    for label, figures in results.items():
        worst = max(figures, key=lambda name: figures[name][1])
        p95 = figures[worst][1]
        target = TARGET_MS["demo" if label == "demo" else "10x"]
        verdict = "meets" if p95 <= target else "MISSES"
        print(f"{label}: worst p95 {p95:.1f} ms ({worst}) {verdict} the {target:.0f} ms target")
        suffix = "" if label == "demo" else "_10x"
        summary += [f"worst_p95{suffix}_ms={p95:.1f}", f"worst_page{suffix}={worst.replace(' ', '_')}"]
    print(" ".join(summary))


if __name__ == "__main__":
    main()
