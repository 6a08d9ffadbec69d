"""Finance pages: the monthly cost report, its drill-down, their CSV/XLSX exports and print view.

Thin: each view takes the caller's scope (``core.access``: finance and staff see every team's
costs, anyone else their own teams), parses the filters with a form (a bad value is a 400 naming
the field), calls the report selectors, and renders a page or a file. A team filter naming a team
the caller may not see is a 404, like any other team's object.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from accelboard.core.access import Action, request_scope

from . import charts, downloads, exports
from .drill_selectors import cost_drill_days, cost_drill_hosts, cost_drill_prices, cost_drill_serving
from .filters import CostFilters
from .forms import CostFilterForm, DrillForm
from .report_selectors import (
    DIMENSIONS,
    CostFilterNotVisible,
    Report,
    cost_filter_choices,
    cost_filters_resolve,
    cost_month_default,
    cost_report,
    month_previous,
)


def _today() -> dt.date:
    return timezone.now().date()


def _with_month(request: HttpRequest) -> Any:
    """The query with a month filled in, so the month field always shows one: the last complete
    month (a finance report reads a closed month; the current one is a click away), or the
    current month where the caller has no costs before it (a fleet that started this month)."""
    params = request.GET.copy()
    if not params.get("month"):
        month = cost_month_default(scope=request_scope(request), today=_today())
        params["month"] = f"{month:%Y-%m}"
    return params


def _filters(request: HttpRequest, data: dict[str, Any]) -> CostFilters:
    """Form values -> ids, answering 404 for a team (or host) outside the caller's scope."""
    try:
        return cost_filters_resolve(scope=request_scope(request), data=data, today=_today())
    except CostFilterNotVisible as exc:
        raise Http404(str(exc)) from exc


def _query(data: dict[str, Any], **changes: Any) -> str:
    """The current filters as a query string, with ``changes`` applied (None drops a key)."""
    keys = ("month", "team", "provider", "accelerator_type", "project", "host", "day", "model", "by")
    params: dict[str, str] = {}
    for key in keys:
        value = changes[key] if key in changes else data.get(key)
        if value in (None, ""):
            continue
        if isinstance(value, dt.date) and key == "month":
            value = value.strftime("%Y-%m")
        params[key] = str(value)
    return urlencode(params)


def _export(tables: list[exports.ExportTable], *, data: dict[str, Any], stem: str) -> HttpResponse:
    return downloads.tables_download(tables, fmt=data["format"], name=data.get("table") or "", stem=stem)


def _report_tables(report: Report, data: dict[str, Any], by: str) -> list[exports.ExportTable]:
    drill = reverse("costs:drill")
    tables = []
    for name, label in DIMENSIONS.items():
        groups = report.breakdowns[name]
        # A slice with no key of its own (no team, no project) has nothing to narrow the drill-down by.
        links: list[str | None] = [
            f"{drill}?{_query(data, by=None, **group.drill)}"
            if all(group.drill.values()) and group.drill
            else None
            for group in groups
        ]
        tables.append(
            exports.breakdown_table(
                name=name,
                label=label,
                groups=groups,
                currency=report.currency,
                links=links,
                total=report.total,
            )
        )
    model_links: list[str | None] = [
        f"{drill}?{_query(data, by=None, model=group.label)}" if group.key != "-" else None
        for group in report.by_model
    ]
    tables.append(exports.model_table(groups=report.by_model, currency=report.currency, links=model_links))
    tables.append(exports.daily_table(rows=report.daily[by], currency=report.currency, by=by))
    return tables


def _bad_request(request: HttpRequest, template: str, form: Any) -> HttpResponse:
    errors = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in form.errors.items())
    return render(request, template, {"form": form, "invalid": errors}, status=400)


