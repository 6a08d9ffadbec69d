"""Effective-dated prices. Every row carries its source and the date it was read."""

from __future__ import annotations

from django.db import models

from accelboard.fleet.choices import Provider

from .choices import PricingModel


class AcceleratorPrice(models.Model):
    """The price of an instance (or of accelerators on-prem), per hour, for a validity window."""

    accelerator_type = models.ForeignKey(
        "fleet.AcceleratorType", on_delete=models.PROTECT, related_name="prices"
    )
    accelerator_count = models.PositiveSmallIntegerField(default=1)
    provider = models.CharField(max_length=16, choices=Provider.choices)
    region = models.CharField(max_length=40, blank=True)
    instance_type = models.CharField(max_length=60, blank=True)
    pricing_model = models.CharField(
        max_length=12, choices=PricingModel.choices, default=PricingModel.ON_DEMAND
    )
    price_per_hour = models.DecimalField(max_digits=12, decimal_places=4, help_text="For the whole instance")
    currency = models.CharField(max_length=3, default="USD")
    # On-prem amortisation inputs (price_per_hour derived from them).
    capex = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    lifetime_hours = models.PositiveIntegerField(null=True, blank=True)
    source = models.CharField(max_length=300)
    fetched_on = models.DateField()
    valid_from = models.DateField()
    valid_to = models.DateField(null=True, blank=True)

    class Meta:
        ordering = ["accelerator_type__name", "provider", "region", "pricing_model", "-valid_from"]
        indexes = [
            models.Index(fields=["accelerator_type", "provider", "region"], name="price_type_provider_region")
        ]

    def __str__(self) -> str:
        return (
            f"{self.provider} {self.instance_type or self.accelerator_type} ×{self.accelerator_count} "
            f"{self.pricing_model} {self.price_per_hour} {self.currency}/h"
        )

    @property
    def price_per_accelerator_hour(self) -> float:
        return float(self.price_per_hour) / max(self.accelerator_count, 1)


class ElectricityPrice(models.Model):
    site = models.ForeignKey("fleet.Site", on_delete=models.CASCADE, related_name="electricity_prices")
    price_per_kwh = models.DecimalField(max_digits=8, decimal_places=5)
    currency = models.CharField(max_length=3, default="USD")
    pue = models.FloatField(default=1.58, help_text="Power usage effectiveness of the site")
    carbon_g_per_kwh = models.FloatField(default=475.0, help_text="Grid carbon intensity, gCO2e/kWh")
    source = models.CharField(max_length=300)
    fetched_on = models.DateField()
    valid_from = models.DateField()
    valid_to = models.DateField(null=True, blank=True)

    class Meta:
        ordering = ["site__name", "-valid_from"]

    def __str__(self) -> str:
        return f"{self.site}: {self.price_per_kwh} {self.currency}/kWh, PUE {self.pue}"
