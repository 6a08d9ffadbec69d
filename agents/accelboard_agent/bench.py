"""``accelboard-agent bench -- CMD``: run a benchmark command and upload it as a run.

1. The GPUs measured are ``--gpus`` (or the ``gpus`` config), else ``CUDA_VISIBLE_DEVICES``
   (indices or UUIDs, unique UUID prefixes, MIG UUIDs mapped to their physical GPU), else all.
2. The energy counter is read before and after; while the command runs a thread reads instant
   power, the counter and memory used at 10 Hz. Counter energy sums the non-negative deltas of
   those readings (a counter that went down, a driver reload, starts a new segment); integrated
   energy is the trapezoid of instant power. Both are kept in the run's ``context``; where they
   disagree by more than 5% the run is flagged. ``energy_j`` is the counter's figure unless the
   counter is missing, or reads 0 J while power was drawn: then the integrated figure.
3. The run (metrics ``energy_j``, ``power_avg_w``, ``wall_time_s``, ``memory_peak_bytes``) is
   written to the spool first, then sent; if the server is away it stays in the spool for the
   daemon or ``flush``. The exit status is the command's.

Results files: ``RESULT_IMPORTERS`` is the hook for parsing a tool's output (MLPerf, vLLM
benchmark JSON...) into metrics. This version has none, and ``--results`` is refused with a
clear error rather than a guess; a later version registers ``format -> parse(path) -> metrics``.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, Callable

from .gpus import Backend, Device

POWER_HZ = 10.0
DISAGREEMENT_LIMIT = 0.05

# format name -> function(path) -> list of {"name", "value", "unit"} metrics. Empty in this version.
RESULT_IMPORTERS: dict[str, Callable[[str], list[dict[str, Any]]]] = {}


class SelectionError(Exception):
    """A requested GPU does not exist on this host; the message names it."""


def gpus_select(
    devices: Sequence[Device], wanted: Sequence[str], *, mig: dict[str, list[dict[str, Any]]] | None = None
) -> list[Device]:
    """The devices named by indices, UUIDs or unique UUID prefixes (as CUDA accepts them)."""
    if not wanted:
        return list(devices)
    parents = {item["uuid"]: parent for parent, items in (mig or {}).items() for item in items}
    chosen: list[Device] = []
    for item in wanted:
        item = item.strip()
        if item.isdigit():
            matches = [d for d in devices if d.index == int(item)]
        elif item.startswith("MIG-"):
            parent = next((p for m, p in parents.items() if m.startswith(item)), None)
            matches = [d for d in devices if d.uuid == parent]
        else:
            matches = [d for d in devices if d.uuid.startswith(item)]
        if len(matches) != 1:
            raise SelectionError(f"gpus: {item!r} matches {len(matches)} GPUs on this host")
        if matches[0] not in chosen:
            chosen.append(matches[0])
    return chosen


def counter_energy_j(readings: Sequence[int | None]) -> tuple[float | None, int]:
    """Energy (J) from successive counter readings (mJ), and how many resets were seen."""
    values = [value for value in readings if value is not None]
    if len(values) < 2:
        return None, 0
    total_mj = 0
    resets = 0
    for before, after in zip(values, values[1:]):
        if after >= before:
            total_mj += after - before
        else:
            resets += 1
    return total_mj / 1000.0, resets


def integrated_energy_j(points: Sequence[tuple[float, float | None]]) -> float | None:
    """Trapezoid integral (J) of (monotonic seconds, W) points; None without two readings."""
    clean = [(t, p) for t, p in points if p is not None]
    if len(clean) < 2:
        return None
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(clean, clean[1:]))


def energy_choose(counter_j: float | None, integrated_j: float | None) -> dict[str, Any]:
    """Pick the reported energy and describe how counter and integrated power compare."""
    result: dict[str, Any] = {"energy_counter_j": counter_j, "energy_integrated_j": integrated_j}
    if counter_j is not None and not (counter_j == 0 and integrated_j):
        result["energy_j"], result["energy_source"] = counter_j, "counter"
    elif integrated_j is not None:
        result["energy_j"], result["energy_source"] = integrated_j, "integrated_power"
    else:
        result["energy_j"], result["energy_source"] = None, "none"
    if counter_j is not None and integrated_j is not None and max(counter_j, integrated_j) > 0:
        disagreement = abs(counter_j - integrated_j) / max(counter_j, integrated_j)
        result["energy_disagreement"] = round(disagreement, 4)
        result["energy_disagreement_flag"] = disagreement > DISAGREEMENT_LIMIT
    return result


class PowerSampler(threading.Thread):
    """Reads instant power, the energy counter and memory used of some GPUs at ``hz``."""

    def __init__(self, backend: Backend, devices: Sequence[Device], hz: float = POWER_HZ) -> None:
        super().__init__(name="bench-power", daemon=True)
        self.backend = backend
        self.devices = list(devices)
        self.period = 1.0 / hz
        self.stop = threading.Event()
        self.power: dict[str, list[tuple[float, float | None]]] = {d.uuid: [] for d in self.devices}
        self.energy: dict[str, list[int | None]] = {d.uuid: [] for d in self.devices}
        self.memory_peak: int | None = None

    def read(self) -> None:
        total_memory: int | None = None
        for device in self.devices:
            now = time.monotonic()
            self.power[device.uuid].append((now, self.backend.power_instant_w(device)))
            self.energy[device.uuid].append(self.backend.energy_mj(device))
            used = self.backend.memory_used_bytes(device)
            if used is not None:
                total_memory = (total_memory or 0) + used
        if total_memory is not None and (self.memory_peak is None or total_memory > self.memory_peak):
            self.memory_peak = total_memory

    def run(self) -> None:
        deadline = time.monotonic()
        while not self.stop.is_set():
            self.read()
            deadline += self.period
            self.stop.wait(max(0.0, deadline - time.monotonic()))


def _git(cwd: str, *args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _ci_url(environ: dict[str, str]) -> str:
    if environ.get("GITHUB_RUN_ID") and environ.get("GITHUB_REPOSITORY"):
        server = environ.get("GITHUB_SERVER_URL", "https://github.com")
        return f"{server}/{environ['GITHUB_REPOSITORY']}/actions/runs/{environ['GITHUB_RUN_ID']}"
    return environ.get("CI_JOB_URL") or environ.get("BUILD_URL") or ""


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def bench_execute(
    *,
    command: Sequence[str],
    backend: Backend | None,
    devices: Sequence[Device],
    cwd: str | None = None,
    hz: float = POWER_HZ,
) -> dict[str, Any]:
    """Run the command under measurement; return the raw measurements (no network)."""
    cwd = cwd or os.getcwd()
    sampler = PowerSampler(backend, devices, hz) if backend and devices else None
    if sampler:
        sampler.read()
        sampler.start()
    started = time.time()
    t0 = time.monotonic()
    try:
        process = subprocess.Popen(list(command), cwd=cwd)
    except OSError as exc:
        if sampler:
            sampler.stop.set()
        raise SelectionError(f"command: cannot run {command[0]!r}: {exc.strerror}") from None

    def forward(signum: int, frame: Any) -> None:
        process.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        exit_status = process.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    wall = time.monotonic() - t0
    finished = time.time()
    if sampler:
        sampler.stop.set()
        sampler.join()
        sampler.read()
    measured: dict[str, Any] = {
        "exit_status": exit_status,
        "wall_time_s": wall,
        "started_at": started,
        "finished_at": finished,
        "host_rss_peak_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
        "cwd": cwd,
    }
    if sampler:
        counter_total: float | None = 0.0
        integrated_total: float | None = 0.0
        resets = 0
        for device in devices:
            counter, device_resets = counter_energy_j(sampler.energy[device.uuid])
            resets += device_resets
            integrated = integrated_energy_j(sampler.power[device.uuid])
            counter_total = None if counter is None or counter_total is None else counter_total + counter
            integrated_total = (
                None if integrated is None or integrated_total is None else integrated_total + integrated
            )
        measured.update(energy_choose(counter_total, integrated_total))
        measured["energy_counter_resets"] = resets
        measured["power_samples"] = sum(len(points) for points in sampler.power.values())
        measured["gpu_memory_peak_bytes"] = sampler.memory_peak
    return measured


def run_payload(
    *,
    measured: dict[str, Any],
    command: Sequence[str],
    devices: Sequence[Device],
    backend: Backend | None,
    hostname: str,
    model: str,
    variant: str,
    precision: str,
    scenario: str,
    batch_size: int | None,
    environ: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The POST /api/v1/runs document for one measured command."""
    environ = dict(os.environ if environ is None else environ)
    cwd = measured["cwd"]
    wall = measured["wall_time_s"]
    metrics: list[dict[str, Any]] = [{"name": "wall_time_s", "value": round(wall, 6), "unit": "s"}]
    context: dict[str, Any] = {
        "exit_status": measured["exit_status"],
        "command": list(command),
        "host_rss_peak_bytes": measured["host_rss_peak_bytes"],
    }
    energy = measured.get("energy_j")
    if energy is not None:
        metrics.append({"name": "energy_j", "value": round(energy, 3), "unit": "J"})
        integrated = measured.get("energy_integrated_j")
        average_basis = integrated if integrated is not None else energy
        if wall > 0:
            metrics.append({"name": "power_avg_w", "value": round(average_basis / wall, 3), "unit": "W"})
    for key in (
        "energy_source",
        "energy_counter_j",
        "energy_integrated_j",
        "energy_disagreement",
        "energy_disagreement_flag",
        "energy_counter_resets",
        "power_samples",
    ):
        if key in measured:
            context[key] = measured[key]
    if measured.get("gpu_memory_peak_bytes") is not None:
        metrics.append(
            {"name": "memory_peak_bytes", "value": measured["gpu_memory_peak_bytes"], "unit": "bytes"}
        )
        context["memory_peak_source"] = "gpu"
    else:
        metrics.append(
            {"name": "memory_peak_bytes", "value": measured["host_rss_peak_bytes"], "unit": "bytes"}
        )
        context["memory_peak_source"] = "host_rss"
    if not devices:
        context["no_gpu"] = True
    if _git(cwd, "status", "--porcelain"):
        context["git_dirty"] = True
    hardware: dict[str, Any] = {
        "host": hostname,
        "gpu_uuids": [device.uuid for device in devices],
        "driver_version": backend.driver_version if backend else "",
        "cuda_version": backend.cuda_version if backend else "",
    }
    if devices:  # a CPU-only run names no accelerator (the API counts from 1)
        hardware["accelerator"] = devices[0].name
        hardware["count"] = len(devices)
    workload: dict[str, Any] = {"options": {}}
    if scenario:
        workload["scenario"] = scenario
    if batch_size is not None:
        workload["batch_size"] = batch_size
    return {
        "run_id": str(uuid.uuid4()),
        "model": model or os.path.basename(command[0]),
        "variant": {
            "name": variant or precision or "default",
            "precision": precision,
            "quantization_method": "",
        },
        "workload": workload,
        "hardware": hardware,
        "provenance": {
            "git_commit": _git(cwd, "rev-parse", "HEAD"),
            "branch": _git(cwd, "rev-parse", "--abbrev-ref", "HEAD"),
            "ci_url": _ci_url(environ),
            "source_format": "agent-bench",
        },
        "started_at": _iso(measured["started_at"]),
        "finished_at": _iso(measured["finished_at"]),
        "metrics": metrics,
        "context": context,
    }
