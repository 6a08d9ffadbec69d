"""The workload pages and the host page's "who ran on each GPU", over the shared host's day
(tests/attribution/conftest.py: built through ingest, the cost pass, the rules and the daily job).

Worked by hand: the host-day row is 1032.36 USD over 5,040 GPU-minutes (three GPUs all day, the
idle one half), so each all-day GPU-day is 1032.36 × 2/7 = 294.96. Pod a holds half of the
time-sliced GPU for 12 h (294.96 / 4 = 73.74), the 3-slice MIG instance all day (3/7 of 294.96 =
126.41 after the largest remainder gives the odd cent to pod b's 42.13|42.14) and the full GPU all
day (294.96): 495.11 on both bases (the utilisation is 100 % where it held a measured GPU).
Its energy, time held: 41,040,000 J / 4 + 3/7 of 25,920,000 J (11,108,571.43, the spare joule
to it, the first line of the tie) + 43,200,000 J = 64,568,572 J.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from django.test import Client

from accelboard.api.services import token_create
from accelboard.attribution.models import AllocationDaily
from accelboard.attribution.services import RuleInput, allocation_day_compute, rule_set_save
from accelboard.fleet.ingest_services import telemetry_batch_ingest
from accelboard.fleet.models import GpuAttribution, Host, Workload
from accelboard.serving.services import IntervalInput, inference_metrics_store

from .conftest import DAY, FULL, IDLE, MIG, MIG_2, MIG_3, T0, TS, rules_v1

pytestmark = pytest.mark.django_db
PERIOD = {"start": DAY.isoformat(), "end": DAY.isoformat()}


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _workload(namespace: str) -> Workload:
    return Workload.objects.get(namespace=namespace)


def test_it_shows_the_workloads_cost_as_the_sum_of_its_rows_and_the_apis_row(
    world: dict[str, Any], lead: Any, client: Client, django_assert_max_num_queries: Any
) -> None:
    pod_a = _workload("ns-a")
    client = _client(lead)
    # Session, user, teams, the workload, its intervals, MIG parents, utilisation, money (3).
    with django_assert_max_num_queries(10):
        response = client.get(f"/workloads/{pod_a.pk}/", PERIOD)
    assert response.status_code == 200
    [money] = response.context["money"].totals
    rows = AllocationDaily.objects.filter(workload=pod_a)
    assert money.cost_allocation == sum(r.cost_allocation for r in rows) == Decimal("495.11")
    assert money.cost_usage == sum(r.cost_usage for r in rows) == Decimal("495.11")
    assert money.energy_allocation_j == sum(r.energy_allocation_j for r in rows) == 64_568_572
    token = token_create(team=world["team"], kind="read", name="r")[1]
    api = client.get(
        "/api/v1/allocation",
        {**PERIOD, "group_by": "workload", "basis": "allocation"},
        HTTP_AUTHORIZATION=f"Bearer {token}",
    ).json()
    [api_row] = [r for r in api["rows"] if r["key"] == "pod:ns-a/a"]
    assert Decimal(api_row["cost"]) == money.cost_allocation
    assert api_row["energy_j"] == money.energy_allocation_j
    body = response.content.decode()
    assert 'data-cost-allocation="495.11"' in body
    assert "17.936" in body  # 64,568,572 J in kWh
    attribution = response.context["attribution"]
    assert (attribution.team, attribution.kind) == (world["team"].name, "workload")


def test_its_timeline_holds_the_seconds_of_its_intervals(world: dict[str, Any], lead: Any) -> None:
    pod_a = _workload("ns-a")
    response = _client(lead).get(f"/workloads/{pod_a.pk}/", PERIOD)
    use = response.context["use"]
    stored = GpuAttribution.objects.filter(workload_id=pod_a.pk)
    assert use.held_s == sum((r.end - r.start).total_seconds() for r in stored) == (12 + 24 + 24) * 3600
    assert use.device_s == (6 + 24 + 24) * 3600
    by_uuid = {d.accelerator.uuid: d for d in use.devices}
    assert {u: (d.held_s, d.device_s) for u, d in by_uuid.items()} == {
        TS: (12 * 3600, 6 * 3600),
        MIG_3: (24 * 3600, 24 * 3600),
        FULL: (24 * 3600, 24 * 3600),
    }
    # The device's utilisation while held: 100 % on the two measured GPUs, none on MIG.
    assert (by_uuid[TS].gpu_util, by_uuid[FULL].gpu_util, by_uuid[MIG_3].gpu_util) == (100.0, 100.0, None)
    figure = response.context["figure"]
    assert sum(x for trace in figure["data"] for x in trace["x"]) / 1000 == use.held_s
    assert {y for trace in figure["data"] for y in trace["y"]} == {
        "shared-node GPU 0",
        "shared-node GPU 1 · MIG 3/7",
        "shared-node GPU 2",
    }
    # No rule maps it to a model: per 1M tokens is n/a, never a number.
    assert response.context["token_cost"] is None
    assert 'id="tokens-na"' in response.content.decode()


def test_a_period_cuts_the_timeline_and_the_cost(world: dict[str, Any], lead: Any) -> None:
    pod_a = _workload("ns-a")
    day_after = (DAY + timedelta(days=1)).isoformat()
    response = _client(lead).get(f"/workloads/{pod_a.pk}/", {"start": day_after, "end": day_after})
    assert response.status_code == 200
    assert response.context["use"].held_s == 0
    assert response.context["money"].totals == []


def test_the_team_it_is_attributed_to_sees_it_and_only_its_own_money(
    world: dict[str, Any], other_lead: Any, outsider: Any, staff: Any
) -> None:
    pod_a, pod_b = _workload("ns-a"), _workload("ns-b")
    other = _client(other_lead)
    # Pod a runs on the team's host and is the team's: another team gets a 404.
    assert other.get(f"/workloads/{pod_a.pk}/").status_code == 404
    # Pod b runs on the team's host but a rule gives it to the other team: they see it, and of
    # its money only what is theirs (the cost pages' rule): 73.74 + 42.14.
    response = other.get(f"/workloads/{pod_b.pk}/", PERIOD)
    assert response.status_code == 200
    [money] = response.context["money"].totals
    assert money.cost_allocation == Decimal("115.88")
    assert _client(outsider).get(f"/workloads/{pod_b.pk}/").status_code == 404
    assert _client(staff).get(f"/workloads/{pod_a.pk}/").status_code == 200
    assert _client(other_lead).get("/workloads/999999/").status_code == 404


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"start": "2026-13-01"}, "start"),
        ({"end": "yesterday"}, "end"),
        ({"start": "2026-11-11", "end": "2026-11-10"}, "end"),
        ({"start": "2026-01-01", "end": "2026-11-10"}, "end"),
    ],
)
def test_it_refuses_a_bad_period_naming_the_field(
    world: dict[str, Any], lead: Any, params: dict[str, str], field: str
) -> None:
    response = _client(lead).get(f"/workloads/{_workload('ns-a').pk}/", params)
    assert response.status_code == 400
    assert response.content.decode().startswith(f"{field}:")


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"kind": "gpu"}, "kind"),
        ({"team": "nobody"}, "team"),
        ({"page": "x"}, "page"),
        ({"page": "0"}, "page"),
    ],
)
def test_the_list_refuses_bad_filters_naming_the_field(
    world: dict[str, Any], lead: Any, params: dict[str, str], field: str
) -> None:
    response = _client(lead).get("/workloads/", params)
    assert response.status_code == 400
    assert response.content.decode().startswith(f"{field}:")


def test_the_list_filters_by_team_kind_and_namespace(
    world: dict[str, Any], lead: Any, other_lead: Any, django_assert_max_num_queries: Any
) -> None:
    client = _client(lead)

    def names(**params: str) -> list[str]:
        response = client.get("/workloads/", params)
        assert response.status_code == 200
        return sorted(w.namespace for w in response.context["page"].object_list)

    with django_assert_max_num_queries(8):
        assert names() == ["ns-a", "ns-b", "unmapped"]
    assert names(namespace="ns-b") == ["ns-b"]
    assert names(kind="slurm-job") == []
    assert names(kind="pod", team=world["other_team"].slug) == ["ns-b"]
    response = client.get("/workloads/")
    attributed = {w.namespace: w.attributed_team for w in response.context["page"].object_list}
    assert attributed == {"ns-a": world["team"].name, "ns-b": world["other_team"].name, "unmapped": None}
    other = _client(other_lead).get("/workloads/")
    assert [w.namespace for w in other.context["page"].object_list] == ["ns-b"]


def test_the_host_page_shows_who_ran_on_each_gpu_with_idle_making_up_the_rest(
    world: dict[str, Any], lead: Any
) -> None:
    host = Host.objects.get(hostname="shared-node")
    with mock.patch("accelboard.fleet.views.timezone.now", return_value=T0 + timedelta(hours=24)):
        response = _client(lead).get(f"/hosts/{host.pk}/", {"range": "24h"})
    assert response.status_code == 200
    holders = {g.accelerator.uuid: g for g in response.context["holders"]}
    assert list(holders) == [TS, MIG, FULL, IDLE]

    def shares(device: Any) -> dict[str, float]:
        return {h.workload.namespace: round(h.share, 6) for h in device.holders}

    assert shares(holders[TS]) == {"ns-a": 0.25, "ns-b": 0.25, "unmapped": 0.25}
    assert holders[TS].idle == pytest.approx(0.25)
    mig = {part.accelerator.uuid: part for part in holders[MIG].instances}
    assert shares(mig[MIG_3]) == {"ns-a": 1.0} and mig[MIG_3].idle == pytest.approx(0)
    assert shares(mig[MIG_2]) == {"ns-b": 0.5} and mig[MIG_2].idle == pytest.approx(0.5)
    assert holders[MIG].held == pytest.approx(3 / 7 + 2 / 7 * 0.5)
    assert shares(holders[FULL]) == {"ns-a": 1.0}
    assert (holders[IDLE].holders, holders[IDLE].idle) == ([], 1.0)
    for gpu in holders.values():
        for device in [gpu, *gpu.instances]:
            assert sum(h.share for h in device.holders) <= 1 + 1e-9
            assert device.held + device.idle == pytest.approx(1)
    body = response.content.decode()
    assert f'href="/workloads/{_workload("ns-a").pk}/"' in body
    assert 'id="gpu-holders"' in body


def test_it_gives_j_and_cost_per_1m_tokens_where_its_model_served_tokens(
    world: dict[str, Any], lead: Any, staff: Any
) -> None:
    """A labelled pod holds the idle GPU (147.48 USD: 12 h of minutes at 60 W, 0 %) for 12 of the
    day's 24 h: 73.74 USD and 1,296,000 J on the allocation basis, nothing on the usage basis (the
    GPU ran nothing). A rule maps its label to llama-3-8b bf16, whose serving metrics counted
    2,000,000 generated tokens on the host: 36.8700 USD and 648,000 J per 1M tokens (allocation)."""
    llm = {"kind": "pod", "uid": "ns-a/llm", "namespace": "ns-a", "name": "llm", "labels": {"app": "llm"}}
    telemetry_batch_ingest(
        team_id=world["team"].pk,
        payload={
            "batch_id": "shared-node:2",
            "host": {"hostname": "shared-node", "agent_version": "0.1.0", "simulated": True},
            "samples": [],
            "attribution": [
                {
                    "gpu": IDLE,
                    "start": T0.timestamp(),
                    "end": T0.timestamp() + 12 * 3600,
                    "workload": llm,
                    "share": 1.0,
                    "basis": "exclusive",
                }
            ],
        },
    )
    rules = [
        RuleInput(selector="label", value="app=llm", team=world["team"], model="llama-3-8b", variant="bf16"),
        *rules_v1(world["team"], world["other_team"]),
    ]
    rule_set_save(user=staff, rules=rules, note="v2")
    allocation_day_compute(day=DAY)
    host = Host.objects.get(hostname="shared-node")
    interval = IntervalInput(
        model="llama-3-8b", variant="bf16", interval_start=T0, interval_s=3600, generated_tokens=2_000_000
    )
    inference_metrics_store(team=world["team"], host=host, batch_id="s1", intervals=[interval])

    pod = Workload.objects.get(uid="ns-a/llm")
    response = _client(lead).get(f"/workloads/{pod.pk}/", PERIOD)
    [money] = response.context["money"].totals
    assert (money.cost_allocation, money.cost_usage) == (Decimal("73.74"), Decimal("0.00"))
    assert (money.energy_allocation_j, money.energy_usage_j) == (1_296_000, 0)
    token_cost = response.context["token_cost"]
    assert (token_cost.model, token_cost.tokens, token_cost.workloads) == ("llama-3-8b", 2_000_000, 1)
    [row] = response.context["token_rows"]
    assert (row.cost_allocation, row.cost_usage) == (Decimal("36.8700"), Decimal("0.0000"))
    assert (row.j_allocation, row.j_usage) == (Decimal(648_000), Decimal(0))
    assert 'id="token-costs"' in response.content.decode()


def test_the_list_pages_keeping_its_filters(world: dict[str, Any], lead: Any) -> None:
    client = _client(lead)
    with mock.patch("accelboard.attribution.workload_views.PAGE_SIZE", 2):
        first = client.get("/workloads/", {"kind": "pod"})
        second = client.get("/workloads/", {"kind": "pod", "page": "2"})
        beyond = client.get("/workloads/", {"kind": "pod", "page": "9"})
    assert len(first.context["page"].object_list) == 2
    assert 'href="?kind=pod&amp;page=2"' in first.content.decode()
    assert [w.namespace for w in second.context["page"].object_list] == ["ns-b"]  # the oldest seen
    assert beyond.context["page"].number == 2
