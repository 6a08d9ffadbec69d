"""The Profile tab's HTA-style sections (``profiles.hta``, stored with the profile) and the DCGM
profiling counters of the run's window shown beside them."""

from __future__ import annotations

import io
import re
from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.fleet.models import Accelerator
from accelboard.profiles.hta import counters_reading
from accelboard.profiles.services import profile_attach
from accelboard.testing.traces import KERNELS, write_training_trace
from tests import factories
from tests.fleet.test_profiling_pages import profile as write_profiling_counters
from tests.fleet.test_profiling_pages import raw_means

pytestmark = pytest.mark.django_db

GEMM = KERNELS[0][0]


def _trace(**options: Any) -> bytes:
    buffer = io.BytesIO()
    write_training_trace(buffer, **options)
    return buffer.getvalue()


@pytest.fixture
def profiled_run(team: Any) -> dict[str, Any]:
    """A two-GPU host whose GPU 0 sent DCGM profiling counters, and a run inside that window."""
    factories.accelerator_type_from(factories.H100)
    host, gpus = factories.host_create(team=team, gpus=2)
    times = factories.telemetry_days_load(gpus=gpus, days=1, interval_s=300).times
    write_profiling_counters(gpus[0], times[-36], times[-1] + timedelta(minutes=5))
    h100 = Accelerator.objects.get(pk=gpus[0].pk).accelerator_type
    run = factories.run_create(team=team, accelerator_type=h100, accelerator_count=2, host=host)
    BenchmarkRun.objects.filter(pk=run.pk).update(started_at=times[-24], finished_at=times[-12])
    run.refresh_from_db()
    return {"run": run, "gpus": gpus, "window": (times[-24], times[-12])}


def test_the_profile_tab_shows_the_straggler_launches_steps_and_the_runs_counters(
    profiled_run: dict[str, Any], login_client: Any, lead: Any, django_assert_max_num_queries: Any
) -> None:
    run = profiled_run["run"]
    # Rank 1's GEMMs take three times as long: it reaches every all-reduce last.
    files = [
        ("rank0.json", _trace(rank=0, world_size=2)),
        ("rank1.json", _trace(rank=1, world_size=2, slow={GEMM: 3.0})),
    ]
    stored = profile_attach(run=run, files=files)
    stored.refresh_from_db()
    ranks = stored.hta["ranks"]
    # 3 steps × 2 all-reduces (every other backward layer of 4): 6 collectives, all led by rank 0.
    assert ranks["collectives_matched"] == 6 and ranks["straggler_rank"] == 1
    assert {row["rank"]: row["late_collectives"] for row in ranks["ranks"]} == {0: 0, 1: 6}
    assert all(step["slowest_rank"] == 1 for step in ranks["steps"]) and len(ranks["steps"]) == 3
    client = login_client(lead)
    with django_assert_max_num_queries(24):
        response = client.get(reverse("profiles:run_profile", args=[run.pk]))
    page = response.content.decode()
    for section in (
        'id="hta-idle"',
        'id="hta-launch"',
        'id="hta-ranks"',
        'id="hta-steps"',
        'id="hta-counters"',
    ):
        assert section in page
    assert re.search(r"<b>Rank 1</b> is the straggler", page)
    # The launch cards show the stored figures; every step of both ranks has its row.
    assert page.count('data-step="') == 6
    launch = stored.hta["launch"]["total"]
    assert launch["linked"] == launch["kernels"] > 0 and launch["short_kernels"] == 0
    # Counters beside the breakdown: GPU 0's means over the run's two hours, as stored.
    (row,) = response.context["profiling"]
    assert row["gpu"]["id"] == profiled_run["gpus"][0].pk
    means = raw_means(profiled_run["gpus"][0], *profiled_run["window"])
    counters = response.context["counters"]
    assert counters["tensor_active"] == pytest.approx(25.5)
    assert counters["dram_active"] == pytest.approx(means["dram_active"], rel=1e-6)
    assert counters["reading"].startswith("neither") and 'id="counters-reading"' in page


def test_a_run_without_counters_says_so_and_a_single_rank_has_no_ranks_section(
    profiled_run: dict[str, Any], login_client: Any, lead: Any
) -> None:
    run = profiled_run["run"]
    BenchmarkRun.objects.filter(pk=run.pk).update(finished_at=None)  # no window: no counters
    profile_attach(run=run, files=[("rank0.json", _trace())])
    response = login_client(lead).get(reverse("profiles:run_profile", args=[run.pk]))
    page = response.content.decode()
    assert response.context["profiling"] == [] and response.context["counters"] is None
    assert "No GPU profiling counters for this run" in page
    assert 'id="hta-ranks"' not in page and 'id="hta-idle"' in page


@pytest.mark.parametrize(
    ("rows", "reading"),
    [
        (
            [{"tensor_active": 70.0, "dram_active": 30.0}, {"tensor_active": 50.0, "dram_active": 40.0}],
            "compute",
        ),
        (
            [{"tensor_active": 10.0, "dram_active": 80.0}, {"tensor_active": 20.0, "dram_active": None}],
            "memory",
        ),
        ([{"tensor_active": 10.0, "dram_active": 20.0}], "neither"),
    ],
)
def test_counters_reading_averages_the_gpus_and_names_what_is_busy(
    rows: list[dict[str, Any]], reading: str
) -> None:
    result = counters_reading(rows)
    assert result is not None and result["reading"].startswith(reading)
    tensors = [r["tensor_active"] for r in rows]
    drams = [r["dram_active"] for r in rows if r["dram_active"] is not None]
    assert result["tensor_active"] == pytest.approx(sum(tensors) / len(tensors))
    assert result["dram_active"] == pytest.approx(sum(drams) / len(drams))


def test_no_counters_is_none_never_zero() -> None:
    assert counters_reading([]) is None
    assert counters_reading([{"tensor_active": None, "dram_active": None}]) is None
