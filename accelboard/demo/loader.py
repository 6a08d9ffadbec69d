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
3. Paths: ``core.services`` for teams and people, ``fleet.host_services.host_register`` for hosts and
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

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.db import connection, connections, transaction

from accelboard.core.choices import JobStatus
from accelboard.core.models import JobRun, Membership, Team
from accelboard.core.services import job_run_record
from accelboard.costs.models import AcceleratorPrice, ElectricityPrice
from accelboard.fleet.catalogue_services import accelerator_types_sync
from accelboard.fleet.models import AcceleratorType, Host

from . import (
    attribution_load,
    canary,
    fleet_load,
    forked,
    generator,
    history_generator,
    history_load,
    plan,
    swap,
    telemetry_load,
    training,
)
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


def demo_usernames() -> list[str]:
    names = [f"{team['short']}-{role}" for team in plan.TEAMS for role in plan.TEAM_ROLES]
    return [*names, plan.ADMIN_USERNAME, plan.OUTSIDER_USERNAME]


def demo_fleet_reset() -> list[str]:
    """Truncate the tables the demo fills and delete the demo users; return the tables truncated."""
    tables = ["fleet_telemetrysample", "fleet_telemetrypartial", "fleet_gpuattribution"]
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
        hashes = pool.submit(fleet_load.password_hashes, demo_usernames())
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
        raw_windows = telemetry_load.windows_merged(
            [(raw_start, end), (events.throttle_start, min(events.throttle_end, end))]
        )
        live_from = max(recent_start, raw_start)

    def people() -> dict[str, int]:
        accelerator_types_sync()
        state["teams"], state["users"] = fleet_load.people_create(
            result.logins, prepared.hashes if prepared else fleet_load.password_hashes(demo_usernames())
        )
        return {"teams": len(state["teams"]), "users": len(state["users"])}

    def fleet() -> dict[str, int]:
        state["sites"] = fleet_load.sites_and_prices_create(config)
        state["gpus"], state["host_ids"] = fleet_load.hosts_create(
            config, hosts, state["teams"], state["sites"]
        )
        return {
            "sites": len(state["sites"]),
            "hosts": len(hosts),
            "accelerators": len(state["gpus"]),
            "accelerator_prices": AcceleratorPrice.objects.count(),
            "electricity_prices": ElectricityPrice.objects.count(),
        }

    def benchmarks() -> dict[str, int]:
        runs = history_generator.benchmark_runs(config, hosts)
        state["series"], counts = history_load.benchmarks_write(
            runs, hosts, state["teams"], state["users"], state["host_ids"]
        )
        counts.update(history_load.objectives_write(state["teams"]))
        counts.update(history_load.run_costs_write(config))
        state["runs"] = runs
        return counts

    def telemetry_recent() -> dict[str, int]:
        _bulk_tables_truncate_if_empty()
        if prepared is not None:
            data = prepared.telemetry
        else:
            data = [generator.host_telemetry(config, host, events) for host in hosts]
        state["telemetry"] = data
        counts = telemetry_load.telemetry_write(
            config,
            hosts,
            data,
            state["gpus"],
            state["host_ids"],
            low=recent_start,
            high=end,
            raw_windows=raw_windows,
        )
        telemetry_load.last_state_write(hosts, data, state["gpus"])
        return counts

    def telemetry_older() -> dict[str, int]:
        if live_from is None:
            counts = _stage(
                lambda: telemetry_load.telemetry_write(
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
            counts = telemetry_load.telemetry_swapped_write(
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
        return {
            "inference_metrics": history_load.serving_write(
                config, hosts, events, state["teams"], state["host_ids"]
            )
        }

    # Before the site is served: people, the fleet and the current days' figures.
    steps.run("people", _stage(people))
    steps.run("fleet", _stage(fleet))
    steps.run("telemetry_recent", _stage(telemetry_recent, work_mem=True))
    steps.run(
        "costs_recent", _stage(lambda: history_load.day_costs_write(config, low=recent_start, high=end))
    )

    # While it serves: the older telemetry (in a child process, ``accelboard.demo.forked``) beside
    # the runs, serving metrics, drift and alerts. Its own transactions: the fresh rollup tables
    # commit before they are swapped in.
    def telemetry_and_costs_older() -> dict[str, int]:
        counts = telemetry_older()
        # Every day's costs need that day's rollups; the recent days' were computed before serving.
        counts.update(
            _stage(
                lambda: history_load.older_day_costs_write(low=config.telemetry_start, high=recent_start)
            )()
        )
        return counts

    older = (
        telemetry_and_costs_older if connection.in_atomic_block else forked.start(telemetry_and_costs_older)
    )

    def telemetry_chain() -> None:
        steps.run("telemetry_older", older)
        state.pop("telemetry", None)

    # The telemetry chain lets go of the samples when it is done; who held each GPU needs them.
    telemetry = state["telemetry"]

    def attribution() -> dict[str, int]:
        return attribution_load.attribution_write(
            config=config,
            hosts=hosts,
            telemetry=telemetry,
            team_ids={slug: team.pk for slug, team in state["teams"].items()},
            host_ids=state["host_ids"],
        )

    def history_chain() -> None:
        steps.run("attribution", _stage(attribution))
        steps.run("benchmarks", _stage(benchmarks))
        steps.run("serving", _stage(serving))
        steps.run("drift", _stage(lambda: history_load.drift_write(config, state["teams"])))
        # After the runs, as the per-run check would have done as each night's runs landed.
        steps.run("alerts", _stage(history_load.alerts_check))

    _branches(telemetry_chain, history_chain)
    # The canaries before the costs: their serving costs and their pods' cost by model count them.
    steps.run("canary", _stage(lambda: canary.canary_write(config, state["teams"])))
    steps.run("costs", _stage(lambda: history_load.serving_costs_write(config)))
    admin = get_user_model().objects.get(username=plan.ADMIN_USERNAME)
    steps.run("allocation", _stage(lambda: history_load.allocation_write(config, state["teams"], admin)))
    steps.run("training", _stage(lambda: training.training_write(config, state["teams"], hosts)))
    result.manifest = history_load.manifest_with_ids(config, hosts, state["runs"], events, state["series"])
