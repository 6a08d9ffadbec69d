"""What a newcomer sees: a fresh clone, the README's run command, the clock on the first page.

1. ``git clone`` of this checkout (its committed HEAD) into a temporary folder.
2. ``make install`` there, timed (``install_s``): the venv and the packages, as ``make demo``'s
   first part; the warning boxes setuptools would print are counted (``install_boxes``, 0 wanted).
3. ``make demo ARGS="--port P"`` (the README's run command), on a new data directory. The clock
   starts when ``accelboard demo`` starts (the install is done, so ``make`` only checks its stamp);
   ``first_page_s``: once it prints its URL, the overview answers the demo admin with real
   figures (this week's spend and GPU-hours above 0); ``ready_s``: the demo says its data is loaded; then Ctrl-C.
4. ``make demo`` again on the same data: ``second_start_s`` to the same first page; Ctrl-C.

``--quick`` checks that all of it runs, not how fast: no install (``install_s=nan``; the clone
runs on this interpreter, its own code first on the path) and a demo fleet of one host.

Targets (``--first-page``, ``--ready``, ``--second-start``): 20 s, 60 s, 5 s on a quiet two-core
machine. Prints each figure with its target and ratio, ends with one ``key=value`` line, exits 1
when a target is missed (2 when the run itself failed).

    .venv/bin/python bench/newcomer.py               # python3 for the new venv, port 8190
    .venv/bin/python bench/newcomer.py --python python3.12 --port 8191
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import quick_parse  # noqa: E402

# --quick: the demo fleet of tests/test_demo_command.py, loaded in seconds.
QUICK_FLEET = "--hosts 1 --days-runs 10 --days-telemetry 1 --telemetry-interval 3600 --serving-interval 3600"
LOGIN = ("admin", "demo-admin")
FIGURE = re.compile(r'data-figure="(spend|gpu-hours)">\s*([\d,]+)')


def login(url: str) -> urllib.request.OpenerDirector | None:
    """A session logged in as the demo admin, or None (once: failed logins lock an account out)."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    try:
        page = opener.open(url + "accounts/login/", timeout=30).read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        if not token:
            return None
        form = {"username": LOGIN[0], "password": LOGIN[1], "csrfmiddlewaretoken": token.group(1)}
        request = urllib.request.Request(url + "accounts/login/", data=urllib.parse.urlencode(form).encode())
        with opener.open(request, timeout=60) as response:
            return None if "/accounts/login/" in response.geturl() else opener
    except (OSError, urllib.error.URLError):
        return None


def overview_figures(opener: urllib.request.OpenerDirector, url: str) -> dict[str, float] | None:
    """The overview's spend and GPU-hours as the logged-in session reads them, or None."""
    try:
        body = opener.open(url, timeout=60).read().decode()
    except (OSError, urllib.error.URLError):
        return None
    figures: dict[str, float] = {}
    for name, value in FIGURE.findall(body):
        figures.setdefault(name, float(value.replace(",", "")))
    return figures


