"""DCGM profiling counters on the host page and the run page: shown where a GPU sent them, as the
means of their stored samples; not shown (never 0) where it did not."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.fleet.charts import PROFILING_LABELS
from accelboard.fleet.models import Accelerator
from accelboard.fleet.rollup_services import telemetry_rollups_refresh
from accelboard.fleet.selectors import gpu_profiling_averages
from accelboard.testing.plotly import trace_values
from tests import factories

pytestmark = pytest.mark.django_db

# The profiling values written into GPU 0's last three hours (SM occupancy left out: not sent).
PROFILED = {
    "sm_active": "40 + extract(minute FROM time)::int %% 20",
    "tensor_active": "25.5",
    "dram_active": "10 + extract(hour FROM time)::int",
    "gr_engine_active": "90",
}


def profile(gpu: Accelerator, since: Any, until: Any) -> None:
    """Write ``PROFILED`` into ``gpu``'s raw rows from ``since`` and refresh the rollups."""
    assignments = ", ".join(f"{name} = {expression}" for name, expression in PROFILED.items())
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE fleet_telemetrysample SET {assignments} WHERE accelerator_id = %s AND time >= %s",
            [gpu.pk, since],
        )
    telemetry_rollups_refresh(start=since - timedelta(hours=1), end=until + timedelta(minutes=5))


def raw_means(gpu: Accelerator, since: Any, until: Any) -> dict[str, float | None]:
    """The means of the stored samples themselves (what the page must show)."""
    names = list(PROFILING_LABELS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(f'avg({name})' for name in names)} FROM fleet_telemetrysample "
            "WHERE accelerator_id = %s AND time >= %s AND time < %s",
            [gpu.pk, since, until],
        )
        return dict(zip(names, cursor.fetchone(), strict=True))


@pytest.fixture
def host(team: Any) -> dict[str, Any]:
    factories.accelerator_type_from(factories.H100)
    host, gpus = factories.host_create(team=team, gpus=2)
    batch = factories.telemetry_days_load(gpus=gpus, days=1, interval_s=300)
    return {"host": host, "gpus": gpus, "batch": batch}


def test_a_host_without_profiling_counters_shows_no_profiling_chart_nor_card(
    login_client: Any, lead: Any, host: dict[str, Any]
) -> None:
    response = login_client(lead).get(reverse("fleet:host_detail", args=[host["host"].pk]) + "?range=24h")
    page = response.content.decode()
    assert 'id="profiling-chart"' not in page and 'id="profiling-figure"' not in page
    assert 'id="gpu-profiling"' not in page
    assert response.context["profiling"] == []
    assert 'id="power-chart"' in page  # the other charts are there


@pytest.mark.parametrize("range_key", ["6h", "24h"])
def test_the_host_page_shows_each_gpus_profiling_means_where_it_sent_them(
    login_client: Any, lead: Any, host: dict[str, Any], range_key: str, django_assert_max_num_queries: Any
) -> None:
    gpus, times = host["gpus"], host["batch"].times
    since, until = times[-36], times[-1] + timedelta(minutes=5)  # the last three hours
    profile(gpus[0], since, until)
    client = login_client(lead)
    with django_assert_max_num_queries(9):  # as without the counters: they come with the rollups
        response = client.get(reverse("fleet:host_detail", args=[host["host"].pk]) + f"?range={range_key}")
    page = response.content.decode()
    assert 'id="profiling-chart"' in page and 'id="gpu-profiling"' in page

    # The card: GPU 0 only, each counter the mean of its stored samples; SM occupancy blank.
    (row,) = response.context["profiling"]
    assert row["gpu"]["id"] == gpus[0].pk
    expected = raw_means(gpus[0], since, until)
    assert expected["sm_occupancy"] is None and expected["sm_active"] is not None
    for name, value in zip(PROFILING_LABELS, row["values"], strict=True):
        assert value == (None if expected[name] is None else pytest.approx(expected[name], rel=1e-6)), name
    assert (
        f'data-gpu="{gpus[0].uuid}"' in page
        and f'data-gpu="{gpus[1].uuid}"' not in page.split("gpu-profiling")[1].split("</section>")[0]
    )
    assert f"{expected['tensor_active']:.1f} %" in page
    # The same means as the selector reads from the rollups (the run page's).
    read = gpu_profiling_averages(accelerator_ids=[g.pk for g in gpus], start=since, end=until, width_s=60)
    assert list(read) == [gpus[0].pk]
    assert read[gpus[0].pk]["dram_active"] == pytest.approx(expected["dram_active"], rel=1e-6)

    # The chart: GPU 0's SM, tensor and DRAM lines, the bins' means of the same samples.
    figure = response.context["figures"]["profiling"]
    assert [trace["name"] for trace in figure["data"]] == [
        "GPU 0 SM active",
        "GPU 0 Tensor pipe active",
        "GPU 0 DRAM active",
    ]
    tensor = [v for v in trace_values(figure["data"][1]["y"]) if v == v]
    assert tensor and all(v == pytest.approx(25.5) for v in tensor)
    sm = [v for v in trace_values(figure["data"][0]["y"]) if v == v]
    assert min(sm) >= 40 and max(sm) < 60
    assert figure["layout"]["yaxis"]["title"]["text"] == "Active (%)"


def test_the_run_page_shows_the_profiling_means_of_its_hosts_gpus_during_the_run(
    login_client: Any, lead: Any, team: Any, host: dict[str, Any]
) -> None:
    gpus, times = host["gpus"], host["batch"].times
    since, until = times[-36], times[-1] + timedelta(minutes=5)
    profile(gpus[0], since, until)
    h100 = Accelerator.objects.get(pk=gpus[0].pk).accelerator_type
    run = factories.run_create(team=team, accelerator_type=h100, accelerator_count=2, host=host["host"])
    started, finished = times[-24], times[-12]  # two hours inside the profiled three
    BenchmarkRun.objects.filter(pk=run.pk).update(started_at=started, finished_at=finished)
    response = login_client(lead).get(reverse("benchmarks:run_detail", args=[run.pk]))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="run-profiling"' in page
    (row,) = response.context["profiling"]
    assert row["gpu"]["id"] == gpus[0].pk
    # Minute rollups from the run's start to its end: at one sample every 5 minutes, the same
    # samples as the raw rows of [start, end).
    expected = raw_means(gpus[0], started, finished)
    for name, value in zip(PROFILING_LABELS, row["values"], strict=True):
        assert value == (None if expected[name] is None else pytest.approx(expected[name], rel=1e-6)), name

    # A run on a host whose GPUs sent no profiling counter: no card.
    BenchmarkRun.objects.filter(pk=run.pk).update(started_at=times[0], finished_at=times[10])
    response = login_client(lead).get(reverse("benchmarks:run_detail", args=[run.pk]))
    assert 'id="run-profiling"' not in response.content.decode() and response.context["profiling"] == []
