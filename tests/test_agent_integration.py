"""The real agent process against a live accelboard server and PostgreSQL.

The agent is started as its own process (``python -m accelboard_agent``, from ``agents/``), talks
only HTTP with an ingest token, and the test reads what landed in the database.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from accelboard.api.services import token_create
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.fleet.models import Accelerator, AcceleratorType, Host, TelemetrySample
from accelboard.serving.models import InferenceMetric

ROOT = Path(__file__).resolve().parents[1]


def _agent(*args: str) -> list[str]:
    return [sys.executable, "-m", "accelboard_agent", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # The agent is importable from the checkout even where ``pip install ./agents`` was not run.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "agents"), env.get("PYTHONPATH", "")]))
    for key in [key for key in env if key.startswith("ACCELBOARD_")]:
        del env[key]
    return env


def _run_until(args: list[str], common: list[str], *, done: Callable[[], bool], timeout: float) -> str:
    """Run the agent until ``done()`` (or ``timeout``), stop it with SIGTERM, then flush its spool;
    both must exit 0. Returns the run's stderr."""
    process = subprocess.Popen(
        _agent("run", *args, *common), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not done():
            time.sleep(0.25)
        time.sleep(1.0)
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=10)
    stderr = process.stderr.read() if process.stderr else ""
    flush = subprocess.run(_agent("flush", *common), env=_env(), capture_output=True, text=True, timeout=60)
    assert code == 0, stderr
    assert flush.returncode == 0, flush.stdout + flush.stderr
    return stderr


def _spool_state(path: Path) -> dict[str, object]:
    """What an agent's spool holds, for a failure's message."""
    db = sqlite3.connect(path)
    try:
        tables = ["samples", "outbox", "attribution", "attribution_open", "meta"]
        state: dict[str, object] = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
        state["meta_rows"] = db.execute("SELECT * FROM meta").fetchall()
        state["open"] = [row[0][:300] for row in db.execute("SELECT data FROM attribution_open")]
        return state
    finally:
        db.close()


@pytest.fixture
def ingest_token(team) -> str:
    return token_create(team=team, kind="ingest", name="agent")[1]


def test_it_stores_the_simulated_agents_samples_in_postgresql(live_server, ingest_token, tmp_path):
    spool = str(tmp_path / "spool.db")
    common = [
        "--server",
        live_server.url,
        "--token",
        ingest_token,
        "--spool",
        spool,
        "--hostname",
        "sim-node-01",
    ]
    _run_until(
        ["--simulate", "2", "--interval", "0.5", "--send-interval", "0.5"],
        common,
        done=lambda: TelemetrySample.objects.count() >= 8,
        timeout=30,
    )
    host = Host.objects.get(hostname="sim-node-01")
    assert host.simulated is True
    assert host.agent_version == "0.1.0"
    gpus = {gpu.uuid: gpu for gpu in Accelerator.objects.filter(host=host)}
    assert set(gpus) == {"GPU-SIM-sim-node-01-0", "GPU-SIM-sim-node-01-1"}
    assert {gpu.name for gpu in gpus.values()} == {"Simulated H100 80GB HBM3"}
    samples = list(TelemetrySample.objects.filter(host=host).order_by("time"))
    assert len(samples) >= 8
    per_gpu = {gpu.pk: [s for s in samples if s.accelerator_id == gpu.pk] for gpu in gpus.values()}
    assert all(len(rows) >= 4 for rows in per_gpu.values())
    # Each (GPU, time) once: resends are deduplicated by batch_id on the server.
    assert len({(s.accelerator_id, s.time) for s in samples}) == len(samples)
    assert all(s.power_w is not None and s.power_w > 0 and s.energy_mj for s in samples)
    assert all(s.ecc_errors == 0 and s.xid_errors == 0 for s in samples)  # the error counters arrive


