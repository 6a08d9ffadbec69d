"""``accelboard token create|list|revoke``: API tokens for scripts, agents and first set-up.

``create`` prints only the token on stdout, so a script can capture it
(``TOKEN=$(accelboard token create --team ml --kind ingest)``); everything else goes to stderr.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accelboard.api.choices import TokenKind
from accelboard.api.selectors import token_list
from accelboard.api.services import token_create, token_revoke
from accelboard.core.models import Team


class Command(BaseCommand):
    help = "Create, list or revoke API tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="Create a token and print it once")
        create.add_argument("--team", required=True, help="Team slug")
        create.add_argument("--kind", required=True, help=f"One of: {', '.join(TokenKind.values)}")
        create.add_argument("--name", default="", help="What the token is for")
        listing = actions.add_parser("list", help="List a team's tokens (prefixes only)")
        listing.add_argument("--team", required=True, help="Team slug")
        revoke = actions.add_parser("revoke", help="Revoke a token by its 8-character prefix")
        revoke.add_argument("prefix")

    def _team(self, slug: str) -> Team:
        team = Team.objects.filter(slug=slug).first()
        if team is None:
            known = ", ".join(Team.objects.values_list("slug", flat=True)) or "none yet"
            raise CommandError(f"unknown team {slug!r} (teams: {known})", returncode=2)
        return team

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "create":
            team = self._team(options["team"])
            if options["kind"] not in TokenKind.values:
                raise CommandError(
                    f"unknown kind {options['kind']!r}: use one of {', '.join(TokenKind.values)}",
                    returncode=2,
                )
            row, token = token_create(team=team, kind=options["kind"], name=options["name"])
            self.stderr.write(
                f"Created {row.kind} token {row.prefix}… for team {team.slug}; it is shown once:"
            )
            self.stdout.write(token)
        elif action == "list":
            team = self._team(options["team"])
            for row in token_list(team_id=team.pk):
                state = f"revoked {row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "active"
                used = f"{row.last_used_at:%Y-%m-%d %H:%M}" if row.last_used_at else "never"
                self.stdout.write(f"{row.prefix}  {row.kind:<10}  {state:<24}  last used {used}  {row.name}")
        else:
            revoked = token_revoke(prefix=options["prefix"])
            if revoked is None:
                raise CommandError(f"no token with prefix {options['prefix']!r}", returncode=2)
            self.stderr.write(f"Revoked token {revoked.prefix}… of team {revoked.team.slug}.")