class Demo:
    """``make demo`` in the clone, its output collected line by line with the time each came."""

    def __init__(self, clone: Path, port: int, env: dict[str, str], *, quick: bool = False) -> None:
        self.started = time.monotonic()
        command = ["make", "--no-print-directory", "demo", f"ARGS=--port {port}"]
        if quick:  # no venv in the clone: this interpreter, the clone's code (cwd) first
            command = [sys.executable, "-m", "accelboard.cli", "demo", "--port", str(port), "--no-agent"]
        self.process = subprocess.Popen(
            command,
            cwd=clone,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[tuple[float, str]] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append((time.monotonic() - self.started, line.rstrip("\n")))

    def seen(self, pattern: str) -> float | None:
        return next((at for at, line in self.lines if re.search(pattern, line)), None)

    def stop(self) -> int:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait(timeout=10)


def first_page(demo: Demo, url: str, *, timeout: float) -> float | None:
    """Seconds from the demo's start to an overview with real figures, or None. As a newcomer:
    once the demo prints its URL, log in (once) and open the overview until it has figures."""
    opener = None
    while time.monotonic() - demo.started < timeout:
        if demo.process.poll() is not None:
            return None
        if demo.seen(r"accelboard is running at") is None:
            time.sleep(0.1)
            continue
        opener = opener or login(url)
        figures = overview_figures(opener, url) if opener else None
        if figures and figures.get("spend", 0) > 0 and figures.get("gpu-hours", 0) > 0:
            return time.monotonic() - demo.started
        time.sleep(0.25)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="python3", help="the interpreter make uses for the new venv")
    parser.add_argument("--port", type=int, default=8190)
    parser.add_argument("--first-page", type=float, default=20.0, help="target, s (default 20)")
    parser.add_argument("--ready", type=float, default=60.0, help="target, s (default 60)")
    parser.add_argument("--second-start", type=float, default=5.0, help="target, s (default 5)")
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    parser.add_argument("--timeout", type=float, default=600.0, help="for the first page, s (default 600)")
    parser.add_argument("--fleet-args", default="", help=argparse.SUPPRESS)
    args = quick_parse(parser, argv, timeout=240.0, fleet_args=QUICK_FLEET)

    base = Path(tempfile.mkdtemp(prefix="accelboard-newcomer-"))
    clone = base / "accelboard"
    url = f"http://127.0.0.1:{args.port}/"
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "VIRTUAL_ENV")
    }
    env.pop("ACCELBOARD_HOME", None)
    env["PYTHONUNBUFFERED"] = "1"
    if args.fleet_args:
        env["ACCELBOARD_DEMO_FLEET_ARGS"] = args.fleet_args
    figures: dict[str, float | None] = {}
    boxes = 0
    try:
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        began = time.monotonic()
        install = subprocess.CompletedProcess(args=[], returncode=0, stdout="", stderr="")
        if not args.quick:
            install = subprocess.run(
                ["make", "--no-print-directory", "install", f"PYTHON={args.python}"],
                cwd=clone,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        figures["install_s"] = None if args.quick else time.monotonic() - began
        output = install.stdout + install.stderr
        boxes = output.count("Please be careful")
        if install.returncode != 0:
            print(output[-3000:], file=sys.stderr)
            print(f"newcomer: make install failed ({install.returncode})", file=sys.stderr)
            return 2
        if not args.quick:
            print(
                f"install: {time.monotonic() - began:.1f} s, {len(output.splitlines())} lines, {boxes} warning boxes"
            )

        demo = Demo(clone, args.port, env, quick=args.quick)
        try:
            figures["first_page_s"] = first_page(demo, url, timeout=args.timeout)
            while demo.seen(r"demo data loaded in") is None and demo.process.poll() is None:
                if time.monotonic() - demo.started > 2 * args.timeout:
                    break
                time.sleep(0.25)
            figures["ready_s"] = demo.seen(r"demo data loaded in")
        finally:
            demo.stop()
        print("first start, as printed:")
        for at, line in demo.lines:
            print(f"  {at:6.1f}  {line}")

        second = Demo(clone, args.port, env, quick=args.quick)
        try:
            figures["second_start_s"] = first_page(second, url, timeout=min(120.0, args.timeout))
        finally:
            second.stop()
        print("second start, as printed:")
        for at, line in second.lines:
            print(f"  {at:6.1f}  {line}")
    finally:
        if args.keep:
            print(f"clone kept: {clone}")
        else:
            shutil.rmtree(base, ignore_errors=True)

    targets = {"first_page_s": args.first_page, "ready_s": args.ready, "second_start_s": args.second_start}
    missed = []
    for name, target in targets.items():
        value = figures.get(name)
        if value is None:
            print(f"{name}: not reached")
            missed.append(name)
            continue
        print(f"{name}: {value:.1f} s (target {target:g} s, ratio {value / target:.2f})")
        if value > target:
            missed.append(name)
    print(
        f"load: {os.getloadavg()[0]:.2f} (1-minute load average at the end; the targets are for a quiet machine)"
    )
    line = " ".join(
        f"{name}={value:.1f}" if value is not None else f"{name}=nan"
        for name, value in [("install_s", figures.get("install_s")), *[(n, figures.get(n)) for n in targets]]
    )
    print(f"{line} install_boxes={boxes} missed={','.join(missed) or 'none'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