def test_it_uploads_a_bench_run(live_server, ingest_token, tmp_path):
    # Runs name a known accelerator type; the simulated GPU's name matches the H100's.
    AcceleratorType.objects.get_or_create(
        name="H100 SXM 80GB", defaults={"slug": "h100-sxm-80gb", "match_names": ["H100 80GB HBM3"]}
    )
    common = ["--server", live_server.url, "--token", ingest_token, "--spool", str(tmp_path / "spool.db")]

    result = subprocess.run(
        _agent(
            "bench",
            "--simulate",
            "1",
            "--model",
            "Llama-3.1-8B",
            "--precision",
            "fp8",
            "--scenario",
            "offline",
            "--batch-size",
            "8",
            *common,
            "--",
            sys.executable,
            "-c",
            "import time; time.sleep(1.0)",
        ),  # fmt: skip
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert "run uploaded" in result.stderr
    run = BenchmarkRun.objects.get()
    values = {metric.name: metric.value for metric in run.metrics.all()}
    assert set(values) == {"energy_j", "power_avg_w", "wall_time_s", "memory_peak_bytes"}
    assert values["wall_time_s"] >= 1.0
    assert values["energy_j"] > 0 and values["power_avg_w"] > 0
    assert run.source_format == "agent-bench"
    assert run.accelerator_type is not None and run.accelerator_type.name == "H100 SXM 80GB"
    assert run.context["exit_status"] == 0
    assert run.context["energy_source"] == "counter"
    assert run.context["energy_disagreement_flag"] is False


def _vllm_metrics(requests: int, tokens: int) -> bytes:
    model = 'model_name="Llama-3.1-8B"'
    return (
        f'vllm:request_success_total{{finished_reason="stop",{model}}} {requests}.0\n'
        f"vllm:prompt_tokens_total{{{model}}} {tokens * 4}.0\n"
        f"vllm:generation_tokens_total{{{model}}} {tokens}.0\n"
        f'vllm:time_to_first_token_seconds_bucket{{le="0.1",{model}}} {requests // 2}.0\n'
        f'vllm:time_to_first_token_seconds_bucket{{le="0.5",{model}}} {requests}.0\n'
        f'vllm:time_to_first_token_seconds_bucket{{le="+Inf",{model}}} {requests}.0\n'
    ).encode()


def test_it_ships_scraped_vllm_metrics(live_server, ingest_token, tmp_path):
    scrapes = []

    class Metrics(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            # The engine served 100 requests (2,000 tokens) between the two scrapes.
            body = _vllm_metrics(20, 400) if not scrapes else _vllm_metrics(120, 2400)
            scrapes.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    engine = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    try:
        result = subprocess.run(
            _agent(
                "scrape",
                "--url",
                f"http://127.0.0.1:{engine.server_address[1]}/metrics",
                "--interval",
                "1",
                "--count",
                "1",
                "--variant",
                "fp8",
                "--gpus",
                "GPU-SIM-x-0",
                "--hostname",
                "serve-node-01",
                "--server",
                live_server.url,
                "--token",
                ingest_token,
                "--spool",
                str(tmp_path / "spool.db"),
            ),  # fmt: skip
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        engine.shutdown()
        engine.server_close()

    assert result.returncode == 0, result.stderr
    metric = InferenceMetric.objects.get()
    assert metric.host.hostname == "serve-node-01"
    assert metric.requests == 100 and metric.generated_tokens == 2000 and metric.prompt_tokens == 8000
    assert metric.accelerator_uuids == ["GPU-SIM-x-0"]
    # 50 of the 100 new requests under 0.1 s: the median sits at the bucket's edge.
    assert metric.ttft_p50_ms == 100.0
    assert metric.ttft_p99_ms is not None and 100.0 < metric.ttft_p99_ms <= 500.0


def test_the_simulated_agents_attribution_lands_beside_its_samples(live_server, ingest_token, tmp_path):
    """The real agent with attribution on (simulated GPUs: a serving pod, two pods time-slicing a
    GPU, a Slurm job, a bare process) through the real ingest: every interval is stored once, on
    this host's GPUs, within the samples' time, and no GPU is held more than whole at any moment."""
    from accelboard.fleet.models import GpuAttribution, Workload  # noqa: PLC0415

    common = ["--server", live_server.url, "--token", ingest_token, "--spool", str(tmp_path / "spool.db")]
    common += ["--hostname", "sim-attr-01"]
    stderr = _run_until(
        ["--simulate", "4", "--interval", "0.5", "--send-interval", "0.5"]
        + ["--attribution-nvml", "on", "--attribution-cgroups", "on", "--attribution-interval", "0.5"]
        + ["--attribution-cut-interval", "1"],
        common,
        done=lambda: GpuAttribution.objects.filter(host__hostname="sim-attr-01").count() >= 8,
        # This host's rows: counting all of them once ended the wait at once on another test's
        # leftover intervals (now dropped after each transactional test by the test plugin).
        timeout=60,
    )

    host = Host.objects.get(hostname="sim-attr-01")
    gpus = set(Accelerator.objects.filter(host=host).values_list("pk", flat=True))
    rows = list(GpuAttribution.objects.select_related("workload").order_by("start"))
    assert len(rows) >= 8, (stderr, _spool_state(tmp_path / "spool.db"))
    assert {row.accelerator_id for row in rows} <= gpus
    # The serving pod holds its GPU all the time; the others come and go with the load cycle.
    assert "pod" in {row.workload.kind for row in rows}
    assert all(row.workload.team_id == host.team_id for row in rows)
    assert Workload.objects.filter(kind="pod").exists()
    # Stored once: no (device, workload, start) twice, although batches were resent after SIGTERM.
    assert len({(r.accelerator_id, r.workload_id, r.start) for r in rows}) == len(rows)
    # The time-sliced GPU's holders never add up to more than the whole device.
    for gpu in gpus:
        held = [r for r in rows if r.accelerator_id == gpu]
        edges = sorted({r.start for r in held} | {r.end for r in held})
        for moment in edges:
            assert sum(r.share for r in held if r.start <= moment < r.end) <= 1 + 1e-6
    samples = TelemetrySample.objects.filter(host=host)
    first, last = samples.order_by("time").first(), samples.order_by("time").last()
    assert first is not None and last is not None
    # Within the samples' time, give or take the last observation the final flush closes (the
    # attribution thread observes on its own clock, which a loaded machine delays).
    slack = timedelta(seconds=10)
    outside = [r for r in rows if not (first.time - slack <= r.start < r.end <= last.time + slack)]
    assert not outside, (first.time, last.time, [(r.start, r.end) for r in outside])


def test_a_batch_whose_answer_was_lost_is_resent_and_answered_as_a_retry(live_server, ingest_token, tmp_path):
    """The server stores a batch but its answer never reaches the agent (a proxy drops it and
    answers 502): the agent resends the spooled body under the same batch_id, the server finds the
    claim's digest the same and answers ``duplicate`` (not the 409 of a reused key), and the agent
    deletes the row, rejecting nothing."""
    import json
    import urllib.error
    import urllib.request

    from accelboard.core.models import IngestBatch

    answers: list[tuple[str, int, bool]] = []  # telemetry: (batch_id, status the agent saw, duplicate)

    class LosingProxy(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in {"host", "content-length"}}
            request = urllib.request.Request(
                live_server.url + self.path, data=body, headers=headers, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    status, payload = answer.status, answer.read()
            except urllib.error.HTTPError as exc:
                status, payload = exc.code, exc.read()
            if self.path.endswith("/telemetry"):
                found = json.loads(payload) if status == 200 else {"batch_id": "", "duplicate": False}
                if status == 200 and not answers:
                    status, payload = 502, b"lost on the way"
                answers.append((found["batch_id"], status, found["duplicate"]))
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    def resent() -> bool:
        return bool(answers) and any(a == (answers[0][0], 200, True) for a in answers[1:])

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), LosingProxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    spool = tmp_path / "spool.db"
    common = [
        "--server", f"http://127.0.0.1:{proxy.server_address[1]}", "--token", ingest_token,
        "--spool", str(spool), "--hostname", "sim-lossy-01",
    ]  # fmt: skip
    try:
        _run_until(
            ["--simulate", "2", "--interval", "0.5", "--send-interval", "0.5"],
            common,
            done=resent,
            timeout=40,
        )
    finally:
        proxy.shutdown()
    state = _spool_state(spool)
    assert resent(), (answers, state)
    assert all(status == 200 for _, status, _ in answers[1:]), answers
    meta = dict(state["meta_rows"])  # type: ignore[call-overload]
    assert meta.get("rejected_batches", "0") in ("0", 0), state
    assert state["outbox"] == 0, state
    samples = list(TelemetrySample.objects.values_list("accelerator_id", "time"))
    assert len(samples) >= 4 and len(set(samples)) == len(samples)
    assert IngestBatch.objects.filter(client_id=answers[0][0]).count() == 1
