"""``accelboard user create NAME --team SLUG --role lead|engineer|finance``: accounts without the
Django shell.

The password is never an argument (it would sit in the shell history and in ``ps``): it is asked
for twice on a terminal, or read from the first line of ``--password-file`` (``-`` for standard
input), and must pass the site's password validators.
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accelboard.core.access import EVERY_TEAM
from accelboard.core.choices import Role
from accelboard.core.selectors import team_get_visible, team_list_visible
from accelboard.core.services import AccountError, user_add


class Command(BaseCommand):
    help = "Create a user in a team."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        # No abbreviations: "--password SECRET" must be refused, not taken for --password-file.
        create = actions.add_parser("create", help="Create a user, member of one team", allow_abbrev=False)
        create.add_argument("username")
        create.add_argument("--team", required=True, help="Team slug (accelboard team list)")
        create.add_argument("--role", required=True, choices=Role.values)
        create.add_argument("--email", default="")
        create.add_argument("--staff", action="store_true", help="May use the admin and see every team")
        create.add_argument(
            "--password-file",
            help="Read the password from the first line of this file ('-': standard input) instead of asking",
        )

    def _password(self, source: str | None) -> str:
        if source:
            try:
                text = sys.stdin.read() if source == "-" else Path(source).read_text()
            except OSError as exc:
                raise CommandError(
                    f"cannot read the password file: {exc.strerror or exc}", returncode=2
                ) from None
            lines = text.splitlines()
            password = lines[0] if lines else ""
            if not password:
                raise CommandError("the password file's first line is empty", returncode=2)
            return password
        if not sys.stdin.isatty():
            raise CommandError(
                "no terminal to ask for the password on: give --password-file PATH (or - for stdin)",
                returncode=2,
            )
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("the two passwords differ", returncode=2)
        return first

    def handle(self, *args: Any, **options: Any) -> None:
        team = team_get_visible(scope=EVERY_TEAM, slug=options["team"])
        if team is None:
            known = (
                ", ".join(team_list_visible(scope=EVERY_TEAM).values_list("slug", flat=True)) or "none yet"
            )
            raise CommandError(f"unknown team {options['team']!r} (teams: {known})", returncode=2)
        password = self._password(options["password_file"])
        try:
            user = user_add(
                username=options["username"],
                password=password,
                team=team,
                role=options["role"],
                email=options["email"],
                is_staff=options["staff"],
            )
        except AccountError as exc:
            raise CommandError(str(exc), returncode=2) from None
        self.stderr.write(f"Created user {user.get_username()!r}, {options['role']} of team {team.slug}.")
