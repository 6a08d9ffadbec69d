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

        return parse_main(argv[2:])
    if len(argv) > 1 and argv[1] == "upload":
        # A CI job's HTTP client: it needs neither settings nor a database either.
        from accelboard.benchmarks.upload_cli import main as upload_main

        return upload_main(argv[2:])
    if len(argv) > 1 and argv[1] == "detect":
        # Before Django, like parse: change detection on a file needs no settings or database.
        from accelboard.alerts.detect_cli import main as detect_main

        return detect_main(argv[2:])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")
    argv[0] = "accelboard"
    from accelboard.env import ConfigError

    try:
        from django.core.management import execute_from_command_line

        execute_from_command_line(argv)
    except ConfigError as exc:
        print(f"accelboard: configuration error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
