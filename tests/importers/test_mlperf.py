"""MLPerf Inference and Training importers on fixtures in the results-tree layout."""

from __future__ import annotations

import io
import json
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
    # the checker's "accuracy=75.942%" is a proportion: stored as a ratio, the file's text kept
    accuracy = run.metric("accuracy:mlperf:accuracy")
    assert (accuracy.value, accuracy.unit, accuracy.raw_value, accuracy.raw_unit) == (
        pytest.approx(0.75942),
        "ratio",
        "75.942%",
        "%",
    )
    assert run.context["accuracy_good"] == 37971 and run.context["accuracy_total"] == 50000


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
    assert done.metric("accuracy:resnet:eval_accuracy").unit == "ratio"  # top-1 as a fraction
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


LLM = "mlperf_llm/closed/Acme"
SERVER = "results/acme-8xH100/llama2-70b-99/Server"
LLM_SERVER = f"{LLM}/{SERVER}"


def test_it_reads_the_official_token_throughput_of_a_server_run(fixtures: Path):
    (run,) = parse_path(fixtures / LLM_SERVER / "performance/run_1/mlperf_log_detail.txt")
    metrics = _metrics(run)
    # result_completed_tokens_per_second, not result_token_throughput (tokens per *ns*: 1.65e-08)
    assert metrics["throughput_tokens_per_s"] == 21028.3
    assert run.metric("throughput_tokens_per_s").source.endswith(":result_completed_tokens_per_second")
    assert run.context["result_token_throughput"] == pytest.approx(1.651810962846677e-08)
    assert run.context["result_token_throughput_with_loadgen_overhead"] == 21044.07
    assert metrics["throughput_samples_per_s"] == 69.9459
    assert metrics["ttft_p99_ms"] == 1480.0 and metrics["tpot_p99_ms"] == 138.0
    # the summary's rounded 69.95 and 21028.30 agree with the detail log: no warning about them
    assert not any("throughput" in warning for warning in run.warnings)


def test_it_reads_quoted_accuracy_values_and_keeps_counts_out(fixtures: Path):
    (run,) = parse_path(fixtures / LLM_SERVER / "performance/run_1/mlperf_log_detail.txt")
    rouge = {a.metric: a for a in run.accuracy}
    assert set(rouge) == {"rouge1", "rouge2", "rougeL", "rougeLsum"}
    assert (rouge["rouge1"].value, rouge["rouge1"].unit, rouge["rouge1"].raw) == (
        pytest.approx(0.444312),
        "ratio",
        "44.4312",
    )
    assert rouge["rouge1"].target == "99% of reference"
    assert run.context["accuracy_gen_num"] == 24576 and run.context["accuracy_tokens_per_sample"] == 289.4
    assert not any(name.endswith(("gen_num", "gen_len", "tokens_per_sample")) for name in _metrics(run))


def test_it_gives_one_run_per_scenario_folder(fixtures: Path):
    runs = parse_path(fixtures / "mlperf_llm")
    # Server: performance run + accuracy folder (accuracy-mode logs, accuracy.txt) = one run;
    # Offline has only a summary and accuracy.txt: one run too, its accuracy counted once
    assert [(r.workload.scenario, r.context["mode"]) for r in runs] == [
        ("server", "PerformanceOnly"),
        ("offline", "PerformanceOnly"),
    ]
    server, offline = runs
    assert _metrics(server)["throughput_tokens_per_s"] == 21028.3  # never the accuracy pass's 3400.1
    assert _metrics(offline)["throughput_tokens_per_s"] == 30105.4
    assert _metrics(offline)["throughput_samples_per_s"] == 102.96
    assert _metrics(offline)["accuracy:mlperf:rouge1"] == pytest.approx(0.444586)
    assert (offline.hardware.accelerator, offline.hardware.count, offline.variant.precision) == (
        "NVIDIA H100-SXM-80GB",
        8,
        "fp8",
    )
    assert any(f.endswith("Offline/accuracy/accuracy.txt") for f in offline.files)
    assert any(f.endswith("systems/acme-8xH100.json") for f in offline.files)


