"""Report selectors over CostDaily: month totals, breakdowns, series, forecast, drill-down."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from accelboard.costs.selectors import (
    cost_breakdown,
    cost_daily_series,
    cost_drilldown,
    cost_month_forecast,
    cost_month_summary,
)
from accelboard.costs.services import cost_days_compute
from tests.costs.builders import (
    accelerator_price_create,
    electricity_price_create,
    host_place,
    minutes_load,
    rate_create,
    site_create,
)
from tests.factories import H100, accelerator_type_from, host_create

pytestmark = pytest.mark.django_db

NOV1 = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture
def fleet(team, other_team):
    """Team A: 2×H100 on AWS at $98.32/8 per GPU-hour, project "search". Team B: 1×H100 on
    Lambda at €3.00/h (priced in EUR). Each GPU held 1 h a day on Nov 1-3 and Oct 31, at 50 %,
    no energy signal (capacity only, so totals are easy to state)."""
    h100 = accelerator_type_from(H100)
    site = site_create()
    a, a_gpus = host_create(team=team, gpus=2, gpu_name=H100["driver_name"])
    host_place(a, site=site, project="search")
    b, b_gpus = host_create(team=other_team, gpus=1, gpu_name=H100["driver_name"])
    host_place(b, site=None, provider="lambda", region="us-west-1", instance_type="gpu_1x_h100_sxm5")
    accelerator_price_create(accelerator_type=h100)
    accelerator_price_create(
        accelerator_type=h100,
        price_per_hour="3.00",
        count=1,
        provider="lambda",
        region="us-west-1",
        instance_type="gpu_1x_h100_sxm5",
        currency="EUR",
    )
    electricity_price_create(site=site)
    for offset in (-1, 0, 1, 2):
        start = NOV1 + timedelta(days=offset)
        minutes_load(gpus=a_gpus + b_gpus, start=start, minutes=60, util=50.0, power_w=None)
    cost_days_compute(days=[date(2026, 10, 31), date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 3)])
    return a, b


def test_it_sums_a_month_and_keeps_other_currencies_apart_without_a_rate(fleet, team, other_team):
    summary = cost_month_summary(team_ids=[team.pk, other_team.pk], month=date(2026, 11, 1))
    # Team A: 2 GPU-h/day × 3 days × $12.29 = $73.74. Team B is in EUR and no rate exists.
    assert summary["total_cost"] == Decimal("73.7400")
    assert summary["alloc_hours"] == pytest.approx(9.0)
    assert summary["unconverted"] == [
        {
            "key": None,
            "currency": "EUR",
            "capacity_cost": Decimal("9.0000"),
            "usage_cost": Decimal("4.5000"),
            "idle_cost": Decimal("0.0000"),
            "energy_cost": None,
            "total_cost": Decimal("9.0000"),
        }
    ]
    # October had one day: $24.58; November is 3 times that: +200 %.
    assert summary["previous_total"] == Decimal("24.5800")
    assert summary["change_pct"] == pytest.approx(200.0)


def test_it_converts_with_a_rate_from_the_book(fleet, team, other_team):
    rate = rate_create(from_currency="EUR", to_currency="USD", rate="1.10")
    summary = cost_month_summary(team_ids=None, month=date(2026, 11, 1))
    # $73.74 + €9.00 × 1.10 = $83.64.
    assert summary["total_cost"] == Decimal("83.6400")
    assert summary["unconverted"] == []
    assert summary["exchange_rate_ids"] == [rate.pk]


def test_it_shows_a_team_only_its_own_costs(fleet, team):
    summary = cost_month_summary(team_ids=[team.pk], month=date(2026, 11, 1))
    assert summary["total_cost"] == Decimal("73.7400") and summary["unconverted"] == []


def test_it_breaks_spend_down_by_team_project_and_provider(fleet, team, other_team):
    rate_create(from_currency="EUR", to_currency="USD", rate="1.10")
    by_team = cost_breakdown(team_ids=None, month=date(2026, 11, 1), by="team")
    assert [(i["label"], i["total_cost"]) for i in by_team] == [
        (team.name, Decimal("73.7400")),
        (other_team.name, Decimal("9.9000")),
    ]
    by_project = cost_breakdown(team_ids=None, month=date(2026, 11, 1), by="project")
    assert {i["label"]: i["total_cost"] for i in by_project} == {
        "search": Decimal("73.7400"),
        "(none)": Decimal("9.9000"),
    }
    by_provider = cost_breakdown(team_ids=None, month=date(2026, 11, 1), by="provider")
    assert [i["key"] for i in by_provider] == ["aws", "lambda"]
    with pytest.raises(ValueError, match="by: 'colour'"):
        cost_breakdown(team_ids=None, month=date(2026, 11, 1), by="colour")


def test_it_gives_a_daily_series_with_every_day_of_the_range(fleet, team):
    series = cost_daily_series(team_ids=[team.pk], start=date(2026, 11, 1), end=date(2026, 11, 5), by="team")
    assert series["days"] == [date(2026, 11, d) for d in (1, 2, 3, 4)]
    assert series["series"][0]["values"] == [Decimal("24.5800")] * 3 + [Decimal(0)]


def test_it_forecasts_the_month_from_its_run_rate(fleet, team):
    # Three complete days at $24.58 a day, 30 days in November: $737.40.
    forecast = cost_month_forecast(team_ids=[team.pk], month=date(2026, 11, 1), today=date(2026, 11, 4))
    assert forecast["run_rate_per_day"] == Decimal("24.58")
    assert forecast["forecast"] == Decimal("737.40")
    past = cost_month_forecast(team_ids=[team.pk], month=date(2026, 10, 1), today=date(2026, 11, 4))
    assert past["complete"] is True and past["forecast"] == Decimal("24.5800")


def test_it_drills_down_to_hosts_days_and_price_rows(fleet, team, django_assert_max_num_queries):
    a, b = fleet
    with django_assert_max_num_queries(8):
        drill = cost_drilldown(team_ids=[team.pk], month=date(2026, 11, 1), filters={"project": "search"})
        rows = list(drill["rows"])
        [r.accelerator_price.source for r in rows]
    assert [h["hostname"] for h in drill["hosts"]] == [a.hostname]
    assert drill["hosts"][0]["days"] == 3
    assert [d["day"] for d in drill["days"]] == [date(2026, 11, d) for d in (1, 2, 3)]
    assert [p.provider for p in drill["prices"]["accelerator"]] == ["aws"]
    assert len(drill["prices"]["electricity"]) == 1
    with pytest.raises(ValueError, match="filters: 'colour'"):
        cost_drilldown(team_ids=None, month=date(2026, 11, 1), filters={"colour": "red"})
