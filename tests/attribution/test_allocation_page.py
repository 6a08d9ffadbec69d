"""``/costs/allocation/`` over the shared host's day (tests/attribution/conftest.py).

Worked by hand: the price is 98.32 USD for 8 H100s, 12.29 USD per GPU-hour; the host reports
84 GPU-hours (three GPUs all day, one half of it), 84 × 12.29 = 1032.36 USD, the month's spend.
On the allocation basis a GPU-day is 294.96 USD:
- the time-sliced GPU: ns-a and ns-b hold half of it each for 12 h (73.74 each), the unmapped pod
  all of it for 6 h (73.74 unattributed), nobody the last 6 h (73.74 idle);
- the MIG GPU: ns-a's 3/7 all day (126.411…), ns-b's 2/7 half the day (42.137…), 3/7 idle
  (126.411…); the cent left goes to the largest remainder, ns-b: 126.41 + 42.14 + 126.41;
- the full GPU: ns-a all day, 294.96; the idle GPU's 12 h: 147.48 idle.
So ns-a 495.11, ns-b 115.88, unattributed 73.74, idle 347.63: 1032.36.
"""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from openpyxl import load_workbook

from accelboard.attribution.services import RuleInput, allocation_day_compute, rule_set_save
from accelboard.benchmarks.services import model_variant_get_or_create
from accelboard.costs.models import CostDaily
from accelboard.fleet.models import Host, Workload
from accelboard.serving.models import InferenceMetric

from .conftest import DAY, T0, rules_v1

pytestmark = pytest.mark.django_db
URL = "/costs/allocation/"
MONTH = "2026-11"
TOTAL = Decimal("1032.36")
GROUPS = ["team", "namespace", "workload", "model", "gpu", "host"]


def _page(client: Client, user: Any, **params: str) -> Any:
    client.force_login(user)
    response = client.get(URL, {"month": MONTH, **params})
    assert response.status_code == 200, response.content[:2000]
    return response


def _rows(response: Any) -> list[tuple[str, str, Decimal]]:
    return [(row["_kind"], row["label"], row["cost"]) for row in response.context["table"].rows]


def _card(response: Any) -> Decimal:
    [card] = response.context["cards"]
    return Decimal(card["total"])


def test_it_splits_the_month_by_namespace_as_worked_by_hand(client: Client, world: Any, finance: Any) -> None:
    response = _page(client, finance, group_by="namespace")
    assert _rows(response) == [
        ("workload", "ns-a", Decimal("495.11")),
        ("workload", "ns-b", Decimal("115.88")),
        ("unattributed", "unmapped · unattributed", Decimal("73.74")),
        ("idle", "Idle", Decimal("347.63")),
    ]
    assert _card(response) == TOTAL
    body = response.content.decode()
    assert 'data-total="spend" data-value="1032.36"' in body
    # Idle and unattributed are rows of their own, on the page and in the chart.
    assert 'data-kind="idle"' in body and 'data-kind="unattributed"' in body
    figure = response.context["figure"]
    assert [trace["name"] for trace in figure["data"]] == ["Workloads", "Unattributed", "Idle"]
    assert figure["layout"]["meta"] == {"sums_to": "spend"}
    # Every workload row energy: 112,752,000 J in all, 31.32 kWh.
    assert sum(row["energy_j"] for row in response.context["table"].rows) == 112_752_000
    assert "31.3 <small>kWh</small>" in body


@pytest.mark.parametrize("group_by", GROUPS)
@pytest.mark.parametrize("basis", ["allocation", "usage"])
@pytest.mark.parametrize("idle", ["separate", "share"])
def test_its_rows_chart_and_card_add_up_to_the_costs_pages_spend(
    client: Client, world: Any, finance: Any, group_by: str, basis: str, idle: str
) -> None:
    response = _page(client, finance, group_by=group_by, basis=basis, idle=idle)
    rows = response.context["table"].rows
    assert sum(row["cost"] for row in rows) == _card(response) == TOTAL
    drawn = sum(sum(trace["x"]) for trace in response.context["figure"]["data"])
    assert drawn == pytest.approx(float(TOTAL), abs=0.005)
    assert ("idle" in {row["_kind"] for row in rows}) == (idle == "separate")
    assert "unattributed" in {row["_kind"] for row in rows}
    # The costs page's spend for the month and the same teams (finance: every team), each
    # host-day row taken at the cent (docs/attribution.md): here one row, 1032.3600.
    costs = client.get("/costs/", {"month": MONTH})
    assert costs.context["report"].total.total_cost == TOTAL
    assert sum(row.total_cost.quantize(Decimal("0.01")) for row in CostDaily.objects.all()) == TOTAL


