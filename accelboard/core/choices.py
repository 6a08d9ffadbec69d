from __future__ import annotations

from django.db import models


class Role(models.TextChoices):
    TEAM_LEAD = "lead", "Team lead"
    ENGINEER = "engineer", "Engineer"
    FINANCE = "finance", "Finance"


class JobStatus(models.TextChoices):
    STARTED = "started", "Started"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class BatchKind(models.TextChoices):
    """What an idempotent write (``IngestBatch``) stored."""

    TELEMETRY = "telemetry", "Telemetry batch"
    RUN = "run", "Benchmark run"
    INFERENCE = "inference", "Inference metrics batch"
