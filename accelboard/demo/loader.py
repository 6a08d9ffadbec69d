"""Writes the demo fleet: the generator's numbers through the product's own write paths.

1. One transaction under an advisory lock: a failed load leaves nothing behind, and two loads at
   once cannot both fill the database. A database that already holds the demo (a host with
   ``facts.demo``) is left alone unless ``reset`` is asked for.
2. ``reset`` truncates every table the demo fills (fleet, benchmarks, serving, costs, alerts,
   teams and memberships; CASCADE takes rows in other apps that point at them, such as tokens)
   and deletes the demo users; the accelerator-type catalogue stays.
3. Paths: ``core.services`` for teams and people, ``fleet.services.host_register`` for hosts and
   GPUs, ``telemetry_partitions_ensure`` + ``telemetry_copy`` (binary COPY) for raw samples and
   ``telemetry_rollups_refresh`` over the whole range. Benchmark runs use ``bulk_create`` with
   ``run_record``'s semantics (run, series by identity, MetricValue with ``measured_at``, the
   series' last value): measured, ``run_record`` took 39 ms a run (77 s for the default 1,980
   runs), bulk_create ~4 s for all of them.
4. The manifest of injected events goes to the ``JobRun`` of the load (``detail.manifest``) and,
   when a path is given, to a JSON file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from accelboard.benchmarks.models import BenchmarkRun, MetricValue, ModelVariant, Series
from accelboard.benchmarks.services import (
    WorkloadSpec,
    model_variant_get_or_create,
    series_get_or_create,
    workload_get_or_create,
)
from accelboard.core.choices import JobStatus, Role
from accelboard.core.models import JobRun, Membership, Team
from accelboard.core.services import job_run_record, membership_set, team_create, user_create
from accelboard.costs.models import AcceleratorPrice, ElectricityPrice
from accelboard.costs.prices import price_book_load
from accelboard.costs.run_costs import run_costs_compute
from accelboard.costs.services import cost_days_compute
from accelboard.costs.serving_costs import serving_cost_day_compute
from accelboard.fleet.catalogue import accelerator_types_sync
from accelboard.fleet.models import TELEMETRY_COLUMNS, Accelerator, AcceleratorType, Host, Site
from accelboard.fleet.services import (
    host_register,
    telemetry_copy,
    telemetry_partitions_ensure,
    telemetry_rollups_refresh,
)
from accelboard.serving.models import InferenceMetric

from . import generator, plan

JOB_NAME = "demo_fleet"
_ADVISORY_DEMO = 7_310_077
# Apps whose every table the demo fills or derives from; reset truncates them all.
_RESET_APPS = ("alerts", "serving", "costs", "benchmarks", "fleet")


class DemoAlreadyLoaded(Exception):
    """The database holds the demo already; pass ``reset`` to rebuild it."""


@dataclass
class DemoLoad:
    """What a load did: rows per table, seconds per step, logins and the manifest."""

    config: dict[str, Any]
    rows: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    logins: list[dict[str, str]] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)
    manifest_path: str = ""


def demo_fleet_loaded() -> bool:
    return Host.objects.filter(facts__demo=True).exists()


def demo_manifest() -> dict[str, Any] | None:
    """The manifest of the latest successful demo load, or None."""
    job = (
        JobRun.objects.filter(name=JOB_NAME, status=JobStatus.SUCCEEDED, detail__has_key="manifest")
        .order_by("-started_at")
        .first()
    )
    return job.detail["manifest"] if job else None


def demo_usernames() -> list[str]:
    names = [f"{team['short']}-{role}" for team in plan.TEAMS for role in plan.TEAM_ROLES]
    return [*names, plan.ADMIN_USERNAME, plan.OUTSIDER_USERNAME]


def demo_fleet_reset() -> list[str]:
    """Truncate the tables the demo fills and delete the demo users; return the tables truncated."""
    tables = ["fleet_telemetrysample"]
    for label in _RESET_APPS:
        for model in django_apps.get_app_config(label).get_models():
            if model is AcceleratorType or not model._meta.managed:
                continue
            tables.append(model._meta.db_table)
    tables += [Membership._meta.db_table, Team._meta.db_table]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    get_user_model().objects.filter(username__in=demo_usernames()).delete()
    return tables


# The tables that take millions of rows. Truncated in the load's own transaction (``--reset``
# truncates them too), their new rows skip the WAL where ``wal_level`` is ``minimal``, as on the
# embedded server (``accelboard.embedded``): about a third less work for the telemetry and rollups.
_BULK_TABLES = ("fleet_telemetrysample", "fleet_telemetryrollup", "fleet_hostrollup")


def _bulk_tables_truncate_if_empty() -> None:
    """Truncate the bulk tables when all of them are empty: never someone's real telemetry."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + " AND ".join(f"NOT EXISTS (SELECT 1 FROM {t})" for t in _BULK_TABLES))
        if cursor.fetchone()[0]:
            cursor.execute(f"TRUNCATE {', '.join(_BULK_TABLES)}")


