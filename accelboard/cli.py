"""The ``accelboard`` command: Django's management commands with accelboard's settings.

``accelboard demo``, ``accelboard token create ...``, ``accelboard migrate``: every management
command is reachable; ``accelboard parse`` and ``accelboard upload`` run without Django. Configuration errors are printed as one line naming the variable, exit 2.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    if len(argv) > 1 and argv[1] == "parse":
        # Before Django: loading settings would start the embedded PostgreSQL, and parsing needs none.
        from accelboard.importers.cli import main as parse_main

        # Profiler traces are summarised by the profiles app's analysis and its HTA-style analyses
        # (pure, no Django either), which the importers, below it, are handed here.
        from accelboard.profiles.hta import profile_summary

        return parse_main(argv[2:], profile_summary=profile_summary)
    if len(argv) > 1 and argv[1] == "upload":
        # A CI job's HTTP client, its own package (uploader/): no settings, no database.
        try:
            from accelboard_upload.cli import main as upload_main
        except ImportError:
            print("accelboard upload: install the upload client: pip install ./uploader", file=sys.stderr)
            return 2
        return upload_main(argv[2:])
    if len(argv) > 1 and argv[1] == "detect":
        # Before Django, like parse: change detection on a file needs no settings or database.
        from accelboard.alerts.detect_cli import main as detect_main

        return detect_main(argv[2:])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")
    argv[0] = "accelboard"
    from accelboard.env import ConfigError, report_settings_problems_as_checks

    if len(argv) > 1 and argv[1] == "check":
        # `check` reports every unsafe production value with the other checks, not only the first.
        report_settings_problems_as_checks()
    try:
        from django.core.management import execute_from_command_line

        execute_from_command_line(argv)
    except ConfigError as exc:
        print(f"accelboard: configuration error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        # A database that cannot be reached (no server, a database or role that does not exist, a
        # wrong password) is a configuration error too: one line naming DATABASE_URL, no traceback.
        reason = _connection_failure(exc)
        if reason is None:
            raise
        print(f"accelboard: cannot connect to the database of DATABASE_URL: {reason}", file=sys.stderr)
        return 2
    return 0


def _connection_failure(exc: BaseException) -> str | None:
    """The server's reason when ``exc`` is a failure to connect to PostgreSQL, else None."""
    from django.db import OperationalError

    if not isinstance(exc, OperationalError):
        return None
    text = str(exc).strip()
    if not text.startswith("connection failed:") and "connection to server" not in text:
        return None  # a statement that failed on a live connection: its traceback is the news
    # psycopg's message: 'connection failed: connection to server at "host", port N failed:
    # FATAL:  database "x" does not exist' (passwords never appear in it).
    return " ".join(text.removeprefix("connection failed:").split())


if __name__ == "__main__":
    sys.exit(main())
