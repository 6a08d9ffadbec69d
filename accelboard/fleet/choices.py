from __future__ import annotations

from django.db import models


class Vendor(models.TextChoices):
    NVIDIA = "nvidia", "NVIDIA"
    AMD = "amd", "AMD"
    GOOGLE = "google", "Google"
    INTEL = "intel", "Intel"
    OTHER = "other", "Other"


class FormFactor(models.TextChoices):
    SXM = "sxm", "SXM"
    PCIE = "pcie", "PCIe"
    OAM = "oam", "OAM"
    OTHER = "other", "Other"


class Provider(models.TextChoices):
    ON_PREM = "on-prem", "On-premises"
    AWS = "aws", "AWS"
    GCP = "gcp", "Google Cloud"
    AZURE = "azure", "Azure"
    LAMBDA = "lambda", "Lambda"
    OTHER = "other", "Other"


class RollupWidth(models.IntegerChoices):
    MINUTE = 60, "1 minute"
    HOUR = 3600, "1 hour"


class WorkloadKind(models.TextChoices):
    """What held a GPU (docs/attribution.md): a Kubernetes pod, a Slurm job, a bare process."""

    POD = "pod", "Kubernetes pod"
    SLURM_JOB = "slurm-job", "Slurm job"
    PROCESS = "process", "Process"


class AttributionBasis(models.TextChoices):
    """How an interval's share of its device was found (docs/attribution.md)."""

    EXCLUSIVE = "exclusive", "Held alone"
    MEASURED = "measured", "Measured per process"
    EVEN = "even", "Split evenly"