class _Steps:
    """Times each step and reports it through ``progress``."""

    def __init__(self, result: DemoLoad, progress: Callable[[str], None]) -> None:
        self.result = result
        self.progress = progress
        self.started = time.perf_counter()

    def run(self, name: str, func: Callable[[], dict[str, int]]) -> None:
        self.progress(f"{name}...")
        began = time.perf_counter()
        rows = func()
        took = time.perf_counter() - began
        self.result.seconds[name] = round(took, 2)
        self.result.rows.update(rows)
        detail = ", ".join(f"{count:,} {table}" for table, count in rows.items())
        self.progress(f"{name}: {detail} in {took:.1f} s")


def demo_fleet_load(
    *,
    config: generator.DemoConfig,
    reset: bool = False,
    manifest_path: Path | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> DemoLoad:
    """Build the demo fleet in one transaction; raise ``DemoAlreadyLoaded`` if it is there."""
    if not reset and demo_fleet_loaded():
        raise DemoAlreadyLoaded("the demo fleet is already loaded; use --reset to rebuild it")
    result = DemoLoad(config=config.as_dict())
    began = time.perf_counter()
    with job_run_record(name=JOB_NAME) as job:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADVISORY_DEMO])
                # The rollups sort a day of samples per GPU at a time; 4 MB spills them to disk.
                cursor.execute("SET LOCAL work_mem = '64MB'")
            if reset:
                progress("reset: truncating demo tables")
                demo_fleet_reset()
            elif demo_fleet_loaded():  # another load finished while this one waited for the lock
                raise DemoAlreadyLoaded("the demo fleet was loaded by another process meanwhile")
            else:
                _bulk_tables_truncate_if_empty()
            _load(config=config, result=result, progress=progress)
            progress("commit (PostgreSQL checks the deferred foreign keys of every new row)...")
            committing = time.perf_counter()
        result.seconds["commit"] = round(time.perf_counter() - committing, 2)
        progress(f"commit: {result.seconds['commit']:.1f} s")
        result.seconds["total"] = round(time.perf_counter() - began, 2)
        if manifest_path is not None:
            manifest_path.parent.mkdir(parents=True, exist_ok=True)
            manifest_path.write_text(json.dumps(result.manifest, indent=2, sort_keys=True))
            result.manifest_path = str(manifest_path)
        job.rows = sum(result.rows.values())
        job.detail = {
            "config": result.config,
            "rows": result.rows,
            "seconds": result.seconds,
            "manifest": result.manifest,
        }
    return result


