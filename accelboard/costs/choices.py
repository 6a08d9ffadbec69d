from __future__ import annotations

from django.db import models


class PricingModel(models.TextChoices):
    ON_DEMAND = "on-demand", "On-demand"
    SPOT = "spot", "Spot"
    RESERVED = "reserved", "Reserved"
    ON_PREM = "on-prem", "On-prem (amortised)"


class CostUnit(models.TextChoices):
    INFERENCE = "inference", "Inference"
    TOKEN = "token", "Token"
    SAMPLE = "sample", "Sample"


class EnergySource(models.TextChoices):
    """Where a run's energy figure came from; an estimate is always labelled as one."""

    COUNTER = "counter", "Energy counter"
    POWER = "power", "Integrated power"
    REPORTED = "reported", "Reported by the benchmark"
    BOARD_POWER_ESTIMATE = "board-power-estimate", "Estimate: board power × time"
    NONE = "", "Not measured"
