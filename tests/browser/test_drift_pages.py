"""Quantization pages in a real browser: the overview sorted by risk, the model page's variants
table with its over-budget row, the Pareto chart's points and frontier, drift charts, agreement."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest

from accelboard.benchmarks.models import Model
from accelboard.drift.services import AgreementInput, agreement_batch_ingest
from tests import factories
from tests.drift.conftest import START, accuracy_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARC = "accuracy:arc_easy:acc_norm"
HELLA = "accuracy:hellaswag:acc"
# variant -> (precision, method, tokens/s, GiB, J/inference, arc, hellaswag, hellaswag loss growth/night)
VARIANTS = {
    "bf16": ("bf16", "", 4700.0, 71.0, 30.5, 0.800, 0.600, 0.0),
    "fp8": ("fp8", "FP8-dynamic", 7100.0, 70.0, 21.6, 0.797, 0.598, 0.0),
    "int8-sq": ("int8", "SmoothQuant", 6600.0, 69.0, 22.0, 0.798, 0.599, 0.00025),
    "int4-awq": ("int4", "AWQ", 6200.0, 68.0, 19.8, 0.780, 0.596, 0.0),
}
NIGHTS = 24


@pytest.fixture
def quantized(team: Any, other_team: Any) -> Model:
    """24 nights of Llama-3.1-8B on one H100: fp8 within budget, int8-sq's hellaswag slowly
    sliding (trending), int4-awq 2.5% below on arc_easy (over the 1% budget); agreement data;
    another team's model that must not show."""
    h100 = factories.accelerator_type_from(factories.H100)
    for night in range(NIGHTS):
        for name, (precision, method, tps, mem, energy, arc, hella, slide) in VARIANTS.items():
            wobble = 0.0004 * ((night * 7 + len(name)) % 5 - 2)  # deterministic evaluation noise
            accuracy_run(
                team=team,
                model="Llama-3.1-8B",
                variant=name,
                precision=precision,
                method=method,
                at=START + timedelta(days=night, minutes=len(name)),
                accelerator_type=h100,
                metrics={
                    "throughput_tokens_per_s": tps * (1 + wobble),
                    "memory_peak_bytes": mem * 2**30,
                    "energy_per_inference_j": energy,
                    ARC: arc * (1 + wobble),
                    HELLA: hella * (1 - slide * night + wobble / 4),
                },
            )
    agreement_batch_ingest(
        team=team,
        batch_id="browser-test",
        items=[
            AgreementInput(
                model="Llama-3.1-8B",
                variant=variant,
                day=(START + timedelta(days=day)).date(),
                task="chat",
                agreement_rate=rate - 0.0006 * day * (variant == "int4-awq"),
                kl_divergence=0.01,
                samples=5000,
            )
            for day in range(14)
            for variant, rate in (("fp8", 0.985), ("int4-awq", 0.962))
        ],
    )
    for night in range(3):
        for name, acc in (("fp16", 0.7), ("int8", 0.6)):
            accuracy_run(
                team=other_team,
                model="Secret-7B",
                variant=name,
                precision=name,
                at=START + timedelta(days=night),
                metrics={ARC: acc},
            )
    return Model.objects.get(name="Llama-3.1-8B")


def _plotted(page: Any, chart: str) -> None:
    page.wait_for_function(f"() => document.querySelector('#{chart} .main-svg') !== null", timeout=15_000)


def test_it_ranks_variants_by_risk_and_opens_the_model_page(
    page: Any, login: Any, lead: Any, quantized: Model, screenshot: Any
) -> None:
    login(page, lead)
    with page.expect_navigation():  # waits for the load event: count() does not wait
        page.click("nav a:has-text('Quantization')")
    assert urlsplit(page.url).path == "/quantization/"
    rows = page.locator("#drift-overview tbody tr")
    verdicts = [rows.nth(i).get_attribute("data-verdict") for i in range(rows.count())]
    variants = [rows.nth(i).get_attribute("data-variant") for i in range(rows.count())]
    assert verdicts[0] == "over" and variants[0] == "int4-awq"
    assert verdicts[1] == "trending" and variants[1] == "int8-sq"
    assert set(verdicts[2:]) == {"within"}
    assert rows.count() == 6  # three variants x two tasks
    assert page.locator("text=Secret-7B").count() == 0
    assert page.locator("[data-kpi=over]").inner_text() == "1"
    assert page.locator("[data-kpi=trending]").inner_text() == "1"
    over_bg = rows.nth(0).evaluate("el => getComputedStyle(el).backgroundColor")
    assert over_bg == "rgb(254, 242, 242)"
    screenshot(page, "drift-overview")
    rows.nth(0).locator("a").click()
    assert urlsplit(page.url).path == f"/quantization/{quantized.pk}/"
    assert page.js_errors == []


def test_it_draws_the_pareto_chart_and_marks_the_over_budget_row(
    page: Any, login: Any, lead: Any, quantized: Model, screenshot: Any
) -> None:
    login(page, lead)
    page.goto(f"/quantization/{quantized.pk}/")
    over = page.locator("#variants-table tr[data-verdict=over]")
    assert over.count() == 1
    assert over.get_attribute("data-variant") == "int4-awq"
    assert "-2.5" in over.inner_text()  # arc_easy: 0.780 vs 0.800, give or take the wobble
    assert over.locator(".badge.over").inner_text() == "Over"
    assert over.evaluate("el => getComputedStyle(el).backgroundColor") == "rgb(254, 242, 242)"
    reference = page.locator("#variants-table tr[data-verdict=reference]")
    assert reference.get_attribute("data-variant") == "bf16"

    _plotted(page, "pareto-chart")
    data = page.evaluate(
        "() => document.getElementById('pareto-chart').data.map(t => ({name: t.name, x: t.x, y: t.y, text: t.text}))"
    )
    points = {
        label.split(" ")[0]: (x, y)
        for label, x, y in zip(data[0]["text"], data[0]["x"], data[0]["y"], strict=True)
    }
    assert set(points) == set(VARIANTS)
    assert points["bf16"] == (0, 1)
    assert points["int4-awq"][0] == pytest.approx(2.5, abs=0.1)  # worst task's loss, %
    assert points["fp8"][1] == pytest.approx(7100 / 4700, rel=0.01)
    # Drawn: one marker per variant; the frontier runs through bf16 and fp8 only.
    assert page.locator("#pareto-chart .scatterlayer .trace").first.locator("path.point").count() == 4
    assert data[1]["name"] == "Pareto frontier"
    assert data[1]["y"] == pytest.approx([1.0, points["fp8"][1]])
    band = page.evaluate("() => document.getElementById('pareto-chart').layout.shapes[0]")
    assert band["x1"] == pytest.approx(1.0)
    assert page.locator("#pareto-chart .shapelayer path").count() >= 2  # band + budget line

    _plotted(page, "drift-0-chart")
    _plotted(page, "drift-1-chart")
    hella = page.evaluate(
        "() => document.querySelector('[data-metric=\"accuracy:hellaswag:acc\"]').data.map(t => t.name)"
    )
    assert "int8-sq" in hella
    _plotted(page, "agreement-chart")
    assert page.js_errors == []
    assert all(
        urlsplit(url).hostname == "127.0.0.1"
        for url in page.network
        if urlsplit(url).scheme in {"http", "https"}
    )
    screenshot(page, "drift-model")


def test_it_shows_the_empty_states(page: Any, login: Any, lead: Any, screenshot: Any) -> None:
    login(page, lead)
    page.goto("/quantization/")
    assert page.locator("#drift-empty").is_visible()
    screenshot(page, "drift-overview-empty")
