"""The benches' shared parts that a wrong figure would hide: one run per bench at a time."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path
from types import ModuleType

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db  # the tests' PostgreSQL server (its advisory locks)


def _bench_common() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "bench" / "common.py"
    spec = importlib.util.spec_from_file_location("bench_common", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_second_run_of_a_bench_stops_rather_than_drop_the_first_ones_database() -> None:
    common = _bench_common()
    what = f"database accelboard_bench_{uuid.uuid4().hex[:8]}"
    with common.bench_lock(settings.DATABASE_URL, what):
        with pytest.raises(SystemExit, match=f"another run is using {what} on this server"):
            with common.bench_lock(settings.DATABASE_URL, what):
                pytest.fail("two runs held the same bench's lock")
        with common.bench_lock(settings.DATABASE_URL, "database another_bench"):
            pass  # another bench's run is not held up
    with common.bench_lock(settings.DATABASE_URL, what):
        pass  # free again once the first run ended


@pytest.mark.process
def test_a_bench_database_made_twice_in_one_process_keeps_its_broker_working(tmp_path: Path) -> None:
    """``bench/pages.py`` drops and makes its database again for its 10x pass; the broker of the
    default (kombu's SQLAlchemy transport in that database) kept connections the drop had
    terminated, and the second pass's ``migrate`` died with ``AdminShutdown`` on ``kombu_queue``."""
    import os
    import subprocess
    import sys

    name = f"accelboard_bench_twice_{uuid.uuid4().hex[:8]}"
    script = (
        "import sys; sys.path.insert(0, 'bench')\n"
        "from common import bench_database\n"
        "for attempt in (1, 2):\n"
        f"    with bench_database({name!r}):\n"
        "        from accelboard.fleet.tasks import telemetry_partitions_maintain\n"
        "        telemetry_partitions_maintain.delay()  # a publish to the broker in that database\n"
        "        print('pass', attempt, 'ok', flush=True)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"}
    env["DATABASE_URL"] = settings.DATABASE_URL
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["pass 1 ok", "pass 2 ok"]