@pytest.mark.parametrize("group_by", GROUPS)
def test_its_exports_equal_the_page_row_for_row(
    client: Client, world: Any, finance: Any, group_by: str
) -> None:
    response = _page(client, finance, group_by=group_by, basis="usage")
    table = response.context["table"]
    page = [[row["label"], row["kind"], row["cost"], row["energy_j"]] for row in table.rows]

    csv_response = client.get(
        URL, {"month": MONTH, "group_by": group_by, "basis": "usage", "format": "csv", "table": "allocation"}
    )
    assert csv_response.status_code == 200
    assert (
        csv_response["Content-Disposition"]
        == f'attachment; filename="costs-by-{group_by}-{MONTH}-usage-allocation.csv"'
    )
    header, *lines = list(csv.reader(io.StringIO(csv_response.content.decode("utf-8-sig"))))
    at = {label: i for i, label in enumerate(header)}
    from_csv = [
        [
            line[at[table.columns[0].label]],
            line[at["Kind"]],
            Decimal(line[at["Cost"]]),
            int(line[at["Energy (J)"]]),
        ]
        for line in lines
    ]
    assert from_csv == page
    assert sum(row[2] for row in from_csv) == TOTAL

    xlsx = client.get(URL, {"month": MONTH, "group_by": group_by, "basis": "usage", "format": "xlsx"})
    assert xlsx.status_code == 200
    [sheet] = load_workbook(io.BytesIO(xlsx.content)).worksheets
    cells = [list(row) for row in sheet.iter_rows(values_only=True)]
    start = next(i for i, row in enumerate(cells) if row and row[0] == table.columns[0].label) + 1
    head = cells[start - 1]
    cost_at, j_at = head.index("Cost"), head.index("Energy (J)")
    body = cells[start : start + len(page)]
    assert [[r[0], r[1], Decimal(str(r[cost_at])), r[j_at]] for r in body] == page
    totals = cells[start + len(page)]
    assert totals[0] == "Total" and Decimal(str(totals[cost_at])) == TOTAL


def test_both_bases_have_the_same_total(client: Client, world: Any, finance: Any) -> None:
    allocation = _page(client, finance, group_by="workload", basis="allocation")
    usage = _page(client, finance, group_by="workload", basis="usage")
    assert _card(allocation) == _card(usage) == TOTAL
    # Every held minute of this day is at 100 % (or unmeasured, MIG) and the shares fill the
    # devices: both bases agree row for row (docs/attribution.md).
    assert _rows(allocation) == _rows(usage)


def test_sharing_idle_keeps_the_total_and_spreads_it_by_cost(
    client: Client, world: Any, finance: Any
) -> None:
    response = _page(client, finance, group_by="namespace", idle="share")
    rows = _rows(response)
    assert sum(cost for _, _, cost in rows) == TOTAL
    # 347.63 spread over 495.11, 115.88 and 73.74 (684.73 in all) in proportion, at the cent.
    assert [label for _, label, _ in rows] == ["ns-a", "ns-b", "unmapped · unattributed"]
    assert rows[0][2] == Decimal("495.11") + Decimal("251.36")
    assert rows[1][2] == Decimal("115.88") + Decimal("58.83")
    assert rows[2][2] == Decimal("73.74") + Decimal("37.44")


def test_another_teams_lead_sees_only_their_own_workload(client: Client, world: Any, other_lead: Any) -> None:
    response = _page(client, other_lead, group_by="namespace")
    assert _rows(response) == [("workload", "ns-b", Decimal("115.88"))]
    assert "ns-a" not in response.content.decode()
    assert "unmapped" not in response.content.decode()


