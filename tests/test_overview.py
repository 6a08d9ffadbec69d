"""The overview page as each member of the cast sees it, and its query budget."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.urls import reverse

from accelboard.testing.plotly import trace_values
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(team: Any, other_team: Any) -> dict[str, Any]:
    """Team: two H100 hosts (2 GPUs each) with telemetry; other team: one L4 host (4 GPUs)."""
    factories.accelerator_type_from(factories.H100)
    factories.accelerator_type_from(factories.L4)
    host_a, gpus_a = factories.host_create(team=team, gpus=2)
    host_b, gpus_b = factories.host_create(team=team, gpus=2)
    host_c, gpus_c = factories.host_create(team=other_team, gpus=4, gpu_name=factories.L4["driver_name"])
    factories.telemetry_days_load(gpus=gpus_a + gpus_b, days=2, interval_s=600, util_mean=70.0)
    factories.telemetry_days_load(gpus=gpus_c, days=2, interval_s=600, util_mean=20.0, power_w=60.0, seed=11)
    return {"team_hosts": [host_a, host_b], "other_hosts": [host_c]}


def _trace_names(figure: dict[str, Any]) -> list[str]:
    return [trace["name"] for trace in figure["data"]]


def test_it_redirects_anonymous_users_to_login(client: Any) -> None:
    response = client.get(reverse("dashboard:overview"))
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next=/"


def test_it_shows_the_outsider_no_hosts(login_client: Any, outsider: Any, fleet: dict[str, Any]) -> None:
    response = login_client(outsider).get(reverse("dashboard:overview"))
    assert response.status_code == 200
    summary = response.context["summary"]
    assert summary["hosts"] == 0
    assert summary["gpus"] == 0
    assert response.context["has_telemetry"] is False
    # Not in a team: installing an agent would not help, joining a team would.
    assert b"You are not in a team yet" in response.content
    assert b"No telemetry yet" not in response.content


def test_it_tells_a_team_without_telemetry_how_to_get_some(login_client: Any, engineer: Any) -> None:
    response = login_client(engineer).get(reverse("dashboard:overview"))
    assert response.status_code == 200
    assert response.context["has_telemetry"] is False
    assert b"No telemetry yet" in response.content
    assert b"You are not in a team yet" not in response.content
    assert b'id="utilisation-chart"' not in response.content


@pytest.mark.parametrize("who", ["lead", "engineer", "finance"])
def test_it_shows_a_team_member_their_teams_hosts_only(
    login_client: Any, cast: dict[str, Any], fleet: dict[str, Any], who: str
) -> None:
    response = login_client(cast[who]).get(reverse("dashboard:overview"))
    assert response.status_code == 200
    summary = response.context["summary"]
    assert summary["hosts"] == 2
    assert summary["gpus"] == 4
    # The other team's L4 fleet must not leak into the charts either.
    assert _trace_names(response.context["utilisation_figure"]) == ["H100 SXM 80GB"]
    assert _trace_names(response.context["energy_figure"]) == ["H100 SXM 80GB"]
    html = response.content.decode()
    assert 'data-kpi="hosts">2<' in html
    assert 'data-kpi="gpus">4<' in html


def test_it_shows_the_other_lead_only_the_other_team(
    login_client: Any, other_lead: Any, fleet: dict[str, Any]
) -> None:
    response = login_client(other_lead).get(reverse("dashboard:overview"))
    assert response.context["summary"]["hosts"] == 1
    assert response.context["summary"]["gpus"] == 4
    assert _trace_names(response.context["utilisation_figure"]) == ["L4"]


def test_it_shows_staff_every_host(login_client: Any, staff: Any, fleet: dict[str, Any]) -> None:
    response = login_client(staff).get(reverse("dashboard:overview"))
    assert response.status_code == 200
    assert response.context["summary"]["hosts"] == 3
    assert response.context["summary"]["gpus"] == 8
    assert _trace_names(response.context["utilisation_figure"]) == ["H100 SXM 80GB", "L4"]


def test_it_charts_the_mean_utilisation_of_the_rollups(
    login_client: Any, lead: Any, team: Any, other_team: Any
) -> None:
    factories.accelerator_type_from(factories.H100)
    _, gpus = factories.host_create(team=team, gpus=2)
    batch = factories.telemetry_days_load(gpus=gpus, days=1, interval_s=300, util_mean=55.0)
    response = login_client(lead).get(reverse("dashboard:overview"))
    hourly = trace_values(response.context["utilisation_figure"]["data"][0]["y"])
    # Hourly means over both GPUs, averaged over the day, equal the mean of all raw samples
    # (each hour has the same number of samples per GPU).
    assert len(hourly) == 24
    assert sum(hourly) / len(hourly) == pytest.approx(batch.gpu_util.mean(), abs=0.1)
    daily_kwh = trace_values(response.context["energy_figure"]["data"][0]["y"])
    # Energy from counter deltas: one interval less than the samples per GPU, in kWh.
    expected_kwh = sum(
        (batch.energy_mj[batch.gpu_ids == gpu.pk][-1] - batch.energy_mj[batch.gpu_ids == gpu.pk][0]) / 3.6e9
        for gpu in gpus
    )
    assert sum(daily_kwh) == pytest.approx(expected_kwh, abs=0.15)


def test_it_counts_runs_of_the_last_week_and_open_alerts(
    login_client: Any, lead: Any, team: Any, other_team: Any
) -> None:
    h100 = factories.accelerator_type_from(factories.H100)
    now = datetime.now(UTC)
    factories.run_create(team=team, accelerator_type=h100, started_at=now - timedelta(days=1))
    factories.run_create(team=team, accelerator_type=h100, started_at=now - timedelta(days=6))
    factories.run_create(team=team, accelerator_type=h100, started_at=now - timedelta(days=9))
    factories.run_create(team=other_team, accelerator_type=h100, started_at=now - timedelta(days=1))
    factories.alert_create(team=team, severity="critical")
    factories.alert_create(team=team, severity="warning", state="acknowledged")
    factories.alert_create(team=team, severity="warning", state="resolved")
    factories.alert_create(team=team, severity="info", state="dismissed")
    factories.alert_create(team=other_team, severity="critical")
    response = login_client(lead).get(reverse("dashboard:overview"))
    summary = response.context["summary"]
    assert summary["runs_week"] == 2
    # Resolved and dismissed alerts are not open; the other team's are not ours.
    assert summary["alerts"] == {"critical": 1, "warning": 1, "info": 0}
    assert 'data-kpi="runs">2<' in response.content.decode()


def test_it_keeps_the_overview_query_count_flat(
    login_client: Any, lead: Any, team: Any, django_assert_max_num_queries: Any
) -> None:
    factories.accelerator_type_from(factories.H100)
    gpus = []
    for _ in range(6):
        gpus += factories.host_create(team=team, gpus=4)[1]
    factories.telemetry_days_load(gpus=gpus, days=1, interval_s=900)
    for _ in range(5):
        factories.run_create(team=team)
    client = login_client(lead)
    # session + user, visible teams, the rollup frame, two KPI counts, the cost days and their
    # exchange rates, the spend series and its rates, two mover lists, the saturation aggregate,
    # the throttling and busy aggregates and the hosts' and GPUs' live state (the hosts and GPUs
    # cards, the throttled and busy GPUs now are counted from it, as on the hosts page): nothing
    # per host, GPU, day or alert.
    with django_assert_max_num_queries(18):
        response = client.get(reverse("dashboard:overview"))
    assert response.status_code == 200
    assert response.context["summary"]["gpus"] == 24


def test_it_keeps_the_run_list_query_count_flat(
    login_client: Any, lead: Any, team: Any, django_assert_max_num_queries: Any
) -> None:
    h100 = factories.accelerator_type_from(factories.H100)
    host, _ = factories.host_create(team=team, gpus=1)
    for n in range(30):
        factories.run_create(
            team=team, accelerator_type=h100, host=host, model=f"model-{n % 4}", batch_size=n + 1
        )
    client = login_client(lead)
    # session + user, visible teams, the filter choices (one query each), the paginator's count and
    # one joined page: a fixed number, not one per row. 30 more runs must not add a query.
    with django_assert_max_num_queries(14) as captured:
        response = client.get(reverse("benchmarks:run_list"))
    assert response.status_code == 200
    assert len(response.context["page"].object_list) == 30
    for n in range(30):
        factories.run_create(
            team=team, accelerator_type=h100, host=host, model=f"model-{n % 4}", batch_size=n + 40
        )
    with django_assert_max_num_queries(len(captured.captured_queries)):
        assert client.get(reverse("benchmarks:run_list")).status_code == 200
    assert response.content.decode().count("<tr") == 31  # the header row and one per run


def _cost_day(*, team: Any, host: Any, day: Any, hours: float, busy: float, total: str, kwh: float) -> None:
    from decimal import Decimal

    from accelboard.costs.models import CostDaily

    CostDaily.objects.create(
        day=day, team=team, host=host, provider="aws", gpus=8, alloc_hours=hours, busy_hours=busy,
        idle_hours=hours - busy, energy_kwh=kwh, energy_kwh_pue=kwh * 1.5, carbon_kg=kwh * 0.4,
        capacity_cost=Decimal(total), energy_cost=Decimal(0), idle_cost=Decimal(0), total_cost=Decimal(total),
        currency="USD", computed_at=datetime.now(UTC),
    )  # fmt: skip


def test_it_shows_this_weeks_spend_hours_and_utilisation_with_the_change_against_last_week(
    login_client: Any, lead: Any, team: Any, other_team: Any
) -> None:
    host, _ = factories.host_create(team=team, gpus=8)
    other, _ = factories.host_create(team=other_team, gpus=8)
    today = datetime.now(UTC).date()

    def day(days_ago: int, total: str, busy: float = 144.0, kwh: float = 100.0) -> None:
        _cost_day(
            team=team,
            host=host,
            day=today - timedelta(days=days_ago),
            hours=192.0,
            busy=busy,
            total=total,
            kwh=kwh,
        )

    # This week (today so far and the 6 days before): 8 GPUs × 24 h on 3 days = 576 GPU-hours,
    # 432 busy (75%), $1,000 + $1,200 + $1,000 = $3,200, 320 kWh.
    day(0, "1000")
    day(1, "1200", kwh=120.0)
    day(6, "1000")
    # The change compares complete days: the 7 before today ($2,200) against the 7 before them
    # ($1,000 + $1,000): +10%. Today's partial day is left out of it.
    day(8, "1000", busy=96.0)
    day(13, "1000", busy=96.0)
    _cost_day(team=other_team, host=other, day=today, hours=192.0, busy=10.0, total="5000", kwh=80.0)
    response = login_client(lead).get(reverse("dashboard:overview"))
    week = response.context["periods"]["week"]
    assert float(week["spend"]) == 3200.0
    assert week["gpu_hours"] == 576.0
    assert week["utilisation_pct"] == pytest.approx(75.0)
    assert week["energy_kwh"] == pytest.approx(320.0)
    assert week["spend_change_pct"] == pytest.approx(10.0)
    assert week["gpu_hours_change_pct"] == pytest.approx(0.0)
    html = response.content.decode()
    assert 'data-period="week"' in html and "3,200 USD" in html
    # The badge names what it compares, and how much of each window has costs (2 of 7 days each).
    window = f"{(today - timedelta(days=7)):%b} {(today - timedelta(days=7)).day}–"
    badge = html.split('data-period="week"')[1].split("data-change")[1].split(">")[0]
    assert 'data-covered-now="2"' in badge and 'data-covered-before="2"' in badge
    assert f'data-window="{window}' in badge


def test_it_shows_no_change_against_a_period_with_fewer_days_of_data(
    login_client: Any, lead: Any, team: Any
) -> None:
    host, _ = factories.host_create(team=team, gpus=8)
    today = datetime.now(UTC).date()
    for days_ago, total in ((1, "1000"), (2, "1000"), (8, "500")):
        _cost_day(
            team=team,
            host=host,
            day=today - timedelta(days=days_ago),
            hours=192.0,
            busy=144.0,
            total=total,
            kwh=1.0,
        )
    # The fleet started on one day of the week before: +300% would be no growth at all.
    week = login_client(lead).get(reverse("dashboard:overview")).context["periods"]["week"]
    assert float(week["spend"]) == 2000.0
    assert week["spend_change_pct"] is None and week["gpu_hours_change_pct"] is None


def test_it_lists_the_biggest_movers_of_the_week_largest_first(
    login_client: Any, lead: Any, team: Any, other_team: Any
) -> None:
    from accelboard.alerts.models import Alert

    now = datetime.now(UTC)

    def alert(kind: str, pct: float, *, days_ago: float = 1, state: str = "open", owner: Any = team) -> Alert:
        made = factories.alert_create(
            team=owner, kind=kind, state=state, opened_at=now - timedelta(days=days_ago)
        )
        Alert.objects.filter(pk=made.pk).update(pct_change=pct)
        return made

    small = alert("regression", -4.0)
    big = alert("regression", -18.0)
    alert("regression", -30.0, days_ago=9)  # before last week
    alert("regression", -50.0, state="dismissed")  # a false alarm is not a mover
    alert("regression", -60.0, owner=other_team)
    gain = alert("improvement", 12.0)
    response = login_client(lead).get(reverse("dashboard:overview"))
    movers = response.context["movers"]
    assert [a.pk for a in movers["regressions"]] == [big.pk, small.pk]
    assert [a.pk for a in movers["improvements"]] == [gain.pk]
    assert response.content.decode().count('data-mover="regression"') == 2


def test_it_measures_fleet_saturation_from_the_last_day_of_rollups(
    login_client: Any, lead: Any, team: Any
) -> None:
    factories.accelerator_type_from(factories.H100)
    _, busy = factories.host_create(team=team, gpus=1)
    _, calm = factories.host_create(team=team, gpus=3)
    factories.telemetry_days_load(gpus=busy, days=1, interval_s=600, util_mean=97.0)
    factories.telemetry_days_load(gpus=calm, days=1, interval_s=600, util_mean=40.0, seed=3)
    response = login_client(lead).get(reverse("dashboard:overview"))
    saturation = response.context["saturation"]
    # One of four GPUs was busy most of the day: its busy hours' share of the GPU-time (under a
    # quarter: a few of its hours average below 90%); memory sits at 50% of total, nothing throttled.
    from django.db.models import Sum

    from accelboard.fleet.models import TelemetryRollup

    assert (saturation["gpus"], saturation["memory"]) == (4, 0)
    assert saturation["throttling"]["share_pct"] == 0.0 and saturation["throttling"]["now"] == 0
    hours = TelemetryRollup.objects.filter(width_s=3600, bucket__gte=datetime.now(UTC) - timedelta(hours=24))
    every = hours.aggregate(n=Sum("gpu_util_samples"))["n"]
    busy = hours.filter(gpu_util_avg__gte=89.5).aggregate(n=Sum("gpu_util_samples"))["n"]
    assert saturation["busy"]["share_pct"] == pytest.approx(100.0 * busy / every)
    assert 15.0 < saturation["busy"]["share_pct"] <= 25.0
    assert f'data-sat="busy">{saturation["busy"]["share_pct"]:.0f}%<' in response.content.decode()


def test_it_counts_busy_gpus_as_the_hosts_page_shows_their_utilisation(
    login_client: Any, lead: Any, team: Any
) -> None:
    # The demo's overview said "0% above 90% busy" while the hosts page showed GPUs at 90-97%: it
    # counted GPUs whose 24-h mean was "> 90". One definition (fleet.selectors.is_busy): a GPU
    # shown at 90% or more is busy, now by its newest sample, and both pages count it so.
    from django.utils.html import escape

    from accelboard.fleet.models import Accelerator
    from accelboard.fleet.selectors import BUSY_DEFINITION, is_busy

    factories.accelerator_type_from(factories.H100)
    _, gpus = factories.host_create(team=team, gpus=5)
    factories.telemetry_days_load(gpus=gpus, days=1, interval_s=600, util_mean=70.0)
    for gpu, util in zip(gpus, (91.0, 95.0, 90.0, 89.6, 89.4), strict=True):
        Accelerator.objects.filter(pk=gpu.pk).update(last_state={"gpu_util": util, "power_w": 300.0})
    client = login_client(lead)
    overview = client.get(reverse("dashboard:overview"))
    busy = overview.context["saturation"]["busy"]
    # 89.6 reads "90%" on the hosts page: busy; 89.4 reads "89%": not.
    assert (busy["now"], busy["reporting"]) == (4, 5)
    assert [is_busy(u) for u in (90.0, 89.5, 89.49, None)] == [True, True, False, False]
    html = overview.content.decode()
    assert 'data-sat="busy-now">4<' in html and escape(BUSY_DEFINITION) in html
    hosts = client.get(reverse("fleet:hosts")).content.decode()
    assert 'data-busy="now">4<' in hosts
    shown = [int(v) for v in re.findall(r'data-metric="util">.*?<span class="num">(\d+)%', hosts)]
    assert sorted(shown) == [89, 90, 90, 91, 95]
    assert sum(1 for v in shown if v >= 90) == busy["now"]


def test_it_shows_a_finance_member_every_teams_spend_as_on_the_cost_report(
    login_client: Any, finance: Any, lead: Any, team: Any, other_team: Any
) -> None:
    # Finance saw every team's costs on /costs/ but only their own team's on the overview.
    host, _ = factories.host_create(team=team, gpus=8)
    other, _ = factories.host_create(team=other_team, gpus=8)
    today = datetime.now(UTC).date()
    _cost_day(
        team=team, host=host, day=today - timedelta(days=1), hours=192.0, busy=96.0, total="1000", kwh=1.0
    )
    _cost_day(
        team=other_team,
        host=other,
        day=today - timedelta(days=1),
        hours=192.0,
        busy=96.0,
        total="700",
        kwh=1.0,
    )
    seen = {}
    for who, user in (("finance", finance), ("lead", lead)):
        response = login_client(user).get(reverse("dashboard:overview"))
        week = response.context["periods"]["week"]
        names = sorted(trace["name"] for trace in response.context["spend_figure"]["data"])
        seen[who] = (float(week["spend"]), names, 'id="costs-scope"' in response.content.decode())
    assert seen["finance"] == (1700.0, sorted([team.name, other_team.name]), True)
    assert seen["lead"] == (1000.0, [team.name], False)
    # The same rule as the cost report's: finance's total there is the overview's.
    month = login_client(finance).get(
        reverse("costs:report"), {"month": f"{today - timedelta(days=1):%Y-%m}"}
    )
    assert float(month.context["report"].total.total_cost) == pytest.approx(1700.0)


def test_it_counts_throttling_as_a_share_of_gpu_time_and_agrees_with_the_hosts_page(
    login_client: Any, lead: Any, team: Any
) -> None:
    # One power-cap sample in a day on one of four GPUs read as "25% throttled" (100% on the demo,
    # where every GPU hits its power cap once); the hosts page showed one throttled GPU.
    from django.db import connection

    from accelboard.fleet.models import Accelerator
    from accelboard.fleet.rollup_services import telemetry_rollups_refresh

    factories.accelerator_type_from(factories.H100)
    _, gpus = factories.host_create(team=team, gpus=4)
    batch = factories.telemetry_days_load(gpus=gpus, days=1, interval_s=600)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE fleet_telemetrysample SET throttle_reasons = 4 WHERE accelerator_id = %s AND time = %s",
            [gpus[0].pk, batch.times[10]],
        )
    telemetry_rollups_refresh(start=batch.times[0], end=batch.times[-1] + timedelta(minutes=10))
    Accelerator.objects.filter(pk=gpus[1].pk).update(last_state={"throttle_reasons": 0x40, "power_w": 300.0})
    client = login_client(lead)
    overview = client.get(reverse("dashboard:overview"))
    throttling = overview.context["saturation"]["throttling"]
    # One throttled sample among those of the last 24 h of hour rollups (the day's first partial
    # hour falls outside): about 0.2%, not 25%.
    from django.db.models import Sum

    from accelboard.fleet.models import TelemetryRollup

    window = TelemetryRollup.objects.filter(width_s=3600, bucket__gte=datetime.now(UTC) - timedelta(hours=24))
    samples = window.aggregate(n=Sum("samples"))["n"]
    assert throttling["share_pct"] == pytest.approx(100.0 / samples)
    assert (throttling["now"], throttling["gpus_throttled"]) == (1, 1)
    html = overview.content.decode()
    assert 'data-sat="throttled">0.2%<' in html and 'data-sat="throttled-now">1<' in html
    assert "Share of GPU-time in which the driver slowed the clocks" in html
    hosts = client.get(reverse("fleet:hosts")).content.decode()
    assert 'data-throttled="now">1<' in hosts and 'data-throttled="share">0.2%<' in hosts
    assert hosts.count('class="badge throttled"') == 2  # the legend and the one GPU, with its reason
    assert 'title="Now: thermal (hardware)">throttled' in hosts
