"""The demo fleet loads its costs: every host-day of telemetry priced, run and serving costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.core.access import EVERY_TEAM
from accelboard.costs.filters import CostFilters
from accelboard.costs.models import CostDaily, RunCost, ServingCostDaily
from accelboard.costs.report_selectors import cost_report
from accelboard.fleet.models import Host, TelemetryRollup
from tests.test_demo_fleet import _load, empty_telemetry, fast_passwords  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_loads_a_month_of_costs_with_the_demo(empty_telemetry: None, tmp_path: Path) -> None:  # noqa: F811
    output = _load(tmp_path)
    assert "costs, last 2 days:" in output
    assert "telemetry and its costs, older days:" in output
    assert "benchmark runs and their costs:" in output
    assert "costs of serving:" in output

    rollup_days = {
        b.date() for b in TelemetryRollup.objects.filter(width_s=60).values_list("bucket", flat=True)
    }
    assert set(CostDaily.objects.values_list("day", flat=True)) == rollup_days
    # Every demo host is in the price book (no unpriced rows), and each row's capacity is its
    # GPU-hours at its price row's rate.
    assert not CostDaily.objects.filter(total_cost=None).exists()
    for row in CostDaily.objects.all():
        assert float(row.capacity_cost) == pytest.approx(row.alloc_hours * float(row.gpu_hour_rate), abs=1e-3)
        assert row.idle_hours <= row.alloc_hours and row.busy_hours <= row.alloc_hours
    assert set(CostDaily.objects.exclude(project="").values_list("host_id", flat=True)) == set(
        Host.objects.values_list("id", flat=True)
    )
    # The Lambda row of the demo book was read 45 days ago: its host's days are marked stale.
    assert (
        CostDaily.objects.filter(price_stale=True, provider="lambda").exists()
        == Host.objects.filter(provider="lambda").exists()
    )

    month = max(rollup_days)
    report = cost_report(scope=EVERY_TEAM, filters=CostFilters(month=month), today=month)
    assert report.total.total_cost > 0 and not report.unconverted
    teams = report.breakdowns["team"]
    assert sum(t.total_cost for t in teams) == pytest.approx(report.total.total_cost)

    assert RunCost.objects.count() == BenchmarkRun.objects.count()
    assert ServingCostDaily.objects.filter(generated_tokens__gt=0, cost_per_1m_tokens__gt=0).exists()
