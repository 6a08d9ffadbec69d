from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render

from accelboard.alerts.models import DetectionSetting, ServingSlo
from accelboard.alerts.thresholds import (
    ThresholdError,
    detection_setting_delete,
    detection_setting_set,
    serving_slo_delete,
    serving_slo_set,
)

from .forms import MemberForm, SloForm, ThresholdForm
from .models import Team
from .selectors import roles_for_user, team_can_manage, team_get_visible, team_list_for_user, team_members
from .services import MembershipError, membership_change


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness and database reachability, for load balancers and docker-compose healthchecks."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any database failure means "unhealthy"
        return JsonResponse({"status": "error", "database": str(exc)[:200]}, status=503)
    return JsonResponse({"status": "ok"})


def team_list(request: HttpRequest) -> HttpResponse:
    teams = team_list_for_user(user=request.user).order_by("name")
    roles = roles_for_user(user=request.user)
    rows = [{"team": team, "role": roles.get(team.pk, "")} for team in teams]
    return render(request, "core/team_list.html", {"rows": rows})


def _team_for(request: HttpRequest, slug: str) -> Team:
    team = team_get_visible(user=request.user, slug=slug)
    if team is None:
        raise Http404("no such team")
    return team


def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """A team's members, detection thresholds and serving objectives; leads edit them here."""
    team = _team_for(request, slug)
    can_manage = team_can_manage(user=request.user, team=team)
    forms_ = {"member": MemberForm(), "threshold": ThresholdForm(), "slo": SloForm(team=team)}
    status = 200
    if request.method == "POST":
        if not can_manage:
            raise PermissionDenied("only the team's leads change its members and thresholds")
        action = request.POST.get("action", "")
        try:
            done = _team_change(team=team, action=action, data=request.POST, forms_=forms_)
        except (MembershipError, ThresholdError) as exc:
            messages.error(request, str(exc))
            status = 400
        else:
            if done:
                messages.success(request, done)
                return redirect("core:team_detail", slug=team.slug)
            status = 400
    context = {
        "team": team,
        "can_manage": can_manage,
        "members": team_members(team=team),
        "thresholds": DetectionSetting.objects.filter(team=team).order_by("metric"),
        "slos": ServingSlo.objects.filter(team=team)
        .select_related("model", "variant")
        .order_by("model__name"),
        "forms": forms_,
    }
    return render(request, "core/team_detail.html", context, status=status)


def _team_change(*, team: Team, action: str, data: Any, forms_: dict[str, Any]) -> str | None:
    """Apply one POSTed change; the success message, or None when a form is invalid (shown bound)."""
    if action == "member":
        form = forms_["member"] = MemberForm(data)
        if not form.is_valid():
            return None
        user, role = form.cleaned_data["username"], form.cleaned_data["role"]
        membership_change(team=team, user=user, role=None if role == "remove" else role)
        return (
            f"{user.get_username()} removed" if role == "remove" else f"{user.get_username()} is now {role}"
        )
    if action == "threshold":
        form = forms_["threshold"] = ThresholdForm(data)
        if not form.is_valid():
            return None
        setting = detection_setting_set(
            team=team,
            metric=form.cleaned_data["metric"],
            min_effect=form.cleaned_data["min_effect_pct"] / 100,
        )
        return f"minimum effect for {setting.metric or 'every metric'} set to {setting.min_effect:.1%}"
    if action == "slo":
        form = forms_["slo"] = SloForm(data, team=team)
        if not form.is_valid():
            return None
        slo = serving_slo_set(team=team, **form.cleaned_data)
        return f"objective for {slo.model.name} saved"
    if action in ("threshold_delete", "slo_delete"):
        try:
            pk = int(data.get("id", ""))
        except ValueError:
            raise ThresholdError("id", "must be a number") from None
        deleted = (
            detection_setting_delete(team=team, setting_id=pk)
            if action == "threshold_delete"
            else serving_slo_delete(team=team, slo_id=pk)
        )
        if not deleted:
            raise ThresholdError(
                "id", f"no such {'threshold' if action == 'threshold_delete' else 'objective'}"
            )
        return "removed"
    raise ThresholdError("action", f"unknown action {action!r}")
