"""The demo's Llama-2-70B plan has the non-obvious answer it was shaped for (accelboard/demo/benchmark_plan.py,
"Capacity plan"): fp16 on 8× H100 is the cheapest per token on its benchmark, yet fp8 on 8× H200
serves the production peak at the team's 18 s SLO for less, because the H100's cheap batch size
misses the SLO and at the SLO it needs twice the replicas."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.utils import timezone

from accelboard.benchmarks.models import Model
from accelboard.demo import generator, loader
from accelboard.planning import capacity as c


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def demo(transactional_db: None) -> None:
    # The raw telemetry table is unmanaged: the flush between tests does not empty it.
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE fleet_telemetrysample")
    config = generator.DemoConfig(
        now=timezone.now(),
        hosts=6,
        days_runs=20,
        days_telemetry=2,
        telemetry_interval_s=900,
        serving_interval_s=900,
    )
    loader.demo_fleet_load(config=config)


def test_it_plans_the_demo_70b_on_fp8_h200_although_fp16_h100_is_cheaper_per_token(demo: None) -> None:
    client = Client()
    client.force_login(get_user_model().objects.get(username="llm-lead"))
    model = Model.objects.get(name="Llama-2-70B")
    response = client.get("/plan/", {"model": model.pk, "weeks": 1})
    assert response.status_code == 200
    plan: c.Plan = response.context["plan"]
    assert plan.inputs.objective.e2e_p99_ms == 18000.0  # the team's SLO
    best, cheapest = plan.best, plan.benchmark_cheapest
    assert best is not None and best.option.label == "fp8 on 8× H200 SXM 141GB"
    assert best.is_current and best.point is not None and best.point.batch_size == 64
    assert cheapest is not None and cheapest.option.label == "fp16 on 8× H100 SXM 80GB"
    assert cheapest.fastest is not None and cheapest.fastest.batch_size == 128
    assert cheapest.fastest.p99_ms is not None and cheapest.fastest.p99_ms > 18000.0
    assert cheapest.point is not None and cheapest.point.batch_size == 32
    assert cheapest.ranked and cheapest.total_monthly is not None and best.total_monthly is not None
    assert cheapest.gpus is not None and best.gpus is not None and cheapest.gpus > best.gpus
    assert cheapest.total_monthly > Decimal("1.2") * best.total_monthly
    assert "is cheaper per token on its benchmark" in plan.headline()
    # Two days of traffic: the plan says it has no trend rather than inventing one.
    assert plan.traffic.growth_pct_per_month is None
    assert any("complete day" in note for note in plan.notes)
