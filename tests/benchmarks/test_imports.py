"""run_import / run_import_preview: parsed files become runs, with provenance, or a clear refusal."""

from __future__ import annotations

import hashlib
import io
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from accelboard.benchmarks.import_plans import ImportRejected
from accelboard.benchmarks.import_selectors import run_import_preview
from accelboard.benchmarks.import_services import run_import
from accelboard.benchmarks.models import BenchmarkRun, MetricValue, Series
from accelboard.importers import parse_bytes
from tests.api.conftest import row_counts

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"
H100 = {"accelerator": "H100 SXM 80GB", "count": "1"}


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def _parse(name: str) -> tuple[bytes, list[Any]]:
    data = (FIXTURES / name).read_bytes()
    return data, parse_bytes(data, filename=name)


def _import(team: Any, name: str, overrides: dict[str, str] | None = None, **extra: Any) -> tuple[Any, bool]:
    data, runs = _parse(name)
    assert len(runs) == 1
    return run_import(
        team=team,
        parsed=runs[0],
        raw_name=name,
        raw_bytes=data,
        uploaded_via="web",
        overrides=overrides,
        **extra,
    )


def test_it_stores_a_vllm_file_with_the_uploaders_hardware(team: Any, lead: Any, media: Path) -> None:
    data, runs = _parse("vllm_2025.json")
    run, created = run_import(
        team=team,
        parsed=runs[0],
        raw_name="vllm_2025.json",
        raw_bytes=data,
        uploaded_by=lead,
        uploaded_via="web",
        overrides={**H100, "commit": "abc1234", "branch": "main"},
    )
    run.refresh_from_db()
    assert created
    assert (run.source_format, run.uploaded_via, run.uploaded_by, run.team) == (
        "vllm-serving",
        "web",
        lead,
        team,
    )
    assert run.accelerator_type.name == "H100 SXM 80GB"
    assert (run.accelerator_count, run.git_commit, run.branch) == (1, "abc1234", "main")
    # The file's name is kept; its -FP8-dynamic suffix is the variant, not the model.
    assert (run.model_name, run.model_match) == ("Qwen2.5-7B-Instruct-FP8-dynamic", "new")
    assert run.workload.variant.model.name == "Qwen2.5-7B-Instruct"
    assert (run.workload.variant.name, run.workload.variant.precision) == ("fp8", "fp8")
    assert (run.accelerator_name, run.accelerator_match) == ("H100 SXM 80GB", "user")
    # the file's finite request_rate (12/s) is an arrival process: the Server pattern, never "chat"
    assert run.workload.scenario == "server"
    assert run.field_sources["workload.scenario"] == "derived:request_rate"
    assert run.field_sources["hardware.accelerator"] == "user"
    assert run.field_sources["provenance.git_commit"] == "user"
    assert run.field_sources["model"].startswith("file:")
    assert run.context["raw_sha256"] == hashlib.sha256(data).hexdigest()
    assert any("timezone" in w for w in run.context["warnings"])
    # The raw file is kept byte for byte under MEDIA_ROOT.
    assert run.raw_filename == "vllm_2025.json"
    assert (media / run.raw_file.name).read_bytes() == data
    assert run.raw_file.name.startswith(f"runs/{run.uuid}/")
    names = set(MetricValue.objects.filter(run=run).values_list("name", flat=True))
    assert names == {m.name for m in runs[0].metrics}
    throughput = MetricValue.objects.get(run=run, name="throughput_tokens_per_s")
    assert throughput.value == runs[0].metric("throughput_tokens_per_s").value
    assert throughput.source.startswith("file:")
    assert Series.objects.get(pk=throughput.series_id).last_value == throughput.value


def test_it_refuses_a_run_without_accelerator_and_stores_nothing(team: Any, media: Path) -> None:
    before = row_counts()
    with pytest.raises(ImportRejected) as caught:
        _import(team, "vllm_2025.json")
    assert caught.value.field == "accelerator"
    assert "accelerator" in caught.value.message
    assert row_counts() == before
    assert not media.exists() or not any(media.rglob("*.json"))


def test_it_names_every_missing_field(team: Any) -> None:
    with pytest.raises(ImportRejected) as caught:
        _import(team, "codecarbon_v3.csv")
    # CodeCarbon names no model and no precision; the first is the field, the rest are listed.
    assert caught.value.field == "model"
    assert "precision" in caught.value.message
    assert not BenchmarkRun.objects.exists()


