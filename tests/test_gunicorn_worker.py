"""The web workers' gthread worker (``gunicorn_worker``, ``gunicorn_conf.worker_class``): the
heartbeat written at most once a second, and a real gunicorn with it and the access logger
(``gunicorn_logging``) answering prompt, slow and silent clients as before."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gunicorn.config import Config

from accelboard import gunicorn_conf, gunicorn_worker
from accelboard.gunicorn_worker import ThreadWorker


class _Tmp:
    def __init__(self) -> None:
        self.writes = 0

    def notify(self) -> None:
        self.writes += 1


def test_the_heartbeat_is_written_at_most_once_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = ThreadWorker.__new__(ThreadWorker)
    worker._notified_at = float("-inf")
    worker.tmp = _Tmp()
    now = [100.0]
    monkeypatch.setattr(gunicorn_worker.time, "monotonic", lambda: now[0])
    for _ in range(50):  # fifty loop passes within a second: one write
        worker.notify()
        now[0] += 0.019
    assert worker.tmp.writes == 1
    now[0] += 0.1
    worker.notify()
    assert worker.tmp.writes == 2


def test_the_workers_use_it() -> None:
    cfg = Config()
    cfg.set("worker_class", gunicorn_conf.worker_class)
    assert cfg.worker_class is ThreadWorker


APP = """
def app(environ, start_response):
    body = environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"got " + str(len(body)).encode()]
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A real gunicorn with the production worker and logger classes on a tiny application."""
    (tmp_path / "tiny.py").write_text(APP)
    port = _free_port()
    log = tmp_path / "access.log"
    gunicorn = Path(sys.executable).parent / "gunicorn"
    process = subprocess.Popen(
        [
            str(gunicorn),
            "tiny:app",
            f"--bind=127.0.0.1:{port}",
            "--workers=1",
            "--threads=4",
            f"--worker-class={gunicorn_conf.worker_class}",
            f"--logger-class={gunicorn_conf.logger_class}",
            f"--access-logfile={log}",
            "--chdir",
            str(tmp_path),
        ],  # fmt: skip
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.1)
        yield port, log
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_real_gunicorn_answers_prompt_slow_and_silent_clients(server: tuple[int, Path]) -> None:
    port, log = server
    for _ in range(3):  # an agent's way: a connection a post
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/api/v1/telemetry", body=b"x" * 30_000, headers={"Connection": "close"})
        answer = conn.getresponse()
        assert (answer.status, answer.read()) == (200, b"got 30000")
        conn.close()
    # A client that opens and says nothing, then closes: nothing answered, the worker lives on.
    silent = socket.create_connection(("127.0.0.1", port))
    time.sleep(0.2)
    silent.close()
    # A client whose request comes after a pause: gunicorn's wait for its first bytes.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
        time.sleep(0.3)
        slow.sendall(b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc")
        reply = b""
        while chunk := slow.recv(4096):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200 OK") and b"\r\ngot 3\r\n" in reply
    deadline = time.monotonic() + 5
    while log.read_text().count("\n") < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = log.read_text().splitlines()
    assert len(lines) == 4
    assert '"POST /api/v1/telemetry HTTP/1.1" 200 9 "-" "-"' in lines[0]
    assert '"POST /x HTTP/1.1" 200 5 "-" "-"' in lines[3]
