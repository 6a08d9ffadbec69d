"""``accelboard team create|list``: teams without the Django shell.

``accelboard team create "Inference Platform" --slug inference`` makes a team (the slug defaults
to the name, slugified); ``accelboard team list`` prints each team's slug, name and member count.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count

from accelboard.core.access import EVERY_TEAM
from accelboard.core.selectors import team_list_visible
from accelboard.core.services import AccountError, team_add


class Command(BaseCommand):
    help = "Create or list teams."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="Create a team")
        create.add_argument("name", help='The name people read, e.g. "Inference Platform"')
        create.add_argument(
            "--slug", default="", help="Short id used by commands and URLs (default: from the name)"
        )
        create.add_argument("--description", default="")
        actions.add_parser("list", help="List the teams")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "create":
            try:
                team = team_add(
                    name=options["name"], slug=options["slug"], description=options["description"]
                )
            except AccountError as exc:
                raise CommandError(str(exc), returncode=2) from None
            self.stderr.write(f"Created team {team.name!r}; its slug:")
            self.stdout.write(team.slug)
            return
        teams = team_list_visible(scope=EVERY_TEAM).annotate(members=Count("memberships"))
        for team in teams:
            self.stdout.write(f"{team.slug:<24}  {team.members:>3} members  {team.name}")
