"""One alert per detected change (not per run or per metric), the metrics it moved, its triage history, expected-change marks and
the detection thresholds a team may tune.

State machine of an alert (transitions are conditional UPDATEs in services.py, each logged as an
AlertEvent):

1. open -> acknowledged (a person is on it)
2. open | acknowledged -> resolved (fixed, or the values went back to the baseline by themselves)
3. open | acknowledged -> dismissed, with a reason: false alarm, or expected (which also records
   an ExpectedChange that moves the series' baseline)
4. resolved and dismissed are final.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from accelboard.core.access import TeamScopedQuerySet

from .choices import AlertKind, AlertState, DismissReason, ExpectedScope, Severity


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
    # The minimum effect in force when the alert was raised: the false-positive rate per threshold.
    min_effect = models.FloatField(null=True, blank=True)

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-opened_at"]
        indexes = [models.Index(fields=["team", "state", "-opened_at"], name="alert_team_state_opened")]

    def __str__(self) -> str:
        return self.title


class AlertMetric(models.Model):
    """One metric a benchmark change moved: a change alert holds one row per metric of its
    configuration that moved at the same first bad run (the headline's row included).

    The alert's own evidence fields and ``series`` are its headline metric's (the worst, see
    ``severity.worst``); the detector reads these rows for each series' baseline and revert.
    """

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="metrics")
    series = models.ForeignKey("benchmarks.Series", on_delete=models.CASCADE, related_name="alert_metrics")
    severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.WARNING)
    before_mean = models.FloatField(null=True, blank=True)
    before_spread = models.FloatField(null=True, blank=True)
    after_mean = models.FloatField(null=True, blank=True)
    after_spread = models.FloatField(null=True, blank=True)
    pct_change = models.FloatField(null=True, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    min_effect = models.FloatField(null=True, blank=True)
    # Run ids (plain, as in Alert.detail): the check that found the change in this series, and
    # the run where its values went back to the old level.
    checked_run = models.BigIntegerField(null=True, blank=True)
    reverted_at_run = models.BigIntegerField(null=True, blank=True)
    # The first bad run of this metric's own change: the alert's, or a run beside it when the
    # detector placed this metric's change one run apart (None: the alert's, rows from before).
    first_run = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["alert_id", "id"]
        constraints = [models.UniqueConstraint(fields=["alert", "series"], name="alert_metric_alert_series")]

    def __str__(self) -> str:
        return f"alert {self.alert_id}: series {self.series_id}"


class AlertEvent(models.Model):
    """One transition of an alert: who, when, from which state to which, and why."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(db_index=True)
    from_state = models.CharField(max_length=16, blank=True)  # blank for the opening event
    to_state = models.CharField(max_length=16, choices=AlertState.choices)
    reason = models.CharField(max_length=40, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.from_state or '-'} -> {self.to_state}"


class ExpectedChange(models.Model):
    """A change a person marked as intended: the series' baseline starts again at ``run``.

    Scope "run" marks every series of the run; one row is kept per series so the detector's
    baseline lookup is a single indexed read.
    """

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="+")
    series = models.ForeignKey("benchmarks.Series", on_delete=models.CASCADE, related_name="expected_changes")
    run = models.ForeignKey("benchmarks.BenchmarkRun", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=8, choices=ExpectedScope.choices, default=ExpectedScope.SERIES)
    alert = models.ForeignKey(Alert, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    note = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["series", "run"], name="expected_change_series_run")]

    def __str__(self) -> str:
        return f"expected change on series {self.series_id} at run {self.run_id}"


class DetectionSetting(models.Model):
    """A team's minimum effect for one metric (``metric`` blank: every metric of the team).

    Precedence for a series: Series.min_effect, then the team's row for the metric, then the
    team's blank-metric row, then the detector default.
    """

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="detection_settings")
    metric = models.CharField(max_length=60, blank=True)
    min_effect = models.FloatField(help_text="Relative shift, 0.02 = 2%")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "metric"], name="detection_setting_team_metric")
        ]

    def __str__(self) -> str:
        return f"{self.team_id}:{self.metric or '*'} >= {self.min_effect:.1%}"


class ServingSlo(models.Model):
    """Per-model (optionally per-variant) production objectives the production rules check."""

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="serving_slos")
    model = models.ForeignKey("benchmarks.Model", on_delete=models.CASCADE, related_name="+")
    variant = models.ForeignKey(
        "benchmarks.ModelVariant", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    p99_latency_ms = models.FloatField(null=True, blank=True)
    min_tokens_per_s = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "model", "variant"], name="serving_slo_team_model_variant"
            )
        ]

    def __str__(self) -> str:
        return f"SLO {self.model_id}/{self.variant_id or '*'}"
