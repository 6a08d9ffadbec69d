"""``bench``: energy by counter and by integrated power, the run upload, GPU selection, refusals."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import FakeGpu  # this folder (no __init__.py): the root tests package must not shadow it

from accelboard_agent.bench import counter_energy_j, energy_choose, integrated_energy_j
from accelboard_agent.cli import main


@pytest.fixture
def repo(tmp_path, monkeypatch):
    path = tmp_path / "repo"
    path.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=path,
            check=True,
            capture_output=True,
        )
    monkeypatch.chdir(path)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True
    ).stdout.strip()
    return head


def _bench(
    server, tmp_path, *extra: str, command: tuple[str, ...] = ("-c", "import time; time.sleep(0.6)")
) -> int:
    return main(
        [
            "bench", "--server", server.url, "--token", "test-token", "--spool", str(tmp_path / "s.db"),
            "--model", "Llama-3.1-8B", "--precision", "fp8", "--scenario", "offline", "--batch-size", "64",
            *extra, "--", sys.executable, *command,
        ]
    )  # fmt: skip


def test_it_uploads_a_run_with_energy_power_wall_time_and_memory(tmp_path, server, repo, fake_nvml):
    fake_nvml([FakeGpu(0), FakeGpu(1)])

    code = _bench(server, tmp_path, "--gpus", "1")

    runs = server.stored("/api/v1/runs")
    assert code == 0 and len(runs) == 1
    run = runs[0]
    metrics = {m["name"]: m for m in run["metrics"]}
    assert set(metrics) == {"energy_j", "power_avg_w", "wall_time_s", "memory_peak_bytes"}
    assert 0.6 <= metrics["wall_time_s"]["value"] < 5
    # 300 W on one GPU: counter and integral agree, average power comes out at 300 W.
    assert metrics["power_avg_w"]["value"] == pytest.approx(300.0, rel=0.15)
    assert metrics["energy_j"]["unit"] == "J" and metrics["energy_j"]["value"] > 0
    assert metrics["memory_peak_bytes"]["value"] == 61_203_283_968
    assert run["hardware"]["gpu_uuids"] == ["GPU-fake-0001-aaaa"] and run["hardware"]["count"] == 1
    assert run["provenance"] == {
        "git_commit": repo,
        "branch": "main",
        "ci_url": "",
        "source_format": "agent-bench",
    }
    assert run["variant"]["precision"] == "fp8" and run["workload"]["batch_size"] == 64
    assert run["context"]["exit_status"] == 0
    assert run["context"]["energy_source"] == "counter"
    assert run["context"]["energy_disagreement_flag"] is False


def test_it_flags_counter_and_integrated_power_that_disagree(tmp_path, server, repo, fake_nvml):
    gpu = FakeGpu(0)
    gpu.energy_scale = 2.0  # the counter says 600 W while instant power says 300 W
    fake_nvml([gpu])

    _bench(server, tmp_path)

    context = server.stored("/api/v1/runs")[0]["context"]
    assert context["energy_disagreement_flag"] is True
    assert context["energy_disagreement"] > 0.4
    assert context["energy_counter_j"] > context["energy_integrated_j"] > 0


def test_it_exits_with_the_command_status(tmp_path, server, repo, fake_nvml):
    fake_nvml([FakeGpu(0)])

    code = main(
        ["bench", "--server", server.url, "--token", "test-token", "--spool", str(tmp_path / "s.db"),
         "--", sys.executable, "-c", "raise SystemExit(3)"]
    )  # fmt: skip

    run = server.stored("/api/v1/runs")[0]
    assert code == 3
    assert run["context"]["exit_status"] == 3
    # No --precision: fp32 is sent (the API requires one) and the run says it was a default.
    assert run["variant"]["precision"] == "fp32" and run["context"]["precision_defaulted"] is True
    assert run["model"] == os.path.basename(sys.executable)


def test_it_refuses_results_without_an_importer_and_runs_nothing(tmp_path, server, repo, capsys):
    marker = tmp_path / "ran"

    code = _bench(server, tmp_path, "--results", "out.json", command=("-c", f"open({str(marker)!r}, 'w')"))

    assert code == 2
    assert "results: no importer available in this agent version" in capsys.readouterr().err
    assert not marker.exists() and server.requests == []


def test_it_keeps_the_run_in_the_spool_while_the_server_is_away(tmp_path, server, repo, fake_nvml):
    fake_nvml([FakeGpu(0)])
    server.stop()

    code = _bench(server, tmp_path)
    server.start()
    flushed = main(
        ["flush", "--server", server.url, "--token", "test-token", "--spool", str(tmp_path / "s.db")]
    )

    assert code == 0 and flushed == 0
    assert len(server.stored("/api/v1/runs")) == 1


def test_it_selects_gpus_from_cuda_visible_devices_uuids(tmp_path, server, repo, fake_nvml, monkeypatch):
    fake_nvml([FakeGpu(0), FakeGpu(1), FakeGpu(2)])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-fake-0002,GPU-fake-0000-aaaa")

    _bench(server, tmp_path)

    assert server.stored("/api/v1/runs")[0]["hardware"]["gpu_uuids"] == [
        "GPU-fake-0002-aaaa",
        "GPU-fake-0000-aaaa",
    ]


def test_it_names_an_unknown_gpu_and_exits_2(tmp_path, server, repo, fake_nvml, capsys):
    fake_nvml([FakeGpu(0)])

    code = _bench(server, tmp_path, "--gpus", "GPU-nope")

    assert code == 2
    assert "gpus: 'GPU-nope' matches 0 GPUs on this host" in capsys.readouterr().err


def test_it_runs_without_a_gpu_and_reports_host_memory(tmp_path, server, repo, fake_nvml, capsys):
    import pynvml

    fake_nvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    code = _bench(server, tmp_path)

    run = server.stored("/api/v1/runs")[0]
    assert code == 0
    assert {m["name"] for m in run["metrics"]} == {"wall_time_s", "memory_peak_bytes"}
    assert run["context"]["memory_peak_source"] == "host_rss" and run["context"]["no_gpu"] is True
    assert "count" not in run["hardware"] and run["hardware"]["gpu_uuids"] == []
    assert capsys.readouterr().err.count("no NVIDIA driver") == 1


def test_it_never_counts_a_counter_reset_as_negative_energy():
    readings = [5_000_000, 5_100_000, 5_200_000, 1_000, 101_000, None, 201_000]

    energy, resets = counter_energy_j(readings)

    assert energy == pytest.approx(400.0) and resets == 1


def test_it_falls_back_to_integrated_power_when_the_counter_reads_zero_under_load():
    chosen = energy_choose(0.0, integrated_energy_j([(0.0, 250.0), (1.0, 250.0), (2.0, 250.0)]))

    assert chosen["energy_j"] == pytest.approx(500.0)
    assert chosen["energy_source"] == "integrated_power"
    assert chosen["energy_disagreement_flag"] is True
