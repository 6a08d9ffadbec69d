"""A fresh demo's hosts page in Chromium: every host live, fed by the live fleet through the real API.

The demo fleet is loaded as it was half an hour ago, so by its loaded telemetry alone every host
is stale (checked first, on the page); then the live fleet (``accelboard.demo.live``, the process
``accelboard demo`` runs) posts one round of batches to the live server's ingest API in the agent's
wire format, and the same page shows every host live, with the deliberately unhealthy GPUs
flagged: the hot one throttled for heat, the slowed one for a hardware slowdown.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from accelboard.demo import live
from accelboard.fleet.models import Accelerator, Host

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(transactional_db: None, settings: Any) -> Any:
    # Fourteen PBKDF2 hashes take seconds; the login below is checked all the same.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE fleet_telemetrysample")
    loaded_at = (datetime.now(UTC) - timedelta(minutes=30)).replace(microsecond=0)
    call_command(
        "demo_fleet",
        "--hosts=6",
        "--days-runs=10",
        "--days-telemetry=1",
        "--telemetry-interval=600",
        "--serving-interval=3600",
        f"--now={loaded_at.isoformat()}",
        stdout=StringIO(),
    )
    yield
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE fleet_telemetrysample")


def _grid(page: Any) -> dict[str, str]:
    """Hostname -> its badge (live or stale), as the page shows them."""
    return page.eval_on_selector_all(
        "article.host",
        "cards => Object.fromEntries(cards.map(c => [c.querySelector('h2').innerText.trim(),"
        " c.querySelector('.host-head .badge').innerText.trim()]))",
    )


def test_a_fresh_demos_hosts_page_shows_live_hosts(
    demo: Any, page: Any, live_server: Any, screenshot: Any
) -> None:
    hostnames = set(Host.objects.filter(facts__demo=True).values_list("hostname", flat=True))
    assert len(hostnames) == 6
    page.goto("/accounts/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "demo-admin")
    with page.expect_navigation():
        page.click("button[type=submit]")

    page.goto("/hosts/")
    assert _grid(page) == dict.fromkeys(hostnames, "stale"), "the loaded telemetry alone is half an hour old"

    assert live.run(server=live_server.url, interval_s=1, ticks=1) == 0
    page.goto("/hosts/")
    assert _grid(page) == dict.fromkeys(hostnames, "live")
    assert "stale" not in page.inner_text("#fleet-summary")
    screenshot(page, "demo-live-hosts")

    # The deliberately unhealthy GPUs: named by the live fleet, shown on the grid with their reasons.
    hosts = sorted(hostnames)
    for position, index, problem in live.UNHEALTHY:
        gpu = Accelerator.objects.get(host__hostname=hosts[position], index=index)
        card = page.locator(f'[data-gpu="{gpu.pk}"]')
        if problem == "xid":
            assert gpu.last_state["xid_errors"] > 0 and gpu.last_state["ecc_errors"] > 0
            continue
        badge = card.locator(".badge.throttled")
        assert badge.inner_text() == "throttled", problem
        reasons = badge.get_attribute("title") or ""
        assert ("thermal" in reasons.lower()) if problem == "hot" else ("slowdown" in reasons.lower()), (
            reasons
        )
    healthy = Accelerator.objects.filter(host__hostname__in=hosts[3:])
    assert healthy.exists() and all(not (g.last_state.get("throttle_reasons", 0) & 0x68) for g in healthy)
