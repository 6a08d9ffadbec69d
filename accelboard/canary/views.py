"""The canary pages: the checks of the caller's teams (optionally of one model), and one check's
comparison: both deployments' time series, the per-metric table and the verdict with its rule."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accelboard.core.access import Action, request_scope

from . import analysis, charts
from .models import CanaryCheck
from .selectors import canary_check_get, canary_checks_list, canary_evaluate, canary_json


@require_GET
def canary_list(request: HttpRequest) -> HttpResponse:
    scope = request_scope(request)
    model = request.GET.get("model", "")
    if model and not model.isdigit():
        return HttpResponse("model: an id", status=400)
    checks = canary_checks_list(scope=scope, model_id=int(model) if model else None)
    return render(request, "canary/list.html", {"checks": checks, "model_id": model})


@require_GET
def canary_detail(request: HttpRequest, check_id: int) -> HttpResponse:
    scope = request_scope(request)
    try:
        check = canary_check_get(scope=scope, pk=check_id)
    except CanaryCheck.DoesNotExist as exc:
        raise Http404("No such canary check in your teams") from exc
    report = canary_evaluate(check=check, costs=scope.can(Action.VIEW_COSTS, check.team_id))
    base_times = [t.isoformat() for t in report.baseline.times]
    canary_times = [t.isoformat() for t in report.canary.times]
    figures: list[dict[str, Any]] = []
    for i, m in enumerate(report.verdict.metrics):
        daily = m.key == "agreement_rate"
        figures.append(
            {
                "id": f"metric-{i}-figure",
                "key": m.key,
                "figure": charts.metric_figure(
                    title=m.label,
                    unit=m.unit or (report.baseline.currency if m.key == "cost_per_1m_tokens" else ""),
                    baseline=(report.baseline.days if daily else base_times, report.baseline.values[m.key]),
                    canary=(report.canary.days if daily else canary_times, report.canary.values[m.key]),
                    verdict=m.verdict,
                ),
            }
        )
    return render(
        request,
        "canary/detail.html",
        {
            "check": check,
            "report": report,
            "verdict": report.verdict,
            "figures": figures,
            "json": canary_json(report),
            "currency": report.baseline.currency or report.canary.currency,
            "bound_pct": 100
            * analysis.false_fail_bound(metrics=len(report.verdict.metrics) or 1, alpha=check.alpha),
        },
    )
