"""MLPerf Inference and Training importers on fixtures in the results-tree layout."""

from __future__ import annotations

import io
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from accelboard.importers import ParseError, detect, parse_bytes, parse_path

RUN_DIR = "mlperf/closed/Acme/results/acme-2xL4/resnet50/SingleStream"


def _metrics(run) -> dict[str, float]:
    return {m.name: m.value for m in run.metrics}


def test_it_reads_a_results_directory_with_its_sibling_files(fixtures: Path):
    runs = parse_path(fixtures / "mlperf")
    # one performance run and nothing from compliance/ or the ranging pass; accuracy joins the run
    assert len(runs) == 1
    run = runs[0]
    assert run.source_file.endswith("performance/run_1/mlperf_log_detail.txt")
    assert run.model == "resnet50" and run.field_sources["model"] == "path"
    assert run.workload.scenario == "single-stream"
    assert run.hardware.accelerator == "NVIDIA L4" and run.hardware.count == 2
    assert run.field_sources["hardware.accelerator"] == "file:systems/acme-2xL4.json:accelerator_model_name"
    assert (run.hardware.cuda_version, run.hardware.driver_version) == ("12.8", "570.86")
    assert (run.workload.framework, run.workload.framework_version) == ("TensorRT", "10.8.0")
    assert run.variant.precision == "int8"
    assert run.field_sources["variant.precision"].endswith("acme-2xL4_SingleStream.json:weight_data_types")
    assert run.started_at == "2025-02-11T09:30:00Z"
    metrics = _metrics(run)
    assert metrics["latency_p90_ms"] == pytest.approx(0.412345)
    assert metrics["latency_p999_ms"] == pytest.approx(0.470222)  # only in the summary: it fills the gap
    assert (
        run.metric("latency_p90_ms").raw_value == "412345" and run.metric("latency_p90_ms").raw_unit == "ns"
    )
    assert metrics["accuracy:resnet50:accuracy"] == pytest.approx(75.942)
    assert run.context["accuracy_good"] == 37971


def test_it_averages_power_inside_the_run_window(fixtures: Path):
    run = parse_path(fixtures / RUN_DIR)[0]
    metrics = _metrics(run)
    # 10 samples of 60/70 W inside [power_begin, power_end]; the 300 W ones outside are ignored
    assert metrics["power_avg_w"] == pytest.approx(65.0)
    assert metrics["energy_j"] == pytest.approx(65.0 * 600)
    assert metrics["energy_per_inference_j"] == pytest.approx(65.0 / 2436.38)
    assert len(run.metric("power_avg_w").samples) == 10


def test_it_reads_old_label_spellings_and_invalid_results(fixtures: Path):
    run = parse_path(fixtures / "mlperf_server_old_summary.txt", context={"model": "bert-99"})[0]
    assert run.workload.scenario == "server"
    assert run.valid is False
    assert _metrics(run)["throughput_samples_per_s"] == pytest.approx(1402.55)
    assert run.metric("throughput_samples_per_s").source == "file:mlperf_server_old_summary.txt:7"
    assert _metrics(run)["latency_p99_ms"] == pytest.approx(191.528736)
    assert run.model == "bert-99" and run.field_sources["model"] == "user"


def test_it_reads_an_archive_of_a_results_tree(fixtures: Path, tmp_path: Path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(fixtures / "mlperf", arcname="mlperf")
    runs = parse_bytes(buffer.getvalue(), filename="results.tar.gz")
    assert [r.model for r in runs] == ["resnet50"]
    assert runs[0].hardware.accelerator == "NVIDIA L4"
    zipped = tmp_path / "results.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for path in (fixtures / "mlperf").rglob("*"):
            if path.is_file():
                archive.write(path, path.relative_to(fixtures).as_posix())
    assert detect(zipped) == "mlperf-inference"
    assert _metrics(parse_path(zipped)[0])["power_avg_w"] == pytest.approx(65.0)


def test_it_rejects_a_truncated_detail_log_with_the_line(fixtures: Path, tmp_path: Path):
    lines = (fixtures / RUN_DIR / "performance/run_1/mlperf_log_detail.txt").read_text().splitlines()
    broken = tmp_path / "mlperf_log_detail.txt"
    broken.write_text("\n".join(lines[:9]) + "\n" + lines[9][:60] + "\n")
    with pytest.raises(ParseError) as error:
        parse_path(broken)
    assert error.value.line == 10
    assert "broken JSON" in str(error.value)


def test_it_rejects_a_summary_cut_before_its_result(fixtures: Path, tmp_path: Path):
    text = (fixtures / RUN_DIR / "performance/run_1/mlperf_log_summary.txt").read_text()
    cut = tmp_path / "mlperf_log_summary.txt"
    cut.write_text("\n".join(text.splitlines()[:6]) + "\n")
    with pytest.raises(ParseError) as error:
        parse_path(cut)
    assert error.value.line == 7 and "truncated" in error.value.message
    empty_value = tmp_path / "empty" / "mlperf_log_summary.txt"
    empty_value.parent.mkdir()
    empty_value.write_text(
        text.replace("90.0th percentile latency (ns) : 412345", "90.0th percentile latency (ns) :")
    )
    with pytest.raises(ParseError) as error:
        parse_path(empty_value)
    assert error.value.line == 7


def test_it_rejects_a_broken_sibling_system_json(fixtures: Path, tmp_path: Path):
    tree = tmp_path / "tree"
    shutil.copytree(fixtures / "mlperf", tree)
    (tree / "closed/Acme/systems/acme-2xL4.json").write_text('{"accelerators_per_node": "two"}')
    with pytest.raises(ParseError) as error:
        parse_path(tree)
    assert error.value.key == "accelerators_per_node"


def test_it_reads_training_logs_with_launcher_prefixes(fixtures: Path):
    runs = parse_path(fixtures / "training")
    by_file = {Path(r.source_file).name: r for r in runs}
    done = by_file["result_0.txt"]
    assert done.model == "resnet" and done.workload.scenario == "training"
    assert done.valid is True and done.context["status"] == "success"
    assert _metrics(done)["time_to_train_s"] == pytest.approx(900.0)
    assert _metrics(done)["throughput_samples_per_s"] == pytest.approx(23040000 / 900.0)
    assert _metrics(done)["accuracy:resnet:eval_accuracy"] == pytest.approx(0.7601)
    assert done.workload.batch_size == 3264
    assert done.hardware.accelerator == "NVIDIA B200-SXM-180GB" and done.hardware.count == 16
    assert (done.hardware.cuda_version, done.hardware.driver_version) == ("12.8.0", "570.86.10")
    aborted = by_file["result_1.txt"]
    assert aborted.valid is False and aborted.context["status"] == "aborted"
    assert aborted.metric("accuracy:resnet:eval_accuracy") is None


def test_it_marks_a_training_log_without_run_stop_invalid(fixtures: Path, tmp_path: Path):
    lines = (fixtures / "training/Acme/results/acme-dgx/resnet/result_0.txt").read_text().splitlines()
    cut = tmp_path / "result_0.txt"
    cut.write_text("\n".join(lines[:-1]) + "\n")
    run = parse_path(cut)[0]
    assert run.valid is False and run.metric("time_to_train_s") is None
    assert any("no run_stop" in w for w in run.warnings)
