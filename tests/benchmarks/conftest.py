"""Fixtures of the upload client's tests: a live accelboard server and an ingest token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelboard.api.services import token_create
from tests.factories import H100, L4, accelerator_type_from

# What a CI job's environment would lend the client: cleared, so each test says what it sets.
CI_VARS = ("GITHUB_SHA", "GITHUB_REF_NAME", "GITHUB_HEAD_REF", "GITHUB_RUN_ID", "GITHUB_REPOSITORY",
           "GITHUB_SERVER_URL", "CI_COMMIT_SHA", "CI_COMMIT_REF_NAME", "CI_JOB_URL",
           "GITHUB_STEP_SUMMARY", "GITHUB_TOKEN", "ACCELBOARD_GITHUB_TOKEN", "GITLAB_TOKEN", "ACCELBOARD_GITLAB_TOKEN",
           "GITHUB_EVENT_PATH", "GITHUB_API_URL", "GITHUB_REF", "CI_API_V4_URL", "CI_PROJECT_ID",
           "CI_MERGE_REQUEST_IID")  # fmt: skip


@pytest.fixture
def server(
    live_server: Any, settings: Any, tmp_path: Path, team: Any, monkeypatch: pytest.MonkeyPatch
) -> str:
    settings.MEDIA_ROOT = tmp_path / "media"
    # A live server's tests flush the database between them, catalogue included.
    accelerator_type_from(H100)
    accelerator_type_from(L4)
    for name in CI_VARS + ("ACCELBOARD_SERVER", "ACCELBOARD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return live_server.url


@pytest.fixture
def token(team: Any) -> str:
    return token_create(team=team, kind="ingest", name="ci")[1]