@require_GET
def cost_report_page(request: HttpRequest) -> HttpResponse:
    scope = request_scope(request)
    form = CostFilterForm(_with_month(request), **cost_filter_choices(scope=scope))
    if not form.is_valid():
        return _bad_request(request, "costs/report.html", form)
    data = dict(form.cleaned_data)
    filters = _filters(request, data)
    data["month"] = filters.month
    report = cost_report(scope=scope, filters=filters, today=_today())
    by = data.get("by") or "team"
    tables = _report_tables(report, data, by)
    stem = f"costs-{filters.month:%Y-%m}"
    if data.get("format"):
        # The daily table holds one grouping: its file says which.
        if data.get("table") == "daily":
            stem = f"{stem}-by-{by}"
        return _export(tables, data=data, stem=stem)
    context = {
        "form": form,
        "report": report,
        "tables": [table for table in tables if table.name != "daily" and table.rows],
        "daily_table": tables[-1],
        "by": by,
        "spend_figure": charts.spend_over_time_figure(
            rows=report.daily[by],
            by_label=by,
            currency=report.currency,
            days=report.days,
        ),
        "treemap_figure": charts.spend_treemap_figure(rows=report.treemap, currency=report.currency),
        "filtered": any(data.get(key) for key in ("team", "provider", "accelerator_type")),
        "no_team": not scope.can_anywhere(Action.VIEW_COSTS),
        "query": _query(data),
        "previous_query": _query(data, month=month_previous(filters.month)),
        "next_query": _query(data, month=(filters.month + dt.timedelta(days=32)).replace(day=1)),
        "current_query": _query(data, month=_today().replace(day=1)),
        "is_current": filters.month == _today().replace(day=1),
        "drill_query": _query(data, by=None),
        "by_team_query": _query(data, by="team"),
        "by_provider_query": _query(data, by="provider"),
    }
    return render(request, "costs/report.html", context)


@require_GET
def cost_drill_page(request: HttpRequest) -> HttpResponse:
    scope = request_scope(request)
    choices = cost_filter_choices(scope=scope)
    form = DrillForm(_with_month(request), **choices)
    if not form.is_valid():
        return _bad_request(request, "costs/drill.html", form)
    data = dict(form.cleaned_data)
    filters = _filters(request, data)
    data["month"] = filters.month
    today = _today()
    drill = reverse("costs:drill")
    narrowed = filters.host_id is not None or filters.day is not None
    if filters.model is not None:
        # A model's total is made of serving rows, not host-days: list those.
        tables = [exports.serving_table(rows=cost_drill_serving(scope=scope, filters=filters))]
    else:
        hosts = cost_drill_hosts(scope=scope, filters=filters)
        for row in hosts:
            # The team with the name: two of the caller's teams may each have a host of that name.
            row["_link"] = f"{drill}?{_query(data, host=row['host__hostname'], team=row['team__slug'])}"
        tables = [exports.hosts_table(rows=hosts)]
        # Every host-day of a whole month is long; the page lists them once narrowed to a host or
        # a day, the exports always carry them.
        if narrowed or data.get("format"):
            tables.append(exports.days_table(rows=cost_drill_days(scope=scope, filters=filters)))
    tables.append(exports.prices_table(rows=cost_drill_prices(scope=scope, filters=filters, today=today)))
    stem = f"costs-{filters.month:%Y-%m}-drill"
    if data.get("format"):
        return _export(tables, data=data, stem=stem)
    names = {"team": dict(choices["teams"]), "accelerator_type": dict(choices["accelerator_types"])}
    applied = [
        (label, names.get(key, {}).get(data[key], data[key]))
        for key, label in (
            ("team", "Team"),
            ("project", "Project"),
            ("accelerator_type", "Accelerator type"),
            ("provider", "Provider"),
            ("host", "Host"),
            ("day", "Day"),
            ("model", "Model"),
        )
        if data.get(key) not in (None, "")
    ]
    context = {
        "form": form,
        "month": filters.month,
        "tables": tables,
        "applied": applied,
        "narrowed": narrowed,
        "no_team": not scope.can_anywhere(Action.VIEW_COSTS),
        "query": _query(data),
        "report_query": _query(data, project=None, host=None, day=None, model=None),
        "up_query": _query(data, host=None, day=None, model=None) if narrowed or filters.model else None,
        "model": filters.model,
    }
    return render(request, "costs/drill.html", context)
