"""The demo supervisor keeps its services up: a killed child is started again, its log kept.

Small real child processes stand in for gunicorn and the Celery worker (the whole demo is
``tests/test_demo_command.py``); the supervisor's code is the same for both.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from accelboard.demo import processes

SERVICE = [sys.executable, "-c", "import os, time; print('up', os.getpid(), flush=True); time.sleep(120)"]


def wait_for_text(path: Path, text: str, *, count: int = 1, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count(text) >= count:
            return
        time.sleep(0.05)
    pytest.fail(f"{path} did not show {text!r} {count} times within {timeout} s:\n{path.read_text()}")


def wait_dead(child: processes.Child, timeout: float = 10) -> None:
    child.process.wait(timeout=timeout)


def test_it_restarts_a_killed_service_and_appends_to_its_log(tmp_path: Path) -> None:
    said: list[str] = []
    supervisor = processes.Supervisor(home=tmp_path, env=dict(os.environ), say=said.append)
    try:
        worker = supervisor.service("worker", SERVICE, nice=processes.BACKGROUND_NICE)
        log = worker.log_path
        wait_for_text(log, "up ")
        supervisor.check()  # alive: nothing happens
        assert supervisor.services == [worker] and said == []

        os.kill(worker.pid, signal.SIGKILL)
        wait_dead(worker)
        supervisor.check()

        [again] = supervisor.services
        assert again.pid != worker.pid and again.alive()
        assert again.nice == processes.BACKGROUND_NICE
        assert psutil.Process(again.pid).nice() == min(
            psutil.Process().nice() + processes.BACKGROUND_NICE, 19
        )
        assert said == [
            f"worker exited with status -9; restarting it (exit 1 within {processes.RESTART_WINDOW_S:.0f} s; "
            f"the demo stops at {processes.RESTART_LIMIT}; log: {log})"
        ]
        # The run-state file names the new child only (the next run's orphan sweep reads it).
        recorded = [c["pid"] for c in processes.RunState.read(tmp_path / processes.STATE_FILE).children]
        assert recorded == [again.pid]
        # Both starts' output is in the log, each under its own header; the tail is the new one's.
        wait_for_text(log, "up ", count=2)
        text = log.read_text()
        assert text.count("===== accelboard demo: worker started at ") == 2
        assert f"up {worker.pid}" in text and f"up {again.pid}" in text
        assert f"up {worker.pid}" not in again.log_tail()
    finally:
        supervisor.stop(timeout=5)


def test_it_gives_up_loudly_on_a_service_that_keeps_dying(tmp_path: Path) -> None:
    said: list[str] = []
    supervisor = processes.Supervisor(
        home=tmp_path, env=dict(os.environ), say=said.append, restart_limit=3, restart_window=60
    )
    crashing = [
        sys.executable,
        "-c",
        "import sys; print('cannot connect to the broker', flush=True); sys.exit(3)",
    ]
    try:
        supervisor.service("worker", crashing)
        deadline = time.monotonic() + 30
        with pytest.raises(processes.ChildFailed) as failed:
            while time.monotonic() < deadline:
                wait_dead(supervisor.services[0])
                supervisor.check()
        assert (
            str(failed.value) == "worker exited with status 3, 3 times within 60 s; not restarting it again"
        )
        assert len(said) == 2 and all(
            line.startswith("worker exited with status 3; restarting") for line in said
        )
        assert failed.value.child.log_tail().endswith("cannot connect to the broker")
        assert failed.value.child.log_path.read_text().count("cannot connect to the broker") == 3
    finally:
        supervisor.stop(timeout=5)


def test_it_counts_only_the_exits_within_the_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(processes.time, "monotonic", lambda: clock[0])
    supervisor = processes.Supervisor(
        home=tmp_path, env=dict(os.environ), say=lambda line: None, restart_limit=2, restart_window=60
    )
    try:
        supervisor.service("web", SERVICE)
        for _ in range(3):  # an exit every 61 s is never two within 60 s: always restarted
            child = supervisor.services[0]
            child.process.kill()
            wait_dead(child)
            supervisor.check()
            clock[0] += 61
        assert supervisor.services[0].alive()
    finally:
        supervisor.stop(timeout=5)


def test_a_step_echoes_only_its_own_output_and_keeps_the_earlier_runs(tmp_path: Path) -> None:
    supervisor = processes.Supervisor(home=tmp_path, env=dict(os.environ))
    for run in ("first", "second"):
        echoed: list[str] = []
        argv = [sys.executable, "-c", f"print('{run} run')"]
        supervisor.step("migrate", argv, timeout=30, echo=echoed.append)
        assert echoed == [f"{run} run"]
    text = (tmp_path / "logs" / "migrate.log").read_text()
    assert text.index("first run") < text.index("second run")


def test_a_log_past_its_size_is_rotated_before_the_next_start(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_text("old output\n" * 10)
    processes.log_open_for_start(log, "worker", rotate_bytes=50)
    assert (tmp_path / "worker.log.1").read_text() == "old output\n" * 10
    assert log.read_text().startswith("===== accelboard demo: worker started at ")
    processes.log_open_for_start(log, "worker", rotate_bytes=10_000)  # small: appended
    assert log.read_text().count("started at") == 2
