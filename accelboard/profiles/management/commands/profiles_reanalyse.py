"""``manage.py profiles_reanalyse [--run ID] [--dry-run]``: re-derive stored profiles' verdicts.

Profiles stored by older verdict rules (``Profile.analysis_version`` below ``ANALYSIS_VERSION``)
keep their old verdicts until this runs. Each profile (or run ``ID``'s only) is re-derived by
``services.profile_reanalyse``: from its raw files when they were kept, else its verdict and
findings from the stored breakdown. Prints one line per changed verdict and a count; running it
again changes nothing. ``--dry-run`` reports without writing.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from accelboard.profiles.models import Profile
from accelboard.profiles.services import ProfileRejected, profile_reanalyse


class Command(BaseCommand):
    help = "Re-derive stored profiles' verdicts by the current rules; prints how many changed."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--run", type=int, metavar="ID", help="only the profile of this run (its id)")
        parser.add_argument("--dry-run", action="store_true", help="report what would change, write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        profiles = Profile.objects.select_related("run").order_by("pk")
        if options["run"] is not None:
            profiles = profiles.filter(run_id=options["run"])
            if not profiles.exists():
                raise CommandError(f"--run: run {options['run']} has no profile")
        dry = options["dry_run"]
        counts = {"profiles": 0, "changed": 0, "raw": 0, "stored": 0, "failed": 0}
        for profile in profiles.iterator(chunk_size=100):
            counts["profiles"] += 1
            try:
                outcome = profile_reanalyse(profile=profile, dry_run=dry)
            except ProfileRejected as exc:
                counts["failed"] += 1
                self.stderr.write(f"run {profile.run_id}: its raw files cannot be read again: {exc.message}")
                continue
            counts[outcome.source] += 1
            if outcome.changed:
                counts["changed"] += 1
                self.stdout.write(
                    f"run {outcome.run_id}: {outcome.kind_before} -> {outcome.kind_after} "
                    f"(version {outcome.version_before}, from the {'raw files' if outcome.source == 'raw' else 'stored breakdown'}): "
                    f"{outcome.headline_after}"
                )
        verb = "would change" if dry else "changed"
        self.stdout.write(
            f"{counts['profiles']} profile(s) re-derived{' (dry run, nothing written)' if dry else ''}: "
            f"{counts['changed']} verdict(s) {verb}; {counts['raw']} from raw files, "
            f"{counts['stored']} from the stored breakdown, {counts['failed']} failed"
        )
        if counts["failed"]:
            raise CommandError(f"{counts['failed']} profile(s) could not be re-derived", returncode=1)
