"""``accelboard demo_fleet``: load the deterministic demo fleet (thin edge over ``accelboard.demo``).

Same ``--seed``, sizes and ``--now`` give identical data. Without ``--reset`` a database that holds
the demo already is left alone (exit 0, says so). Bad flags exit 2 naming the flag.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accelboard.demo import generator, loader, plan
from accelboard.embedded import accelboard_home


def _bounded(flag: str, low: int, high: int) -> Any:
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a whole number, not {value!r}") from None
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"{flag} must be between {low} and {high}, not {number}")
        return number

    return parse


def _moment(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--now must be an ISO 8601 time with a timezone (2026-11-29T22:00:00Z), not {value!r}"
        ) from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"--now must carry a timezone (Z or +hh:mm), not {value!r}")
    return moment


# How long --after waits: as long as accelboard demo gives a step (its migrations).
_AFTER_TIMEOUT_S = 3600

# DemoConfig names its fields in errors; the user typed flags.
_FLAGS = {
    "days_runs": "--days-runs",
    "days_telemetry": "--days-telemetry",
    "telemetry_interval_s": "--telemetry-interval",
    "serving_interval_s": "--serving-interval",
}


class Command(BaseCommand):
    help = "Load a deterministic demo fleet: teams, hosts, GPUs, telemetry, benchmark runs, prices."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seed", type=_bounded("--seed", 0, 2**32 - 1), default=7, help="default 7")
        parser.add_argument(
            "--hosts",
            type=_bounded("--hosts", 1, 500),
            default=plan.DEFAULT_HOSTS,
            help=f"number of hosts (default {plan.DEFAULT_HOSTS}: every template once)",
        )
        parser.add_argument("--days-runs", type=_bounded("--days-runs", 10, 3650), default=90)
        parser.add_argument(
            "--days-telemetry",
            type=_bounded("--days-telemetry", 1, 60),
            default=generator.DemoConfig.days_telemetry,
            help=f"days of per-GPU telemetry and of costs (default {generator.DemoConfig.days_telemetry})",
        )
        parser.add_argument(
            "--telemetry-interval",
            type=_bounded("--telemetry-interval", 10, 3600),
            default=generator.DEFAULT_TELEMETRY_INTERVAL_S,
            help=f"seconds between samples (default {generator.DEFAULT_TELEMETRY_INTERVAL_S}: ~3.8M samples over the "
            "default 31 days; a sample per minute goes straight into the minute rollups, only the last "
            f"{loader.RAW_HOURS} hours stay raw; 180 loads a third of them)",
        )
        parser.add_argument(
            "--serving-interval", type=_bounded("--serving-interval", 60, 3600), default=300, help="seconds"
        )
        parser.add_argument("--now", type=_moment, default=None, help="pin 'now' (ISO 8601 with timezone)")
        parser.add_argument(
            "--manifest",
            type=Path,
            default=None,
            help="where to write the manifest of injected events (default $ACCELBOARD_HOME/demo_manifest.json)",
        )
        parser.add_argument("--reset", action="store_true", help="truncate the demo's tables and rebuild")
        parser.add_argument(
            "--progress",
            type=Path,
            default=None,
            help="a JSON file to keep the steps' state in (accelboard demo and its loading banner read it)",
        )

        parser.add_argument(
            "--after",
            type=Path,
            default=None,
            help="compute what needs no database first, then wait for this file to exist before "
            "touching the database (accelboard demo creates it once the migrations are in)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            config = generator.DemoConfig(
                now=options["now"] or datetime.now(UTC),
                seed=options["seed"],
                hosts=options["hosts"],
                days_runs=options["days_runs"],
                days_telemetry=options["days_telemetry"],
                telemetry_interval_s=options["telemetry_interval"],
                serving_interval_s=options["serving_interval"],
            )
        except ValueError as exc:
            message = str(exc)
            for field, flag in _FLAGS.items():
                message = message.replace(f"{field}:", f"{flag}:")
            raise CommandError(message, returncode=2) from None
        manifest_path = options["manifest"] or accelboard_home() / "demo_manifest.json"
        prepared = None
        if options["after"] is not None:
            prepared = loader.demo_fleet_prepare(config)
            deadline = time.monotonic() + _AFTER_TIMEOUT_S
            while not options["after"].exists():
                if time.monotonic() > deadline:
                    raise CommandError(
                        f"--after: {options['after']} did not appear within {_AFTER_TIMEOUT_S} s"
                    )
                time.sleep(0.1)
        try:
            result = loader.demo_fleet_load(
                prepared=prepared,
                config=config,
                reset=options["reset"],
                manifest_path=manifest_path,
                progress=lambda line: self.stdout.write(f"demo_fleet: {line}"),
                progress_path=options["progress"],
            )
        except loader.DemoAlreadyLoaded as exc:
            self.stdout.write(f"demo_fleet: nothing to do: {exc}")
            return
        self.stdout.write(self.style.SUCCESS(f"demo_fleet: loaded in {result.seconds['total']:.1f} s"))
        width = max(len(name) for name in result.rows)
        for name, count in result.rows.items():
            self.stdout.write(f"  {name:<{width}}  {count:>12,}")
        self.stdout.write(f"manifest of injected events: {result.manifest_path}")
        self.stdout.write("demo logins (username / password / role):")
        for login in result.logins:
            self.stdout.write(
                f"  {login['username']:<20} {login['password']:<26} {login['role']:<12} {login['team']}"
            )
