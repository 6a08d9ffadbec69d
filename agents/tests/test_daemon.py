"""The daemon: prompt stop on SIGTERM/SIGINT, no-GPU mode, and nothing lost or doubled across an
outage and a SIGKILL in the middle of a batch."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import defaultdict

import pynvml
import pytest
from conftest import FakeGpu  # this folder (no __init__.py): the root tests package must not shadow it

from accelboard_agent.cli import main

INTERVAL = 0.1


def _agent(server, spool: str, *extra: str) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "accelboard_agent", "run", "--simulate", "2", "--hostname", "sim-host",
        "--server", server.url, "--token", "test-token", "--spool", spool, "--interval", str(INTERVAL),
        "--send-interval", "0.2", "--backoff-base", "0.1", "--backoff-max", "0.4", "--batch-max-samples", "20",
        *extra,
    ]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _spooled(spool: str) -> int:
    try:
        with sqlite3.connect(spool) as db:
            return db.execute(
                "SELECT (SELECT count(*) FROM samples) + (SELECT count(*) FROM outbox)"
            ).fetchone()[0]
    except sqlite3.Error:
        return 0


def _wait(predicate, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_it_stops_within_a_second_on_sigterm_or_sigint(tmp_path, server, signum):
    spool = str(tmp_path / "s.db")
    server.stop()  # even with the sender stuck in retries
    process = _agent(server, spool)
    _wait(lambda: _spooled(spool) > 0)
    time.sleep(0.5)

    sent_at = time.monotonic()
    process.send_signal(signum)
    code = process.wait(timeout=5)
    elapsed = time.monotonic() - sent_at

    assert code == 0, process.stderr.read()
    assert elapsed < 1.0
    server.start()
    assert main(["flush", "--server", server.url, "--token", "test-token", "--spool", spool]) == 0
    times = defaultdict(list)
    for sample in server.samples():
        times[sample["gpu"]].append(sample["time"])
    assert set(times) == {"GPU-SIM-sim-host-0", "GPU-SIM-sim-host-1"}
    assert len(times["GPU-SIM-sim-host-0"]) >= 5


# The signal lands while the main thread holds the event's own lock, as it does for a moment in
# every Event.wait. A handler that called stop.set() itself would wait for that lock forever.
_SIGNAL_UNDER_THE_EVENTS_LOCK = """
import os, signal, sys, threading
from accelboard_agent.daemon import install_signal_handlers, restore_signal_handlers

stop = threading.Event()
installed = install_signal_handlers(stop)
with stop._cond:
    os.kill(os.getpid(), signal.{name})
    for _ in range(1000):  # bytecodes: the handler runs here, the lock held
        pass