def test_it_keeps_an_accuracy_pass_alone_as_an_accuracy_run(fixtures: Path, tmp_path: Path):
    shutil.copytree(fixtures / "mlperf_llm", tmp_path / "tree")
    shutil.rmtree(tmp_path / "tree/closed/Acme" / SERVER / "performance")
    server = [r for r in parse_path(tmp_path / "tree") if r.workload.scenario == "server"]
    assert len(server) == 1 and server[0].context["mode"] == "AccuracyOnly"
    # the accuracy pass's LoadGen figures are not results; its INVALID is not the run's
    assert sorted(_metrics(server[0])) == [
        f"accuracy:mlperf:{k}" for k in ("rouge1", "rouge2", "rougeL", "rougeLsum")
    ]
    assert server[0].valid is True


def test_it_emits_the_early_stopping_estimate_of_single_stream(fixtures: Path, tmp_path: Path):
    run = parse_path(fixtures / RUN_DIR)[0]
    estimate = run.metric("latency_early_stopping_p90_ms")
    assert (estimate.value, estimate.raw_value, estimate.unit, estimate.direction) == (
        0.4124,
        "412400",
        "ms",
        "lower",
    )
    assert estimate.source.endswith(":early_stopping_latency_ss")
    assert run.context["early_stopping_latency_ms"] == 430100  # the 99th helper: context only
    # a summary alone: its "Early stopping 90.0th percentile estimate" line
    summary = tmp_path / "mlperf_log_summary.txt"
    shutil.copy(fixtures / RUN_DIR / "performance/run_1/mlperf_log_summary.txt", summary)
    (alone,) = parse_path(summary)
    assert _metrics(alone)["latency_early_stopping_p90_ms"] == 0.4124
    assert alone.metric("latency_early_stopping_p90_ms").source == "file:mlperf_log_summary.txt:15"


@pytest.mark.parametrize(
    ("text", "expected", "counts"),
    [
        # DeepSeek-R1: a sample count beside the figure is never an accuracy
        (
            "{'exact_match': 81.3582, 'TOKENS_PER_SAMPLE': 3886.2, 'num-samples': 4388}",
            {"exact_match": (0.813582, "ratio", "higher")},
            {"TOKENS_PER_SAMPLE": 3886.2, "num-samples": 4388},
        ),
        # 3D-UNet: DICE is written as a fraction already
        (
            "Accuracy: mean = 0.86170, kidney = 0.9347, tumor = 0.7887",
            {
                "mean": (0.8617, "ratio", "higher"),
                "kidney": (0.9347, "ratio", "higher"),
                "tumor": (0.7887, "ratio", "higher"),
            },
            {},
        ),
        # Whisper: a percentage with its sign, lower is better
        (
            "Word Error Rate: 2.0611%, accuracy=97.9389%",
            {"Word Error Rate": (0.020611, "ratio", "lower"), "accuracy": (0.979389, "ratio", "higher")},
            {},
        ),
        # Stable Diffusion: scores on their own scale
        (
            '{"FID_SCORE": 23.0082, "CLIP_SCORE": 31.7524}',
            {"FID_SCORE": (23.0082, "score", "lower"), "CLIP_SCORE": (31.7524, "score", "higher")},
            {},
        ),
    ],
)
def test_it_puts_every_accuracy_txt_on_one_scale(tmp_path: Path, text, expected, counts):
    folder = tmp_path / "closed/Acme/results/sys/model-99/Offline/accuracy"
    folder.mkdir(parents=True)
    (folder / "accuracy.txt").write_text(f"Results\n\n{text}\n\nhash=00ff\n")
    (run,) = parse_path(folder / "accuracy.txt")
    got = {
        name.split(":", 2)[2]: (m.value, m.unit, m.direction)
        for name, m in ((m.name, m) for m in run.metrics)
    }
    assert {k: (pytest.approx(v[0]), v[1], v[2]) for k, v in expected.items()} == got
    assert {k: run.context[f"accuracy_{k}"] for k in counts} == counts


