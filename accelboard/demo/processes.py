"""Process supervision for ``accelboard demo``: start children, watch them, stop them all.

The demo supervisor owns three kinds of processes: short steps (``migrate``, ``demo_fleet``),
long-running services (gunicorn, a Celery worker with beat) and, through ``accelboard.embedded``,
the embedded PostgreSQL server. This module holds the process plumbing and nothing of Django, so
it can be tested on plain processes.

1. Every child runs in its own session (its own process group). A Ctrl-C in the terminal reaches
   only the supervisor, which then stops the children in order; a group signal also reaches a
   child's own children (gunicorn workers, Celery's embedded beat).
2. On Linux each child also asks the kernel for SIGTERM when the supervisor dies
   (``PR_SET_PDEATHSIG``), so a SIGKILLed supervisor does not leave services running for long.
3. Because (2) is neither portable nor instant, the supervisor records every child (pid and the
   process's creation time, which rules out a recycled pid) in a run-state file under
   ``ACCELBOARD_HOME``. The next run reads it, stops what is still alive and reports it. Every
   child also carries ``ACCELBOARD_DEMO_HOME`` in its environment, so orphans are found even when
   the run-state file is gone.
4. Stopping is SIGTERM to the group, a bounded wait, then SIGKILL.
5. A long-running service that dies (a worker killed by the OOM killer, ``kill -9``) is started
   again, after whatever was left of its group is killed; only a service that keeps dying
   (``RESTART_LIMIT`` exits within ``RESTART_WINDOW_S``) stops the demo, with the reason and its
   log's tail. Each start appends to the service's log under a dated header line (a log past
   ``LOG_ROTATE_BYTES`` is rotated to ``NAME.log.1`` first), so the output that shows why a
   child died survives its restart and the next run.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

# Marks a process (and, by inheritance, its children) as belonging to the demo of one home.
HOME_MARKER = "ACCELBOARD_DEMO_HOME"
STATE_FILE = "demo-run.json"
# Creation times read from /proc are rounded; two reads of the same process agree far closer.
_CREATE_TIME_TOLERANCE_S = 0.05
# A service that exits this many times within the window is crash-looping: the demo gives up.
RESTART_LIMIT = 5
RESTART_WINDOW_S = 120.0
# A log past this size is moved to NAME.log.1 (replacing an older one) before the next start.
LOG_ROTATE_BYTES = 20 * 1024 * 1024


class DemoInterrupted(Exception):
    """Raised in the supervisor by SIGINT/SIGTERM: stop everything and leave cleanly."""


class DependencyLost(Exception):
    """Something the demo uses but did not start (the embedded PostgreSQL) has gone away."""


class ChildFailed(Exception):
    """A child exited when it should not have (or a step exited non-zero)."""

    def __init__(self, child: Child, message: str) -> None:
        super().__init__(message)
        self.child = child


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes]
    create_time: float
    # Where this start's output begins in the (appended) log.
    log_offset: int = 0
    nice: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines this start of the child wrote (not an earlier start's)."""
        try:
            with open(self.log_path, "rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(self.log_offset, size - 64 * 1024))
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class Orphan:
    pid: int
    name: str
    cmdline: str
    how_found: str
    killed: bool = False

    def describe(self) -> str:
        outcome = "stopped" if self.killed else "could not stop"
        return f"{outcome} {self.name} (pid {self.pid}, {self.how_found}): {self.cmdline[:120]}"


@dataclass
class RunState:
    """The run-state file: who supervises this home and which children it started."""

    path: Path
    supervisor_pid: int | None = None
    supervisor_create_time: float | None = None
    url: str = ""
    children: list[dict[str, object]] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> RunState:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return cls(path=path)
        if not isinstance(data, dict):
            return cls(path=path)
        children = [c for c in data.get("children", []) if isinstance(c, dict)]
        return cls(
            path=path,
            supervisor_pid=data.get("supervisor_pid"),
            supervisor_create_time=data.get("supervisor_create_time"),
            url=str(data.get("url", "")),
            children=children,
        )

    def write(self) -> None:
        payload = {
            "supervisor_pid": self.supervisor_pid,
            "supervisor_create_time": self.supervisor_create_time,
            "url": self.url,
            "children": self.children,
        }
        # Write-then-rename: a supervisor killed mid-write must not leave half a JSON file.
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload, indent=2))
        tmp.replace(self.path)

    def clear(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def child_add(self, child: Child) -> None:
        self.children.append(
            {
                "name": child.name,
                "pid": child.pid,
                "create_time": child.create_time,
                "cmdline": " ".join(child.argv),
            }
        )
        self.write()

    def child_remove(self, child: Child) -> None:
        self.children = [c for c in self.children if c.get("pid") != child.pid]
        self.write()

    def live_supervisor(self) -> int | None:
        """The pid of another supervisor still running for this home, if any."""
        if not isinstance(self.supervisor_pid, int) or self.supervisor_pid == os.getpid():
            return None
        if _same_process(self.supervisor_pid, self.supervisor_create_time):
            return self.supervisor_pid
        return None


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def _same_process(pid: int, create_time: object) -> bool:
    """True if ``pid`` is alive and is the very process recorded (not a recycled pid)."""
    actual = _create_time(pid)
    if actual is None or not isinstance(create_time, int | float):
        return False
    return abs(actual - float(create_time)) <= _CREATE_TIME_TOLERANCE_S


def _process_info(pid: int) -> tuple[str, str]:
    try:
        proc = psutil.Process(pid)
        return proc.name(), " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return "?", ""


def parent_death_signal_set(sig: int = signal.SIGTERM) -> None:
    """Runs in a child (between fork and exec, or in a forked worker): send me ``sig`` when my
    parent dies (Linux only; elsewhere nothing)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, sig)


# The background load, the Celery worker and the live fleet run this many steps below the web
# server, the migrations and the supervisor: on a laptop's few cores the page a person is waiting
# for (and the migrations before it) come first; the background catches up between requests.
BACKGROUND_NICE = 10


def child_start(
    *,
    name: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    log_path: Path,
    cwd: Path | None = None,
    nice: int = 0,
) -> Child:
    """Start ``argv`` in a new session with its output appended to ``log_path``, ``nice`` steps
    below the supervisor's CPU priority."""

    def prepare() -> None:
        parent_death_signal_set()
        if nice:
            os.nice(nice)

    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log_offset = log.tell()
        process = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=str(cwd) if cwd else None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=prepare,  # noqa: PLW1509 - the supervisor runs no threads
        )
    create_time = _create_time(process.pid) or time.time()
    return Child(
        name=name,
        argv=list(argv),
        log_path=log_path,
        process=process,
        create_time=create_time,
        log_offset=log_offset,
        nice=nice,
    )