def test_it_refuses_an_unknown_accelerator(team: Any) -> None:
    # TheBloke/Llama-2-7B-AWQ: the base Llama-2-7B, close to the catalogue's chat model; created
    # as new by the uploader's choice, the accelerator is what is left.
    with pytest.raises(ImportRejected) as caught:
        _import(team, "optimum_benchmark.json", {"create_model": "1"})  # NVIDIA A10G: not in the catalogue
    assert caught.value.field == "accelerator"
    assert "A10G" in caught.value.message
    assert not BenchmarkRun.objects.exists()


def test_it_refuses_a_bad_override_naming_the_key(team: Any) -> None:
    with pytest.raises(ImportRejected) as caught:
        _import(team, "vllm_2025.json", {"accelerator": "H100 SXM 80GB", "count": "eight"})
    assert caught.value.field == "count"
    with pytest.raises(ImportRejected) as caught:
        _import(team, "vllm_2025.json", {**H100, "ci_url": "not a url"})
    assert caught.value.field == "ci_url"
    assert not BenchmarkRun.objects.exists()


def test_it_refuses_telemetry_logs_for_now(team: Any) -> None:
    with pytest.raises(ImportRejected) as caught:
        _import(team, "nvidia_smi_multi.csv", {"model": "x", "precision": "bf16"})
    assert caught.value.field == "format"
    assert "telemetry" in caught.value.message
    assert not BenchmarkRun.objects.exists()


def test_it_applies_the_uploaders_fields_over_the_files(team: Any) -> None:
    run, _ = _import(
        team,
        "lm_eval_v04.json",
        {"model": "Llama-2-7B-Chat", "accelerator": "L4", "count": "1", "precision": "int4"},
    )
    run.refresh_from_db()
    # What the form said applies, marked as the uploader's; what the file said is kept beside it.
    assert run.workload.variant.model.name == "Llama-2-7B-Chat"
    assert (run.model_name, run.model_match) == ("TheBloke/Mistral-7B-Instruct-v0.2-GPTQ", "user")
    assert run.accelerator_type.name == "L4"
    assert (run.accelerator_name, run.accelerator_match) == ("NVIDIA H100 80GB HBM3", "user")
    assert run.accelerator_count == 1
    assert (run.workload.variant.precision, run.workload.variant.name) == ("int4", "int4-gptq")
    for path in ("model", "hardware.accelerator", "hardware.count", "variant.precision"):
        assert run.field_sources[path] == "user", path
    warnings = run.context["warnings"]
    assert any(
        w.startswith("hardware.count: the file says 2") and "uploader's 1 applies" in w for w in warnings
    )
    assert any("NVIDIA H100 80GB HBM3" in w and "'L4' applies" in w for w in warnings)


def test_it_fills_only_what_the_file_lacks_from_the_context(team: Any) -> None:
    data, runs = _parse("lm_eval_v04.json")
    run, _ = run_import(
        team=team,
        parsed=runs[0],
        raw_name="lm_eval_v04.json",
        raw_bytes=data,
        uploaded_via="api",
        overrides={"model": "Llama-2-7B-Chat"},
        context={"accelerator": "L4", "batch_size": "4", "label": "nightly"},
    )
    run.refresh_from_db()
    assert run.accelerator_type.name == "H100 SXM 80GB"
    assert (run.accelerator_name, run.accelerator_match) == ("NVIDIA H100 80GB HBM3", "alias")
    assert any("kept the file's value" in w for w in run.context["warnings"])
    assert run.context["label"] == "nightly"


def test_it_stores_accuracy_results_as_metrics(team: Any) -> None:
    run, created = _import(team, "lm_eval_v04.json")
    assert created
    _, runs = _parse("lm_eval_v04.json")
    expected = {f"accuracy:{a.task}:{a.metric}" for a in runs[0].accuracy}
    values = {m.name: m for m in MetricValue.objects.filter(run=run)}
    assert expected <= set(values)
    some = runs[0].accuracy[0]
    stored = values[f"accuracy:{some.task}:{some.metric}"]
    # each result's own scale: acc is a fraction (ratio), a perplexity a score
    assert (stored.value, stored.unit) == (some.value, some.unit)
    units = {a.metric: a.unit for a in runs[0].accuracy}
    assert values["accuracy:arc_easy:acc"].unit == units["acc"] == "ratio"
    assert values["accuracy:wikitext:word_perplexity"].unit == units["word_perplexity"] == "score"
    assert run.workload.variant.quantization_method == "GPTQ"
    assert run.accelerator_type.name == "H100 SXM 80GB"  # "NVIDIA H100 80GB HBM3" matched by name
    assert run.accelerator_count == 2
    assert len(run.context["accuracy"]) == len(runs[0].accuracy)


