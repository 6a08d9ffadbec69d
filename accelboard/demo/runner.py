"""``accelboard demo``'s run: what it starts, in which order, and when the site is announced.

``demo_run`` takes a ``DemoConfig`` of plain values (the management command reads them from the
settings) and drives the children through ``accelboard.demo.processes``: ``migrate`` and the
background load (``demo_fleet``, whose progress it follows through ``accelboard.demo.progress``),
then gunicorn, then the Celery worker with beat and the live fleet, until a signal. Nothing of
Django is imported here, so it is tested on plain processes.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .processes import (
    BACKGROUND_NICE,
    STATE_FILE,
    Child,
    ChildFailed,
    DemoInterrupted,
    DependencyLost,
    RunState,
    Supervisor,
    interrupts_ignore,
    interrupts_raise,
    orphans_stop,
    port_in_use,
    port_owner,
    stale_pidfile_remove,
)
from .progress import PROGRESS_FILE, progress_read

# Created once the migrations are in: the loader, started beside them, waits for it to write.
MIGRATED_FILE = "demo-migrated"


def url_host(host: str) -> str:
    """The host part of a URL for a bind address: IPv6 in brackets, wildcards as loopback."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def http_wait_ok(url: str, *, timeout: float, still_ok: Callable[[], None], interval: float = 0.25) -> float:
    """Poll ``url`` until it answers 200; call ``still_ok`` between tries (it raises to give up).

    Returns the seconds waited. Raises ``TimeoutError`` naming the last answer.
    """
    started = time.monotonic()
    last = "no answer yet"
    while time.monotonic() - started < timeout:
        still_ok()
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return time.monotonic() - started
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(getattr(exc, "reason", exc))
        time.sleep(interval)
    raise TimeoutError(f"{url} did not answer 200 within {timeout:.0f} s (last: {last})")


@dataclass
class DemoConfig:
    """Everything ``demo_run`` needs, as plain values (the command reads them from settings)."""

    host: str
    port: int
    reset: bool
    agent: bool
    home: Path
    database_url: str
    broker_url: str
    python: str = sys.executable
    cwd: Path | None = None
    # The simulated CI (``accelboard.demo.ci``): a regression mailed to the outbox minutes in.
    ci: bool = True
    health_timeout: float = 90.0
    # A full first demo load on a slow two-core machine takes minutes; an hour means "stuck".
    step_timeout: float = 3600.0
    fleet_args: list[str] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)
    # Lines printed under the URL once the site answers (the demo logins).
    banner: list[str] = field(default_factory=list)
    # Processes the demo needs but did not start (the embedded PostgreSQL), by name: if one
    # dies the demo stops and says so rather than serving 503s.
    watch_pids: dict[str, int] = field(default_factory=dict)
    # What the command found in the database: migrations to apply, demo data to load. A second
    # start needs neither and goes straight to the web server.
    migrate: bool = True
    load: bool = True
    # When given, reads (migrate, load) from the database once the web server is starting: its
    # boot and this check (the migration graph, seconds of imports) overlap on a second start.
    database_state: Callable[[], tuple[bool, bool]] | None = None

    @property
    def progress_path(self) -> Path:
        return self.home / PROGRESS_FILE

    @property
    def url(self) -> str:
        return f"http://{url_host(self.host)}:{self.port}/"


def child_environment(config: DemoConfig, base: Mapping[str, str]) -> dict[str, str]:
    """The environment of every child: the explicit database and broker, never the embedded default.

    The supervisor has already started (or attached to) the embedded server; a child that saw no
    ``DATABASE_URL`` would start its own handle on it and could stop it on exit.
    """
    env = dict(base)
    env.update(
        {
            "DATABASE_URL": config.database_url,
            "CELERY_BROKER_URL": config.broker_url,
            "ACCELBOARD_HOME": str(config.home),
            "PYTHONUNBUFFERED": "1",
            # The loading banner on every page reads the loader's progress (accelboard.demo.context_processors).
            "ACCELBOARD_DEMO_PROGRESS": str(config.progress_path),
        }
    )
    # The product's own 403/404/500 pages, never Django's debug pages listing every URL pattern.
    env.setdefault("DEBUG", "0")
    env.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")
    env.setdefault("SITE_URL", config.url.rstrip("/"))
    # Alert emails land in the outbox (/notifications/outbox/), where a newcomer reads them, unless
    # the caller names a backend (an SMTP server of their own).
    env.setdefault("EMAIL_BACKEND", "accelboard.notifications.backends.OutboxBackend")
    # A specific non-loopback bind address must be an allowed host, or every request gets a 400.
    if "ALLOWED_HOSTS" not in base and config.host not in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::"):
        env["ALLOWED_HOSTS"] = ",".join(["127.0.0.1", "localhost", "[::1]", url_host(config.host)])
    env.update(config.extra_env)
    return env


