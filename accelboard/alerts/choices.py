from __future__ import annotations

from django.db import models


class AlertKind(models.TextChoices):
    REGRESSION = "regression", "Benchmark regression"
    IMPROVEMENT = "improvement", "Benchmark improvement"
    DRIFT = "drift", "Quantization drift"
    SLO = "slo", "Latency SLO breach"
    THROUGHPUT = "throughput", "Throughput drop"
    ENERGY = "energy", "Energy per token rise"
    MEMORY = "memory", "Memory pressure"
    THROTTLE = "throttle", "Thermal / power throttling"
    HARDWARE = "hardware", "XID / ECC errors"
    CANARY = "canary", "Canary verdict: fail"
    TRAINING = "training", "Training step-time regression"


class Severity(models.TextChoices):
    CRITICAL = "critical", "Critical"
    WARNING = "warning", "Warning"
    INFO = "info", "Info"


class AlertState(models.TextChoices):
    OPEN = "open", "Open"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    RESOLVED = "resolved", "Resolved"
    DISMISSED = "dismissed", "Dismissed"


class DismissReason(models.TextChoices):
    FALSE_ALARM = "false-alarm", "False alarm"
    EXPECTED = "expected", "Expected change"


class ExpectedScope(models.TextChoices):
    SERIES = "series", "This series"
    RUN = "run", "Every series of the run"
