"""What was measured (model, variant, workload), on what (hardware), and the results.

A **series** is one metric of one workload on one hardware configuration (accelerator type and
count), over time: the unit that regression detection, trends and cost comparisons work on.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from accelboard.core.access import SharedOrTeamQuerySet, TeamScopedQuerySet

from .choices import Direction, IdentityMatch, Precision, Scenario, UploadSource


class Model(models.Model):
    """A canonical model of the catalogue: "Llama-3.1-8B", "ResNet-50" (family, size, fine-tune).

    Files name models in many ways (``llama2-70b-99``, ``meta-llama/Llama-2-70b-chat-hf``); the
    catalogue (``catalogue``, ``ModelAlias``) resolves them to one row, and each run keeps the
    name as read (``BenchmarkRun.model_name``) and how it resolved (``model_match``).

    ``team`` null: shared by every team (the catalogue, the demo, what an admin adds); set: created
    by that team's uploads and seen only by it, so one team's model names never reach another.
    A name is unique among the shared models and within each team; a team resolves a name to its
    own model first, then to a shared one (``benchmarks.selectors.model_variant_resolve``).
    """

    name = models.CharField(max_length=120)
    team = models.ForeignKey(
        "core.Team",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="models",
        help_text="Blank: shared by every team; else only this team sees it",
    )
    family = models.CharField(max_length=60, blank=True)
    fine_tune = models.CharField(
        max_length=40, blank=True, help_text='Empty for base weights; "chat", "instruct", "squad"...'
    )
    task = models.CharField(
        max_length=60, blank=True, help_text="llm, vision, speech, diffusion, embedding..."
    )
    parameters_b = models.FloatField(null=True, blank=True, help_text="Parameters, billions")
    reference_variant = models.ForeignKey(
        "ModelVariant", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Maximum accuracy loss against the reference, relative (0.01 = 1%), for the drift pages.
    drift_budget = models.FloatField(default=0.01)

    objects = SharedOrTeamQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["name"], condition=models.Q(team__isnull=True), name="model_shared_name_unique"
            ),
            models.UniqueConstraint(fields=["team", "name"], name="model_team_name_unique"),
        ]

    def __str__(self) -> str:
        return self.name


class ModelVariant(models.Model):
    """A model as run: precision and quantization. ``team`` as on ``Model``: a team's own variant
    of a shared model stays that team's; a team's own model has only that team's variants."""

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="variants")
    name = models.CharField(max_length=120, help_text='e.g. "bf16", "fp8-dynamic", "int4-awq"')
    team = models.ForeignKey(
        "core.Team",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="model_variants",
        help_text="Blank: shared by every team; else only this team sees it",
    )
    precision = models.CharField(max_length=8, choices=Precision.choices)
    quantization_method = models.CharField(max_length=40, blank=True, help_text="GPTQ, AWQ, SmoothQuant, ...")
    quantization_config = models.JSONField(default=dict, blank=True)
    calibration_data = models.CharField(max_length=200, blank=True)

    objects = SharedOrTeamQuerySet.as_manager()

    class Meta:
        ordering = ["model__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["model", "name"],
                condition=models.Q(team__isnull=True),
                name="variant_shared_name_unique",
            ),
            models.UniqueConstraint(fields=["model", "team", "name"], name="variant_team_name_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.model.name} {self.name}"

    @property
    def is_reference(self) -> bool:
        return self.model.reference_variant_id == self.pk


class Workload(models.Model):
    """The comparable-series identity on the software side: runs of equal workloads compare."""

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="workloads")
    variant = models.ForeignKey(ModelVariant, on_delete=models.PROTECT, related_name="workloads")
    scenario = models.CharField(max_length=16, choices=Scenario.choices, default=Scenario.UNSTATED)
    batch_size = models.PositiveIntegerField(null=True, blank=True)
    concurrency = models.PositiveIntegerField(null=True, blank=True)
    input_length = models.PositiveIntegerField(null=True, blank=True)
    output_length = models.PositiveIntegerField(null=True, blank=True)
    framework = models.CharField(max_length=40, blank=True, help_text="vLLM, TensorRT-LLM, PyTorch, ...")
    framework_version = models.CharField(max_length=40, blank=True)
    options = models.JSONField(default=dict, blank=True, help_text="Compile and runtime options")
    # sha256 of the identity fields, so that equal workloads are found with one indexed lookup.
    identity = models.CharField(max_length=64)

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        ordering = ["variant__model__name", "variant__name", "scenario", "batch_size"]
        constraints = [
            models.UniqueConstraint(fields=["team", "identity"], name="workload_team_identity_unique")
        ]

    def __str__(self) -> str:
        parts = [str(self.variant), self.get_scenario_display()]
        if self.batch_size:
            parts.append(f"bs{self.batch_size}")
        if self.concurrency:
            parts.append(f"c{self.concurrency}")
        if self.framework:
            parts.append(self.framework)
        return " · ".join(parts)


def _raw_upload_path(instance: BenchmarkRun, filename: str) -> str:
    return f"runs/{instance.uuid}/{filename}"


