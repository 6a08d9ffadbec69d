"""``accelboard demo``: the whole product on one machine, with demo data, in one command.

Thin edge over ``accelboard.demo.runner``: it reads the database and broker the settings
resolved (with no ``DATABASE_URL`` that means the embedded PostgreSQL, started here once and
held by this process until it exits) and hands them to the supervisor as plain values.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accelboard.demo import runner


def _port(value: str) -> int:
    import argparse

    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port must be a number, not {value!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"--port must be between 1 and 65535, not {port}")
    return port


def demo_logins() -> list[str]:
    """The accounts the demo fleet creates, as lines to print under the URL.

    Built from the demo plan (``accelboard.demo.plan``), the same data ``demo_fleet`` loads, so
    the two cannot disagree; a plan without those names falls back to pointing at its summary.
    """
    try:
        from accelboard.demo import plan

        teams = [team["short"] for team in plan.TEAMS]
        roles = list(plan.TEAM_ROLES)
        admin, outsider = plan.ADMIN_USERNAME, plan.OUTSIDER_USERNAME
        example = f"{admin} / {plan.demo_password(admin)}"
    except (ImportError, AttributeError, KeyError, TypeError):
        return ["demo logins: see the demo_fleet summary above"]
    lines = [f"demo logins (password: demo-<username>, e.g. {example}):"]
    lines.append(f"  {admin} (staff)   {outsider} (no team)")
    for short in teams:
        lines.append("  " + "  ".join(f"{short}-{role}" for role in roles))
    return lines


def _database_state() -> tuple[bool, bool]:
    """(migrations to apply, demo data to load), read in this process: a second start spawns
    neither ``migrate`` nor ``demo_fleet``, each a Django start of its own."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from accelboard.core.choices import JobStatus
    from accelboard.core.models import JobRun

    executor = MigrationExecutor(connection)
    pending = bool(executor.migration_plan(executor.loader.graph.leaf_nodes()))
    if pending and "core_jobrun" not in connection.introspection.table_names():
        return True, True
    # The job the loader records once every stage is in (``accelboard.demo.loader.JOB_NAME``).
    loaded = JobRun.objects.filter(name="demo_fleet", status=JobStatus.SUCCEEDED).exists()
    return pending, not loaded


def _embedded_postmaster(home: Path) -> dict[str, int]:
    """The embedded server's postmaster pid (first line of ``postmaster.pid``), to watch."""
    try:
        return {"embedded PostgreSQL": int((home / "pgdata" / "postmaster.pid").read_text().split()[0])}
    except (OSError, ValueError, IndexError):
        return {}


class Command(BaseCommand):
    help = (
        "Run accelboard with demo data: migrate, load the demo fleet on first run, then serve the "
        "site (gunicorn) and run a Celery worker with beat until Ctrl-C."
    )
    requires_system_checks: list[str] = []  # migrate, run as the first child, checks everything

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
        parser.add_argument("--port", type=_port, default=8000, help="port to bind (default 8000)")
        parser.add_argument("--reset", action="store_true", help="rebuild the demo data from scratch")
        parser.add_argument(
            "--no-agent",
            action="store_true",
            help="do not start the live fleet (the demo hosts' simulated agents)",
        )
        parser.add_argument(
            "--no-ci",
            action="store_true",
            help="do not run the simulated CI (a slower commit a minute in, its alert mailed to the outbox)",
        )
        parser.add_argument(
            "--fleet-args",
            default=os.environ.get("ACCELBOARD_DEMO_FLEET_ARGS", ""),
            help="extra arguments for demo_fleet, as one shell-quoted string "
            "(default: $ACCELBOARD_DEMO_FLEET_ARGS)",
        )
        parser.add_argument(
            "--health-timeout",
            type=float,
            default=90.0,
            help="seconds to wait for /healthz before giving up (default 90)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            fleet_args = shlex.split(options["fleet_args"])
        except ValueError as exc:
            raise CommandError(f"--fleet-args cannot be parsed: {exc}", returncode=2) from None
        from accelboard.embedded import accelboard_home

        config = runner.DemoConfig(
            host=options["host"],
            port=options["port"],
            reset=options["reset"],
            agent=not options["no_agent"],
            ci=not options["no_ci"],
            home=accelboard_home(),
            database_url=settings.DATABASE_URL,
            broker_url=settings.CELERY_BROKER_URL,
            cwd=settings.BASE_DIR,
            health_timeout=options["health_timeout"],
            fleet_args=fleet_args,
            banner=demo_logins(),
            watch_pids=_embedded_postmaster(accelboard_home()) if settings.EMBEDDED_DATABASE else {},
            database_state=_database_state,
        )

        def say(line: str) -> None:
            self.stdout.write(line)
            self.stdout.flush()

        try:
            status = runner.demo_run(config, say=say)
        except runner.DemoError as exc:
            raise CommandError(str(exc), returncode=2) from None
        finally:
            # The embedded server is stopped by pgserver's atexit hook once this process is the
            # last holder; Django's own connection must not hold it up.
            from django.db import connections

            connections.close_all()
        if status:
            raise CommandError("the demo stopped because of the error above", returncode=status)
