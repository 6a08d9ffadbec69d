"""The real files in ../shared/samples (not committed): each must import with its key numbers.

Skipped where the samples folder is not next to the repository.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accelboard.importers import parse_path

SAMPLES = Path(__file__).parents[2].parent / "shared/samples"
pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/samples is not present")

MLPERF = SAMPLES / "mlperf_inference/mlcommons-inference_results_v4.1/closed"


def _metrics(run) -> dict[str, float]:
    return {m.name: m.value for m in run.metrics}


def test_it_imports_the_mlperf_llama2_offline_run():
    (run,) = parse_path(MLPERF / "NVIDIA/results/H200-SXM-141GBx8_TRT/llama2-70b-99/Offline")
    metrics = _metrics(run)
    assert metrics["throughput_samples_per_s"] == pytest.approx(107.477)
    assert metrics["throughput_tokens_per_s"] == pytest.approx(31302.7)
    assert (run.hardware.accelerator, run.hardware.count) == ("NVIDIA H200-SXM-141GB", 8)
    assert run.variant.precision == "fp16" and run.workload.scenario == "offline"
    assert metrics["accuracy:mlperf:rouge1"] == pytest.approx(0.44563)  # ROUGE-1 44.563 (%)
    assert "accuracy:mlperf:gen_num" not in metrics and run.context["accuracy_gen_num"] == 24576


def test_it_imports_the_mlperf_bert_server_summary():
    (run,) = parse_path(
        MLPERF / "Intel/results/1-node-2S-EMR-PyTorch/bert-99/Server/performance/run_1/mlperf_log_summary.txt"
    )
    assert _metrics(run)["throughput_samples_per_s"] == pytest.approx(1281.58)
    assert run.hardware.count == 0 and run.hardware.cpu == "INTEL(R) XEON(R) PLATINUM 8592+"


def test_it_imports_the_mlperf_training_log():
    (run,) = parse_path(SAMPLES / "mlperf_training")
    assert run.model == "llama2_70b_lora" and run.valid
    assert _metrics(run)["time_to_train_s"] == pytest.approx(1397.586)
    assert run.hardware.accelerator == "NVIDIA H200-SXM5-141GB" and run.hardware.count == 8


def test_it_imports_the_other_samples():
    (vllm,) = parse_path(next((SAMPLES / "vllm_bench_serve").rglob("*.json")))
    assert _metrics(vllm)["throughput_requests_per_s"] == pytest.approx(9.364124289561836)
    assert (vllm.variant.precision, vllm.hardware.accelerator, vllm.hardware.count) == (
        "fp8",
        "H100-80GB-SXM",
        1,
    )
    (llm,) = parse_path(next((SAMPLES / "llmperf").rglob("*.json")))
    assert _metrics(llm)["throughput_tokens_per_s"] == pytest.approx(198.25122608178637)
    (optimum,) = parse_path(SAMPLES / "optimum_benchmark")
    assert _metrics(optimum)["throughput_samples_per_s"] == pytest.approx(5.648934083819028)
    assert optimum.model == "BAAI/bge-base-en-v1.5"
    bench = parse_path(next((SAMPLES / "pytest_benchmark").rglob("*.json")))
    assert _metrics(bench[0])["throughput_ops_per_s"] == pytest.approx(41513.272817492856)
    (lm,) = parse_path(next((SAMPLES / "lm_eval_harness").rglob("*.json")))
    assert _metrics(lm)["accuracy:arc_easy:acc"] == pytest.approx(0.7542087542087542)
    assert lm.variant.precision == "bf16"
    carbon = parse_path(next((SAMPLES / "codecarbon").rglob("*.csv")))
    assert len(carbon) == 28 and carbon[0].hardware.cpu == "Apple M1"
    (smi,) = parse_path(next((SAMPLES / "nvidia_smi_csv").rglob("*.csv")))
    assert len(smi.telemetry) > 50 and 20 < _metrics(smi)["power_avg_w"] < 25