class BenchmarkRun(models.Model):
    uuid = models.UUIDField(
        default=uuid.uuid4, unique=True, help_text="Client id: a retried upload is one run"
    )
    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="runs")
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="runs")
    accelerator_type = models.ForeignKey(
        "fleet.AcceleratorType", null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    accelerator_count = models.PositiveSmallIntegerField(default=1)
    host = models.ForeignKey(
        "fleet.Host", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    driver_version = models.CharField(max_length=40, blank=True)
    cuda_version = models.CharField(max_length=20, blank=True)
    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Provenance
    git_commit = models.CharField(max_length=64, blank=True, db_index=True)
    branch = models.CharField(max_length=200, blank=True)
    ci_url = models.URLField(max_length=500, blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    uploaded_via = models.CharField(max_length=8, choices=UploadSource.choices, default=UploadSource.API)
    source_format = models.CharField(
        max_length=40, default="accelboard", help_text="Importer that read the file"
    )
    raw_file = models.FileField(upload_to=_raw_upload_path, blank=True)
    raw_filename = models.CharField(max_length=255, blank=True)
    # Where each field came from: {"batch_size": "file:mlperf_log_detail.txt", "accelerator": "user"}
    field_sources = models.JSONField(default=dict, blank=True)
    # The names as the file (or the uploader) gave them, and how each found its catalogue identity
    # (the workload's model, the accelerator type): blank for runs recorded before the catalogue.
    model_name = models.CharField(max_length=200, blank=True)
    model_match = models.CharField(max_length=8, choices=IdentityMatch.choices, blank=True)
    accelerator_name = models.CharField(max_length=120, blank=True)
    accelerator_match = models.CharField(max_length=8, choices=IdentityMatch.choices, blank=True)
    context = models.JSONField(default=dict, blank=True)
    valid = models.BooleanField(default=True, help_text="False when the tool marked the result invalid")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["team", "-started_at"], name="run_team_started")]

    def __str__(self) -> str:
        return f"{self.workload} on {self.accelerator_count}× {self.accelerator_type} at {self.started_at:%Y-%m-%d}"


class Series(models.Model):
    """One metric of one workload on one hardware configuration, over time."""

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="series")
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="series")
    accelerator_type = models.ForeignKey(
        "fleet.AcceleratorType", null=True, blank=True, on_delete=models.PROTECT, related_name="series"
    )
    accelerator_count = models.PositiveSmallIntegerField(default=1)
    metric = models.CharField(max_length=60)
    unit = models.CharField(max_length=16)
    direction = models.CharField(max_length=8, choices=Direction.choices)
    # Per-series override of the minimum effect size (relative, 0.05 = 5%) for regression alerts.
    min_effect = models.FloatField(null=True, blank=True)
    last_value = models.FloatField(null=True, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "series"
        ordering = ["workload_id", "metric"]
        constraints = [
            models.UniqueConstraint(
                fields=["workload", "accelerator_type", "accelerator_count", "metric"],
                name="series_identity_unique",
                nulls_distinct=False,
            )
        ]

    def __str__(self) -> str:
        return f"{self.metric} · {self.workload} · {self.accelerator_count}× {self.accelerator_type}"


class MetricValueQuerySet(TeamScopedQuerySet["MetricValue"]):
    team_field = "run__team"


class MetricValue(models.Model):
    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="metrics")
    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="points")
    name = models.CharField(max_length=60)
    value = models.FloatField()
    unit = models.CharField(max_length=16)
    direction = models.CharField(max_length=8, choices=Direction.choices)
    # Repeated measurements within the run (for significance tests and noise estimates).
    samples = models.JSONField(default=list, blank=True)
    raw_value = models.CharField(
        max_length=80, blank=True, help_text="As the file wrote it, before normalising"
    )
    raw_unit = models.CharField(max_length=16, blank=True)
    source = models.CharField(max_length=200, blank=True, help_text="file:path/key the value was read from")
    # Denormalised from the run so that a series' history is one index range scan.
    measured_at = models.DateTimeField()

    objects = MetricValueQuerySet.as_manager()

    class Meta:
        ordering = ["series_id", "measured_at"]
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="metric_run_name_unique")]
        indexes = [models.Index(fields=["series", "measured_at"], name="metric_series_time")]

    def __str__(self) -> str:
        return f"{self.name}={self.value:g} {self.unit}"


class ModelAlias(models.Model):
    """Another name of a catalogue model, for one team (``team``) or for every team (no team: set
    by an admin). ``key`` is ``catalogue.model_key`` of the name, what a raw name is compared on."""

    team = models.ForeignKey(
        "core.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="model_aliases"
    )
    name = models.CharField(max_length=200)
    key = models.CharField(max_length=200, editable=False)
    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="aliases")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "model aliases"
        ordering = ["model__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "key"], name="model_alias_team_key_unique", nulls_distinct=False
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} → {self.model}"


class AcceleratorAlias(models.Model):
    """Another name of an accelerator type, for one team or (no team) every team; ``key`` is
    ``catalogue.accelerator_key`` of the name (its words, sorted)."""

    team = models.ForeignKey(
        "core.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="accelerator_aliases"
    )
    name = models.CharField(max_length=120)
    key = models.CharField(max_length=120, editable=False)
    accelerator_type = models.ForeignKey(
        "fleet.AcceleratorType", on_delete=models.CASCADE, related_name="aliases"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "accelerator aliases"
        ordering = ["accelerator_type__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "key"], name="accelerator_alias_team_key_unique", nulls_distinct=False
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} → {self.accelerator_type}"
