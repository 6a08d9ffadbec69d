"""The hosts grid and the per-host telemetry page: who sees which host, live state, rollup choice,
stale agents under a mocked clock, the refresh endpoint, and each page's query budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pandas as pd
import pytest
from django.urls import reverse

from accelboard.fleet import charts, selectors
from accelboard.fleet.models import Accelerator, Host
from accelboard.testing.plotly import trace_values
from tests import factories

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _state(**values: Any) -> dict[str, Any]:
    state = {
        "power_w": 350.0,
        "gpu_util": 80.0,
        "mem_used_bytes": 60 * 2**30,
        "mem_total_bytes": 80 * 2**30,
        "temperature_c": 61.0,
        "throttle_reasons": 0,
    }
    return {**state, **values}


def _seen(gpus: list[Accelerator], host: Host, at: datetime, **state: Any) -> None:
    """What ingest leaves behind: each GPU's newest sample, and the host's last report."""
    for gpu in gpus:
        Accelerator.objects.filter(pk=gpu.pk).update(
            last_state={**_state(**state), "time": at.isoformat()}, last_seen_at=at
        )
    Host.objects.filter(pk=host.pk).update(last_seen_at=at)


@pytest.fixture
def fleet(team: Any, other_team: Any) -> dict[str, Any]:
    """Team: one live H100 host (2 GPUs, one throttled) and one stale host; other team: one host."""
    factories.accelerator_type_from(factories.H100)
    live, live_gpus = factories.host_create(team=team, gpus=2, hostname="live-node")
    stale, stale_gpus = factories.host_create(team=team, gpus=1, hostname="stale-node")
    other, other_gpus = factories.host_create(team=other_team, gpus=4, hostname="other-node")
    _seen(live_gpus[:1], live, NOW - timedelta(seconds=30))
    # SW power cap (0x4): throttled. GPU idle (0x1) alone is not.
    _seen(live_gpus[1:], live, NOW - timedelta(seconds=30), throttle_reasons=0x4 | 0x1, power_w=699.0)
    _seen(stale_gpus, stale, NOW - timedelta(minutes=20))
    _seen(other_gpus, other, NOW - timedelta(seconds=10))
    return {"live": live, "stale": stale, "other": other, "live_gpus": live_gpus}


@pytest.fixture
def clock() -> Any:
    with mock.patch("accelboard.fleet.views.timezone.now", return_value=NOW) as now:
        yield now


# --- selectors (pure parts) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("range_key", "width"), [("1h", 60), ("6h", 60), ("24h", 60), ("7d", 3600), ("30d", 3600)]
)
def test_it_reads_minute_rollups_up_to_a_day_and_hour_rollups_beyond(range_key: str, width: int) -> None:
    assert selectors.rollup_width_for(span=selectors.HOST_RANGES[range_key]) == width


def test_it_flags_an_agent_stale_after_five_minutes_or_three_intervals() -> None:
    assert not selectors.agent_is_stale(last_seen_at=NOW - timedelta(minutes=4, seconds=59), now=NOW)
    assert selectors.agent_is_stale(last_seen_at=NOW - timedelta(minutes=5, seconds=1), now=NOW)
    assert selectors.agent_is_stale(last_seen_at=None, now=NOW)
    # A 5-minute agent gets three intervals (15 minutes), a 1 s agent still gets five minutes.
    assert not selectors.agent_is_stale(last_seen_at=NOW - timedelta(minutes=14), now=NOW, interval_s=300)
    assert selectors.agent_is_stale(last_seen_at=NOW - timedelta(minutes=16), now=NOW, interval_s=300)
    assert not selectors.agent_is_stale(last_seen_at=NOW - timedelta(minutes=4), now=NOW, interval_s=1)


@pytest.mark.parametrize(
    ("range_key", "step"), [("1h", 60), ("6h", 60), ("24h", 300), ("7d", 3600), ("30d", 3600)]
)
def test_it_draws_at_most_a_few_hundred_points_per_gpu(range_key: str, step: int) -> None:
    span = selectors.HOST_RANGES[range_key]
    assert selectors.point_step_for(span=span) == step
    assert span.total_seconds() / step <= 720


def test_it_reads_a_hosts_telemetry_from_the_rollup_width_of_the_range(team: Any) -> None:
    _, gpus = factories.host_create(team=team, gpus=2)
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    batch = factories.telemetry_days_load(gpus=gpus, days=2, interval_s=300, now=end)
    width, step, frame = selectors.host_telemetry(
        host_id=gpus[0].host_id, start=end - timedelta(hours=6), end=end
    )
    assert (width, step) == (60, 60)
    # 5-minute samples land in 72 minute buckets per GPU over 6 hours.
    assert len(frame) == 2 * 72
    width, step, frame = selectors.host_telemetry(
        host_id=gpus[0].host_id, start=end - timedelta(days=7), end=end
    )
    assert (width, step) == (3600, 3600)
    assert len(frame) == 2 * 48
    assert set(frame["accelerator_id"]) == {gpu.pk for gpu in gpus}
    # A day: minute rollups merged into 5-minute bins in the database, means weighted by samples,
    # energy summed: the day's mean utilisation and energy match the raw samples.
    width, step, frame = selectors.host_telemetry(
        host_id=gpus[0].host_id, start=end - timedelta(hours=24), end=end
    )
    assert (width, step) == (60, 300)
    assert len(frame) == 2 * 288
    first = frame[frame["accelerator_id"] == gpus[0].pk]
    raw = batch.gpu_util[batch.gpu_ids == gpus[0].pk][-288:]
    assert first["gpu_util_avg"].mean() == pytest.approx(raw.mean(), rel=1e-6)


# --- the grid -----------------------------------------------------------------------------------


def test_it_redirects_anonymous_users_to_login(client: Any) -> None:
    assert client.get(reverse("fleet:hosts")).status_code == 302


@pytest.mark.parametrize("who", ["lead", "engineer", "finance"])
def test_it_shows_a_team_member_only_their_teams_hosts(
    login_client: Any, cast: dict[str, Any], fleet: dict[str, Any], clock: Any, who: str
) -> None:
    response = login_client(cast[who]).get(reverse("fleet:hosts"))
    assert response.status_code == 200
    hostnames = [item["host"].hostname for item in response.context["grid"]]
    assert hostnames == ["live-node", "stale-node"]
    assert b"other-node" not in response.content


def test_a_member_of_two_teams_sees_each_teams_host_of_the_same_name_apart(
    login_client: Any, lead: Any, team: Any, other_team: Any, clock: Any
) -> None:
    # Host names are unique within a team only: both teams may have a "gpu-node-01".
    from accelboard.core.choices import Role
    from accelboard.core.services import membership_set

    membership_set(team=other_team, user=lead, role=Role.ENGINEER)
    ours, _ = factories.host_create(team=team, gpus=1, hostname="gpu-node-01")
    theirs, _ = factories.host_create(team=other_team, gpus=2, hostname="gpu-node-01")
    assert ours.pk != theirs.pk
    client = login_client(lead)
    response = client.get(reverse("fleet:hosts"))
    assert response.status_code == 200
    grid = {item["host"].pk: item["host"] for item in response.context["grid"]}
    assert set(grid) == {ours.pk, theirs.pk}
    page = response.content.decode()
    # Each card links its own host by id and names its team.
    for host in (ours, theirs):
        assert reverse("fleet:host_detail", args=[host.pk]) in page
    assert team.name in page and other_team.name in page
    for host in (ours, theirs):
        detail = client.get(reverse("fleet:host_detail", args=[host.pk]))
        assert detail.status_code == 200 and detail.context["host"].team_id == host.team_id


def test_it_shows_staff_every_host_and_the_outsider_none(
    login_client: Any, staff: Any, outsider: Any, fleet: dict[str, Any], clock: Any
) -> None:
    staff_grid = login_client(staff).get(reverse("fleet:hosts")).context["grid"]
    assert [item["host"].hostname for item in staff_grid] == ["live-node", "other-node", "stale-node"]
    response = login_client(outsider).get(reverse("fleet:hosts"))
    assert response.context["grid"] == []
    assert b"You are not in a team yet" in response.content


def test_it_shows_live_state_flags_throttling_and_stale_agents(
    login_client: Any, lead: Any, fleet: dict[str, Any], clock: Any
) -> None:
    response = login_client(lead).get(reverse("fleet:hosts"))
    grid = {item["host"].hostname: item for item in response.context["grid"]}
    live, stale = grid["live-node"], grid["stale-node"]
    assert live["stale"] is False and stale["stale"] is True
    first, second = live["gpus"]
    assert first["gpu_util"] == 80.0
    assert first["power_pct"] == 50.0  # 350 W of a 700 W limit
    assert first["mem_used_gib"] == 60.0 and first["mem_total_gib"] == 80.0
    assert first["throttled"] is False
    assert second["throttled"] is True
    assert live["throttled"] == 1
    html = response.content.decode()
    assert f'data-host="{fleet["stale"].pk}" data-stale="true"' in html
    assert f'data-host="{fleet["live"].pk}" data-stale="false"' in html
    assert "699 / 700 W" in html
    assert "60.0 / 80 GiB" in html
    assert live["gpu_types"] == f"2× {first['type']}" and live["mixed_types"] is False


def test_it_summarises_a_hosts_gpu_types_most_common_first() -> None:
    assert selectors.gpu_types_summary(["L4", "H100 SXM 80GB", "H100 SXM 80GB"]) == "2× H100 SXM 80GB + 1× L4"
    assert selectors.gpu_types_summary([]) == ""


def test_it_tells_a_team_without_hosts_how_to_add_one(login_client: Any, engineer: Any) -> None:
    response = login_client(engineer).get(reverse("fleet:hosts"))
    assert b"No hosts yet" in response.content
    assert b"accelboard-agent run" in response.content


def test_it_keeps_the_grid_to_a_fixed_number_of_queries(
    login_client: Any,
    lead: Any,
    team: Any,
    fleet: dict[str, Any],
    clock: Any,
    django_assert_max_num_queries: Any,
) -> None:
    client = login_client(lead)
    for _ in range(5):
        factories.host_create(team=team, gpus=8)
    # session + user, memberships, hosts, GPUs, types, the throttling aggregate.
    with django_assert_max_num_queries(7):
        response = client.get(reverse("fleet:hosts"))
    assert len(response.context["grid"]) == 7


# --- one host -----------------------------------------------------------------------------------


@pytest.fixture
def host_with_telemetry(team: Any) -> dict[str, Any]:
    factories.accelerator_type_from(factories.H100)
    host, gpus = factories.host_create(team=team, gpus=2)
    now = datetime.now(UTC)
    batch = factories.telemetry_days_load(gpus=gpus, days=2, interval_s=300, now=now, util_mean=65.0)
    return {"host": host, "gpus": gpus, "batch": batch}


@pytest.mark.parametrize(
    ("who", "status"),
    [
        ("lead", 200),
        ("engineer", 200),
        ("finance", 200),
        ("staff", 200),
        ("other_lead", 404),
        ("outsider", 404),
    ],
)
def test_it_shows_a_host_page_only_to_its_teams_and_staff(
    login_client: Any, cast: dict[str, Any], host_with_telemetry: dict[str, Any], who: str, status: int
) -> None:
    host = host_with_telemetry["host"]
    client = login_client(cast[who])
    assert client.get(reverse("fleet:host_detail", args=[host.pk])).status_code == status
    assert client.get(reverse("fleet:host_telemetry", args=[host.pk])).status_code == status


def test_it_charts_each_gpu_from_hour_rollups_over_a_week(
    login_client: Any, lead: Any, host_with_telemetry: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    host, gpus, batch = host_with_telemetry["host"], host_with_telemetry["gpus"], host_with_telemetry["batch"]
    client = login_client(lead)
    # Session, user, teams, host, GPUs, their types, rollups, health rollups, who held the GPUs.
    with django_assert_max_num_queries(9):
        response = client.get(reverse("fleet:host_detail", args=[host.pk]) + "?range=7d")
    assert response.status_code == 200
    telemetry = response.context["telemetry"]
    assert telemetry["width_s"] == 3600
    figures = response.context["figures"]
    assert [trace["name"] for trace in figures["power"]["data"]] == ["GPU 0", "GPU 1"]
    assert [trace["name"] for trace in figures["utilisation"]["data"]] == ["GPU 0", "GPU 1"]
    util = trace_values(figures["utilisation"]["data"][0]["y"])
    assert len(util) == 48
    expected = batch.gpu_util[batch.gpu_ids == gpus[0].pk].mean()
    assert sum(util) / len(util) == pytest.approx(expected, abs=0.1)
    # The power limit is drawn, and every chart names its unit.
    assert figures["power"]["layout"]["shapes"][0]["y0"] == 700.0
    assert figures["energy"]["layout"]["yaxis"]["title"]["text"] == "Energy (kWh)"
    assert figures["memory"]["layout"]["yaxis"]["title"]["text"] == "Memory used (GiB)"
    assert figures["clocks"]["layout"]["yaxis"]["title"]["text"] == "SM clock (MHz)"
    assert 'id="power-figure"' in response.content.decode()


def test_it_serves_fresh_figures_as_json_for_the_refresh(
    login_client: Any, lead: Any, host_with_telemetry: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    host = host_with_telemetry["host"]
    client = login_client(lead)
    with django_assert_max_num_queries(8):
        response = client.get(reverse("fleet:host_telemetry", args=[host.pk]) + "?range=6h")
    assert response.status_code == 200
    payload = response.json()
    assert payload["range"] == "6h" and payload["width_s"] == 60 and payload["has_data"] is True
    assert set(payload["figures"]) == {
        "power", "energy", "utilisation", "memory", "clocks", "temperature", "mem_clocks", "throttling", "errors",
        "profiling",
    }  # fmt: skip
    assert payload["figures"]["profiling"]["data"] == []  # the host sent no profiling counters
    energy = payload["figures"]["energy"]
    assert energy["layout"]["yaxis"]["title"]["text"] == "Energy (Wh)"
    # Regular minute buckets from x0, values as a typed array (no array of times on the wire).
    bars = energy["data"][0]
    assert bars["dx"] == 60_000 and "x" not in bars
    assert datetime.fromisoformat(bars["x0"]) >= datetime.now(UTC) - timedelta(hours=6, minutes=1)
    assert len(trace_values(bars["y"])) > 0


def test_it_charts_temperature_clocks_throttling_and_gpu_errors(
    login_client: Any, lead: Any, team: Any
) -> None:
    # The host pages had no temperature, memory clock, throttle or ECC/XID charts (the DCGM
    # dashboards have them). GPU 1 is throttled for a power cap in a third of its samples of one
    # hour and logs two ECC errors and an XID from the same hour on.
    from django.db import connection

    from accelboard.fleet.rollup_services import telemetry_rollups_refresh

    factories.accelerator_type_from(factories.H100)
    host, gpus = factories.host_create(team=team, gpus=2)
    batch = factories.telemetry_days_load(gpus=gpus, days=1, interval_s=300)
    hour = batch.times[-12]  # the last hour of samples, one every 5 minutes
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE fleet_telemetrysample SET throttle_reasons = 4 WHERE accelerator_id = %s AND time >= %s "
            "AND extract(minute FROM time)::int %% 15 = 0",
            [gpus[1].pk, hour],
        )
        cursor.execute(
            "UPDATE fleet_telemetrysample SET ecc_errors = 2, xid_errors = 1, temperature_c = 83 "
            "WHERE accelerator_id = %s AND time >= %s",
            [gpus[1].pk, hour],
        )
    telemetry_rollups_refresh(start=batch.times[0], end=batch.times[-1] + timedelta(minutes=5))
    response = login_client(lead).get(reverse("fleet:host_detail", args=[host.pk]) + "?range=24h")
    figures = response.context["figures"]
    for key, unit in (
        ("temperature", "Temperature (°C)"),
        ("mem_clocks", "Memory clock (MHz)"),
        ("throttling", "Throttled (% of samples)"),
        ("errors", "Errors (count)"),
    ):
        assert figures[key]["layout"]["yaxis"]["title"]["text"] == unit
        assert f'id="{key}-figure"' in response.content.decode()
    assert [t["name"] for t in figures["temperature"]["data"]] == ["GPU 0", "GPU 1"]
    assert max(trace_values(figures["temperature"]["data"][1]["y"])) == 83.0
    assert max(trace_values(figures["mem_clocks"]["data"][0]["y"])) == 2619.0
    throttled = [v for v in trace_values(figures["throttling"]["data"][1]["y"]) if v == v]
    assert max(throttled) > 0 and max(trace_values(figures["throttling"]["data"][0]["y"])) == 0
    # 5-minute bins of minute rollups: the bins holding a throttled sample are 100% throttled.
    assert sum(1 for v in throttled if v > 0) == 4
    names = [t["name"] for t in figures["errors"]["data"]]
    assert names == ["GPU 0 ECC", "GPU 1 ECC", "GPU 0 XID", "GPU 1 XID"]
    assert max(trace_values(figures["errors"]["data"][1]["y"])) == 2.0
    assert max(trace_values(figures["errors"]["data"][3]["y"])) == 1.0


def test_it_starts_the_charts_where_a_new_hosts_data_starts(login_client: Any, lead: Any, team: Any) -> None:
    # The live page opened on 6 h with three minutes of data squeezed at the right edge.
    factories.accelerator_type_from(factories.H100)
    host, gpus = factories.host_create(team=team, gpus=1)
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    batch = factories.telemetry_load(gpus=gpus, start=now - timedelta(minutes=4), end=now, interval_s=10)
    from accelboard.fleet.rollup_services import telemetry_rollups_refresh

    telemetry_rollups_refresh(start=batch.times[0], end=now)
    response = login_client(lead).get(reverse("fleet:host_detail", args=[host.pk]))
    telemetry = response.context["telemetry"]
    assert telemetry["range"] == "6h" and telemetry["data_since"] is not None
    start, end = (
        datetime.fromisoformat(x) for x in response.context["figures"]["power"]["layout"]["xaxis"]["range"]
    )
    assert end - start < timedelta(minutes=6)
    assert "the charts start there" in response.content.decode()


def test_it_rejects_an_unknown_range_with_a_400_naming_it(
    login_client: Any, lead: Any, host_with_telemetry: dict[str, Any]
) -> None:
    host = host_with_telemetry["host"]
    client = login_client(lead)
    response = client.get(reverse("fleet:host_detail", args=[host.pk]) + "?range=2w")
    assert response.status_code == 400
    assert b"range" in response.content
    response = client.get(reverse("fleet:host_telemetry", args=[host.pk]) + "?range=2w")
    assert response.status_code == 400
    assert response.json()["field"] == "range"


def test_it_says_why_a_host_has_no_charts(login_client: Any, lead: Any, team: Any) -> None:
    host, _ = factories.host_create(team=team, gpus=1)
    response = login_client(lead).get(reverse("fleet:host_detail", args=[host.pk]))
    assert response.status_code == 200
    assert response.context["telemetry"]["has_data"] is False
    assert b"No telemetry from this host in the last 6h" in response.content


def test_it_joins_sparse_samples_but_leaves_a_real_gap_in_a_line() -> None:
    """Samples every 2 minutes into 1-minute buckets still draw a line; 16 silent minutes do not."""
    epochs = [0.0, 120.0, 240.0, 1200.0, 1260.0]
    frame = pd.DataFrame(
        {
            "bucket": [1_767_225_600.0 + e for e in epochs],
            "accelerator_id": [7] * 5,
            "power_avg_w": [100.0, 110.0, 120.0, 130.0, 140.0],
            "energy_j": [6000.0] * 5,
            "gpu_util_avg": [50.0] * 5,
            "mem_used_avg_bytes": [2.0**30] * 5,
            "mem_total_bytes": [2.0**31] * 5,
            "sm_clock_avg_mhz": [1980.0] * 5,
            "mem_clock_avg_mhz": [2619.0] * 5,
            "temperature_max_c": [60.0] * 5,
        }
    )
    figures = charts.host_telemetry_figures(
        frame=frame, gpus=[{"id": 7, "index": 0, "power_limit_w": 700.0}], width_s=60, x_range=["a", "b"]
    )
    (line,) = figures["power"]["data"]
    y = trace_values(line["y"])
    x = trace_values(line["x"])
    assert y[:3] == [100.0, 110.0, 120.0] and y[4:] == [130.0, 140.0]
    assert y[3] != y[3]  # NaN: the break
    assert [(v - x[0]) / 1000 for v in x[:3]] == [0.0, 120.0, 240.0]
    # Energy bars: one per minute bucket from the first, J -> Wh.
    bars = figures["energy"]["data"][0]
    assert bars["dx"] == 60_000
    energy = trace_values(bars["y"])
    assert len(energy) == 22 and energy[0] == pytest.approx(6000 / 3600)
