"""Fixtures for the agent's tests: a stdlib HTTP server standing in for accelboard, and a fake NVML.

``IngestServer`` records what the agent sends and dedupes by client id the way the real server
does (``batch_id`` / ``run_id``: a repeat answers ``"duplicate": true`` and stores nothing). It
can answer forced statuses, delay its answers, go away and come back on the same port.

``FakeNvml`` replaces the ``pynvml`` functions the agent calls, at the module boundary, with
GPUs that can lack signals, raise NVML errors, reset their energy counter, or not exist at all.
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any, Callable

import pynvml
import pytest

from accelboard_agent import sender

# -- the stand-in server ----------------------------------------------------------------------


class IngestServer:
    def __init__(self, token: str = "test-token") -> None:
        self.token = token
        self.requests: list[dict[str, Any]] = []
        self.accepted: dict[str, dict[str, Any]] = {}
        self.duplicates = 0
        self.forced: list[int] = []
        self.delay_s = 0.0
        self.metrics_text = ""
        self.received = threading.Event()
        self._lock = threading.Lock()
        self.port = _free_port()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def _reply(
                self, status: int, body: dict[str, Any] | str, content_type: str = "application/json"
            ) -> None:
                data = (json.dumps(body) if isinstance(body, dict) else body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/metrics":
                    self._reply(200, server.metrics_text, "text/plain; version=0.0.4")
                elif self.path == "/healthz":
                    self._reply(200, {"ok": True})
                else:
                    self._reply(404, {"error": {"code": "not_found", "message": self.path, "path": ""}})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    raw = gzip.decompress(raw)
                body = json.loads(raw)
                record = {"path": self.path, "headers": dict(self.headers), "body": body, "at": time.time()}
                with server._lock:
                    server.requests.append(record)
                    forced = server.forced.pop(0) if server.forced else None
                server.received.set()
                if forced is not None:
                    self._reply(
                        forced, {"error": {"code": "forced", "message": "forced", "path": "samples[0]"}}
                    )
                    return
                if self.headers.get("Authorization") != f"Bearer {server.token}":
                    self._reply(401, {"error": {"code": "auth", "message": "bad token", "path": ""}})
                    return
                client_id = body.get("batch_id") or body.get("run_id")
                with server._lock:
                    duplicate = client_id in server.accepted
                    if duplicate:
                        server.duplicates += 1
                    else:
                        server.accepted[client_id] = {"path": self.path, "body": body}
                if server.delay_s:
                    # The batch is stored; the answer is late (a kill now is "mid-batch").
                    time.sleep(server.delay_s)
                items = len(body.get("samples") or body.get("intervals") or [1])
                self._reply(200, {"batch_id": client_id, "accepted": items, "duplicate": duplicate})

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Go away: the port refuses connections until ``start`` again."""
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    # -- views of what was stored ---------------------------------------------------------------
    def stored(self, path: str) -> list[dict[str, Any]]:
        with self._lock:
            return [item["body"] for item in self.accepted.values() if item["path"] == path]

    def samples(self) -> list[dict[str, Any]]:
        return [sample for body in self.stored("/api/v1/telemetry") for sample in body["samples"]]

    def sample_keys(self) -> Counter:
        return Counter((sample["gpu"], sample["time"]) for sample in self.samples())

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.05)
        return predicate()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(autouse=True)
def _fresh_connections():
    """No test posts on a connection an earlier test's server kept open."""
    yield
    sender.CONNECTIONS.close()


@pytest.fixture
def server():
    ingest = IngestServer()
    ingest.start()
    yield ingest
    ingest.stop()


# -- the fake NVML ----------------------------------------------------------------------------


def nvml_error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)  # pynvml maps the code to its NVMLError_* subclass