def _load(*, config: generator.DemoConfig, result: DemoLoad, progress: Callable[[str], None]) -> None:
    hosts = generator.fleet_plan(config)
    events = generator.telemetry_events(config, hosts)
    steps = _Steps(result, progress)
    state: dict[str, Any] = {}

    def people() -> dict[str, int]:
        accelerator_types_sync()
        state["teams"], state["users"] = _people(result)
        return {"teams": len(state["teams"]), "users": len(state["users"])}

    def fleet() -> dict[str, int]:
        state["sites"] = _sites_and_prices(config)
        state["gpus"], state["host_ids"] = _hosts(config, hosts, state["teams"], state["sites"])
        return {
            "sites": len(state["sites"]),
            "hosts": len(hosts),
            "accelerators": len(state["gpus"]),
            "accelerator_prices": AcceleratorPrice.objects.count(),
            "electricity_prices": ElectricityPrice.objects.count(),
        }

    def benchmarks() -> dict[str, int]:
        runs = generator.benchmark_runs(config, hosts)
        state["series"], counts = _benchmarks(runs, hosts, state["teams"], state["users"], state["host_ids"])
        state["runs"] = runs
        return counts

    def telemetry() -> dict[str, int]:
        return {"telemetry_samples": _telemetry(config, hosts, events, state["gpus"], state["host_ids"])}

    def rollups() -> dict[str, int]:
        start = datetime.fromtimestamp(config.telemetry_start, UTC)
        end = datetime.fromtimestamp(config.telemetry_end, UTC)
        telemetry_rollups_refresh(start=start, end=end)
        return _counts(["fleet_telemetryrollup", "fleet_hostrollup"])

    def serving() -> dict[str, int]:
        return {"inference_metrics": _serving(config, hosts, events, state["teams"], state["host_ids"])}

    steps.run("people", people)
    steps.run("fleet and price book", fleet)
    steps.run("benchmark runs", benchmarks)
    steps.run("telemetry", telemetry)
    steps.run("rollups", rollups)
    steps.run("serving metrics", serving)
    steps.run("quantization drift", lambda: _drift(config, state["teams"]))
    # After everything else, as the per-run check would have done as each night's runs landed.
    steps.run("alerts", _alerts)
    steps.run("costs", lambda: _costs(config))
    result.manifest = _manifest_with_ids(config, hosts, state["runs"], events, state["series"])


def _costs(config: generator.DemoConfig) -> dict[str, int]:
    """Daily and serving costs of every telemetry day, as the nightly task computes them, and the
    per-run costs of the benchmark runs (one read of the price book for all of it)."""
    first = datetime.fromtimestamp(config.telemetry_start, UTC).date()
    last = datetime.fromtimestamp(config.telemetry_end, UTC).date()
    days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    results = cost_days_compute(days=days, record=False)  # the demo_fleet JobRun covers it
    book = price_book_load(today=config.now.astimezone(UTC).date())
    serving = sum(serving_cost_day_compute(day=day, book=book, record=False) for day in days)
    costed = run_costs_compute(
        runs=BenchmarkRun.objects.select_related("host", "accelerator_type", "workload"), book=book
    )
    return {"cost_daily": sum(r.rows for r in results), "serving_cost_daily": serving, "run_costs": costed}


def _alerts() -> dict[str, int]:
    """Regression alerts over the loaded run history: each series replayed run by run (the
    bulk-created runs did not enqueue the per-run check)."""
    from accelboard.alerts.checks import alerts_history_check  # noqa: PLC0415 - alerts imports benchmarks

    return alerts_history_check()


def _agreement_items(config: generator.DemoConfig) -> list[Any]:
    """Daily production agreement of the served quantized variants (``plan.PRODUCTION_AGREEMENT``)
    over the last ``AGREEMENT_DAYS`` run days; int4-awq slides with the accuracy drift."""
    from accelboard.drift.services import AgreementInput  # noqa: PLC0415 - drift imports benchmarks

    first = max(0, config.days_runs - plan.AGREEMENT_DAYS)
    drift_start = max(2, int(round(plan.DRIFT_EVENT["at"] * (config.days_runs - 1))))
    drift_bench = next(b for b in plan.BENCHMARKS if b["key"] == plan.DRIFT_EVENT["config"])
    items = []
    for model, variant, task, rate, kl, samples in plan.PRODUCTION_AGREEMENT:
        rng = generator._rng(config, "agreement", model, variant)
        drifting = (model, variant) == (drift_bench["model"], drift_bench["variant"])
        for day in range(first, config.days_runs):
            slide = plan.AGREEMENT_SLIDE_PER_DAY * max(0, day - drift_start) if drifting else 0.0
            items.append(
                AgreementInput(
                    model=model,
                    variant=variant,
                    day=generator.run_day_start(config, day).date(),
                    task=task,
                    agreement_rate=round(float(np.clip(rate - slide + rng.normal(0, 0.002), 0, 1)), 5),
                    kl_divergence=round(float(kl * (1 + 20 * slide) * rng.lognormal(0, 0.05)), 5),
                    samples=int(samples * rng.uniform(0.9, 1.1)),
                )
            )
    return items


