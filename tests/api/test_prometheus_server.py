"""A real Prometheus (Debian's ``prometheus``) scrapes a dcgm-exporter page and remote-writes to a
real accelboard server; the stored telemetry rows equal what the page exposed, nothing lost and
nothing twice although the server is first down and then loses its answers.

The page is recorded dcgm-exporter exposition (this repository's own text, written after
dcgm-exporter's default counters and labels: two whole GPUs and an A100 split into two MIG
instances, pod labels included), served by a loopback HTTP server that advances the values at
each scrape. Between Prometheus and accelboard a loopback proxy answers 503 without forwarding
(accelboard down), then forwards and still answers 503 (the reply lost: Prometheus sends the same
request again), then passes requests through. A second run cuts each scrape over three requests
(``max_samples_per_send: 23``; a scrape is 69 samples, 64 of the page and 5 of Prometheus, so each
cut falls at the same place of every scrape: inside the fourth GPU's stored fields, never between
the framebuffer's parts): the parts of each GPU-instant merge into one row.

Prometheus missing: skipped, unless CI (``CI=true`` or ``ACCELBOARD_REQUIRE_PROMETHEUS=1``), where
it is a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from accelboard.api.services import token_create
from accelboard.fleet.models import (
    Accelerator,
    GpuAttribution,
    PrometheusUnknownMetric,
    TelemetryRawRange,
    TelemetrySample,
    Workload,
)
from accelboard.fleet.remote_write import MIB

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
HOST = "dcgm-node-01"
# (labels after gpu/UUID: the device's own, the accelerator's UUID as accelboard stores it)
DEVICES = [
    ('gpu="0",UUID="GPU-3b1e0a4c-1d2e-4f50-8a6b-0c1d2e3f4a50",pci_bus_id="00000000:18:00.0",device="nvidia0",'
     'modelName="NVIDIA H100 80GB HBM3"', "GPU-3b1e0a4c-1d2e-4f50-8a6b-0c1d2e3f4a50",
     'container="vllm",namespace="serving",pod="llama-8b-7f9c"'),
    ('gpu="1",UUID="GPU-3b1e0a4c-1d2e-4f50-8a6b-0c1d2e3f4a51",pci_bus_id="00000000:2A:00.0",device="nvidia1",'
     'modelName="NVIDIA H100 80GB HBM3"', "GPU-3b1e0a4c-1d2e-4f50-8a6b-0c1d2e3f4a51",
     'container="",namespace="",pod=""'),
    ('gpu="2",UUID="GPU-9d8c7b6a-5f4e-4d3c-8b2a-1a2b3c4d5e6f",pci_bus_id="00000000:3A:00.0",device="nvidia2",'
     'modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1"',
     "GPU-9d8c7b6a-5f4e-4d3c-8b2a-1a2b3c4d5e6f/gi1", 'container="trainer",namespace="research",pod="ft-0"'),
    ('gpu="2",UUID="GPU-9d8c7b6a-5f4e-4d3c-8b2a-1a2b3c4d5e6f",pci_bus_id="00000000:3A:00.0",device="nvidia2",'
     'modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2"',
     "GPU-9d8c7b6a-5f4e-4d3c-8b2a-1a2b3c4d5e6f/gi2", 'container="",namespace="",pod=""'),
]  # fmt: skip
# (metric, type, help, value of device d at step k); the first block is what accelboard stores.
METRICS = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda d, k: 1400 + k),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", lambda d, k: 2619),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda d, k: 40 + d + k % 20),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda d, k: 100.5 + 10 * d + k),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
     lambda d, k: 1_234_567_890 + 1_000_000 * d + 15_000 * k),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda d, k: (7 * k + d) % 100),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", lambda d, k: k % 50),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", lambda d, k: 80_000 - k),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", lambda d, k: 1_000 + k),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", lambda d, k: 527),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask).",
     lambda d, k: 4 * (k % 2)),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", lambda d, k: d + k // 3),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors.",
     lambda d, k: d),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors.",
     lambda d, k: 0),
    # Profiling counters: ratios, stored in % (eighths: exact in float4 once x 100).
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
     lambda d, k: 0.5 + (k % 4) / 8),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned.",
     lambda d, k: 0.5 + (k % 3) / 8),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM.",
     lambda d, k: d / 8),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.",
     lambda d, k: 0.25),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active.",
     lambda d, k: (k % 8) / 8),
    # Not stored as telemetry (counted as unknown): the last XID's code is not a count.
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", lambda d, k: 0),
]  # fmt: skip


def expected(d: int, k: int) -> dict[str, Any]:
    """The row accelboard must store for device ``d`` at step ``k``."""
    value = {name: fn(d, k) for name, _, _, fn in METRICS}
    return {
        "sm_clock_mhz": value["DCGM_FI_DEV_SM_CLOCK"],
        "mem_clock_mhz": value["DCGM_FI_DEV_MEM_CLOCK"],
        "temperature_c": value["DCGM_FI_DEV_GPU_TEMP"],
        "power_w": value["DCGM_FI_DEV_POWER_USAGE"],
        "energy_mj": value["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"],
        "gpu_util": value["DCGM_FI_DEV_GPU_UTIL"],
        "mem_util": value["DCGM_FI_DEV_MEM_COPY_UTIL"],
        "mem_used_bytes": value["DCGM_FI_DEV_FB_USED"] * MIB,
        "mem_total_bytes": (value["DCGM_FI_DEV_FB_USED"] + value["DCGM_FI_DEV_FB_FREE"] + 527) * MIB,
        "mem_free_bytes": value["DCGM_FI_DEV_FB_FREE"] * MIB,
        "mem_reserved_bytes": 527 * MIB,
        "gr_engine_active": value["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] * 100,
        "sm_active": value["DCGM_FI_PROF_SM_ACTIVE"] * 100,
        "sm_occupancy": value["DCGM_FI_PROF_SM_OCCUPANCY"] * 100,
        "tensor_active": value["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] * 100,
        "dram_active": value["DCGM_FI_PROF_DRAM_ACTIVE"] * 100,
        "pcie_replay_errors": value["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"],
        "remapped_rows_correctable": value["DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"],
        "remapped_rows_uncorrectable": value["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"],
        "throttle_reasons": value["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"],
        "ecc_errors": None,
        "xid_errors": None,
    }


def exposition(k: int) -> str:
    lines = []
    for name, kind, help_text, fn in METRICS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for d, (labels, _uuid, pod) in enumerate(DEVICES):
            lines.append(
                f'{name}{{{labels},Hostname="{HOST}",DCGM_FI_DRIVER_VERSION="550.54.15",{pod}}} {fn(d, k)}'
            )
    return "\n".join(lines) + "\n"


class Exporter:
    """An exporter's page (``page(k)``: its text at step ``k``; dcgm-exporter's by default): each GET
    serves the next step; ``frozen`` answers 503 (no samples)."""

    def __init__(self, page: Callable[[int], str] | None = None) -> None:
        text = page or exposition
        self.served: list[int] = []
        self.frozen = False
        self.lock = threading.Lock()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                with exporter.lock:
                    if exporter.frozen:
                        self.send_error(503)
                        return
                    k = len(exporter.served)
                    body = text(k).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    exporter.served.append(k)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]


class FlakyProxy:
    """Between Prometheus and accelboard: ``down`` requests answered 503 unforwarded, then ``lost``
    requests forwarded with the answer replaced by a 503, then a plain pass-through."""

    def __init__(self, target: str, *, down: int, lost: int) -> None:
        self.plan = ["down"] * down + ["lost"] * lost
        self.log: list[tuple[str, int]] = []
        self.duplicates = 0  # answers from accelboard saying the request was stored before
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                step = proxy.plan.pop(0) if proxy.plan else "pass"
                status = 503
                if step != "down":
                    request = urllib.request.Request(target + self.path, data=body, method="POST")
                    for header in ("Authorization", "Content-Encoding", "Content-Type",
                                   "X-Prometheus-Remote-Write-Version"):  # fmt: skip
                        if self.headers.get(header):
                            request.add_header(header, self.headers[header])
                    try:
                        with urllib.request.urlopen(request, timeout=30) as response:
                            status = response.status
                            proxy.duplicates += b'"duplicate":true' in response.read().replace(b" ", b"")
                    except urllib.error.HTTPError as exc:
                        status = exc.code
                    if step == "lost":
                        status = 503
                proxy.log.append((step, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def prometheus_binary() -> str:
    if not os.access(PROMETHEUS, os.X_OK):
        message = "needs Prometheus: apt-get install prometheus"
        if os.environ.get("CI") == "true" or os.environ.get("ACCELBOARD_REQUIRE_PROMETHEUS") == "1":
            pytest.fail(f"in CI, {message}", pytrace=False)
        pytest.skip(message)
    return PROMETHEUS


def _start(binary: str, config: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    (tmp_path / "prometheus.yml").write_text(config)
    return subprocess.Popen(
        [binary, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{_free_port()}", "--log.level=warn"],
        stdout=(tmp_path / "prometheus.log").open("wb"),
        stderr=subprocess.STDOUT,
    )  # fmt: skip


def _stop(process: subprocess.Popen[bytes], *servers: Any) -> None:
    """Stop Prometheus (killed after 20 s) and the loopback servers it talked to."""
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for server in servers:
        server.server.shutdown()


@pytest.fixture
def prometheus(
    prometheus_binary: str,
    live_server: Any,
    team: Any,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    settings: Any,
) -> Iterator[dict[str, Any]]:
    """Prometheus scraping ``Exporter`` and writing through ``FlakyProxy``; ``request.param``:
    ``max_samples_per_send`` and the proxy's ``down`` and ``lost`` (2000, 3, 3 unless given)."""
    settings.PROMETHEUS_SCRAPE_INTERVAL_S = 1  # the scrape_interval below
    plan = {"max_samples_per_send": 2000, "down": 3, "lost": 3, **getattr(request, "param", {})}
    token = token_create(team=team, kind="ingest", name="prometheus")[1]
    exporter = Exporter()
    proxy = FlakyProxy(live_server.url, down=plan["down"], lost=plan["lost"])
    config = f"""
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: dcgm
    static_configs:
      - targets: ["127.0.0.1:{exporter.port}"]
remote_write:
  - url: {proxy.url}/api/v1/prometheus/write
    authorization:
      credentials: {token}
    metadata_config:
      send: false
    queue_config:
      min_shards: 1
      max_shards: 1
      max_samples_per_send: {plan["max_samples_per_send"]}
      batch_send_deadline: 300ms
      min_backoff: 100ms
      max_backoff: 500ms
"""
    process = _start(prometheus_binary, config, tmp_path)
    try:
        yield {"exporter": exporter, "proxy": proxy, "process": process, "log": tmp_path / "prometheus.log"}
    finally:
        _stop(process, exporter, proxy)


