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

from accelboard.core import numbers

CSV_CONTENT_TYPE = "text/csv; charset=utf-8"
XLSX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
FORMATS = ("csv", "xlsx")

_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


# How each kind of column is written in a spreadsheet: money with two decimals and separators,
# dates as dates, percentages as percentages (the cell holds the fraction), counts as integers.
XLSX_FORMATS = {
    "money": "#,##0.00",
    "rate": "#,##0.0000",
    "hours": "#,##0.0",
    "kwh": "#,##0.0",
    "kg": "#,##0.0",
    "pct": "+0.0%;-0.0%;0.0%",
    "change": "+0.0%;-0.0%;0.0%",
    "int": "#,##0",
    "date": "yyyy-mm-dd",
}
# Kinds a totals row adds up by default (a rate, a price or a percentage is not a sum).
SUMMED_KINDS = frozenset({"money", "hours", "kwh", "kg"})


@dataclass(frozen=True)
class Column:
    """``kind`` says how the page formats the value (money, rate, hours, kwh, kg, pct, change,
    int, date, flag, text); ``on_page`` False keeps a column in the exports only (the page stays
    readable at 1440 px while the file carries every input); ``total`` says whether the totals
    row adds the column up (by default money and quantities do)."""

    key: str
    label: str
    kind: str = "text"
    on_page: bool = True
    total: bool | None = None

    @property
    def summed(self) -> bool:
        return self.kind in SUMMED_KINDS if self.total is None else self.total


@dataclass
class ExportTable:
    """A table as shown on a page: ``name`` is its id in URLs (``?table=``), ``title`` its caption.

    ``totals`` (from ``totals_row``) is the row the page's ``<tfoot>`` and the XLSX end with: the
    sum of each summed column, and ``total_values`` where a figure of the total is not a sum (the
    change of the whole). The CSV carries the data rows only, so that its columns add up to the
    totals the page shows. ``notes`` are lines the XLSX writes above nothing else: what a file
    holds (its grouping) is in its name and its columns.
    """

    name: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)
    total_values: dict[str, Any] = field(default_factory=dict)
    with_totals: bool = True

    def header(self) -> list[str]:
        return [column.label for column in self.columns]

    def values(self) -> list[list[Any]]:
        return [[row.get(column.key) for column in self.columns] for row in self.rows]

    def page_columns(self) -> list[Column]:
        return [column for column in self.columns if column.on_page]

    def currencies(self) -> list[str]:
        """The currencies of the rows, where each row names its own (``currency``)."""
        return sorted({str(row["currency"]) for row in self.rows if row.get("currency")})

    def mixed_currencies(self) -> bool:
        """Rows in more than one currency: their money is not added up (an amount in EUR plus one
        in USD is no amount); the totals row leaves it empty and the page says why."""
        return len(self.currencies()) > 1

    def totals_row(self) -> dict[str, Any] | None:
        """Column key -> the total (None where a column has none); None for a table without one."""
        if not self.with_totals or not self.rows or not any(c.summed for c in self.columns):
            return None
        mixed = self.mixed_currencies()
        totals: dict[str, Any] = {}
        for column in self.columns:
            if column.key in self.total_values:
                totals[column.key] = self.total_values[column.key]
            elif column.summed and mixed and column.kind == "money":
                totals[column.key] = None
            elif column.summed:
                values = [value for row in self.rows if (value := row.get(column.key)) is not None]
                totals[column.key] = (
                    sum(values, Decimal(0) if any(isinstance(v, Decimal) for v in values) else 0)
                    if values
                    else None
                )
            else:
                totals[column.key] = None
        first = self.columns[0].key
        if totals.get(first) is None:
            totals[first] = "Total"
        return totals

    def page_rows(self) -> list[dict[str, Any]]:
        """Rows as the page shows them: formatted cells, and the row's drill-down link if any."""
        columns = self.page_columns()
        decimals = self.rate_decimals()
        return [
            {
                "link": row.get("_link"),
                "stale": bool(row.get("price_stale") or row.get("stale")),
                "cells": [
                    {
                        "text": cell_format(row.get(column.key), column.kind, decimals.get(column.key)),
                        "kind": column.kind,
                        "change": row.get("_change") if column.kind == "change" else None,
                    }
                    for column in columns
                ],
            }
            for row in self.rows
        ]

    def rate_decimals(self) -> dict[str, int]:
        """Each rate column's one number of decimals on the page (exports keep every digit)."""
        return {
            column.key: rate_decimals([row.get(column.key) for row in self.rows])
            for column in self.columns
            if column.kind == "rate"
        }

    def page_totals(self) -> list[dict[str, Any]] | None:
        """The totals row's cells as the page shows them (``sum``: the cell is a column's sum)."""
        totals = self.totals_row()
        if totals is None:
            return None
        return [
            {
                "text": cell_format(totals.get(column.key), column.kind, self.rate_decimals().get(column.key))
                if totals.get(column.key) is not None
                else "",
                "kind": column.kind,
                "sum": column.summed
                and column.key not in self.total_values
                and totals.get(column.key) is not None,
                "change": self.total_values.get("_change") if column.kind == "change" else None,
            }
            for column in self.page_columns()
        ]