def _drift(config: generator.DemoConfig, teams: dict[str, Team]) -> dict[str, int]:
    """Drift budgets, production agreement (through the drift-metrics ingest service) and the
    drift alerts the daily check would have raised over the run history, day by day: the
    int4-awq slow drift is warned of (trending) before it crosses its budget."""
    from accelboard.benchmarks.models import Model  # noqa: PLC0415
    from accelboard.drift.services import (  # noqa: PLC0415
        agreement_batch_ingest,
        agreement_check,
        drift_history_check,
    )

    for name, budget in plan.DRIFT_BUDGETS.items():
        Model.objects.filter(name=name).update(drift_budget=budget)
    accepted, _ = agreement_batch_ingest(
        team=teams[plan.AGREEMENT_TEAM],
        batch_id=f"demo-agreement-{config.seed}",
        items=_agreement_items(config),
    )
    days = [generator.run_day_start(config, day) + timedelta(hours=23) for day in range(config.days_runs)]
    findings = []
    for team in teams.values():
        findings += drift_history_check(team=team, days=days)
    findings += agreement_check(team=teams[plan.AGREEMENT_TEAM])
    return {"production_agreement": accepted["accepted"], "drift_alerts": len(findings)}


def _counts(tables: list[str]) -> dict[str, int]:
    """Exact row counts of the tables that exist (others' apps may add or drop rollup tables)."""
    counts = {}
    with connection.cursor() as cursor:
        for table in tables:
            if table in connection.introspection.table_names(cursor):
                cursor.execute(f"SELECT count(*) FROM {table}")
                counts[table.removeprefix("fleet_")] = cursor.fetchone()[0]
    return counts


def _people(result: DemoLoad) -> tuple[dict[str, Team], dict[str, Any]]:
    teams: dict[str, Team] = {}
    users: dict[str, Any] = {}
    for entry in plan.TEAMS:
        team = team_create(name=entry["name"], slug=entry["slug"], description=entry["description"])
        teams[entry["slug"]] = team
        for role in plan.TEAM_ROLES:
            username = f"{entry['short']}-{role}"
            user = user_create(
                username=username,
                password=plan.demo_password(username),
                email=f"{username}@demo.accelboard.invalid",
            )
            membership_set(team=team, user=user, role=Role(role).value)
            users[username] = user
            result.logins.append(
                {
                    "username": username,
                    "password": plan.demo_password(username),
                    "role": role,
                    "team": entry["name"],
                }
            )
    admin = user_create(
        username=plan.ADMIN_USERNAME,
        password=plan.demo_password(plan.ADMIN_USERNAME),
        email="admin@demo.accelboard.invalid",
        is_staff=True,
    )
    # Staff alone cannot use Django's admin pages without permissions; the demo admin may do all.
    get_user_model().objects.filter(pk=admin.pk).update(is_superuser=True)
    outsider = user_create(
        username=plan.OUTSIDER_USERNAME,
        password=plan.demo_password(plan.OUTSIDER_USERNAME),
        email="outsider@demo.accelboard.invalid",
    )
    users[plan.ADMIN_USERNAME] = admin
    users[plan.OUTSIDER_USERNAME] = outsider
    result.logins.append(
        {"username": "admin", "password": plan.demo_password("admin"), "role": "staff admin", "team": "-"}
    )
    result.logins.append(
        {"username": "outsider", "password": plan.demo_password("outsider"), "role": "no team", "team": "-"}
    )
    return teams, users


