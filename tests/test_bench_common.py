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
