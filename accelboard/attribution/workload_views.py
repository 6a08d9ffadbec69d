"""The workload pages: ``/workloads/`` (filtered by team, kind and namespace; paginated) and
``/workloads/<id>/`` (its GPUs over time, utilisation while held, energy and cost on both bases,
J and cost per 1M tokens). Thin: parse the query, take the caller's scope, call the selectors and
the chart, render. Another team's workload is a 404; a malformed parameter a 400 naming it."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.core.paginator import EmptyPage, Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from accelboard.core.access import Action, Scope, request_scope
from accelboard.core.models import Team
from accelboard.core.selectors import team_list_visible
from accelboard.costs.downloads import tables_download
from accelboard.fleet.choices import WorkloadKind
from accelboard.fleet.models import Workload

from . import training_exports, training_selectors
from . import workload_selectors as selectors
from .training_charts import training_figure
from .workload_charts import workload_timeline_figure

PAGE_SIZE = 50


class BadParam(ValueError):
    pass


def _bad(exc: BadParam) -> HttpResponse:
    return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")


def _day(request: HttpRequest, name: str) -> date | None:
    value = request.GET.get(name, "")
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise BadParam(f"{name}: {value!r} is not a date (YYYY-MM-DD)") from exc


def _period(request: HttpRequest, workload: Workload) -> tuple[date, date]:
    default_start, default_end = selectors.workload_period_default(workload=workload)
    start, end = _day(request, "start"), _day(request, "end")
    if start is None and end is None:
        return default_start, default_end
    end = end or (start or default_end) + timedelta(days=selectors.PERIOD_DEFAULT_DAYS - 1)
    start = start or end - timedelta(days=selectors.PERIOD_DEFAULT_DAYS - 1)
    if end < start:
        raise BadParam(f"end: {end} is before start {start}")
    if (end - start).days + 1 > selectors.PERIOD_MAX_DAYS:
        raise BadParam(f"end: at most {selectors.PERIOD_MAX_DAYS} days from start")
    return start, end


def workload_list(request: HttpRequest) -> HttpResponse:
    scope = request_scope(request)
    kind = request.GET.get("kind", "")
    namespace = request.GET.get("namespace", "")
    team_slug = request.GET.get("team", "")
    team: Team | None = None
    try:
        if kind and kind not in WorkloadKind.values:
            raise BadParam(f"kind: {kind!r} is not one of {', '.join(WorkloadKind.values)}")
        if len(namespace) > 253 or any(ord(c) < 32 for c in namespace):
            raise BadParam("namespace: at most 253 characters, no control characters")
        if team_slug:
            team = selectors.workload_filter_team(slug=team_slug)
            if team is None:
                raise BadParam(f"team: no team {team_slug!r}")
        page_value = request.GET.get("page", "1")
        if not page_value.isdigit() or int(page_value) < 1:
            raise BadParam(f"page: {page_value!r} is not a page number")
    except BadParam as exc:
        return _bad(exc)
    workloads = selectors.workload_list(
        scope=scope, team_id=team.pk if team else None, kind=kind, namespace=namespace
    )
    paginator = Paginator(workloads, PAGE_SIZE)
    try:
        page = paginator.page(int(page_value))
    except EmptyPage:
        page = paginator.page(paginator.num_pages)
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page": page,
        "kinds": WorkloadKind.choices,
        "teams": team_list_visible(scope=scope),
        "namespaces": selectors.workload_namespaces(scope=scope),
        "picked": {"team": team_slug, "kind": kind, "namespace": namespace},
        "filtered": bool(team_slug or kind or namespace),
        "query": query.urlencode(),
        "no_team": scope.sees_no_team,
    }
    return render(request, "attribution/workload_list.html", context)


def workload_detail(request: HttpRequest, workload_id: int) -> HttpResponse:
    scope = request_scope(request)
    try:
        workload = selectors.workload_get_visible(scope=scope, workload_id=workload_id)
    except Workload.DoesNotExist as exc:
        raise Http404("No such workload in your teams") from exc
    if request.GET.get("format"):
        return _training_download(request, scope, workload)
    try:
        start, end = _period(request, workload)
    except BadParam as exc:
        return _bad(exc)
    use = selectors.workload_use(workload=workload, start=start, end=end)
    money = selectors.workload_money(scope=scope, workload=workload, start=start, end=end)
    attribution = money.attribution
    token_cost = None
    if attribution is not None:
        token_cost = selectors.workload_token_cost(
            scope=scope,
            model=attribution.model,
            variant=attribution.variant,
            host_ids=use.host_ids,
            start=start,
            end=end,
        )
    since = datetime.combine(start, time(), UTC)
    until = datetime.combine(end + timedelta(days=1), time(), UTC)
    figure = workload_timeline_figure(
        intervals=use.intervals,
        devices=[d.label for d in use.devices],
        x_range=[since.isoformat(), until.isoformat()],
    )
    context = {
        "workload": workload,
        "start": start,
        "end": end,
        "use": use,
        "money": money,
        "attribution": attribution,
        "token_cost": token_cost,
        "token_rows": selectors.token_cost_rows(token_cost) if token_cost else [],
        "figure": figure,
        "sees_costs": scope.can_anywhere(Action.VIEW_COSTS),
        **_training_context(scope, workload),
    }
    return render(request, "attribution/workload_detail.html", context)


def _training_download(request: HttpRequest, scope: Scope, workload: Workload) -> HttpResponse:
    """``?format=csv|xlsx&table=training``: the Training progress section's intervals as a file."""
    fmt = request.GET.get("format", "")
    if fmt not in ("csv", "xlsx"):
        return _bad(BadParam(f"format: {fmt!r} is not csv or xlsx"))
    summary = training_selectors.training_summary(scope=scope, workload=workload)
    if summary is None:
        raise Http404("This workload reported no training progress")
    table = training_exports.training_table(summary=summary)
    return tables_download(
        [table],
        fmt=fmt,
        name=request.GET.get("table") or training_exports.TABLE,
        stem=f"workload-{workload.pk}",
    )


def _training_context(scope: Scope, workload: Workload) -> dict[str, Any]:
    """A training job's progress section (``training_selectors``), where it reported any."""
    if not getattr(workload, "reports_training", True):
        return {"training": None}
    summary = training_selectors.training_summary(scope=scope, workload=workload)
    if summary is None:
        return {"training": None}
    changes = [
        datetime.fromisoformat(str(a.detail["change_at"]))
        for a in summary.alerts
        if a.detail.get("change_at")
    ]
    return {
        "training": summary,
        "training_figure": training_figure(
            intervals=summary.intervals,
            currency=summary.currency,
            changes=changes,
            with_cost=summary.sees_costs,
        ),
    }
