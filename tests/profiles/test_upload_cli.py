"""``accelboard upload RESULT --profile TRACE`` against a live server, and ``accelboard parse TRACE``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from accelboard_upload.cli import main

from accelboard.api.services import token_create
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.cli import main as accelboard_main
from accelboard.profiles.models import Profile
from accelboard.testing.traces import write_training_trace
from tests.factories import H100, accelerator_type_from

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"


def parse_main(args: list[str]) -> int:
    return accelboard_main(["accelboard", "parse", *args])


@pytest.fixture
def server(live_server: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    settings.MEDIA_ROOT = tmp_path / "media"
    accelerator_type_from(H100)
    for name in ("GITHUB_SHA", "GITHUB_REF_NAME", "CI_COMMIT_SHA", "ACCELBOARD_SERVER", "ACCELBOARD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return live_server.url


def test_upload_sends_the_profile_with_the_result(
    server: str, team: Any, tmp_path: Path, capsys: Any
) -> None:
    token = token_create(team=team, kind="ingest", name="ci")[1]
    trace = tmp_path / "rank0.pt.trace.json.gz"
    write_training_trace(trace, steps=2, layers=2)
    code = main(
        [str(FIXTURES / "vllm_2025.json"), "--profile", str(trace), "--server", server, "--token", token,
         "--accelerator", "H100 SXM 80GB"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, out + err
    run = BenchmarkRun.objects.get()
    assert Profile.objects.get(run=run).steps == 2
    assert f"profile: {server}/runs/{run.pk}/profile/" in out


def test_upload_exits_2_on_a_bad_trace_and_stores_nothing(
    server: str, team: Any, tmp_path: Path, capsys: Any
) -> None:
    token = token_create(team=team, kind="ingest", name="ci")[1]
    trace = tmp_path / "trace.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel"')
    code = main([str(FIXTURES / "vllm_2025.json"), "--profile", str(trace), "--server", server, "--token", token,
                 "--accelerator", "H100 SXM 80GB"])  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 2 and "trace.json" in err and "profile" in err
    assert not BenchmarkRun.objects.exists()


def test_parse_prints_the_profile_summary_without_a_database(tmp_path: Path, capsys: Any) -> None:
    ranks = []
    for rank in (0, 1):
        ranks.append(tmp_path / f"rank{rank}.json")
        write_training_trace(ranks[-1], rank=rank, world_size=2, steps=2, layers=2)
    assert parse_main([str(p) for p in ranks]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["source_format"] == "kineto" and summary["totals"]["ranks"] == 2
    for rank in summary["ranks"]:
        assert sum(rank["categories"].values()) == pytest.approx(rank["span_us"])
    assert summary["verdict"]["headline"]
    # HTA's analyses come with it: 2 steps × 1 all-reduce (every other of 2 backward layers) per rank.
    assert summary["hta"]["ranks"]["collectives_matched"] == 2 and len(summary["hta"]["idle"]["ranks"]) == 2
    # With a result file the runs come too; a broken trace is exit 2 naming it.
    assert parse_main([str(FIXTURES / "vllm_2025.json"), str(ranks[0]), "--compact"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert len(both["runs"]) == 1 and both["profile"]["totals"]["ranks"] == 1
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [{"ph": "X"')
    assert parse_main([str(broken)]) == 2
    assert "broken.json" in capsys.readouterr().err
