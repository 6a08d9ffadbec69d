"""Cost tables reconcile: every total is the sum of named parts, in every breakdown and export.

Invariants over every table the finance pages show and export, for every role that sees them
(the hand-worked fleet of ``test_pages.cost_fleet``, plus what makes tables disagree: a model's
serving rows, a host-day on a stale price, a host-day whose energy is priced but whose GPUs are
not, minutes of middling utilisation):

1. in every row and every totals row, Spend = Capacity + Energy cost and GPU-hours held =
   busy + idle (``tests.numbers.parts_problems``);
2. every breakdown of the report (team, project, accelerator type, provider, model, day) adds up
   to the same GPU-hours held, spend and spend on a stale price (``same_totals_problems``), and
   the drill-down's hosts and host-days to the same;
3. each CSV holds the page's rows and columns, and its columns add up to the page's totals.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from accelboard.benchmarks.services import model_variant_get_or_create
from accelboard.costs.exports import ExportTable
from accelboard.costs.models import CostDaily, ServingCostDaily
from tests.costs import test_pages
from tests.costs.test_pages import OCT, cost_row
from tests.numbers import parts_problems, same_totals_problems

pytestmark = pytest.mark.django_db
fleet = test_pages.cost_fleet
ROLES = ("finance", "lead", "other_lead")


@pytest.fixture
def tangled(fleet: dict[str, Any]) -> dict[str, Any]:
    """The fleet, with what the tables used to disagree on."""
    a, b = fleet["a"], fleet["b"]
    # Utilisation-weighted hours are not the hours held less the idle ones (busy at 40 %).
    CostDaily.objects.filter(host=a).update(busy_hours=70.0)
    # A day whose energy has a price and whose GPUs have none: a spend of None, parts of None.
    cost_row(
        host=b,
        day=OCT + dt.timedelta(days=1),
        accelerator_type=fleet["l4"],
        gpus=2,
        rate=Decimal("0.50"),
        alloc_hours=48.0,
        idle_hours=12.0,
        kwh=3.0,
        accelerator_price=None,
        electricity_price=fleet["power"],
    )
    CostDaily.objects.filter(host=b, day=OCT + dt.timedelta(days=1)).update(
        capacity_cost=None, idle_cost=None, usage_cost=None, total_cost=None, gpu_hour_rate=None
    )
    # The stale host (b) served a model on 1 October: its model row carries the stale spend.
    variant = model_variant_get_or_create(model="Llama-3.1-8B", variant="bf16", precision="bf16")
    for host, hours, cost, stale in ((a, 40.0, "491.60", False), (b, 20.0, "10.00", True)):
        ServingCostDaily.objects.create(
            day=OCT,
            team=host.team,
            variant=variant,
            host=host,
            requests=1000,
            generated_tokens=2_000_000,
            gpu_hours=hours,
            capacity_cost=Decimal(cost),
            energy_cost=Decimal("0"),
            cost=Decimal(cost),
            cost_per_1m_tokens=Decimal(cost) / 2,
            currency="USD",
            price_stale=stale,
            computed_at=timezone.now(),
        )
    return fleet


def _csv(response: Any) -> tuple[list[str], list[list[str]]]:
    assert response.status_code == 200, response.content[:300]
    header, *rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    return header, rows


def _totals(table: ExportTable) -> dict[str, float | None]:
    totals = table.totals_row() or {}
    found: dict[str, float | None] = {}
    for column in table.columns:
        for figure in ("GPU-hours held", "Spend", "Spend on a stale price"):
            if column.label == figure or column.label.startswith(f"{figure} ("):
                value = totals.get(column.key)
                found[figure] = float(value) if value is not None else 0.0
    return found


def _table_problems(table: ExportTable, *, where: str) -> list[str]:
    """Named parts in the table's rows and totals row, as held (numbers) and as the page writes them."""
    rows = table.values()
    totals = table.totals_row()
    if totals is not None:
        rows.append([totals.get(column.key) for column in table.columns])
    found = parts_problems(header=table.header(), rows=rows, where=f"{where} {table.name}")
    page_header = [column.label for column in table.page_columns()]
    page_rows = [[cell["text"] for cell in row["cells"]] for row in table.page_rows()]
    page_rows += [[cell["text"] for cell in table.page_totals() or []]]
    return found + parts_problems(header=page_header, rows=page_rows, where=f"{where} page {table.name}")


def _export_problems(client: Any, url: str, params: dict[str, str], table: ExportTable) -> list[str]:
    """The CSV of a table holds the page's rows, column by column, adding up to its totals."""
    header, rows = _csv(client.get(url, {**params, "format": "csv", "table": table.name}))
    where = f"{url} {params} {table.name}.csv"
    if header != table.header():
        return [f"{where}: columns {header} are not the page's {table.header()}"]
    found = []
    if len(rows) != len(table.rows):
        found.append(f"{where}: {len(rows)} rows, the page has {len(table.rows)}")
    totals = table.totals_row() or {}
    for index, column in enumerate(table.columns):
        if not column.summed or totals.get(column.key) is None:
            continue
        summed = sum(float(row[index]) for row in rows if row[index] != "")
        if abs(summed - float(totals[column.key])) > 0.005:
            found.append(
                f"{where}: {column.label!r} sums to {summed} in the CSV, the page shows {totals[column.key]}"
            )
    return found + parts_problems(header=header, rows=rows, where=where)


