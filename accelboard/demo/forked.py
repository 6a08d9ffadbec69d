"""One step of the demo load in a forked child process, beside the steps the parent runs.

The older days of telemetry (numpy, then PostgreSQL's COPY and index builds) and the history
(benchmark runs, serving metrics, drift, the alert replay: Python) used to run as two threads of
one process. They share one GIL: each small numpy call of the telemetry thread gave the GIL up and
waited up to the switch interval (5 ms) for the busy history thread to hand it back, so the
telemetry step took 40-50 s beside the history against 26 s alone. In a child process each has
its own interpreter (and core).

``start(func)`` forks at once and returns ``wait``, which gives ``func``'s result (a dict of row
counts, sent back as JSON through a pipe) or raises ``ChildFailed`` with the child's error. Fork
before any other thread starts: the child gets a copy of the parent's memory (the computed
telemetry included) and only the forking thread. The parent's database connections are left to
the parent: the child detaches them without closing them (closing would end the parent's
sessions, its advisory lock included) and opens its own. The child dies with its parent (Linux).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import traceback
from collections.abc import Callable
from typing import Any

from django.db import connections

from .processes import parent_death_signal_set

# The parent's connections as the child inherited them: held, never used nor closed, until the
# child exits.
_inherited: list[Any] = []


class ChildFailed(RuntimeError):
    """The forked step raised (its error and traceback in the message) or died."""


def start(func: Callable[[], dict[str, int]]) -> Callable[[], dict[str, int]]:
    """Run ``func`` in a forked child from now on; ``wait()`` returns its result."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        _child(func, write_fd)
    os.close(write_fd)

    def wait() -> dict[str, int]:
        with os.fdopen(read_fd, "rb") as pipe:
            body = pipe.read()
        _, status = os.waitpid(pid, 0)
        try:
            payload: dict[str, Any] = json.loads(body) if body else {}
        except ValueError:
            payload = {}
        if "error" in payload:
            raise ChildFailed(payload["error"])
        if "rows" not in payload or status != 0:
            raise ChildFailed(f"the child process of the load ended without a result ({_status(status)})")
        return {str(name): int(count) for name, count in payload["rows"].items()}

    return wait


def _child(func: Callable[[], dict[str, int]], write_fd: int) -> None:
    code = 1
    try:
        parent_death_signal_set(signal.SIGKILL)
        for conn in connections.all(initialized_only=True):
            # The parent's session: dropped here without a word to the server (psycopg does not
            # close a connection its process did not open), the parent keeps using it.
            _inherited.append(conn.connection)
            conn.connection = None
        try:
            payload: dict[str, Any] = {"rows": func()}
            code = 0
        except BaseException as exc:  # reported to the parent, which undoes the load
            payload = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}
        finally:
            with contextlib.suppress(Exception):
                connections.close_all()
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(json.dumps(payload).encode())
    finally:
        # No atexit handlers, no flushing of the parent's buffers twice, no Django teardown.
        os._exit(code)


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"
