"""``accelboard demo`` end to end: the real supervisor, embedded PostgreSQL, gunicorn and Celery.

Each run is a subprocess with a temporary ``ACCELBOARD_HOME`` and no ``DATABASE_URL`` (the
embedded default), loading a tiny demo fleet. The home is shared by the module so PostgreSQL is
initialised and migrated once; the later runs are the "second run reuses the data" case.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

import psutil
import pytest

from accelboard.demo import processes, runner
from accelboard.demo.progress import PROGRESS_FILE, STEPS, Progress, progress_read
from accelboard.notifications.backends import OUTBOX_BACKEND

ROOT = Path(__file__).resolve().parents[1]
# Small enough to load in seconds, big enough that every page has something to show.
TINY_FLEET = "--hosts 1 --days-runs 10 --days-telemetry 1 --telemetry-interval 3600 --serving-interval 3600"
URL_LINE = re.compile(r"accelboard is running at (http://\S+)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class DemoProcess:
    process: subprocess.Popen[str]
    home: Path
    lines: list[str] = field(default_factory=list)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                pytest.fail(
                    f"demo exited ({self.process.wait()}) before {pattern.pattern!r}:\n" + self.output
                )
            self.lines.append(line)
            match = pattern.search(line)
            if match:
                return match
        pytest.fail(f"no {pattern.pattern!r} within {timeout} s:\n" + self.output)

    def drain(self, timeout: float = 5) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                return
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def state(self) -> dict[str, object]:
        return json.loads((self.home / processes.STATE_FILE).read_text())


def demo_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(
        {"ACCELBOARD_HOME": str(home), "ACCELBOARD_DEMO_FLEET_ARGS": TINY_FLEET, "PYTHONUNBUFFERED": "1"}
    )
    return env


def demo_start(home: Path, port: int, *args: str, agent: bool = False) -> DemoProcess:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "accelboard.cli",
            "demo",
            "--port",
            str(port),
            *([] if agent else ["--no-agent"]),
            *args,
        ],
        cwd=ROOT,
        env=demo_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Its own group, so the crash test can SIGKILL the supervisor and what shares its group.
        start_new_session=True,
    )
    return DemoProcess(process=process, home=home)


def postgres_processes(home: Path) -> list[psutil.Process]:
    pgdata = str(home / "pgdata")
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if any(pgdata == part for part in cmdline):
            found.append(proc)
    return found


def leftovers(home: Path) -> list[str]:
    procs = processes.marked_processes(home) + postgres_processes(home)
    return [f"{p.pid} {' '.join(p.cmdline())}" for p in procs if p.is_running()]


def wait_gone(home: Path, timeout: float = 15) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = leftovers(home)
        if not left:
            return []
        time.sleep(0.2)
    return leftovers(home)


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    # Not under pytest's basetemp: run as root, the embedded server runs as the ``pgserver`` user
    # and needs to traverse the parents, and every new pytest session on the machine resets
    # ``/tmp/pytest-of-root`` to 0700, which would cut a running server off from its data.
    base = Path(tempfile.mkdtemp(prefix="accelboard-demo-test-"))
    path = base / "home"
    yield path
    # Safety net for a failed test: nothing of this home may outlive the module.
    for proc in processes.marked_processes(path) + postgres_processes(path):
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    shutil.rmtree(base, ignore_errors=True)


def get(url: str, opener: urllib.request.OpenerDirector | None = None) -> tuple[int, str, str]:
    opener = opener or urllib.request.build_opener()
    with opener.open(url, timeout=10) as response:
        return response.status, response.geturl(), response.read().decode()


def test_it_serves_the_demo_comes_back_after_a_crash_and_stops_everything(home: Path) -> None:
    # One test, three phases: every start of the real stack costs seconds on a two-core machine.
    port = free_port()

    # 1. First run: migrate, load the tiny fleet (serving once its first stages are in), serve;
    #    the printed login works, the output is one line per step, the URL and the logins once.
    first = demo_start(home, port)
    url = first.wait_for(URL_LINE, timeout=150).group(1)
    first.wait_for(re.compile(r"stop: Ctrl-C"), timeout=5)
    assert url == f"http://127.0.0.1:{port}/"
    status, _, body = get(url + "healthz")
    assert status == 200 and json.loads(body) == {"status": "ok"}
    assert "admin (staff)" in first.output and "demo-admin" in first.output
    admin = assert_login_works(url, "admin", "demo-admin")
    first.wait_for(re.compile(r"demo data loaded in \d+\.\d s"), timeout=120)
    steps = [line for line in first.lines if re.fullmatch(r"  [a-z][\w ,]+: \d+\.\d s", line)]
    assert len(steps) == len(STEPS), first.output
    assert first.output.count(url) == 1 and first.output.count("demo-admin") == 1
    # One line per step, plus the migrations, the heading, the URL, the logins, logs and the total.
    assert len(first.lines) <= len(STEPS) + 13, first.output
    # The product's own error page (DEBUG is off in the demo), and static files still served.
    with pytest.raises(urllib.error.HTTPError) as refused:
        admin.open(url + "no-such-page/", timeout=10)
    page = refused.value.read().decode()
    assert refused.value.code == 404 and "Page not found" in page and "URLconf" not in page
    status, _, css = get(url + "static/css/accelboard.css")
    assert status == 200 and ".demo-loading" in css
    state = first.state()
    assert state["supervisor_pid"] == first.process.pid
    old_children = {c["name"]: c["pid"] for c in state["children"]}  # type: ignore[union-attr]
    # The simulated CI runs in the background beside them (its alert email, minutes in).
    assert set(old_children) == {"web", "worker", "ci"}
    assert postgres_processes(home), "the embedded PostgreSQL should be running"
    # A new data directory is restarted once with its settings before the first migration.
    assert embedded_setting(home, "wal_level") == "minimal"
    assert embedded_setting(home, "max_wal_senders") == "0"

    # 2. A crash: the supervisor and its process group die at once and nothing runs its cleanup;
    #    the gunicorn pid file is left naming a live process that is not gunicorn.
    os.killpg(first.process.pid, signal.SIGKILL)
    first.process.wait(timeout=10)
    (home / "gunicorn.pid").write_text(str(os.getpid()))

    # The second run also starts the live fleet: every demo host keeps reporting.
    restarted = time.time()
    second = demo_start(home, port, agent=True)
    try:
        url = second.wait_for(URL_LINE, timeout=150).group(1)
        second.wait_for(re.compile(r"stop: Ctrl-C"), timeout=5)
        assert get(url + "healthz")[0] == 200
        # The first run's data is reused, not loaded again (no migrate, no loader); its children are gone.
        assert "demo data: loaded already" in second.output
        assert "migrations" not in second.output
        assert not any(psutil.pid_exists(pid) for pid in old_children.values())
        assert live_hosts(home, since=restarted, timeout=60) == demo_hosts(home)
        state = second.state()
        assert state["supervisor_pid"] == second.process.pid
        children = [c["pid"] for c in state["children"]]  # type: ignore[union-attr]
        assert {c["name"] for c in state["children"]} == {"web", "worker", "fleet", "ci"}  # type: ignore[union-attr]
        # The page a person waits for comes first: the worker and the live fleet run below it.
        nice = {c["name"]: psutil.Process(c["pid"]).nice() for c in state["children"]}  # type: ignore[union-attr]
        assert (
            nice["worker"] == nice["fleet"] == nice["ci"] == min(nice["web"] + processes.BACKGROUND_NICE, 19)
        ), nice

        # A worker killed mid-run is started again; the web server and the database stay up, and
        # the worker's log keeps every start (the first run's, this run's, the restart's).
        worker_pid = next(c["pid"] for c in state["children"] if c["name"] == "worker")  # type: ignore[union-attr]
        os.killpg(worker_pid, signal.SIGKILL)
        second.wait_for(re.compile(r"worker exited with status -9; restarting it"), timeout=30)
        assert get(url + "healthz")[0] == 200
        restarted_worker = next(c["pid"] for c in second.state()["children"] if c["name"] == "worker")  # type: ignore[union-attr]
        assert restarted_worker != worker_pid and psutil.pid_exists(restarted_worker)
        worker_log = (home / "logs" / "worker.log").read_text()
        assert worker_log.count("===== accelboard demo: worker started at") == 3, worker_log[-2000:]
        children = [c["pid"] for c in second.state()["children"]]  # type: ignore[union-attr]

        # 3. SIGTERM stops the web server, the worker, the live fleet and the embedded PostgreSQL.
        second.process.send_signal(signal.SIGTERM)
        code = second.process.wait(timeout=30)
        time.sleep(0.2)  # the output's last lines, for the message below
        assert code == 0, second.output
    finally:
        if second.process.poll() is None:
            second.process.kill()
    second.drain()
    assert "stopping" in second.output
    assert wait_gone(home) == []
    assert not any(psutil.pid_exists(pid) for pid in children)
    assert not (home / processes.STATE_FILE).exists()
    assert not processes.port_in_use("127.0.0.1", port)


def embedded_connect(home: Path) -> Any:
    import psycopg

    lines = (home / "pgdata" / "postmaster.pid").read_text().splitlines()
    port, socket_dir = lines[3].strip(), lines[4].strip()
    return psycopg.connect(host=socket_dir, port=port, user="postgres", dbname="accelboard")


def embedded_setting(home: Path, name: str) -> str:
    with embedded_connect(home) as conn:
        return conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0]


def demo_hosts(home: Path) -> set[str]:
    with embedded_connect(home) as conn:
        rows = conn.execute("SELECT hostname FROM fleet_host WHERE (facts->>'demo')::boolean").fetchall()
    return {row[0] for row in rows}


def live_hosts(home: Path, *, since: float, timeout: float) -> set[str]:
    """The demo hosts with raw samples taken after ``since`` (epoch s), read straight from the
    embedded server, once every demo host has some (or at the timeout)."""
    deadline = time.monotonic() + timeout
    expected = demo_hosts(home)
    found: set[str] = set()
    while time.monotonic() < deadline:
        with embedded_connect(home) as conn:
            rows = conn.execute(
                "SELECT DISTINCT h.hostname FROM fleet_telemetrysample s JOIN fleet_host h ON h.id = s.host_id "
                "WHERE (h.facts->>'demo')::boolean AND s.time > to_timestamp(%s)",
                (since,),
            ).fetchall()
        found = {row[0] for row in rows}
        if found and found == expected:
            return found
        time.sleep(1)
    return found


def assert_login_works(url: str, username: str, password: str) -> urllib.request.OpenerDirector:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    status, _, page = get(url + "accounts/login/", opener)
    assert status == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token, page[:500]
    form = urllib.parse.urlencode(
        {"username": username, "password": password, "csrfmiddlewaretoken": token.group(1)}
    ).encode()
    request = urllib.request.Request(url + "accounts/login/", data=form)
    with opener.open(request, timeout=10) as response:
        assert response.status == 200
        # A failed login renders the form again; a good one lands on the overview.
        assert "/accounts/login/" not in response.geturl()
    return opener


def test_it_refuses_a_port_that_is_taken(home: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        demo = demo_start(home, port)
        assert demo.process.wait(timeout=60) == 2
        demo.drain()
    assert f"port {port} on 127.0.0.1 is already in use" in demo.output
    assert "--port" in demo.output
    assert wait_gone(home) == []


def test_it_refuses_to_run_twice_for_one_home(home: Path) -> None:
    me = psutil.Process()
    # The module's home exists once a demo ran in it; pytest-xdist may run this test first.
    home.mkdir(parents=True, exist_ok=True)
    processes.RunState(
        path=home / processes.STATE_FILE,
        supervisor_pid=me.pid,
        supervisor_create_time=me.create_time(),
        url="http://127.0.0.1:1/",
    ).write()
    try:
        demo = demo_start(home, free_port())
        assert demo.process.wait(timeout=60) == 2
        demo.drain()
    finally:
        (home / processes.STATE_FILE).unlink()
    assert f"another accelboard demo (pid {me.pid}) is running" in demo.output
    assert wait_gone(home) == []


def _sleeper(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)
    # Popen returns once the child's exec closed its error pipe, which the kernel does before it
    # lays out the new environment: on a busy machine /proc/<pid>/environ can still read empty.
    deadline = time.monotonic() + 10
    while env and time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(process.pid).environ():
                break
        time.sleep(0.01)
    return process


def test_it_stops_orphans_recorded_or_marked_and_spares_recycled_pids(tmp_path: Path) -> None:
    recorded = _sleeper()
    marked = _sleeper({**os.environ, processes.HOME_MARKER: str(tmp_path)})
    stranger = _sleeper()
    try:
        state = processes.RunState(path=tmp_path / processes.STATE_FILE)
        state.children = [
            {"name": "web", "pid": recorded.pid, "create_time": psutil.Process(recorded.pid).create_time()},
            # Same pid as a live process but another creation time: a recycled pid, not ours.
            {"name": "worker", "pid": stranger.pid, "create_time": 12345.0},
        ]
        orphans = processes.orphans_stop(home=tmp_path, state=state, timeout=5)

        assert {o.pid: o.killed for o in orphans} == {recorded.pid: True, marked.pid: True}
        # orphans_stop reaped them (they are this test's children), so their pids are gone.
        assert not psutil.pid_exists(recorded.pid)
        assert not psutil.pid_exists(marked.pid)
        assert stranger.poll() is None
        assert "recorded in the run-state file" in {o.pid: o for o in orphans}[recorded.pid].describe()
    finally:
        for proc in (recorded, marked, stranger):
            proc.kill()
            proc.wait()


def test_it_removes_a_stale_gunicorn_pid_file_only(tmp_path: Path) -> None:
    pidfile = tmp_path / "gunicorn.pid"
    pidfile.write_text(str(os.getpid()))  # alive, but not gunicorn
    assert processes.stale_pidfile_remove(pidfile) is True
    assert not pidfile.exists()
    assert processes.stale_pidfile_remove(pidfile) is False


def test_it_starts_a_background_child_below_the_supervisors_priority(tmp_path: Path) -> None:
    supervisor = processes.Supervisor(home=tmp_path, env=dict(os.environ))
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    try:
        web = supervisor.service("web", sleep)
        loader = supervisor.start("demo_fleet", sleep, nice=processes.BACKGROUND_NICE)
        supervisor.background.append(loader)
        own = psutil.Process().nice()
        assert psutil.Process(web.pid).nice() == own
        assert psutil.Process(loader.pid).nice() == min(own + processes.BACKGROUND_NICE, 19)
    finally:
        supervisor.stop(timeout=5)


def test_it_kills_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    child = processes.child_start(
        name="stubborn",
        argv=[
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(300)",
        ],  # fmt: skip
        env=os.environ,
        log_path=tmp_path / "stubborn.log",
    )
    deadline = time.monotonic() + 10
    while "ready" not in child.log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    assert processes.children_stop([child], timeout=1) == ["stubborn"]
    assert time.monotonic() - started < 5
    assert child.process.returncode == -signal.SIGKILL


def _config(host: str = "127.0.0.1", port: int = 8000) -> runner.DemoConfig:
    return runner.DemoConfig(
        host=host,
        port=port,
        reset=False,
        agent=False,
        home=Path("/srv/demo-home"),
        database_url="postgresql://postgres@/accelboard?host=/srv/demo-home/pgdata",
        broker_url="sqla+postgresql+psycopg://postgres@/accelboard?host=/srv/demo-home/pgdata",
    )


def test_it_hands_children_the_explicit_database_and_broker() -> None:
    # Whatever the caller's environment says, children use the server the supervisor holds.
    parent = {"DATABASE_URL": "postgresql://elsewhere/db", "CELERY_BROKER_URL": "redis://x/0", "PATH": "/bin"}
    env = runner.child_environment(_config(), parent)
    assert env["DATABASE_URL"] == "postgresql://postgres@/accelboard?host=/srv/demo-home/pgdata"
    assert env["CELERY_BROKER_URL"].startswith("sqla+postgresql+psycopg://")
    assert env["ACCELBOARD_HOME"] == "/srv/demo-home"
    assert env["SITE_URL"] == "http://127.0.0.1:8000"
    assert env["PATH"] == "/bin"
    assert "ALLOWED_HOSTS" not in env
    # Alert emails go to the outbox a newcomer can read, unless the caller names a backend.
    assert env["EMAIL_BACKEND"] == OUTBOX_BACKEND
    smtp = "django.core.mail.backends.smtp.EmailBackend"
    assert runner.child_environment(_config(), {"EMAIL_BACKEND": smtp})["EMAIL_BACKEND"] == smtp


def test_it_allows_a_specific_bind_address_as_a_host() -> None:
    env = runner.child_environment(_config(host="10.1.2.3", port=8001), {})
    assert env["ALLOWED_HOSTS"].split(",") == ["127.0.0.1", "localhost", "[::1]", "10.1.2.3"]
    assert env["SITE_URL"] == "http://10.1.2.3:8001"
    # An operator's own ALLOWED_HOSTS wins.
    env = runner.child_environment(_config(host="10.1.2.3"), {"ALLOWED_HOSTS": "demo.example.com"})
    assert env["ALLOWED_HOSTS"] == "demo.example.com"


def test_it_formats_ipv6_and_wildcard_addresses() -> None:
    assert runner.bind_address("::1", 8000) == "[::1]:8000"
    assert runner.bind_address("0.0.0.0", 8000) == "0.0.0.0:8000"
    assert _config(host="::1").url == "http://[::1]:8000/"
    assert _config(host="0.0.0.0").url == "http://127.0.0.1:8000/"
    assert _config(host="::").url == "http://[::1]:8000/"


def test_it_notices_when_a_watched_dependency_dies(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    supervisor = processes.Supervisor(home=tmp_path, env={})
    supervisor.watch_pids = {"embedded PostgreSQL": os.getpid()}
    supervisor.check()  # alive: nothing to report
    supervisor.watch_pids["embedded PostgreSQL"] = gone.pid
    with pytest.raises(processes.DependencyLost, match=rf"embedded PostgreSQL \(pid {gone.pid}\)"):
        supervisor.check()


@pytest.mark.django_db
def test_it_shows_what_is_loading_on_every_page_until_the_load_is_done(
    client: Any, settings: Any, tmp_path: Path
) -> None:
    path = tmp_path / PROGRESS_FILE
    settings.DEMO_PROGRESS_FILE = str(path)
    progress = Progress(path, say=lambda line: None)
    for name in ("people", "fleet", "telemetry_recent"):
        progress.update(name, state="done", seconds=1.0)
    progress.update("costs_recent", state="running")
    page = client.get("/accounts/login/").content.decode()
    assert f"Loading the demo data: 3 of {len(STEPS)} steps done" in page
    assert f'data-demo-loading="{3 * 100 // len(STEPS)}"' in page and "now: costs, last 2 days" in page
    assert progress_read(path)["ready_to_serve"] is False  # type: ignore[index]
    progress.update("costs_recent", state="done", seconds=0.5)
    assert progress_read(path)["ready_to_serve"] is True  # type: ignore[index]
    assert f"Loading the demo data: 4 of {len(STEPS)}" in client.get("/accounts/login/").content.decode()
    progress.finish()
    assert "data-demo-loading" not in client.get("/accounts/login/").content.decode()
    # Outside the demo there is no file and no banner.
    settings.DEMO_PROGRESS_FILE = ""
    assert "data-demo-loading" not in client.get("/accounts/login/").content.decode()
