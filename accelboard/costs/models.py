"""Effective-dated prices and the computed cost tables.

Every price row carries its source and the date it was read (``fetched_on``); a row read more
than :data:`STALE_AFTER_DAYS` days ago is stale, and every cost computed from it says so
(``price_stale``). Computed tables (``CostDaily``, ``RunCost``, ``ServingCostDaily``) keep a
foreign key to each price row they used so that a report can cite it; they are written only by
``costs.services`` (upserts keyed on their unique constraint: a re-run replaces, never doubles).
"""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

from django.db import models

from accelboard.core.access import TeamScopedQuerySet
from accelboard.fleet.choices import Provider

from .choices import CostUnit, EnergySource, PricingModel

STALE_AFTER_DAYS = 30


def is_stale(fetched_on: date | None, *, today: date | None = None) -> bool:
    """True when a price was read more than 30 days before ``today`` (or never dated)."""
    if fetched_on is None:
        return True
    return ((today or date.today()) - fetched_on) > timedelta(days=STALE_AFTER_DAYS)


class _Dated(models.Model):
    """Source, read date and validity window shared by every price-book table."""

    source = models.CharField(max_length=300)
    fetched_on = models.DateField()
    valid_from = models.DateField()
    valid_to = models.DateField(null=True, blank=True, help_text="Exclusive; empty = still valid")

    class Meta:
        abstract = True

    @property
    def stale(self) -> bool:
        return is_stale(self.fetched_on)


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
    def price_per_accelerator_hour(self) -> Decimal:
        return Decimal(self.price_per_hour) / max(self.accelerator_count, 1)

    @property
    def stale(self) -> bool:
        return is_stale(self.fetched_on)


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

    @property
    def stale(self) -> bool:
        return is_stale(self.fetched_on)


class ExchangeRate(_Dated):
    """1 ``from_currency`` = ``rate`` ``to_currency``. Conversion happens only where a row exists."""

    from_currency = models.CharField(max_length=3)
    to_currency = models.CharField(max_length=3)
    rate = models.DecimalField(max_digits=18, decimal_places=8)

    class Meta:
        ordering = ["from_currency", "to_currency", "-valid_from"]

    def __str__(self) -> str:
        return f"1 {self.from_currency} = {self.rate} {self.to_currency} from {self.valid_from}"


class CarbonIntensity(_Dated):
    """Grid carbon intensity of a provider's region, for hosts with no site electricity row
    (cloud regions). A site's ``ElectricityPrice.carbon_g_per_kwh`` wins where both exist."""

    provider = models.CharField(max_length=16, choices=Provider.choices)
    region = models.CharField(max_length=40)
    g_per_kwh = models.FloatField(help_text="gCO2e/kWh")
    pue = models.FloatField(
        default=1.0, help_text="PUE to apply for energy at the facility (cloud: 1.0 if unknown)"
    )

    class Meta:
        ordering = ["provider", "region", "-valid_from"]
        verbose_name_plural = "carbon intensities"

    def __str__(self) -> str:
        return f"{self.provider} {self.region}: {self.g_per_kwh} g/kWh"


