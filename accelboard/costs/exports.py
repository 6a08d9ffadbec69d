"""CSV and XLSX writers for the finance tables. Pure: plain rows in, bytes out, no ORM.

Every table a finance page shows is a :class:`ExportTable` (columns with labels and units, rows
as dicts), so the page, the CSV and the XLSX read the same numbers. Exports carry the inputs as
columns (hours, price per hour, price source, fetched date, kWh, PUE, electricity price) so a
reader can redo any figure by hand.

Cells that start with ``=``, ``+``, ``-``, ``@`` (or a tab / carriage return) and are *text* are
prefixed with an apostrophe: a price source or a hostname must never run as a spreadsheet
formula (CSV injection, OWASP). Numbers stay numbers.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from openpyxl import Workbook
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter

CSV_CONTENT_TYPE = "text/csv; charset=utf-8"
XLSX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
FORMATS = ("csv", "xlsx")

_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class Column:
    """``kind`` says how the page formats the value (money, hours, kwh, kg, pct, int, date,
    flag, text); ``on_page`` False keeps a column in the exports only (the page stays readable
    at 1440 px while the file carries every input)."""

    key: str
    label: str
    kind: str = "text"
    on_page: bool = True


@dataclass
class ExportTable:
    """A table as shown on a page: ``name`` is its id in URLs (``?table=``), ``title`` its caption."""

    name: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)

    def header(self) -> list[str]:
        return [column.label for column in self.columns]

    def values(self) -> list[list[Any]]:
        return [[row.get(column.key) for column in self.columns] for row in self.rows]

    def page_columns(self) -> list[Column]:
        return [column for column in self.columns if column.on_page]

    def page_rows(self) -> list[dict[str, Any]]:
        """Rows as the page shows them: formatted cells, and the row's drill-down link if any."""
        columns = self.page_columns()
        return [
            {
                "link": row.get("_link"),
                "stale": bool(row.get("price_stale") or row.get("stale")),
                "cells": [
                    {"text": cell_format(row.get(column.key), column.kind), "kind": column.kind}
                    for column in columns
                ],
            }
            for row in self.rows
        ]


def cell_format(value: Any, kind: str) -> str:
    """How the page writes a value: thousands separators, fixed decimals per unit, "—" for a gap."""
    if value is None or value == "":
        return "—"
    if kind == "flag":
        return "stale" if value else ""
    if kind == "money":
        return f"{float(value):,.2f}"
    if kind == "rate":
        return f"{float(value):,.4f}"
    if kind in ("hours", "kwh", "kg"):
        return f"{float(value):,.1f}"
    if kind == "pct":
        return f"{float(value):+.1f} %"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "date" and isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return str(value)


def _safe_text(value: str) -> str:
    return "'" + value if value.startswith(_FORMULA_PREFIXES) else value


