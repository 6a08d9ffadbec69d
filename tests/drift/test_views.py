"""Quantization pages: who sees what (team scoping, outsider 404), what the pages say, and flat
query counts."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from accelboard.benchmarks.models import Model
from tests import factories

from .conftest import ARC

pytestmark = pytest.mark.django_db


def _figure(html: str, figure_id: str) -> dict[str, Any]:
    match = re.search(rf'<script id="{figure_id}" type="application/json">(.*?)</script>', html, re.S)
    assert match, f"no json_script {figure_id}"
    return json.loads(match.group(1))


def test_it_lists_variants_riskiest_first_for_the_team(
    login_client: Any, lead: Any, llama: dict[str, Any]
) -> None:
    response = login_client(lead).get("/quantization/")
    assert response.status_code == 200
    html = response.content.decode()
    rows = re.findall(r'data-model="([^"]+)" data-variant="([^"]+)" data-verdict="([^"]+)"', html)
    assert rows == [("Llama-3.1-8B", "int4-awq", "over"), ("Llama-3.1-8B", "fp8", "within")]
    assert "Secret-7B" not in html  # another team's model
    assert '<span class="value over" data-kpi="over">1</span>' in html
    assert "-2.50%" in html and "0.9750" in html


@pytest.mark.parametrize(
    ("who", "status"),
    [
        ("lead", 200),
        ("engineer", 200),
        ("finance", 200),
        ("staff", 200),
        ("other_lead", 404),
        ("outsider", 404),
    ],
)
def test_it_shows_a_model_page_only_to_teams_that_ran_it(
    login_client: Any, cast: dict[str, Any], llama: dict[str, Any], who: str, status: int
) -> None:
    response = login_client(cast[who]).get(f"/quantization/{llama['model'].pk}/")
    assert response.status_code == status


def test_it_answers_404_for_a_model_that_does_not_exist(login_client: Any, staff: Any) -> None:
    assert login_client(staff).get("/quantization/999999/").status_code == 404


def test_it_redirects_an_anonymous_visitor_to_the_login_form(client: Any, llama: dict[str, Any]) -> None:
    response = client.get(f"/quantization/{llama['model'].pk}/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_it_shows_speedup_savings_and_verdicts_per_variant(
    login_client: Any, lead: Any, llama: dict[str, Any]
) -> None:
    html = login_client(lead).get(f"/quantization/{llama['model'].pk}/").content.decode()
    # fp8: 7100/4700 = 1.51x, memory 1 - 70/71 = +1.4%, energy 1 - 21.6/30.5 = +29.2%.
    fp8 = re.search(r'<tr class="verdict-within" data-variant="fp8".*?</tr>', html, re.S).group(0)
    assert "1.51×" in fp8 and "+1.4%" in fp8 and "+29.2%" in fp8 and "-0.50%" in fp8
    int4 = re.search(r'<tr class="verdict-over" data-variant="int4-awq".*?</tr>', html, re.S).group(0)
    assert "1.32×" in int4 and "-2.50%" in int4 and "Over" in int4
    pareto = _figure(html, "pareto-figure")
    points = pareto["data"][0]
    by_label = dict(zip(points["text"], zip(points["x"], points["y"], strict=True), strict=True))
    assert by_label["bf16 (reference)"] == (0.0, 1.0)
    assert by_label["fp8 · 1× H100 SXM 80GB"] == pytest.approx((0.5, 7100 / 4700))
    assert by_label["int4-awq · 1× H100 SXM 80GB"] == pytest.approx((2.5, 6200 / 4700))
    # The frontier: reference then fp8; int4 is slower than fp8 and loses more (dominated).
    assert pareto["data"][1]["y"] == pytest.approx([1.0, 7100 / 4700])
    band = pareto["layout"]["shapes"][0]
    assert band["x1"] == pytest.approx(1.0)  # the 1% budget
    drift = _figure(html, "drift-0-figure")
    assert [trace["name"] for trace in drift["data"]] == ["fp8", "int4-awq"]
    assert len(drift["data"][1]["y"]) == 10
    assert drift["layout"]["yaxis"]["title"]["text"] == "Accuracy loss vs reference (%)"
    assert "No production agreement data" in html


def test_it_shows_the_cost_saving_from_run_costs(login_client: Any, lead: Any, llama: dict[str, Any]) -> None:
    from decimal import Decimal

    from accelboard.costs.models import RunCost

    for name, cost in (("bf16", "0.200000"), ("fp8", "0.130000")):
        for run in llama["runs"][name]:
            RunCost.objects.create(
                run=run, total_cost_per_1m=Decimal(cost), currency="USD", computed_at=run.started_at
            )
    html = login_client(lead).get(f"/quantization/{llama['model'].pk}/").content.decode()
    reference = re.search(r'<tr class="verdict-reference" data-variant="bf16".*?</tr>', html, re.S).group(0)
    # The reference's own figures sit under its hardware, not under "saving" columns.
    assert "0.2 USD per 1M" in reference.split("data-reference-figures")[1].split("</span>")[0]
    assert reference.count('<td class="num muted">reference</td>') == 3 + 1  # three savings, one Δ
    fp8 = re.search(r'<tr class="verdict-within" data-variant="fp8".*?</tr>', html, re.S).group(0)
    assert "+35.0%" in fp8  # 1 - 0.13 / 0.20
    int4 = re.search(r'<tr class="verdict-over" data-variant="int4-awq".*?</tr>', html, re.S).group(0)
    assert int4.count("—") >= 1  # no cost for int4: no saving claimed


def test_it_folds_configurations_without_a_reference_twin_into_a_note(
    login_client: Any, lead: Any, team: Any, llama: dict[str, Any]
) -> None:
    from .conftest import START, accuracy_run

    l4 = factories.accelerator_type_from(factories.L4)
    accuracy_run(
        team=team,
        model="Llama-3.1-8B",
        variant="fp8",
        precision="fp8",
        at=START,
        accelerator_type=l4,
        metrics={"throughput_tokens_per_s": 900.0},
    )
    html = login_client(lead).get(f"/quantization/{llama['model'].pk}/").content.decode()
    fp8_rows = re.findall(r'<tr class="verdict-within" data-variant="fp8".*?</tr>', html, re.S)
    assert len(fp8_rows) == 1  # the H100 row, against the H100 reference
    assert "1.51×" in fp8_rows[0]
    assert "also run on 1 other configuration without a reference run" in fp8_rows[0]


def test_it_explains_an_empty_overview(login_client: Any, lead: Any, outsider: Any) -> None:
    html = login_client(lead).get("/quantization/").content.decode()
    assert "No quantized variants with accuracy results yet" in html
    html = login_client(outsider).get("/quantization/").content.decode()
    assert "You are not in a team yet" in html


def test_it_keeps_the_query_count_flat(
    login_client: Any, lead: Any, llama: dict[str, Any], drift_series: Any, django_assert_max_num_queries: Any
) -> None:
    from accelboard.core.models import Team

    client = login_client(lead)
    model_url = f"/quantization/{llama['model'].pk}/"
    client.get("/quantization/")
    with django_assert_max_num_queries(7):
        assert client.get("/quantization/").status_code == 200
    with django_assert_max_num_queries(12):
        assert client.get(model_url).status_code == 200
    # Twice the history and another model: the same number of queries.
    drift_series(team=Team.objects.get(slug="inference"), losses=[0.001] * 12)
    with django_assert_max_num_queries(7):
        assert client.get("/quantization/").status_code == 200
    with django_assert_max_num_queries(12):
        assert client.get(model_url).status_code == 200
    assert Model.objects.filter(name="Drifty-8B").exists()
    assert ARC


def test_it_writes_savings_trends_and_counts_with_one_meaning_each(
    login_client: Any, lead: Any, team: Any, llama: dict[str, Any], drift_series: Any
) -> None:
    # The reference row showed absolute figures under "saving" columns; a trend of +0.048%/day sat
    # beside a Δ of -5.19% (the trend was of the loss, the Δ of accuracy); counts read 7951.
    from datetime import timedelta

    from accelboard.drift.services import AgreementInput, agreement_batch_ingest

    from .conftest import START

    drift_series(team=team, losses=[0.001 * night for night in range(12)])
    overview = login_client(lead).get("/quantization/").content.decode()
    row = re.search(r'data-model="Drifty-8B".*?</tr>', overview, re.S).group(0)
    cells = re.findall(r'<td class="num">([^<]*)</td>', row)
    delta, trend = cells[0], next(c for c in cells if c.endswith("/d"))
    assert delta.startswith("-") and trend.startswith("-"), (delta, trend)
    agreement_batch_ingest(
        team=team,
        batch_id="agreement",
        items=[
            AgreementInput(
                model="Llama-3.1-8B", variant="fp8", day=(START + timedelta(days=i)).date(), task="chat",
                agreement_rate=0.96 - 0.002 * i, samples=7951,
            )
            for i in range(12)
        ],
    )  # fmt: skip
    model = login_client(lead).get(f"/quantization/{llama['model'].pk}/").content.decode()
    agreement = model.split('id="agreement-table"')[1].split("</table>")[0]
    assert ">7,951<" in agreement and ">7951<" not in agreement
    change, trend = re.findall(r'<td class="num">([-+][^<]*)</td>', agreement)[:2]
    assert change.startswith("-") and trend.startswith("-") and trend.endswith("/d")


def test_the_overview_writes_the_accuracy_delta_and_the_ratio_as_one_figure(
    login_client: Any, lead: Any, team: Any, drift_series: Any
) -> None:
    # "Accuracy Δ now −5.19%" stood beside "0.9473" (the newest pair alone: −5.27%).
    drift_series(team=team, losses=[0.05, 0.05, 0.0519, 0.0527])
    html = login_client(lead).get("/quantization/").content.decode()
    row = re.search(r'<tr class="verdict-over"[^>]*data-variant="int4".*?</tr>', html, re.S)
    assert row is not None
    cells = re.findall(r'<td class="num"[^>]*>(.*?)</td>', row.group(0), re.S)
    assert cells[0] == "-5.19%" and cells[1] == "0.9481"
    assert "Median of the newest 3 days" in html  # the definition, where the figure is shown
