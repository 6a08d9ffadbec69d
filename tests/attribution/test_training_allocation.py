"""A training job's cost and energy (the workload page's Training progress section) agree with
its daily allocation (the Energy and cost section) over whole UTC days: same GPUs, same price
rows, same PUE, to the cent and to the joule's rounding.

The world: one on-prem host "trainer-node" at site "dc-1" (0.12 USD per kWh, PUE 1.5) with two
H100s (12.29 USD per GPU-hour: 98.32 for 8); Slurm job 4242 (user ada, mapped to ``team``)
holds both (share 1) for two whole UTC days from D0; GPU A draws 500 W and GPU B 400 W every
minute; the job reports progress every 4 hours from D0 to D0 + 48 h, 1,000 steps each time.
Each day is costed (``cost_days_compute``) and allocated (``allocation_days_compute``) by the
product's own passes.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from django.db.models import Sum
from django.test import Client
from django.urls import reverse

from accelboard.api.services import token_create
from accelboard.attribution.models import AllocationDaily
from accelboard.attribution.services import RuleInput, allocation_days_compute, rule_set_save
from accelboard.costs.services import cost_days_compute
from accelboard.fleet.ingest_services import telemetry_batch_ingest
from accelboard.fleet.models import Accelerator, Host, TelemetryRollup, Workload
from tests import factories
from tests.api.conftest import post_json
from tests.costs.builders import (
    accelerator_price_create,
    electricity_price_create,
    host_place,
    minutes_load,
    site_create,
)

pytestmark = pytest.mark.django_db

D0 = datetime(2026, 11, 10, tzinfo=UTC)
DAYS = [date(2026, 11, 10), date(2026, 11, 11)]
A, B = "GPU-00000000-0000-4000-8000-0000000000b1", "GPU-00000000-0000-4000-8000-0000000000b2"
URL = "/api/v1/training-progress"


@pytest.fixture
def two_day_job(team: Any, staff: Any) -> Workload:
    h100 = factories.accelerator_type_from(factories.H100)
    telemetry_batch_ingest(
        team_id=team.pk,
        payload={
            "batch_id": "trainer-node:1",
            "host": {"hostname": "trainer-node", "agent_version": "0.1.0", "simulated": True},
            "accelerators": [
                {
                    "uuid": uuid,
                    "index": i,
                    "name": factories.H100["driver_name"],
                    "memory_bytes": 85_520_809_984,
                }
                for i, uuid in enumerate((A, B))
            ],
            "samples": [{"time": D0.timestamp(), "gpu": A, "power_w": 500.0}],
            "attribution": [
                {  # one hold a day: an agent sends at most 24 h per interval
                    "gpu": gpu,
                    "start": (D0 + timedelta(days=d)).timestamp(),
                    "end": (D0 + timedelta(days=d + 1)).timestamp(),
                    "workload": {"kind": "slurm-job", "uid": "4242", "name": "llama-pretrain", "user": "ada"},
                    "share": 1.0,
                    "basis": "exclusive",
                }
                for gpu in (A, B)
                for d in (0, 1)
            ],
        },
    )
    host = Host.objects.get(hostname="trainer-node")
    site = site_create(name="dc-1", provider="on-prem", region="")
    host_place(host, site=site, provider="on-prem", region="", instance_type="")
    electricity_price_create(site=site, price_per_kwh="0.12", pue=1.5)
    accelerator_price_create(
        accelerator_type=h100,
        price_per_hour="98.32",
        count=8,
        provider="on-prem",
        region="",
        instance_type="",
    )
    gpus = {a.uuid: a for a in Accelerator.objects.all()}
    minutes_load(gpus=[gpus[A]], start=D0, minutes=2 * 1440, util=95.0, power_w=500.0)
    minutes_load(gpus=[gpus[B]], start=D0, minutes=2 * 1440, util=95.0, power_w=400.0)
    rule_set_save(user=staff, rules=[RuleInput(selector="user", value="ada", team=team)])
    cost_days_compute(days=DAYS)
    allocation_days_compute(days=DAYS)
    _, token = token_create(team=team, kind="ingest")
    points = [
        {"at": (D0 + timedelta(hours=4 * i)).isoformat(), "step": 1000 * i, "samples": 32_000 * i}
        for i in range(13)
    ]
    body = {"batch_id": "b1", "job": {"kind": "slurm-job", "uid": "4242"}, "gpus": [A, B], "points": points}
    assert post_json(Client(), URL, body, token).status_code == 200
    return Workload.objects.get(team=team, kind="slurm-job", uid="4242")


def test_training_cost_and_energy_over_whole_days_equal_the_allocations(two_day_job, login_client, lead):
    page = login_client(lead).get(reverse("workloads:detail", args=[two_day_job.pk]), {"start": "2026-11-10"})
    assert page.status_code == 200
    summary = page.context["training"]
    rows = AllocationDaily.objects.filter(workload=two_day_job, day__in=DAYS)
    assert rows.count() == 4  # one line per GPU-day
    allocated = rows.aggregate(cost=Sum("cost_allocation"), energy=Sum("energy_allocation_j"))

    # By hand. Capacity: 2 GPUs × 48 h × 12.29 = 1,179.84 USD. Energy: (500 + 400) W × 172,800 s
    # = 155,520,000 J = 43.2 kWh; × PUE 1.5 × 0.12 USD = 7.776 USD. Cost: 1,187.616 USD, which the
    # cost pass stores as 1,187.616 and the allocation splits into cents: 1,187.62 (the lines of
    # the job's four GPU-days add up to each host-day's cents: 593.81 a day).
    assert summary.capacity_cost == pytest.approx(1179.84)
    assert summary.energy_j == pytest.approx(155_520_000.0)
    assert summary.energy_cost == pytest.approx(7.776)
    assert summary.cost == pytest.approx(1187.616)
    assert allocated["cost"] == Decimal("1187.62")
    assert allocated["energy"] == 155_520_000

    # The invariant: to the cent and to the joule.
    assert abs(Decimal(str(summary.cost)) - allocated["cost"]) <= Decimal("0.01")
    assert abs(summary.energy_j - allocated["energy"]) <= 1.0
    # Day by day too: the intervals of each day against that day's allocation lines.
    for day in DAYS:
        start = datetime.combine(day, datetime.min.time(), UTC)
        inside = [i for i in summary.intervals if start <= i.start and i.end <= start + timedelta(days=1)]
        day_rows = rows.filter(day=day).aggregate(
            cost=Sum("cost_allocation"), energy=Sum("energy_allocation_j")
        )
        cost = sum(i.cost for i in inside)
        assert abs(Decimal(str(cost)) - day_rows["cost"]) <= Decimal("0.01"), day
        assert abs(sum(i.energy_j for i in inside) - day_rows["energy"]) <= 1.0, day

    # Per step, split: 12,000 steps; capacity 0.09832 + energy 0.000648 = 0.098968 USD per step.
    assert summary.reported_steps == 12_000
    assert summary.capacity_cost_per_step == pytest.approx(0.09832)
    assert summary.energy_cost_per_step == pytest.approx(0.000648)
    assert summary.cost_per_step == pytest.approx(0.098968)
    html = page.content.decode()
    assert 'data-training="capacity-per-step">0.09832<' in html
    assert 'data-training="energy-cost-per-step">0.000648<' in html
    assert "1,187.62 USD for 12,000 steps" in html
    # Both sections on the page say the same money: the allocation's total cell.
    assert 'data-cost-allocation="1187.62"' in html
    # Whole days, computed after they ended: no partial-day notice.
    assert 'id="allocation-partial"' not in html


def test_a_day_allocated_before_it_ended_is_marked_with_its_time(two_day_job, login_client, lead):
    # As the demo's load does for today: the second day's allocation computed at 05:20 of it.
    AllocationDaily.objects.filter(day=DAYS[1]).update(computed_at=datetime(2026, 11, 11, 5, 20, tzinfo=UTC))
    page = login_client(lead).get(reverse("workloads:detail", args=[two_day_job.pk]), {"start": "2026-11-10"})
    html = page.content.decode()
    assert 'id="allocation-partial"' in html
    assert "2026-11-11 is allocated only up to 05:20 UTC" in html
    assert "the training figures above run to 2026-11-12 00:00 UTC" in html
    assert 'data-partial-until="2026-11-11T05:20:00+00:00"' in html
    days = page.context["money"].days
    assert [d.partial_until is not None for d in days] == [False, True]


def test_a_day_still_running_is_allocated_up_to_its_time_and_agrees_with_training(
    two_day_job, login_client, lead
):
    """The demo's today: the second day costed and allocated at 12:00 of it, its telemetry up
    to then. Its allocation covers [00:00, 12:00), not 12 hours spread over a whole day."""
    noon = datetime(2026, 11, 11, 12, 0, tzinfo=UTC)
    TelemetryRollup.objects.filter(bucket__gte=noon).delete()
    with mock.patch("django.utils.timezone.now", return_value=noon):
        cost_days_compute(days=[DAYS[1]])
        allocation_days_compute(days=[DAYS[1]])
    page = login_client(lead).get(reverse("workloads:detail", args=[two_day_job.pk]), {"start": "2026-11-10"})
    summary = page.context["training"]
    morning = [i for i in summary.intervals if DAYS[1] == i.start.date() and i.end <= noon]
    assert len(morning) == 3
    day = AllocationDaily.objects.filter(workload=two_day_job, day=DAYS[1]).aggregate(
        cost=Sum("cost_allocation"), energy=Sum("energy_allocation_j")
    )
    # By hand: 2 GPUs × 12 h × 12.29 = 294.96 USD; 900 W × 43,200 s = 38,880,000 J = 10.8 kWh
    # × 1.5 × 0.12 = 1.944 USD; 296.904 USD, allocated as 296.90 (before: × 12/24, 148.45).
    assert day["cost"] == Decimal("296.90") and day["energy"] == 38_880_000
    assert abs(Decimal(str(sum(i.cost for i in morning))) - day["cost"]) <= Decimal("0.01")
    assert abs(sum(i.energy_j for i in morning) - day["energy"]) <= 1.0
    html = page.content.decode()
    assert "2026-11-11 is allocated only up to 12:00 UTC" in html


def test_the_training_export_adds_up_to_the_page_and_the_allocation(two_day_job, login_client, lead):
    url = reverse("workloads:detail", args=[two_day_job.pk])
    client = login_client(lead)
    page = client.get(url, {"start": "2026-11-10"})
    summary = page.context["training"]
    assert '<a href="?format=csv&amp;table=training" id="training-csv">' in page.content.decode()
    response = client.get(url, {"format": "csv", "table": "training"})
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="workload-{two_day_job.pk}-training.csv"'
    lines = list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert len(lines) == 12  # 13 reports, 12 intervals of 4 h
    # Every column adds up to the page's figure (by hand: 12,000 steps, 96 GPU-hours, 43.2 kWh,
    # 1,179.84 + 7.776 = 1,187.616 USD), which is the allocation's to the cent.
    assert sum(int(row["Steps"]) for row in lines) == summary.reported_steps == 12_000
    assert sum(float(row["GPU-hours (share × time)"]) for row in lines) == pytest.approx(96.0)
    assert sum(float(row["Energy (kWh)"]) for row in lines) == pytest.approx(43.2)
    assert sum(float(row["Capacity cost"]) for row in lines) == pytest.approx(1179.84)
    assert sum(float(row["Energy cost"]) for row in lines) == pytest.approx(7.776)
    assert sum(float(row["Cost"]) for row in lines) == pytest.approx(summary.cost) == pytest.approx(1187.616)
    assert {row["Currency"] for row in lines} == {"USD"}
    assert lines[0]["Interval start (UTC)"] == "2026-11-10T00:00:00+00:00"
    xlsx = client.get(url, {"format": "xlsx"})
    assert xlsx.status_code == 200 and xlsx.content[:2] == b"PK"
    refused = client.get(url, {"format": "pdf"})
    assert refused.status_code == 400 and b"format" in refused.content
    assert client.get(url, {"format": "csv", "table": "nope"}).status_code == 400
