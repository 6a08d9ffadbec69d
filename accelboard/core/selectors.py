"""Reads about teams: the teams a caller may see, and a team's members.

Who may see what is decided by ``access`` (a ``Scope``); these reads only apply it.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from .access import Action, Scope
from .choices import Role
from .models import Membership, Team


def team_list_visible(*, scope: Scope, action: Action = Action.VIEW) -> QuerySet[Team]:
    """Teams where the caller may do ``action`` (by default: see them), by name."""
    return Team.objects.visible_to(scope, action).order_by("name")


def team_get_visible(*, scope: Scope, slug: str) -> Team | None:
    """The team if the caller may see it; None otherwise (a 404 for the page)."""
    return Team.objects.visible_to(scope).filter(slug=slug).first()


def team_members(*, team: Team) -> list[Membership]:
    return list(
        Membership.objects.filter(team=team).select_related("user").order_by("role", "user__username")
    )


def membership_list_of(*, user: Any) -> list[Membership]:
    """The teams a user belongs to and their role in each, by team name (the overview's line)."""
    return list(Membership.objects.filter(user=user).select_related("team").order_by("team__name"))


def team_leads_mailable(*, team_slugs: list[str] | None = None) -> list[tuple[int, int]]:
    """(user id, team id) of each active team lead with an email address (of the given teams)."""
    leads = Membership.objects.filter(role=Role.TEAM_LEAD, user__is_active=True).exclude(user__email="")
    if team_slugs is not None:
        leads = leads.filter(team__slug__in=team_slugs)
    return list(leads.values_list("user_id", "team_id"))
