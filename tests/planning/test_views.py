"""The plan page on a small world (tests/planning/world.py) worked by hand: who sees what, the
answer and its figures, exports equal to the page, assumptions in the URL, bad input, saved
scenarios against what happened, and a flat number of queries."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone
from openpyxl import load_workbook

from accelboard.core.numbers import column_decimals
from accelboard.costs.formulas.money import money_round
from accelboard.planning import capacity as c
from accelboard.planning import plan_inputs as pi
from accelboard.planning.models import PlanScenario
from tests.planning import world as w

pytestmark = pytest.mark.django_db

URL = "/plan/"

# Hand-worked (module docstring of tests/planning/world.py): peak 10 000 tok/s × 1.2 headroom =
# 12 000. fp8 on 8× H200 at batch 64 (30 000 tok/s, p99 15.7 s ≤ 18 s): 1 replica + 1 spare = 16
# GPUs, 2 servers × $7.5342 × 730 h = $10 999.93; power 2 × (840 + (5 100 − 840) × 6 666.7 / 60 000)
# = 2 626.7 W -> 1 917.47 kWh × 1.3 × $0.068 = $169.50.
H200_CAPACITY = 2 * w.H200_PER_HOUR * 730  # money: Decimal from the price book, exact
H200_WATTS = 2 * (840 + (5100 - 840) * (20000 / 3) / 60000)
H200_ENERGY = H200_WATTS * 730 / 1000 * 1.3 * 0.068
H200_TOTAL = float(H200_CAPACITY) + H200_ENERGY
# fp16 on 8× H100 only meets 18 s at batch 32 (10 000 tok/s): 2 + 1 replicas = 24 GPUs, $14 000.01
# + energy; its batch 128 (27 000 tok/s at p99 30.4 s) is the cheapest per token on the benchmark.
H100_CAPACITY = 3 * w.H100_PER_HOUR * 730
# Today: $200 a day for 8 GPUs × 24 h, held a month: 200 / 192 × 8 × 730.
TODAY_MONTHLY = 200 / 192 * 8 * 730


@pytest.fixture
def world(team: Any) -> w.World:
    return w.world_build(team=team)


def _plan(client: Any, **params: Any) -> Any:
    response = client.get(URL, w.query(**params))
    assert response.status_code == 200, response.content[:500]
    return response


def _option(plan: c.Plan, prefix: str) -> c.OptionPlan:
    return next(o for o in plan.options if o.option.label.startswith(prefix))


def test_it_answers_with_the_option_that_meets_the_objective_at_peak(
    world: w.World, lead: Any, login_client: Any
) -> None:
    response = _plan(login_client(lead))
    plan: c.Plan = response.context["plan"]
    assert plan.traffic.peak_output_tps == pytest.approx(10_000.0)
    assert plan.traffic.mean_output_tps == pytest.approx(20_000 / 3, rel=1e-3)
    assert plan.inputs.objective.e2e_p99_ms == w.SLO_MS
    best = plan.best
    assert best is not None and best.option.label == "fp8 on 8× H200 SXM 141GB"
    assert best.point is not None and best.point.batch_size == 64
    assert (best.replicas_at_peak, best.replicas, best.gpus, best.instances) == (1, 2, 16, 2)
    assert best.capacity_monthly == H200_CAPACITY
    assert float(best.energy_monthly) == pytest.approx(H200_ENERGY, abs=0.01)
    assert float(best.total_monthly) == pytest.approx(H200_TOTAL, abs=0.01)
    assert best.is_current  # the fp8 H200s serve today
    assert float(best.saving_monthly) == pytest.approx(TODAY_MONTHLY - H200_TOTAL, abs=0.01)
    h100 = _option(plan, "fp16 on 8× H100")
    assert h100.point is not None and h100.point.batch_size == 32
    assert (h100.replicas, h100.gpus) == (3, 24)
    assert h100.capacity_monthly == H100_CAPACITY
    # The non-obvious part: H100 fp16 is the cheapest per token on its benchmark (batch 128).
    assert plan.benchmark_cheapest is h100
    assert h100.fastest is not None and h100.fastest.batch_size == 128
    assert h100.benchmark_cost_per_1m < best.benchmark_cost_per_1m
    html = response.content.decode()
    assert "fp16 on 8× H100 SXM 80GB is cheaper per token on its benchmark" in html
    assert f'data-kpi="monthly">{H200_TOTAL:,.0f}<' in html
    assert 'data-kpi="gpus">16<' in html
    # Accuracy from the drift data: fp8 0.704 against fp16 0.709 is 0.71 % below, within 1 %.
    assert best.accuracy is not None and best.accuracy.loss == pytest.approx(0.005 / 0.709, rel=1e-6)
    assert best.accuracy.verdict == "within"


def test_it_changes_its_answer_with_the_objective_and_keeps_every_assumption_in_the_url(
    world: w.World, lead: Any, login_client: Any
) -> None:
    client = login_client(lead)
    plan = _plan(client, e2e_ms=40_000).context["plan"]
    # At 40 s the H100's batch 128 qualifies: 12 000 / 27 000 -> 1 + 1 replicas, 2 × $6.3927 × 730.
    assert plan.best.option.label == "fp16 on 8× H100 SXM 80GB"
    assert plan.best.capacity_monthly == 2 * w.H100_PER_HOUR * 730
    response = _plan(client, growth=5, horizon=12, headroom=50, spare=0, e2e_ms=18000)
    page = response.context["page"]
    assert page.query == {
        "model": world.model.pk,
        "weeks": 2,
        "growth": 5.0,
        "horizon": 12,
        "headroom": 50.0,
        "spare": "0",
        "where": "",
        "pricing": "",
        "e2e_ms": 18000.0,
        "ttft_ms": None,
        "itl_ms": None,
    }
    plan = response.context["plan"]
    # 10 000 × 1.05^12 = 17 958.6 tok/s; × 1.5 = 26 937.9 -> 1 H200 replica, no spare.
    assert plan.demand_peak_tps == pytest.approx(10_000 * 1.05**12)
    assert (plan.best.replicas, plan.best.gpus) == (1, 8)
    # The share link reproduces the same plan.
    share = reverse("planning:plan") + "?" + page.query_string
    again = client.get(share).context["plan"]
    assert again.best.total_monthly == plan.best.total_monthly


def test_it_prices_on_the_basis_asked_and_says_which_options_have_no_price(
    world: w.World, finance: Any, login_client: Any
) -> None:
    plan = _plan(login_client(finance), where="aws", pricing="on-demand").context["plan"]
    h200 = _option(plan, "fp8 on 8× H200")
    assert h200.status == c.NO_PRICE and h200.gpus == 16  # sized all the same
    h100 = _option(plan, "fp16 on 8× H100")
    # An 8-GPU p5 instance at $54.076 an hour: 3 replicas of 8 GPUs are 3 instances.
    assert h100.ranked and h100.capacity_monthly == 3 * Decimal("54.0760") * 730
    assert h100.price is not None and h100.price.rate.ref.source == "test list price"
    # No AWS site or carbon row: no energy price, and it says so.
    assert any("No electricity price or grid intensity for aws us-east-1" in n for n in h100.notes)


def test_it_asks_for_an_objective_when_the_team_set_none_and_says_what_is_not_measured(
    team: Any, lead: Any, login_client: Any
) -> None:
    w.world_build(team=team, with_slo=False)
    client = login_client(lead)
    response = _plan(client)
    plan = response.context["plan"]
    assert plan.best is None and {o.status for o in plan.options} == {c.NO_OBJECTIVE}
    assert "Set a latency objective to size the options." in response.content.decode()
    plan = _plan(client, ttft_ms=500).context["plan"]
    assert {o.status for o in plan.options} == {c.OBJECTIVE_UNMEASURED}


def test_it_exports_the_figures_the_page_shows(world: w.World, engineer: Any, login_client: Any) -> None:
    client = login_client(engineer)
    plan = _plan(client).context["plan"]
    response = client.get(URL, w.query(format="csv", table="options"))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert 'filename="plan-Llama-2-70B-' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))
    by_option = {row["Option"]: row for row in rows}
    assert [row["Option"] for row in rows] == [o.option.label for o in plan.options]
    best = by_option["fp8 on 8× H200 SXM 141GB"]
    # Money leaves the plan rounded once, to 4 places, half to even (the costs rule).
    assert Decimal(best["Total per month (USD)"]) == money_round(plan.best.total_monthly)
    assert Decimal(best["Capacity per month (USD)"]) + Decimal(
        best["Energy per month (USD)"]
    ) == pytest.approx(Decimal(best["Total per month (USD)"]), abs=Decimal("0.0001"))
    assert best["GPUs"] == "16" and best["Rank"] == "1" and best["Runs today"] == "yes"
    assert best["Price source"] == "test capex of a hgx-h200 over 5 years"
    workbook = load_workbook(io.BytesIO(client.get(URL, w.query(format="xlsx")).content))
    assert workbook.sheetnames == ["options", "assumptions", "traffic", "sensitivity"]
    assumptions = {row[0]: row[1] for row in workbook["assumptions"].iter_rows(min_row=2, values_only=True)}
    assert assumptions["Latency objective"] == "p99 e2e ≤ 18,000 ms"
    assert assumptions["Headroom"] == "20 % over the planned peak"
    # A CSV holds one table; an unknown table is named.
    assert client.get(URL, w.query(format="csv")).status_code == 400
    bad = client.get(URL, w.query(format="csv", table="nope"))
    assert bad.status_code == 400 and b"table: unknown table 'nope'" in bad.content


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"growth": "fast"}, "growth"),
        ({"headroom": "-10"}, "headroom"),
        ({"weeks": "53"}, "weeks"),
        ({"where": "mars"}, "where"),
        ({"e2e_ms": "0"}, "e2e_ms"),
        ({"spare": "2"}, "spare"),
    ],
)
def test_it_answers_a_bad_parameter_with_a_400_naming_it(
    world: w.World, lead: Any, login_client: Any, params: dict[str, str], field: str
) -> None:
    response = login_client(lead).get(URL, params)
    assert response.status_code == 400
    assert f"{field}: " in response.content.decode()


def test_it_shows_each_team_its_own_traffic_and_finance_every_team(
    world: w.World, cast: dict[str, Any], login_client: Any
) -> None:
    for name in ("lead", "engineer", "finance", "staff"):
        response = _plan(login_client(cast[name]))
        assert response.context["plan"] is not None, name
    for name in ("other_lead", "outsider"):
        response = _plan(login_client(cast[name]))
        assert response.context.get("plan") is None, name
        assert "Llama-2-70B" not in response.content.decode().split("<main", 1)[1], name
    asked = login_client(cast["other_lead"]).get(URL, {"model": world.model.pk})
    assert asked.status_code == 200 and asked.context["page"].asked_missing


def _save(client: Any, query: str, name: str = "Q3 budget") -> Any:
    return client.post(reverse("planning:scenario_save"), {"name": name, "note": "fp8 H200", "query": query})


def test_it_saves_a_plan_for_leads_and_finance_but_not_engineers(
    world: w.World, cast: dict[str, Any], login_client: Any
) -> None:
    page = _plan(login_client(cast["lead"])).context["page"]
    response = _save(login_client(cast["lead"]), page.query_string)
    assert response.status_code == 302
    scenario = PlanScenario.objects.get()
    assert response["Location"] == reverse("planning:scenario", args=[scenario.pk])
    assert (scenario.team, scenario.model, scenario.created_by) == (world.team, world.model, cast["lead"])
    assert scenario.planned_monthly == Decimal(repr(round(H200_TOTAL, 2)))
    assert scenario.planned_tokens_monthly == pytest.approx(20_000 / 3 * c.SECONDS_PER_MONTH, rel=1e-3)
    assert scenario.query["e2e_ms"] == w.SLO_MS and scenario.query["growth"] == 0.0
    assert scenario.summary["best"] == "fp8 on 8× H200 SXM 141GB"
    assert _save(login_client(cast["engineer"]), page.query_string).status_code == 403
    assert _save(login_client(cast["other_lead"]), page.query_string).status_code == 404
    assert _save(login_client(cast["finance"]), page.query_string, "finance view").status_code == 302
    assert PlanScenario.objects.count() == 2
    bad = _save(login_client(cast["lead"]), page.query_string + "&headroom=-1")
    assert bad.status_code == 400 and b"query: headroom" in bad.content
    assert _save(login_client(cast["lead"]), page.query_string, name="").status_code == 400
    assert PlanScenario.objects.count() == 2


def test_it_compares_a_saved_plan_with_the_costs_of_the_months_since(
    world: w.World, cast: dict[str, Any], login_client: Any
) -> None:
    client = login_client(cast["lead"])
    page = _plan(client).context["page"]
    _save(client, page.query_string)
    scenario = PlanScenario.objects.get()
    # As if saved 40 days ago: its months run from then to this one.
    saved = timezone.now() - timedelta(days=40)
    PlanScenario.objects.filter(pk=scenario.pk).update(created_at=saved)
    response = client.get(reverse("planning:scenario", args=[scenario.pk]))
    assert response.status_code == 200
    months = response.context["months"]
    assert months[0].month == saved.date().replace(day=1)
    assert months[-1].month == timezone.now().date().replace(day=1)
    cost_days = [world.end.date() - timedelta(days=d) for d in range(1, w.DAYS + 1)]
    for m in months:
        days = sum(1 for d in cost_days if d.replace(day=1) == m.month)
        assert m.days == days
        if days:
            # $200 a day actually spent; the plan's monthly figure for as many days.
            assert m.actual_cost == pytest.approx(200.0 * days)
            assert m.planned_cost == pytest.approx(round(H200_TOTAL, 2) * days / pi.DAYS_PER_MONTH)
            assert m.actual_tokens == 576_000_000 * days
        else:
            assert m.actual_cost is None and m.planned_cost is None
    assert sum(m.days for m in months) == w.DAYS
    html = response.content.decode()
    assert "fp8 on 8× H200 SXM 141GB serves the planned peak" in html
    assert "data-reopen" in html
    # Another team's lead cannot read it; an engineer can but cannot delete it.
    assert (
        login_client(cast["other_lead"]).get(reverse("planning:scenario", args=[scenario.pk])).status_code
        == 404
    )
    delete = reverse("planning:scenario_delete", args=[scenario.pk])
    assert login_client(cast["engineer"]).post(delete).status_code == 403
    assert client.post(delete).status_code == 302
    assert not PlanScenario.objects.exists()


def test_it_reads_a_flat_number_of_queries(
    world: w.World, lead: Any, login_client: Any, django_assert_max_num_queries: Any
) -> None:
    client = login_client(lead)
    with django_assert_max_num_queries(25) as captured:
        _plan(client)
    # Twice the benchmark history costs no query more.
    w.benchmarks_record(team=world.team, now=timezone.now() - timedelta(days=5))
    with django_assert_max_num_queries(len(captured.captured_queries)):
        _plan(client)


def test_it_names_the_price_basis_of_today_and_of_the_plan_and_splits_the_saving(
    world: w.World, lead: Any, login_client: Any
) -> None:
    """Today is priced by the cost tables, the options on the page's basis: the saving card says
    both, and splits the saving into the hardware and the change of basis, which add up to it."""
    response = _plan(login_client(lead))
    plan: c.Plan = response.context["plan"]
    best = plan.best
    assert best is not None and best.saving_monthly is not None
    assert best.saving_basis is not None and best.saving_hardware is not None
    assert best.saving_basis + best.saving_hardware == best.saving_monthly
    html = response.content.decode()
    card = html.split('data-kpi="saving"')[1].split("</div>")[0]
    assert "priced on" in card and "data-saving-split" in card
    assert f"Of it, {best.saving_hardware:,.0f} is the hardware" in card
    assert f"{best.price.label}" in card  # type: ignore[union-attr]
    monthly = html.split('data-kpi="monthly"')[1].split("</div>")[0]
    assert "priced on" in monthly and "data-price-basis" in monthly


def test_it_writes_each_per_1m_column_in_one_format_by_the_number_rules(
    world: w.World, engineer: Any, login_client: Any
) -> None:
    response = _plan(login_client(engineer))
    plan = response.context["plan"]
    body = response.content.decode()
    for column, figure in (("per1m", "cost_per_1m"), ("bench1m", "benchmark_cost_per_1m")):
        cells = re.findall(rf'data-col="{column}">([^<]*)<', body)
        values = [getattr(o, figure) for o in plan.options if getattr(o, figure) is not None]
        written = [cell for cell in cells if cell != "—"]
        assert written, column
        # One number of decimals for the column: three significant digits of its cheapest
        # value, cents at least (before: four fixed decimals whatever the values, "330.0733").
        decimals = max(2, column_decimals(values, significant=3, most=6))
        assert {len(cell.partition(".")[2]) for cell in written} == {decimals}, (column, written)
        assert set(written) <= {f"{float(v):,.{decimals}f}" for v in values}, (column, written)
