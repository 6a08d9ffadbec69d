"""Selectors over CostDaily for other pages (the overview): day totals and the daily series.

The monthly report, its breakdowns, forecast and drill-down are tested with the finance pages
(tests/costs/test_pages.py, test_exports.py).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from accelboard.core.access import EVERY_TEAM, Action, Scope, scope_for_team
from accelboard.costs.selectors import cost_daily_series, cost_days_totals
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


def _november(scope):
    """Sums of Nov 1-3 from ``cost_days_totals``, the per-day totals the overview adds up."""
    totals = cost_days_totals(scope=scope, start=date(2026, 11, 1), end=date(2026, 11, 4))
    days = totals["days"].values()
    return {
        "total_cost": sum((d["total_cost"] for d in days), Decimal(0)),
        "alloc_hours": sum(d["alloc_hours"] for d in days),
        "unconverted": totals["unconverted"],
    }


def test_it_sums_days_and_keeps_other_currencies_apart_without_a_rate(fleet, team, other_team):
    summary = _november(Scope(teams={t.pk: frozenset({Action.VIEW_COSTS}) for t in (team, other_team)}))
    # Team A: 2 GPU-h/day × 3 days × $12.29 = $73.74. Team B is in EUR and no rate exists.
    assert summary["total_cost"] == Decimal("73.7400")
    assert summary["alloc_hours"] == pytest.approx(9.0)
    assert [(u["key"], u["currency"], u["total_cost"]) for u in summary["unconverted"]] == [
        (date(2026, 11, d), "EUR", Decimal("3.0000")) for d in (1, 2, 3)
    ]


def test_it_converts_with_a_rate_from_the_book(fleet, team, other_team):
    rate_create(from_currency="EUR", to_currency="USD", rate="1.10")
    summary = _november(EVERY_TEAM)
    # $73.74 + €9.00 × 1.10 = $83.64.
    assert summary["total_cost"] == Decimal("83.6400")
    assert summary["unconverted"] == []


def test_it_shows_a_team_only_its_own_costs(fleet, team):
    summary = _november(scope_for_team(team, [Action.VIEW_COSTS]))
    assert summary["total_cost"] == Decimal("73.7400") and summary["unconverted"] == []


def test_it_gives_a_daily_series_with_every_day_of_the_range(fleet, team):
    series = cost_daily_series(
        scope=scope_for_team(team, [Action.VIEW_COSTS]),
        start=date(2026, 11, 1),
        end=date(2026, 11, 5),
        by="team",
    )
    assert series["days"] == [date(2026, 11, d) for d in (1, 2, 3, 4)]
    assert series["series"][0]["values"] == [Decimal("24.5800")] * 3 + [Decimal(0)]