def _sites_and_prices(config: generator.DemoConfig) -> dict[str, Site]:
    today = config.now.astimezone(UTC).date()
    sites: dict[str, Site] = {}
    for entry in plan.SITES:
        site, _ = Site.objects.update_or_create(
            name=entry["name"], defaults={"provider": entry["provider"], "region": entry["region"]}
        )
        sites[entry["key"]] = site
        ElectricityPrice.objects.create(
            site=site,
            price_per_kwh=Decimal(entry["price_per_kwh"]),
            pue=entry["pue"],
            carbon_g_per_kwh=entry["carbon_g_per_kwh"],
            source=entry["source"],
            fetched_on=today - timedelta(days=7),
            valid_from=date(2024, 1, 1),
        )
    types = {accel.slug: accel for accel in AcceleratorType.objects.all()}
    prices = []
    for entry in plan.PRICES:
        capex = Decimal(entry["capex"]) if "capex" in entry else None
        price = (
            (capex / entry["lifetime_hours"]).quantize(Decimal("0.0001"))
            if capex is not None
            else Decimal(entry["price"])
        )
        fetched = entry.get("fetched_on") or today - timedelta(days=entry["fetched_days_ago"])
        prices.append(
            AcceleratorPrice(
                accelerator_type=types[entry["gpu"]],
                accelerator_count=entry["count"],
                provider=entry["provider"],
                region=entry["region"],
                instance_type=entry["instance_type"],
                pricing_model=entry["pricing_model"],
                price_per_hour=price,
                capex=capex,
                lifetime_hours=entry.get("lifetime_hours"),
                source=entry["source"],
                fetched_on=fetched,
                valid_from=entry["valid_from"],
                valid_to=entry.get("valid_to"),
            )
        )
    AcceleratorPrice.objects.bulk_create(prices)
    return sites


# What each profile's spend is booked to in the cost report (Host.project).
_PROJECTS = {
    "serving": "chat-api",
    "batch": "batch-inference",
    "training": "foundation-models",
    "office": "notebooks",
}


def _hosts(
    config: generator.DemoConfig,
    hosts: list[generator.HostPlan],
    teams: dict[str, Team],
    sites: dict[str, Site],
) -> tuple[dict[str, Accelerator], dict[str, int]]:
    """Register every host and GPU by UUID, as an agent's first batch would; GPUs by UUID."""
    seen = datetime.fromtimestamp(config.telemetry_end, UTC)
    gpus: dict[str, Accelerator] = {}
    host_ids: dict[str, int] = {}
    for host_plan in hosts:
        host, registered = host_register(
            hostname=host_plan.hostname,
            team_id=teams[host_plan.team].pk,
            facts={
                "demo": True,
                "profile": host_plan.profile,
                "os": "Ubuntu 22.04",
                "provider": host_plan.provider,
                "region": host_plan.region,
                "instance_type": host_plan.instance_type,
                "driver_version": host_plan.driver_version,
                "cuda_version": host_plan.cuda_version,
                "agent_version": "0.1.0",
                "simulated": True,
            },
            accelerators=[
                {
                    "uuid": gpu.uuid,
                    "index": gpu.index,
                    "name": gpu.name,
                    "serial": gpu.serial,
                    "memory_bytes": gpu.memory_bytes,
                    "power_limit_w": gpu.power_limit_w,
                    "driver_version": host_plan.driver_version,
                }
                for gpu in host_plan.gpus
            ],
            seen_at=seen,
        )
        Host.objects.filter(pk=host.pk).update(
            site=sites[host_plan.site], project=_PROJECTS.get(host_plan.profile, "")
        )
        gpus.update(registered)
        host_ids[host_plan.hostname] = host.pk
    return gpus, host_ids