stopped = stop.wait(5)
restore_signal_handlers(installed)
sys.exit(0 if stopped and not installed.watcher.is_alive() else 3)
"""


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_signal_while_the_main_thread_holds_the_events_lock_still_stops(name):
    code = _SIGNAL_UNDER_THE_EVENTS_LOCK.format(name=name)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert result.returncode == 0, result.stderr


def test_it_delivers_every_sample_exactly_once_through_an_outage_and_a_sigkill(tmp_path, server):
    spool = str(tmp_path / "s.db")
    first = _agent(server, spool)
    _wait(lambda: len(server.samples()) >= 20)

    # The server goes away for a while; the agent keeps sampling into its spool.
    server.stop()
    outage_start = time.time()
    time.sleep(1.5)
    outage_end = time.time()
    # It comes back slow: it stores each batch, then answers late. SIGKILL lands in between.
    server.delay_s = 1.5
    server.received.clear()
    server.start()
    _wait(lambda: server.received.is_set())
    time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=5)
    server.delay_s = 0.0

    # Restarted on the same spool: the unanswered batch is resent under the same batch_id.
    second = _agent(server, spool)
    time.sleep(1.5)
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=5) == 0
    assert main(["flush", "--server", server.url, "--token", "test-token", "--spool", spool]) == 0

    keys = server.sample_keys()
    assert server.duplicates >= 1  # the resend after the kill really happened, and was deduped
    assert max(keys.values()) == 1  # every stored sample exactly once
    by_gpu = defaultdict(list)
    for gpu, moment in keys:
        by_gpu[gpu].append(moment)
    assert sorted(by_gpu["GPU-SIM-sim-host-0"]) == sorted(by_gpu["GPU-SIM-sim-host-1"])
    times = sorted(by_gpu["GPU-SIM-sim-host-0"])
    # Samples taken while the server was away arrived too.
    assert sum(outage_start <= t <= outage_end for t in times) >= 0.5 * 1.5 / INTERVAL
    # No hole in what was sampled but for the restart after the kill.
    gaps = [b - a for a, b in zip(times, times[1:]) if b - a > 3 * INTERVAL]
    assert len(gaps) <= 1
    with sqlite3.connect(spool) as db:
        assert db.execute("SELECT count(*) FROM samples").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM outbox").fetchone()[0] == 0
    # Each batch carried the host (simulated) and its GPUs keyed by UUID.
    telemetry = server.stored("/api/v1/telemetry")
    assert all(body["host"]["simulated"] is True for body in telemetry)
    assert {a["uuid"] for a in telemetry[-1]["accelerators"]} == set(by_gpu)
    assert telemetry[-1]["accelerators"][0]["name"] == "Simulated H100 80GB HBM3"


def test_it_runs_without_a_driver_sending_host_facts_only(tmp_path, server, fake_nvml, capsys):
    fake_nvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    threading.Timer(1.2, os.kill, (os.getpid(), signal.SIGTERM)).start()

    code = main(
        [
            "run", "--server", server.url, "--token", "test-token", "--spool", str(tmp_path / "s.db"),
            "--send-interval", "0.2", "--hostname", "cpu-only",
        ]
    )  # fmt: skip

    err = capsys.readouterr().err.strip().splitlines()
    assert code == 0
    assert len(err) == 1 and err[0].startswith("accelboard-agent: no NVIDIA driver available")
    batches = server.stored("/api/v1/telemetry")
    assert len(batches) == 1
    assert batches[0]["samples"] == [] and batches[0]["accelerators"] == []
    assert batches[0]["host"]["hostname"] == "cpu-only"
    assert "NVMLError_LibraryNotFound" in batches[0]["host"]["facts"]["no_gpu"]


def test_it_ships_the_xid_errors_drained_each_tick(tmp_path, server, fake_nvml):
    first, second = FakeGpu(0), FakeGpu(1)
    fake = fake_nvml([first, second])
    fake.xid(second, 79)  # waiting before the first tick
    threading.Timer(1.2, os.kill, (os.getpid(), signal.SIGTERM)).start()

    code = main(
        [
            "run", "--server", server.url, "--token", "test-token", "--spool", str(tmp_path / "s.db"),
            "--interval", "0.1", "--send-interval", "0.2", "--hostname", "gpu-host",
        ]
    )  # fmt: skip

    assert code == 0
    samples = [s for batch in server.stored("/api/v1/telemetry") for s in batch["samples"]]
    by_gpu = defaultdict(set)
    for sample in samples:
        by_gpu[sample["gpu"]].add(sample["xid_errors"])
    assert by_gpu == {first.uuid: {0}, second.uuid: {1}}


def test_it_exits_nonzero_without_a_gpu_only_when_required(tmp_path, server, fake_nvml):
    fake_nvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    code = main(
        ["run", "--require-gpu", "--server", server.url, "--token", "t", "--spool", str(tmp_path / "s.db")]
    )

    assert code == 1


def test_status_reports_spool_drops_and_reachability(tmp_path, server, capsys):
    spool = str(tmp_path / "s.db")
    server.stop()
    process = _agent(server, spool, "--spool-max-samples", "6")
    _wait(lambda: _spooled(spool) >= 4)
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=5)

    code = main(["status", "--json", "--server", server.url, "--spool", spool])

    status = json.loads(capsys.readouterr().out)
    assert code == 0
    assert status["dropped_samples"] > 0
    assert status["raw_samples"] <= 6
    assert status["pending_by_kind"]["telemetry"] >= 1
    assert status["server_reachable"].startswith("no")
    assert status["last_success"] is None


def _attribution(server) -> list[dict]:
    return [item for body in server.stored("/api/v1/telemetry") for item in body.get("attribution", [])]


def test_a_simulated_agent_ships_who_holds_its_gpus_and_nothing_when_attribution_is_off(tmp_path, server):
    agent = _agent(
        server,
        str(tmp_path / "on.db"),
        "--attribution-nvml",
        "on",
        "--attribution-interval",
        "0.2",
        "--attribution-cut-interval",
        "0.5",
    )
    try:
        _wait(
            lambda: {i["gpu"] for i in _attribution(server)} == {"GPU-SIM-sim-host-0", "GPU-SIM-sim-host-1"}
        )
    finally:
        agent.terminate()
        agent.wait(timeout=5)

    # GPU 0: one serving pod, the whole GPU; GPU 1: two pods time-slicing it, measured 60:30.
    intervals = _attribution(server)
    first = [i for i in intervals if i["gpu"] == "GPU-SIM-sim-host-0"]
    assert {(i["workload"]["kind"], i["basis"], i["share"]) for i in first} == {("pod", "exclusive", 1.0)}
    shared = [i for i in intervals if i["gpu"] == "GPU-SIM-sim-host-1"]
    assert {i["basis"] for i in shared} == {"measured"}
    assert sorted({round(i["share"], 2) for i in shared}) == [0.33, 0.67]
    assert all(i["end"] > i["start"] for i in intervals)

    server.accepted.clear()
    agent = _agent(server, str(tmp_path / "off.db"))
    try:
        _wait(lambda: len(server.samples()) >= 10)
    finally:
        agent.terminate()
        agent.wait(timeout=5)
    batches = server.stored("/api/v1/telemetry")
    assert not any("attribution" in b for b in batches)
    assert not any("compute_slices" in a for b in batches for a in b["accelerators"])
