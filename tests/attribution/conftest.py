"""The allocation tests' world (tests/attribution/test_allocation_job.py's docstring describes it):
one shared host's day set up through the product's own ingest, cost pass and rule saving."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from accelboard.attribution.services import RuleInput, allocation_day_compute, rule_set_save
from accelboard.costs.services import cost_day_compute
from accelboard.fleet.ingest_services import telemetry_batch_ingest
from accelboard.fleet.models import Accelerator
from tests import factories
from tests.costs.builders import accelerator_price_create, minutes_load

DAY = date(2026, 11, 10)
T0 = datetime(2026, 11, 10, tzinfo=UTC)
H = 3600
TS, MIG, FULL, IDLE = (f"GPU-00000000-0000-4000-8000-00000000000{i}" for i in range(1, 5))
MIG_3 = "MIG-00000000-0000-4000-8000-000000000031"
MIG_2 = "MIG-00000000-0000-4000-8000-000000000032"
NAME = "NVIDIA H100 80GB HBM3"


def _pod(name: str, namespace: str) -> dict[str, Any]:
    return {"kind": "pod", "uid": f"{namespace}/{name}", "namespace": namespace, "name": name}


POD_A, POD_B, POD_X = _pod("a", "ns-a"), _pod("b", "ns-b"), _pod("x", "unmapped")


def _hold(gpu: str, start_h: float, end_h: float, pod: dict[str, Any], share: float = 1.0) -> dict[str, Any]:
    return {
        "gpu": gpu,
        "start": T0.timestamp() + start_h * H,
        "end": T0.timestamp() + end_h * H,
        "workload": pod,
        "share": share,
        "basis": "exclusive" if share == 1.0 else "even",
    }


def _payload() -> dict[str, Any]:
    gpus = [
        {"uuid": uuid, "index": i, "name": NAME, "memory_bytes": 85_520_809_984}
        for i, uuid in enumerate((TS, MIG, FULL, IDLE))
    ]
    gpus[1].update(mig_mode=True, compute_slices=7)
    gpus += [
        {"uuid": MIG_3, "parent_uuid": MIG, "mig_mode": True, "compute_slices": 3},
        {"uuid": MIG_2, "parent_uuid": MIG, "mig_mode": True, "compute_slices": 2},
    ]
    return {
        "batch_id": "shared-node:1",
        "host": {"hostname": "shared-node", "agent_version": "0.1.0", "simulated": True},
        "accelerators": gpus,
        "samples": [{"time": T0.timestamp(), "gpu": FULL, "power_w": 500.0, "gpu_util": 100.0}],
        "attribution": [
            _hold(TS, 0, 12, POD_A, 0.5),
            _hold(TS, 0, 12, POD_B, 0.5),
            _hold(TS, 12, 18, POD_X),
            _hold(MIG_3, 0, 24, POD_A),
            _hold(MIG_2, 0, 12, POD_B),
            _hold(FULL, 0, 24, POD_A),
        ],
    }


def rules_v1(team: Any, b_team: Any) -> list[RuleInput]:
    return [
        RuleInput(selector="namespace", value="ns-a", team=team),
        RuleInput(selector="namespace", value="ns-b", team=b_team),
    ]


@pytest.fixture
def world(team: Any, other_team: Any, staff: Any) -> dict[str, Any]:
    h100 = factories.accelerator_type_from(factories.H100)
    result = telemetry_batch_ingest(team_id=team.pk, payload=_payload())
    assert result["attribution"] == 6
    gpu = {a.uuid: a for a in Accelerator.objects.all()}
    minutes_load(gpus=[gpu[TS]], start=T0, minutes=18 * 60, util=100.0, power_w=600.0)
    minutes_load(gpus=[gpu[TS]], start=T0 + timedelta(hours=18), minutes=6 * 60, util=0.0, power_w=100.0)
    minutes_load(gpus=[gpu[MIG]], start=T0, minutes=24 * 60, util=None, power_w=300.0)
    minutes_load(gpus=[gpu[FULL]], start=T0, minutes=24 * 60, util=100.0, power_w=500.0)
    minutes_load(gpus=[gpu[IDLE]], start=T0, minutes=12 * 60, util=0.0, power_w=60.0)
    accelerator_price_create(
        accelerator_type=h100,
        price_per_hour="98.32",
        count=8,
        provider="on-prem",
        region="",
        instance_type="",
    )
    cost_day_compute(day=DAY)
    rule_set_save(user=staff, rules=rules_v1(team, other_team), note="v1")
    allocation_day_compute(day=DAY)
    return {"gpu": gpu, "team": team, "other_team": other_team, "staff": staff}