class FakeGpu:
    """One GPU. ``errors`` maps a pynvml function name to the NVML error code it raises."""

    def __init__(
        self,
        index: int,
        *,
        power_mw: float = 300_000.0,
        energy: list[int] | None = None,
        errors: dict[str, int] | None = None,
        instant_ret: int = 0,
        mig: bool = False,
        mig_layout: dict[int, int] | None = None,
    ) -> None:
        self.index = index
        self.uuid = f"GPU-fake-{index:04d}-aaaa"
        self.name = "NVIDIA H100 80GB HBM3"
        self.power_mw = power_mw
        self.energy = list(energy) if energy is not None else None
        self.energy_mj = 5_000_000
        # The counter follows the power over real time (mW x s = mJ); a scale != 1 makes it lie.
        self.energy_scale = 1.0
        self.born = time.monotonic()
        self.errors = dict(errors or {})
        self.instant_ret = instant_ret
        self.mig = mig or bool(mig_layout)
        # MIG slot -> the instance's compute slices; None: one 1-slice instance in slot 0 of 2.
        self.mig_layout = mig_layout
        self.children: dict[int, FakeGpu] = {}
        self.slices = 1
        # NVML's compute processes (pid, usedGpuMemory) and per-process utilisation samples
        # (pid, smUtil), or the NVML error code the utilisation call raises.
        self.processes: list[Any] = [SimpleNamespace(pid=1, usedGpuMemory=1024)]
        self.process_util: list[tuple[int, int]] | int = pynvml.NVML_ERROR_NOT_SUPPORTED
        self.util_since: list[int] = []
        self.calls: Counter = Counter()
        # GPM (Hopper+): metric id -> the value NVML computes between two samples; None: no GPM.
        self.gpm: dict[int, float] | None = None
        self.gpm_samples = 0


