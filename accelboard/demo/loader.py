"""Writes the demo fleet: the generator's numbers through the product's own write paths.

1. In stages, each its own transaction, so the site can serve while the rest loads (``accelboard
   demo`` starts the web server once ``ready_to_serve`` is reported): *base* (people, hosts, price
   book, benchmark runs, serving objectives), *recent telemetry* (the last ``RECENT_DAYS``) and its
   daily costs; then, side by side, *older telemetry and those days' costs* (in a child process,
   ``accelboard.demo.forked``: not the same GIL) and *benchmark runs and their costs, serving
   metrics, drift, alerts*; last the costs of serving. A session advisory lock keeps
   two loads apart; a load that fails is undone by ``demo_fleet_reset`` (nothing half-written),
   and only a load that finished leaves the ``JobRun`` that ``demo_fleet_loaded`` looks for, so an
   interrupted one is rebuilt by the next start.
2. ``reset`` truncates every table the demo fills (fleet, benchmarks, serving, costs, alerts,
   teams and memberships; CASCADE takes rows in other apps that point at them, such as tokens)
   and deletes the demo users; the accelerator-type catalogue stays.
3. Paths: ``core.services`` for teams and people, ``fleet.services.host_register`` for hosts and
   GPUs. Telemetry: the last ``RAW_HOURS`` as raw samples (``telemetry_partitions_ensure`` +
   ``telemetry_copy``, binary COPY) rolled up by ``telemetry_rollups_refresh`` as ingest's are;
   the older samples go straight into the minute rollups (``accelboard.demo.rollups``: one sample
   a minute is its own minute rollup): the recent days' hour and host rollups are computed by
   ``telemetry_rollups_refresh``; the older days' minute, hour and host rollups are computed in
   numpy with its arithmetic and copied into fresh tables swapped in (``accelboard.demo.swap``).
   The password hashes and the telemetry can be computed ahead (``demo_fleet_prepare``, while
   ``accelboard demo`` migrates). Benchmark runs use ``bulk_create`` with ``run_record``'s semantics (run, series by
   identity, MetricValue with ``measured_at``, the series' last value). Alerts come from the real
   detector (``alerts_history_check``), costs from the real cost jobs.
4. The manifest of injected events goes to the ``JobRun`` of the load (``detail.manifest``) and,
   when a path is given, to a JSON file. ``progress_path``: a JSON file of the steps and their
   state, which ``accelboard demo`` and the pages' loading banner read.
"""

from __future__ import annotations

import itertools
import json
import threading
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
from django.contrib.auth.hashers import make_password
from django.db import connection, connections, transaction

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
from accelboard.costs.pricebook_selectors import price_book_load
from accelboard.costs.run_cost_services import run_costs_compute
from accelboard.costs.services import cost_days_compute
from accelboard.costs.serving_cost_services import serving_cost_day_compute
from accelboard.fleet.catalogue import accelerator_types_sync
from accelboard.fleet.models import TELEMETRY_COLUMNS, Accelerator, AcceleratorType, Host, Site
from accelboard.fleet.services import (
    MAX_COUNTER_GAP_S,
    THROTTLE_MASK,
    host_register,
    telemetry_copy,
    telemetry_partitions_ensure,
    telemetry_rollups_refresh,
)
from accelboard.serving.models import InferenceMetric

from . import forked, generator, plan, rollups, swap
from .progress import STEPS, Progress

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
    """The demo is there and a load finished: an interrupted load leaves hosts but no success."""
    return (
        Host.objects.filter(facts__demo=True).exists()
        and JobRun.objects.filter(name=JOB_NAME, status=JobStatus.SUCCEEDED).exists()
    )


def demo_fleet_partial() -> bool:
    """Demo rows without a finished load: a load was interrupted (Ctrl-C, a crash) after its
    first stage committed (the people come first, the hosts next)."""
    started = (
        Host.objects.filter(facts__demo=True).exists()
        or get_user_model().objects.filter(username__in=demo_usernames()).exists()
    )
    return started and not demo_fleet_loaded()


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
    tables = ["fleet_telemetrysample", "fleet_telemetrypartial"]
    for label in _RESET_APPS:
        for model in django_apps.get_app_config(label).get_models():
            if model is AcceleratorType or not model._meta.managed:
                continue
            tables.append(model._meta.db_table)
    tables += [Membership._meta.db_table, Team._meta.db_table]
    with transaction.atomic(), connection.cursor() as cursor:
        swap.fresh_tables_drop()
        cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
        get_user_model().objects.filter(username__in=demo_usernames()).delete()
    return tables


