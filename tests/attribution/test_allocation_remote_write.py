"""The allocation job on intervals that came from dcgm-exporter's pod labels through Prometheus
remote-write (accelboard/fleet/remote_write_pods.py): the GPU-seconds the pod was seen on go to it.

One H100 of ``team`` on 2026-11-10 (UTC) at 98.32 USD per 8 GPU-hours, reporting all day at 100 %
and 500 W (a GPU-day of 294.96 USD, 43,200,000 J). dcgm-exporter, scraped every 15 s, names pod
serving/llama on it from 06:00 to 12:00 and no pod from 12:00 to 18:00, in one remote-write
request an hour. Rule: namespace serving -> ``team``.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from accelboard.api.services import token_create
from accelboard.attribution.models import AllocationDaily
from accelboard.attribution.services import RuleInput, allocation_day_compute, rule_set_save
from accelboard.costs.services import cost_day_compute
from accelboard.fleet.models import Accelerator, GpuAttribution
from accelboard.fleet.remote_write_services import prometheus_write_ingest
from tests import factories
from tests.costs.builders import accelerator_price_create, minutes_load
from tests.fleet.prom_wire import snappy, write_request

from .conftest import DAY, NAME, T0

pytestmark = pytest.mark.django_db

UUID = "GPU-00000000-0000-4000-8000-0000000000aa"
GPU = {"UUID": UUID, "Hostname": "prom-node", "gpu": "0", "modelName": NAME}
HOUR_MS = 3_600_000


def _hour(start_ms: int, pod: dict[str, str]) -> bytes:
    stamps = range(start_ms, start_ms + HOUR_MS, 15_000)
    labels = {"__name__": "DCGM_FI_DEV_GPU_UTIL", **GPU, **pod}
    return snappy(write_request([(labels, [(ms, 100.0) for ms in stamps])]))


def test_the_allocation_job_gives_the_pod_the_gpu_seconds_it_was_seen_on(
    team: Any, staff: Any, lead: Any
) -> None:
    h100 = factories.accelerator_type_from(factories.H100)
    six = int((T0 + timedelta(hours=6)).timestamp() * 1000)
    llama = {"pod": "llama", "namespace": "serving", "container": "vllm"}
    idle = {"pod": "", "namespace": "", "container": ""}
    for hour in range(12):
        prometheus_write_ingest(
            team_id=team.pk, body=_hour(six + hour * HOUR_MS, llama if hour < 6 else idle)
        )
    # One interval a request, lined up end to start: six hours held.
    spans = list(GpuAttribution.objects.order_by("start").values_list("start", "end"))
    assert len(spans) == 6 and all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert (spans[0][0], spans[-1][1]) == (T0 + timedelta(hours=6), T0 + timedelta(hours=12))

    gpu = Accelerator.objects.get(uuid=UUID)
    minutes_load(gpus=[gpu], start=T0, minutes=24 * 60, util=100.0, power_w=500.0)
    accelerator_price_create(
        accelerator_type=h100,
        price_per_hour="98.32",
        count=8,
        provider="on-prem",
        region="",
        instance_type="",
    )
    cost_day_compute(day=DAY)
    rule_set_save(user=staff, rules=[RuleInput(selector="namespace", value="serving", team=team)], note="v1")
    allocation_day_compute(day=DAY)

    lines = {
        (row.kind, row.workload.uid if row.workload else None): row
        for row in AllocationDaily.objects.filter(accelerator=gpu).select_related("workload")
    }
    pod = lines[("workload", "serving/llama")]
    assert pod.team_id == team.pk
    # Time held: a quarter of the day, of cost and of energy; the rest idle.
    assert (pod.cost_allocation, pod.energy_allocation_j) == (Decimal("73.74"), 10_800_000)
    idle_line = lines[("idle", None)]
    assert (idle_line.cost_allocation, idle_line.energy_allocation_j) == (Decimal("221.22"), 32_400_000)
    # Measured: 100 % busy all day; the pod's quarter, the rest busy time no interval covers.
    assert (pod.cost_usage, pod.energy_usage_j) == (Decimal("73.74"), 10_800_000)
    uncovered = lines[("unattributed", None)]
    assert (uncovered.cost_usage, uncovered.energy_usage_j) == (Decimal("221.22"), 32_400_000)

    # The workload page and the allocation API read the same.
    client = Client()
    client.force_login(lead)
    period = {"start": DAY.isoformat(), "end": DAY.isoformat()}
    response = client.get(f"/workloads/{pod.workload_id}/", period)
    assert response.status_code == 200
    [money] = response.context["money"].totals
    assert (money.cost_allocation, money.energy_allocation_j) == (Decimal("73.74"), 10_800_000)
    token = token_create(team=team, kind="read", name="r")[1]
    answer = Client().get(
        "/api/v1/allocation", {**period, "group_by": "namespace"}, HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    rows = {(row["kind"], row["key"]): row for row in answer.json()["rows"]}
    assert (rows[("workload", "serving")]["cost"], rows[("idle", None)]["cost"]) == ("73.74", "221.22")
