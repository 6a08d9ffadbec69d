"""``accelboard upload`` against a live server: exit codes, errors, retries and a regression."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from accelboard_upload.cli import main, provenance_from_env

from accelboard.benchmarks.import_services import run_import
from accelboard.benchmarks.models import BenchmarkRun, MetricValue
from accelboard.importers import parse_bytes

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"


def _bench(path: Path, *, factor: float, day: int) -> Path:
    """The fixture's resnet50 benchmark with every time scaled by ``factor`` and tight samples."""
    data = json.loads((FIXTURES / "pytest_benchmark.json").read_bytes())
    data["benchmarks"] = data["benchmarks"][:1]
    data["datetime"] = f"2025-01-{day:02d}T10:00:00+00:00"
    stats = data["benchmarks"][0]["stats"]
    for key in ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ld15iqr", "hd15iqr", "total"):
        stats[key] *= factor
    stats["ops"] /= factor
    stats["data"] = [stats["mean"] * (1 + jitter) for jitter in (-0.01, -0.005, 0.0, 0.005, 0.01)]
    path.write_text(json.dumps(data))
    return path


def test_it_uploads_and_prints_the_table(
    server: str, token: str, team: Any, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_SHA", "0123456789abcdef")
    monkeypatch.setenv("GITHUB_REF_NAME", "main")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/infer")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    code = main(
        [str(FIXTURES / "vllm_2025.json"), "--server", server, "--token", token, "--accelerator", "H100 SXM 80GB",
         "--context", "batch_size=8"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, out + err
    run = BenchmarkRun.objects.get()
    assert (run.team, run.uploaded_via, run.git_commit, run.branch) == (
        team,
        "cli",
        "0123456789abcdef",
        "main",
    )
    assert run.ci_url == "https://github.com/acme/infer/actions/runs/42"
    assert run.workload.batch_size == 8
    assert run.raw_filename == "vllm_2025.json"
    header, columns = out.splitlines()[:2]
    assert "vllm-serving" in header and f"run {run.pk}" in header and "stored" in header
    assert columns.split() == ["metric", "value", "unit", "baseline", "delta", "%", "verdict"]
    row = next(line for line in out.splitlines() if line.startswith("throughput_tokens_per_s "))
    assert row.split() == ["throughput_tokens_per_s", "1267.2", "tokens/s", "-", "-", "new"]


def test_it_takes_server_and_token_from_the_environment(
    server: str, token: str, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELBOARD_SERVER", server)
    monkeypatch.setenv("ACCELBOARD_TOKEN", token)
    assert main([str(FIXTURES / "vllm_2025.json"), "--accelerator", "L4", "--commit", "c0ffee"]) == 0
    assert BenchmarkRun.objects.get().git_commit == "c0ffee"


def test_it_states_the_scenario_the_files_do_not(server: str, token: str, capsys: Any) -> None:
    args = ["--server", server, "--token", token, "--accelerator", "L4", "--scenario", "serving"]
    assert main([str(FIXTURES / "vllm_2025.json"), *args]) == 0
    assert BenchmarkRun.objects.get().workload.scenario == "serving"


def test_it_is_one_run_when_a_job_retries(server: str, token: str, capsys: Any) -> None:
    argv = [str(FIXTURES / "vllm_2025.json"), "--server", server, "--token", token, "--accelerator", "L4"]
    assert main(argv) == 0
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "already uploaded" in out
    assert BenchmarkRun.objects.count() == 1


def test_it_exits_2_on_a_file_that_does_not_parse(
    server: str, token: str, tmp_path: Path, capsys: Any
) -> None:
    broken = tmp_path / "results.json"
    broken.write_text('{"backend": "vllm", "date": "20250315-101500", "completed": ')
    code = main([str(broken), str(FIXTURES / "vllm_2025.json"), "--server", server, "--token", token,
                 "--accelerator", "L4"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert "server answered 422" in err and "results.json" in err and "(field: file[0])" in err
    assert not BenchmarkRun.objects.exists()  # the good file of the same upload is not stored either


def test_it_exits_2_when_the_file_lacks_what_the_server_needs(server: str, token: str, capsys: Any) -> None:
    code = main([str(FIXTURES / "vllm_2025.json"), "--server", server, "--token", token])
    err = capsys.readouterr().err
    assert code == 2
    assert "accelerator" in err and "(field: accelerator)" in err


def test_it_exits_2_on_a_bad_token(server: str, token: str, capsys: Any) -> None:
    code = main([str(FIXTURES / "vllm_2025.json"), "--server", server, "--token", "not-a-token-" * 4,
                 "--accelerator", "L4"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert "server answered 401" in err and "API token" in err
    assert not BenchmarkRun.objects.exists()


def test_it_exits_2_when_the_server_is_unreachable(capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code = main([str(FIXTURES / "vllm_2025.json"), "--server", f"http://127.0.0.1:{port}", "--token", "t" * 40,
                 "--retries", "0"])  # fmt: skip
    assert code == 2
    assert "cannot reach" in capsys.readouterr().err


def test_it_exits_2_on_a_missing_file_or_server(capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCELBOARD_SERVER", raising=False)
    assert main(["nope.json", "--server", "http://127.0.0.1:9", "--token", "t"]) == 2
    assert "nope.json: no such file" in capsys.readouterr().err
    assert main([str(FIXTURES / "vllm_2025.json"), "--token", "t"]) == 2
    assert "no server" in capsys.readouterr().err
    assert main(["--server"]) == 2


def test_it_flags_a_regression_and_fails_the_job_only_when_asked(
    server: str, token: str, team: Any, tmp_path: Path, capsys: Any
) -> None:
    # Stable history: five runs within 1% of each other, each with its repeated samples.
    for day, factor in enumerate([1.0, 1.01, 0.99, 1.005, 0.995], start=1):
        path = _bench(tmp_path / f"seed{day}.json", factor=factor, day=day)
        (parsed,) = parse_bytes(path.read_bytes(), filename=path.name)
        run_import(
            team=team, parsed=parsed, raw_name=path.name, raw_bytes=path.read_bytes(), uploaded_via="api"
        )
    worse = _bench(tmp_path / "worse.json", factor=1.2, day=9)
    code = main([str(worse), "--server", server, "--token", token, "--fail-on-regression"])
    out = capsys.readouterr().out
    assert code == 1, out
    row = next(line for line in out.splitlines() if line.startswith("latency_mean_ms "))
    assert row.split()[-2:] == ["+20.0", "REGRESSION"]
    assert "1 regression(s): worse.json: latency_mean_ms" in out
    run = BenchmarkRun.objects.get(raw_filename="worse.json")
    assert MetricValue.objects.get(run=run, name="latency_mean_ms").value == pytest.approx(11.0 * 1.2)
    # The same verdict without the flag reports but lets the job pass (a retry: the same run).
    assert main([str(worse), "--server", server, "--token", token]) == 0
    assert "REGRESSION" in capsys.readouterr().out
    assert BenchmarkRun.objects.count() == 6


def test_it_reads_ci_provenance_from_gitlab_and_github() -> None:
    gitlab = provenance_from_env(
        {"CI_COMMIT_SHA": "abc", "CI_COMMIT_REF_NAME": "dev", "CI_JOB_URL": "https://gitlab.example.com/j/1"}
    )
    assert gitlab == {"commit": "abc", "branch": "dev", "ci_url": "https://gitlab.example.com/j/1"}
    github = provenance_from_env(
        {"GITHUB_SHA": "def", "GITHUB_REF_NAME": "main", "GITHUB_SERVER_URL": "https://ghe.example.com",
         "GITHUB_REPOSITORY": "a/b", "GITHUB_RUN_ID": "7"}
    )  # fmt: skip
    assert github == {
        "commit": "def",
        "branch": "main",
        "ci_url": "https://ghe.example.com/a/b/actions/runs/7",
    }