# The tables that take millions of rows. Truncated in the recent-telemetry transaction when they
# are empty (``--reset`` empties them), their new rows skip the WAL where ``wal_level`` is
# ``minimal``, as on the embedded server (``accelboard.embedded``).
_BULK_TABLES = ("fleet_telemetrysample", "fleet_telemetryrollup", "fleet_hostrollup")
# The days loaded before the site is served (the overview's current figures), and the hours of
# them kept as raw samples (the hosts page's newest data, rolled up by the live path).
RECENT_DAYS = 2
RAW_HOURS = 3


def _bulk_tables_truncate_if_empty() -> None:
    """Truncate the bulk tables when all of them are empty: never someone's real telemetry."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + " AND ".join(f"NOT EXISTS (SELECT 1 FROM {t})" for t in _BULK_TABLES))
        if cursor.fetchone()[0]:
            cursor.execute(f"TRUNCATE {', '.join(_BULK_TABLES)}")


class _Steps:
    """Times each step, reports it through ``Progress`` and records its rows and seconds."""

    def __init__(self, result: DemoLoad, progress: Progress) -> None:
        self.result = result
        self.progress = progress
        self.lock = threading.Lock()

    def run(self, name: str, func: Callable[[], dict[str, int]]) -> None:
        self.progress.update(name, state="running")
        began = time.perf_counter()
        rows = func()
        took = time.perf_counter() - began
        with self.lock:
            self.result.seconds[name] = round(took, 2)
            self.result.rows.update(rows)
        self.progress.update(name, state="done", seconds=round(took, 1))
        detail = ", ".join(f"{count:,} {table}" for table, count in rows.items())
        self.progress.say(f"{STEPS[name]}: {took:.1f} s ({detail})")


def demo_fleet_load(
    *,
    config: generator.DemoConfig,
    reset: bool = False,
    manifest_path: Path | None = None,
    progress: Callable[[str], None] = lambda line: None,
    progress_path: Path | None = None,
    raw_hours: int | None = RAW_HOURS,
    prepared: Prepared | None = None,
) -> DemoLoad:
    """Build the demo fleet in stages; raise ``DemoAlreadyLoaded`` if it is there.

    ``raw_hours=None`` keeps every sample raw and rolls all of it up through the ingest path (the
    reference the direct minute rollups are tested against). ``prepared``: ``demo_fleet_prepare``
    of the same ``config``, computed ahead.
    """
    if not reset and demo_fleet_loaded():
        raise DemoAlreadyLoaded("the demo fleet is already loaded; use --reset to rebuild it")
    result = DemoLoad(config=config.as_dict())
    began = time.perf_counter()
    status = Progress(progress_path, progress)
    with connection.cursor() as cursor:
        # A session lock: the stages commit one by one, and two loads must not interleave.
        cursor.execute("SELECT pg_advisory_lock(%s)", [_ADVISORY_DEMO])
    try:
        with job_run_record(name=JOB_NAME) as job:
            try:
                if reset or demo_fleet_partial():
                    if not reset:
                        progress("an earlier load was interrupted: rebuilding the demo")
                    demo_fleet_reset()
                elif demo_fleet_loaded():  # another load finished while this one waited for the lock
                    raise DemoAlreadyLoaded("the demo fleet was loaded by another process meanwhile")
                _load(
                    config=config,
                    result=result,
                    steps=_Steps(result, status),
                    raw_hours=raw_hours,
                    prepared=prepared,
                )
            except DemoAlreadyLoaded:
                raise
            except BaseException as exc:
                # Nothing half-written: the stages that committed are undone.
                status.finish(error=f"{type(exc).__name__}: {exc}")
                demo_fleet_reset()
                raise
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
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_ADVISORY_DEMO])
    status.finish()
    return result


def _stage(func: Callable[[], dict[str, int]], *, work_mem: bool = False) -> Callable[[], dict[str, int]]:
    """``func`` in its own transaction (a savepoint inside a caller's, as in tests)."""

    def run() -> dict[str, int]:
        with transaction.atomic():
            if work_mem:
                with connection.cursor() as cursor:
                    # The rollups sort a day of samples per GPU at a time; 4 MB spills them to disk.
                    cursor.execute("SET LOCAL work_mem = '64MB'")
            return func()

    return run


def _branches(*branches: Callable[[], None]) -> None:
    """Run independent chains side by side, each thread on its own database connection; in a
    caller's transaction (tests) one after the other, since other connections would not see it."""
    if connection.in_atomic_block:
        for branch in branches:
            branch()
        return
    errors: list[BaseException] = []

    def run(branch: Callable[[], None]) -> None:
        try:
            branch()
        except BaseException as exc:  # re-raised in the caller below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(branch,), daemon=True) for branch in branches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


@dataclass
class Prepared:
    """What a load computes before it touches the database: the fleet plan, its telemetry and the
    demo users' password hashes (``demo_fleet_prepare``)."""

    hosts: list[generator.HostPlan]
    events: generator.TelemetryEvents
    telemetry: list[generator.HostTelemetry]
    hashes: dict[str, str]


def demo_fleet_prepare(config: generator.DemoConfig) -> Prepared:
    """The load's work that needs no database, so that ``accelboard demo`` can run it while the
    migrations run: the password hashes (PBKDF2 releases the GIL) beside the telemetry."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    with ThreadPoolExecutor(max_workers=1) as pool:
        hashes = pool.submit(_password_hashes, demo_usernames())
        hosts = generator.fleet_plan(config)
        events = generator.telemetry_events(config, hosts)
        telemetry = [generator.host_telemetry(config, host, events) for host in hosts]
        return Prepared(hosts=hosts, events=events, telemetry=telemetry, hashes=hashes.result())


def _load(
    *,
    config: generator.DemoConfig,
    result: DemoLoad,
    steps: _Steps,
    raw_hours: int | None,
    prepared: Prepared | None = None,
) -> None:
    hosts = prepared.hosts if prepared else generator.fleet_plan(config)
    events = prepared.events if prepared else generator.telemetry_events(config, hosts)
    state: dict[str, Any] = {}
    end = config.telemetry_end
    # Whole clock hours, never before the first sample.
    recent_start = max(config.telemetry_start, end - RECENT_DAYS * generator.DAY)
    recent_start = max(config.telemetry_start, recent_start - recent_start % 3600)
    # Where the live tables' rollups may still change while the older days load (the raw hours,
    # which the live fleet's rollups follow): None when nothing goes straight into minute rollups.
    live_from: int | None = None
    if raw_hours is None or config.telemetry_interval_s % 60:
        # Everything raw: asked for, or several samples share a minute (the direct path needs one).
        raw_windows = [(config.telemetry_start, end)]
    else:
        raw_start = end - raw_hours * 3600
        raw_start = max(config.telemetry_start, raw_start - raw_start % 3600)
        # The injected thermal fault stays raw too: the production check's throttle test reads
        # raw samples (the fault-only reasons, not the power cap the minute rollups also count).
        raw_windows = _merged([(raw_start, end), (events.throttle_start, min(events.throttle_end, end))])
        live_from = max(recent_start, raw_start)

    def people() -> dict[str, int]:
        accelerator_types_sync()
        state["teams"], state["users"] = _people(result, prepared.hashes if prepared else None)
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
        counts.update(_objectives(state["teams"]))
        counts.update(_run_costs(config))
        state["runs"] = runs
        return counts

    def telemetry_recent() -> dict[str, int]:
        _bulk_tables_truncate_if_empty()
        if prepared is not None:
            data = prepared.telemetry
        else:
            data = [generator.host_telemetry(config, host, events) for host in hosts]
        state["telemetry"] = data
        counts = _telemetry(
            config,
            hosts,
            data,
            state["gpus"],
            state["host_ids"],
            low=recent_start,
            high=end,
            raw_windows=raw_windows,
        )
        _last_state(hosts, data, state["gpus"])
        return counts

    def telemetry_older() -> dict[str, int]:
        if live_from is None:
            counts = _stage(
                lambda: _telemetry(
                    config,
                    hosts,
                    state["telemetry"],
                    state["gpus"],
                    state["host_ids"],
                    low=config.telemetry_start,
                    high=recent_start,
                    raw_windows=raw_windows,
                ),
                work_mem=True,
            )()
        else:
            counts = _telemetry_swapped(
                hosts,
                state["telemetry"],
                state["gpus"],
                state["host_ids"],
                low=config.telemetry_start,
                high=recent_start,
                raw_windows=raw_windows,
                live_from=live_from,
            )
        return counts

    def serving() -> dict[str, int]:
        return {"inference_metrics": _serving(config, hosts, events, state["teams"], state["host_ids"])}

    # Before the site is served: people, the fleet and the current days' figures.
    steps.run("people", _stage(people))
    steps.run("fleet", _stage(fleet))
    steps.run("telemetry_recent", _stage(telemetry_recent, work_mem=True))
    steps.run("costs_recent", _stage(lambda: _day_costs(config, low=recent_start, high=end)))

    # While it serves: the older telemetry (in a child process, ``accelboard.demo.forked``) beside
    # the runs, serving metrics, drift and alerts. Its own transactions: the fresh rollup tables
    # commit before they are swapped in.
    def telemetry_and_costs_older() -> dict[str, int]:
        counts = telemetry_older()
        # Every day's costs need that day's rollups; the recent days' were computed before serving.
        counts.update(_stage(lambda: _older_day_costs(low=config.telemetry_start, high=recent_start))())
        return counts

    older = (
        telemetry_and_costs_older if connection.in_atomic_block else forked.start(telemetry_and_costs_older)
    )

    def telemetry_chain() -> None:
        steps.run("telemetry_older", older)
        state.pop("telemetry", None)

    def history_chain() -> None:
        steps.run("benchmarks", _stage(benchmarks))
        steps.run("serving", _stage(serving))
        steps.run("drift", _stage(lambda: _drift(config, state["teams"])))
        # After the runs, as the per-run check would have done as each night's runs landed.
        steps.run("alerts", _stage(_alerts))

    _branches(telemetry_chain, history_chain)
    steps.run("costs", _stage(lambda: _costs(config)))
    result.manifest = _manifest_with_ids(config, hosts, state["runs"], events, state["series"])


def _days(low: int, high: int) -> list[date]:
    """The UTC days that samples in [low, high) epoch seconds fall on."""
    if high <= low:
        return []
    first = datetime.fromtimestamp(low, UTC).date()
    last = datetime.fromtimestamp(high - 1, UTC).date()
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def _day_costs(config: generator.DemoConfig, *, low: int, high: int) -> dict[str, int]:
    """Daily costs of the days in [low, high), as the nightly task computes them."""
    results = cost_days_compute(days=_days(low, high), record=False)  # the demo_fleet JobRun covers it
    return {"cost_daily": sum(r.rows for r in results)}


def _older_day_costs(*, low: int, high: int) -> dict[str, int]:
    """The daily costs of the older days (a day split with the recent ones is computed again, whole)."""
    results = cost_days_compute(days=_days(low, high), record=False)
    return {"cost_daily_older": sum(r.rows for r in results)}


def _costs(config: generator.DemoConfig) -> dict[str, int]:
    """The serving costs of every telemetry day (they need every day's telemetry)."""
    book = price_book_load(today=config.now.astimezone(UTC).date())
    every_day = _days(config.telemetry_start, config.telemetry_end)
    return {
        "serving_cost_daily": sum(
            serving_cost_day_compute(day=day, book=book, record=False) for day in every_day
        )
    }


def _run_costs(config: generator.DemoConfig) -> dict[str, int]:
    """The per-run costs of the benchmark runs, as the per-run task computes them."""
    book = price_book_load(today=config.now.astimezone(UTC).date())
    runs = BenchmarkRun.objects.select_related("host", "accelerator_type", "workload")
    return {"run_costs": run_costs_compute(runs=runs, book=book)}


def _objectives(teams: dict[str, Team]) -> dict[str, int]:
    """The serving SLOs the teams set (``plan.SERVING_SLOS``), which the capacity plan sizes for."""
    from accelboard.alerts.threshold_services import serving_slo_set  # noqa: PLC0415 - alerts imports benchmarks
    from accelboard.benchmarks.models import Model  # noqa: PLC0415

    for team, model, p99_ms in plan.SERVING_SLOS:
        serving_slo_set(
            team=teams[team],
            model=Model.objects.get(name=model),
            variant=None,
            p99_latency_ms=p99_ms,
            min_tokens_per_s=None,
        )
    return {"serving_slos": len(plan.SERVING_SLOS)}


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


def _password_hashes(usernames: list[str]) -> dict[str, str]:
    """Each demo user's password hash, computed two at a time (PBKDF2 releases the GIL; the
    hasher's full work factor is kept, so the logins are as slow to attack as any)."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    with ThreadPoolExecutor(max_workers=2) as pool:
        hashes = pool.map(lambda name: make_password(plan.demo_password(name)), usernames)
        return dict(zip(usernames, hashes, strict=True))


def _people(result: DemoLoad, hashes: dict[str, str] | None) -> tuple[dict[str, Team], dict[str, Any]]:
    teams: dict[str, Team] = {}
    users: dict[str, Any] = {}
    # The rows first, with their hashes made in parallel; ``user_create`` then finds each one.
    User = get_user_model()
    User.objects.bulk_create(
        [
            User(username=name, password=password, email=f"{name}@demo.accelboard.invalid")
            for name, password in (hashes or _password_hashes(demo_usernames())).items()
        ],
        ignore_conflicts=True,
    )
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
    get_user_model().objects.filter(pk=admin.pk).update(is_staff=True, is_superuser=True)
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


def _merged(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[start, end) windows, sorted, overlapping or touching ones merged, empty ones dropped. Pure."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(w for w in windows if w[1] > w[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _inside(epochs: np.ndarray, windows: list[tuple[int, int]]) -> np.ndarray:
    """Which of ``epochs`` fall in any of the [start, end) ``windows``. Pure."""
    inside = np.zeros(len(epochs), dtype=bool)
    for start, end in windows:
        inside |= (epochs >= start) & (epochs < end)
    return inside


def _minute_rollups_copy(
    data: list[generator.HostTelemetry],
    gpus: list[list[int]],
    host_ids: list[int],
    low: int,
    high: int,
    raw_windows: list[tuple[int, int]],
    table: str = "fleet_telemetryrollup",
    *,
    host_table: str | None = None,
    types: list[list[int]] | None = None,
) -> tuple[int, int]:
    """The samples in [low, high) outside ``raw_windows`` as minute rollups
    (``accelboard.demo.rollups``), a UTC day at a time across the fleet in bucket order, binary
    COPY into ``table`` (the minute rollups, or a fresh copy of them: ``accelboard.demo.swap``).
    With ``host_table`` (and each GPU's accelerator type in ``types``) their hour rollups go into
    ``table`` too and the host rollups of both into ``host_table``, as the refresh computes them.
    Returns (minute rows, hour and host rows)."""
    streams: dict[tuple[str, tuple[tuple[str, str], ...], bool], list[bytes]] = {}

    def add(target: str, layout: tuple[tuple[str, str], ...], parts: list[rollups.MinuteRows]) -> int:
        full, bare = rollups.copy_tuples(parts, layout)
        streams.setdefault((target, layout, True), []).append(full)
        streams.setdefault((target, layout, False), []).append(bare)
        return sum(part.rows for part in parts)

    minutes = derived = 0
    # Whole UTC days (whole hours): an hour's minutes are all in one day's parts.
    bounds = sorted({low, high, *range(low - low % generator.DAY + generator.DAY, high, generator.DAY)})
    for day_low, day_high in itertools.pairwise(bounds):
        parts, kinds = [], []
        for host_index, (host, gpu_ids, host_id) in enumerate(zip(data, gpus, host_ids, strict=True)):
            a, b = np.searchsorted(host.epochs, [day_low, day_high]).tolist()
            if a >= b:
                continue
            # From the sample before the span, so the span's first energy delta has its neighbour.
            first = max(a - 1, 0)
            epochs = host.epochs[first:b]
            keep = ~_inside(epochs, raw_windows)
            keep[: a - first] = False
            if not keep.any():
                continue
            for row_index, gpu_id in enumerate(gpu_ids):
                parts.append(
                    rollups.minute_rows(
                        epochs=epochs,
                        host_id=host_id,
                        accelerator_id=gpu_id,
                        values={
                            name: host.columns[name][row_index, first:b] for name in TELEMETRY_COLUMNS[3:]
                        },
                        throttle_mask=THROTTLE_MASK,
                        max_counter_gap_s=MAX_COUNTER_GAP_S,
                        keep=keep,
                    )
                )
                kinds.append(types[host_index][row_index] if types else 0)
        minutes += add(table, rollups.MINUTE_COLUMNS, parts)
        if host_table is not None:
            hours = [rollups.hour_rows(part) for part in parts]
            derived += add(table, rollups.MINUTE_COLUMNS, hours)
            derived += add(host_table, rollups.HOST_COLUMNS, [rollups.host_rows(parts, kinds)])
            derived += add(host_table, rollups.HOST_COLUMNS, [rollups.host_rows(hours, kinds)])
    connection.ensure_connection()
    with connection.connection.cursor() as cursor:
        for (target, layout, energy), chunks in streams.items():
            if not any(chunks):
                continue
            columns = [name for name, _ in layout if energy or name != "energy_j"]
            statement = f"COPY {target} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"
            with cursor.copy(statement) as copy:
                for chunk in rollups.copy_stream(iter(chunks)):
                    copy.write(chunk)
    return minutes, derived


def _telemetry_rows(
    data: list[generator.HostTelemetry],
    gpus: list[list[int]],
    host_ids: list[int],
    spans: list[list[tuple[int, int]]],
) -> Iterator[tuple[Any, ...]]:
    """Rows in TELEMETRY_COLUMNS order, host by host, each host's [a, b) sample index spans."""
    names = TELEMETRY_COLUMNS[3:]
    for host, gpu_ids, host_id, host_spans in zip(data, gpus, host_ids, spans, strict=True):
        for a, b in host_spans:
            times = [datetime.fromtimestamp(epoch, UTC) for epoch in host.epochs[a:b].tolist()]
            for row_index, gpu_id in enumerate(gpu_ids):
                columns = [host.columns[name][row_index, a:b].tolist() for name in names]
                yield from zip(times, repeat(host_id), repeat(gpu_id), *columns)


def _telemetry(
    config: generator.DemoConfig,
    hosts: list[generator.HostPlan],
    data: list[generator.HostTelemetry],
    gpus: dict[str, Accelerator],
    host_ids: dict[str, int],
    *,
    low: int,
    high: int,
    raw_windows: list[tuple[int, int]],
) -> dict[str, int]:
    """The samples in [low, high) epoch seconds: those in ``raw_windows`` as raw samples rolled up
    by the ingest path's refresh, the others straight into the minute rollups with their hour and
    host rollups (``accelboard.demo.rollups``, the refresh's arithmetic)."""
    if high <= low:
        return {}
    gpu_ids = [[gpus[gpu.uuid].pk for gpu in host.gpus] for host in hosts]
    ids = [host_ids[host.hostname] for host in hosts]
    windows = [(max(low, a), min(high, b)) for a, b in raw_windows if min(high, b) > max(low, a)]
    counts: dict[str, int] = {}
    # The hours and hosts of these minutes too, as the refresh would compute them (numpy, copied);
    # the refresh of each raw window below recomputes the hours and host buckets it touches.
    direct, derived = _minute_rollups_copy(
        data,
        gpu_ids,
        ids,
        low,
        high,
        windows,
        host_table="fleet_hostrollup",
        types=[[gpus[gpu.uuid].accelerator_type_id for gpu in host.gpus] for host in hosts],
    )
    if direct:
        counts["minute_rollups_from_samples"] = direct
        counts["hour_and_host_rollups"] = derived
    counts.update(_telemetry_raw(data, gpu_ids, ids, high=high, windows=windows, raw_windows=raw_windows))
    return counts


def _telemetry_raw(
    data: list[generator.HostTelemetry],
    gpu_ids: list[list[int]],
    ids: list[int],
    *,
    high: int,
    windows: list[tuple[int, int]],
    raw_windows: list[tuple[int, int]],
) -> dict[str, int]:
    """The samples in ``windows`` (clipped to the range, before ``high``) as raw samples rolled
    up by the ingest path's refresh."""
    counts: dict[str, int] = {}
    if not windows:
        return counts
    spans: list[list[tuple[int, int]]] = []
    first = high
    for host in data:
        host_spans = []
        for start, end in windows:
            a, b = np.searchsorted(host.epochs, [start, end]).tolist()
            # The sample before a raw window, where it went into the minute rollups: the window's
            # first energy delta needs it, as ingest's refresh would have it.
            if a > 0 and not _inside(host.epochs[a - 1 : a], raw_windows).any():
                a -= 1
            if a < b:
                host_spans.append((a, b))
                first = min(first, int(host.epochs[a]))
        spans.append(host_spans)
    telemetry_partitions_ensure(
        start=datetime.fromtimestamp(first, UTC), end=datetime.fromtimestamp(high - 1, UTC)
    )
    counts["telemetry_samples"] = telemetry_copy(rows=_telemetry_rows(data, gpu_ids, ids, spans))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE fleet_telemetrysample")
    for start, end in windows:
        refresh = telemetry_rollups_refresh(
            start=datetime.fromtimestamp(start, UTC), end=datetime.fromtimestamp(end, UTC)
        )
        counts["rollups_from_raw"] = counts.get("rollups_from_raw", 0) + refresh.rows
    return counts


def _telemetry_swapped(
    hosts: list[generator.HostPlan],
    data: list[generator.HostTelemetry],
    gpus: dict[str, Accelerator],
    host_ids: dict[str, int],
    *,
    low: int,
    high: int,
    raw_windows: list[tuple[int, int]],
    live_from: int,
) -> dict[str, int]:
    """The older samples in [low, high) as ``_telemetry`` stores them, without writing millions
    of rows into the tables the pages read (``accelboard.demo.swap``): their minute rollups, and
    their hour and host rollups with the refresh's arithmetic (``accelboard.demo.rollups``), go
    into fresh copies of the rollup tables, which take the live tables' rows and place in a
    short swap. The live
    rows from ``live_from`` on are copied during the swap (the live fleet's rollups may change
    them until then). The raw windows among these days come last, through the ingest path."""
    gpu_ids = [[gpus[gpu.uuid].pk for gpu in host.gpus] for host in hosts]
    ids = [host_ids[host.hostname] for host in hosts]
    windows = [(max(low, a), min(high, b)) for a, b in raw_windows if min(high, b) > max(low, a)]
    counts: dict[str, int] = {}
    with transaction.atomic():
        fresh = swap.fresh_tables_create(cutoff=datetime.fromtimestamp(live_from, UTC))
        minute_table, host_table = (fresh.fresh(table) for table in swap.TABLES)
        counts["minute_rollups_from_samples"], counts["hour_and_host_rollups"] = _minute_rollups_copy(
            data,
            gpu_ids,
            ids,
            low,
            high,
            windows,
            table=minute_table,
            host_table=host_table,
            types=[[gpus[gpu.uuid].accelerator_type_id for gpu in host.gpus] for host in hosts],
        )
        counts["rollups_of_recent_days"] = swap.fresh_rows_copy(fresh)
        swap.fresh_indexes_build(fresh)
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {minute_table}, {host_table}")
    # Committed (and synced) above; the pages wait only for this short transaction.
    with transaction.atomic():
        counts["rollups_of_recent_days"] += swap.fresh_swap_in(fresh)
    with transaction.atomic():
        counts.update(_telemetry_raw(data, gpu_ids, ids, high=high, windows=windows, raw_windows=raw_windows))
    return counts


def _last_state(
    hosts: list[generator.HostPlan], data: list[generator.HostTelemetry], gpus: dict[str, Accelerator]
) -> None:
    """The live grid reads each GPU's newest sample from ``last_state`` (as the ingest path keeps it)."""
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