def test_it_counts_training_samples_from_steps_never_from_an_eval_count(fixtures: Path):
    (run,) = parse_path(fixtures / "training_steps")
    # eval_stop's samples_count is the 10,002 samples evaluated; 1539 steps x 2048 were trained
    assert run.context["samples_trained"] == 1539 * 2048
    assert run.context["samples_trained_from"] == "step*global_batch_size"
    assert _metrics(run)["throughput_samples_per_s"] == pytest.approx(1539 * 2048 / 1000.0)
    # GPT-3's eval_accuracy is a log perplexity: a score, lower is better
    quality = run.metric("accuracy:gpt3:eval_accuracy")
    assert (quality.value, quality.unit, quality.direction) == (2.688, "score", "lower")


def test_it_leaves_training_throughput_out_when_the_log_does_not_say(fixtures: Path, tmp_path: Path):
    text = (fixtures / "training_steps/Acme/results/acme-pod/gpt3/result_0.txt").read_text()
    cut = tmp_path / "result_0.txt"
    cut.write_text("\n".join(line for line in text.splitlines() if '"step"' not in line) + "\n")
    (run,) = parse_path(cut)
    assert run.metric("throughput_samples_per_s") is None and run.metric("time_to_train_s") is not None
    assert any("throughput left out" in warning for warning in run.warnings)


def test_it_reads_no_request_latency_estimate_from_an_llm_single_stream_log(tmp_path: Path):
    def line(key, value):
        return ":::MLLOG " + json.dumps(
            {
                "key": key,
                "value": value,
                "time_ms": 1.0,
                "namespace": "mlperf::logging",
                "event_type": "POINT_IN_TIME",
                "metadata": {},
            }
        )

    detail = tmp_path / "mlperf_log_detail.txt"
    detail.write_text(
        "\n".join(
            [
                line("loadgen_version", "5.0 @ 1"),
                line("requested_use_token_latencies", True),
                line("effective_scenario", "SingleStream"),
                line("result_90.00_percentile_latency_ns", 2_100_000_000),
                line("early_stopping_latency_ss", 310_000_000),  # the TTFT estimate, in token mode
            ]
        )
        + "\n"
    )
    (run,) = parse_path(detail)
    assert run.metric("latency_early_stopping_p90_ms") is None
    assert run.context["early_stopping_latency_ss"] == 310_000_000


def test_a_summary_cut_short_is_never_read_as_valid(fixtures: Path, tmp_path: Path):
    summary = fixtures / "mlperf/closed/Acme/results/acme-2xL4/resnet50/SingleStream/performance/run_1"
    text = (summary / "mlperf_log_summary.txt").read_text()
    whole = tmp_path / "whole" / "mlperf_log_summary.txt"
    whole.parent.mkdir()
    whole.write_text(text)
    run = parse_path(whole, context={"model": "resnet50"})[0]
    assert run.valid is True and "truncated" not in run.context
    # The same file cut after its results (a run killed, a partial copy): "Result is : VALID" is
    # still there, LoadGen's closing "No errors encountered during test." is not.
    cut = tmp_path / "cut" / "mlperf_log_summary.txt"
    cut.parent.mkdir()
    cut.write_text("\n".join(text.splitlines()[:20]) + "\n")
    run = parse_path(cut, context={"model": "resnet50"})[0]
    assert run.valid is False and run.field_sources["valid"] == "derived:mlperf_log_summary.txt truncated"
    assert run.context["truncated"] == "mlperf_log_summary.txt"
    assert any("cut short" in warning for warning in run.warnings)
    assert run.metrics  # what it holds is still read
