from __future__ import annotations

from django.db import models


class PricingModel(models.TextChoices):
    ON_DEMAND = "on-demand", "On-demand"
    SPOT = "spot", "Spot"
    RESERVED = "reserved", "Reserved"
    ON_PREM = "on-prem", "On-prem (amortised)"