class FakeNvml:
    def __init__(self, gpus: list[FakeGpu], *, init_error: int | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        # XID events waiting in the event set, as (gpu, xid code); ``xid`` queues one.
        self.events: list[tuple[FakeGpu, int]] = []
        self.registered: list[FakeGpu] = []
        self.gpm_buffers: list[Any] = []
        self.gpm_intervals: list[tuple[int, int]] = []

    def xid(self, gpu: FakeGpu, code: int) -> None:
        self.events.append((gpu, code))

    def _gpu(self, handle: Any) -> FakeGpu:
        return handle

    def _call(self, gpu: FakeGpu, name: str) -> None:
        gpu.calls[name] += 1
        if name in gpu.errors:
            raise nvml_error(gpu.errors[name])

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        fake = self

        def init() -> None:
            if fake.init_error is not None:
                raise nvml_error(fake.init_error)

        def energy(handle: FakeGpu) -> int:
            fake._call(handle, "nvmlDeviceGetTotalEnergyConsumption")
            if handle.energy is not None:
                return handle.energy.pop(0) if len(handle.energy) > 1 else handle.energy[0]
            elapsed = time.monotonic() - handle.born
            return int(handle.energy_mj + handle.power_mw * handle.energy_scale * elapsed)

        def field_values(handle: FakeGpu, fields: list[Any]) -> list[Any]:
            fake._call(handle, "nvmlDeviceGetFieldValues")
            return [
                SimpleNamespace(
                    nvmlReturn=handle.instant_ret,
                    valueType=1,
                    value=SimpleNamespace(uiVal=int(handle.power_mw)),
                )
                for _ in fields
            ]

        def simple(name: str, value: Callable[[FakeGpu], Any]) -> Callable[..., Any]:
            def call(handle: FakeGpu, *args: Any) -> Any:
                fake._call(handle, name)
                return value(handle)

            return call

        functions: dict[str, Callable[..., Any]] = {
            "nvmlInit": init,
            "nvmlShutdown": lambda: None,
            "nvmlSystemGetDriverVersion": lambda: "550.54.15",
            "nvmlSystemGetCudaDriverVersion": lambda: 12040,
            "nvmlDeviceGetCount": lambda: len(fake.gpus),
            "nvmlDeviceGetHandleByIndex": lambda index: fake.gpus[index],
            "nvmlDeviceGetUUID": lambda handle: handle.uuid,
            "nvmlDeviceGetName": simple("nvmlDeviceGetName", lambda g: g.name),
            "nvmlDeviceGetSerial": simple("nvmlDeviceGetSerial", lambda g: f"1652{g.index:08d}"),
            "nvmlDeviceGetMemoryInfo": simple(
                "nvmlDeviceGetMemoryInfo",
                lambda g: SimpleNamespace(total=85_520_809_984, used=61_203_283_968),
            ),
            "nvmlDeviceGetEnforcedPowerLimit": simple("nvmlDeviceGetEnforcedPowerLimit", lambda g: 700_000),
            "nvmlDeviceGetMigMode": simple("nvmlDeviceGetMigMode", lambda g: (1, 1) if g.mig else (0, 0)),
            "nvmlDeviceGetMaxMigDeviceCount": simple(
                "nvmlDeviceGetMaxMigDeviceCount", lambda g: 7 if g.mig_layout else 2
            ),
            "nvmlDeviceGetAttributes": simple(
                "nvmlDeviceGetAttributes", lambda g: SimpleNamespace(gpuInstanceSliceCount=g.slices)
            ),
            "nvmlDeviceGetTotalEnergyConsumption": energy,
            "nvmlDeviceGetFieldValues": field_values,
            "nvmlDeviceGetPowerUsage": simple("nvmlDeviceGetPowerUsage", lambda g: int(g.power_mw)),
            "nvmlDeviceGetUtilizationRates": simple(
                "nvmlDeviceGetUtilizationRates", lambda g: SimpleNamespace(gpu=97, memory=41)
            ),
            "nvmlDeviceGetClockInfo": simple("nvmlDeviceGetClockInfo", lambda g: 1980),
            "nvmlDeviceGetTemperature": simple("nvmlDeviceGetTemperature", lambda g: 61),
            "nvmlDeviceGetCurrentClocksEventReasons": simple(
                "nvmlDeviceGetCurrentClocksEventReasons", lambda g: 4
            ),
            "nvmlDeviceGetCurrentClocksThrottleReasons": simple(
                "nvmlDeviceGetCurrentClocksThrottleReasons", lambda g: 8
            ),
            "nvmlDeviceGetTotalEccErrors": simple("nvmlDeviceGetTotalEccErrors", lambda g: 0),
            "nvmlDeviceGetPcieThroughput": simple("nvmlDeviceGetPcieThroughput", lambda g: 1234),
            "nvmlDeviceGetNvLinkState": simple("nvmlDeviceGetNvLinkState", lambda g: 1),
            "nvmlDeviceGetComputeRunningProcesses": simple(
                "nvmlDeviceGetComputeRunningProcesses", lambda g: list(g.processes)
            ),
            "nvmlDeviceGetRetiredPages": simple("nvmlDeviceGetRetiredPages", lambda g: []),
            "nvmlDeviceGetRemappedRows": simple("nvmlDeviceGetRemappedRows", lambda g: (0, 0, 0, 0)),
        }

        def mig_handle(handle: FakeGpu, slot: int) -> Any:
            layout = handle.mig_layout if handle.mig_layout is not None else {0: 1}
            if slot not in layout:
                raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
            if slot not in handle.children:
                child = FakeGpu(100 + handle.index)
                child.uuid = f"MIG-fake-{handle.index}-{slot}"
                child.slices = layout[slot]
                child.processes = []
                handle.children[slot] = child
            return handle.children[slot]

        def process_utilization(handle: FakeGpu, since: int) -> list[Any]:
            fake._call(handle, "nvmlDeviceGetProcessUtilization")
            handle.util_since.append(since)
            if isinstance(handle.process_util, int):
                raise nvml_error(handle.process_util)
            if not handle.process_util:
                raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
            stamp = max(since, 1_000_000) + 1
            return [
                SimpleNamespace(pid=pid, timeStamp=stamp, smUtil=sm, memUtil=0, encUtil=0, decUtil=0)
                for pid, sm in handle.process_util
            ]

        functions["nvmlDeviceGetProcessUtilization"] = process_utilization

        functions["nvmlDeviceGetMigDeviceHandleByIndex"] = mig_handle

        def register_events(handle: FakeGpu, event_types: int, event_set: Any) -> None:
            fake._call(handle, "nvmlDeviceRegisterEvents")
            assert event_types == pynvml.nvmlEventTypeXidCriticalError
            fake.registered.append(handle)

        def event_wait(event_set: Any, timeout_ms: int) -> Any:
            assert timeout_ms == 0, "the sampler must never block on events"
            while fake.events:
                gpu, code = fake.events.pop(0)
                if gpu in fake.registered:
                    return SimpleNamespace(
                        device=gpu, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=code
                    )
            raise nvml_error(pynvml.NVML_ERROR_TIMEOUT)

        # GPM: samples are numbered per GPU; a metrics request must give an older then a newer one.
        def gpm_support(handle: FakeGpu) -> Any:
            fake._call(handle, "nvmlGpmQueryDeviceSupport")
            return SimpleNamespace(isSupportedDevice=int(handle.gpm is not None))

        def gpm_alloc() -> Any:
            fake.gpm_buffers.append(SimpleNamespace(gpu=None, number=0, freed=False))
            return fake.gpm_buffers[-1]

        def gpm_sample(handle: FakeGpu, buffer: Any) -> Any:
            fake._call(handle, "nvmlGpmSampleGet")
            handle.gpm_samples += 1
            buffer.gpu, buffer.number = handle, handle.gpm_samples
            return buffer

        def gpm_metrics(request: Any) -> Any:
            first, second = request.sample1, request.sample2
            assert first.gpu is second.gpu and first.number < second.number
            fake._call(second.gpu, "nvmlGpmMetricsGet")
            fake.gpm_intervals.append((first.number, second.number))
            for item in request.metrics[: request.numMetrics]:
                value = (second.gpu.gpm or {}).get(item.metricId)
                item.nvmlReturn = (
                    pynvml.NVML_SUCCESS if value is not None else pynvml.NVML_ERROR_NOT_SUPPORTED
                )
                item.value = value if value is not None else 0.0
            return request

        def gpm_free(buffer: Any) -> None:
            buffer.freed = True

        class MetricsGet:
            def __init__(self) -> None:
                self.version = self.numMetrics = 0
                self.sample1 = self.sample2 = None
                self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(16)]

        functions["nvmlGpmQueryDeviceSupport"] = gpm_support
        functions["nvmlGpmSampleAlloc"] = gpm_alloc
        functions["nvmlGpmSampleGet"] = gpm_sample
        functions["nvmlGpmMetricsGet"] = gpm_metrics
        functions["nvmlGpmSampleFree"] = gpm_free
        functions["c_nvmlGpmMetricsGet_t"] = MetricsGet
        functions["nvmlEventSetCreate"] = lambda: object()
        functions["nvmlDeviceRegisterEvents"] = register_events
        functions["nvmlEventSetWait_v2"] = event_wait
        functions["nvmlEventSetFree"] = lambda event_set: None
        for name, function in functions.items():
            monkeypatch.setattr(pynvml, name, function)


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch):
    def make(gpus: list[FakeGpu], **kwargs: Any) -> FakeNvml:
        fake = FakeNvml(gpus, **kwargs)
        fake.install(monkeypatch)
        return fake

    return make


# -- a fake /proc -----------------------------------------------------------------------------


def fake_process(
    procfs: Any, pid: int, *, cgroup: str, comm: str = "python3", start: int = 123456, hostname: str = ""
) -> None:
    """``<procfs>/<pid>/{cgroup,comm,stat,environ}`` as the kernel writes them."""
    folder = procfs / str(pid)
    folder.mkdir(parents=True)
    (folder / "cgroup").write_text(cgroup)
    (folder / "comm").write_text(comm + "\n")
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
    # stime cutime cstime priority nice threads itrealvalue starttime ...
    (folder / "stat").write_text(
        f"{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 12 0 {start} 1000 2000\n"
    )
    environ = [b"PATH=/usr/bin"] + ([f"HOSTNAME={hostname}".encode()] if hostname else [])
    (folder / "environ").write_bytes(b"\0".join(environ) + b"\0")
