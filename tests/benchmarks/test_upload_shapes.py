"""One result, one run, one name: an MLPerf result uploaded as loose files, as a folder or as a zip
is one run whose metrics have the same names (issue 33, class 5)."""

from __future__ import annotations

import importlib
import io
import re
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from accelboard.benchmarks.import_plans import run_fingerprint
from accelboard.benchmarks.import_services import run_import
from accelboard.benchmarks.models import BenchmarkRun, MetricValue
from accelboard.benchmarks.services import WorkloadSpec
from accelboard.importers import ParsedRun, parse_files, parse_path
from tests import factories
from tests.importers.test_scenario_from_file import EXPECTED
from tests.run_identity import runs_identity_problems

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"
ROOT = FIXTURES / "mlperf_llm"
ACME = "closed/Acme"
SERVER = f"{ACME}/results/acme-8xH100/llama2-70b-99/Server"
# The Server result's files as someone would pick them one by one: no folders, so no model.
LOOSE = {
    "mlperf_log_detail.txt": f"{SERVER}/performance/run_1/mlperf_log_detail.txt",
    "mlperf_log_summary.txt": f"{SERVER}/performance/run_1/mlperf_log_summary.txt",
    "accuracy.txt": f"{SERVER}/accuracy/accuracy.txt",
    "acme-8xH100.json": f"{ACME}/systems/acme-8xH100.json",
    "acme-8xH100_Server.json": f"{ACME}/measurements/acme-8xH100/llama2-70b-99/Server/acme-8xH100_Server.json",
}


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def _loose() -> list[tuple[str, bytes]]:
    return [(name, (ROOT / path).read_bytes()) for name, path in LOOSE.items()]


def _folder() -> list[tuple[str, bytes]]:
    """The submission folder as the upload page sends it: each file with its path in the folder."""
    return [
        (f"mlperf_llm/{path.relative_to(ROOT)}", path.read_bytes())
        for path in sorted(ROOT.rglob("*"))
        if path.is_file()
    ]


def _zip() -> list[tuple[str, bytes]]:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in _folder():
            archive.writestr(name, data)
    return [("acme-submission.zip", buffer.getvalue())]


SHAPES = {"loose": _loose, "folder": _folder, "zip": _zip}


def _server_run(shape: str) -> ParsedRun:
    # The uploader states the model where the files do not (loose files have no model folder).
    runs = parse_files(SHAPES[shape](), context={"model": "Llama-2-70B"}).runs
    (run,) = [r for r in runs if r.workload.scenario == "server"]
    return run


def test_each_shape_reads_the_same_identity_and_metric_names() -> None:
    runs = {shape: _server_run(shape) for shape in SHAPES}
    names = {shape: [m.name for m in run.metrics] for shape, run in runs.items()}
    assert names["loose"] == names["folder"] == names["zip"]
    # the accuracy figure has one name, from the file, not from a folder or the uploader's model
    assert [n for n in names["loose"] if n.startswith("accuracy:")] == [
        "accuracy:mlperf:rouge1",
        "accuracy:mlperf:rouge2",
        "accuracy:mlperf:rougeL",
        "accuracy:mlperf:rougeLsum",
    ]
    assert len({run.content_sha256 for run in runs.values()}) == 1
    assert len({run_fingerprint(run) for run in runs.values()}) == 1
    assert len({run.workload.scenario for run in runs.values()}) == 1


def _upload_page(client: Any, team: Any, files: list[tuple[str, bytes]], fields: dict[str, str]) -> list[Any]:
    """Preview then save, as the upload page does (a folder's paths come in ``paths``)."""
    preview = client.post(
        reverse("benchmarks:upload_preview"),
        {"files": [SimpleUploadedFile(Path(n).name, d) for n, d in files], "paths": [n for n, _ in files]},
    )
    assert preview.status_code == 200, preview.json()
    runs = preview.json()["runs"]
    data = {"token": preview.json()["token"], "team": team.pk}
    for index in range(len(runs)):
        data.update({f"r{index}-{key}": value for key, value in fields.items()})
    saved = client.post(reverse("benchmarks:upload_save"), data)
    assert saved.status_code == 200, saved.json()
    return [BenchmarkRun.objects.get(pk=run["id"]) for run in saved.json()["runs"]]


@pytest.mark.parametrize("order", [("loose", "folder", "zip"), ("zip", "loose", "folder")])
def test_it_is_one_run_whatever_the_uploads_shape(
    login_client: Any, engineer: Any, team: Any, media: Path, order: tuple[str, ...]
) -> None:
    factories.accelerator_type_from(factories.H100)
    client = login_client(engineer)
    stored: dict[str, BenchmarkRun] = {}
    for shape in order:
        # loose files name no model: the uploader states it; the folder and the zip name it by path
        fields = {"model": "Llama-2-70B"} if shape == "loose" else {}
        runs = _upload_page(client, team, SHAPES[shape](), fields)
        (stored[shape],) = [run for run in runs if run.workload.scenario == "server"]
    assert len({run.pk for run in stored.values()}) == 1
    assert BenchmarkRun.objects.filter(team=team, workload__scenario="server").count() == 1
    # the folder and the zip hold the Offline result too: one more run, once
    assert BenchmarkRun.objects.filter(team=team).count() == 2
    run = stored["loose"]
    assert run.workload.variant.model.name == "Llama-2-70B"
    # every accuracy figure of both runs under one name, whoever named the model and how
    accuracy = set(MetricValue.objects.filter(name__startswith="accuracy:").values_list("name", flat=True))
    assert accuracy == {f"accuracy:mlperf:{key}" for key in ("rouge1", "rouge2", "rougeL", "rougeLsum")}


