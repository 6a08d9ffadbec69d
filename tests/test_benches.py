"""Every bench in bench/ runs to its last line (its ``key=value`` figures) at its smallest size.

``--quick`` (``bench/common.quick_parse``) runs each at the smallest size that still reaches every
line; its figures mean nothing, so a missed target (exit 1) is fine here, a crash is not. The
benches with a database run on the tests' server (``DATABASE_URL``, only its server part), and
once more on the embedded default (no ``DATABASE_URL``: a PostgreSQL of their own under a
temporary ``ACCELBOARD_HOME``), where ``bench/pages.py`` once died before its last line.
The stack benches (``fleet_load``, ``remote_write``) need Redis: the tests' own database on it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from accelboard.testing.pytest_plugin import REDIS_DBS_VARIABLE

ROOT = Path(__file__).resolve().parents[1]
BENCHES = sorted(
    p.stem for p in (ROOT / "bench").glob("*.py") if 'if __name__ == "__main__"' in p.read_text()
)
# Those that make a database of their own (bench/common.bench_database).
WITH_DATABASE = sorted(b for b in BENCHES if "bench_database(" in (ROOT / "bench" / f"{b}.py").read_text())
LAST_LINE = re.compile(r"[a-z][\w.]*=\S+( [a-z][\w.]*=\S+)*")
TIMEOUT_S = 600

pytestmark = [pytest.mark.process, pytest.mark.django_db]


def redis_broker() -> str:
    configured = os.environ.get("CELERY_BROKER_URL", "")
    if configured.startswith("redis"):
        return configured
    db = (os.environ.get(REDIS_DBS_VARIABLE) or "15").split(",")[0].strip()
    return f"redis://127.0.0.1:6379/{db}"


@pytest.fixture(scope="module")
def embedded_home() -> Iterator[Path]:
    # Not under pytest's basetemp (see tests/test_demo_command.py's ``home``).
    base = Path(tempfile.mkdtemp(prefix="accelboard-bench-test-"))
    yield base / "home"
    shutil.rmtree(base, ignore_errors=True)


def bench_run(bench: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(ROOT / "bench" / f"{bench}.py"), "--quick"]
    if bench in ("fleet_load", "remote_write"):
        argv += ["--broker", redis_broker()]
    if bench == "newcomer":
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            argv += ["--port", str(sock.getsockname()[1])]
    return subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )


def assert_ran_to_the_end(result: subprocess.CompletedProcess[str]) -> None:
    said = f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    assert result.returncode in (0, 1), said
    assert "Traceback" not in result.stderr, said
    lines = result.stdout.strip().splitlines()
    assert lines and LAST_LINE.fullmatch(lines[-1]), said


@pytest.mark.parametrize("bench", BENCHES)
def test_it_runs_to_its_last_line_at_its_smallest_size(bench: str) -> None:
    env = {**os.environ, "DATABASE_URL": settings.DATABASE_URL, "PYTHONUNBUFFERED": "1"}
    assert_ran_to_the_end(bench_run(bench, env))


@pytest.mark.parametrize("bench", WITH_DATABASE)
def test_it_runs_to_its_last_line_on_the_embedded_default(bench: str, embedded_home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(ACCELBOARD_HOME=str(embedded_home), PYTHONUNBUFFERED="1")
    assert_ran_to_the_end(bench_run(bench, env))
