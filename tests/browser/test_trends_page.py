"""The trends page in a real browser: pick a series with the selects, read the drawn traces back
from the Plotly div (series, change point, baseline band, alert), zoom and share the address,
compare two series in different units."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from accelboard.alerts.services import alert_mark_expected
from accelboard.benchmarks.models import Series
from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
ROLES = "document.getElementById('trend-chart').data.map(t => t.meta && t.meta.role)"


@pytest.fixture
def history(team: Any, other_team: Any, lead: Any) -> dict[str, Any]:
    """30 daily results of throughput (down 14% at run 18) and p99 latency, an alert on the step
    and an expected change; another team's series that must not be offered."""
    h100 = factories.accelerator_type_from(factories.H100)
    rng = np.random.default_rng(3)
    runs = []
    for i in range(30):
        throughput = (4890.0 if i < 18 else 4200.0) + float(rng.normal(0, 20))
        latency = (41.5 if i < 18 else 47.0) + float(rng.normal(0, 0.3))
        runs.append(
            factories.run_create(
                team=team,
                accelerator_type=h100,
                started_at=START + timedelta(days=i),
                metrics={"throughput_tokens_per_s": throughput, "latency_p99_ms": latency},
            )
        )
    factories.run_create(team=other_team, accelerator_type=h100, model="Secret-70B")
    throughput = Series.objects.get(team=team, metric="throughput_tokens_per_s")
    latency = Series.objects.get(team=team, metric="latency_p99_ms")
    alert = factories.alert_create(team=team, severity="critical", title="Throughput down 14% on H100")
    alert.series, alert.first_run = throughput, runs[18]
    alert.save(update_fields=["series", "first_run"])
    expected = factories.alert_create(team=team, title="Throughput up again on H100")
    expected.series, expected.first_run = throughput, runs[24]
    expected.save(update_fields=["series", "first_run"])
    alert_mark_expected(alert=expected, user=lead, note="driver 560 rollout")
    return {"throughput": throughput, "latency": latency, "alert": alert, "runs": runs}


def test_it_picks_a_series_draws_its_changes_and_shares_the_zoomed_view(
    page: Any, login: Any, screenshot: Any, lead: Any, history: dict[str, Any]
) -> None:
    login(page, lead)
    page.goto("/trends/")
    assert "Pick a series" in page.inner_text("main")
    options = page.locator("#id_model option").all_text_contents()
    assert options == ["Any", "Llama-3.1-8B"]  # the other team's model is not offered
    page.select_option("#id_model", "Llama-3.1-8B")
    page.select_option("#id_metric", "throughput_tokens_per_s")
    with page.expect_navigation():
        page.click("#show-series")
    assert parse_qs(urlsplit(page.url).query) == {"series": [str(history["throughput"].pk)]}
    page.wait_for_selector("#trend-chart .main-svg")

    roles = page.evaluate(ROLES)
    assert roles == ["series", "baseline", "baseline-level", "change-points", "alerts"]
    step = history["runs"][18].started_at
    cp_x = page.evaluate("document.getElementById('trend-chart').data[3].x")
    assert [datetime.fromisoformat(x) for x in cp_x] == [step]
    band_x0 = page.evaluate("document.getElementById('trend-chart').data[1].x[0]")
    # The expected change (run 24) restarted the baseline after the step.
    assert datetime.fromisoformat(band_x0) == history["runs"][24].started_at
    assert page.locator(".legend .traces").count() >= 3
    assert page.locator(f"#trend-series a[data-alert='{history['alert'].pk}']").is_visible()
    assert "driver 560 rollout" in page.inner_text("#trend-series")
    assert page.js_errors == []
    screenshot(page, "trends-one-series")

    # Zoom: the address (and the share box) follow; opening it draws the same window.
    page.evaluate(
        "Plotly.relayout(document.getElementById('trend-chart'), {'xaxis.range': ['2026-01-10 06:00', '2026-01-25 18:30']})"
    )
    page.wait_for_function("() => window.location.search.includes('from=')")
    query = parse_qs(urlsplit(page.url).query)
    assert query["from"] == ["2026-01-10T06:00"] and query["to"] == ["2026-01-25T18:30"]
    assert page.input_value("#share-url") == page.url
    shared = page.url
    page.goto(shared)
    page.wait_for_selector("#trend-chart .main-svg")
    x_range = page.evaluate("document.getElementById('trend-chart').layout.xaxis.range")
    assert x_range == ["2026-01-10T06:00", "2026-01-25T18:30"]