class CostDaily(models.Model):
    """Accelerator-hours, energy and money of one host's accelerators of one type on one day (UTC).

    The monthly report sums these rows (a month of a 16-host fleet is ~500 rows). Money is in the
    price row's ``currency``; selectors convert with ``ExchangeRate`` rows only. A NULL cost means
    no price row applied (``flags`` says which); a NULL energy means no energy was measured.
    """

    day = models.DateField()
    team = models.ForeignKey("core.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    host = models.ForeignKey("fleet.Host", on_delete=models.CASCADE, related_name="costs_daily")
    project = models.CharField(max_length=80, blank=True)
    accelerator_type = models.ForeignKey(
        "fleet.AcceleratorType", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    provider = models.CharField(max_length=16, choices=Provider.choices)
    region = models.CharField(max_length=40, blank=True)
    gpus = models.IntegerField(default=0, help_text="GPUs that reported on the day")
    # Telemetry samples behind the row: the nightly pass recomputes a day whose rollups now hold a
    # different count (late data reached the rollups after the day was costed).
    samples = models.BigIntegerField(default=0)
    alloc_hours = models.FloatField(default=0.0, help_text="GPU-hours held (allocation basis)")
    busy_hours = models.FloatField(default=0.0, help_text="GPU-hours weighted by utilisation (usage basis)")
    idle_hours = models.FloatField(default=0.0, help_text="GPU-hours in minutes below 10 % utilisation")
    energy_kwh = models.FloatField(null=True, blank=True, help_text="kWh at the device")
    energy_kwh_pue = models.FloatField(null=True, blank=True, help_text="kWh × PUE (at the facility)")
    carbon_kg = models.FloatField(null=True, blank=True, help_text="kgCO2e")
    gpu_hour_rate = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    capacity_cost = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    usage_cost = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    energy_cost = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    idle_cost = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    total_cost = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    accelerator_price = models.ForeignKey(
        AcceleratorPrice, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    electricity_price = models.ForeignKey(
        ElectricityPrice, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    carbon_intensity = models.ForeignKey(
        CarbonIntensity, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    price_stale = models.BooleanField(default=False)
    flags = models.JSONField(default=list, blank=True, help_text='e.g. ["no-accelerator-price"]')
    computed_at = models.DateTimeField()

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-day", "host_id"]
        verbose_name_plural = "daily costs"
        constraints = [
            models.UniqueConstraint(
                fields=["day", "host", "accelerator_type"],
                name="costdaily_day_host_type",
                nulls_distinct=False,
            )
        ]
        indexes = [
            models.Index(fields=["day", "team"], name="costdaily_day_team"),
            models.Index(fields=["team", "day"], name="costdaily_team_day"),
        ]

    def __str__(self) -> str:
        return f"{self.day} host {self.host_id}: {self.total_cost} {self.currency}"


class RunCostQuerySet(TeamScopedQuerySet["RunCost"]):
    team_field = "run__team"


class RunCost(models.Model):
    """Energy, cost and carbon per unit of work of one benchmark run (per 1M units for money).

    ``energy_j`` is NULL when the run has no measured energy (``flags`` has "no-energy"); an
    estimate from board power × time is stored only with ``energy_source`` =
    "board-power-estimate". ``training`` holds per-iteration/sample figures and time-to-train for
    training runs ({} otherwise).
    """

    run = models.OneToOneField("benchmarks.BenchmarkRun", on_delete=models.CASCADE, related_name="cost")
    unit = models.CharField(max_length=10, choices=CostUnit.choices, blank=True)
    units = models.FloatField(null=True, blank=True, help_text="Units of work in the measured window")
    duration_s = models.FloatField(null=True, blank=True)
    throughput = models.FloatField(null=True, blank=True, help_text="Units per second")
    accelerator_count = models.PositiveSmallIntegerField(default=1)
    energy_j = models.FloatField(null=True, blank=True)
    energy_source = models.CharField(max_length=24, choices=EnergySource.choices, blank=True)
    energy_per_unit_j = models.FloatField(null=True, blank=True)
    energy_per_1k_j = models.FloatField(null=True, blank=True)
    capacity_cost_per_1m = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    energy_cost_per_1m = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    total_cost_per_1m = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    carbon_g_per_1m = models.FloatField(null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    accelerator_price = models.ForeignKey(
        AcceleratorPrice, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    electricity_price = models.ForeignKey(
        ElectricityPrice, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    carbon_intensity = models.ForeignKey(
        CarbonIntensity, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    price_stale = models.BooleanField(default=False)
    flags = models.JSONField(default=list, blank=True)
    training = models.JSONField(default=dict, blank=True)
    inputs = models.JSONField(default=dict, blank=True, help_text="The numbers each figure was computed from")
    computed_at = models.DateTimeField()

    objects = RunCostQuerySet.as_manager()

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.total_cost_per_1m} {self.currency}/1M {self.unit}"


class ServingCostDaily(models.Model):
    """One model variant served on one host on one day: tokens, GPU-hours, energy and cost.

    Joins ``serving.InferenceMetric`` with the 60 s rollups of the GPUs it names
    (``accelerator_uuids``). Cost per 1M tokens is per generated (output) token.
    """

    day = models.DateField()
    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="+")
    variant = models.ForeignKey("benchmarks.ModelVariant", on_delete=models.CASCADE, related_name="+")
    host = models.ForeignKey("fleet.Host", on_delete=models.CASCADE, related_name="+")
    requests = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    generated_tokens = models.BigIntegerField(default=0)
    gpu_hours = models.FloatField(default=0.0)
    energy_kwh = models.FloatField(null=True, blank=True)
    energy_kwh_pue = models.FloatField(null=True, blank=True)
    carbon_kg = models.FloatField(null=True, blank=True)
    capacity_cost = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    energy_cost = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    cost = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    cost_per_1m_tokens = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    energy_per_token_j = models.FloatField(null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    accelerator_price = models.ForeignKey(
        AcceleratorPrice, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    electricity_price = models.ForeignKey(
        ElectricityPrice, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    price_stale = models.BooleanField(default=False)
    flags = models.JSONField(default=list, blank=True)
    computed_at = models.DateTimeField()

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-day", "variant_id"]
        verbose_name_plural = "daily serving costs"
        constraints = [
            models.UniqueConstraint(fields=["day", "variant", "host"], name="servingcost_day_variant_host")
        ]
        indexes = [models.Index(fields=["team", "day"], name="servingcost_team_day")]

    def __str__(self) -> str:
        return f"{self.day} {self.variant_id} on {self.host_id}: {self.cost} {self.currency}"
