"""``/costs/allocation/``: a month's GPU cost and energy by team, namespace, workload, model, host
or GPU, with idle and unattributed as their own rows (docs/attribution.md), and its CSV/XLSX.

Thin: the query is parsed by a form (a bad value is a 400 naming the field), the rows are
``selectors.allocation_report``'s (the same as ``GET /api/v1/allocation``) under the caller's
``VIEW_COSTS`` scope, and the page, its chart and its exports are one ``ExportTable``'s rows.
"""

from __future__ import annotations

import calendar
import datetime as dt
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from accelboard.core.access import Action, request_scope
from accelboard.costs import downloads, exports
from accelboard.costs.forms import MonthField
from accelboard.costs.report_selectors import cost_month_default, month_previous

from .allocation_charts import allocation_figure
from .choices import AllocationBasis, AllocationGroup, AllocationKind, IdleMode
from .selectors import AllocationReport, allocation_report, allocation_tokens

TEMPLATE = "attribution/allocation.html"
TABLE = "allocation"
_J_PER_KWH = Decimal(3_600_000)
_KIND_LABELS = dict(AllocationKind.choices)


class AllocationPageForm(forms.Form):
    month = MonthField(required=False)
    group_by = forms.ChoiceField(required=False, choices=AllocationGroup.choices)
    basis = forms.ChoiceField(required=False, choices=AllocationBasis.choices)
    idle = forms.ChoiceField(required=False, choices=IdleMode.choices)
    format = forms.ChoiceField(required=False, choices=[("", "page")] + [(f, f) for f in exports.FORMATS])
    table = forms.SlugField(required=False, max_length=40)


def _label(kind: str, key: str | None, group_label: str) -> str:
    if kind == AllocationKind.IDLE:
        return "Idle"
    if kind == AllocationKind.UNATTRIBUTED:
        return f"{key} · unattributed" if key else "Unattributed"
    return key or f"(no {group_label.lower()})"


def _table(report: AllocationReport, *, group_by: str, tokens: dict[str, int] | None) -> exports.ExportTable:
    """The page's rows as the page, the CSV and the XLSX show them (``tokens``: the model grouping's
    tokens served per row key, for the cost per 1M tokens)."""
    group_label = AllocationGroup(group_by).label
    currencies = {row.currency for row in report.rows}
    columns = [
        exports.Column("label", group_label),
        exports.Column("kind", "Kind"),
        exports.Column("currency", "Currency", on_page=len(currencies) > 1),
        exports.Column("cost", "Cost", kind="money", total=len(currencies) <= 1),
        exports.Column("energy_kwh", "Energy (kWh)", kind="kwh"),
        exports.Column("energy_j", "Energy (J)", kind="int", on_page=False, total=True),
    ]
    if tokens is not None:
        columns += [
            exports.Column("tokens", "Tokens served", kind="int", total=False),
            exports.Column("cost_per_mtok", "Cost per 1M tokens", kind="rate"),
        ]
    rows = []
    # Largest first within each kind, as the chart draws them; workloads, unattributed, idle.
    order: dict[str, int] = {
        AllocationKind.WORKLOAD: 0,
        AllocationKind.UNATTRIBUTED: 1,
        AllocationKind.IDLE: 2,
    }
    for row in sorted(report.rows, key=lambda r: (r.currency, order[r.kind], -r.cost, r.key or "")):
        values: dict[str, Any] = {
            "label": _label(row.kind, row.key, group_label),
            "kind": _KIND_LABELS[row.kind],
            "_kind": row.kind,
            "_named": row.kind == AllocationKind.WORKLOAD and row.key is not None,
            "currency": row.currency,
            "cost": row.cost,
            "energy_kwh": Decimal(row.energy_j) / _J_PER_KWH,
            "energy_j": row.energy_j,
        }
        if tokens is not None:
            served = tokens.get(row.key or "") if row.kind == AllocationKind.WORKLOAD else None
            values["tokens"] = served
            values["cost_per_mtok"] = row.cost * 1_000_000 / served if served else None
        rows.append(values)
    return exports.ExportTable(name=TABLE, title=f"Cost by {group_label.lower()}", columns=columns, rows=rows)


def _page_rows(table: exports.ExportTable) -> list[dict[str, Any]]:
    """The table's page rows, each with its kind; a model's cost per 1M tokens without serving
    metrics says n/a (the exports leave the cell empty: a gap stays a gap)."""
    keys = [column.key for column in table.page_columns()]
    page_rows = table.page_rows()
    for row, values in zip(page_rows, table.rows, strict=True):
        row["kind"] = values["_kind"]
        if "cost_per_mtok" in keys and values["cost_per_mtok"] is None and values["_named"]:
            row["cells"][keys.index("cost_per_mtok")]["text"] = "n/a"
    return page_rows


