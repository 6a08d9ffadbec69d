"""One result, one run, one name, in a real browser (issue 33, class 5): an MLPerf result uploaded
as loose files (the uploader names the model) and again as its folder is one run, one Server group
on the hardware page, its accuracy under one name; a vLLM result at request rate ``inf`` is online
serving, never an Offline run."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from accelboard.benchmarks.models import BenchmarkRun, MetricValue
from accelboard.fleet.catalogue_services import accelerator_types_sync

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TESTS = Path(__file__).resolve().parents[1]
FOLDER = TESTS / "benchmarks" / "fixtures" / "identity" / "mlperf"
VLLM_INF = TESTS / "importers" / "fixtures" / "vllm_rate_inf.json"


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    accelerator_types_sync()  # the live server's tests flush the catalogue's types
    return settings.MEDIA_ROOT


def _loose(tmp_path: Path) -> list[str]:
    """The folder's files picked one by one: the same bytes, no folders (so no model)."""
    out = tmp_path / "loose"
    out.mkdir()
    for path in FOLDER.rglob("*"):
        if path.is_file():
            shutil.copy(path, out / path.name)
    return sorted(str(p) for p in out.iterdir())


def _save(page: Any) -> str:
    page.click("#save-button")
    page.wait_for_selector("a.saved-run")
    return page.locator("a.saved-run").first.get_attribute("href")


def test_loose_files_and_the_folder_of_one_result_are_one_run(
    page: Any, login: Any, screenshot: Any, engineer: Any, team: Any, media: Path, tmp_path: Path
) -> None:
    login(page, engineer)
    page.goto("/runs/upload/")
    page.wait_for_load_state()
    page.set_input_files("#file-input", _loose(tmp_path))
    page.click("#preview-button")
    page.wait_for_selector("#run-0 tr[data-metric=throughput_tokens_per_s]")
    page.select_option("#r0-model", "Llama-2-70B")  # loose files do not name the model
    loose = _save(page)

    page.goto("/runs/upload/")
    page.wait_for_load_state()
    page.set_input_files("#folder-input", str(FOLDER))
    page.click("#preview-button")
    page.wait_for_selector("#run-0 tr[data-metric=throughput_tokens_per_s]")
    assert _save(page) == loose
    run = BenchmarkRun.objects.get()
    assert run.workload.scenario == "server"
    names = set(MetricValue.objects.filter(name__startswith="accuracy:").values_list("name", flat=True))
    assert names and all(name.startswith("accuracy:mlperf:") for name in names)

    # A vLLM benchmark_serving result at request rate inf: online serving, its own group.
    page.goto("/runs/upload/")
    page.wait_for_load_state()
    page.set_input_files("#file-input", str(VLLM_INF))
    page.click("#preview-button")
    page.wait_for_selector("#run-0 .match[data-kind=model]")
    page.select_option("#r0-model", "Llama-3.1-8B")
    page.select_option("#r0-accelerator", "H100 SXM 80GB")
    page.select_option("#r0-precision", "bf16")
    assert page.locator("#r0-scenario option").first.inner_text() == "from file: Online serving"
    screenshot(page, "upload-shapes-vllm-inf-preview")
    _save(page)

    page.goto("/hardware/")
    page.wait_for_load_state()
    chips = {
        page.locator("nav.hw-groups a.chip").nth(i).get_attribute("data-group"): page.locator(
            "nav.hw-groups a.chip"
        )
        .nth(i)
        .inner_text()
        for i in range(page.locator("nav.hw-groups a.chip").count())
    }
    assert set(chips) == {"Llama-2-70B|server", "Llama-3.1-8B|serving"}
    assert "1 run" in chips["Llama-2-70B|server"]
    assert "Llama-3.1-8B · Online serving" in chips["Llama-3.1-8B|serving"]
    screenshot(page, "upload-shapes-hardware")
    assert page.js_errors == []