def web_command(config: DemoConfig) -> list[str]:
    # One worker with threads: the demo machine may have two cores and the embedded PostgreSQL
    # and Celery need them too. A short graceful timeout keeps Ctrl-C snappy.
    return [
        config.python, "-m", "gunicorn", "accelboard.wsgi",
        "--bind", bind_address(config.host, config.port),
        "--workers", "1", "--threads", "4", "--worker-class", "gthread",
        "--graceful-timeout", "5", "--timeout", "60",
        "--pid", str(config.home / "gunicorn.pid"),
        "--access-logfile", "-", "--error-logfile", "-",
    ]  # fmt: skip


def worker_command(config: DemoConfig) -> list[str]:
    return [
        config.python, "-m", "celery", "-A", "accelboard", "worker",
        "--pool=solo", "-B", "-l", "info",
        "--schedule", str(config.home / "celerybeat-schedule"),
        "--hostname", f"demo@{socket.gethostname()}",
    ]  # fmt: skip


def manage_command(config: DemoConfig, *args: str) -> list[str]:
    return [config.python, "-m", "accelboard.cli", *args]


def live_fleet_command(config: DemoConfig) -> list[str]:
    """One process that keeps every demo host reporting through the real ingest API, in the host
    agent's wire format (``accelboard.demo.live``); it makes its own ingest tokens."""
    return [config.python, "-m", "accelboard.demo.live", "--server", config.url.rstrip("/")]


def ci_command(config: DemoConfig) -> list[str]:
    """The simulated CI (``accelboard.demo.ci``): subscribes the leads, then posts a slower commit
    a minute after the worker is up; the detector's alert reaches the outbox."""
    return [config.python, "-m", "accelboard.demo.ci", "--server", config.url.rstrip("/")]


def agent_package_available(config: DemoConfig) -> bool:
    """The host agent (``agents/``, installed by ``make demo``), whose sender the live fleet uses."""
    probe = subprocess.run(
        [config.python, "-c", "import accelboard_agent"], capture_output=True, timeout=30, check=False
    )
    return probe.returncode == 0


class _ProgressFollower:
    """Say each loader step once, when it is done, with its time."""

    def __init__(self, path: Path, say: Callable[[str], None]) -> None:
        self.path = path
        self.say = say
        self.said: set[str] = set()

    def poll(self) -> dict[str, object] | None:
        data = progress_read(self.path)
        if data is None:
            return None
        steps = data.get("steps")
        for step in steps if isinstance(steps, list) else []:
            if isinstance(step, dict) and step.get("state") == "done" and step.get("name") not in self.said:
                self.said.add(str(step.get("name")))
                self.say(f"  {step.get('label')}: {float(step.get('seconds') or 0):.1f} s")
        return data


class DemoError(Exception):
    """The demo cannot start; the message says why and what to do."""


@dataclass
class _Loading:
    child: Child
    follower: _ProgressFollower
    started: float


def demo_run(
    config: DemoConfig, *, say: Callable[[str], None], environ: Mapping[str, str] | None = None
) -> int:
    """Run the demo until interrupted. Returns the exit status (0 after Ctrl-C/SIGTERM).

    1. Refuse if another supervisor is alive for this home; stop a killed run's orphans.
    2. Refuse if the port is taken by something that is not ours.
    3. ``migrate`` when the command found migrations to apply; ``demo_fleet`` when there is no
       demo data yet (or ``--reset``), in the background, until its first stages are in.
    4. Start gunicorn; once ``/healthz`` answers, print the URL and the logins, then start the
       Celery worker with embedded beat and the live fleet.
    5. Watch the services (and the loader, while it runs) until a signal; a service that exits is
       started again (its log appended), and only one that keeps exiting stops the demo.
    """
    state = RunState.read(config.home / STATE_FILE)
    other = state.live_supervisor()
    if other is not None:
        raise DemoError(
            f"another accelboard demo (pid {other}) is running for {config.home}"
            + (f" at {state.url}" if state.url else "")
            + "; stop it first (Ctrl-C in its terminal, or kill it), or use another ACCELBOARD_HOME"
        )
    for orphan in orphans_stop(home=config.home, state=state):
        say(f"previous run: {orphan.describe()}")
    state.clear()
    if stale_pidfile_remove(config.home / "gunicorn.pid"):
        say("previous run: removed a stale gunicorn pid file")
    if port_in_use(config.host, config.port):
        owner = port_owner(config.port)
        raise DemoError(
            f"port {config.port} on {config.host} is already in use"
            + (f" by {owner}" if owner else "")
            + "; stop that process or choose another port with --port"
        )

    supervisor = Supervisor(
        home=config.home, env=child_environment(config, environ or os.environ), cwd=config.cwd, say=say
    )
    supervisor.state.url = config.url
    supervisor.state.write()
    supervisor.watch_pids = dict(config.watch_pids)
    started = time.monotonic()
    with interrupts_raise():
        try:
            loading = _demo_start(config, supervisor, say=say)
            say(f"accelboard is running at {config.url}  (first page in {time.monotonic() - started:.1f} s)")
            for line in config.banner:
                say(line)
            say(f"logs: {supervisor.logs}/   data: {config.home}   stop: Ctrl-C")
            while True:
                supervisor.check()
                if loading is not None and _loading_check(loading, supervisor, say=say):
                    loading = None
                time.sleep(0.5)
        except ChildFailed as exc:
            say(f"error: {exc}; last lines of {exc.child.log_path}:")
            for line in exc.child.log_tail(25).splitlines():
                say(f"  | {line}")
            return 1
        except (TimeoutError, DependencyLost) as exc:
            say(f"error: {exc}; see the logs in {supervisor.logs}/")
            return 1
        except DemoInterrupted as exc:
            say(f"received {exc}; stopping ...")
            return 0
        finally:
            interrupts_ignore()
            killed = supervisor.stop(timeout=10.0)
            if killed:
                say(f"killed after the timeout: {', '.join(killed)}")
            say("stopped the web server and the worker")


