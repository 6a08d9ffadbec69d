"""One alert per detected change (not per run), with its triage state and evidence."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .choices import AlertKind, AlertState, DismissReason, Severity


class Alert(models.Model):
    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=16, choices=AlertKind.choices)
    severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.WARNING)
    state = models.CharField(max_length=16, choices=AlertState.choices, default=AlertState.OPEN)
    title = models.CharField(max_length=300)
    series = models.ForeignKey(
        "benchmarks.Series", null=True, blank=True, on_delete=models.CASCADE, related_name="alerts"
    )
    host = models.ForeignKey(
        "fleet.Host", null=True, blank=True, on_delete=models.CASCADE, related_name="alerts"
    )
    # What identifies "the same change": a second detector pass or worker must not open a twin.
    dedupe_key = models.CharField(max_length=200, unique=True)
    # Evidence
    first_run = models.ForeignKey(
        "benchmarks.BenchmarkRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_good_run = models.ForeignKey(
        "benchmarks.BenchmarkRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    before_mean = models.FloatField(null=True, blank=True)
    before_spread = models.FloatField(null=True, blank=True)
    after_mean = models.FloatField(null=True, blank=True)
    after_spread = models.FloatField(null=True, blank=True)
    pct_change = models.FloatField(null=True, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    # Triage
    opened_at = models.DateTimeField(db_index=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    dismissed_reason = models.CharField(max_length=16, choices=DismissReason.choices, blank=True)
    dismissed_note = models.TextField(blank=True)

    class Meta:
        ordering = ["-opened_at"]
        indexes = [models.Index(fields=["team", "state", "-opened_at"], name="alert_team_state_opened")]

    def __str__(self) -> str:
        return self.title
