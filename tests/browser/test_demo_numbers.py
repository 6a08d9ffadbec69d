"""Every page and export of the demo, read for its numbers in Chromium.

The small demo fleet is loaded once, through its real command, and walked as the LLM team's
finance member (every team's costs) and as staff (every team): every page of the nav and a detail
page of each kind, with the checks of ``tests/numbers.py`` (readable numbers, one unit and one
format per column, totals rows that add up, charts that add up to their cards, changes between
fully covered periods), every Plotly figure drawn with data and without a console warning, and
every CSV/XLSX against the page's totals. The two-team test world gets the same checks, as every
role, in ``test_every_page.py``.

One test: the live server's flush after a transactional test empties the database, so the load
would not outlive it (and a load is the slow part).
"""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from accelboard.alerts.models import Alert
from accelboard.benchmarks.models import BenchmarkRun, Model, Series
from accelboard.fleet.models import Host
from tests.alerts.invariants import alert_invariant_problems
from tests.browser.numbers import console_problems, export_problems, page_number_problems, page_read

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The demo's smallest honest shape: its six host templates, two days of telemetry and costs, the
# benchmark nights its series need (the command's own flags, stable across rewrites of the loader).
DEMO_FLAGS = [
    "--hosts=6",
    "--days-runs=20",
    "--days-telemetry=2",
    "--telemetry-interval=300",
    "--serving-interval=900",
]
LOGINS = {"llm-finance": "demo-llm-finance", "admin": "demo-admin"}
# Pages whose charts and tables declare what they add up to: the checks must have something to
# check there (a page that stopped declaring would pass them vacuously).
DECLARES_TOTALS = {"costs"}


def _undeclared(read: dict[str, Any], *, where: str) -> list[str]:
    found = []
    if "spend" not in read["totals"]:
        found.append(f"{where}: no card declares the spend total (data-total)")
    if not any((f.get("layout") or {}).get("meta", {}).get("sums_to") for f in read["figures"]):
        found.append(f"{where}: no chart declares what it sums to (layout.meta.sums_to)")
    if not any(any(any(row) for row in t["sums"]) for t in read["tables"]):
        found.append(f"{where}: no table has a totals row of sums")
    return found


@pytest.fixture
def demo(transactional_db: None, tmp_path: Any) -> Any:
    # The raw telemetry table is unmanaged: the flush between tests does not empty it.
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE fleet_telemetrysample")
    call_command("demo_fleet", *DEMO_FLAGS, f"--manifest={tmp_path / 'manifest.json'}", stdout=StringIO())
    yield
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE fleet_telemetrysample")


def _pages() -> list[tuple[str, str]]:
    """Every page of the nav, and one detail page of each kind, from what the demo holds."""
    run = BenchmarkRun.objects.filter(team__slug="llm-serving").order_by("-started_at").first()
    assert run is not None, "the demo has no LLM Serving run"
    other = (
        BenchmarkRun.objects.filter(workload=run.workload, accelerator_type=run.accelerator_type)
        .exclude(workload__variant=run.workload.variant)
        .first()
    ) or BenchmarkRun.objects.exclude(pk=run.pk).filter(team=run.team).order_by("-started_at").first()
    # Detail pages of the LLM team's objects: both walkers (its finance member, staff) may see them.
    team = run.team
    series = (
        Series.objects.filter(team=team, alerts__isnull=False).first()
        or Series.objects.filter(team=team).first()
    )
    alert = Alert.objects.filter(team=team).order_by("-opened_at").first()
    host = Host.objects.filter(team=team).order_by("hostname").first()
    quantized = (
        Model.objects.filter(reference_variant__isnull=False, variants__workloads__team=team)
        .distinct()
        .first()
    )
    pages = [
        ("overview", "/"),
        ("trends", "/trends/"),
        ("hardware", "/hardware/"),
        ("runs", "/runs/"),
        ("run-detail", f"/runs/{run.pk}/"),
        ("run-profile", f"/runs/{run.pk}/profile/"),
        ("run-baseline", f"/runs/{run.pk}/compare-baseline/"),
        ("quantization", "/quantization/"),
        ("costs", "/costs/"),
        ("costs-drill", "/costs/drill/"),
        ("plan", "/plan/"),
        ("alerts", "/alerts/"),
        ("hosts", "/hosts/"),
        ("teams", "/teams/"),
    ]
    if other is not None:
        pages.append(("compare", f"/runs/compare/?a={run.pk}&b={other.pk}"))
    if series is not None:
        pages.append(("trends-series", f"/trends/?series={series.pk}"))
    if alert is not None:
        pages.append(("alert-detail", f"/alerts/{alert.pk}/"))
    if host is not None:
        pages.append(("host-detail", f"/hosts/{host.pk}/"))
    if quantized is not None:
        pages.append(("quantization-model", f"/quantization/{quantized.pk}/"))
    return pages


def _login(page: Any, username: str) -> None:
    page.context.clear_cookies()
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", LOGINS[username])
    with page.expect_navigation():
        page.click("button[type=submit]")
    assert "/accounts/login/" not in page.url, f"login as {username} failed"


def test_it_shows_every_number_of_the_demo_readably_and_adding_up(
    demo: None, page: Any, screenshot: Any
) -> None:
    pages = _pages()
    # The demo's alerts keep the alert rules: severity ranks, one change is one alert.
    problems: list[str] = [f"demo alerts: {p}" for p in alert_invariant_problems()]
    for username in LOGINS:
        _login(page, username)
        for name, url in pages:
            where = f"demo {username} {name}"
            page.console.clear()
            page.js_errors.clear()
            response = page.goto(url)
            if response is None or response.status != 200:
                problems.append(f"{where}: HTTP {response.status if response else 'none'}")
                continue
            try:
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.plot[data-figure]')]"
                    ".every(el => el.classList.contains('js-plotly-plot'))",
                    timeout=10_000,
                )
            except Exception:  # noqa: BLE001 - an undrawn chart is reported by the checks
                pass
            page.wait_for_load_state("networkidle")
            read = page_read(page)
            problems += page_number_problems(page, where=where, read=read)
            if name in DECLARES_TOTALS:
                problems += _undeclared(read, where=where)
            problems += console_problems(page.console, where=where)
            problems += [f"{where}: JS error {error}" for error in page.js_errors]
            problems += export_problems(page, where=where, read=read)
            screenshot(page, f"demo-{username}-{name}")
    assert problems == [], "\n".join(problems)