def _benchmarks(
    runs: list[generator.RunRow],
    hosts: list[generator.HostPlan],
    teams: dict[str, Team],
    users: dict[str, Any],
    host_ids: dict[str, int],
) -> tuple[dict[tuple[str, str], Series], dict[str, int]]:
    types = {accel.slug: accel for accel in AcceleratorType.objects.all()}
    variants = {}
    for model in plan.MODELS:  # in order, so the first high-precision variant is the reference
        for name, precision, method in model["variants"]:
            variants[(model["name"], name)] = model_variant_get_or_create(
                model=model["name"],
                variant=name,
                precision=precision,
                quantization_method=method,
                family=model["family"],
                task=model["task"],
                parameters_b=model["parameters_b"],
            )
    by_host = {host.hostname: host for host in hosts}
    benches = {bench["key"]: bench for bench in plan.BENCHMARKS}
    workloads = {}
    series: dict[tuple[str, str], Series] = {}
    for bench in plan.BENCHMARKS:
        team = teams[bench["team"]]
        workload = workload_get_or_create(
            team=team,
            variant=variants[(bench["model"], bench["variant"])],
            spec=WorkloadSpec(**bench["workload"]),
        )
        workloads[bench["key"]] = workload
        for name in generator.bench_metric_names(bench):
            first = next(run for run in runs if run.config == bench["key"])
            metric = next(m for m in first.metrics if m.name == name)
            series[(bench["key"], name)] = series_get_or_create(
                team=team,
                workload=workload,
                accelerator_type=types[bench["gpu"]],
                accelerator_count=bench["count"],
                metric=name,
                unit=metric.unit,
                direction=metric.direction,
            )
    run_objects = []
    for run in runs:
        bench = benches[run.config]
        host_plan = by_host.get(run.hostname) if run.hostname else None
        run_objects.append(
            BenchmarkRun(
                uuid=run.uuid,
                team=teams[bench["team"]],
                workload=workloads[run.config],
                accelerator_type=types[bench["gpu"]],
                accelerator_count=bench["count"],
                host_id=host_ids.get(run.hostname) if run.hostname else None,
                driver_version=host_plan.driver_version if host_plan else "",
                cuda_version=host_plan.cuda_version if host_plan else "",
                started_at=run.started_at,
                finished_at=run.finished_at,
                git_commit=run.git_commit,
                branch="main",
                uploaded_by=users[f"{_short(bench['team'])}-engineer"],
                uploaded_via="demo",
                source_format="demo",
                context={"demo": True, "nightly": True, "day": run.day, "events": list(run.events)},
            )
        )
    BenchmarkRun.objects.bulk_create(run_objects, batch_size=1000)
    values = []
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for run, run_object in zip(runs, run_objects, strict=True):
        for metric in run.metrics:
            key = (run.config, metric.name)
            values.append(
                MetricValue(
                    run=run_object,
                    series=series[key],
                    name=metric.name,
                    value=metric.value,
                    unit=metric.unit,
                    direction=metric.direction,
                    samples=list(metric.samples),
                    source="demo:generator",
                    measured_at=run.started_at,
                )
            )
            if key not in latest or run.started_at >= latest[key][0]:
                latest[key] = (run.started_at, metric.value)
    MetricValue.objects.bulk_create(values, batch_size=2000)
    for key, (started_at, value) in latest.items():
        series[key].last_run_at = started_at
        series[key].last_value = value
    Series.objects.bulk_update(list(series.values()), ["last_run_at", "last_value"], batch_size=500)
    return series, {
        "workloads": len(workloads),
        "series": len(series),
        "benchmark_runs": len(run_objects),
        "metric_values": len(values),
    }


def _short(team_slug: str) -> str:
    return next(team["short"] for team in plan.TEAMS if team["slug"] == team_slug)


def _telemetry_rows(
    data: list[generator.HostTelemetry],
    gpus: list[list[int]],
    host_ids: list[int],
    grid: np.ndarray,
    day_bounds: list[tuple[int, int]],
) -> Iterator[tuple[Any, ...]]:
    """Rows in TELEMETRY_COLUMNS order, a day at a time across hosts, as agents would deliver them."""
    moments = [datetime.fromtimestamp(int(epoch), UTC) for epoch in grid]
    names = TELEMETRY_COLUMNS[3:]
    for low, high in day_bounds:
        for host, gpu_ids, host_id in zip(data, gpus, host_ids, strict=True):
            a, b = np.searchsorted(host.epochs, [low, high])
            if a == b:
                continue
            times = [moments[i] for i in np.searchsorted(grid, host.epochs[a:b]).tolist()]
            for row_index, gpu_id in enumerate(gpu_ids):
                columns = [host.columns[name][row_index, a:b].tolist() for name in names]
                yield from zip(times, repeat(host_id), repeat(gpu_id), *columns)


