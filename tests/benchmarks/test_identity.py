"""One identity per model and accelerator, end to end: the upload page's preview and save, the
multipart API and the JSON ingest, ``accelboard upload``, team aliases and the admin. Fixtures are
our own (``fixtures/identity``): an MLPerf system folder for llama2-70b-99.9 on "NVIDIA
H100-SXM5-80GB" and vLLM results of meta-llama's Llama-2-70b chat and base models."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from accelboard_upload.cli import main
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from accelboard.api.services import token_create
from accelboard.benchmarks.catalogue_services import CatalogueRejected, accelerator_alias_set, model_alias_set
from accelboard.benchmarks.models import AcceleratorAlias, BenchmarkRun, Model, ModelAlias
from accelboard.core.access import scope_for_team
from accelboard.dashboard.hardware_selectors import hardware_groups_for
from accelboard.fleet.catalogue_services import accelerator_types_sync
from accelboard.fleet.models import AcceleratorType
from accelboard.importers.cli import main as parse_main

pytestmark = pytest.mark.django_db

HERE = Path(__file__).resolve().parent / "fixtures" / "identity"
MLPERF = HERE / "mlperf"
SYSTEM = "closed/Beta/results/beta-h100x8/llama2-70b-99.9/Server"
# The folder's files, as a browser's folder upload names them (their paths in the folder).
FOLDER = [
    f"{SYSTEM}/performance/run_1/mlperf_log_detail.txt",
    f"{SYSTEM}/performance/run_1/mlperf_log_summary.txt",
    f"{SYSTEM}/accuracy/accuracy.txt",
    "closed/Beta/systems/beta-h100x8.json",
    "closed/Beta/measurements/beta-h100x8/llama2-70b-99.9/Server/beta-h100x8_Server.json",
]


@pytest.fixture(autouse=True)
def catalogue(settings: Any, tmp_path: Path, db: None) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    accelerator_types_sync()  # a flushed database (live server tests) has no types
    return settings.MEDIA_ROOT


def _files(paths: list[str]) -> list[SimpleUploadedFile]:
    return [SimpleUploadedFile(Path(path).name, (MLPERF / path).read_bytes()) for path in paths]


def _vllm(name: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, (HERE / name).read_bytes())


def _preview(client: Any, files: list[SimpleUploadedFile], **extra: Any) -> dict[str, Any]:
    response = client.post(reverse("benchmarks:upload_preview"), {"files": files, **extra})
    assert response.status_code == 200, response.content
    return response.json()


def _save(client: Any, token: str, team: Any, **fields: str) -> Any:
    return client.post(reverse("benchmarks:upload_save"), {"token": token, "team": team.pk, **fields})


# --- the upload page ---------------------------------------------------------------------------


def test_a_folder_upload_is_one_run_with_the_catalogues_model_and_accelerator(
    login_client: Any, engineer: Any, team: Any
) -> None:
    client = login_client(engineer)
    body = _preview(client, _files(FOLDER), paths=FOLDER)
    (run,) = body["runs"]
    assert [file["runs"] for file in body["files"]] == [[0]] * 5
    assert all(file["error"] == "" for file in body["files"])
    model, accelerator = run["identity"]["model"], run["identity"]["accelerator"]
    assert (model["raw"], model["name"], model["how"]) == ("llama2-70b-99.9", "Llama-2-70B", "alias")
    assert (accelerator["raw"], accelerator["name"], accelerator["how"]) == (
        "NVIDIA H100-SXM5-80GB",
        "H100 SXM 80GB",
        "alias",
    )
    assert run["missing"] == [] and run["accelerator_count"] == 8

    saved = _save(client, body["token"], team)
    assert saved.status_code == 200, saved.json()
    stored = BenchmarkRun.objects.get()
    assert stored.workload.variant.model.name == "Llama-2-70B"
    assert (stored.workload.variant.name, stored.workload.scenario) == ("fp16", "server")
    assert (stored.model_name, stored.model_match) == ("llama2-70b-99.9", "alias")
    assert (stored.accelerator_name, stored.accelerator_match) == ("NVIDIA H100-SXM5-80GB", "alias")
    assert (stored.accelerator_type.slug, stored.accelerator_count) == ("h100-sxm-80gb", 8)
    assert stored.metrics.get(name="throughput_tokens_per_s").value == 18204.6
    # The run keeps the five files it was read from, as one archive.
    assert stored.raw_filename == "mlperf_log_detail.txt-and-4-more.tar.gz"
    with tarfile.open(fileobj=io.BytesIO(stored.raw_file.read())) as archive:
        assert sorted(archive.getnames()) == sorted(FOLDER)


def test_loose_files_are_one_run_and_the_uploader_picks_the_model_they_do_not_name(
    login_client: Any, engineer: Any, team: Any
) -> None:
    client = login_client(engineer)
    body = _preview(client, _files(FOLDER))  # names only: no folder names the model
    (run,) = body["runs"]
    assert run["files"] == [Path(path).name for path in FOLDER]
    assert [m["field"] for m in run["missing"]] == ["model"]
    assert run["identity"]["accelerator"]["name"] == "H100 SXM 80GB"
    refused = _save(client, body["token"], team)
    assert refused.status_code == 422 and "model" in refused.json()["runs"][0]["error"]
    saved = _save(client, body["token"], team, **{"r0-model": "Llama-2-70B"})
    assert saved.status_code == 200, saved.json()
    stored = BenchmarkRun.objects.get()
    # The files name no model: the name kept is the uploader's.
    assert (stored.workload.variant.model.name, stored.model_name, stored.model_match) == (
        "Llama-2-70B",
        "Llama-2-70B",
        "user",
    )


def test_a_close_name_waits_for_a_choice_then_the_team_remembers_it(
    login_client: Any, engineer: Any, team: Any, other_lead: Any, other_team: Any
) -> None:
    client = login_client(engineer)
    body = _preview(client, [_vllm("vllm_llama2_70b_base.json")])
    (run,) = body["runs"]
    model = run["identity"]["model"]
    assert (model["raw"], model["match"], model["candidates"], model["name"]) == (
        "meta-llama/Llama-2-70b-hf",
        "ambiguous",
        ["Llama-2-70B"],
        "",
    )
    assert {m["field"] for m in run["missing"]} == {"model", "accelerator", "precision"}
    fields = {"r0-accelerator": "H100 SXM 80GB", "r0-accelerator_count": "8", "r0-precision": "fp16"}
    refused = _save(client, body["token"], team, **fields)
    assert refused.status_code == 422 and "close to Llama-2-70B" in refused.json()["runs"][0]["error"]
    assert not BenchmarkRun.objects.exists()

    saved = _save(client, body["token"], team, **fields, **{"r0-model": "Llama-2-70B", "r0-remember": "on"})
    assert saved.status_code == 200, saved.json()
    stored = BenchmarkRun.objects.get()
    assert (stored.workload.variant.model.name, stored.model_match) == ("Llama-2-70B", "user")
    alias = ModelAlias.objects.get()
    assert (alias.team, alias.name, alias.model.name, alias.created_by) == (
        team,
        "meta-llama/Llama-2-70b-hf",
        "Llama-2-70B",
        engineer,
    )
    # The team's next file of that name resolves by its alias; another team still has to choose.
    again = _preview(client, [_vllm("vllm_llama2_70b_base.json")])["runs"][0]["identity"]["model"]
    assert (again["name"], again["how"], again["source"]) == ("Llama-2-70B", "alias", "team")
    theirs = _preview(login_client(other_lead), [_vllm("vllm_llama2_70b_base.json")], team=other_team.pk)
    assert theirs["runs"][0]["identity"]["model"]["match"] == "ambiguous"


def test_the_uploader_adds_a_model_and_an_accelerator_type(
    login_client: Any, engineer: Any, team: Any
) -> None:
    client = login_client(engineer)
    body = _preview(client, [_vllm("vllm_llama2_70b_base.json")])
    saved = _save(
        client,
        body["token"],
        team,
        **{
            "r0-model": "__new__",
            "r0-new_model": "Llama-2-70B-Base",
            "r0-accelerator": "__new__",
            "r0-new_accelerator": "H100 NVL 94GB",
            "r0-accelerator_vendor": "nvidia",
            "r0-accelerator_product": "H100",
            "r0-accelerator_form_factor": "pcie",
            "r0-accelerator_memory_gb": "94",
            "r0-accelerator_tdp_w": "400",
            "r0-precision": "bf16",
        },
    )
    assert saved.status_code == 200, saved.json()
    stored = BenchmarkRun.objects.get()
    model = stored.workload.variant.model
    assert (model.name, model.parameters_b, stored.model_match) == ("Llama-2-70B-Base", 70.0, "user")
    card = AcceleratorType.objects.get(slug="h100-nvl-94gb")
    assert (card.name, card.vendor, card.product, card.form_factor) == (
        "H100 NVL 94GB",
        "nvidia",
        "H100",
        "pcie",
    )
    assert (card.memory_bytes, card.board_power_w) == (94 * 1024**3, 400.0)
    assert (stored.accelerator_type, stored.accelerator_match) == (card, "user")
    # The built-in spellings of that slug now find it.
    body = _preview(client, [_vllm("vllm_llama2_70b_chat.json")])
    assert body["runs"][0]["identity"]["model"]["name"] == "Llama-2-70B"


def test_a_new_type_needs_its_vendor_and_a_free_name(login_client: Any, engineer: Any, team: Any) -> None:
    client = login_client(engineer)
    token = _preview(client, [_vllm("vllm_llama2_70b_chat.json")])["token"]
    no_vendor = _save(client, token, team, **{"r0-accelerator": "__new__", "r0-new_accelerator": "Gizmo 1"})
    assert no_vendor.status_code == 422
    assert (
        no_vendor.json()["runs"][0]["error"] == "accelerator_vendor: give the new accelerator type's vendor"
    )
    taken = _save(
        client,
        token,
        team,
        **{"r0-accelerator": "__new__", "r0-new_accelerator": "h100 sxm 80gb", "r0-accelerator_vendor": "nvidia",
           "r0-precision": "fp16"},
    )  # fmt: skip
    assert taken.status_code == 422 and "exists: pick it" in taken.json()["runs"][0]["error"]
    assert AcceleratorType.objects.filter(name__iexact="h100 sxm 80gb").count() == 1
    assert not BenchmarkRun.objects.exists()


def test_the_forms_hardware_applies_over_the_files(login_client: Any, engineer: Any, team: Any) -> None:
    client = login_client(engineer)
    body = _preview(client, _files(FOLDER), paths=FOLDER)
    saved = _save(
        client, body["token"], team, **{"r0-accelerator": "H200 SXM 141GB", "r0-accelerator_count": "4"}
    )
    assert saved.status_code == 200, saved.json()
    stored = BenchmarkRun.objects.get()
    assert (stored.accelerator_type.slug, stored.accelerator_count) == ("h200-sxm-141gb", 4)
    # recorded as the uploader's, with what the file said
    assert (stored.accelerator_name, stored.accelerator_match) == ("NVIDIA H100-SXM5-80GB", "user")
    assert stored.field_sources["hardware.accelerator"] == stored.field_sources["hardware.count"] == "user"
    assert any("the file says 8" in w for w in stored.context["warnings"])


def test_the_page_offers_the_catalogue(login_client: Any, engineer: Any) -> None:
    response = login_client(engineer).get(reverse("benchmarks:upload"))
    catalogue = response.context["catalogue"]
    assert ["Llama-2-70B", "Llama-2-70B (Llama 2, 69B, chat)"] in catalogue["models"]
    assert ["H100 SXM 80GB", "H100 SXM 80GB (NVIDIA, 80 GiB, SXM)"] in catalogue["accelerators"]
    assert ("amd", "AMD") in catalogue["vendors"]


# --- aliases -----------------------------------------------------------------------------------


def test_an_alias_never_takes_a_canonical_name(team: Any) -> None:
    llama = Model.objects.create(name="Llama-2-70B")
    ranker = Model.objects.create(name="Ranker-7B")
    with pytest.raises(CatalogueRejected) as caught:
        model_alias_set(team=team, name="llama-2-70b", model=ranker)
    assert caught.value.field == "name" and "Llama-2-70B" in caught.value.message
    assert model_alias_set(team=team, name="Llama-2-70B", model=llama) is None  # its own name
    first = model_alias_set(team=team, name="rnk", model=llama)
    moved = model_alias_set(team=team, name="RNK", model=ranker)
    assert first is not None and moved is not None and first.pk == moved.pk
    assert ModelAlias.objects.get().model == ranker
    h100 = AcceleratorType.objects.get(slug="h100-sxm-80gb")
    with pytest.raises(CatalogueRejected):
        accelerator_alias_set(team=team, name="H200 SXM 141GB", accelerator_type=h100)
    accelerator_alias_set(team=None, name="Acme box 7", accelerator_type=h100)
    assert AcceleratorAlias.objects.get().key == "7 acme box"


def test_the_admin_adds_a_shared_alias(client: Any, staff: Any, team: Any) -> None:
    staff.is_superuser = True
    staff.save()
    client.force_login(staff)
    ranker = Model.objects.create(name="Ranker-7B")
    response = client.post(
        reverse("admin:benchmarks_modelalias_add"), {"name": "acme/ranker-v7", "model": ranker.pk, "team": ""}
    )
    assert response.status_code == 302, response.content[:2000]
    alias = ModelAlias.objects.get()
    assert (alias.team, alias.key, alias.created_by) == (None, "acme/rankerv7", staff)
    refused = client.post(
        reverse("admin:benchmarks_modelalias_add"),
        {"name": "Llama-2-70B", "model": ranker.pk, "team": team.pk},
    )
    assert refused.status_code == 200 and "is the name of the model" in refused.content.decode()
    page = client.get(reverse("admin:benchmarks_model_change", args=[ranker.pk]))
    assert page.status_code == 200 and "acme/ranker-v7" in page.content.decode()


# --- the API -----------------------------------------------------------------------------------


def test_the_json_ingest_resolves_names_through_the_catalogue(client: Any, team: Any) -> None:
    token = token_create(team=team, kind="ingest", name="ci")[1]
    payload = {
        "run_id": "0b5f3b4e-3a55-4d53-8a5b-5d1c0ffee001",
        "model": "meta-llama/Llama-2-70b-chat-hf",
        "variant": {"name": "fp8", "precision": "fp8"},
        "workload": {"scenario": "server"},
        "hardware": {"accelerator": "NVIDIA H100-SXM5-80GB", "count": 8},
        "started_at": "2025-06-05T10:00:00Z",
        "metrics": [{"name": "throughput_tokens_per_s", "value": 30100.0, "unit": "tokens/s"}],
    }
    response = client.post(
        "/api/v1/runs",
        json.dumps(payload),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code in (200, 201), response.content
    run = BenchmarkRun.objects.get()
    assert run.workload.variant.model.name == "Llama-2-70B"
    assert (run.model_name, run.model_match, run.accelerator_match) == (
        "meta-llama/Llama-2-70b-chat-hf",
        "alias",
        "alias",
    )
    payload["run_id"], payload["hardware"]["accelerator"] = (
        "0b5f3b4e-3a55-4d53-8a5b-5d1c0ffee002",
        "NVIDIA H100",
    )
    ambiguous = client.post(
        "/api/v1/runs",
        json.dumps(payload),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert ambiguous.status_code == 422
    assert "could be H100 SXM 80GB" in ambiguous.json()["error"]["message"]


# --- accelboard parse and accelboard upload -----------------------------------------------------


def test_accelboard_parse_gives_one_run_per_mlperf_system_folder(capsys: Any) -> None:
    assert parse_main([str(MLPERF / "closed/Beta"), "--no-samples"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert (run["model"], run["hardware"]["accelerator"], run["hardware"]["count"]) == (
        "llama2-70b-99.9",
        "NVIDIA H100-SXM5-80GB",
        8,
    )
    assert len(run["files"]) == 5
    names = [metric["name"] for metric in run["metrics"]]
    assert names.count("throughput_tokens_per_s") == 1 and "accuracy:mlperf:rouge1" in names


@pytest.fixture
def server(live_server: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("GITHUB_SHA", "GITHUB_REF_NAME", "CI_COMMIT_SHA", "ACCELBOARD_SERVER", "ACCELBOARD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return live_server.url


@pytest.mark.django_db(transaction=True)
def test_accelboard_upload_shows_the_match_and_the_runs_join_one_series(
    server: str, team: Any, capsys: Any
) -> None:
    accelerator_types_sync()
    token = token_create(team=team, kind="ingest", name="ci")[1]
    base = ["--server", server, "--token", token, "--commit", "abc1234"]
    assert main([str(MLPERF / "closed/Beta"), *base]) == 0
    out = capsys.readouterr().out
    assert "llama2-70b-99.9 -> Llama-2-70B (alias) fp16" in out
    assert "8× NVIDIA H100-SXM5-80GB -> H100 SXM 80GB (alias)" in out
    chat = [str(HERE / "vllm_llama2_70b_chat.json"), *base, "--accelerator", "H100 SXM 80GB", "--count", "8"]
    assert main([*chat, "--precision", "fp16"]) == 0
    assert "meta-llama/Llama-2-70b-chat-hf -> Llama-2-70B (alias) fp16" in capsys.readouterr().out
    # one model, one scenario: one group of the hardware page, both runs in it
    (group,) = hardware_groups_for(scope=scope_for_team(team))
    assert (group.model_name, group.scenario, group.runs) == ("Llama-2-70B", "server", 2)

    base_model = [
        str(HERE / "vllm_llama2_70b_base.json"),
        *base,
        "--accelerator",
        "H100 SXM 80GB",
        "--precision",
        "fp16",
    ]
    assert main(base_model) == 2
    err = capsys.readouterr().err
    assert "close to Llama-2-70B" in err and "(field: model)" in err and "--create-model" in err
    assert main([*base_model, "--model", "Llama-2-70B", "--remember"]) == 0
    assert "meta-llama/Llama-2-70b-hf -> Llama-2-70B (user)" in capsys.readouterr().out
    BenchmarkRun.objects.filter(model_match="user").delete()
    assert main(base_model) == 0  # the team's alias now
    assert "meta-llama/Llama-2-70b-hf -> Llama-2-70B (alias)" in capsys.readouterr().out


def test_the_preview_reads_the_catalogue_once_whatever_the_number_of_runs(
    login_client: Any, engineer: Any, team: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = login_client(engineer)

    def queries(root: Path) -> tuple[int, int]:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            archive.add(root, arcname=root.name)
        upload = SimpleUploadedFile(f"{root.name}.tar.gz", buffer.getvalue())
        with CaptureQueriesContext(connection) as captured:
            body = _preview(client, [upload])
        return len(body["runs"]), len(captured)

    one = queries(MLPERF)
    several = queries(Path(__file__).resolve().parents[1] / "importers" / "fixtures" / "mlperf_llm")
    assert one[0] == 1 and several[0] == 2
    assert several[1] == one[1]


@pytest.mark.parametrize(
    ("model_id", "variant", "precision", "method"),
    [
        ("TheBloke/Llama-2-70B-Chat-AWQ", "int4-awq", "int4", "AWQ"),
        ("TheBloke/Llama-2-70B-Chat-GPTQ", "int4-gptq", "int4", "GPTQ"),
        ("neuralmagic/Llama-2-70b-chat-hf-FP8", "fp8", "fp8", ""),
    ],
)
def test_the_quantisation_in_a_models_name_sets_the_variant_of_the_one_model(
    team: Any, model_id: str, variant: str, precision: str, method: str
) -> None:
    from accelboard.benchmarks.import_services import run_import
    from accelboard.importers import parse_bytes

    data = json.loads((HERE / "vllm_llama2_70b_chat.json").read_bytes())
    data["model_id"] = data["tokenizer_id"] = model_id
    raw = json.dumps(data).encode()
    (parsed,) = parse_bytes(raw, filename="vllm.json")
    run, _ = run_import(
        team=team,
        parsed=parsed,
        raw_name="vllm.json",
        raw_bytes=raw,
        uploaded_via="api",
        overrides={"accelerator": "H100 SXM 80GB", "count": "8"},
    )
    stored = run.workload.variant
    assert (stored.model.name, run.model_name, run.model_match) == ("Llama-2-70B", model_id, "alias")
    assert (stored.name, stored.precision, stored.quantization_method) == (variant, precision, method)
    assert Model.objects.count() == 1
