"""Who may see and do what, decided in one place: every page, export and API read goes through it.

A ``Scope`` is what the access rules need to know about a caller (a signed-in user, an API token,
or a background job acting for one team), built once per request:

    scope = scope_for_user(request.user)          # a page or an export
    scope = scope_for_token(team_id=t.team_id, kind=t.kind)   # the API
    runs = BenchmarkRun.objects.visible_to(scope)   # a read: only the teams the caller may view
    costs = CostDaily.objects.visible_to(scope, Action.VIEW_COSTS)
    if not scope.can(Action.TRIAGE, alert.team_id): ...   # a write: 403 with a reason
    can(user, Action.MANAGE, team)                         # the same question without a scope

The rules (``ROLE_ACTIONS``, ``TOKEN_ACTIONS``):

1. A team member may do, in that team, what their role allows: leads everything, engineers all
   but managing the team and saving capacity plans, finance only view (runs, alerts, hosts, the
   team page), costs and capacity plans.
2. Staff may do everything in every team. Finance members view every team's costs (the finance
   pages compare teams) and save any team's capacity plans, but every other team's data stays
   hidden from them outside the pages made of costs (``Scope.viewing_where``).
3. Subscribing to a team's alert emails: members, and staff for any team they pick one by one.
   The one-click "all my teams" follows membership only: no one is mailed a team's alerts by
   accident.
4. An API token belongs to one team and acts only there: read tokens view, ingest tokens ingest,
   read-write tokens both.
5. What holds every team's users' data at once (the mail outbox: every user's email) is for those
   who manage every team, staff: ``scope.can_everywhere(Action.MANAGE)``.
6. Outside a scope an object is absent, not forbidden: pages answer 404 for another team's ids,
   so ids reveal nothing; a visible object the caller may not change is a 403 with a reason.
7. Money follows one rule on every page: a team's costs (daily, serving, per run) are shown to
   whoever may ``VIEW_COSTS`` in that team. Totals and breakdowns of money (the overview's spend
   and GPU-hours, the finance pages, the capacity plan) read under it, so a finance member sees
   the same teams' spend on the overview as on ``/costs/``; the cost selectors take no other
   action. A page about one object (a run) shows its cost where the caller may view the object
   and ``VIEW_COSTS`` in its team.

Team-owned models use ``TeamScopedQuerySet`` as their manager (``Model.objects.visible_to``); a
model that reaches its team through another row subclasses it with ``team_field = "run__team"``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Self, TypeVar

from django.db import models

from .choices import Role

_M = TypeVar("_M", bound=models.Model)


class Action(StrEnum):
    VIEW = "view"  # see a team's runs, series, alerts, hosts, drift, and its team page
    VIEW_COSTS = "view_costs"  # see a team's costs (finance pages, exports)
    UPLOAD = "upload"  # record benchmark runs from the browser
    TRIAGE = "triage"  # acknowledge, resolve, dismiss alerts; mark changes expected
    MANAGE = "manage"  # change the team's members, detection thresholds and serving objectives
    SUBSCRIBE = "subscribe"  # follow the team's alerts by email
    INGEST = "ingest"  # send telemetry, runs and serving metrics with an API token
    PLAN = "plan"  # save and delete capacity plans (a plan is a cost figure: finance too)


ROLE_ACTIONS: Mapping[str, frozenset[Action]] = {
    Role.TEAM_LEAD: frozenset(Action) - {Action.INGEST},
    Role.ENGINEER: frozenset(
        {Action.VIEW, Action.VIEW_COSTS, Action.UPLOAD, Action.TRIAGE, Action.SUBSCRIBE}
    ),
    Role.FINANCE: frozenset({Action.VIEW, Action.VIEW_COSTS, Action.SUBSCRIBE, Action.PLAN}),
}
# Staff act on every team (rule 2); their one-click subscription still follows membership (rule 3).
STAFF_ACTIONS = frozenset(Action) - {Action.INGEST}
# A finance member of any team views every team's costs and plans their capacity (rule 2).
FINANCE_EVERYWHERE = frozenset({Action.VIEW_COSTS, Action.PLAN})
# Keyed by the API's token kinds (``api.choices.TokenKind`` values; a test keeps them equal).
TOKEN_ACTIONS: Mapping[str, frozenset[Action]] = {
    "read": frozenset({Action.VIEW}),
    "ingest": frozenset({Action.INGEST}),
    "read-write": frozenset({Action.VIEW, Action.INGEST}),
}


@dataclass(frozen=True)
class Scope:
    """What one caller may do: per team (``teams``: team id -> actions) and in every team
    (``everywhere``). Build it with ``scope_for_user``, ``scope_for_token`` or ``scope_for_team``."""

    teams: Mapping[int, frozenset[Action]] = field(default_factory=dict)
    everywhere: frozenset[Action] = frozenset()
    roles: Mapping[int, str] = field(default_factory=dict)  # team id -> role, for display

    def team_ids(self, action: Action = Action.VIEW) -> list[int] | None:
        """The teams where ``action`` is allowed, sorted; None means every team (for raw SQL;
        querysets use ``filter`` or ``Model.objects.visible_to``)."""
        if action in self.everywhere:
            return None
        return sorted(team_id for team_id, actions in self.teams.items() if action in actions)

    def can(self, action: Action, team: models.Model | int | None) -> bool:
        """May the caller do ``action`` in ``team`` (a Team or its id)? Never without a team."""
        if team is None:
            return False
        if action in self.everywhere:
            return True
        team_id = team if isinstance(team, int) else team.pk
        return action in self.teams.get(team_id, frozenset())

    def can_everywhere(self, action: Action) -> bool:
        """May the caller do ``action`` in every team, present and future (staff; finance for
        costs)? Not the same as every team they belong to."""
        return action in self.everywhere

    def can_anywhere(self, action: Action) -> bool:
        """Is there a team where the caller may do ``action`` (to offer a button or a form)?"""
        return action in self.everywhere or any(action in actions for actions in self.teams.values())

    def filter(
        self, queryset: models.QuerySet[_M], action: Action = Action.VIEW, *, team_field: str = "team"
    ) -> models.QuerySet[_M]:
        """``queryset`` restricted to the rows of the teams where ``action`` is allowed."""
        ids = self.team_ids(action)
        if ids is None:
            return queryset
        return queryset.filter(**{f"{team_field}__in": ids})

    def sql_filter(self, column: str, action: Action = Action.VIEW) -> tuple[str, dict[str, list[int]]]:
        """For raw SQL: ``("AND <column> = ANY(%(scope_team_ids)s)", params)``, or ``("", {})`` for
        every team. ``column`` is the team id column of the query (``h.team_id``)."""
        ids = self.team_ids(action)
        if ids is None:
            return "", {}
        return f"AND {column} = ANY(%(scope_team_ids)s)", {"scope_team_ids": ids}

    def costs_teams_wider(self) -> bool:
        """Whether the caller sees the costs of teams whose other data they do not see (finance:
        a page mixing both says that its money covers more teams than the rest of it)."""
        if self.can_everywhere(Action.VIEW_COSTS):
            return not self.can_everywhere(Action.VIEW)
        return False

    def viewing_where(self, action: Action) -> Scope:
        """A read-only scope that views (and views the costs of) exactly the teams where ``action``
        is allowed: a page whose every figure is a cost, such as the capacity plan, reads its
        inputs (traffic, runs, accuracy) under the cost pages' rule with the ordinary selectors."""
        reads = frozenset({Action.VIEW, Action.VIEW_COSTS})
        return Scope(
            teams={team_id: reads for team_id, actions in self.teams.items() if action in actions},
            everywhere=reads if action in self.everywhere else frozenset(),
            roles=self.roles,
        )

    @property
    def sees_no_team(self) -> bool:
        """Signed in but in no team (and not staff): the pages say so instead of showing nothing."""
        return not self.teams and not self.everywhere


