"""Profiles in a real browser: upload a result file with its trace, open the run's Profile tab,
then compare its profile with an earlier run's from the run compare page."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.costs.run_cost_services import run_cost_compute
from accelboard.profiles.models import Profile
from accelboard.profiles.services import profile_attach
from accelboard.testing.traces import KERNELS, write_training_trace
from tests import factories
from tests.costs.builders import accelerator_price_create, host_place, site_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"
FLASH = KERNELS[1][0]


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def test_upload_with_a_trace_then_profile_tab_then_compare(
    page: Any, login: Any, screenshot: Any, engineer: Any, team: Any, media: Path, tmp_path: Path
) -> None:
    h100 = factories.accelerator_type_from(factories.H100)
    # The earlier run ran on a priced host and is costed per 1M tokens: its Profile tab splits that cost.
    host, _ = factories.host_create(team=team, gpus=1, gpu_name=factories.H100["driver_name"])
    site = site_create(name="lambda-usw", provider="lambda", region="us-west-1")
    host_place(host, site=site, provider="lambda", region="us-west-1", instance_type="gpu_1x_h100_sxm5")
    accelerator_price_create(
        accelerator_type=h100,
        price_per_hour="3.29",
        count=1,
        provider="lambda",
        region="us-west-1",
        instance_type="gpu_1x_h100_sxm5",
    )
    earlier = factories.run_create(
        team=team,
        accelerator_type=h100,
        host=host,
        started_at=datetime(2025, 3, 1, tzinfo=UTC),
        metrics={"throughput_tokens_per_s": 1100.0, "latency_p99_ms": 3100.0},
    )
    run_cost_compute(run=earlier)
    before = io.BytesIO()
    write_training_trace(before, seed=9, steps=4, layers=4, rank=0, world_size=2)
    before_1 = io.BytesIO()
    write_training_trace(before_1, seed=9, steps=4, layers=4, rank=1, world_size=2)
    profile_attach(
        run=earlier, files=[("rank0.json", before.getvalue()), ("rank1.json", before_1.getvalue())]
    )
    # The new run: flash attention 23% slower on both ranks.
    traces = []
    for rank in (0, 1):
        traces.append(tmp_path / f"host_{rank}.pt.trace.json.gz")
        write_training_trace(
            traces[-1], seed=9, steps=4, layers=4, rank=rank, world_size=2, slow={FLASH: 1.23}
        )

    login(page, engineer)
    page.goto("/runs/upload/")
    page.wait_for_load_state()
    page.set_input_files("#file-input", [str(FIXTURES / "vllm_2025.json"), *map(str, traces)])
    page.click("#preview-button")
    page.wait_for_selector("#file-1 .profile-preview")
    assert "kineto, 1 rank, 4 steps" in page.locator("#file-1 .profile-preview").inner_text()
    page.select_option("#r0-accelerator", "H100 SXM 80GB")
    screenshot(page, "profiles-upload-preview")
    page.click("#save-button")
    page.wait_for_selector("a.saved-profile")
    run = BenchmarkRun.objects.exclude(pk=earlier.pk).get()
    assert Profile.objects.get(run=run).ranks == 2

    page.click("a.saved-run")
    assert urlsplit(page.url).path == f"/runs/{run.pk}/"
    page.click("#profile-tab")
    assert urlsplit(page.url).path == f"/runs/{run.pk}/profile/"
    page.wait_for_selector("#rank-chart .main-svg")
    page.wait_for_selector("#step-chart .main-svg")
    assert "Compute-bound" in page.locator("#profile-verdict h2").inner_text()
    # Two bars (ranks), one stacked trace per category present.
    assert page.locator("#rank-chart .bars .point").count() >= 2
    assert page.locator("#kernel-table tbody tr").first.get_attribute("data-category") == "gemm"
    assert "flash_fwd_kernel" in page.locator("#kernel-table").inner_text()
    total = page.locator("#category-total").inner_text()
    assert total.endswith("ms")
    screenshot(page, "profiles-run-profile-tab")

    page.goto(f"/runs/compare/?a={earlier.pk}&b={run.pk}")
    page.click("#compare-profiles a")
    assert urlsplit(page.url).path == "/runs/profiles/compare/"
    page.wait_for_selector("#compare-chart .main-svg")
    slower = page.locator("#compare-kernels tr[data-status=slower]")
    assert slower.count() == 1 and "flash_fwd_kernel" in slower.inner_text()
    assert "+23.0%" in slower.inner_text()
    assert "per step and GPU" in page.locator("#compare-net").inner_text()
    screenshot(page, "profiles-compare")

    page.goto(f"/runs/{earlier.pk}/profile/")
    page.wait_for_selector("#rank-chart .main-svg")
    costs = page.locator("#profile-costs").inner_text()
    assert "USD per 1M tokens" in costs and "Idle GPU time is" in costs
    screenshot(page, "profiles-run-profile-costs")
    assert page.js_errors == []
