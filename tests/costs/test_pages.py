"""Finance pages: who sees which team's costs, the report's numbers against the CostDaily rows
made here by hand, the drill-down to hosts, days and price rows, bad input, query budgets.

The fleet (``cost_fleet``), with figures worked by hand:

- ``gpu-a`` (team "Inference Platform", project "search", AWS us-east-1, 8× H100 at
  $98.32/h for the instance = $12.29 per GPU-hour, electricity $0.10/kWh at PUE 1.5 and
  475 g/kWh): 1 and 2 October 2026, each day 8 GPUs × 24 h = 192 GPU-hours held, 48 of them
  idle (below 10 %), 100 kWh at the device.
  capacity 192 × 12.29 = 2,359.68; idle 48 × 12.29 = 589.92; energy 100 × 1.5 × 0.10 = 15.00;
  spend 2,374.68 a day, 4,749.36 for the two days; carbon 150 kWh × 0.475 = 71.25 kg a day.
  30 September 2026 (the month before): 80 GPU-hours and 10 kWh: 983.20 + 1.50 = 984.70.
- ``gpu-b`` (team "Research", project "llm", on-prem, 2× L4 at $0.50 per GPU-hour, no
  electricity row): 1 October 2026, 100 GPU-hours = 50.00 on a price fetched in 2025 (stale);
  its energy cost is unknown (NULL), not zero.

So October: finance and staff see 4,799.36; the inference team sees 4,749.36 against
September's 984.70 (one day of data against two: no change is shown); research's lead sees 50.00.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from django.urls import reverse
from django.utils import timezone

from accelboard.benchmarks.services import model_variant_get_or_create
from accelboard.costs.models import (
    AcceleratorPrice,
    CostDaily,
    ElectricityPrice,
    ExchangeRate,
    ServingCostDaily,
)
from accelboard.costs.report_selectors import forecast_month
from accelboard.fleet.models import Host, Site
from tests import factories

pytestmark = pytest.mark.django_db

OCT = dt.date(2026, 10, 1)
# Staleness of a price row is judged against today (30 days); this one is always fresh.
FRESH = timezone.now().date() - dt.timedelta(days=10)


def cost_row(
    *,
    host: Any,
    day: dt.date,
    accelerator_type: Any,
    gpus: int,
    rate: Decimal,
    alloc_hours: float,
    idle_hours: float,
    kwh: float,
    accelerator_price: AcceleratorPrice | None,
    electricity_price: ElectricityPrice | None,
    stale: bool = False,
    currency: str = "USD",
) -> CostDaily:
    """One CostDaily row with its money worked out from the inputs (as the engine does)."""
    pue = electricity_price.pue if electricity_price else 1.0
    capacity = (Decimal(str(alloc_hours)) * rate).quantize(Decimal("0.0001"))
    energy = (
        (Decimal(str(kwh)) * Decimal(str(pue)) * electricity_price.price_per_kwh).quantize(Decimal("0.0001"))
        if electricity_price
        else None
    )
    return CostDaily.objects.create(
        day=day,
        team=host.team,
        host=host,
        project=host.project,
        accelerator_type=accelerator_type,
        provider=host.provider,
        region=host.region,
        gpus=gpus,
        alloc_hours=alloc_hours,
        busy_hours=alloc_hours - idle_hours,
        idle_hours=idle_hours,
        energy_kwh=kwh,
        energy_kwh_pue=kwh * pue,
        carbon_kg=kwh * pue * 0.475,
        gpu_hour_rate=rate,
        capacity_cost=capacity,
        usage_cost=(Decimal(str(alloc_hours - idle_hours)) * rate).quantize(Decimal("0.0001")),
        energy_cost=energy,
        idle_cost=(Decimal(str(idle_hours)) * rate).quantize(Decimal("0.0001")),
        total_cost=capacity + (energy or 0),
        currency=currency,
        accelerator_price=accelerator_price,
        electricity_price=electricity_price,
        price_stale=stale,
        computed_at=timezone.now(),
    )


def _host(*, team: Any, hostname: str, project: str, provider: str, region: str, site: Site | None) -> Any:
    host, _ = factories.host_create(team=team, gpus=1, hostname=hostname)
    host.project, host.provider, host.region, host.site = project, provider, region, site
    host.save(update_fields=["project", "provider", "region", "site"])
    return host


@pytest.fixture
def cost_fleet(team: Any, other_team: Any) -> dict[str, Any]:
    h100 = factories.accelerator_type_from(factories.H100)
    l4 = factories.accelerator_type_from(factories.L4)
    site = Site.objects.create(name="dc-east", provider="on-prem", region="east")
    power = ElectricityPrice.objects.create(
        site=site,
        price_per_kwh=Decimal("0.10"),
        pue=1.5,
        carbon_g_per_kwh=475.0,
        source="utility tariff 2026",
        fetched_on=FRESH,
        valid_from=dt.date(2026, 1, 1),
    )
    p5 = AcceleratorPrice.objects.create(
        accelerator_type=h100,
        accelerator_count=8,
        provider="aws",
        region="us-east-1",
        instance_type="p5.48xlarge",
        price_per_hour=Decimal("98.32"),
        source="skypilot-catalog aws/vms.csv",
        fetched_on=FRESH,
        valid_from=dt.date(2026, 1, 1),
    )
    onprem = AcceleratorPrice.objects.create(
        accelerator_type=l4,
        accelerator_count=1,
        provider="on-prem",
        pricing_model="on-prem",
        price_per_hour=Decimal("0.50"),
        source="capex sheet",
        fetched_on=dt.date(2025, 6, 1),
        valid_from=dt.date(2025, 1, 1),
    )
    a = _host(team=team, hostname="gpu-a", project="search", provider="aws", region="us-east-1", site=site)
    b = _host(team=other_team, hostname="gpu-b", project="llm", provider="on-prem", region="east", site=site)
    rate = Decimal("12.29")
    rows = [
        cost_row(
            host=a,
            day=day,
            accelerator_type=h100,
            gpus=8,
            rate=rate,
            alloc_hours=192.0,
            idle_hours=48.0,
            kwh=100.0,
            accelerator_price=p5,
            electricity_price=power,
        )
        for day in (OCT, OCT + dt.timedelta(days=1))
    ]
    rows.append(
        cost_row(
            host=a,
            day=dt.date(2026, 9, 30),
            accelerator_type=h100,
            gpus=8,
            rate=rate,
            alloc_hours=80.0,
            idle_hours=0.0,
            kwh=10.0,
            accelerator_price=p5,
            electricity_price=power,
        )
    )
    rows.append(
        cost_row(
            host=b,
            day=OCT,
            accelerator_type=l4,
            gpus=2,
            rate=Decimal("0.50"),
            alloc_hours=100.0,
            idle_hours=0.0,
            kwh=2.0,
            accelerator_price=onprem,
            electricity_price=None,
            stale=True,
        )
    )
    return {"a": a, "b": b, "h100": h100, "l4": l4, "p5": p5, "onprem": onprem, "power": power, "rows": rows}


def _report(client: Any, **params: str) -> Any:
    return client.get(reverse("costs:report"), {"month": "2026-10", **params})


def _drill(client: Any, **params: str) -> Any:
    return client.get(reverse("costs:drill"), {"month": "2026-10", **params})


# --- who sees what -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "total", "teams"),
    [
        ("finance", "4799.36", ["Inference Platform", "Research"]),
        ("staff", "4799.36", ["Inference Platform", "Research"]),
        ("lead", "4749.36", ["Inference Platform"]),
        ("engineer", "4749.36", ["Inference Platform"]),
        ("other_lead", "50.00", ["Research"]),
    ],
)
def test_it_scopes_the_report_to_the_teams_each_role_may_see(
    cast: dict[str, Any],
    cost_fleet: dict[str, Any],
    login_client: Any,
    who: str,
    total: str,
    teams: list[str],
) -> None:
    response = _report(login_client(cast[who]))
    assert response.status_code == 200
    report = response.context["report"]
    assert report.total.total_cost == Decimal(total)
    assert [group.label for group in report.breakdowns["team"]] == teams
    assert f"{Decimal(total):,.2f}" in response.content.decode()
    hidden = {"Inference Platform", "Research"} - set(teams)
    table = response.content.decode().split('data-table="by_team"')[1].split("</table>")[0]
    for name in hidden:
        assert name not in table


def test_it_shows_the_outsider_an_empty_state_and_no_numbers(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    response = _report(login_client(cast["outsider"]))
    assert response.status_code == 200
    assert response.context["report"].total.rows == 0
    assert "You are not in a team yet" in response.content.decode()
    assert "gpu-a" not in _drill(login_client(cast["outsider"])).content.decode()


@pytest.mark.parametrize(
    ("who", "team_slug", "status"),
    [
        ("outsider", "inference", 404),
        ("engineer", "research", 404),
        ("lead", "research", 404),
        ("engineer", "no-such-team", 404),
        ("engineer", "inference", 200),
        ("finance", "research", 200),
        ("staff", "research", 200),
    ],
)
def test_it_answers_404_for_a_team_filter_the_user_may_not_see(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any, who: str, team_slug: str, status: int
) -> None:
    client = login_client(cast[who])
    assert _report(client, team=team_slug).status_code == status
    assert _drill(client, team=team_slug).status_code == status


def test_it_answers_404_for_another_teams_host_in_the_drill_down(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    assert _drill(login_client(cast["engineer"]), host="gpu-b").status_code == 404
    assert _drill(login_client(cast["finance"]), host="gpu-b").status_code == 200


def test_it_tells_apart_two_teams_hosts_of_the_same_name_in_the_drill_down(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    # Host names are unique within a team only: the other team's host may be "gpu-a" too.
    Host.objects.filter(pk=cost_fleet["b"].pk).update(hostname="gpu-a")
    client = login_client(cast["finance"])  # sees both teams' costs
    hosts = _drill(client).context["tables"][0]
    links = sorted(row["_link"].split("?")[1] for row in hosts.rows)
    assert links == ["month=2026-10&team=inference&host=gpu-a", "month=2026-10&team=research&host=gpu-a"]
    ambiguous = _drill(client, host="gpu-a")
    assert ambiguous.status_code == 404
    for slug, host in (("inference", cost_fleet["a"]), ("research", cost_fleet["b"])):
        days = _drill(client, team=slug, host="gpu-a")
        assert days.status_code == 200
        day_table = days.context["tables"][1]
        assert day_table.rows and {r["host_id"] for r in day_table.rows} == {host.pk}


def test_it_sends_anonymous_visitors_to_the_login_page(client: Any, cost_fleet: dict[str, Any]) -> None:
    response = _report(client)
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


# --- the numbers -------------------------------------------------------------------------------


def test_it_adds_up_the_month_with_idle_energy_and_carbon_beside_money(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any, team: Any
) -> None:
    report = _report(login_client(cast["engineer"])).context["report"]
    total = report.total
    assert total.capacity_cost == Decimal("4719.36")
    assert total.idle_cost == Decimal("1179.84")
    assert total.energy_cost == Decimal("30.00")
    assert total.total_cost == Decimal("4749.36")
    assert total.alloc_hours == pytest.approx(384.0)
    assert total.idle_hours == pytest.approx(96.0)
    assert total.energy_kwh == pytest.approx(200.0)
    assert total.energy_kwh_pue == pytest.approx(300.0)
    assert total.carbon_kg == pytest.approx(142.5)
    # Month over month: October is a past month, compared whole with the whole of September, per
    # day (31 against 30 days). Costs on 2 of October's days against 1 of September's would read
    # the fleet's start (or a gap) as growth: no change is shown, and the page says why.
    assert report.comparison.label == "Oct 1–31 vs Sep 1–30, per day"
    assert report.total.previous_total == Decimal("984.70")
    assert (len(report.total.covered_now), len(report.total.covered_before)) == (2, 1)
    assert report.change_pct is None
    (inference,) = report.breakdowns["team"]
    assert inference.previous_total == Decimal("984.70")
    assert inference.change_pct is None
    html = _report(login_client(cast["engineer"])).content.decode()
    assert "no change shown: costs on 2 of 31 days of Oct 1–31, on 1 of 30 of Sep 1–30" in html
    # A past month has no forecast.
    assert report.forecast is None


def test_it_breaks_spend_down_by_project_type_and_provider(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    report = _report(login_client(cast["finance"])).context["report"]
    spend = {
        name: {g.label: float(g.total_cost) for g in groups} for name, groups in report.breakdowns.items()
    }
    assert spend["project"] == {"search": 4749.36, "llm": 50.0}
    assert spend["accelerator_type"] == {"H100 SXM 80GB": 4749.36, "L4": 50.0}
    assert spend["provider"] == {"aws": 4749.36, "on-prem": 50.0}
    daily = {(row["day"], row["group"]): float(row["spend"]) for row in report.daily["team"]}
    assert daily == {
        (OCT, "Inference Platform"): 2374.68,
        (OCT, "Research"): 50.0,
        (OCT + dt.timedelta(days=1), "Inference Platform"): 2374.68,
    }


def test_it_shows_serving_spend_by_model_and_what_no_model_accounts_for(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    # gpu-a served Llama-3.1-8B bf16 for 40 of its 192 GPU-hours on 1 October: 40 × 12.29 = 491.60.
    variant = model_variant_get_or_create(model="Llama-3.1-8B", variant="bf16", precision="bf16")
    ServingCostDaily.objects.create(
        day=OCT,
        team=cost_fleet["a"].team,
        variant=variant,
        host=cost_fleet["a"],
        requests=1000,
        generated_tokens=2_000_000,
        gpu_hours=40.0,
        capacity_cost=Decimal("491.60"),
        energy_cost=Decimal("0"),
        cost=Decimal("491.60"),
        cost_per_1m_tokens=Decimal("245.80"),
        currency="USD",
        accelerator_price=cost_fleet["p5"],
        electricity_price=cost_fleet["power"],
        computed_at=timezone.now(),
    )
    client = login_client(cast["engineer"])
    models = [(g.label, float(g.total_cost)) for g in _report(client).context["report"].by_model]
    assert models == [("Llama-3.1-8B", 491.60), ("Not attributed to a model", round(4749.36 - 491.60, 2))]
    # Serving rows carry no accelerator type or project: under those filters no model table.
    assert _report(client, project="search").status_code == 200
    assert _report(client, accelerator_type="h100-sxm-80gb").context["report"].by_model == []
    # Another team's engineer sees no model spend.
    assert _report(login_client(cast["other_lead"])).context["report"].by_model == []

    # The model's total drills down to its serving rows and the price rows they used.
    body = _report(client).content.decode()
    assert reverse("costs:drill") + "?month=2026-10&amp;model=Llama-3.1-8B" in body
    drill = _drill(client, model="Llama-3.1-8B")
    serving, prices = drill.context["tables"]
    assert [(r["day"], r["host__hostname"], r["generated_tokens"]) for r in serving.rows] == [
        (OCT, "gpu-a", 2_000_000)
    ]
    assert serving.rows[0]["total_cost"] == Decimal("491.60")
    assert serving.rows[0]["price_source"] == "skypilot-catalog aws/vms.csv"
    assert {r["source"] for r in prices.rows} == {"skypilot-catalog aws/vms.csv", "utility tariff 2026"}
    assert "serving days and prices of Llama-3.1-8B" in drill.content.decode()
    csv_body = _drill(client, model="Llama-3.1-8B", format="csv", table="serving").content.decode("utf-8-sig")
    header, line = csv_body.splitlines()
    assert "Cost per 1M tokens" in header.split(",")
    assert line.startswith("2026-10-01,gpu-a,Inference Platform,Llama-3.1-8B,bf16,1000,")
    other = _drill(login_client(cast["other_lead"]), model="Llama-3.1-8B")
    assert other.context["tables"][0].rows == []


def test_it_filters_by_provider_and_accelerator_type(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    client = login_client(cast["finance"])
    assert _report(client, provider="on-prem").context["report"].total.total_cost == Decimal("50.00")
    assert _report(client, accelerator_type="h100-sxm-80gb").context["report"].total.total_cost == Decimal(
        "4749.36"
    )
    empty = _report(client, provider="gcp")
    assert empty.context["report"].empty
    assert "No costs match these filters" in empty.content.decode()


def test_it_flags_stale_price_rows_where_they_are_used(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    finance = _report(login_client(cast["finance"]))
    assert 'id="stale-notice"' in finance.content.decode()
    assert finance.context["report"].total.stale_rows == 1
    # The inference team's rows are all on fresh prices: no warning there.
    assert 'id="stale-notice"' not in _report(login_client(cast["engineer"])).content.decode()
    prices = {row["source"]: row for row in _drill(login_client(cast["finance"])).context["tables"][-1].rows}
    assert prices["capex sheet"]["stale"] is True
    assert prices["skypilot-catalog aws/vms.csv"]["stale"] is False


def test_it_converts_currencies_only_with_a_rate_in_the_price_book(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    fleet = cost_fleet
    cost_row(
        host=fleet["a"],
        day=OCT + dt.timedelta(days=2),
        accelerator_type=fleet["l4"],
        gpus=1,
        rate=Decimal("10"),
        alloc_hours=10.0,
        idle_hours=0.0,
        kwh=0.0,
        accelerator_price=None,
        electricity_price=None,
        currency="EUR",
    )
    client = login_client(cast["engineer"])
    response = _report(client)
    assert response.context["report"].total.total_cost == Decimal("4749.36")
    assert response.context["report"].unconverted == {"EUR": Decimal("100.00")}
    assert 'id="unconverted-notice"' in response.content.decode()
    ExchangeRate.objects.create(
        from_currency="EUR",
        to_currency="USD",
        rate=Decimal("1.10"),
        source="ECB reference rate",
        fetched_on=FRESH,
        valid_from=dt.date(2026, 10, 1),
    )
    converted = _report(client).context["report"]
    assert converted.total.total_cost == Decimal("4859.36")
    assert converted.unconverted == {}


def test_it_forecasts_from_the_last_weeks_rate_when_the_fleet_grew_mid_month() -> None:
    # Nothing until 16 November, then 5,000 a day; today is the 30th (29 complete days).
    # Month-to-date / 29 would say 2,413.79/day and 72,413.79; the last 7 days say 5,000/day:
    # 70,000 so far + 5,000 × 1 day left = 75,000.
    spend = {dt.date(2026, 11, day): 5000.0 for day in range(16, 30)}
    forecast = forecast_month(month=dt.date(2026, 11, 1), daily_spend=spend, today=dt.date(2026, 11, 30))
    assert forecast is not None
    assert forecast["run_rate"] == pytest.approx(5000.0)
    assert forecast["forecast"] == pytest.approx(75000.0)


def test_it_forecasts_the_current_month_from_its_run_rate(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    # "Today" is 3 October: two complete days (4,749.36 for the team) -> 2,374.68/day × 31 days.
    # The report opens on the last complete month, September; October is a click away.
    client = login_client(cast["engineer"])
    with mock.patch("accelboard.costs.views._today", return_value=dt.date(2026, 10, 3)):
        opened = client.get(reverse("costs:report"))
        assert opened.context["report"].month == dt.date(2026, 9, 1)
        assert opened.context["report"].forecast is None
        assert 'id="current-month"' in opened.content.decode() and "month=2026-10" in opened.content.decode()
        response = client.get(reverse("costs:report"), {"month": "2026-10"})
    forecast = response.context["report"].forecast
    assert forecast["days_elapsed"] == 2
    assert forecast["forecast"] == Decimal("2374.68") * 31
    assert 'data-kpi="forecast"' in response.content.decode()
    assert 'id="current-month"' not in response.content.decode()


def test_it_leaves_out_of_the_forecast_the_day_still_running() -> None:
    spend = {dt.date(2026, 10, 1): 100.0, dt.date(2026, 10, 2): 100.0, dt.date(2026, 10, 3): 7.0}
    forecast = forecast_month(month=OCT, daily_spend=spend, today=dt.date(2026, 10, 3))
    assert forecast is not None
    # 200 so far + 100/day × 29 days left.
    assert forecast["forecast"] == pytest.approx(3100.0)
    assert forecast["days_left"] == 29
    assert forecast_month(month=OCT, daily_spend=spend, today=dt.date(2026, 10, 1)) is None
    assert forecast_month(month=OCT, daily_spend=spend, today=dt.date(2026, 11, 5)) is None


# --- drill-down --------------------------------------------------------------------------------


def test_it_drills_from_a_team_total_to_hosts_days_and_price_rows(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    client = login_client(cast["finance"])
    report = _report(client)
    body = report.content.decode()
    link = reverse("costs:drill") + "?month=2026-10&amp;team=inference"
    assert link in body
    hosts = _drill(client, team="inference")
    assert hosts.status_code == 200
    (host_table, price_table) = hosts.context["tables"]
    assert [row["host__hostname"] for row in host_table.rows] == ["gpu-a"]
    (row,) = host_table.rows
    assert row["days"] == 2
    assert row["total_cost"] == Decimal("4749.36")
    assert row["gpu_hour_rate"] == Decimal("12.29")
    assert row["price_source"] == "skypilot-catalog aws/vms.csv"
    assert row["_link"].endswith("host=gpu-a")
    days = _drill(client, team="inference", host="gpu-a")
    host_table, day_table, price_table = days.context["tables"]
    assert [r["day"] for r in day_table.rows] == [OCT, OCT + dt.timedelta(days=1)]
    assert all(r["total_cost"] == Decimal("2374.68") for r in day_table.rows)
    assert {(r["kind"], r["source"]) for r in price_table.rows} == {
        ("accelerator", "skypilot-catalog aws/vms.csv"),
        ("electricity", "utility tariff 2026"),
    }
    assert FRESH.isoformat() in days.content.decode()


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"month": "2026-13"}, "month"),
        ({"month": "October"}, "month"),
        ({"provider": "moon"}, "provider"),
        ({"accelerator_type": "no-such-gpu"}, "accelerator_type"),
        ({"format": "pdf"}, "format"),
    ],
)
def test_it_answers_400_naming_the_bad_field(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any, params: dict[str, str], field: str
) -> None:
    client = login_client(cast["finance"])
    for response in (_report(client, **params), _drill(client, **params)):
        assert response.status_code == 400
        assert f"{field}:" in response.content.decode()


def test_it_answers_400_for_an_unknown_chart_grouping(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    response = _report(login_client(cast["finance"]), by="colour")
    assert response.status_code == 400
    assert "by:" in response.content.decode()


def test_it_answers_400_for_an_unknown_table_or_a_csv_without_one(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    client = login_client(cast["finance"])
    unknown = _report(client, format="csv", table="salaries")
    assert unknown.status_code == 400
    assert unknown.content.decode().startswith("table: unknown table 'salaries'")
    missing = _drill(client, format="csv")
    assert missing.status_code == 400
    assert missing.content.decode().startswith("table:")
    assert _drill(client, day="2026-10-41").status_code == 400


# --- query budgets -----------------------------------------------------------------------------


def test_it_reads_the_report_and_drill_down_in_a_flat_number_of_queries(
    cast: dict[str, Any],
    cost_fleet: dict[str, Any],
    login_client: Any,
    django_assert_max_num_queries: Any,
    team: Any,
) -> None:
    client = login_client(cast["finance"])
    for n in range(6):
        host = _host(team=team, hostname=f"gpu-x{n}", project=f"p{n}", provider="gcp", region="eu", site=None)
        for day in range(5):
            cost_row(
                host=host,
                day=OCT + dt.timedelta(days=day),
                accelerator_type=cost_fleet["h100"],
                gpus=8,
                rate=Decimal("3"),
                alloc_hours=192.0,
                idle_hours=10.0,
                kwh=50.0,
                accelerator_price=cost_fleet["p5"],
                electricity_price=cost_fleet["power"],
            )
    # session, user, finance check, team and type choices, aggregate, serving, rates.
    with django_assert_max_num_queries(9):
        assert _report(client).status_code == 200
    with django_assert_max_num_queries(11):
        assert _drill(client).status_code == 200
    with django_assert_max_num_queries(12):
        assert _drill(client, host="gpu-x1").status_code == 200
    with django_assert_max_num_queries(10):
        assert _drill(client, model="Llama-3.1-8B").status_code == 200


def test_it_compares_a_month_in_progress_with_the_same_complete_days_of_the_month_before(
    cast: dict[str, Any], cost_fleet: dict[str, Any], login_client: Any
) -> None:
    # gpu-a: 12.29 (1 GPU-hour) every day of November and on 1-3 December, then 1.229 so far today,
    # 4 December. December so far against the whole of November read −89.7 %; like with like
    # (1-3 December against 1-3 November) there is no change.
    fleet = cost_fleet
    for day in [dt.date(2026, 11, d) for d in range(1, 31)] + [dt.date(2026, 12, d) for d in (1, 2, 3)]:
        cost_row(host=fleet["a"], day=day, accelerator_type=fleet["h100"], gpus=1, rate=Decimal("12.29"),
                 alloc_hours=1.0, idle_hours=0.0, kwh=0.0, accelerator_price=fleet["p5"], electricity_price=None)  # fmt: skip
    cost_row(host=fleet["a"], day=dt.date(2026, 12, 4), accelerator_type=fleet["h100"], gpus=1, rate=Decimal("12.29"),
             alloc_hours=0.1, idle_hours=0.0, kwh=0.0, accelerator_price=fleet["p5"], electricity_price=None)  # fmt: skip
    client = login_client(cast["engineer"])
    with mock.patch("accelboard.costs.views._today", return_value=dt.date(2026, 12, 4)):
        response = _report(client, month="2026-12")
    report = response.context["report"]
    assert report.total.total_cost == Decimal("38.0990")
    assert report.comparison.label == "Dec 1–3 vs Nov 1–3"
    assert report.total.previous_total == Decimal("36.8700")
    assert report.change_pct == 0.0
    assert report.breakdowns["team"][0].change_pct == 0.0
    html = response.content.decode()
    assert "0.0 % (Dec 1–3 vs Nov 1–3; 36.87 before)" in html
    assert 'data-window="Dec 1–3 vs Nov 1–3"' in html
    # On the 1st, no day of December is complete: no change at all, and the page says so.
    with mock.patch("accelboard.costs.views._today", return_value=dt.date(2026, 12, 1)):
        first = _report(client, month="2026-12")
    assert first.context["report"].change_pct is None
    assert "no complete day yet to compare with the month before" in first.content.decode()