def _loading_check(loading: _Loading, supervisor: Supervisor, *, say: Callable[[str], None]) -> bool:
    """Pass on the loader's finished steps; True once it has exited (ChildFailed if it failed)."""
    loading.follower.poll()
    code = loading.child.process.poll()
    if code is None:
        return False
    loading.follower.poll()
    supervisor.state.child_remove(loading.child)
    if code != 0:
        raise ChildFailed(loading.child, f"the demo data load exited with status {code}")
    say(f"demo data loaded in {time.monotonic() - loading.started:.1f} s")
    return True


def _timed(say: Callable[[str], None], label: str, began: float) -> None:
    say(f"{label}: {time.monotonic() - began:.1f} s")


def _demo_start(config: DemoConfig, supervisor: Supervisor, *, say: Callable[[str], None]) -> _Loading | None:
    began = time.monotonic()
    # The web server boots (imports Django and the views, seconds of CPU) while the database is
    # prepared; nobody is pointed at it before the first data is in.
    supervisor.service("web", web_command(config))
    if config.database_state is not None:
        config.migrate, config.load = config.database_state()
    load = config.load or config.reset
    migrated = config.home / MIGRATED_FILE
    child = None
    if load:
        with contextlib.suppress(FileNotFoundError):
            config.progress_path.unlink()
        with contextlib.suppress(FileNotFoundError):
            migrated.unlink()
        load_began = time.monotonic()
        # Started before the migrations: its Django start, the password hashes and the telemetry
        # need no database (``--after``); it writes once the migrations are in.
        fleet_args = [
            "demo_fleet",
            *(["--reset"] if config.reset else []),
            "--progress",
            str(config.progress_path),
            *(["--after", str(migrated)] if config.migrate else []),
            *config.fleet_args,
        ]
        child = supervisor.start("demo_fleet", manage_command(config, *fleet_args), nice=BACKGROUND_NICE)
        supervisor.background.append(child)
    if config.migrate:
        began = time.monotonic()
        supervisor.step(
            "migrate", manage_command(config, "migrate", "--no-input"), timeout=config.step_timeout
        )
        _timed(say, "database migrations", began)
        if load:
            migrated.touch()
    loading = None
    if child is not None:
        say("loading the demo data (the site opens once the first steps are in):")
        loading = _Loading(
            child=child, follower=_ProgressFollower(config.progress_path, say), started=load_began
        )
        deadline = time.monotonic() + config.step_timeout
        while True:
            data = loading.follower.poll() or {}
            if data.get("ready_to_serve"):
                break
            if _loading_check(loading, supervisor, say=say):
                loading = None
                break
            if time.monotonic() > deadline:
                raise ChildFailed(child, f"demo_fleet was not ready within {config.step_timeout:.0f} s")
            time.sleep(0.2)
    else:
        # A finished load's progress file would only show a stale banner.
        with contextlib.suppress(FileNotFoundError):
            config.progress_path.unlink()
        say("demo data: loaded already (--reset rebuilds it)")
    waited = time.monotonic()
    http_wait_ok(config.url + "healthz", timeout=config.health_timeout, still_ok=supervisor.check)
    _timed(say, "web server (booted beside the load), waited", waited)
    # After the first page: the worker and the live fleet would only slow the web server's start.
    supervisor.service("worker", worker_command(config), nice=BACKGROUND_NICE)
    if config.ci:
        # In the background: it exits once its alert is mailed, and its failure stops nothing.
        supervisor.background.append(supervisor.start("ci", ci_command(config), nice=BACKGROUND_NICE))
    if config.agent:
        if agent_package_available(config):
            supervisor.service("fleet", live_fleet_command(config), nice=BACKGROUND_NICE)
        else:
            say("live fleet: the host agent is not installed (pip install -e ./agents); skipping it")
    return loading