RATE_DECIMALS = 4


def rate_decimals(values: Any) -> int:
    """One number of decimals for a column of prices per hour or per kWh (``core.numbers`` rules
    3 and 7): cents at least, enough for its smallest price to keep two significant digits, four
    at most ("40.97" and "0.068" both readable; never "6.3927" beside "5.1212")."""
    return max(2, numbers.column_decimals(values, significant=2, most=RATE_DECIMALS))


def cell_format(value: Any, kind: str, decimals: int | None = None) -> str:
    """How the page writes a value: thousands separators, fixed decimals per unit, "—" for a gap;
    ``decimals``: the column's own (a rate column, ``rate_decimals``)."""
    if value is None or value == "":
        return "—"
    if kind == "flag":
        return "stale" if value else ""
    if kind == "money":
        return f"{float(value):,.2f}"
    if kind == "rate":
        return f"{float(value):,.{RATE_DECIMALS if decimals is None else decimals}f}"
    if kind in ("hours", "kwh", "kg"):
        return f"{float(value):,.1f}"
    if kind in ("pct", "change"):
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
    """UTF-8 CSV with a BOM (so Excel reads accents right), header row first; plain numbers at
    full precision and no totals row (each column adds up to the page's total)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(table.header())
    for values in table.values():
        writer.writerow([_csv_cell(value) for value in values])
    return ("\ufeff" + buffer.getvalue()).encode("utf-8")


def _xlsx_cell(value: Any, kind: str) -> Any:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if kind in ("pct", "change") and isinstance(value, (int, float, Decimal)):
        return float(value) / 100  # a percentage cell holds the fraction
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, float):
        return round(value, 6)  # no float noise (73233.09340000003) in a cell
    if isinstance(value, dt.datetime):
        # Excel has no time zones: write UTC, as every page shows.
        return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo is not None else value
    if isinstance(value, str):
        return _safe_text(value)
    return value


def tables_xlsx(*, tables: list[ExportTable]) -> bytes:
    """One sheet per table (sheet names are the tables' names, cut to Excel's 31 characters):
    a bold, frozen header, each column in its kind's number format, and a bold totals row."""
    # openpyxl is imported by the one view that writes a workbook: ~0.4 s for every other process.
    from openpyxl import Workbook
    from openpyxl.styles import Font
    from openpyxl.utils import get_column_letter

    workbook = Workbook()
    workbook.remove(workbook.active)
    bold = Font(bold=True)
    for table in tables:
        sheet = workbook.create_sheet(title=table.name[:31])
        sheet.append(table.header())
        for cell in sheet[1]:
            cell.font = bold
        rows = [[row.get(column.key) for column in table.columns] for row in table.rows]
        totals = table.totals_row()
        if totals is not None:
            rows.append([totals.get(column.key) for column in table.columns])
        for values in rows:
            sheet.append(
                [_xlsx_cell(value, column.kind) for value, column in zip(values, table.columns, strict=True)]
            )
        for index, column in enumerate(table.columns, start=1):
            letter = get_column_letter(index)
            number_format = XLSX_FORMATS.get(column.kind)
            if number_format:
                for (cell,) in sheet.iter_rows(min_row=2, min_col=index, max_col=index):
                    cell.number_format = number_format
            sheet.column_dimensions[letter].width = min(max(len(column.label) + 2, 12), 40)
        if totals is not None:
            for cell in sheet[sheet.max_row]:
                cell.font = bold
        sheet.freeze_panes = "A2"
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


# --- the finance tables ------------------------------------------------------------------------
# Built from the report selectors' plain rows; the page, the CSV and the XLSX all read these.


# GPU-hours held = busy + idle (a minute at 10 % utilisation or more is busy, below it idle);
# the utilisation-weighted hours (Σ utilisation × time, the usage basis) are another measure,
# not a part of the hours held, and their label says so.
_HOURS_COLUMNS = [
    Column("alloc_hours", "GPU-hours held (h)", "hours"),
    Column("active_hours", "GPU-hours busy, ≥ 10 % utilisation (h)", "hours", on_page=False),
    Column("idle_hours", "GPU-hours idle, < 10 % utilisation (h)", "hours"),
    Column("busy_hours", "Utilisation-weighted GPU-hours (h)", "hours", on_page=False),
]


