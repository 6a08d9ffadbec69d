"""Profiles through the API: with result files in ``POST /api/v1/runs``, and onto an existing run."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.profiles.models import Profile
from accelboard.testing.traces import write_training_trace
from tests.factories import H100, accelerator_type_from

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path, db: None) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    accelerator_type_from(H100)
    return settings.MEDIA_ROOT


def _named(name: str, content: bytes) -> io.BytesIO:
    handle = io.BytesIO(content)
    handle.name = name
    return handle


def _trace(**options: Any) -> bytes:
    buffer = io.BytesIO()
    write_training_trace(buffer, steps=2, layers=2, **options)
    return buffer.getvalue()


def test_runs_multipart_takes_profile_parts_with_the_result(ingest_token: str) -> None:
    response = Client().post(
        "/api/v1/runs",
        data={
            "file": [_named("vllm_2025.json", (FIXTURES / "vllm_2025.json").read_bytes())],
            "profile": [
                _named("rank0.json", _trace(rank=0, world_size=2)),
                _named("rank1.json", _trace(rank=1, world_size=2)),
            ],
            "accelerator": "H100 SXM 80GB",
        },
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )
    assert response.status_code == 201, response.json()
    (item,) = response.json()["runs"]
    assert item["profile_url"] == f"/runs/{item['id']}/profile/"
    assert Profile.objects.get(run_id=item["id"]).ranks == 2


def test_a_bad_profile_part_stores_nothing(ingest_token: str) -> None:
    response = Client().post(
        "/api/v1/runs",
        data={
            "file": [_named("vllm_2025.json", (FIXTURES / "vllm_2025.json").read_bytes())],
            "profile": [_named("trace.json", b'{"traceEvents": [')],
            "accelerator": "H100 SXM 80GB",
        },
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["path"] == "profile" and "trace.json" in error["message"]
    assert not BenchmarkRun.objects.exists() and not Profile.objects.exists()


def test_a_profile_attaches_to_an_existing_run_by_client_id(
    ingest_token: str, make_token: Any, other_team: Any
) -> None:
    created = (
        Client()
        .post(
            "/api/v1/runs",
            data={
                "file": [_named("vllm_2025.json", (FIXTURES / "vllm_2025.json").read_bytes())],
                "accelerator": "H100 SXM 80GB",
            },
            HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
        )
        .json()["runs"][0]
    )
    url = f"/api/v1/runs/{created['run_id']}/profile"
    response = Client().post(
        url, data={"profile": [_named("t.json", _trace())]}, HTTP_AUTHORIZATION=f"Bearer {ingest_token}"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["profile_url"] == f"/runs/{created['id']}/profile/"
    assert Profile.objects.filter(run_id=created["id"]).exists()
    # Another team's token does not find the run; no part is a 422 naming the field.
    other = make_token(other_team, "ingest")
    assert (
        Client()
        .post(url, data={"profile": [_named("t.json", _trace())]}, HTTP_AUTHORIZATION=f"Bearer {other}")
        .status_code
        == 404
    )
    missing = Client().post(url, data={}, HTTP_AUTHORIZATION=f"Bearer {ingest_token}")
    assert missing.status_code == 422 and missing.json()["error"]["path"] == "profile"


def test_folded_kernel_names_are_said_in_the_answer_and_the_rows(
    ingest_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelboard.importers import profile_data

    monkeypatch.setattr(profile_data, "MAX_NAMES", 5)
    created = (
        Client()
        .post(
            "/api/v1/runs",
            data={
                "file": [_named("vllm_2025.json", (FIXTURES / "vllm_2025.json").read_bytes())],
                "accelerator": "H100 SXM 80GB",
            },
            HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
        )
        .json()["runs"][0]
    )
    response = Client().post(
        f"/api/v1/runs/{created['run_id']}/profile",
        data={"profile": [_named("t.json", _trace(distinct_names=1000))]},
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )
    assert response.status_code == 201, response.json()
    assert any("more than 5 distinct GPU activity names" in w for w in response.json()["warnings"])
    profile = Profile.objects.get(run_id=created["id"])
    names = list(profile.kernels.values_list("name", flat=True))
    assert len([n for n in names if not n.startswith("(other ")]) <= 5
    assert any(n.startswith("(other kernels, ") for n in names)


def test_a_profile_beyond_the_activity_limit_is_a_422_naming_it(
    ingest_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelboard.importers import profile_data

    created = (
        Client()
        .post(
            "/api/v1/runs",
            data={
                "file": [_named("vllm_2025.json", (FIXTURES / "vllm_2025.json").read_bytes())],
                "accelerator": "H100 SXM 80GB",
            },
            HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
        )
        .json()["runs"][0]
    )
    monkeypatch.setattr(profile_data, "MAX_ACTIVITIES", 20)
    response = Client().post(
        f"/api/v1/runs/{created['run_id']}/profile",
        data={"profile": [_named("t.json", _trace())]},
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )
    assert response.status_code == 422, response.json()
    error = response.json()["error"]
    assert error["code"] == "too_large" and error["path"] == "profile"
    assert "more than 20 GPU activities" in error["message"]
    assert not Profile.objects.filter(run_id=created["id"]).exists()
