"""A workload's page, the workload list and the host page's "who ran on each GPU" in a real
browser, over the shared host's allocated day (tests/attribution/conftest.py): the timeline drawn
by Plotly with one row per device held, the cost as allocated, and no console error."""

from __future__ import annotations

from typing import Any

import pytest

from accelboard.fleet.models import Host, Workload
from tests.attribution.conftest import DAY, world  # noqa: F401 (the fixture, shared)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_draws_a_workloads_gpus_and_cost_and_the_hosts_holders(
    page: Any,
    login: Any,
    screenshot: Any,
    lead: Any,
    world: dict[str, Any],  # noqa: F811
) -> None:
    pod_a = Workload.objects.get(namespace="ns-a")
    login(page, lead)
    page.goto("/workloads/")
    rows = page.locator("#workloads-table tbody tr[data-workload]")
    assert rows.count() == 3
    screenshot(page, "workload-list")
    with page.expect_navigation():
        page.click(f"tr[data-workload='{pod_a.pk}'] a")
    assert page.url.endswith(f"/workloads/{pod_a.pk}/")
    page.goto(f"/workloads/{pod_a.pk}/?start={DAY.isoformat()}&end={DAY.isoformat()}")
    page.wait_for_selector("#timeline-chart .main-svg")
    rows_drawn = page.evaluate(
        "[...new Set(document.getElementById('timeline-chart').data.flatMap(t => t.y))].sort()"
    )
    assert rows_drawn == ["shared-node GPU 0", "shared-node GPU 1 · MIG 3/7", "shared-node GPU 2"]
    held_ms = page.evaluate(
        "document.getElementById('timeline-chart').data.flatMap(t => t.x).reduce((a, b) => a + b, 0)"
    )
    assert held_ms == (12 + 24 + 24) * 3600 * 1000
    money = page.locator("#workload-money tbody tr")
    assert money.get_attribute("data-cost-allocation") == "495.11"
    assert "n/a" in page.inner_text("#workload-tokens")
    screenshot(page, "workload-detail")

    host = Host.objects.get(hostname="shared-node")
    page.goto(f"/hosts/{host.pk}/?range=30d")
    section = page.locator("#gpu-holders")
    assert section.locator("tbody[data-gpu]").count() == 4
    assert section.locator("tr.mig-row").count() == 2
    section.locator(f"a[href='/workloads/{pod_a.pk}/']").first.scroll_into_view_if_needed()
    screenshot(page, "host-who-ran")
    assert page.js_errors == []
    assert page.console == []
