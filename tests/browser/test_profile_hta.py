"""The Profile tab's HTA-style sections in a real browser: a two-rank profile with a straggler on
a host that sent DCGM profiling counters during the run."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.fleet.models import Accelerator
from accelboard.profiles.services import profile_attach
from accelboard.testing.traces import KERNELS, write_training_trace
from tests import factories
from tests.fleet.test_profiling_pages import profile as write_profiling_counters

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _trace(**options: Any) -> bytes:
    buffer = io.BytesIO()
    write_training_trace(buffer, steps=4, layers=4, world_size=2, input_wait_us=8000.0, **options)
    return buffer.getvalue()


def test_the_profile_tab_shows_idle_causes_launches_steps_straggler_and_counters(
    page: Any, login: Any, screenshot: Any, lead: Any, team: Any
) -> None:
    factories.accelerator_type_from(factories.H100)
    host, gpus = factories.host_create(team=team, gpus=2)
    times = factories.telemetry_days_load(gpus=gpus, days=1, interval_s=300).times
    for gpu in gpus:
        write_profiling_counters(gpu, times[-36], times[-1] + timedelta(minutes=5))
    h100 = Accelerator.objects.get(pk=gpus[0].pk).accelerator_type
    run = factories.run_create(team=team, accelerator_type=h100, accelerator_count=2, host=host)
    BenchmarkRun.objects.filter(pk=run.pk).update(started_at=times[-24], finished_at=times[-12])
    # Rank 1's GEMMs run 3 times as long (more than the data loaders' jitter): the other rank waits for it at each all-reduce.
    profile_attach(
        run=run,
        files=[("rank0.json", _trace(rank=0)), ("rank1.json", _trace(rank=1, slow={KERNELS[0][0]: 3.0}))],
    )
    login(page, lead)
    page.goto(f"/runs/{run.pk}/profile/")
    for section in ("#hta-idle", "#hta-launch", "#hta-counters", "#hta-ranks", "#hta-steps"):
        assert page.locator(section).is_visible(), section
    assert "Rank 1" in page.locator("#hta-ranks").inner_text()
    assert page.locator("#hta-ranks tr.straggler").get_attribute("data-rank") == "1"
    assert page.locator("#hta-counters tbody tr").count() == 2
    assert page.locator("#counters-reading").inner_text().strip()
    assert page.locator('#hta-launch [data-launch="p50"]').inner_text() != "—"
    page.locator("#hta").scroll_into_view_if_needed()
    screenshot(page, "profile-hta")
    assert page.js_errors == []
