"""``accelboard status``: is the background pipeline keeping up? (for staff and monitoring)

Prints each queue's waiting tasks and the age of the oldest, when the per-minute beat pass last
started, and the rollup lag, each against its limit; ``--json`` prints the same as /healthz's
``pipeline``. Exit status 0 when all are within their limits, 1 when something lags (a cron job
or a monitoring agent can alert on it).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from accelboard.core.pipeline_selectors import pipeline_status


class Command(BaseCommand):
    help = "Queue depths and waits, the beat heartbeat and the rollup lag; exit 1 when lagging."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true", help="print JSON (as /healthz's pipeline)")

    def handle(self, *args: Any, **options: Any) -> None:
        status = pipeline_status()
        if options["json"]:
            self.stdout.write(json.dumps(status.as_dict(), indent=2))
        else:
            for check in status.checks:
                value = "-" if check.value is None else f"{check.value:,.1f} {check.unit}"
                limit = "" if check.limit is None else f" (limit {check.limit:,.0f} {check.unit})"
                extra = " ".join(f"{k}={v}" for k, v in check.detail.items() if v is not None)
                mark = "ok    " if check.ok else "LAGGING"
                self.stdout.write(f"{mark} {check.name:<34} {value:>12}{limit} {extra}".rstrip())
            self.stdout.write(f"pipeline: {'ok' if status.ok else 'lagging'}")
        if not status.ok:
            raise CommandError("the pipeline is lagging", returncode=1)
