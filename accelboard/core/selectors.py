"""Reads about teams and access: which teams a user may see, and with which role."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from .choices import Role
from .models import JobRun, Membership, Team


def team_list_for_user(*, user: Any) -> QuerySet[Team]:
    """Teams whose data the user may see. Staff and finance members see every team's costs, but
    team-scoped data (runs, alerts) follows membership: see ``team_ids_visible``."""
    if not user.is_authenticated:
        return Team.objects.none()
    if user.is_staff:
        return Team.objects.all()
    return Team.objects.filter(memberships__user=user).distinct()


def team_ids_visible(*, user: Any) -> list[int]:
    return list(team_list_for_user(user=user).values_list("id", flat=True))


def roles_for_user(*, user: Any) -> dict[int, str]:
    """team id -> role."""
    if not user.is_authenticated:
        return {}
    return dict(Membership.objects.filter(user=user).values_list("team_id", "role"))


def user_is_finance(*, user: Any) -> bool:
    return user.is_authenticated and (
        user.is_staff or Membership.objects.filter(user=user, role=Role.FINANCE).exists()
    )


def job_run_latest(*, name: str) -> JobRun | None:
    return JobRun.objects.filter(name=name).order_by("-started_at").first()


def team_get_visible(*, user: Any, slug: str) -> Team | None:
    """The team if the user may see it (member or staff); None otherwise (a 404 for the page)."""
    return team_list_for_user(user=user).filter(slug=slug).first()


def team_can_manage(*, user: Any, team: Team) -> bool:
    """Team leads (and staff) manage members, thresholds and objectives."""
    return user.is_staff or Membership.objects.filter(user=user, team=team, role=Role.TEAM_LEAD).exists()


def team_members(*, team: Team) -> list[Membership]:
    return list(
        Membership.objects.filter(team=team).select_related("user").order_by("role", "user__username")
    )
