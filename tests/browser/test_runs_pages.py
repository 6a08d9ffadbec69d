"""The benchmark pages in a real browser: upload a file, preview it, fill the missing hardware,
save, open the run, compare it with another run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from accelboard.benchmarks.models import BenchmarkRun
from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"
GREEN = "rgb(22, 163, 74)"


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def test_it_uploads_previews_saves_opens_and_compares_a_run(
    page: Any, login: Any, screenshot: Any, engineer: Any, team: Any, media: Path
) -> None:
    h100 = factories.accelerator_type_from(factories.H100)
    # An earlier run to compare with: slower and with a worse p99 than the file's.
    earlier = factories.run_create(
        team=team,
        accelerator_type=h100,
        started_at=datetime(2025, 3, 1, tzinfo=UTC),
        metrics={"throughput_tokens_per_s": 1100.0, "latency_p99_ms": 3100.0},
    )
    login(page, engineer)
    page.goto("/runs/")
    page.click("text=Upload results")
    assert urlsplit(page.url).path == "/runs/upload/"
    page.wait_for_load_state()  # the page's script listens for the file input's change event

    page.set_input_files("#file-input", str(FIXTURES / "vllm_2025.json"))
    assert page.locator("#chosen li").inner_text().startswith("vllm_2025.json")
    page.click("#preview-button")
    page.wait_for_selector("#run-0 tr[data-metric=throughput_tokens_per_s]")
    preview = page.locator("#run-0")
    assert "vllm-serving" in preview.locator(".recognised").inner_text()
    assert "Qwen2.5-7B-Instruct-FP8-dynamic" in preview.locator(".recognised").inner_text()
    assert "1,267.2" in preview.locator("tr[data-metric=throughput_tokens_per_s]").inner_text()
    assert "does not name the accelerator" in preview.locator(".needs").inner_text()
    assert page.locator("#progress-text").inner_text() == "Read 1 file into 1 run"
    # Not in the catalogue, close to nothing: a new model, its -FP8-dynamic suffix the variant.
    assert (
        "→ Qwen2.5-7B-Instruct (new to the catalogue)"
        in preview.locator(".match[data-kind=model]").inner_text()
    )
    # The file lacks the hardware: the field says so, and saving without it is refused by name.
    assert "missing" in (preview.locator("label.missing").first.inner_text())
    page.click("#save-button")
    page.wait_for_function("() => document.getElementById('run-0-error').textContent.includes('accelerator')")
    assert BenchmarkRun.objects.count() == 1
    screenshot(page, "runs-upload-preview-missing-hardware")

    page.select_option("#r0-accelerator", "H100 SXM 80GB")
    page.fill("#r0-git_commit", "a1b2c3d4e5")
    page.fill("#r0-branch", "main")
    page.click("#save-button")
    page.wait_for_selector("a.saved-run")
    assert page.locator("#run-0-error").inner_text() == ""
    screenshot(page, "runs-upload-saved")
    run = BenchmarkRun.objects.exclude(pk=earlier.pk).get()
    assert (run.accelerator_type, run.git_commit, run.uploaded_via) == (h100, "a1b2c3d4e5", "web")

    with page.expect_navigation():  # waits for the load event: count() does not wait
        page.click("a.saved-run")
    assert urlsplit(page.url).path == f"/runs/{run.pk}/"
    # The first run of its series: no one-point charts, a sentence saying why there are none.
    assert "no earlier result" in page.locator("#no-history").inner_text()
    assert page.locator(".history").count() == 0
    assert page.locator("#metrics-table tr[data-metric]").count() == run.metrics.count()
    assert "a1b2c3d4e5" in page.locator(".facts").inner_text()
    assert "Upload page by engineer" in page.locator(".facts").inner_text()
    assert page.locator("#raw-download").get_attribute("href") == f"/runs/{run.pk}/raw"
    screenshot(page, "runs-detail")

    page.goto(f"/runs/compare/?a={earlier.pk}&b={run.pk}")
    throughput = page.locator("#compare-table tr[data-metric=throughput_tokens_per_s] td.change")
    assert throughput.inner_text() == "+15.20%"
    latency = page.locator("#compare-table tr[data-metric=latency_p99_ms] td.change")
    assert latency.inner_text() == "-6.45%"
    # One run a side and no repeated samples: nothing to test the change with, so neither row is
    # coloured, and the page says why.
    for cell in (throughput, latency):
        assert cell.evaluate("el => getComputedStyle(el).color") != GREEN
    row = page.locator("#compare-table tr[data-metric=throughput_tokens_per_s]")
    assert "Too few runs to tell." in row.inner_text()
    screenshot(page, "runs-compare")
    assert page.js_errors == []


def test_it_filters_the_runs_list_and_charts_a_series_history(
    page: Any, login: Any, screenshot: Any, lead: Any, team: Any
) -> None:
    h100 = factories.accelerator_type_from(factories.H100)
    l4 = factories.accelerator_type_from(factories.L4)
    now = datetime.now(UTC)
    series = [
        factories.run_create(
            team=team,
            accelerator_type=h100,
            started_at=now - timedelta(days=3 - i),
            metrics={"throughput_tokens_per_s": 4800.0 + 40 * i, "latency_p99_ms": 41.0 + i},
        )
        for i in range(3)
    ]
    l4_run = factories.run_create(
        team=team, accelerator_type=l4, started_at=now - timedelta(hours=3), model="Qwen2.5-7B"
    )
    login(page, lead)
    page.goto("/runs/")
    assert page.locator("#runs-table tbody tr").count() == 4
    page.select_option("#id_hardware", "l4")
    page.click("#run-filters button[type=submit]")
    page.wait_for_url("**/runs/?*hardware=l4*")
    rows = page.locator("#runs-table tbody tr")
    assert rows.count() == 1 and rows.first.get_attribute("data-run") == str(l4_run.pk)
    screenshot(page, "runs-list-filtered")
    page.fill("#id_q", "no-such-thing")
    page.click("#run-filters button[type=submit]")
    assert "No runs match these filters" in page.locator(".card.empty").inner_text()

    page.goto(f"/runs/{series[-1].pk}/")
    page.wait_for_selector(".history .plot .main-svg")
    assert page.locator(".history .plot").count() == 2
    # Three points and the highlighted run on the throughput chart; axis titles carry units.
    chart = page.locator(f"#history-{series[-1].metrics.get(name='throughput_tokens_per_s').pk}")
    assert chart.locator(".scatterlayer .trace").count() == 2
    assert chart.locator(".point").count() == 4
    assert chart.locator(".ytitle").text_content() == "Value (tokens/s)"
    assert chart.locator(".xtitle").text_content() == "Run start (UTC)"
    screenshot(page, "runs-detail-history")
    page.click("#compare-baseline")
    # p99 rose from 41.5 to 43 ms, but two runs against one (no repeated samples) cannot tell a
    # change from noise: the row stays plain and says so.
    row = page.locator("#compare-table tr[data-metric=latency_p99_ms]")
    assert row.locator("td.change").inner_text() == "+3.61%"
    assert row.locator("td.change").evaluate("el => getComputedStyle(el).color") != "rgb(220, 38, 38)"
    assert "Too few runs to tell." in row.inner_text()
    screenshot(page, "runs-compare-baseline")
    assert page.js_errors == []


def test_it_takes_files_dropped_on_the_zone(page: Any, login: Any, engineer: Any, media: Path) -> None:
    login(page, engineer)
    page.goto("/runs/upload/")
    content = (FIXTURES / "pytest_benchmark.json").read_text()
    # A real drop event carrying a File, as the browser fires it when a file is dragged in.
    page.evaluate(
        """(text) => {
            const transfer = new DataTransfer();
            transfer.items.add(new File([text], "pytest_benchmark.json", {type: "application/json"}));
            const zone = document.getElementById("dropzone");
            zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: transfer, bubbles: true, cancelable: true}));
            zone.dispatchEvent(new DragEvent("drop", {dataTransfer: transfer, bubbles: true, cancelable: true}));
        }""",
        content,
    )
    assert page.locator("#chosen li").inner_text().startswith("pytest_benchmark.json")
    page.click("#preview-button")
    page.wait_for_selector("#run-0 tr[data-metric=latency_mean_ms]")
    # One file, two benchmarks in it: both previewed, the second needing a precision.
    assert page.locator(".run-preview .recognised").count() == 2
    assert page.locator("#file-0").inner_text().endswith("read into run 1, 2")
    assert "precision" in page.locator("#run-1 .needs-list").inner_text()
    assert page.js_errors == []
