"""A trace from other hardware than the run's: a warning on the profile (its page, the API's
answer), a refusal when asked to be strict (the API's ``strict``, ``accelboard upload --strict``)
naming both devices, and the earlier profile kept."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from accelboard_upload.cli import main as upload_main
from django.test import Client
from django.urls import reverse

from accelboard.api.services import token_create
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.fleet.models import AcceleratorType
from accelboard.profiles.device_match import device_mismatch, names_agree
from accelboard.profiles.models import Profile
from accelboard.profiles.services import ProfileRejected, profile_attach
from accelboard.testing.traces import write_training_trace
from tests import factories

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"
A100 = "NVIDIA A100-SXM4-80GB"


def _trace(**options: Any) -> bytes:
    buffer = io.BytesIO()
    write_training_trace(buffer, steps=2, layers=2, **options)
    return buffer.getvalue()


def _named(name: str, content: bytes) -> io.BytesIO:
    handle = io.BytesIO(content)
    handle.name = name
    return handle


@pytest.fixture
def h100_run(team: Any, settings: Any, tmp_path: Path) -> BenchmarkRun:
    settings.MEDIA_ROOT = tmp_path / "media"
    h100 = factories.accelerator_type_from(factories.H100)
    return factories.run_create(team=team, accelerator_type=h100)


@pytest.mark.parametrize(
    ("device", "product", "agree"),
    [
        ("NVIDIA H100 80GB HBM3", "H100", True),
        (A100, "H100", False),
        ("NVIDIA L40S", "L4", False),
        ("NVIDIA L4", "L4", True),
        ("GAUDI 2", "Gaudi2", True),
        ("AMD Instinct MI300X", "MI300X", True),
    ],
)
def test_device_names_agree_by_words(device: str, product: str, agree: bool) -> None:
    assert names_agree(device=device, product=product) is agree


def test_a_device_the_catalogue_does_not_know_is_compared_by_the_model_word(team: Any) -> None:
    odd = AcceleratorType.objects.create(name="X200 SXM 96GB", slug="x200-sxm-96gb")
    run = factories.run_create(team=team, accelerator_type=odd)
    assert device_mismatch(run=run, devices=["Vendor X200 96GB HBM3"], ranks=1, world_size=None) == []
    (warning,) = device_mismatch(run=run, devices=["Vendor X100 80GB"], ranks=1, world_size=None)
    assert "Vendor X100 80GB" in warning and "X200 SXM 96GB" in warning


def test_the_runs_own_device_attaches_without_a_warning(h100_run: BenchmarkRun) -> None:
    profile = profile_attach(run=h100_run, files=[("r0.json", _trace())])
    assert not any("other hardware" in w for w in profile.warnings)


def test_an_a100_trace_on_an_h100_run_is_attached_with_a_warning_first(h100_run: BenchmarkRun) -> None:
    profile = profile_attach(run=h100_run, files=[("r0.json", _trace(device=A100))])
    first = profile.warnings[0]
    assert first.startswith(f"The trace ran on {A100}") and first.endswith(
        "but this run is on H100 SXM 80GB: a profile from other hardware"
    )


def test_more_ranks_than_the_runs_gpus_is_a_warning(h100_run: BenchmarkRun) -> None:
    files = [("r0.json", _trace(rank=0, world_size=2)), ("r1.json", _trace(rank=1, world_size=2))]
    profile = profile_attach(run=h100_run, files=files)
    assert profile.warnings[0] == "The trace has 2 ranks (devices), but this run used 1 accelerator"


def test_strict_refuses_naming_both_devices_and_keeps_the_earlier_profile(h100_run: BenchmarkRun) -> None:
    profile_attach(run=h100_run, files=[("good.json", _trace())])
    with pytest.raises(ProfileRejected) as caught:
        profile_attach(run=h100_run, files=[("a100.json", _trace(device=A100))], strict=True)
    assert caught.value.code == "device_mismatch"
    assert A100 in caught.value.message and "H100 SXM 80GB" in caught.value.message
    assert Profile.objects.get(run=h100_run).files == ["good.json"]


def test_the_api_answers_warnings_and_strict_is_a_422(h100_run: BenchmarkRun, ingest_token: str) -> None:
    url = f"/api/v1/runs/{h100_run.uuid}/profile"
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ingest_token}"}
    good = Client().post(url, data={"profile": [_named("good.json", _trace())]}, **auth)
    assert good.status_code == 201 and good.json()["warnings"] == []
    refused = Client().post(
        url, data={"profile": [_named("a.json", _trace(device=A100))], "strict": "1"}, **auth
    )
    assert refused.status_code == 422, refused.content
    error = refused.json()["error"]
    assert error["code"] == "device_mismatch" and error["path"] == "profile"
    assert A100 in error["message"] and "H100 SXM 80GB" in error["message"]
    assert Profile.objects.get(run=h100_run).files == ["good.json"]
    warned = Client().post(url, data={"profile": [_named("a.json", _trace(device=A100))]}, **auth)
    assert warned.status_code == 201
    first = warned.json()["warnings"][0]
    assert A100 in first and "but this run is on H100 SXM 80GB" in first


def test_the_profile_page_shows_the_warning(h100_run: BenchmarkRun, engineer: Any, login_client: Any) -> None:
    response = login_client(engineer).post(
        reverse("profiles:attach", args=[h100_run.pk]), {"profile": _named("a100.json", _trace(device=A100))}
    )
    assert response.status_code == 302
    page = login_client(engineer).get(reverse("profiles:run_profile", args=[h100_run.pk])).content.decode()
    warning = page.index('id="profile-warnings"')
    assert warning < page.index('id="profile-verdict"')  # read before the verdict
    assert f"The trace ran on {A100}" in page and "but this run is on H100 SXM 80GB" in page


@pytest.fixture
def server(live_server: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    settings.MEDIA_ROOT = tmp_path / "media"
    factories.accelerator_type_from(factories.H100)
    for name in ("GITHUB_SHA", "GITHUB_REF_NAME", "CI_COMMIT_SHA", "ACCELBOARD_SERVER", "ACCELBOARD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return live_server.url


def test_accelboard_upload_warns_and_strict_refuses(
    server: str, team: Any, tmp_path: Path, capsys: Any
) -> None:
    token = token_create(team=team, kind="ingest", name="ci")[1]
    trace = tmp_path / "a100.pt.trace.json.gz"
    write_training_trace(trace, steps=2, layers=2, device=A100)
    args = [str(FIXTURES / "vllm_2025.json"), "--profile", str(trace), "--server", server, "--token", token,
            "--accelerator", "H100 SXM 80GB"]  # fmt: skip
    assert upload_main([*args, "--strict"]) == 2
    _, err = capsys.readouterr()
    assert A100 in err and "H100 SXM 80GB" in err
    assert not BenchmarkRun.objects.exists()  # all or nothing
    assert upload_main(args) == 0
    out, _ = capsys.readouterr()
    assert f"profile warning: The trace ran on {A100}" in out and "but this run is on H100 SXM 80GB" in out


def test_the_profile_forms_strict_box_refuses_naming_both_devices_and_stores_nothing(
    h100_run: BenchmarkRun, engineer: Any, login_client: Any
) -> None:
    client = login_client(engineer)
    attach = reverse("profiles:attach", args=[h100_run.pk])
    page = client.get(reverse("profiles:run_profile", args=[h100_run.pk])).content.decode()
    assert 'name="strict" id="profile-strict">' in page  # offered, unticked by default
    refused = client.post(attach, {"profile": _named("a100.json", _trace(device=A100)), "strict": "on"})
    assert refused.status_code == 400
    body = refused.content.decode()
    error = body[body.index('id="profile-error"') : body.index("</p>", body.index('id="profile-error"'))]
    assert "Refused, nothing stored" in error
    assert f"The trace ran on {A100}" in error and "but this run is on H100 SXM 80GB" in error
    assert 'name="strict" id="profile-strict" checked>' in body  # the choice survives the refusal
    assert not Profile.objects.filter(run=h100_run).exists()
    # The run's own device passes the strict box; another device then leaves it in place.
    assert client.post(attach, {"profile": _named("good.json", _trace()), "strict": "on"}).status_code == 302
    again = client.post(attach, {"profile": _named("a100.json", _trace(device=A100)), "strict": "on"})
    assert again.status_code == 400
    assert Profile.objects.get(run=h100_run).files == ["good.json"]
    # Unticked, the same trace attaches with the warning.
    assert client.post(attach, {"profile": _named("a100.json", _trace(device=A100))}).status_code == 302
    assert Profile.objects.get(run=h100_run).warnings[0].startswith(f"The trace ran on {A100}")
