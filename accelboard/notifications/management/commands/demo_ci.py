"""``accelboard demo_ci --server URL``: the demo's inboxes and its simulated CI.

1. Subscribes every team lead to all alerts of their teams (immediately, one email per commit);
   alerts already open are not mailed, subscribing is not a backlog.
2. After ``--after`` seconds, posts regressed benchmark runs of one team (``--team``) through the
   server's API with that team's ingest token (``--token``, default ``$ACCELBOARD_TOKEN``), until
   the detector opens an alert (``accelboard.notifications.simulated_ci``). The worker mails it to
   the subscribed leads. Each start regresses the newest run again, so a reused demo gets a new
   regression every time (``--reset`` starts from the generated history).
3. With ``--stay`` it then waits until stopped, for supervisors that treat a service that exits
   as a failure.

``accelboard demo`` runs it in the background once the worker is up (``accelboard.demo.ci``: a
fresh ingest token; ``--wait-for-data``, as the demo data may still be loading), with the outbox as
the email backend: a newcomer finds the leads' alert email at ``/notifications/outbox/`` minutes
after the start.
"""

from __future__ import annotations

import os
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accelboard.core.access import EVERY_TEAM
from accelboard.core.selectors import team_get_visible
from accelboard.notifications import selectors, services
from accelboard.notifications.simulated_ci import SimulatedCIError, regression_post


class Command(BaseCommand):
    help = "Subscribe the team leads and post a regressed benchmark run through the API (the demo)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--server", required=True, help="The accelboard the runs are posted to")
        parser.add_argument("--team", default="llm-serving", help="Slug of the team whose CI regresses")
        parser.add_argument(
            "--token",
            default=os.environ.get("ACCELBOARD_TOKEN", ""),
            help="The team's ingest token ($ACCELBOARD_TOKEN)",
        )
        parser.add_argument("--after", type=float, default=120.0, help="Seconds to wait before posting")
        parser.add_argument("--interval", type=float, default=20.0, help="Seconds between posted runs")
        parser.add_argument("--max-runs", type=int, default=4, help="Runs to post at most")
        parser.add_argument("--ci-url", default="", help="A CI job URL to record with the runs")
        parser.add_argument("--no-subscribe", action="store_true", help="Do not subscribe the team leads")
        parser.add_argument(
            "--wait-for-data",
            type=float,
            default=0.0,
            help="Seconds to wait for a benchmark run to copy (the demo's data may still be loading)",
        )
        parser.add_argument("--stay", action="store_true", help="Keep running (idle) once done")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["after"] < 0 or options["interval"] < 0 or options["max_runs"] < 1:
            raise CommandError("--after and --interval must be >= 0 and --max-runs >= 1", returncode=2)
        # An operator's command: any team, by slug.
        team = team_get_visible(scope=EVERY_TEAM, slug=options["team"])
        if team is None:
            raise CommandError(f"--team: no team {options['team']!r}", returncode=2)
        token = options["token"]
        if not token:
            raise CommandError(
                f"--token (or ACCELBOARD_TOKEN): an ingest token of {team.slug}; create one with "
                f"`accelboard token create --team {team.slug} --kind ingest`",
                returncode=2,
            )
        if not options["no_subscribe"]:
            created = services.subscriptions_for_team_leads()
            self.stdout.write(
                f"subscribed the team leads to their teams' alerts ({created} new subscriptions)"
            )
        template = selectors.simulated_ci_template(team_slug=team.slug)
        waited_until = time.monotonic() + max(0.0, options["wait_for_data"])
        while template is None and time.monotonic() < waited_until:
            time.sleep(5.0)
            template = selectors.simulated_ci_template(team_slug=team.slug)
        if template is None:
            raise CommandError(f"--team: {team.slug} has no benchmark run with a latency result to copy")
        self.stdout.write(
            f"simulated CI: a slower commit of {template.model} {template.variant} in {options['after']:.0f} s"
        )
        self.stdout.flush()
        time.sleep(options["after"])

        def say(line: str) -> None:
            self.stdout.write(line)
            self.stdout.flush()

        try:
            posted, alerts = regression_post(
                server=options["server"],
                token=token,
                template=template,
                alerted=lambda run_ids: selectors.alerts_opened_on_runs(run_ids=run_ids),
                interval_s=options["interval"],
                max_runs=options["max_runs"],
                ci_url=options["ci_url"],
                say=say,
            )
        except SimulatedCIError as exc:
            raise CommandError(f"simulated CI: {exc}") from None
        if alerts:
            self.stdout.write(
                f"simulated CI: alerts {', '.join(map(str, alerts))} opened; the leads' email follows"
            )
        else:
            self.stdout.write(f"simulated CI: {len(posted)} runs posted, no alert opened (yet)")
        self.stdout.flush()
        while options["stay"]:
            time.sleep(3600)