def log_open_for_start(log_path: Path, name: str, *, rotate_bytes: int = LOG_ROTATE_BYTES) -> None:
    """Rotate ``log_path`` to ``.1`` when it has grown past ``rotate_bytes``, then append a dated
    header for the start of ``name``: earlier starts' output (why the last one died) is kept."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if log_path.stat().st_size > rotate_bytes:
            log_path.replace(log_path.with_name(log_path.name + ".1"))
    stamp = time.strftime("%Y-%m-%d %H:%M:%S %z")
    with open(log_path, "ab") as log:
        log.write(f"===== accelboard demo: {name} started at {stamp} =====\n".encode())


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the process group led by ``pid`` (every child leads its own), or the pid alone."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    except PermissionError:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _group_members(pgid: int) -> list[psutil.Process]:
    members = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            if os.getpgid(proc.pid) == pgid:
                members.append(proc)
    return members


def children_stop(children: Sequence[Child], *, timeout: float = 10.0) -> list[str]:
    """SIGTERM every child's group, wait up to ``timeout``, then SIGKILL what is left.

    Returns the names of children that had to be killed. All groups are signalled first so
    the children shut down in parallel and the whole stop takes at most about ``timeout``.
    """
    for child in children:
        if child.alive():
            _signal_group(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    killed: list[str] = []
    for child in children:
        remaining = max(0.0, deadline - time.monotonic())
        try:
            child.process.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            _signal_group(child.pid, signal.SIGKILL)
            child.process.wait(timeout=5)
            killed.append(child.name)
        # A group member that outlived its leader (a worker mid-request) is killed too.
        for member in _group_members(child.pid):
            with contextlib.suppress(psutil.NoSuchProcess):
                member.kill()
    return killed


def _terminate(procs: list[psutil.Process], timeout: float) -> set[int]:
    """SIGTERM (then SIGKILL) each process; return the pids that are gone."""
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            proc.terminate()
    gone, alive = psutil.wait_procs(procs, timeout=timeout)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            proc.kill()
    gone2, still = psutil.wait_procs(alive, timeout=3)
    return {p.pid for p in gone} | {p.pid for p in gone2}


def marked_processes(home: Path) -> list[psutil.Process]:
    """Processes (other than this one and its ancestors) whose environment names this home."""
    own = {os.getpid()} | {p.pid for p in psutil.Process().parents()}
    found = []
    for proc in psutil.process_iter():
        if proc.pid in own:
            continue
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            if proc.environ().get(HOME_MARKER) == str(home):
                found.append(proc)
    return found


def orphans_stop(*, home: Path, state: RunState, timeout: float = 10.0) -> list[Orphan]:
    """Stop what a previous, killed supervisor left behind for this home, and say what it was.

    Two sources, so that neither a lost state file nor a recycled pid misleads: the children the
    run-state file records (matched on pid and creation time), and any process carrying this
    home's marker in its environment. Call it only when no live supervisor owns the home.
    """
    targets: dict[int, Orphan] = {}
    procs: dict[int, psutil.Process] = {}
    for entry in state.children:
        pid = entry.get("pid")
        if isinstance(pid, int) and _same_process(pid, entry.get("create_time")):
            targets[pid] = Orphan(
                pid=pid,
                name=str(entry.get("name", "?")),
                cmdline=str(entry.get("cmdline", "")),
                how_found="recorded in the run-state file",
            )
            with contextlib.suppress(psutil.NoSuchProcess):
                procs[pid] = psutil.Process(pid)
    for proc in marked_processes(home):
        if proc.pid not in targets:
            name, cmdline = _process_info(proc.pid)
            targets[proc.pid] = Orphan(
                pid=proc.pid, name=name, cmdline=cmdline, how_found=f"its environment names {HOME_MARKER}"
            )
            procs[proc.pid] = proc
    # Signal the recorded leaders' groups as well, so workers die with their master.
    for pid in list(procs):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGTERM)
    gone = _terminate(list(procs.values()), timeout)
    for pid, orphan in targets.items():
        orphan.killed = pid in gone or not psutil.pid_exists(pid)
    return sorted(targets.values(), key=lambda o: o.pid)


def port_in_use(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # Same option gunicorn sets: a port in TIME_WAIT after a clean stop is free to reuse.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def port_owner(port: int) -> str | None:
    """Describe the process listening on ``port``, when the system lets us see it."""
    try:
        connections = psutil.net_connections(kind="inet")
    except (psutil.AccessDenied, OSError):
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            name, cmdline = _process_info(conn.pid)
            return f"pid {conn.pid} ({name}: {cmdline[:100]})"
    return None


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """Turn the first SIGINT/SIGTERM/SIGHUP into ``DemoInterrupted``; restore handlers on exit."""
    fired = False

    def handler(signum: int, frame: object) -> None:
        nonlocal fired
        if fired:
            return
        fired = True
        raise DemoInterrupted(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in _STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def interrupts_ignore() -> None:
    """While stopping, further signals are ignored: a second Ctrl-C must not abort the shutdown
    half-way (that is what would leave orphans), and the shutdown is bounded by its timeouts."""
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


class _LogFollower:
    """Pass on the complete lines appended to a log file since the last poll."""

    def __init__(self, path: Path, echo: Callable[[str], None] | None, offset: int = 0) -> None:
        self.path = path
        self.echo = echo
        self.offset = offset
        self.partial = b""

    def poll(self, *, final: bool = False) -> None:
        if self.echo is None:
            return
        try:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                chunk = log.read()
        except OSError:
            return
        self.offset += len(chunk)
        data = self.partial + chunk
        lines = data.split(b"\n")
        self.partial = b"" if final else lines.pop()
        for line in lines:
            if line or not final:
                self.echo(line.decode(errors="replace").rstrip("\r"))


class Supervisor:
    """The children of one demo run, recorded in the run-state file as they start and stop.

    ``check`` restarts a service that has exited (point 5 of the module's docstring) and says so
    through ``say``; it raises ``ChildFailed`` once a service has exited ``restart_limit`` times
    within ``restart_window`` seconds.
    """

    def __init__(
        self,
        *,
        home: Path,
        env: Mapping[str, str],
        cwd: Path | None = None,
        say: Callable[[str], None] | None = None,
        restart_limit: int = RESTART_LIMIT,
        restart_window: float = RESTART_WINDOW_S,
    ) -> None:
        self.home = home
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.restart_limit = restart_limit
        self.restart_window = restart_window
        # Per service: the monotonic times of its recent exits.
        self.exits: dict[str, list[float]] = {}
        self.env = {**env, HOME_MARKER: str(home)}
        self.cwd = cwd
        self.logs = home / "logs"
        self.state = RunState(
            path=home / STATE_FILE,
            supervisor_pid=os.getpid(),
            supervisor_create_time=_create_time(os.getpid()),
        )
        self.services: list[Child] = []
        # Children that finish on their own (the background demo load) but stop with the rest.
        self.background: list[Child] = []
        self.watch_pids: dict[str, int] = {}

    def start(self, name: str, argv: Sequence[str], *, nice: int = 0) -> Child:
        log_path = self.logs / f"{name}.log"
        # Appended, never truncated: a restart must not wipe what shows why the last start died.
        log_open_for_start(log_path, name)
        child = child_start(name=name, argv=argv, env=self.env, log_path=log_path, cwd=self.cwd, nice=nice)
        self.state.child_add(child)
        return child

    def step(
        self, name: str, argv: Sequence[str], *, timeout: float, echo: Callable[[str], None] | None = None
    ) -> Child:
        """Run a short command to completion; raise ``ChildFailed`` if it fails or overruns.

        With ``echo``, its output is passed on line by line as it is written (a first demo load
        takes a minute or more, and silence would look like a hang).
        """
        child = self.start(name, argv)
        follower = _LogFollower(child.log_path, echo, offset=child.log_offset)
        deadline = time.monotonic() + timeout
        try:
            while child.process.poll() is None:
                follower.poll()
                if time.monotonic() > deadline:
                    raise ChildFailed(child, f"{name} did not finish within {timeout:.0f} s")
                time.sleep(0.2)
            follower.poll(final=True)
        except BaseException:
            # Overrun or interrupted (Ctrl-C): the step is stopped here, the caller stops the rest.
            children_stop([child], timeout=5)
            self.state.child_remove(child)
            raise
        self.state.child_remove(child)
        if child.process.returncode != 0:
            raise ChildFailed(child, f"{name} exited with status {child.process.returncode}")
        return child

    def service(self, name: str, argv: Sequence[str], *, nice: int = 0) -> Child:
        child = self.start(name, argv, nice=nice)
        self.services.append(child)
        return child

    def check(self) -> None:
        """Restart a service that has exited; raise ``ChildFailed`` if one keeps exiting (more
        than ``restart_limit`` times in ``restart_window`` s), ``DependencyLost`` if a watched pid
        (a process the demo did not start, so cannot start again) has gone."""
        for name, pid in self.watch_pids.items():
            if not psutil.pid_exists(pid):
                raise DependencyLost(f"{name} (pid {pid}) is no longer running")
        for index, child in enumerate(self.services):
            if not child.alive():
                self.services[index] = self._restart(child)

    def _restart(self, child: Child) -> Child:
        code = child.process.returncode
        now = time.monotonic()
        exits = [t for t in self.exits.get(child.name, []) if now - t <= self.restart_window] + [now]
        self.exits[child.name] = exits
        # What is left of its group (gunicorn's workers, Celery's beat) would hold the port or
        # the schedule: it goes before the new start.
        for member in _group_members(child.pid):
            with contextlib.suppress(psutil.NoSuchProcess):
                member.kill()
        self.state.child_remove(child)
        if len(exits) >= self.restart_limit:
            raise ChildFailed(
                child,
                f"{child.name} exited with status {code}, {len(exits)} times within "
                f"{self.restart_window:.0f} s; not restarting it again",
            )
        again = self.start(child.name, child.argv, nice=child.nice)
        self.say(
            f"{child.name} exited with status {code}; restarting it "
            f"(exit {len(exits)} within {self.restart_window:.0f} s; the demo stops at {self.restart_limit}; "
            f"log: {child.log_path})"
        )
        return again

    def stop(self, *, timeout: float = 10.0) -> list[str]:
        killed = children_stop([*self.services, *self.background], timeout=timeout)
        self.services.clear()
        self.background.clear()
        self.state.clear()
        return killed


def stale_pidfile_remove(path: Path) -> bool:
    """Remove gunicorn's pid file when the pid in it is not a running gunicorn.

    Gunicorn refuses to start while its pid file names a live process, and after a crash that pid
    may have been recycled by something unrelated.
    """
    try:
        pid = int(path.read_text().strip() or "0")
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        pid = 0
    if pid > 0:
        name, cmdline = _process_info(pid)
        if "gunicorn" in cmdline and psutil.pid_exists(pid):
            return False
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return True
