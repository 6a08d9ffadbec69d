"""Live figures ("now", "reporting", "live") count fresh data only, by the hosts page's one stale
rule (``fleet.selectors.freshness_definition``), and say how fresh: every page of the test world
(``tests/browser/world.py``) with one of its hosts gone stale, as a team member and as staff.

The overview said "9 GPUs now · of 85 reporting" while the hosts page said 15 hosts were stale:
the overview counted every GPU's last sample, however old.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.urls import reverse

from accelboard.fleet import selectors
from accelboard.fleet.models import Accelerator, Host
from tests import numbers
from tests.browser.test_every_page import PAGES
from tests.browser.world import World, world_create

pytestmark = pytest.mark.django_db

# What the lead (the team: the H100 host live with one GPU throttled, the L4 host stale with its
# GPUs' last samples throttled) and staff (the other team's live host too) must see everywhere.
EXPECTED = {
    "lead": {"hosts": 2, "hosts-live": 1, "hosts-stale": 1, "gpus": 4, "gpus-live": 2, "throttled-now": 1},
    "staff": {"hosts": 3, "hosts-live": 2, "hosts-stale": 1, "gpus": 6, "gpus-live": 4, "throttled-now": 1},
}


class _Text(HTMLParser):
    """A page's text nodes, " | "-joined as the browser walk reads them (no scripts, no code)."""

    SKIP = {"script", "style", "code", "pre", "template", "noscript"}

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self.SKIP:
            self.skipping += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self.skipping and data.strip():
            self.parts.append(data.strip())


def page_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    return " | ".join(parser.parts)


def marked(html: str, attribute: str) -> dict[str, int]:
    """``<x data-live="hosts-live">3</x>`` -> {"hosts-live": 3}."""
    return {key: int(value) for key, value in re.findall(rf'{attribute}="([\w-]+)">(\d+)<', html)}


@pytest.fixture
def stale_world(team: Any, other_team: Any) -> World:
    world = world_create(team=team, other_team=other_team)
    now = datetime.now(UTC)
    # The L4 host's agent stopped 20 minutes ago; its GPUs' last samples were throttled.
    ago = now - timedelta(minutes=20)
    for gpu in Accelerator.objects.filter(host=world.l4_host):
        gpu.last_state = {**gpu.last_state, "throttle_reasons": 0x4, "time": ago.isoformat()}
        gpu.last_seen_at = ago
        gpu.save(update_fields=["last_state", "last_seen_at"])
    Host.objects.filter(pk=world.l4_host.pk).update(last_seen_at=ago)
    # One live GPU of the H100 host is throttled now.
    gpu = Accelerator.objects.filter(host=world.h100_host).order_by("index").first()
    assert gpu is not None
    gpu.last_state = {**gpu.last_state, "throttle_reasons": 0x4}
    gpu.save(update_fields=["last_state"])
    return world