def _breakdown_columns(label: str, currency: str, compared: str | None) -> list[Column]:
    """``compared``: the windows the change compares, in words (``Dec 1–5 vs Nov 1–5``)."""
    before = compared.split(" vs ", 1)[1].split(",")[0] if compared else "Previous month"
    return [
        Column("label", label),
        Column("total_cost", f"Spend ({currency})", "money"),
        Column("capacity_cost", f"Capacity ({currency})", "money"),
        Column("energy_cost", f"Energy cost ({currency})", "money"),
        Column("idle_cost", f"Idle cost, part of capacity ({currency})", "money"),
        Column("stale_cost", f"Spend on a stale price ({currency})", "money"),
        Column("previous_total", f"{before} ({currency})", "money"),
        Column("change_pct", f"Change, {compared} (%)" if compared else "Change (%)", "change"),
        *_HOURS_COLUMNS,
        Column("energy_kwh", "Energy (kWh)", "kwh"),
        Column("energy_kwh_pue", "Energy × PUE (kWh)", "kwh", on_page=False),
        Column("carbon_kg", "Carbon (kgCO2e)", "kg"),
        Column("rows", "Host-days", "int", on_page=False, total=True),
        Column("stale_rows", "Host-days on a stale price", "int", total=True),
        Column("unpriced_rows", "Host-days without a price", "int", on_page=False, total=True),
    ]


def change_coverage(group: Any) -> dict[str, Any] | None:
    """What a change figure compares, for the page to say (``data-change``): the windows in
    words, their days and the days of each with data."""
    comparison = getattr(group, "comparison", None)
    if comparison is None:
        return None
    return {
        "window": comparison.label,
        "days_now": comparison.days_now,
        "covered_now": len(group.covered_now),
        "days_before": comparison.days_before,
        "covered_before": len(group.covered_before),
    }


def group_row(group: Any, *, link: str | None = None) -> dict[str, Any]:
    row = {
        name: group.value(name)
        for name in (
            "label",
            "total_cost",
            "capacity_cost",
            "energy_cost",
            "idle_cost",
            "stale_cost",
            "alloc_hours",
            "active_hours",
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
    row["previous_total"] = getattr(group, "previous_total", None)
    row["change_pct"] = getattr(group, "change_pct", None)
    row["_change"] = change_coverage(group)
    row["_link"] = link
    return row


def breakdown_table(
    *,
    name: str,
    label: str,
    groups: list[Any],
    currency: str,
    links: list[str | None] | None = None,
    total: Any = None,
) -> ExportTable:
    """Spend by one dimension; ``total`` (the report's total Group) gives the totals row the
    change of the whole, and the comparison's windows name the change column."""
    links = links or [None] * len(groups)
    comparison = getattr(total, "comparison", None)
    total_values: dict[str, Any] = {}
    if total is not None:
        total_values = {
            "change_pct": total.change_pct,
            "previous_total": total.previous_total,
            "_change": change_coverage(total),
        }
    return ExportTable(
        name=f"by_{name}",
        title=f"Spend by {label.lower()}",
        columns=_breakdown_columns(label, currency, comparison.label if comparison else None),
        rows=[group_row(group, link=link) for group, link in zip(groups, links, strict=True)],
        total_values=total_values,
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
            Column("stale_cost", f"Spend on a stale price ({currency})", "money"),
            Column("alloc_hours", "GPU-hours held (h)", "hours"),
            Column("energy_kwh", "Energy (kWh)", "kwh"),
            Column("energy_kwh_pue", "Energy × PUE (kWh)", "kwh"),
            Column("carbon_kg", "Carbon (kgCO2e)", "kg"),
        ],
        rows=[
            group_row(group, link=link)
            for group, link in zip(groups, links or [None] * len(groups), strict=True)
        ],
    )


DAILY_LABELS = {"team": "Team", "provider": "Provider"}


def daily_table(*, rows: list[dict[str, Any]], currency: str, by: str) -> ExportTable:
    """Spend per day in one grouping (``by``: team or provider), so that the column adds up to
    the month's spend; the grouping is in the table's name, title and column."""
    label = DAILY_LABELS.get(by, by)
    return ExportTable(
        name="daily",
        title=f"Spend per day by {label.lower()}",
        columns=[
            Column("day", "Day (UTC)", "date"),
            Column("group", label),
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
    Column("gpus", "GPUs", "int", total=False),
    *_HOURS_COLUMNS,
    Column("gpu_hour_rate", "Price per GPU-hour", "rate"),
    *_PRICE_INPUTS,
    *_ENERGY_INPUTS,
    Column("capacity_cost", "Capacity", "money"),
    Column("energy_cost", "Energy cost", "money"),
    Column("idle_cost", "Idle cost, part of capacity", "money"),
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
            Column("days", "Days", "int", total=False),
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
            Column("requests", "Requests", "int", total=True),
            Column("prompt_tokens", "Prompt tokens", "int", on_page=False, total=True),
            Column("generated_tokens", "Generated tokens", "int", total=True),
            Column("gpu_hours", "GPU-hours held (h)", "hours"),
            *_PRICE_INPUTS,
            *_ENERGY_INPUTS,
            Column("energy_per_token_j", "Energy per token (J)", "rate"),
            Column("capacity_cost", "Capacity", "money"),
            Column("energy_cost", "Energy cost", "money"),
            Column("total_cost", "Spend", "money"),
            Column("cost_per_1m_tokens", "Cost per 1M tokens", "rate", total=False),
            Column("currency", "Currency", on_page=False),
            Column("price_stale", "Stale price", "flag"),
        ],
        rows=rows,
    )