def _query(data: dict[str, Any], **changes: Any) -> str:
    params = {key: data.get(key) for key in ("month", "group_by", "basis", "idle")}
    params.update(changes)
    if isinstance(params["month"], dt.date):
        params["month"] = f"{params['month']:%Y-%m}"
    return urlencode({key: value for key, value in params.items() if value})


def _cards(report: AllocationReport) -> list[dict[str, Any]]:
    """Per currency: the total, and the workloads', unattributed's and idle's parts of it."""
    cards = []
    for total in report.totals:
        parts = {kind: Decimal(0) for kind in _KIND_LABELS}
        for row in report.rows:
            if row.currency == total.currency:
                parts[row.kind] += row.cost
        cards.append(
            {
                "currency": total.currency,
                "total": total.cost,
                "energy_kwh": Decimal(total.energy_j) / _J_PER_KWH,
                "workload": parts[AllocationKind.WORKLOAD],
                "unattributed": parts[AllocationKind.UNATTRIBUTED],
                "unattributed_pct": parts[AllocationKind.UNATTRIBUTED] * 100 / total.cost
                if total.cost
                else None,
                "idle": parts[AllocationKind.IDLE],
            }
        )
    return cards


@require_GET
def allocation_page(request: HttpRequest) -> HttpResponse:
    scope = request_scope(request)
    form = AllocationPageForm(request.GET)
    if not form.is_valid():
        errors = "; ".join(
            f"{name}: {' '.join(str(m) for m in messages)}" for name, messages in form.errors.items()
        )
        return render(request, TEMPLATE, {"form": form, "invalid": errors}, status=400)
    data = dict(form.cleaned_data)
    today = timezone.now().date()
    month: dt.date = data["month"] or cost_month_default(scope=scope, today=today)
    data.update(
        month=month,
        group_by=data["group_by"] or AllocationGroup.TEAM,
        basis=data["basis"] or AllocationBasis.ALLOCATION,
        idle=data["idle"] or IdleMode.SEPARATE,
    )
    end = month.replace(day=calendar.monthrange(month.year, month.month)[1])
    report = allocation_report(
        scope=scope, start=month, end=end, group_by=data["group_by"], basis=data["basis"], idle=data["idle"]
    )
    tokens = (
        allocation_tokens(scope=scope, start=month, end=end)
        if data["group_by"] == AllocationGroup.MODEL
        else None
    )
    table = _table(report, group_by=data["group_by"], tokens=tokens)
    stem = f"costs-by-{data['group_by']}-{month:%Y-%m}-{data['basis']}" + (
        "-idle-shared" if data["idle"] == IdleMode.SHARE else ""
    )
    if data["format"]:
        return downloads.tables_download([table], fmt=data["format"], name=data["table"] or "", stem=stem)
    cards = _cards(report)
    group_label = AllocationGroup(data["group_by"]).label
    main = cards[0]["currency"] if cards else ""
    figure = allocation_figure(
        rows=[
            {"label": row["label"], "kind": row["_kind"], "cost": row["cost"]}
            for row in table.rows
            if row["currency"] == main
        ],
        currency=main,
        group_label=group_label,
    )
    context = {
        # The filters as applied, defaults included (the month field shows the month drawn).
        "form": AllocationPageForm(
            {"month": f"{month:%Y-%m}", **{key: data[key] for key in ("group_by", "basis", "idle")}}
        ),
        "month": month,
        "data": data,
        "table": table,
        "page_rows": _page_rows(table),
        "cards": cards,
        "figure": figure,
        "group_label": group_label,
        "groups": [(value, label, _query(data, group_by=value)) for value, label in AllocationGroup.choices],
        "bases": [(value, label, _query(data, basis=value)) for value, label in AllocationBasis.choices],
        "idle_modes": [(value, label, _query(data, idle=value)) for value, label in IdleMode.choices],
        "no_team": not scope.can_anywhere(Action.VIEW_COSTS),
        "query": _query(data),
        "previous_query": _query(data, month=f"{month_previous(month):%Y-%m}"),
        "next_query": _query(data, month=f"{end + dt.timedelta(days=1):%Y-%m}"),
        "costs_query": urlencode({"month": f"{month:%Y-%m}"}),
    }
    return render(request, TEMPLATE, context)
