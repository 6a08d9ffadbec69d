"""The alert pages in a real browser: open the list, filter it, open an alert, check its chart
(the series' points and the change-point marker), acknowledge it, dismiss one with a reason from
the list and one from its page, mark one expected."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from accelboard.alerts.models import Alert, ExpectedChange
from accelboard.alerts.services import alert_raise
from tests.alerts.test_pages import STEP_AT, regression_alert, step_series
from tests.factories import alert_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fleet(team: Any) -> dict[str, Any]:
    llama_runs = step_series(team)
    mistral_runs = step_series(team, n=STEP_AT + 6, model="Mistral-7B")
    slo, _ = alert_raise(
        team=team,
        kind="slo",
        severity="critical",
        dedupe_key="prod:slo:serving:1:2:20261015T1000",
        title="p99 latency over SLO · Mistral-7B bf16 on gpu-node-001",
        after_mean=812.0,
        detail={
            "entity": "serving:1:2",
            "model": "Mistral-7B",
            "metric": "latency_p99_ms",
            "reason": "p99 above 500 ms in 5 of 6 intervals (median 812.0 ms)",
            "threshold": 500.0,
            "intervals_above": 5,
            "intervals": 6,
            "since": "2026-10-15T10:00:00+00:00",
        },
    )
    return {
        "llama": regression_alert(team, llama_runs, key="llama"),
        "llama_runs": llama_runs,
        "mistral": regression_alert(team, mistral_runs, key="mistral"),
        "mistral_runs": mistral_runs,
        "slo": slo,
    }


def _state(page: Any) -> str:
    return page.locator("#alert-state").get_attribute("data-state")


def test_it_lists_filters_charts_and_triages_alerts(
    page: Any, login: Any, screenshot: Any, engineer: Any, fleet: dict[str, Any], live_server: Any
) -> None:
    llama, mistral, slo = fleet["llama"], fleet["mistral"], fleet["slo"]
    login(page, engineer)
    with page.expect_navigation():  # waits for the load event: count() does not wait
        page.click("nav.nav >> text=Alerts")
    assert urlsplit(page.url).path == "/alerts/"
    assert page.locator("#alerts-table tbody tr").count() == 3
    assert page.locator("#state-counts [data-state=open] strong").inner_text() == "3"
    assert page.locator("#fp-teams").is_visible()
    screenshot(page, "alerts-list")

    # Filter by model: the Llama regression only.
    page.select_option("#id_model", "Llama-3.1-8B")
    with page.expect_navigation():
        page.click("#alert-filters button[type=submit]")
    rows = page.locator("#alerts-table tbody tr")
    assert rows.count() == 1 and rows.first.get_attribute("data-alert") == str(llama.pk)

    # Open it: the chart has every point of the series and the change point at the first bad run.
    with page.expect_navigation():
        page.click(f"tr[data-alert='{llama.pk}'] a.alert-title")
    assert urlsplit(page.url).path == f"/alerts/{llama.pk}/"
    page.wait_for_selector("#alert-chart .main-svg")
    drawn = page.evaluate(
        """() => {
          const el = document.getElementById('alert-chart');
          return {points: el.data[0].y.length,
                  change: el.layout.shapes.filter(s => s.name === 'change-point').map(s => s.x0),
                  lines: el.querySelectorAll('.shapelayer path').length};
        }"""
    )
    assert drawn["points"] == len(fleet["llama_runs"])
    assert len(drawn["change"]) == 1 and drawn["change"][0].startswith(
        fleet["llama_runs"][STEP_AT].started_at.strftime("%Y-%m-%dT%H:%M")
    )
    assert drawn["lines"] >= 1  # the marker is drawn, not only declared
    assert page.locator("#pct-change").inner_text() == "-15.0%"
    assert "tokens/s" in page.locator("#before").inner_text()
    screenshot(page, "alerts-detail")

    page.click("#form-acknowledge button[type=submit]")
    page.wait_for_selector("#alert-state[data-state=acknowledged]")
    assert "Acknowledged." in page.locator(".messages").inner_text()
    assert page.locator("#events tr[data-to=acknowledged]").inner_text().count("engineer") == 1

    # Dismiss with a reason and a note from the alert's page.
    page.check("#form-dismiss input[value=false-alarm]")
    page.fill("#form-dismiss textarea", "load generator was misconfigured")
    page.click("#form-dismiss button[type=submit]")
    page.wait_for_selector("#alert-state[data-state=dismissed]")
    assert "false alarm" in page.locator("#alert-state").inner_text()
    assert page.locator("#closed").is_visible()
    llama.refresh_from_db()
    assert (llama.state, llama.dismissed_reason, llama.dismissed_note) == (
        "dismissed",
        "false-alarm",
        "load generator was misconfigured",
    )

    # Dismiss from the list's row, with a reason picked there; the list keeps its filters.
    page.goto("/alerts/?state=open")
    page.select_option(f"tr[data-alert='{slo.pk}'] select[name=reason]", "expected")
    with page.expect_navigation():
        page.click(f"tr[data-alert='{slo.pk}'] button[data-action=dismiss]")
    assert page.url.endswith("/alerts/?state=open")
    assert page.locator(f"tr[data-alert='{slo.pk}']").count() == 0
    slo.refresh_from_db()
    assert (slo.state, slo.dismissed_reason) == ("dismissed", "expected")

    # Mark the Mistral change expected for every series of its run.
    page.goto(f"/alerts/{mistral.pk}/")
    page.check("#form-expected input[value=run]")
    page.fill("#form-expected textarea", "new scheduler")
    page.click("#form-expected button[type=submit]")
    page.wait_for_selector("#expected-marks")
    assert _state(page) == "dismissed"
    assert ExpectedChange.objects.filter(run=fleet["mistral_runs"][STEP_AT]).count() == 2
    page.wait_for_selector("#alert-chart .main-svg")
    expected = page.evaluate(
        "() => document.getElementById('alert-chart').layout.shapes.filter(s => s.name === 'expected-change').length"
    )
    assert expected == 1
    screenshot(page, "alerts-detail-expected")

    page.goto("/alerts/")
    assert page.locator("#state-counts [data-state=dismissed] strong").inner_text() == "3"
    # The Llama regression called a false alarm, the Mistral one expected (the SLO alert is not a
    # benchmark alert, so it is not in the detector's feedback).
    assert page.locator("#fp-teams tbody tr td:nth-child(4)").inner_text() == "1"
    screenshot(page, "alerts-list-after-triage")

    assert not page.js_errors
    assert all(url.startswith(live_server.url) or url.startswith("data:") for url in page.network)
    assert Alert.objects.filter(state="open").count() == 0


def test_it_shows_finance_the_alert_without_triage(
    page: Any, login: Any, screenshot: Any, finance: Any, fleet: dict[str, Any]
) -> None:
    login(page, finance)
    page.goto(f"/alerts/{fleet['llama'].pk}/")
    page.wait_for_selector("#alert-chart .main-svg")
    assert page.locator("#no-triage").is_visible()
    assert page.locator("#triage").count() == 0
    page.goto(f"/alerts/{fleet['slo'].pk}/")
    assert "812 ms" in page.locator("#observed").inner_text()
    assert "500 ms" in page.locator("#limit").inner_text()
    screenshot(page, "alerts-detail-production")
    page.goto("/alerts/")
    assert page.locator("#bulk-form").count() == 0
    assert page.locator("button[data-action]").count() == 0


def test_it_bulk_dismisses_the_ticked_alerts(
    page: Any, login: Any, screenshot: Any, lead: Any, team: Any
) -> None:
    alerts = [
        alert_create(team=team, kind="throttle", title=f"Thermal throttling on gpu-node-00{i}")
        for i in range(3)
    ]
    login(page, lead)
    page.goto("/alerts/")
    for alert in alerts[:2]:
        page.check(f"tr[data-alert='{alert.pk}'] input[name=ids]")
    page.select_option("#id_action", "dismiss")
    # No reason: refused by name, nothing changed.
    with page.expect_navigation():
        page.click("#bulk-apply")
    assert "reason:" in page.locator("#triage-error").inner_text()
    assert Alert.objects.filter(state="open").count() == 3
    screenshot(page, "alerts-list-bulk-error")
    # The boxes stay ticked and the action chosen: pick the reason and apply again.
    assert [page.locator(f"tr[data-alert='{a.pk}'] input[name=ids]").is_checked() for a in alerts] == [
        True,
        True,
        False,
    ]
    page.select_option("#id_reason", "false-alarm")
    with page.expect_navigation():
        page.click("#bulk-apply")
    assert "2 alerts dismissed." in page.locator(".messages").inner_text()
    for alert in alerts:
        alert.refresh_from_db()
    assert [a.state for a in alerts] == ["dismissed", "dismissed", "open"]
    assert {a.dismissed_reason for a in alerts[:2]} == {"false-alarm"}
    assert page.locator("#state-counts [data-state=dismissed] strong").inner_text() == "2"
