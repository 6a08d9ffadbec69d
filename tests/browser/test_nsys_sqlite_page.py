"""An Nsight Systems SQLite export in a real browser: dropped with its result file on the upload
page, previewed as a profile, saved, and shown on the run's Profile tab with its timeline."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.profiles.models import Profile
from accelboard.testing.nsys_export import write_export
from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"


def test_an_nsys_export_uploads_and_shows_its_timeline(
    page: Any, login: Any, screenshot: Any, engineer: Any, team: Any, settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    factories.accelerator_type_from(factories.H100)
    export = write_export(tmp_path / "report.sqlite")
    result = tmp_path / "vllm_2025.json"
    shutil.copy(FIXTURES / "vllm_2025.json", result)

    login(page, engineer)
    page.goto("/runs/upload/")
    page.wait_for_load_state()
    page.set_input_files("#file-input", [str(result), str(export)])
    page.click("#preview-button")
    page.wait_for_selector("#file-1 .profile-preview")
    assert "nsys-sqlite, 1 rank, 1 step" in page.locator("#file-1 .profile-preview").inner_text()
    page.select_option("#r0-accelerator", "H100 SXM 80GB")
    screenshot(page, "nsys-sqlite-upload-preview")
    page.click("#save-button")
    page.wait_for_selector("a.saved-profile")
    run = BenchmarkRun.objects.get()
    profile = Profile.objects.get(run=run)
    assert profile.source_format == "nsys-sqlite" and profile.timeline is True

    page.click("a.saved-profile")
    assert urlsplit(page.url).path == f"/runs/{run.pk}/profile/"
    page.wait_for_selector("#rank-chart .main-svg")
    assert "ncclDevKernel_AllReduce" in page.locator("#kernel-table").inner_text()
    assert "Nsight Systems SQLite export" in page.content()
    screenshot(page, "nsys-sqlite-profile-tab")
    assert page.js_errors == []
