"""Daily cost compute from minute rollups: hand-worked figures, re-runs that replace, price refs."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from accelboard.core.models import JobRun
from accelboard.costs.models import CostDaily
from accelboard.costs.services import (
    cost_day_compute,
    cost_days_compute,
    cost_days_with_late_data,
    month_days,
)
from tests.costs.builders import (
    accelerator_price_create,
    carbon_create,
    electricity_price_create,
    host_place,
    minutes_load,
    rate_create,
    site_create,
)
from tests.factories import H100, accelerator_type_from, host_create

pytestmark = pytest.mark.django_db

DAY = date(2026, 11, 2)
MIDNIGHT = datetime(2026, 11, 2, tzinfo=UTC)


@pytest.fixture
def p5(team):
    """An 8×H100 p5.48xlarge in AWS us-east-1 at $98.32/h ($12.29 per GPU-hour), its site at
    $0.10/kWh, PUE 1.58, 475 gCO2e/kWh."""
    h100 = accelerator_type_from(H100)
    host, gpus = host_create(team=team, gpus=8, gpu_name=H100["driver_name"])
    site = site_create()
    host_place(host, site=site, project="search")
    price = accelerator_price_create(accelerator_type=h100)
    electricity = electricity_price_create(site=site)
    return host, gpus, h100, price, electricity


def test_it_costs_a_day_of_8_h100_as_worked_by_hand(p5):
    # 8 GPUs × 10 h: 6 h at 75 % drawing 700 W, then 4 h at 5 % drawing 100 W.
    host, gpus, h100, price, electricity = p5
    minutes_load(gpus=gpus, start=MIDNIGHT, minutes=360, util=75.0, power_w=700.0)
    minutes_load(gpus=gpus, start=MIDNIGHT + timedelta(hours=6), minutes=240, util=5.0, power_w=100.0)

    result = cost_day_compute(day=DAY)

    assert result.rows == 1
    row = CostDaily.objects.get()
    assert (row.day, row.host_id, row.team_id, row.project, row.gpus) == (
        DAY,
        host.pk,
        host.team_id,
        "search",
        8,
    )
    assert row.accelerator_type_id == h100.pk
    # Allocation 8 × 10 h = 80 GPU-h; usage 8 × (6 × 0.75 + 4 × 0.05) = 37.6; idle 8 × 4 = 32.
    assert row.alloc_hours == pytest.approx(80.0)
    assert row.busy_hours == pytest.approx(37.6)
    assert row.idle_hours == pytest.approx(32.0)
    # $98.32 / 8 = $12.29 per GPU-hour: capacity 80 × 12.29 = 983.20; usage 37.6 × 12.29 =
    # 462.104; idle 32 × 12.29 = 393.28.
    assert row.gpu_hour_rate == Decimal("12.290000")
    assert row.capacity_cost == Decimal("983.2000")
    assert row.usage_cost == Decimal("462.1040")
    assert row.idle_cost == Decimal("393.2800")
    # Energy per GPU 360 × 42 kJ + 240 × 6 kJ = 16.56 MJ; × 8 = 132.48 MJ = 36.8 kWh;
    # × PUE 1.58 = 58.144 kWh; × $0.10 = $5.8144; × 475 g = 27.6184 kg.
    assert row.energy_kwh == pytest.approx(36.8)
    assert row.energy_kwh_pue == pytest.approx(58.144)
    assert row.energy_cost == Decimal("5.8144")
    assert row.carbon_kg == pytest.approx(27.6184)
    assert row.total_cost == Decimal("989.0144")
    assert row.currency == "USD"
    assert (row.accelerator_price_id, row.electricity_price_id) == (price.pk, electricity.pk)
    assert row.price_stale is False
    assert row.flags == []
    assert JobRun.objects.filter(name="cost_day_compute", status="succeeded", rows=1).exists()


def test_it_replaces_a_recomputed_day_instead_of_doubling_it(p5):
    host, gpus, h100, price, electricity = p5
    minutes_load(gpus=gpus, start=MIDNIGHT, minutes=60, util=50.0, power_w=400.0)
    cost_day_compute(day=DAY)
    assert CostDaily.objects.get().alloc_hours == pytest.approx(8.0)

    # Late data: another hour of telemetry arrives for the same day; the nightly pass sees it.
    minutes_load(gpus=gpus, start=MIDNIGHT + timedelta(hours=5), minutes=60, util=50.0, power_w=400.0)
    assert cost_days_with_late_data(since=DAY, until=DAY) == [DAY]
    cost_day_compute(day=DAY)
    cost_day_compute(day=DAY)

    row = CostDaily.objects.get()
    assert row.alloc_hours == pytest.approx(16.0)
    assert row.capacity_cost == Decimal("196.6400")  # 16 GPU-h × 12.29, once
    assert cost_days_with_late_data(since=DAY, until=DAY) == []


def test_it_uses_the_corrected_price_after_a_price_correction(p5):
    host, gpus, h100, price, electricity = p5
    minutes_load(gpus=gpus, start=MIDNIGHT, minutes=60, util=50.0, power_w=None)
    cost_day_compute(day=DAY)
    assert CostDaily.objects.get().capacity_cost == Decimal("98.3200")

    price.price_per_hour = Decimal("54.076")  # the June 2025 cut: $6.7595 per GPU-hour
    price.save()
    cost_day_compute(day=DAY)

    row = CostDaily.objects.get()
    assert row.capacity_cost == Decimal("54.0760")
    assert row.energy_kwh is None and "no-energy" in row.flags  # no power, no counter: no energy


def test_it_marks_a_day_priced_from_a_stale_row(p5):
    host, gpus, h100, price, electricity = p5
    price.fetched_on = datetime.now(UTC).date() - timedelta(days=31)
    price.save()
    minutes_load(gpus=gpus[:1], start=MIDNIGHT, minutes=60, util=50.0, power_w=400.0)
    cost_day_compute(day=DAY)
    assert CostDaily.objects.get().price_stale is True


def test_it_leaves_an_unpriced_host_unpriced_and_says_so(team):
    h100 = accelerator_type_from(H100)
    host, gpus = host_create(team=team, gpus=2, gpu_name=H100["driver_name"])
    host_place(host, site=None, provider="gcp", region="europe-west4", instance_type="a3-highgpu-2g")
    accelerator_price_create(accelerator_type=h100)  # an AWS row: not this host's price
    carbon_create(provider="gcp", region="europe-west4", g_per_kwh=300.0, pue=1.1)
    minutes_load(gpus=gpus, start=MIDNIGHT, minutes=60, util=50.0, power_w=500.0)
    cost_day_compute(day=DAY)

    row = CostDaily.objects.get()
    assert row.total_cost is None and row.capacity_cost is None
    assert "no-accelerator-price" in row.flags
    # Carbon from the region row: 2 × 60 × 30 kJ = 3.6 MJ = 1 kWh; × 1.1 × 300 g = 0.33 kg.
    assert row.energy_kwh == pytest.approx(1.0)
    assert row.carbon_kg == pytest.approx(0.33)
    assert row.energy_cost is None


def test_it_converts_energy_cost_only_with_an_exchange_rate(p5):
    host, gpus, h100, price, electricity = p5
    electricity.currency = "EUR"
    electricity.save()
    # 1 GPU × 60 min at 1000 W = 1 kWh; × 1.58 × €0.10 = €0.158.
    minutes_load(gpus=gpus[:1], start=MIDNIGHT, minutes=60, util=50.0, power_w=1000.0)
    cost_day_compute(day=DAY)
    row = CostDaily.objects.get()
    assert row.total_cost is None and "no-exchange-rate" in row.flags
    assert row.capacity_cost == Decimal("12.2900")

    rate_create(from_currency="EUR", to_currency="USD", rate="1.10")
    cost_day_compute(day=DAY)
    row = CostDaily.objects.get()
    assert row.energy_cost == Decimal("0.1738")  # €0.158 × 1.10
    assert row.total_cost == Decimal("12.4638")


def test_it_computes_a_month_day_by_day_for_one_team(p5, other_team):
    host, gpus, h100, price, electricity = p5
    other_host, other_gpus = host_create(team=other_team, gpus=1, gpu_name=H100["driver_name"])
    host_place(other_host, site=None)
    for offset in (0, 1):
        minutes_load(
            gpus=gpus[:1], start=MIDNIGHT + timedelta(days=offset), minutes=30, util=20.0, power_w=None
        )
        minutes_load(
            gpus=other_gpus, start=MIDNIGHT + timedelta(days=offset), minutes=30, util=20.0, power_w=None
        )

    results = cost_days_compute(days=month_days(month=DAY, until=date(2026, 11, 5)), team_id=host.team_id)

    assert [r.day.day for r in results] == [1, 2, 3, 4, 5]
    assert sorted(CostDaily.objects.values_list("day", "host_id")) == [
        (DAY, host.pk),
        (DAY + timedelta(days=1), host.pk),
    ]
