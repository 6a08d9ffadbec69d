"""Saved capacity plans: a plan's inputs and what it answered, kept to compare with what happened.

A scenario stores the page's query (every assumption, so opening it re-runs the plan on the same
inputs against today's data) and a snapshot of its answer (the traffic it planned for, the
options as ranked, the winner's monthly cost and output tokens), so that the months after it
can be set against the cost tables without recomputing the past.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from accelboard.core.access import TeamScopedQuerySet


class PlanScenario(models.Model):
    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="plan_scenarios")
    model = models.ForeignKey("benchmarks.Model", on_delete=models.CASCADE, related_name="plan_scenarios")
    name = models.CharField(max_length=120)
    note = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    # The plan's assumptions as the page's GET parameters (growth, horizon, headroom, N+1, price
    # basis, objective, weeks): the scenario's page link is the plan's URL with these.
    query = models.JSONField(default=dict)
    window_start = models.DateTimeField(help_text="Start of the production traffic the plan read")
    window_end = models.DateTimeField()
    currency = models.CharField(max_length=3, blank=True)
    # The winner's monthly total and the output tokens a month it planned for (None: no winner).
    planned_monthly = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    planned_tokens_monthly = models.FloatField(null=True, blank=True)
    current_monthly = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    # The answer as shown: traffic figures, objective, each option's status, GPUs and cost.
    summary = models.JSONField(default=dict)

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["team", "model", "-created_at"], name="planscenario_team_model")]

    def __str__(self) -> str:
        return f"{self.name} ({self.model_id}, {self.created_at:%Y-%m-%d})"