def _stored() -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {}
    fields = [*expected(0, 0), "time"]
    for row in TelemetrySample.objects.order_by("time").values("accelerator__uuid", *fields):
        rows.setdefault(row.pop("accelerator__uuid"), []).append(row)
    return rows


def _until_served(prometheus: dict[str, Any], *, passes: int) -> list[int]:
    """Wait for 8 scrapes and ``passes`` requests through, freeze the page, wait until every step
    served is stored (and 2 s more: stale markers, late resends); return the steps served."""
    exporter, proxy = prometheus["exporter"], prometheus["proxy"]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        passed = sum(1 for step, status in proxy.log if step == "pass" and status == 200)
        if len(exporter.served) >= 8 and passed >= passes:
            break
        assert prometheus["process"].poll() is None, prometheus["log"].read_text()
        time.sleep(0.5)
    with exporter.lock:
        exporter.frozen = True  # the page goes away: Prometheus marks the series stale
    served = list(exporter.served)
    while time.monotonic() < deadline:
        stored = _stored()
        if all(len(stored.get(uuid, [])) >= len(served) for _, uuid, _ in DEVICES) and all(
            row["energy_mj"] is not None and row["sm_clock_mhz"] is not None
            for rows in stored.values()
            for row in rows
        ):
            break
        time.sleep(0.5)
    time.sleep(2)
    return served


