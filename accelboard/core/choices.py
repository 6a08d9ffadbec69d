from __future__ import annotations

from django.db import models


class Role(models.TextChoices):
    TEAM_LEAD = "lead", "Team lead"
    ENGINEER = "engineer", "Engineer"
    FINANCE = "finance", "Finance"


class MembershipSource(models.TextChoices):
    """Who made a membership: single sign-on takes back only what it gave."""

    MANUAL = "manual", "Added by hand"
    OIDC = "oidc", "From single sign-on groups"


class JobStatus(models.TextChoices):
    STARTED = "started", "Started"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class BatchKind(models.TextChoices):
    """What an idempotent write (``IngestBatch``) stored."""

    TELEMETRY = "telemetry", "Telemetry batch"
    RUN = "run", "Benchmark run"
    INFERENCE = "inference", "Inference metrics batch"
    TRAINING = "training", "Training progress batch"
