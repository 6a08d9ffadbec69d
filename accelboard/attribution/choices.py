from __future__ import annotations

from django.db import models


class RuleSelector(models.TextChoices):
    """What a rule selects workloads by (rules.SELECTORS)."""

    LABEL = "label", "Pod label (key=value)"
    NAMESPACE = "namespace", "Namespace"
    ACCOUNT = "account", "Slurm account"
    USER = "user", "Slurm user"
    MODEL_NAME = "model_name", "Serving model name"


class ModelSource(models.TextChoices):
    """Where a workload's model came from (rules.SOURCE_*): a label rule, a serving-model-name
    rule matching the model it served, or the serving metrics on its GPUs themselves."""

    LABEL = "label", "Label rule"
    MODEL_NAME = "model_name", "Serving model name rule"
    SERVING = "serving", "Serving metrics"


class AllocationKind(models.TextChoices):
    """A line of a GPU-day: a workload a rule maps to a team, the device's idle time, or what no
    rule maps (a workload of no team, or busy time no interval covers)."""

    WORKLOAD = "workload", "Workload"
    IDLE = "idle", "Idle"
    UNATTRIBUTED = "unattributed", "Unattributed"


class AllocationBasis(models.TextChoices):
    ALLOCATION = "allocation", "Allocation (time held)"
    USAGE = "usage", "Usage (measured)"


class AllocationGroup(models.TextChoices):
    TEAM = "team", "Team"
    NAMESPACE = "namespace", "Namespace"
    WORKLOAD = "workload", "Workload"
    MODEL = "model", "Model"
    GPU = "gpu", "GPU"
    HOST = "host", "Host"


class IdleMode(models.TextChoices):
    """Idle cost shown as its own row, or spread over the other rows by their cost (OpenCost's
    ``shareIdle``)."""

    SEPARATE = "separate", "Show apart"
    SHARE = "share", "Share by usage"
