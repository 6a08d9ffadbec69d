"""A canary comparison a team runs: which deployments of one model, over what window, with which
minimum effects. The verdict is computed when asked (``selectors.canary_evaluate``); failing ones
open an alert (``services.canary_checks_run``)."""

from __future__ import annotations

from django.db import models

from accelboard.core.access import TeamScopedQuerySet


class CanaryCheck(models.Model):
    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="canary_checks")
    model = models.ForeignKey("benchmarks.Model", on_delete=models.CASCADE, related_name="canary_checks")
    name = models.SlugField(max_length=80, help_text="The endpoint's name: /api/v1/canary/<name>")
    # Label selectors on the serving intervals (``InferenceMetric.labels``): {"track": "canary"};
    # "variant" and "host" select by the variant's name and the host's name.
    baseline = models.JSONField(help_text='Labels of the baseline, e.g. {"track": "stable"}')
    canary = models.JSONField(help_text='Labels of the canary, e.g. {"track": "canary"}')
    window_minutes = models.PositiveIntegerField(default=60, help_text="The window compared, ending now")
    alpha = models.FloatField(default=0.005, help_text="Significance level of each metric's rank test")
    min_effects = models.JSONField(
        default=dict,
        blank=True,
        help_text='Minimum effects per metric overriding the defaults: {"e2e_p50_ms": 0.05} (5%)',
    )
    active = models.BooleanField(default=True, help_text="Checked every few minutes; a fail opens an alert")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        ordering = ["team_id", "name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="canary_check_team_name")]

    def __str__(self) -> str:
        return self.name
