"""A training run's profile whose host sent DCGM counters in a real browser: the verdict says the
kernels are compute-bound on tensor cores (from the counters, not the trace), and the run's page
shows the per-step table with its link to the Profile tab."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.fleet.models import Accelerator
from accelboard.fleet.rollup_services import telemetry_rollups_refresh
from accelboard.profiles.models import Profile
from accelboard.profiles.services import profile_attach
from accelboard.testing.traces import write_training_trace
from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_verdict_reads_the_counters_and_the_run_page_shows_the_steps(
    page: Any, login: Any, screenshot: Any, lead: Any, team: Any
) -> None:
    factories.accelerator_type_from(factories.H100)
    host, gpus = factories.host_create(team=team, gpus=2)
    times = factories.telemetry_days_load(gpus=gpus, days=1, interval_s=300).times
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE fleet_telemetrysample SET tensor_active = 72, dram_active = 31 WHERE time >= %s",
            [times[-36]],
        )
    telemetry_rollups_refresh(start=times[-36] - timedelta(hours=1), end=times[-1] + timedelta(minutes=5))
    h100 = Accelerator.objects.get(pk=gpus[0].pk).accelerator_type
    run = factories.run_create(
        team=team, accelerator_type=h100, accelerator_count=2, host=host, scenario="training"
    )
    BenchmarkRun.objects.filter(pk=run.pk).update(started_at=times[-24], finished_at=times[-12])
    files = []
    for rank in range(2):
        buffer = io.BytesIO()
        write_training_trace(buffer, steps=4, rank=rank, world_size=2)
        files.append((f"rank{rank}.json", buffer.getvalue()))
    profile_attach(run=run, files=files)
    assert Profile.objects.get(run=run).verdict_kind == "compute-bound"
    login(page, lead)
    page.goto(f"/runs/{run.pk}/profile/")
    verdict = page.locator("#profile-verdict")
    assert verdict.get_attribute("data-counters") == "tensor"
    assert verdict.locator("h2").inner_text().startswith("Compute-bound on tensor cores")
    assert "tensor pipes active 72%, DRAM active 31%" in verdict.inner_text()
    assert "no hardware counters" not in verdict.inner_text()
    screenshot(page, "profile-counters-verdict")
    page.goto(f"/runs/{run.pk}/")
    steps = page.locator("#run-profile-steps")
    assert steps.is_visible() and steps.locator("tr[data-step]").count() == 8
    steps.scroll_into_view_if_needed()
    screenshot(page, "run-training-profile-steps")
    steps.locator("#profile-steps-link").click()
    page.wait_for_url(f"**/runs/{run.pk}/profile/#hta-steps")
    assert page.locator("#hta-steps").is_visible()
    assert page.js_errors == []
