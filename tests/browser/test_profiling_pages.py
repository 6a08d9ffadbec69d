"""DCGM profiling counters on a host's page in a real browser: the card and the chart show the
means of the stored samples for the GPUs that sent them, and nothing for those that did not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from accelboard.fleet.rollup_services import telemetry_rollups_refresh
from tests import factories
from tests.browser.numbers import console_problems, page_number_problems

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

COUNTERS = ["sm_active", "tensor_active", "dram_active", "sm_occupancy", "gr_engine_active"]  # card order


def _means(gpu_id: int, since: datetime) -> dict[str, float | None]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(f'avg({name})' for name in COUNTERS)} FROM fleet_telemetrysample "
            "WHERE accelerator_id = %s AND time >= %s",
            [gpu_id, since],
        )
        return dict(zip(COUNTERS, cursor.fetchone(), strict=True))


def test_the_host_page_shows_profiling_counters_equal_to_the_stored_means(
    page: Any, login: Any, screenshot: Any, lead: Any, team: Any
) -> None:
    factories.accelerator_type_from(factories.H100)
    host, gpus = factories.host_create(team=team, gpus=4, hostname="dcgm-prof-01")
    now = datetime.now(UTC)
    batch = factories.telemetry_load(
        gpus=gpus, start=now - timedelta(hours=5), end=now - timedelta(minutes=2), interval_s=60
    )
    since = batch.times[0]
    # GPUs 0 and 1 send DCGM's profiling counters (as dcgm-exporter's ratios x 100), GPU 1 without
    # SM occupancy; GPUs 2 and 3 send none.
    with connection.cursor() as cursor:
        cursor.execute(
            """UPDATE fleet_telemetrysample SET
                sm_active = 55 + 30 * sin(extract(epoch FROM time) / 900) + accelerator_id %% 2 * 5,
                tensor_active = 35 + 25 * sin(extract(epoch FROM time) / 1300),
                dram_active = 20 + 15 * cos(extract(epoch FROM time) / 700),
                sm_occupancy = CASE WHEN accelerator_id = %s THEN 30 + 10 * sin(extract(epoch FROM time) / 500) END,
                gr_engine_active = 70 + 25 * sin(extract(epoch FROM time) / 900)
            WHERE accelerator_id = ANY(%s)""",
            [gpus[0].pk, [gpus[0].pk, gpus[1].pk]],
        )
    telemetry_rollups_refresh(start=since - timedelta(minutes=5), end=now)

    login(page, lead)
    page.goto(f"/hosts/{host.pk}/?range=6h")
    page.wait_for_selector("#profiling-chart .main-svg")

    # The card: one row per GPU that sent counters, each cell the mean of its stored samples.
    rows = page.locator("#gpu-profiling tbody tr")
    assert rows.count() == 2
    for gpu, row in zip(gpus[:2], [rows.nth(0), rows.nth(1)], strict=True):
        assert row.get_attribute("data-gpu") == gpu.uuid
        expected = _means(gpu.pk, since)
        cells = row.locator("td")
        for i, name in enumerate(COUNTERS):
            cell = cells.nth(i)
            if expected[name] is None:
                assert cell.inner_text().strip() == "" and cell.get_attribute("data-value") is None, name
                continue
            assert float(cell.get_attribute("data-value")) == pytest.approx(expected[name], rel=1e-6), name
            assert cell.inner_text().strip() == f"{expected[name]:.1f} %", name
    assert "GPU 2" not in page.inner_text("#gpu-profiling")

    # The chart: SM, tensor and DRAM lines of GPUs 0 and 1, as drawn; one sample a minute in
    # minute rollups, so each line's points are the samples and their mean the stored mean.
    names = page.evaluate("document.getElementById('profiling-chart').data.map(t => t.name)")
    assert names == [
        "GPU 0 SM active",
        "GPU 1 SM active",
        "GPU 0 Tensor pipe active",
        "GPU 1 Tensor pipe active",
        "GPU 0 DRAM active",
        "GPU 1 DRAM active",
    ]
    drawn = page.evaluate(
        """() => document.getElementById('profiling-chart')._fullData.map(
            t => Array.from(t.y).filter(v => v === v))"""
    )
    for trace, (name, gpu) in enumerate([(n, g) for n in COUNTERS[:3] for g in gpus[:2]]):
        values = drawn[trace]
        assert len(values) == len(batch.times)
        assert sum(values) / len(values) == pytest.approx(_means(gpu.pk, since)[name], rel=1e-5), (name, gpu)
    assert page_number_problems(page, where="host profiling") == []
    assert console_problems(page.console, where="host profiling") == []
    assert page.js_errors == []
    page.locator("#profiling-chart").scroll_into_view_if_needed()
    screenshot(page, "host-detail-profiling")
