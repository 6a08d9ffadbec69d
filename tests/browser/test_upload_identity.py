"""Uploads in a real browser join the series of the model they name, however the file names it:
an MLPerf system folder (llama2-70b-99.9 on "NVIDIA H100-SXM5-80GB") and a vLLM result of
meta-llama/Llama-2-70b-chat-hf land beside a run recorded as the demo records Llama-2-70B, in the
hardware page's one H100 series; a close name (the base Llama-2-70b-hf) waits for the uploader's
choice, which the team then remembers."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from accelboard.benchmarks.models import BenchmarkRun, ModelAlias
from accelboard.benchmarks.services import (
    MetricInput,
    WorkloadSpec,
    model_variant_get_or_create,
    run_record,
    workload_get_or_create,
)
from accelboard.fleet.catalogue_services import accelerator_types_sync
from accelboard.fleet.models import AcceleratorType
from tests.dashboard.test_hardware_page import run_cost_set

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HERE = Path(__file__).resolve().parents[1] / "benchmarks" / "fixtures" / "identity"


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    accelerator_types_sync()  # the live server's tests flush the catalogue's types
    return settings.MEDIA_ROOT


def _demo_run(team: Any) -> BenchmarkRun:
    """A nightly Llama-2-70B run written the way the demo writes its runs: by its catalogue names."""
    variant = model_variant_get_or_create(
        model="Llama-2-70B", variant="fp16", precision="fp16", family="Llama"
    )
    workload = workload_get_or_create(
        team=team,
        variant=variant,
        spec=WorkloadSpec(scenario="server", batch_size=64, framework="vLLM", framework_version="0.6.3"),
    )
    run, _ = run_record(
        team=team,
        workload=workload,
        accelerator_type=AcceleratorType.objects.get(slug="h100-sxm-80gb"),
        accelerator_count=8,
        started_at=datetime(2025, 6, 1, 2, 0, tzinfo=UTC),
        metrics=[
            MetricInput(name="throughput_tokens_per_s", value=16000.0, unit="tokens/s"),
            MetricInput(name="latency_p99_ms", value=12500.0, unit="ms"),
        ],
        uploaded_via="demo",
        source_format="demo",
    )
    return run


def test_uploads_of_an_hf_id_and_an_mlperf_folder_join_the_models_series(
    page: Any, login: Any, screenshot: Any, engineer: Any, team: Any, media: Path
) -> None:
    demo = _demo_run(team)
    login(page, engineer)

    # An MLPerf system folder, chosen as a folder: one run, its names resolved by the catalogue.
    page.goto("/runs/upload/")
    page.wait_for_load_state()
    page.set_input_files("#folder-input", str(HERE / "mlperf"))
    assert page.locator("#chosen li").count() == 5
    page.click("#preview-button")
    page.wait_for_selector("#run-0 tr[data-metric=throughput_tokens_per_s]")
    assert page.locator(".run-preview").count() == 1
    assert page.locator("#progress-text").inner_text() == "Read 5 files into 1 run"
    model = page.locator("#run-0 .match[data-kind=model]").inner_text()
    assert model == "Model: llama2-70b-99.9 → Llama-2-70B (built-in alias llama2-70b)"
    accelerator = page.locator("#run-0 .match[data-kind=accelerator]").inner_text()
    assert accelerator == "Accelerator: NVIDIA H100-SXM5-80GB → H100 SXM 80GB (built-in alias)"
    assert page.locator("#run-0 .needs").count() == 0
    screenshot(page, "upload-identity-mlperf-folder")
    page.click("#save-button")
    page.wait_for_selector("a.saved-run")
    mlperf = BenchmarkRun.objects.get(source_format="mlperf-inference")

    # A vLLM result naming the Hugging Face id: the model resolves, the hardware is picked.
    page.goto("/runs/upload/")
    page.wait_for_load_state()
    page.set_input_files("#file-input", str(HERE / "vllm_llama2_70b_chat.json"))
    page.click("#preview-button")
    page.wait_for_selector("#run-0 .match[data-kind=model]")
    model = page.locator("#run-0 .match[data-kind=model]").inner_text()
    assert model == "Model: meta-llama/Llama-2-70b-chat-hf → Llama-2-70B (built-in alias Llama-2-70b-chat-hf)"
    assert page.locator("#run-0 .run-files").inner_text() == "Read from vllm_llama2_70b_chat.json"
    assert "does not name it" in page.locator("#run-0 .match[data-kind=accelerator]").inner_text()
    page.select_option("#r0-accelerator", "H100 SXM 80GB")
    page.fill("#r0-accelerator_count", "8")
    page.select_option("#r0-precision", "fp16")
    page.click("#save-button")
    page.wait_for_selector("a.saved-run")
    vllm = BenchmarkRun.objects.get(source_format="vllm-serving")
    assert vllm.workload.variant == mlperf.workload.variant == demo.workload.variant
    assert (vllm.model_match, vllm.accelerator_match, mlperf.model_match) == ("alias", "user", "alias")

    # The hardware page: one Llama-2-70B Server group of three runs, one H100 series of three points.
    for run, capacity in ((demo, "0.30"), (mlperf, "0.21"), (vllm, "3.90")):
        run_cost_set(run=run, capacity=capacity, energy="0.02")
    page.goto("/hardware/")
    page.wait_for_selector("#pareto-chart .main-svg")
    chips = page.locator("nav.hw-groups a.chip")
    assert chips.count() == 1
    assert chips.first.get_attribute("data-group") == "Llama-2-70B|server"
    assert "3 runs" in chips.first.inner_text()
    assert page.locator("#pareto-chart .legendtext").all_text_contents() == [
        "H100 SXM 80GB",
        "Pareto frontier",
    ]
    assert page.locator("#pareto-chart .scatterlayer .trace").nth(0).locator(".point").count() == 3
    rows = page.locator("[data-table=configurations] tbody tr")
    assert rows.count() == 3
    assert all("8× H100 SXM 80GB" in rows.nth(i).inner_text() for i in range(3))
    screenshot(page, "upload-identity-hardware")
    assert page.js_errors == []


def test_a_close_name_is_picked_and_remembered(
    page: Any, login: Any, screenshot: Any, engineer: Any, team: Any, media: Path
) -> None:
    login(page, engineer)
    page.goto("/runs/upload/")
    page.wait_for_load_state()
    page.set_input_files("#file-input", str(HERE / "vllm_llama2_70b_base.json"))
    page.click("#preview-button")
    page.wait_for_selector("#run-0 .match-ambiguous")
    line = page.locator("#run-0 .match[data-kind=model]")
    assert line.inner_text() == (
        "Model: meta-llama/Llama-2-70b-hf is not in the catalogue; close to Llama-2-70B. "
        "Pick what it is, or add it as new."
    )
    assert line.evaluate("el => getComputedStyle(el).color") == "rgb(220, 38, 38)"
    # The candidates come first in the picker; "remember" is offered checked for a close name.
    assert page.locator("#r0-model optgroup").first.get_attribute("label") == "Close to the file's name"
    assert page.locator("#r0-remember").is_checked()
    assert page.locator("#r0-new_model").is_hidden()
    page.select_option("#r0-model", "__new__")
    assert page.locator("#r0-new_model").input_value() == "meta-llama/Llama-2-70b-hf"
    page.select_option("#r0-model", "Llama-2-70B")
    page.select_option("#r0-accelerator", "H100 SXM 80GB")
    page.select_option("#r0-precision", "fp16")
    screenshot(page, "upload-identity-close-name")
    page.click("#save-button")
    page.wait_for_selector("a.saved-run")
    run = BenchmarkRun.objects.get()
    assert (run.workload.variant.model.name, run.model_match) == ("Llama-2-70B", "user")
    assert ModelAlias.objects.get(team=team).name == "meta-llama/Llama-2-70b-hf"

    # The next upload of that name is matched by the team's alias.
    page.goto("/runs/upload/")
    page.wait_for_load_state()
    page.set_input_files("#file-input", str(HERE / "vllm_llama2_70b_base.json"))
    page.click("#preview-button")
    page.wait_for_selector("#run-0 .match[data-kind=model]")
    assert page.locator("#run-0 .match[data-kind=model]").inner_text() == (
        "Model: meta-llama/Llama-2-70b-hf → Llama-2-70B (team alias)"
    )
    assert page.js_errors == []