def test_it_compares_two_units_on_their_own_axes_and_normalised(
    page: Any, login: Any, screenshot: Any, engineer: Any, history: dict[str, Any]
) -> None:
    login(page, engineer)
    page.goto(f"/trends/?series={history['throughput'].pk}&series={history['latency'].pk}")
    page.wait_for_selector("#trend-chart .main-svg")
    axes = page.evaluate(
        "document.getElementById('trend-chart').data.filter(t => t.meta.role === 'series').map(t => t.yaxis)"
    )
    assert axes == ["y", "y2"]
    titles = page.evaluate(
        "[document.getElementById('trend-chart').layout.yaxis.title.text,"
        " document.getElementById('trend-chart').layout.yaxis2.title.text]"
    )
    assert titles == ["Value (tokens/s)", "Value (ms)"]
    assert page.locator("#trend-chart .yaxislayer-above, #trend-chart .overaxes-above").count() >= 1
    screenshot(page, "trends-two-units")

    with page.expect_navigation():
        page.click("a[data-scale='normalised']")
    page.wait_for_selector("#trend-chart .main-svg")
    assert (
        page.evaluate("document.getElementById('trend-chart').layout.yaxis.title.text")
        == "% of current baseline"
    )
    assert page.js_errors == []
    screenshot(page, "trends-normalised")


def test_it_refuses_another_teams_series(
    page: Any, login: Any, other_lead: Any, history: dict[str, Any]
) -> None:
    login(page, other_lead)
    response = page.goto(f"/trends/?series={history['throughput'].pk}")
    assert response.status == 404


def test_it_keeps_the_baseline_before_an_open_regression_on_trends_and_the_alert(
    page: Any, login: Any, screenshot: Any, lead: Any, team: Any
) -> None:
    """Two regressed runs with the alert still open: trends shows the baseline at the level before
    the change (over the results before it) and the regressed level apart; the alert's chart draws
    each level over the results it holds."""
    h100 = factories.accelerator_type_from(factories.H100)
    rng = np.random.default_rng(11)
    runs = [
        factories.run_create(
            team=team,
            accelerator_type=h100,
            started_at=START + timedelta(days=i),
            metrics={"throughput_tokens_per_s": (4890.0 if i < 28 else 4100.0) + float(rng.normal(0, 20))},
        )
        for i in range(30)
    ]
    series = Series.objects.get(team=team, metric="throughput_tokens_per_s")
    values = [r.metrics.get(name="throughput_tokens_per_s").value for r in runs]
    alert = factories.alert_create(team=team, severity="critical", title="Throughput down 16% on H100")
    alert.series, alert.first_run, alert.last_good_run = series, runs[28], runs[27]
    alert.save(update_fields=["series", "first_run", "last_good_run"])

    login(page, lead)
    page.goto(f"/trends/?series={series.pk}")
    page.wait_for_selector("#trend-chart .main-svg")
    traces = page.evaluate(
        "document.getElementById('trend-chart').data.map(t => ({role: t.meta && t.meta.role, x: t.x, y: t.y}))"
    )
    (level,) = [t for t in traces if t["role"] == "baseline-level"]
    (current,) = [t for t in traces if t["role"] == "current-level"]
    pre = float(np.median(values[:28]))
    assert level["y"][0] == pytest.approx(pre)
    assert [datetime.fromisoformat(x) for x in level["x"]] == [runs[0].started_at, runs[27].started_at]
    assert current["y"][0] == pytest.approx(float(np.median(values[28:])))
    row = page.inner_text("#trend-series tbody tr")
    assert f"{pre:,.0f}" in row and "before the open regression" in row
    assert "against the baseline" in row
    assert page.js_errors == []
    screenshot(page, "trends-open-regression")

    page.goto(f"/alerts/{alert.pk}/")
    page.wait_for_selector("#alert-chart .main-svg")
    lines = page.evaluate(
        "document.getElementById('alert-chart').data.filter(t => t.meta && t.meta.level)"
        ".map(t => ({role: t.meta.role, x: t.x, y: t.y}))"
    )
    spans = {t["role"]: [datetime.fromisoformat(x) for x in t["x"]] for t in lines}
    assert spans == {
        "before": [runs[0].started_at, runs[27].started_at],
        "after": [runs[28].started_at, runs[29].started_at],
    }
    assert page.js_errors == []
    screenshot(page, "alert-open-regression")