def _csv_cell(value: Any) -> str:
    if value is None:
        # A gap stays a gap: an empty cell, never a zero.
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return repr(round(value, 6))
    if isinstance(value, (int, Decimal)):
        return str(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return _safe_text(str(value))


def table_csv(*, table: ExportTable) -> bytes:
    """UTF-8 CSV with a BOM (so Excel reads accents right), header row first."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(table.header())
    for values in table.values():
        writer.writerow([_csv_cell(value) for value in values])
    return ("\ufeff" + buffer.getvalue()).encode("utf-8")


def _xlsx_cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        # Excel has no time zones: write UTC, as every page shows.
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, str):
        return _safe_text(value)
    return value


def tables_xlsx(*, tables: list[ExportTable]) -> bytes:
    """One sheet per table (sheet names are the tables' names, cut to Excel's 31 characters)."""
    workbook = Workbook()
    workbook.remove(workbook.active)
    for table in tables:
        sheet = workbook.create_sheet(title=table.name[:31])
        sheet.append(table.header())
        for cell in sheet[1]:
            cell.font = Font(bold=True)
        for values in table.values():
            sheet.append([_xlsx_cell(value) for value in values])
        sheet.freeze_panes = "A2"
        for index, column in enumerate(table.columns, start=1):
            sheet.column_dimensions[get_column_letter(index)].width = min(max(len(column.label) + 2, 10), 40)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def table_xlsx(*, table: ExportTable) -> bytes:
    return tables_xlsx(tables=[table])


# --- the finance tables ------------------------------------------------------------------------
# Built from the report selectors' plain rows; the page, the CSV and the XLSX all read these.


def _breakdown_columns(label: str, currency: str) -> list[Column]:
    return [
        Column("label", label),
        Column("total_cost", f"Spend ({currency})", "money"),
        Column("capacity_cost", f"Capacity ({currency})", "money"),
        Column("energy_cost", f"Energy cost ({currency})", "money"),
        Column("idle_cost", f"Idle cost ({currency})", "money"),
        Column("previous_total", f"Previous month ({currency})", "money"),
        Column("change_pct", "Change vs previous month (%)", "pct"),
        Column("alloc_hours", "GPU-hours held (h)", "hours"),
        Column("busy_hours", "GPU-hours busy (h)", "hours", on_page=False),
        Column("idle_hours", "GPU-hours idle (h)", "hours"),
        Column("energy_kwh", "Energy (kWh)", "kwh"),
        Column("energy_kwh_pue", "Energy × PUE (kWh)", "kwh", on_page=False),
        Column("carbon_kg", "Carbon (kgCO2e)", "kg"),
        Column("rows", "Host-days", "int", on_page=False),
        Column("stale_rows", "Host-days on a stale price", "int"),
        Column("unpriced_rows", "Host-days without a price", "int", on_page=False),
    ]


def group_row(group: Any, *, link: str | None = None) -> dict[str, Any]:
    row = {
        name: group.value(name)
        for name in (
            "label",
            "total_cost",
            "capacity_cost",
            "energy_cost",
            "idle_cost",
            "previous_total",
            "alloc_hours",
            "busy_hours",
            "idle_hours",
            "energy_kwh",
            "energy_kwh_pue",
            "carbon_kg",
            "rows",
            "stale_rows",
            "unpriced_rows",
        )
    }
    row["change_pct"] = group.change_pct
    row["_link"] = link
    return row


def breakdown_table(
    *, name: str, label: str, groups: list[Any], currency: str, links: list[str | None] | None = None
) -> ExportTable:
    links = links or [None] * len(groups)
    return ExportTable(
        name=f"by_{name}",
        title=f"Spend by {label.lower()}",
        columns=_breakdown_columns(label, currency),
        rows=[group_row(group, link=link) for group, link in zip(groups, links, strict=True)],
    )


def model_table(*, groups: list[Any], currency: str, links: list[str | None] | None = None) -> ExportTable:
    """Serving spend per model (from the daily serving costs): GPU-hours, energy, money."""
    return ExportTable(
        name="by_model",
        title="Serving spend by model",
        columns=[
            Column("label", "Model"),
            Column("total_cost", f"Spend ({currency})", "money"),
            Column("capacity_cost", f"Capacity ({currency})", "money"),
            Column("energy_cost", f"Energy cost ({currency})", "money"),
            Column("alloc_hours", "GPU-hours (h)", "hours"),
            Column("energy_kwh", "Energy (kWh)", "kwh"),
            Column("energy_kwh_pue", "Energy × PUE (kWh)", "kwh"),
            Column("carbon_kg", "Carbon (kgCO2e)", "kg"),
            Column("stale_rows", "Days on a stale price", "int"),
        ],
        rows=[
            group_row(group, link=link)
            for group, link in zip(groups, links or [None] * len(groups), strict=True)
        ],
    )


def daily_table(*, rows: list[dict[str, Any]], currency: str) -> ExportTable:
    return ExportTable(
        name="daily",
        title="Spend per day",
        columns=[
            Column("day", "Day (UTC)", "date"),
            Column("by", "Grouped by"),
            Column("group", "Group"),
            Column("spend", f"Spend ({currency})", "money"),
        ],
        rows=rows,
    )


# The inputs behind a figure, as every table that prices GPU time lists them.
_PRICE_INPUTS = [
    Column("price_per_hour", "Instance price per hour", "rate", on_page=False),
    Column("price_gpus", "GPUs in priced instance", "int", on_page=False),
    Column("price_source", "Price source", on_page=False),
    Column("price_fetched_on", "Price fetched", "date"),
]
_ENERGY_INPUTS = [
    Column("energy_kwh", "Energy (kWh)", "kwh"),
    Column("pue", "PUE", "rate", on_page=False),
    Column("energy_kwh_pue", "Energy × PUE (kWh)", "kwh", on_page=False),
    Column("kwh_price", "Electricity price per kWh", "rate"),
    Column("kwh_source", "Electricity price source", on_page=False),
    Column("kwh_fetched_on", "Electricity price fetched", "date", on_page=False),
    Column("carbon_kg", "Carbon (kgCO2e)", "kg", on_page=False),
]
_INPUT_COLUMNS = [
    Column("gpus", "GPUs", "int"),
    Column("alloc_hours", "GPU-hours held (h)", "hours"),
    Column("busy_hours", "GPU-hours busy (h)", "hours", on_page=False),
    Column("idle_hours", "GPU-hours idle (h)", "hours"),
    Column("gpu_hour_rate", "Price per GPU-hour", "rate"),
    *_PRICE_INPUTS,
    *_ENERGY_INPUTS,
    Column("capacity_cost", "Capacity", "money"),
    Column("energy_cost", "Energy cost", "money"),
    Column("idle_cost", "Idle cost", "money"),
    Column("total_cost", "Spend", "money"),
    Column("currency", "Currency", on_page=False),
    Column("price_stale", "Stale price", "flag"),
]


def hosts_table(*, rows: list[dict[str, Any]]) -> ExportTable:
    return ExportTable(
        name="hosts",
        title="Hosts",
        columns=[
            Column("host__hostname", "Host", "key"),
            Column("team__name", "Team"),
            Column("project", "Project"),
            Column("provider", "Provider", on_page=False),
            Column("region", "Region", on_page=False),
            Column("accelerator_type__name", "Accelerator type"),
            Column("days", "Days", "int"),
            *_INPUT_COLUMNS,
        ],
        rows=rows,
    )


def days_table(*, rows: list[dict[str, Any]]) -> ExportTable:
    return ExportTable(
        name="days",
        title="Host days",
        columns=[
            Column("day", "Day (UTC)", "date"),
            Column("host__hostname", "Host", "key"),
            Column("team__name", "Team", on_page=False),
            Column("project", "Project", on_page=False),
            Column("provider", "Provider", on_page=False),
            Column("region", "Region", on_page=False),
            Column("accelerator_type__name", "Accelerator type"),
            *_INPUT_COLUMNS,
        ],
        rows=rows,
    )


def prices_table(*, rows: list[dict[str, Any]]) -> ExportTable:
    return ExportTable(
        name="prices",
        title="Price rows used",
        columns=[
            Column("kind", "Kind"),
            Column("id", "Price row id", "int"),
            Column("key", "Applies to"),
            Column("price", "Price", "rate"),
            Column("unit", "Unit"),
            Column("per_gpu", "Per GPU-hour", "rate"),
            Column("pue", "PUE", "rate"),
            Column("source", "Source"),
            Column("fetched_on", "Fetched", "date"),
            Column("valid_from", "Valid from", "date"),
            Column("valid_to", "Valid until (exclusive)", "date"),
            Column("stale", "Stale (> 30 days)", "flag"),
            Column("rows", "Host-days using it", "int"),
        ],
        rows=rows,
    )


def serving_table(*, rows: list[dict[str, Any]]) -> ExportTable:
    """The serving rows behind one model's spend (one per day, host and variant)."""
    return ExportTable(
        name="serving",
        title="Serving days",
        columns=[
            Column("day", "Day (UTC)", "date"),
            Column("host__hostname", "Host", "key"),
            Column("team__name", "Team", on_page=False),
            Column("variant__model__name", "Model", on_page=False),
            Column("variant__name", "Variant"),
            Column("requests", "Requests", "int"),
            Column("prompt_tokens", "Prompt tokens", "int", on_page=False),
            Column("generated_tokens", "Generated tokens", "int"),
            Column("gpu_hours", "GPU-hours (h)", "hours"),
            *_PRICE_INPUTS,
            *_ENERGY_INPUTS,
            Column("energy_per_token_j", "Energy per token (J)", "rate"),
            Column("capacity_cost", "Capacity", "money"),
            Column("energy_cost", "Energy cost", "money"),
            Column("total_cost", "Spend", "money"),
            Column("cost_per_1m_tokens", "Cost per 1M tokens", "money"),
            Column("currency", "Currency", on_page=False),
            Column("price_stale", "Stale price", "flag"),
        ],
        rows=rows,
    )
