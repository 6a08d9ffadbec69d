"""``accelboard allocation recompute --from YYYY-MM-DD --to YYYY-MM-DD``.

Re-applies the current attribution rules to a past period in this process: each day's
allocation rows are replaced (docs/attribution.md). An explicit action: saving new rules changes
no past day until it is recomputed.
"""

from __future__ import annotations

from argparse import ArgumentParser
from datetime import date, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from accelboard.attribution.services import allocation_days_compute

MAX_DAYS = 366


def _day(option: str, value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"{option}: {value!r} is not YYYY-MM-DD") from None


class Command(BaseCommand):
    help = "Re-apply the current attribution rules to a period (replaces those days' allocation)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        recompute = sub.add_parser("recompute", help="Recompute the allocation of [--from, --to]")
        recompute.add_argument("--from", dest="start", required=True, help="first day, YYYY-MM-DD (UTC)")
        recompute.add_argument("--to", dest="end", required=True, help="last day, YYYY-MM-DD (inclusive)")

    def handle(self, *args: Any, **options: Any) -> None:
        start, end = _day("--from", options["start"]), _day("--to", options["end"])
        if end < start:
            raise CommandError("--to: before --from")
        if (end - start).days >= MAX_DAYS:
            raise CommandError(f"--to: at most {MAX_DAYS} days at once")
        results = allocation_days_compute(
            days=[start + timedelta(days=i) for i in range((end - start).days + 1)]
        )
        versions = {r.rule_set_version for r in results}
        self.stdout.write(
            f"{len(results)} day(s) recomputed: {sum(r.gpu_days for r in results)} GPU-day(s), "
            f"{sum(r.rows for r in results)} row(s), rules version {', '.join(str(v) for v in versions)}"
        )