def test_the_same_file_uploaded_twice_on_the_page_is_one_run(
    login_client: Any, engineer: Any, team: Any, media: Path
) -> None:
    factories.accelerator_type_from(factories.H100)
    client = login_client(engineer)
    data = (FIXTURES / "vllm_rate_inf.json").read_bytes()
    first = _upload_page(client, team, [("vllm_rate_inf.json", data)], {"precision": "bf16"})
    second = _upload_page(client, team, [("renamed.json", data)], {"precision": "bf16"})
    assert [run.pk for run in first] == [run.pk for run in second]
    assert first[0].workload.scenario == "serving"
    assert BenchmarkRun.objects.count() == 1


def test_every_importer_fixture_lands_under_the_scenario_its_file_says(
    login_client: Any, lead: Any, team: Any, media: Path
) -> None:
    """Every fixture of every importer, stored as one model on one accelerator: the hardware page
    groups each run under the scenario its file states, or under "not stated"; none under Offline
    unless its file says Offline."""
    factories.accelerator_type_from(factories.H100)
    overrides = {"model": "Llama-3.1-8B", "precision": "bf16", "accelerator": "H100 SXM 80GB", "count": "1"}
    expected: Counter[str] = Counter()
    for name in sorted(EXPECTED):
        path = FIXTURES / name
        for parsed in parse_path(path):
            if parsed.source_format == "nvidia-smi":
                continue  # telemetry, not a run
            stored, _ = run_import(
                team=team,
                parsed=parsed,
                raw_name=name,
                raw_bytes=None,
                uploaded_via="cli",
                overrides=overrides,
            )
            if stored.valid:
                expected[parsed.workload.scenario or "unstated"] += 1
    runs = BenchmarkRun.objects.filter(team=team).select_related("workload").prefetch_related("metrics")
    assert runs_identity_problems(runs) == []
    assert expected["serving"] >= 5 and expected["offline"] >= 2 and expected["unstated"] >= 3
    page = login_client(lead).get(reverse("dashboard:hardware"))
    assert page.status_code == 200
    shown = {
        scenario: int(count)
        for scenario, count in re.findall(
            r'data-group="Llama-3\.1-8B\|([\w-]+)">[^<]*<span class="n">(\d+) runs?</span>',
            page.content.decode(),
        )
    }
    assert shown == dict(expected)


def test_the_upload_page_shows_the_scenario_the_file_says_and_takes_one_it_does_not(
    login_client: Any, engineer: Any, team: Any, media: Path
) -> None:
    factories.accelerator_type_from(factories.H100)
    client = login_client(engineer)
    files = {
        "vllm_rate_inf.json": (FIXTURES / "vllm_rate_inf.json").read_bytes(),
        "lm_eval_v04.json": (FIXTURES / "lm_eval_v04.json").read_bytes(),
    }
    page = client.get(reverse("benchmarks:upload"))
    assert 'id="scenario-choices"' in page.content.decode()
    preview = client.post(
        reverse("benchmarks:upload_preview"),
        {"files": [SimpleUploadedFile(name, data) for name, data in files.items()]},
    ).json()
    shown = {run["format"]: (run["scenario"], run["scenario_stated"]) for run in preview["runs"]}
    assert shown == {"vllm-serving": ("serving", True), "lm-eval": ("unstated", False)}
    # the uploader states what the lm-eval file does not
    index = next(run["index"] for run in preview["runs"] if run["format"] == "lm-eval")
    saved = client.post(
        reverse("benchmarks:upload_save"),
        {
            "token": preview["token"],
            "team": team.pk,
            f"r{index}-scenario": "offline",
            **{f"r{run['index']}-precision": "bf16" for run in preview["runs"]},
            **{f"r{run['index']}-accelerator": "H100 SXM 80GB" for run in preview["runs"]},
        },
    )
    assert saved.status_code == 200, saved.json()
    stored = {run.source_format: run for run in BenchmarkRun.objects.select_related("workload")}
    assert stored["lm-eval"].workload.scenario == "offline"
    assert stored["lm-eval"].field_sources["workload.scenario"] == "user"
    assert stored["vllm-serving"].workload.scenario == "serving"


def test_the_migration_unstates_only_workloads_whose_every_run_was_offline_by_default(team: Any) -> None:
    from django.apps import apps

    migration = importlib.import_module("accelboard.benchmarks.migrations.0004_scenario_serving_unstated")
    defaulted = factories.run_create(team=team, batch_size=8)
    stated = factories.run_create(team=team, batch_size=16)
    mixed = factories.run_create(team=team, batch_size=32)
    factories.run_create(team=team, batch_size=32)  # a second run of that workload, Offline stated
    for run in (defaulted, mixed):
        BenchmarkRun.objects.filter(pk=run.pk).update(field_sources={"workload.scenario": "default"})
    BenchmarkRun.objects.filter(pk=stated.pk).update(field_sources={"workload.scenario": "file:x.json:k"})
    migration.defaulted_offline_unstated(apps, None)
    scenarios = {run.workload.batch_size: run.workload.scenario for run in BenchmarkRun.objects.all()}
    assert scenarios == {8: "unstated", 16: "offline", 32: "offline"}
    moved = BenchmarkRun.objects.get(pk=defaulted.pk).workload
    # the same identity a new import of that workload computes: it joins, not duplicates
    spec = WorkloadSpec(scenario="unstated", batch_size=8, options=moved.options)
    assert moved.identity == spec.identity(moved.variant_id)