NOBODY = Scope()
# Background jobs, benchmarks and the shell that read every team on purpose (never a request).
EVERY_TEAM = Scope(everywhere=frozenset(Action))


def scope_for_user(user: Any) -> Scope:
    """The scope of a signed-in user (anonymous users: nothing). Two small queries at most."""
    if user is None or not user.is_authenticated or not user.is_active:
        return NOBODY
    # Through the user's related name: this module stays below core.models (which use its managers).
    roles = dict(user.memberships.values_list("team_id", "role"))
    teams = {team_id: ROLE_ACTIONS.get(role, frozenset()) for team_id, role in roles.items()}
    everywhere: frozenset[Action] = frozenset()
    if user.is_staff:
        everywhere = STAFF_ACTIONS
    elif Role.FINANCE in roles.values():
        everywhere = FINANCE_EVERYWHERE
    return Scope(teams=teams, everywhere=everywhere, roles=roles)


def scope_for_token(*, team_id: int, kind: str) -> Scope:
    """The scope of an API token of ``kind`` belonging to ``team_id``."""
    return Scope(teams={team_id: TOKEN_ACTIONS.get(kind, frozenset())})


def scope_for_team(team: models.Model | int, actions: Iterable[Action] = (Action.VIEW,)) -> Scope:
    """A background job or an email acting for one team: that team's data and nothing else."""
    team_id = team if isinstance(team, int) else team.pk
    return Scope(teams={team_id: frozenset(actions)})


def request_scope(request: Any) -> Scope:
    """The scope of a request's user, built once per request and kept on it."""
    scope = getattr(request, "_accelboard_scope", None)
    if scope is None:
        scope = scope_for_user(request.user)
        request._accelboard_scope = scope
    return scope


def can(user: Any, action: Action, team: models.Model | int | None) -> bool:
    """Whether ``user`` may do ``action`` in ``team``: ``scope_for_user(user).can(action, team)``."""
    return scope_for_user(user).can(action, team)


class TeamScopedQuerySet(models.QuerySet[_M]):
    """The manager of every team-owned model: ``Model.objects.visible_to(scope)``."""

    team_field = "team"

    def visible_to(self, scope: Scope, action: Action = Action.VIEW) -> Self:
        ids = scope.team_ids(action)
        return self if ids is None else self.filter(**{f"{self.team_field}__in": ids})


class SharedOrTeamQuerySet(TeamScopedQuerySet[_M]):
    """Rows either shared by every team (``team`` null: the catalogue of models and variants) or
    owned by one team, whose names only that team sees: ``visible_to`` keeps the shared rows and the
    rows of the teams the caller may view, ``for_team`` what one team's writes may resolve a name to."""

    def visible_to(self, scope: Scope, action: Action = Action.VIEW) -> Self:
        ids = scope.team_ids(action)
        if ids is None:
            return self
        return self.filter(
            models.Q(**{f"{self.team_field}__isnull": True}) | models.Q(**{f"{self.team_field}__in": ids})
        )

    def for_team(self, team: models.Model | int | None) -> Self:
        """The shared rows and, when ``team`` is given, that team's own."""
        shared = models.Q(**{f"{self.team_field}__isnull": True})
        if team is None:
            return self.filter(shared)
        team_id = team if isinstance(team, int) else team.pk
        return self.filter(shared | models.Q(**{self.team_field: team_id}))
