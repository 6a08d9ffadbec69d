"""Exports of the finance tables: the CSV and XLSX files are parsed back and their rows checked
against the hand-worked CostDaily rows of ``test_pages.cost_fleet`` (``fleet`` here) (see its docstring)."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal
from typing import Any

import openpyxl
import pytest
from django.urls import reverse

from accelboard.costs.exports import Column, ExportTable, table_csv, tables_xlsx
from tests.costs import test_pages
from tests.costs.test_pages import FRESH

# The hand-worked fleet of the page tests, for every test here that reads the database.
fleet = test_pages.cost_fleet
pytestmark = pytest.mark.django_db


def _csv(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/csv")
    text = response.content.decode("utf-8-sig")
    return list(csv.DictReader(io.StringIO(text)))


def _xlsx(response: Any) -> Any:
    assert response.status_code == 200, response.content[:300]
    assert "spreadsheetml" in response["Content-Type"]
    return openpyxl.load_workbook(io.BytesIO(response.content), read_only=True)


def test_it_exports_the_team_breakdown_as_csv_with_the_pages_numbers(
    cast: dict[str, Any], fleet: dict[str, Any], login_client: Any
) -> None:
    response = login_client(cast["finance"]).get(
        reverse("costs:report"), {"month": "2026-10", "format": "csv", "table": "by_team"}
    )
    assert 'filename="costs-2026-10-by_team.csv"' in response["Content-Disposition"]
    rows = _csv(response)
    assert [row["Team"] for row in rows] == ["Inference Platform", "Research"]
    inference = rows[0]
    assert float(inference["Spend (USD)"]) == pytest.approx(4749.36)
    assert float(inference["Idle cost, part of capacity (USD)"]) == pytest.approx(1179.84)
    # The change compares October with September (per day: 31 days against 30); the column says so.
    assert float(inference["Sep 1–30 (USD)"]) == pytest.approx(984.70)
    assert float(inference["Energy × PUE (kWh)"]) == pytest.approx(300.0)
    assert float(inference["Carbon (kgCO2e)"]) == pytest.approx(142.5)
    assert inference["Host-days"] == "2"
    # Research had no spend in September, and its host has no electricity price: the gaps stay
    # empty, never a zero.
    assert rows[1]["Sep 1–30 (USD)"] == ""
    assert rows[1]["Energy cost (USD)"] == ""
    assert float(rows[1]["Spend (USD)"]) == pytest.approx(50.0)
    assert rows[1]["Host-days on a stale price"] == "1"


def test_it_exports_only_the_teams_the_user_may_see(
    cast: dict[str, Any], fleet: dict[str, Any], login_client: Any
) -> None:
    client = login_client(cast["engineer"])
    rows = _csv(
        client.get(reverse("costs:report"), {"month": "2026-10", "format": "csv", "table": "by_team"})
    )
    assert [row["Team"] for row in rows] == ["Inference Platform"]
    days = _csv(client.get(reverse("costs:drill"), {"month": "2026-10", "format": "csv", "table": "days"}))
    assert {row["Host"] for row in days} == {"gpu-a"}
    outsider = login_client(cast["outsider"])
    assert (
        _csv(outsider.get(reverse("costs:drill"), {"month": "2026-10", "format": "csv", "table": "hosts"}))
        == []
    )


def test_it_exports_host_days_with_every_input_as_a_column(
    cast: dict[str, Any], fleet: dict[str, Any], login_client: Any
) -> None:
    response = login_client(cast["finance"]).get(
        reverse("costs:drill"), {"month": "2026-10", "host": "gpu-a", "format": "csv", "table": "days"}
    )
    rows = _csv(response)
    assert [row["Day (UTC)"] for row in rows] == ["2026-10-01", "2026-10-02"]
    row = rows[0]
    assert float(row["GPU-hours held (h)"]) == 192.0
    assert float(row["GPU-hours idle, < 10 % utilisation (h)"]) == 48.0
    assert float(row["Price per GPU-hour"]) == pytest.approx(12.29)
    assert float(row["Instance price per hour"]) == pytest.approx(98.32)
    assert row["GPUs in priced instance"] == "8"
    assert row["Price source"] == "skypilot-catalog aws/vms.csv"
    assert row["Price fetched"] == FRESH.isoformat()
    assert float(row["Energy (kWh)"]) == 100.0
    assert float(row["PUE"]) == 1.5
    assert float(row["Electricity price per kWh"]) == pytest.approx(0.10)
    assert row["Electricity price source"] == "utility tariff 2026"
    # The figures follow from the inputs: 192 × 12.29 + 100 × 1.5 × 0.10.
    assert float(row["Capacity"]) == pytest.approx(192 * 12.29)
    assert float(row["Energy cost"]) == pytest.approx(15.0)
    assert float(row["Spend"]) == pytest.approx(2374.68)
    assert row["Currency"] == "USD"
    assert row["Stale price"] == "no"


def test_it_exports_the_price_rows_with_source_and_fetched_date(
    cast: dict[str, Any], fleet: dict[str, Any], login_client: Any
) -> None:
    rows = _csv(
        login_client(cast["finance"]).get(
            reverse("costs:drill"), {"month": "2026-10", "format": "csv", "table": "prices"}
        )
    )
    by_source = {row["Source"]: row for row in rows}
    assert set(by_source) == {"skypilot-catalog aws/vms.csv", "utility tariff 2026", "capex sheet"}
    assert by_source["capex sheet"]["Stale (> 30 days)"] == "yes"
    assert by_source["capex sheet"]["Fetched"] == "2025-06-01"
    assert float(by_source["skypilot-catalog aws/vms.csv"]["Per GPU-hour"]) == pytest.approx(12.29)
    # gpu-a's two October days; gpu-b has no electricity row (on-prem L4 priced without one).
    assert by_source["utility tariff 2026"]["Host-days using it"] == "2"


def test_it_exports_every_report_table_in_one_workbook(
    cast: dict[str, Any], fleet: dict[str, Any], login_client: Any
) -> None:
    response = login_client(cast["finance"]).get(
        reverse("costs:report"), {"month": "2026-10", "format": "xlsx"}
    )
    workbook = _xlsx(response)
    assert workbook.sheetnames == [
        "by_team",
        "by_project",
        "by_accelerator_type",
        "by_provider",
        "by_model",
        "daily",
    ]
    sheet = list(workbook["by_provider"].iter_rows(values_only=True))
    assert sheet[0][:2] == ("Provider", "Spend (USD)")
    assert {row[0]: row[1] for row in sheet[1:]} == {
        "aws": 4749.36,
        "on-prem": 50.0,
        "Total": 4799.36,
    }
    daily = list(workbook["daily"].iter_rows(values_only=True))
    assert daily[0] == ("Day (UTC)", "Team", "Spend (USD)")
    assert (dt.datetime(2026, 10, 2), "Inference Platform", 2374.68) in daily[1:]
    assert daily[-1] == ("Total", None, 4799.36)


def test_it_exports_the_drill_down_hosts_as_xlsx_with_numbers_as_numbers(
    cast: dict[str, Any], fleet: dict[str, Any], login_client: Any
) -> None:
    response = login_client(cast["finance"]).get(
        reverse("costs:drill"), {"month": "2026-10", "format": "xlsx", "table": "hosts"}
    )
    workbook = _xlsx(response)
    assert workbook.sheetnames == ["hosts"]
    header, *rows = list(workbook["hosts"].iter_rows(values_only=True))
    records = [dict(zip(header, row, strict=True)) for row in rows]
    assert [record["Host"] for record in records] == ["gpu-a", "gpu-b", "Total"]
    assert records[-1]["Spend"] == 4799.36 and records[-1]["GPU-hours held (h)"] == 484.0
    assert records[0]["Spend"] == pytest.approx(4749.36)
    assert records[0]["Days"] == 2
    assert records[0]["Price fetched"] == dt.datetime.combine(FRESH, dt.time())
    assert records[1]["Stale price"] == "yes"


def test_it_exports_spend_per_day_in_one_grouping_that_adds_up_to_the_month(
    cast: dict[str, Any], fleet: dict[str, Any], login_client: Any
) -> None:
    # The daily file once held rows by provider and rows by team: its column summed to twice the
    # month. Now it holds the grouping the page charts, named in the file and its column.
    client = login_client(cast["finance"])
    for by, column in (("team", "Team"), ("provider", "Provider")):
        response = client.get(
            reverse("costs:report"), {"month": "2026-10", "format": "csv", "table": "daily", "by": by}
        )
        assert f'filename="costs-2026-10-by-{by}-daily.csv"' in response["Content-Disposition"]
        rows = _csv(response)
        assert list(rows[0]) == ["Day (UTC)", column, "Spend (USD)"]
        assert sum(Decimal(row["Spend (USD)"]) for row in rows) == Decimal("4799.36")


def test_it_writes_the_workbook_as_people_read_it(
    cast: dict[str, Any], fleet: dict[str, Any], login_client: Any
) -> None:
    # Every cell was "General", with float noise; no totals. Now: money with two decimals and
    # separators, dates as dates, percentages as percentages, a frozen bold header and a bold
    # totals row; the CSV keeps plain full-precision numbers.
    client = login_client(cast["finance"])
    book = openpyxl.load_workbook(
        io.BytesIO(client.get(reverse("costs:report"), {"month": "2026-10", "format": "xlsx"}).content)
    )
    sheet = book["by_team"]
    header = [cell.value for cell in sheet[1]]
    spend, hours, change = (
        header.index(n) + 1
        for n in ("Spend (USD)", "GPU-hours held (h)", "Change, Oct 1–31 vs Sep 1–30, per day (%)")
    )
    assert sheet.freeze_panes == "A2" and sheet.cell(1, 1).font.b
    assert sheet.cell(2, spend).number_format == "#,##0.00" and sheet.cell(2, spend).value == 4749.36
    assert sheet.cell(2, hours).number_format == "#,##0.0"
    assert sheet.cell(2, change).number_format.startswith("+0.0%")
    last = sheet.max_row
    assert sheet.cell(last, 1).value == "Total" and sheet.cell(last, 1).font.b
    assert sheet.cell(last, spend).value == 4799.36
    days = book["daily"]
    assert days.cell(2, 1).is_date and days.cell(2, 1).number_format == "yyyy-mm-dd"
    # A percentage cell holds the fraction, shown as a percentage.
    table = ExportTable(
        name="t", title="t", columns=[Column("p", "Change (%)", "change")], rows=[{"p": 12.5}]
    )
    cell = openpyxl.load_workbook(io.BytesIO(tables_xlsx(tables=[table])))["t"]["A2"]
    assert cell.value == 0.125 and cell.number_format.startswith("+0.0%")
    # Floats as written, not as summed: no 73233.09340000003 in a cell, nor in the CSV.
    noisy = ExportTable(
        name="n", title="n", columns=[Column("h", "Hours (h)", "hours")], rows=[{"h": 0.1 + 0.2}]
    )
    assert openpyxl.load_workbook(io.BytesIO(tables_xlsx(tables=[noisy])))["n"]["A2"].value == 0.3
    assert table_csv(table=noisy).decode("utf-8-sig").splitlines() == ["Hours (h)", "0.3"]


def test_it_ends_each_page_table_with_the_totals_its_rows_add_up_to(
    cast: dict[str, Any], fleet: dict[str, Any], login_client: Any
) -> None:
    body = login_client(cast["finance"]).get(reverse("costs:report"), {"month": "2026-10"}).content.decode()
    table = body.split('data-table="by_team"')[1].split("</table>")[0]
    foot = table.split("<tfoot>")[1]
    assert "Total" in foot and '<td class="money" data-sum>4,799.36</td>' in foot


# --- the writers, pure -------------------------------------------------------------------------


def test_it_keeps_text_cells_from_running_as_formulas() -> None:
    table = ExportTable(
        name="t",
        title="t",
        columns=[Column("source", "Source"), Column("value", "Value", "money")],
        rows=[{"source": '=HYPERLINK("http://evil")', "value": -3.5}, {"source": "@SUM(A1)", "value": None}],
    )
    rows = list(csv.reader(io.StringIO(table_csv(table=table).decode("utf-8-sig"))))
    assert rows == [["Source", "Value"], ['\'=HYPERLINK("http://evil")', "-3.5"], ["'@SUM(A1)", ""]]
    sheet = openpyxl.load_workbook(io.BytesIO(tables_xlsx(tables=[table])))["t"]
    assert sheet["A2"].value == '\'=HYPERLINK("http://evil")'
    assert sheet["A2"].data_type == "s"
    # A negative number stays a number.
    assert sheet["B2"].value == -3.5
    assert sheet["B3"].value is None


def test_it_starts_the_csv_with_a_bom_so_spreadsheets_read_utf8() -> None:
    table = ExportTable(name="t", title="t", columns=[Column("x", "Énergie × PUE (kWh)")], rows=[{"x": 1.25}])
    body = table_csv(table=table)
    assert body.startswith("\ufeff".encode())
    assert body.decode("utf-8-sig").splitlines() == ["Énergie × PUE (kWh)", "1.25"]


def test_money_in_several_currencies_is_not_added_up() -> None:
    # The hosts drill-down added EUR and USD rows into one "total"; hours still add up.
    from decimal import Decimal

    from accelboard.costs.exports import hosts_table

    rows = [
        {"host__hostname": "a", "currency": "USD", "total_cost": Decimal("10.00"), "alloc_hours": 4.0},
        {"host__hostname": "b", "currency": "EUR", "total_cost": Decimal("5.00"), "alloc_hours": 2.0},
    ]
    mixed = hosts_table(rows=rows)
    assert mixed.mixed_currencies() and mixed.currencies() == ["EUR", "USD"]
    totals = mixed.totals_row()
    assert totals is not None and totals["total_cost"] is None and totals["alloc_hours"] == 6.0
    one = hosts_table(rows=[dict(rows[0]), dict(rows[0], host__hostname="c")])
    assert not one.mixed_currencies()
    assert (one.totals_row() or {})["total_cost"] == Decimal("20.00")
