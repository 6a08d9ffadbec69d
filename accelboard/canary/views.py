"""The canary pages: the checks of the caller's teams (optionally of one model), and one check's
comparison: both deployments' time series, the per-metric table and the verdict with its rule."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from accelboard.benchmarks.selectors import model_resolve
from accelboard.core.access import Action, request_scope
from accelboard.core.selectors import team_list_visible

from . import analysis, charts
from .forms import CanaryCheckForm, pairs_text
from .models import CanaryCheck
from .selectors import canary_check_get, canary_checks_list, canary_evaluate, canary_json
from .services import CanaryCheckInvalid, canary_check_create


@require_GET
def canary_list(request: HttpRequest) -> HttpResponse:
    scope = request_scope(request)
    model = request.GET.get("model", "")
    if model and not model.isdigit():
        return HttpResponse("model: an id", status=400)
    checks = canary_checks_list(scope=scope, model_id=int(model) if model else None)
    return render(
        request,
        "canary/list.html",
        {"checks": checks, "model_id": model, "can_create": scope.can_anywhere(Action.MANAGE)},
    )


@require_http_methods(["GET", "POST"])
def canary_form(request: HttpRequest, check_id: int | None = None) -> HttpResponse:
    """Create a check (for a team the caller leads) or edit one (its team's leads, staff); a bad
    field is a 400 with the form, the error on the field it names."""
    scope = request_scope(request)
    check: CanaryCheck | None = None
    if check_id is not None:
        try:
            check = canary_check_get(scope=scope, pk=check_id)
        except CanaryCheck.DoesNotExist as exc:
            raise Http404("No such canary check in your teams") from exc
        if not scope.can(Action.MANAGE, check.team_id):
            raise PermissionDenied("Only the team's leads change its canary checks")
    elif not scope.can_anywhere(Action.MANAGE):
        raise PermissionDenied("Only team leads create canary checks")
    teams = team_list_visible(scope=scope, action=Action.MANAGE).order_by("name")
    choices = [(team.pk, team.name) for team in teams]
    initial: dict[str, Any] = {}
    if check is not None:
        initial = {
            "team": check.team_id, "model": check.model.name, "name": check.name,
            "baseline": pairs_text(check.baseline), "canary": pairs_text(check.canary),
            "window_minutes": check.window_minutes, "alpha": check.alpha,
            "min_effects": pairs_text(check.min_effects), "active": check.active,
        }  # fmt: skip
    form = CanaryCheckForm(
        request.POST if request.method == "POST" else None,
        initial=initial,
        teams=choices,
        editing=check is not None,
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        team = next(t for t in teams if t.pk == data["team"])
        model = model_resolve(team=team, name=data["model"])
        if model is None:
            form.add_error("model", f"no model named {data['model']!r} for {team.name}")
        else:
            try:
                saved = canary_check_create(
                    team=team, model=model, name=data["name"], baseline=data["baseline"],
                    canary=data["canary"], window_minutes=data["window_minutes"], alpha=data["alpha"],
                    min_effects=data["min_effects"], active=data["active"],
                )  # fmt: skip
            except CanaryCheckInvalid as exc:
                form.add_error(exc.field.split(".")[0], str(exc))
            else:
                return redirect("canary:detail", saved.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "canary/form.html", {"form": form, "check": check}, status=status)


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
            "can_manage": scope.can(Action.MANAGE, check.team_id),
            "currency": report.baseline.currency or report.canary.currency,
            "bound_pct": 100
            * analysis.false_fail_bound(metrics=len(report.verdict.metrics) or 1, alpha=check.alpha),
        },
    )
