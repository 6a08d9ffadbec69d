"""Team pages: the teams a user belongs to, and one team's members, detection thresholds and
serving objectives (leads edit them here). In ``dashboard`` because the page edits what three
apps own: memberships (core), thresholds and objectives (alerts), models (benchmarks)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from accelboard.alerts.selectors import detection_settings_for_team, serving_slos_for_team
from accelboard.alerts.threshold_services import (
    ThresholdError,
    detection_setting_delete,
    detection_setting_set,
    serving_slo_delete,
    serving_slo_set,
)
from accelboard.core.access import Action, request_scope
from accelboard.core.models import Team
from accelboard.core.selectors import team_get_visible, team_list_visible, team_members
from accelboard.core.services import MembershipError, membership_change

from .team_forms import MemberForm, SloForm, ThresholdForm


def team_list(request: HttpRequest) -> HttpResponse:
    scope = request_scope(request)
    rows = [{"team": team, "role": scope.roles.get(team.pk, "")} for team in team_list_visible(scope=scope)]
    return render(request, "core/team_list.html", {"rows": rows})


def _team_for(request: HttpRequest, slug: str) -> Team:
    team = team_get_visible(scope=request_scope(request), slug=slug)
    if team is None:
        raise Http404("no such team")
    return team


def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """A team's members, detection thresholds and serving objectives; leads edit them here."""
    team = _team_for(request, slug)
    can_manage = request_scope(request).can(Action.MANAGE, team)
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
        "thresholds": detection_settings_for_team(team=team),
        "slos": serving_slos_for_team(team=team),
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
        threshold_form = forms_["threshold"] = ThresholdForm(data)
        if not threshold_form.is_valid():
            return None
        setting = detection_setting_set(
            team=team,
            metric=threshold_form.cleaned_data["metric"],
            min_effect=threshold_form.cleaned_data["min_effect_pct"] / 100,
        )
        return f"minimum effect for {setting.metric or 'every metric'} set to {setting.min_effect:.1%}"
    if action == "slo":
        slo_form = forms_["slo"] = SloForm(data, team=team)
        if not slo_form.is_valid():
            return None
        slo = serving_slo_set(team=team, **slo_form.cleaned_data)
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