@pytest.mark.parametrize("role", ROLES)
def test_it_makes_every_report_total_the_sum_of_its_named_parts(
    cast: dict[str, Any], tangled: dict[str, Any], login_client: Any, role: str
) -> None:
    client = login_client(cast[role])
    url = reverse("costs:report")
    problems: list[str] = []
    for by in ("team", "provider"):
        params = {"month": "2026-10", "by": by}
        response = client.get(url, params)
        report = response.context["report"]
        tables = [*response.context["tables"], response.context["daily_table"]]
        assert {"by_team", "by_provider", "daily"} <= {table.name for table in tables}
        totals: dict[str, dict[str, float | None]] = {
            "report": {
                "GPU-hours held": report.total.alloc_hours,
                "Spend": float(report.total.total_cost),
                "Spend on a stale price": float(report.total.stale_cost),
            }
        }
        for table in tables:
            problems += _table_problems(table, where=f"{role} report by {by}")
            problems += _export_problems(client, url, params, table)
            totals[table.name] = _totals(table)
        problems += same_totals_problems(totals, where=f"{role} report by {by}")
    assert problems == []


@pytest.mark.parametrize("role", ROLES)
def test_it_makes_every_drill_down_add_up_to_the_report(
    cast: dict[str, Any], tangled: dict[str, Any], login_client: Any, role: str
) -> None:
    client = login_client(cast[role])
    report = client.get(reverse("costs:report"), {"month": "2026-10"}).context["report"]
    url = reverse("costs:drill")
    problems: list[str] = []
    totals: dict[str, dict[str, float | None]] = {
        "report": {"GPU-hours held": report.total.alloc_hours, "Spend": float(report.total.total_cost)}
    }
    for params in ({"month": "2026-10", "day": OCT.isoformat()}, {"month": "2026-10"}):
        for table in client.get(url, params).context["tables"]:
            problems += _table_problems(table, where=f"{role} drill {params}")
            problems += _export_problems(client, url, params, table)
            if "day" not in params and table.name == "hosts":
                totals["hosts"] = {k: v for k, v in _totals(table).items() if k != "Spend on a stale price"}
    # Each model's serving rows add up to its line of the report.
    for group in report.by_model:
        if group.key == "-":
            continue
        params = {"month": "2026-10", "model": group.label}
        serving = client.get(url, params).context["tables"][0]
        problems += _table_problems(serving, where=f"{role} drill {params}")
        problems += _export_problems(client, url, params, serving)
        problems += same_totals_problems(
            {
                "report": {"GPU-hours held": group.alloc_hours, "Spend": float(group.total_cost)},
                "serving": _totals(serving),
            },
            where=f"{role} model {group.label}",
        )
    problems += same_totals_problems(totals, where=f"{role} drill")
    assert problems == []


def test_it_says_how_much_spend_sits_on_a_stale_price_in_every_breakdown(
    cast: dict[str, Any], tangled: dict[str, Any], login_client: Any
) -> None:
    report = (
        login_client(cast["finance"]).get(reverse("costs:report"), {"month": "2026-10"}).context["report"]
    )
    # b's 1 October: 50.00 at a price fetched in June 2025; 10.00 of it served the model.
    assert report.total.stale_cost == Decimal("50.00")
    by_model = {group.label: group.stale_cost for group in report.by_model}
    assert by_model == {"Llama-3.1-8B": Decimal("10.00"), "Not attributed to a model": Decimal("40.00")}
    by_team = {group.label: group.stale_cost for group in report.breakdowns["team"]}
    assert by_team == {"Inference Platform": Decimal("0"), "Research": Decimal("50.00")}
    # Busy and idle split the hours held: a's 2 × 192 h with 48 idle a day, b's 100 + 48 (12 idle).
    assert report.total.alloc_hours == pytest.approx(384 + 148)
    assert report.total.active_hours == pytest.approx(384 - 96 + 148 - 12)


def test_it_stores_a_spend_that_is_the_sum_of_its_stored_parts() -> None:
    from accelboard.costs.services import _spend

    # Unrounded, 1.00004 + 2.00004 = 3.00008 would round to 3.0001; the stored parts sum to 3.0000.
    assert _spend(Decimal("3.00008"), capacity=Decimal("1.00004"), energy=Decimal("2.00004")) == Decimal(
        "3.0000"
    )
    assert _spend(None, capacity=Decimal("1"), energy=None) is None
    assert _spend(Decimal("1.5"), capacity=Decimal("1.5"), energy=None) == Decimal("1.5000")
