"""The demo's simulated CI, as ``accelboard demo`` starts it in the background once the worker is
up: a fresh ingest token of the regressing team (the previous demo CI token revoked: a token is
shown once, so each start makes its own), then ``demo_ci`` (the leads subscribed, a slower commit
posted through the API until the detector opens an alert, mailed by the worker to the outbox).

    python -m accelboard.demo.ci --server http://127.0.0.1:8000 [--team llm-serving] [--after 60]
"""

from __future__ import annotations

import argparse
import os
import sys

TOKEN_NAME = "demo simulated CI"
# The demo data may still be loading when the worker starts: wait this long for a run to copy.
DATA_WAIT_S = 1800


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--team", default="llm-serving")
    parser.add_argument("--after", type=float, default=60.0)
    args = parser.parse_args(argv)
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")
    django.setup()
    from django.core.management import call_command

    from accelboard.api.models import ApiToken
    from accelboard.api.services import token_create, token_revoke
    from accelboard.core.models import Team

    team = Team.objects.filter(slug=args.team).first()
    if team is None:
        print(f"demo CI: no team {args.team!r}; nothing to post", file=sys.stderr)
        return 2
    for old in ApiToken.objects.filter(name=TOKEN_NAME, revoked_at__isnull=True):
        token_revoke(prefix=old.prefix)
    _, token = token_create(team=team, kind="ingest", name=TOKEN_NAME)
    call_command(
        "demo_ci",
        "--server", args.server, "--team", team.slug, "--token", token,
        "--after", str(args.after), "--wait-for-data", str(DATA_WAIT_S),
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