def _assert_stored_as_exposed(served: list[int], log: str) -> None:
    """One row per GPU-instant, each equal to what the page exposed at its step."""
    stored = _stored()
    for d, (_, uuid, _) in enumerate(DEVICES):
        rows = stored.get(uuid, [])
        steps = [row["sm_clock_mhz"] - 1400 for row in rows]
        assert steps == served, (uuid, steps, served, log)
        for k, row in zip(served, rows, strict=True):
            row.pop("time")
            assert row == expected(d, k), (uuid, k)
        times = [
            r for r in TelemetrySample.objects.filter(accelerator__uuid=uuid).values_list("time", flat=True)
        ]
        assert len(set(times)) == len(times)


def _assert_pods_held() -> None:
    """Each device's stored intervals are the pod on its page, none overlapping, and together
    cover from each instant stored to the next (at most the 1 s scrape interval; 1 s after the
    last): what one request with every instant would have said, in one row per unbroken holding.
    Idle devices hold nothing."""
    uids = dict(Workload.objects.values_list("id", "uid"))
    for _, uuid, pod in DEVICES:
        labels = dict(part.replace('"', "").split("=") for part in pod.split(","))
        times = [
            round(t.timestamp() * 1000)
            for t in TelemetrySample.objects.filter(accelerator__uuid=uuid).order_by("time").values_list("time", flat=True)
        ]  # fmt: skip
        rows = list(
            GpuAttribution.objects.filter(accelerator__uuid=uuid)
            .order_by("start")
            .values_list("start", "end", "workload_id", "share", "basis")
        )
        if not labels["pod"]:
            assert rows == [], uuid
            continue
        assert {(uids[w], share, basis) for _, _, w, share, basis in rows} == {
            (f"{labels['namespace']}/{labels['pod']}", 1.0, "exclusive")
        }
        spans = [(round(s.timestamp() * 1000), round(e.timestamp() * 1000)) for s, e, *_ in rows]
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), (uuid, spans)
        expected = [
            (t, t + min(1000, later - t))
            for t, later in zip(times, [*times[1:], times[-1] + 1000], strict=True)
        ]
        assert _union(spans) == _union(expected), (uuid, spans, times)
        # Each request's instants extend the stored row they continue: one row per holding.
        assert len(spans) == len(_union(spans)), (uuid, spans)
    workload = Workload.objects.get(uid="serving/llama-8b-7f9c")
    assert (workload.kind, workload.namespace, workload.name, workload.container) == (
        "pod", "serving", "llama-8b-7f9c", "vllm"
    )  # fmt: skip


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def test_prometheus_remote_writes_what_dcgm_exporter_exposed_once_through_outages(
    prometheus: dict[str, Any],
) -> None:
    proxy = prometheus["proxy"]
    # Every step served reaches the database, each once, whatever the outages did.
    served = _until_served(prometheus, passes=2)
    assert [step for step, _ in proxy.log[:6]] == ["down"] * 3 + ["lost"] * 3, proxy.log
    # The lost answers made Prometheus send stored requests again; accelboard said so, stored nothing.
    assert proxy.duplicates >= 1, proxy.log
    _assert_stored_as_exposed(served, prometheus["log"].read_text())
    mig = Accelerator.objects.get(uuid="GPU-9d8c7b6a-5f4e-4d3c-8b2a-1a2b3c4d5e6f/gi1")
    assert mig.parent_uuid == "GPU-9d8c7b6a-5f4e-4d3c-8b2a-1a2b3c4d5e6f"
    assert mig.host.hostname == HOST
    whole = Accelerator.objects.get(uuid="GPU-3b1e0a4c-1d2e-4f50-8a6b-0c1d2e3f4a50")
    assert (whole.index, whole.host.hostname) == (0, HOST)
    # Of the exporter's series only the XID code is left unknown (beside Prometheus's own).
    unknown = set(PrometheusUnknownMetric.objects.values_list("name", flat=True))
    assert {name for name in unknown if name.startswith("DCGM_")} == {"DCGM_FI_DEV_XID_ERRORS"}, unknown
    _assert_pods_held()


@pytest.mark.parametrize("prometheus", [{"max_samples_per_send": 23, "down": 0, "lost": 0}], indirect=True)
def test_prometheus_scrapes_split_over_two_requests_are_stored_one_row_per_gpu_instant(
    prometheus: dict[str, Any],
) -> None:
    served = _until_served(prometheus, passes=16)
    proxy = prometheus["proxy"]
    # More requests than scrapes, and GPU-instants were merged (their range is marked raw-only).
    assert len(proxy.log) > len(served) and all(status == 200 for _, status in proxy.log), proxy.log
    assert TelemetryRawRange.objects.exists()
    _assert_stored_as_exposed(served, prometheus["log"].read_text())
    _assert_pods_held()
