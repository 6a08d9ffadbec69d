"""A trace from other hardware in a real browser: attached on the run's Profile tab, its warning
reads first, above a verdict that states only what the trace shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelboard.testing.traces import write_training_trace
from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

A100 = "NVIDIA A100-SXM4-80GB"


def test_an_a100_trace_on_an_h100_run_warns_above_the_verdict(
    page: Any, login: Any, screenshot: Any, engineer: Any, team: Any, settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    run = factories.run_create(team=team, accelerator_type=factories.accelerator_type_from(factories.H100))
    trace = tmp_path / "rank0.pt.trace.json.gz"
    write_training_trace(trace, steps=3, layers=4, device=A100, input_wait_us=20_000.0)
    login(page, engineer)
    page.goto(f"/runs/{run.pk}/profile/")
    page.set_input_files("#profile-files", str(trace))
    with page.expect_navigation():
        page.click("#profile-attach button[type=submit]")
    warning = page.locator("#profile-warnings")
    assert A100 in warning.inner_text() and "this run is on H100 SXM 80GB" in warning.inner_text()
    verdict = page.locator("#profile-verdict")
    assert warning.bounding_box()["y"] < verdict.bounding_box()["y"]
    headline = verdict.locator("h2").inner_text()
    assert headline.startswith("Idle: the GPU has nothing to run")
    assert "waiting for work the CPU launched after the gap began" in verdict.inner_text()
    screenshot(page, "profile-device-mismatch")


def test_the_strict_box_refuses_an_a100_trace_naming_both_devices(
    page: Any, login: Any, screenshot: Any, engineer: Any, team: Any, settings: Any, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    run = factories.run_create(team=team, accelerator_type=factories.accelerator_type_from(factories.H100))
    trace = tmp_path / "rank0.pt.trace.json.gz"
    write_training_trace(trace, steps=2, layers=2, device=A100)
    login(page, engineer)
    page.goto(f"/runs/{run.pk}/profile/")
    page.set_input_files("#profile-files", str(trace))
    page.check("#profile-strict")
    with page.expect_navigation():
        page.click("#profile-attach button[type=submit]")
    error = page.locator("#profile-error").inner_text()
    assert error.startswith("Refused, nothing stored: The trace ran on " + A100)
    assert "but this run is on H100 SXM 80GB" in error
    assert page.locator("#no-profile").is_visible()  # nothing stored
    assert page.locator("#profile-strict").is_checked()
    screenshot(page, "profile-strict-refusal")
