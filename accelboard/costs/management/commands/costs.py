"""``accelboard costs recompute --day YYYY-MM-DD | --month YYYY-MM [--team SLUG]``.

Recomputes daily (and serving) costs in this process, replacing the days' rows: what the nightly
task does, for a day or month an operator names (after a bulk price fix, or to backfill).
"""

from __future__ import annotations

from argparse import ArgumentParser
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from accelboard.core.models import Team
from accelboard.costs.services import cost_days_compute, month_days
from accelboard.costs.serving_cost_services import serving_cost_day_compute


def _month(value: str) -> date:
    try:
        return date.fromisoformat(f"{value}-01")
    except ValueError:
        raise CommandError(f"--month: {value!r} is not YYYY-MM") from None


class Command(BaseCommand):
    help = "Recompute daily costs for a day or a month (replaces those days' rows)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        re = sub.add_parser("recompute", help="Recompute a day or a month")
        which = re.add_mutually_exclusive_group(required=True)
        which.add_argument("--day", help="YYYY-MM-DD (UTC)")
        which.add_argument("--month", help="YYYY-MM")
        re.add_argument("--team", help="Only this team's hosts (slug)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["day"]:
            try:
                days = [date.fromisoformat(options["day"])]
            except ValueError:
                raise CommandError(f"--day: {options['day']!r} is not YYYY-MM-DD") from None
        else:
            days = month_days(month=_month(options["month"]), until=timezone.now().date())
        team_id = None
        if options["team"]:
            team = Team.objects.filter(slug=options["team"]).first()
            if team is None:
                raise CommandError(f"--team: no team {options['team']!r}")
            team_id = team.pk
        results = cost_days_compute(days=days, team_id=team_id)
        serving = sum(serving_cost_day_compute(day=d) for d in days) if team_id is None else 0
        self.stdout.write(
            f"{len(days)} day(s) recomputed: {sum(r.rows for r in results)} cost row(s) "
            f"(replaced {sum(r.deleted for r in results)}), {serving} serving row(s)"
        )