def test_an_outsider_sees_no_costs(client: Client, world: Any, outsider: Any) -> None:
    response = _page(client, outsider)
    assert response.context["table"].rows == []
    assert "You are not in a team yet" in response.content.decode()


def test_the_model_grouping_prices_a_million_tokens_where_the_model_served(
    client: Client, world: Any, finance: Any, staff: Any
) -> None:
    team = world["team"]
    # The pod's labels as a later batch of its agent would send them.
    Workload.objects.filter(uid="ns-a/a").update(labels={"app": "qwen"})
    rule_set_save(
        user=staff,
        rules=[
            *rules_v1(team, world["other_team"]),
            RuleInput("label", "app=qwen", team=team, model="Qwen3-8B", variant="bf16"),
        ],
        note="v2",
    )
    allocation_day_compute(day=DAY)
    variant = model_variant_get_or_create(model="Qwen3-8B", variant="bf16", precision="bf16")
    host = world["gpu"][next(iter(world["gpu"]))].host
    InferenceMetric.objects.create(
        team=team,
        host=host,
        variant=variant,
        interval_start=T0,
        interval_s=300,
        requests=10,
        prompt_tokens=500_000,
        generated_tokens=1_500_000,
    )
    # The same model served on a host where no workload of it held a GPU: its tokens are not set
    # against the cost attributed on shared-node (cost and tokens cover the same GPUs' days).
    elsewhere = Host.objects.create(hostname="elsewhere-01", team=team)
    InferenceMetric.objects.create(
        team=team,
        host=elsewhere,
        variant=variant,
        interval_start=T0,
        interval_s=300,
        requests=10,
        prompt_tokens=100_000,
        generated_tokens=4_000_000,
    )
    response = _page(client, finance, group_by="model")
    table = response.context["table"]
    by_label = {row["label"]: row for row in table.rows if row["_kind"] == "workload"}
    assert set(by_label) == {"Qwen3-8B bf16", "(no model)"}
    qwen, other = by_label["Qwen3-8B bf16"], by_label["(no model)"]
    # Per 1M generated tokens, as the serving costs count them (prompt tokens are not output).
    assert (qwen["label"], qwen["cost"], qwen["tokens"]) == ("Qwen3-8B bf16", Decimal("495.11"), 1_500_000)
    # 495.11 USD for 1.5M tokens: 330.0733 USD per 1M.
    assert qwen["cost_per_mtok"].quantize(Decimal("0.0001")) == Decimal("330.0733")
    assert other["label"] == "(no model)" and other["cost_per_mtok"] is None
    body = response.content.decode()
    # The page writes it by the number rules (a rate of one or more to the cent): 330.07.
    assert "330.07" in body and "330.0733" not in body and "n/a" in body


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"month": "2026-13"}, "month"),
        ({"group_by": "pod"}, "group_by"),
        ({"basis": "money"}, "basis"),
        ({"idle": "hide"}, "idle"),
        ({"format": "pdf"}, "format"),
        ({"format": "csv", "table": "nope"}, "table"),
        ({"format": "csv"}, "table"),
    ],
)
def test_it_refuses_bad_params_naming_the_field(
    client: Client, world: Any, finance: Any, params: dict[str, str], field: str
) -> None:
    client.force_login(finance)
    response = client.get(URL, {"month": MONTH, **params})
    assert response.status_code == 400
    assert f"{field}:" in response.content.decode()


@pytest.mark.parametrize(("group_by", "queries"), [("workload", 5), ("model", 7)])
def test_it_reads_the_month_in_a_fixed_number_of_queries(
    client: Client, world: Any, finance: Any, django_assert_max_num_queries: Any, group_by: str, queries: int
) -> None:
    client.force_login(finance)
    # The session, the user, their teams, the month's default, one grouped read (model: and the
    # days each model held GPUs, and the tokens served), whatever the number of rows.
    with django_assert_max_num_queries(queries):
        response = client.get(URL, {"group_by": group_by})
    assert response.status_code == 200
