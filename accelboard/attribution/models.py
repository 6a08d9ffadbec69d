"""Attribution rules, versioned, and the daily allocation they produce (docs/attribution.md).

A ``RuleSet`` is one version of the whole rule list, saved at once by an admin
(``services.rule_set_save``): the current version is the newest, older ones stay as they were so
that each ``AllocationDaily`` row can name the version it was computed with. ``AllocationDaily``
is written only by ``services.allocation_day_compute`` (a day's rows replaced in one transaction).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from accelboard.core.access import Action, Scope

from .choices import AllocationKind, ModelSource, RuleSelector


class RuleSet(models.Model):
    """One version of the rules: who saved it and when."""

    version = models.PositiveIntegerField(unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-version"]
        verbose_name = "attribution rule set"

    def __str__(self) -> str:
        return f"rules v{self.version}"


class AttributionRule(models.Model):
    """One rule of a version; ``position`` orders them (an earlier rule is the older: it wins a
    tie between two matching label rules)."""

    rule_set = models.ForeignKey(RuleSet, on_delete=models.CASCADE, related_name="rules")
    position = models.PositiveIntegerField()
    selector = models.CharField(max_length=16, choices=RuleSelector.choices)
    value = models.CharField(max_length=320, help_text="key=value for a label rule")
    team = models.ForeignKey("core.Team", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    model = models.CharField(max_length=120, blank=True)
    variant = models.CharField(max_length=120, blank=True)

    class Meta:
        ordering = ["rule_set", "position"]
        constraints = [
            models.UniqueConstraint(fields=["rule_set", "position"], name="attribution_rule_position")
        ]

    def __str__(self) -> str:
        return f"{self.selector} {self.value}"


class AllocationQuerySet(models.QuerySet["AllocationDaily"]):
    def visible_to(self, scope: Scope) -> AllocationQuerySet:
        """Money under the cost pages' rule (``VIEW_COSTS``): the rows attributed to the caller's
        teams, and every row of the GPUs of their teams' hosts (who ran there, idle, unattributed)."""
        ids = scope.team_ids(Action.VIEW_COSTS)
        if ids is None:
            return self
        return self.filter(Q(team_id__in=ids) | Q(owner_team_id__in=ids))


class AllocationDaily(models.Model):
    """One line of a GPU-day: a workload's part, the idle part or the unattributed part of the
    GPU's cost and energy, on both bases. A GPU-day's lines add up to its cost (at the cent) and
    energy (at the joule) exactly; a host-day row of ``CostDaily`` is the sum of its GPUs' days."""

    day = models.DateField()
    accelerator = models.ForeignKey("fleet.Accelerator", on_delete=models.CASCADE, related_name="+")
    host = models.ForeignKey("fleet.Host", on_delete=models.CASCADE, related_name="+")
    # The host's team on the cost row: who pays for the GPU.
    owner_team = models.ForeignKey(
        "core.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=AllocationKind.choices)
    # Null for idle and for busy time no interval covers; set for a workload, mapped or not.
    workload = models.ForeignKey(
        "fleet.Workload", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The team a rule maps the workload to; null for idle and unattributed lines.
    team = models.ForeignKey("core.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    model = models.CharField(max_length=120, blank=True)
    variant = models.CharField(max_length=120, blank=True)
    # Which gave the model: a label rule, a serving-model-name rule, the serving metrics; blank: none.
    model_source = models.CharField(max_length=16, choices=ModelSource.choices, blank=True)
    cost_allocation = models.DecimalField(max_digits=14, decimal_places=2)
    cost_usage = models.DecimalField(max_digits=14, decimal_places=2)
    energy_allocation_j = models.BigIntegerField()
    energy_usage_j = models.BigIntegerField()
    currency = models.CharField(max_length=3, blank=True)
    rule_set = models.ForeignKey(RuleSet, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    computed_at = models.DateTimeField()

    objects = AllocationQuerySet.as_manager()

    class Meta:
        ordering = ["day", "accelerator_id", "kind"]
        verbose_name_plural = "daily allocations"
        indexes = [
            models.Index(fields=["day", "accelerator"], name="allocation_day_gpu"),
            models.Index(fields=["team", "day"], name="allocation_team_day"),
            models.Index(fields=["owner_team", "day"], name="allocation_owner_day"),
        ]

    def __str__(self) -> str:
        return f"{self.day} GPU {self.accelerator_id} {self.kind} {self.cost_allocation} {self.currency}"


class TrainingProgress(models.Model):
    """One progress point a training job reported (``POST /api/v1/training-progress``): its step,
    and optionally samples, tokens and loss, at a time; ``planned_steps`` the job's plan as of
    that report. Written only by ``training_services.training_progress_ingest`` (all of a batch or
    nothing); steps and times only go forward per workload."""

    workload = models.ForeignKey("fleet.Workload", on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField()
    step = models.BigIntegerField()
    samples = models.BigIntegerField(null=True, blank=True)
    tokens = models.BigIntegerField(null=True, blank=True)
    loss = models.FloatField(null=True, blank=True)
    planned_steps = models.BigIntegerField(null=True, blank=True)
    # The GPU UUIDs the job said it ran on for this batch (each checked against its holds).
    gpus = models.JSONField(default=list, blank=True)
    batch_id = models.CharField(max_length=64)

    class Meta:
        ordering = ["workload_id", "at"]
        constraints = [
            models.UniqueConstraint(fields=["workload", "step"], name="training_progress_workload_step"),
            models.UniqueConstraint(fields=["workload", "at"], name="training_progress_workload_at"),
        ]

    def __str__(self) -> str:
        return f"workload {self.workload_id} step {self.step} at {self.at:%Y-%m-%d %H:%M:%S}"
