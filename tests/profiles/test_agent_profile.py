"""``accelboard-agent bench --profile DIR -- CMD``: the real agent process uploads the run, then
the trace files the command wrote, to a live server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from accelboard.api.services import token_create
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.fleet.models import AcceleratorType
from accelboard.profiles.models import Profile
from tests.test_agent_integration import _agent, _env

WRITE_TRACES = (
    "import sys; from pathlib import Path; from accelboard.testing.traces import write_training_trace\n"
    "out = Path(sys.argv[1]); out.mkdir(exist_ok=True)\n"
    "for rank in (0, 1):\n"
    "    name = f'host_{rank}.pt.trace.json' + ('.gz' if rank else '')\n"
    "    write_training_trace(out / name, rank=rank, world_size=2, steps=2, layers=2)\n"
)


def test_bench_uploads_the_traces_the_command_wrote(live_server: Any, team: Any, tmp_path: Path) -> None:
    AcceleratorType.objects.get_or_create(
        name="H100 SXM 80GB", defaults={"slug": "h100-sxm-80gb", "match_names": ["H100 80GB HBM3"]}
    )
    token = token_create(team=team, kind="ingest", name="agent")[1]
    traces = tmp_path / "traces"
    (tmp_path / "stale").mkdir()
    result = subprocess.run(
        _agent(
            "bench",
            "--simulate",
            "1",
            "--model",
            "Llama-3.1-8B",
            "--precision",
            "bf16",
            "--server",
            live_server.url,
            "--token",
            token,
            "--spool",
            str(tmp_path / "spool.db"),
            "--profile",
            str(traces),
            "--profile",
            str(tmp_path / "missing.json"),
            "--",
            sys.executable,
            "-c",
            WRITE_TRACES,
            str(traces),
        ),  # fmt: skip
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "profile uploaded (2 file(s))" in result.stderr
    assert "missing.json was not written by the command" in result.stderr
    run = BenchmarkRun.objects.get()
    profile = Profile.objects.get(run=run)
    assert (profile.ranks, profile.steps) == (2, 2)
    assert sorted(profile.files) == ["host_0.pt.trace.json.gz", "host_1.pt.trace.json.gz"]
