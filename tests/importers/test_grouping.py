"""Files given together are one submission: loose MLPerf files become the run an archive gives."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from accelboard.importers import ParseError, UnrecognisedFormat, detect, parse_bytes, parse_files, parse_path

from .test_cli import _parse

ACME = "mlperf_llm/closed/Acme"
SERVER = f"{ACME}/results/acme-8xH100/llama2-70b-99/Server"
LOOSE = {
    "mlperf_log_detail.txt": f"{SERVER}/performance/run_1/mlperf_log_detail.txt",
    "mlperf_log_summary.txt": f"{SERVER}/performance/run_1/mlperf_log_summary.txt",
    "accuracy.txt": f"{SERVER}/accuracy/accuracy.txt",
    "acme-8xH100.json": f"{ACME}/systems/acme-8xH100.json",
    "acme-8xH100_Server.json": f"{ACME}/measurements/acme-8xH100/llama2-70b-99/Server/acme-8xH100_Server.json",
    # the Offline measurement too: the run picks the one named for its scenario
    "acme-8xH100_Offline.json": f"{ACME}/measurements/acme-8xH100/llama2-70b-99/Offline/acme-8xH100_Offline.json",
}


def _loose(fixtures: Path) -> list[tuple[str, bytes]]:
    return [(name, (fixtures / path).read_bytes()) for name, path in LOOSE.items()]


def _metrics(run) -> dict[str, float]:
    return {m.name: m.value for m in run.metrics}


def test_it_makes_one_run_of_loose_mlperf_files_uploaded_together(fixtures: Path):
    submission = parse_files(_loose(fixtures), context={"model": "llama2-70b-99"})
    (run,) = submission.runs
    # the Offline measurement given with them describes no run given: said so, not silently dropped
    (unused,) = submission.errors
    assert unused.file == "acme-8xH100_Offline.json" and "MLPerf measurement description" in str(unused)
    metrics = _metrics(run)
    assert metrics["throughput_tokens_per_s"] == 21028.3
    assert metrics["accuracy:mlperf:rouge1"] == pytest.approx(0.444312)
    assert (run.hardware.accelerator, run.hardware.count) == ("NVIDIA H100-SXM-80GB", 8)
    assert run.field_sources["hardware.accelerator"] == "file:acme-8xH100.json:accelerator_model_name"
    assert run.variant.precision == "fp8"
    assert run.field_sources["variant.precision"] == "file:acme-8xH100_Server.json:weight_data_types"
    assert run.model == "llama2-70b-99" and run.field_sources["model"] == "user"
    assert sorted(run.files) == sorted(set(LOOSE) - {"acme-8xH100_Offline.json"})


def test_it_gives_the_same_figures_as_the_archive_of_the_same_files(fixtures: Path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(fixtures / "mlperf_llm", arcname="mlperf_llm")
    from_archive = [
        r for r in parse_bytes(buffer.getvalue(), filename="r.tgz") if r.workload.scenario == "server"
    ]
    (loose,) = parse_files(_loose(fixtures), context={"model": "llama2-70b-99"}).runs
    assert _metrics(loose) == _metrics(from_archive[0])
    assert loose.hardware == from_archive[0].hardware and loose.variant == from_archive[0].variant


def test_it_names_a_system_json_given_alone_instead_of_calling_it_unrecognised(
    fixtures: Path, tmp_path: Path
):
    system = (fixtures / LOOSE["acme-8xH100.json"]).read_bytes()
    assert detect(system, name="acme.json") == "mlperf-inference"
    submission = parse_files([("acme.json", system), ("notes.txt", b"hello\n")])
    assert submission.runs == []
    first, second = submission.errors
    assert isinstance(first, ParseError) and "MLPerf system description" in str(first)
    assert "no result file given with it uses it" in str(first)
    assert isinstance(second, UnrecognisedFormat) and second.file == "notes.txt"
    with pytest.raises(ParseError, match="MLPerf system description.*holds no result"):
        parse_bytes(system, filename="acme.json")


def test_it_keeps_the_good_runs_when_one_file_is_broken(fixtures: Path):
    files = _loose(fixtures) + [
        ("result.json", b'{"model_id": "x", "request_throughput": 1.0,\n "mean_ttft_ms": ')
    ]
    submission = parse_files(files)
    assert len(submission.runs) == 1
    broken = [e for e in submission.errors if e.file == "result.json"]
    assert len(broken) == 1 and broken[0].line == 2


def test_it_keeps_two_files_of_the_same_name_apart(fixtures: Path):
    offline = (
        fixtures
        / f"{ACME}/results/acme-8xH100/llama2-70b-99/Offline/performance/run_1/mlperf_log_summary.txt"
    )
    files = _loose(fixtures) + [("mlperf_log_summary.txt", offline.read_bytes())]
    submission = parse_files(files)
    assert sorted(r.workload.scenario for r in submission.runs) == ["offline", "server"]
    offline_run = next(r for r in submission.runs if r.workload.scenario == "offline")
    assert offline_run.source_file == "duplicate-2/mlperf_log_summary.txt"
    assert offline_run.hardware.accelerator == ""  # its folder holds no system description


def test_it_reads_a_folder_upload_like_the_folder(fixtures: Path):
    root = fixtures / "mlperf"
    files = [
        (p.relative_to(fixtures).as_posix(), p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()
    ]
    submission = parse_files(files)
    assert submission.errors == []  # compliance/ and ranging/ files are not results, not errors
    assert [r.model for r in submission.runs] == [r.model for r in parse_path(root)] == ["resnet50"]


def test_the_cli_prints_one_run_for_loose_mlperf_files(fixtures: Path, tmp_path: Path):
    folder = tmp_path / "downloads"
    folder.mkdir()
    for name, path in LOOSE.items():
        shutil.copy(fixtures / path, folder / name)
    (folder / "acme-8xH100_Offline.json").unlink()
    result = _parse(*sorted(str(p) for p in folder.iterdir()), "--compact", home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    (run,) = json.loads(result.stdout)
    assert run["hardware"]["accelerator"] == "NVIDIA H100-SXM-80GB"
    assert {m["name"]: m["value"] for m in run["metrics"]}["throughput_tokens_per_s"] == 21028.3
    # the system JSON alone is refused with what it is, not as an unrecognised file
    alone = _parse(str(folder / "acme-8xH100.json"), home=tmp_path / "home")
    assert alone.returncode == 2 and "MLPerf system description" in alone.stderr
