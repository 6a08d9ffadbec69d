"""Test data for the cost engine: price-book rows and minute rollups with chosen values.

Rollups are written directly (their own computation from raw samples is tested in tests/fleet)
so that a test states exactly what a day held: N GPUs × M minutes at U % and W watts.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from accelboard.costs.models import AcceleratorPrice, CarbonIntensity, ElectricityPrice, ExchangeRate
from accelboard.fleet.models import Accelerator, AcceleratorType, Host, Site, TelemetryRollup


def site_create(*, name: str = "us-east-1", provider: str = "aws", region: str = "us-east-1") -> Site:
    site, _ = Site.objects.get_or_create(name=name, defaults={"provider": provider, "region": region})
    return site


def host_place(
    host: Host,
    *,
    site: Site | None,
    provider: str = "aws",
    region: str = "us-east-1",
    instance_type: str = "p5.48xlarge",
    project: str = "",
) -> Host:
    host.site = site
    host.provider = provider
    host.region = region
    host.instance_type = instance_type
    host.project = project
    host.save(update_fields=["site", "provider", "region", "instance_type", "project"])
    return host


def accelerator_price_create(
    *,
    accelerator_type: AcceleratorType,
    price_per_hour: str = "98.32",
    count: int = 8,
    provider: str = "aws",
    region: str = "us-east-1",
    instance_type: str = "p5.48xlarge",
    pricing_model: str = "on-demand",
    currency: str = "USD",
    fetched_on: date | None = None,
    valid_from: date = date(2024, 1, 1),
    valid_to: date | None = None,
    source: str = "test price sheet",
) -> AcceleratorPrice:
    return AcceleratorPrice.objects.create(
        accelerator_type=accelerator_type,
        accelerator_count=count,
        provider=provider,
        region=region,
        instance_type=instance_type,
        pricing_model=pricing_model,
        price_per_hour=Decimal(price_per_hour),
        currency=currency,
        source=source,
        fetched_on=fetched_on or datetime.now(UTC).date(),
        valid_from=valid_from,
        valid_to=valid_to,
    )


def electricity_price_create(
    *,
    site: Site,
    price_per_kwh: str = "0.10",
    pue: float = 1.58,
    carbon_g_per_kwh: float = 475.0,
    currency: str = "USD",
    fetched_on: date | None = None,
    valid_from: date = date(2024, 1, 1),
) -> ElectricityPrice:
    return ElectricityPrice.objects.create(
        site=site,
        price_per_kwh=Decimal(price_per_kwh),
        currency=currency,
        pue=pue,
        carbon_g_per_kwh=carbon_g_per_kwh,
        source="test tariff",
        fetched_on=fetched_on or datetime.now(UTC).date(),
        valid_from=valid_from,
    )


def carbon_create(*, provider: str, region: str, g_per_kwh: float, pue: float = 1.0) -> CarbonIntensity:
    today = datetime.now(UTC).date()
    return CarbonIntensity.objects.create(
        provider=provider,
        region=region,
        g_per_kwh=g_per_kwh,
        pue=pue,
        source="test grid",
        fetched_on=today,
        valid_from=date(2024, 1, 1),
    )


def rate_create(*, from_currency: str, to_currency: str, rate: str) -> ExchangeRate:
    today = datetime.now(UTC).date()
    return ExchangeRate.objects.create(
        from_currency=from_currency,
        to_currency=to_currency,
        rate=Decimal(rate),
        source="test rates",
        fetched_on=today,
        valid_from=date(2024, 1, 1),
    )


def minutes_load(
    *,
    gpus: list[Accelerator],
    start: datetime,
    minutes: int,
    util: float | None,
    power_w: float | None,
    samples: int = 1,
) -> int:
    """``minutes`` 60 s rollup rows per GPU from ``start`` at ``util`` % and ``power_w`` W
    (energy_j = power × 60 s; None leaves the energy NULL, as for a GPU with no signal)."""
    rows = [
        TelemetryRollup(
            width_s=60,
            bucket=start + timedelta(minutes=m),
            host_id=gpu.host_id,
            accelerator=gpu,
            samples=samples,
            gpu_util_samples=samples if util is not None else 0,
            gpu_util_avg=util,
            power_samples=samples if power_w is not None else 0,
            power_avg_w=power_w,
            energy_j=power_w * 60.0 if power_w is not None else None,
        )
        for gpu in gpus
        for m in range(minutes)
    ]
    TelemetryRollup.objects.bulk_create(rows, batch_size=5000)
    return len(rows)
