"""``accelboard email test --to ADDRESS``: send one email now, to check the mail settings.

The email goes through the configured backend at once (not through a worker), so the SMTP
server's answer is printed: exit 0 when it accepted the message, 1 when it refused it or could
not be reached, 2 for a malformed address.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accelboard.notifications.services import email_test_send


class Command(BaseCommand):
    help = "Send a test email to check the SMTP settings (SITE_URL, DEFAULT_FROM_EMAIL, EMAIL_*)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        test = actions.add_parser("test", help="Send a test email now and print the server's answer")
        test.add_argument("--to", required=True, metavar="ADDRESS", help="Where to send it")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = email_test_send(to=options["to"], requested_by="accelboard email test")
        except ValidationError as exc:
            raise CommandError(f"--to: {' '.join(exc.messages)}", returncode=2) from None
        except OSError as exc:
            raise CommandError(
                f"the test email was not sent: {type(exc).__name__}: {exc}", returncode=1
            ) from None
        self.stdout.write(done)
