"""The browser harness skips without Chromium, but fails instead when CI requires the browser."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
def test_probe(browser):
    assert browser.is_connected()
"""


def run_probe(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    environ = {key: value for key, value in os.environ.items() if key != "ACCELBOARD_REQUIRE_BROWSER"}
    environ.update(env)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(ROOT),
            "-p",
            "tests.browser.conftest",
            "-p",
            "no:cacheprovider",
            "-rs",
            str(probe),
        ],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_skips_with_install_advice_when_chromium_is_missing(tmp_path: Path) -> None:
    result = run_probe(tmp_path, ACCELBOARD_CHROMIUM=str(tmp_path / "no-chromium"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 skipped" in result.stdout
    assert "apt-get install chromium" in result.stdout


def test_it_fails_when_ci_requires_the_browser_and_it_is_missing(tmp_path: Path) -> None:
    result = run_probe(
        tmp_path, ACCELBOARD_CHROMIUM=str(tmp_path / "no-chromium"), ACCELBOARD_REQUIRE_BROWSER="1"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 error" in result.stdout
    assert "ACCELBOARD_REQUIRE_BROWSER=1" in result.stdout


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="needs Debian's chromium to launch")
def test_it_launches_the_real_chromium_when_present(tmp_path: Path) -> None:
    result = run_probe(tmp_path, ACCELBOARD_REQUIRE_BROWSER="1", ACCELBOARD_CHROMIUM="/usr/bin/chromium")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