@pytest.mark.parametrize("role", ["lead", "staff"])
def test_it_counts_only_fresh_data_as_live_and_agrees_across_pages(
    role: str, login_client: Any, cast: dict[str, Any], stale_world: World
) -> None:
    client = login_client(cast[role])
    expected = EXPECTED[role]
    overview = client.get(reverse("dashboard:overview"))
    hosts = client.get(reverse("fleet:hosts"))
    assert overview.status_code == hosts.status_code == 200
    live = hosts.context["live"]
    # The figures add up: fresh + stale = every host (GPU), by the hosts page's stale rule.
    assert live["hosts_live"] + live["hosts_stale"] == live["hosts"] == len(hosts.context["grid"])
    assert live["gpus_live"] + live["gpus_stale"] == live["gpus"]
    assert live["hosts_stale"] == sum(1 for item in hosts.context["grid"] if item["stale"])
    # The overview's cards are the hosts page's counts, the same live figures.
    summary, overview_live = overview.context["summary"], overview.context["live"]
    assert (summary["hosts"], summary["gpus"]) == (live["hosts"], live["gpus"])
    assert {k: v for k, v in overview_live.items() if k != "as_of"} == {
        k: v for k, v in live.items() if k != "as_of"
    }
    # Throttled "now" counts live GPUs only, of the GPUs reporting now, on both pages.
    for throttling in (overview.context["saturation"]["throttling"], hosts.context["throttling"]):
        assert (throttling["now"], throttling["reporting"]) == (
            expected["throttled-now"],
            expected["gpus-live"],
        )
    # What the pages write.
    overview_html, hosts_html = overview.content.decode(), hosts.content.decode()
    on_overview, on_hosts = marked(overview_html, "data-live"), marked(hosts_html, "data-live")
    for key in ("hosts-live", "gpus-live", "hosts-stale"):
        assert on_overview[key] == on_hosts[key] == expected[key], key
    kpis = marked(overview_html, "data-kpi")
    assert (
        (kpis["hosts"], kpis["gpus"])
        == (on_hosts["hosts"], on_hosts["gpus"])
        == (expected["hosts"], expected["gpus"])
    )
    assert marked(overview_html, "data-sat")["throttled-now"] == marked(hosts_html, "data-throttled")["now"]
    assert (
        marked(overview_html, "data-sat")["reporting-now"]
        == marked(hosts_html, "data-throttled")["reporting"]
    )
    assert marked(hosts_html, "data-throttled")["now"] == expected["throttled-now"]
    # A stale host's GPUs are not marked throttled now on the grid (their last sample was).
    assert hosts_html.count('<span class="badge throttled" title="Now:') == expected["throttled-now"]
    # Each host page says live or stale as the grid does.
    for item in hosts.context["grid"]:
        detail = client.get(reverse("fleet:host_detail", args=[item["host"].pk]))
        assert detail.context["stale"] is item["stale"]
        assert [gpu["live"] for gpu in detail.context["telemetry"]["gpus"]] == [
            gpu["live"] for gpu in item["gpus"]
        ]


@pytest.mark.parametrize("role", ["lead", "staff"])
def test_every_page_says_how_fresh_its_live_figures_are(
    role: str, login_client: Any, cast: dict[str, Any], stale_world: World
) -> None:
    client = login_client(cast[role])
    problems: list[str] = []
    for spec in PAGES:
        if spec.statuses[role] != 200:
            continue
        response = client.get(spec.url(stale_world), follow=True)
        assert response.status_code == 200, spec.name
        problems += numbers.live_problems(page_text(response.content.decode()), where=f"{role} {spec.name}")
    assert problems == []


def test_it_shows_the_stale_limit_the_hosts_are_held_to(settings: Any) -> None:
    assert selectors.stale_limit_text([]) == "5 min"
    settings.HOST_STALE_SECONDS = 60
    assert selectors.stale_limit_text([]) == "60 s"
    assert selectors.stale_after(interval_s=None) == timedelta(seconds=60)
    assert selectors.stale_limit_text([timedelta(seconds=60), timedelta(minutes=15)]) == "60 s-15 min"
    settings.HOST_STALE_SECONDS = 300
    assert selectors.stale_limit_text([timedelta(minutes=5), timedelta(minutes=5)]) == "5 min"
    assert selectors.stale_limit_text([timedelta(minutes=5), timedelta(minutes=15)]) == "5-15 min"


def test_it_never_counts_a_stale_gpu_live_or_throttled_now() -> None:
    now = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    gpu = Accelerator(
        index=0,
        uuid="GPU-x",
        power_limit_w=700.0,
        last_state={"throttle_reasons": 0x4, "power_w": 690.0},
        last_seen_at=now - timedelta(seconds=10),
    )
    fresh = selectors.gpu_live_state(accelerator=gpu, now=now)
    assert (fresh["live"], fresh["throttled"], fresh["was_throttled"]) == (True, True, False)
    # Its own sample is fresh but its host is stale: not live.
    on_stale_host = selectors.gpu_live_state(accelerator=gpu, now=now, host_stale=True)
    assert (on_stale_host["live"], on_stale_host["throttled"], on_stale_host["was_throttled"]) == (
        False,
        False,
        True,
    )
    gpu.last_seen_at = now - timedelta(minutes=6)
    old = selectors.gpu_live_state(accelerator=gpu, now=now)
    assert (old["live"], old["stale"], old["throttled"]) == (False, True, False)