def _telemetry(
    config: generator.DemoConfig,
    hosts: list[generator.HostPlan],
    events: generator.TelemetryEvents,
    gpus: dict[str, Accelerator],
    host_ids: dict[str, int],
) -> int:
    start = datetime.fromtimestamp(config.telemetry_start, UTC)
    end = datetime.fromtimestamp(config.telemetry_end, UTC)
    telemetry_partitions_ensure(start=start, end=end - timedelta(seconds=1))
    data = [generator.host_telemetry(config, host, events) for host in hosts]
    grid = np.arange(
        config.telemetry_start, config.telemetry_end, config.telemetry_interval_s, dtype=np.int64
    )
    day_bounds = [
        (low, min(low + generator.DAY, config.telemetry_end))
        for low in range(config.telemetry_start, config.telemetry_end, generator.DAY)
    ]
    gpu_ids = [[gpus[gpu.uuid].pk for gpu in host.gpus] for host in hosts]
    count = telemetry_copy(
        rows=_telemetry_rows(data, gpu_ids, [host_ids[host.hostname] for host in hosts], grid, day_bounds)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE fleet_telemetrysample")
    # The live grid reads each GPU's newest sample from ``last_state`` (as the ingest path keeps it).
    updates = []
    for host, host_data in zip(hosts, data, strict=True):
        last = datetime.fromtimestamp(int(host_data.epochs[-1]), UTC)
        for row_index, gpu in enumerate(host.gpus):
            accelerator = gpus[gpu.uuid]
            state: dict[str, Any] = {
                name: host_data.columns[name][row_index, -1].item() for name in TELEMETRY_COLUMNS[3:]
            }
            accelerator.last_state = {**state, "time": last.isoformat()}
            accelerator.last_seen_at = last
            updates.append(accelerator)
    Accelerator.objects.bulk_update(updates, ["last_state", "last_seen_at"])
    return count


def _serving(
    config: generator.DemoConfig,
    hosts: list[generator.HostPlan],
    events: generator.TelemetryEvents,
    teams: dict[str, Team],
    host_ids: dict[str, int],
) -> int:
    rows = []
    for deployment in generator.serving_metrics(config, hosts, events):
        variant = ModelVariant.objects.get(model__name=deployment.model, name=deployment.variant)
        columns = {name: values.tolist() for name, values in deployment.columns.items()}
        for i, epoch in enumerate(deployment.epochs.tolist()):
            served = columns["requests"][i] > 0
            rows.append(
                InferenceMetric(
                    team=teams[deployment.team],
                    host_id=host_ids[deployment.hostname],
                    variant=variant,
                    engine=deployment.engine,
                    accelerator_uuids=deployment.gpu_uuids,
                    interval_start=datetime.fromtimestamp(epoch, UTC),
                    interval_s=config.serving_interval_s,
                    batch_id="demo",
                    **{
                        name: (values[i] if served or not name.endswith("_ms") else None)
                        for name, values in columns.items()
                    },
                )
            )
    InferenceMetric.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


def _manifest_with_ids(
    config: generator.DemoConfig,
    hosts: list[generator.HostPlan],
    runs: list[generator.RunRow],
    events: generator.TelemetryEvents,
    series: dict[tuple[str, str], Series],
) -> dict[str, Any]:
    """The generator's manifest plus the database ids of each named series."""
    result = generator.manifest(config, hosts, runs, events)
    named = set()
    for event in result["benchmark_events"]:
        for item in event["series"]:
            item["series_id"] = series[(item["config"], item["metric"])].pk
            named.add(item["series_id"])
    # Noise only: a detector that opens an alert on one of these raised a false alarm.
    result["series_without_events"] = sorted(row.pk for row in series.values() if row.pk not in named)
    result["series_count"] = len(series)
    return result