def test_it_imports_an_mlperf_archive_with_its_accuracy(team: Any, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(FIXTURES / "mlperf", arcname="mlperf")
    data = buffer.getvalue()
    runs = parse_bytes(data, filename="submission.tar.gz")
    stored = [
        run_import(team=team, parsed=r, raw_name="submission.tar.gz", raw_bytes=data, uploaded_via="cli")[0]
        for r in runs
    ]
    assert len({r.pk for r in stored}) == len(runs) >= 1
    run = stored[0]
    assert run.accelerator_type.name == "L4"
    assert run.accelerator_count == 2
    assert run.workload.scenario == "single-stream"
    assert any(name.startswith("accuracy:") for name in run.metrics.values_list("name", flat=True))
    # Uploading the same archive again adds nothing.
    again = [
        run_import(team=team, parsed=r, raw_name="submission.tar.gz", raw_bytes=data, uploaded_via="cli")
        for r in parse_bytes(data, filename="submission.tar.gz")
    ]
    assert [created for _, created in again] == [False] * len(runs)
    assert BenchmarkRun.objects.count() == len(runs)


def test_it_is_one_run_when_the_same_file_comes_twice(team: Any, other_team: Any) -> None:
    first, created = _import(team, "vllm_2025.json", H100)
    second, created_again = _import(team, "vllm_2025.json", {**H100, "commit": "other"})
    assert created and not created_again
    assert first.pk == second.pk
    assert BenchmarkRun.objects.filter(team=team).count() == 1
    # Another team uploading the same file gets its own run.
    theirs, created_theirs = _import(other_team, "vllm_2025.json", H100)
    assert created_theirs and theirs.pk != first.pk


def test_it_keeps_each_run_of_a_multi_run_file(team: Any) -> None:
    data, runs = _parse("pytest_benchmark.json")
    assert len(runs) == 2
    overrides = {"precision": "fp32", "accelerator": "L4", "count": "1"}
    made = [
        run_import(
            team=team,
            parsed=r,
            raw_name="bench.json",
            raw_bytes=data,
            uploaded_via="api",
            overrides=overrides,
        )
        for r in runs
    ]
    assert [created for _, created in made] == [True, True]
    assert made[0][0].pk != made[1][0].pk
    assert made[0][0].git_commit == "a1b2c3d4e5"  # from the file's commit_info
    assert made[0][0].field_sources["provenance.git_commit"].startswith("file:")
    again = [
        run_import(
            team=team,
            parsed=r,
            raw_name="bench.json",
            raw_bytes=data,
            uploaded_via="api",
            overrides=overrides,
        )
        for r in parse_bytes(data, filename="bench.json")
    ]
    assert {run.pk for run, _ in again} == {run.pk for run, _ in made}
    assert BenchmarkRun.objects.count() == 2


def test_it_is_idempotent_on_a_given_run_id(team: Any, other_team: Any) -> None:
    run_id = uuid.uuid4()
    first, created = _import(team, "vllm_2025.json", H100, run_uuid=run_id)
    assert created and first.uuid == run_id
    second, created_again = _import(team, "vllm_2025.json", H100, run_uuid=str(run_id))
    assert not created_again and second.pk == first.pk
    with pytest.raises(ImportRejected) as caught:
        _import(other_team, "vllm_2025.json", H100, run_uuid=run_id)
    assert caught.value.field == "run_id"
    assert BenchmarkRun.objects.count() == 1


def test_it_previews_what_would_be_stored_without_writing(team: Any) -> None:
    _, runs = _parse("vllm_2025.json")
    before = row_counts()
    preview = run_import_preview(runs[0], None)
    assert preview["ok"] is False
    assert [m["field"] for m in preview["missing"]] == ["accelerator"]
    assert preview["model"] == "Qwen2.5-7B-Instruct-FP8-dynamic"
    assert len(preview["metrics"]) == len(runs[0].metrics)
    ready = run_import_preview(runs[0], {"accelerator": "h100-sxm-80gb", "count": "8"})
    assert ready["ok"] is True and ready["missing"] == []
    assert ready["hardware"]["accelerator_type"] == "H100 SXM 80GB"
    assert ready["hardware"]["count"] == 8
    assert ready["field_sources"]["hardware.count"] == "user"
    unknown = run_import_preview(runs[0], {"accelerator": "Potato 9000"})
    assert unknown["ok"] is False and "Potato 9000" in unknown["missing"][0]["message"]
    assert row_counts() == before
    # The caller's parsed run is left as the importer made it.
    assert runs[0].hardware.accelerator == ""


def test_it_previews_a_telemetry_log_as_rejected(db: None) -> None:
    _, runs = _parse("nvidia_smi_multi.csv")
    preview = run_import_preview(runs[0])
    assert preview["ok"] is False
    assert "telemetry" in preview["rejected"]
