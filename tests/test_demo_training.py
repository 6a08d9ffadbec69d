"""The demo's training (``accelboard.demo.training``): MLPerf Training results on several systems
costed to train, and two jobs on a training host reporting progress, the second slowing down
mid-run and raising its step-time alert; one demo job's cost per step checked by hand."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client

from accelboard.alerts.choices import AlertKind
from accelboard.alerts.models import Alert
from accelboard.attribution.models import TrainingProgress
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.costs.pricebook_selectors import price_book_load
from accelboard.demo import training
from accelboard.fleet.models import GpuAttribution, Workload
from tests.test_demo_fleet import SMALL_FLAGS


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_the_demo_trains(transactional_db: None, tmp_path: Path) -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE fleet_telemetrysample, fleet_gpuattribution")
    call_command("demo_fleet", *SMALL_FLAGS, f"--manifest={tmp_path / 'm.json'}", stdout=StringIO())

    runs = list(
        BenchmarkRun.objects.filter(workload__scenario="training").select_related("cost", "accelerator_type")
    )
    assert len(runs) == sum(len(minutes) for _, _, minutes in training.SYSTEMS)
    for run in runs:
        t = run.cost.training
        assert t["iterations"] == training.SAMPLES / training.BATCH and t["samples"] == training.SAMPLES
        assert t["per_iteration_s"] * t["iterations"] == pytest.approx(t["time_to_train_s"])
        if "cost_to_train" in t:
            assert t["capacity_cost_to_train"] + t.get("energy_cost_to_train", 0) == pytest.approx(
                t["cost_to_train"]
            )
    h200 = [r for r in runs if r.accelerator_type.slug == "h200-sxm-141gb"]
    assert sorted(round(r.cost.training["time_to_train_s"] / 60, 1) for r in h200) == [23.3, 23.8]

    jobs = list(Workload.objects.filter(pk__in=TrainingProgress.objects.values("workload_id")))
    assert len(jobs) == 2
    alerts = list(Alert.objects.filter(kind=AlertKind.TRAINING))
    # The slowed job, and only it, has its alert, opened after the middle of its run.
    assert len(alerts) == 1
    slowed = Workload.objects.get(pk=alerts[0].detail["workload_id"])
    points = list(TrainingProgress.objects.filter(workload=slowed).order_by("at"))
    middle = points[len(points) // 2].at
    assert middle <= alerts[0].opened_at <= points[-1].at
    assert alerts[0].pct_change == pytest.approx(25.0, abs=3.0)

    # By hand, the slowed job's first interval: its holds' GPU-seconds in those five minutes ×
    # the price per GPU-second of its host's row / the steps it made.
    first, second = points[0], points[1]
    holds = GpuAttribution.objects.filter(
        workload_id=slowed.pk, start__lt=second.at, end__gt=first.at
    ).select_related("accelerator__host")
    book = price_book_load(today=second.at.date())
    cost = 0.0
    for hold in holds:
        overlap = (min(hold.end, second.at) - max(hold.start, first.at)).total_seconds()
        price = book.accelerator_price(
            host=hold.accelerator.host,
            accelerator_type_id=hold.accelerator.accelerator_type_id,
            day=first.at.date(),
        )
        assert price is not None
        cost += overlap * hold.share * float(price.price_per_accelerator_hour) / 3600
    client = Client()
    client.force_login(_staff())
    page = client.get(f"/workloads/{slowed.pk}/", {"start": points[0].at.date().isoformat()})
    assert page.status_code == 200
    summary = page.context["training"]
    steps = second.step - first.step
    interval = summary.intervals[0]
    assert interval.capacity_cost_per_step == pytest.approx(cost / steps)
    # Its energy cost: its energy × its site's PUE × price per kWh (the daily cost pass's), so the
    # cost per step is capacity + energy, as the allocation's.
    site = book.electricity_price(host=holds[0].accelerator.host, day=first.at.date())
    assert site is not None and interval.energy_j is not None
    energy_cost = interval.energy_j / 3.6e6 * site.pue * float(site.price_per_kwh)
    assert interval.energy_cost_per_step == pytest.approx(energy_cost / steps)
    assert interval.cost_per_step == pytest.approx((cost + energy_cost) / steps)
    assert summary.projection is not None and summary.projection.planned_steps == points[-1].planned_steps
    assert client.get(f"/runs/{h200[0].pk}/").status_code == 200


def _staff() -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(is_staff=True).first()
