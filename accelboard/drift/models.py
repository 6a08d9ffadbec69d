"""Drift budgets per task and production agreement with the reference, per variant and day.

Drift itself is not stored: it is computed from the accuracy results (``MetricValue`` rows named
``accuracy`` or ``accuracy:<task>:<metric>``) whenever it is read, so it can never disagree with
them. A model's default budget is ``benchmarks.Model.drift_budget`` (1% relative); a
``DriftBudget`` row overrides it for one task.
"""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from accelboard.core.access import TeamScopedQuerySet


class DriftBudget(models.Model):
    """The largest relative accuracy loss accepted on one task of a model (0.01 = 1%)."""

    model = models.ForeignKey("benchmarks.Model", on_delete=models.CASCADE, related_name="drift_budgets")
    task = models.CharField(max_length=120, help_text='The task of "accuracy:<task>:<metric>"')
    budget = models.FloatField(validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    note = models.CharField(max_length=200, blank=True, help_text="Why this task differs")

    class Meta:
        ordering = ["model__name", "task"]
        constraints = [models.UniqueConstraint(fields=["model", "task"], name="driftbudget_model_task")]

    def __str__(self) -> str:
        return f"{self.model.name} {self.task}: {self.budget:.2%}"


class ProductionAgreement(models.Model):
    """How often a quantized variant agreed with its reference on one day of sampled traffic.

    Computed by an agent or a script (accelboard tracks and alerts). One row per team, variant,
    day and task: a later batch for the same day replaces the figures (upsert)."""

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="+")
    variant = models.ForeignKey(
        "benchmarks.ModelVariant", on_delete=models.CASCADE, related_name="production_agreements"
    )
    day = models.DateField()
    task = models.CharField(max_length=120)
    agreement_rate = models.FloatField(help_text="Share of sampled requests with the same answer, 0..1")
    kl_divergence = models.FloatField(null=True, blank=True, help_text="Mean KL(reference || variant), nats")
    perplexity_delta = models.FloatField(null=True, blank=True, help_text="Variant − reference perplexity")
    samples = models.PositiveIntegerField()
    batch_id = models.CharField(max_length=64)
    received_at = models.DateTimeField(auto_now=True)

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        ordering = ["variant_id", "task", "day"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "variant", "day", "task"], name="agreement_team_variant_day_task"
            )
        ]

    def __str__(self) -> str:
        return f"{self.variant} {self.task} {self.day}: {self.agreement_rate:.3f}"


class AgreementBatch(models.Model):
    """One accepted ``POST /api/v1/drift-metrics`` by its client batch id: a retry returns ``result``.

    Claimed with ``INSERT ... ON CONFLICT DO NOTHING`` in the batch's transaction, like the API's
    ``IngestBatch``: the rows and the claim commit or vanish together."""

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="+")
    batch_id = models.CharField(max_length=64)
    result = models.JSONField(default=dict)
    # As ``IngestBatch.digest``: the same batch id with other items is refused (409).
    digest = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["team", "batch_id"], name="agreementbatch_team_batch")]

    def __str__(self) -> str:
        return self.batch_id
