"""The access module (``accelboard.core.access``): the rules, the scopes, and the guard that keeps
every page, export and API read going through it.

The permission matrix (``tests/test_permission_matrix.py``) checks the same rules end to end, URL
by URL; these tests check them at the source, role by action, and check the code's shape: a view
that reads the database itself, or a module that decides scoping on its own (``is_staff``, a
``Membership`` lookup, a ``team_ids`` list), fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from accelboard.api.choices import TokenKind
from accelboard.benchmarks.models import BenchmarkRun, MetricValue
from accelboard.core.access import (
    EVERY_TEAM,
    NOBODY,
    TOKEN_ACTIONS,
    Action,
    Scope,
    can,
    scope_for_team,
    scope_for_token,
    scope_for_user,
)
from accelboard.core.models import Team
from tests import factories

A = Action
ROLES = ["lead", "engineer", "finance", "other_lead", "outsider", "staff"]
# Per action, for each role in ROLES: may they do it in ``team`` (where lead, engineer and finance
# work), and in ``other_team`` (other_lead's)?
MATRIX: dict[Action, tuple[tuple[bool, ...], tuple[bool, ...]]] = {
    A.VIEW: ((1, 1, 1, 0, 0, 1), (0, 0, 0, 1, 0, 1)),
    A.VIEW_COSTS: ((1, 1, 1, 0, 0, 1), (0, 0, 1, 1, 0, 1)),  # finance: every team's costs
    A.UPLOAD: ((1, 1, 0, 0, 0, 1), (0, 0, 0, 1, 0, 1)),
    A.TRIAGE: ((1, 1, 0, 0, 0, 1), (0, 0, 0, 1, 0, 1)),
    A.MANAGE: ((1, 0, 0, 0, 0, 1), (0, 0, 0, 1, 0, 1)),
    A.SUBSCRIBE: ((1, 1, 1, 0, 0, 1), (0, 0, 0, 1, 0, 1)),  # members; staff any team, one at a time (rule 3)
    A.INGEST: ((0, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0, 0)),  # tokens only
    A.PLAN: ((1, 0, 1, 0, 0, 1), (0, 0, 1, 1, 0, 1)),  # finance: every team's capacity plans
}


@pytest.mark.parametrize("action", list(Action), ids=[a.value for a in Action])
def test_it_allows_each_role_what_the_rules_say(
    cast: dict[str, Any], team: Team, other_team: Team, action: Action
) -> None:
    in_team, in_other = MATRIX[action]
    got = (
        tuple(int(can(cast[role], action, team)) for role in ROLES),
        tuple(int(can(cast[role], action, other_team)) for role in ROLES),
    )
    assert got == (tuple(map(int, in_team)), tuple(map(int, in_other)))


def test_it_allows_nothing_to_anonymous_or_inactive_users(
    team: Team, engineer: Any, django_user_model: Any
) -> None:
    from django.contrib.auth.models import AnonymousUser

    assert scope_for_user(AnonymousUser()) == NOBODY
    engineer.is_active = False
    assert not any(can(engineer, action, team) for action in Action)
    assert NOBODY.sees_no_team and not NOBODY.can(A.VIEW, team)


def test_it_gives_each_token_kind_its_actions_in_its_team_only(team: Team, other_team: Team) -> None:
    assert set(TOKEN_ACTIONS) == set(TokenKind.values)
    read = scope_for_token(team_id=team.pk, kind=TokenKind.READ)
    ingest = scope_for_token(team_id=team.pk, kind=TokenKind.INGEST)
    both = scope_for_token(team_id=team.pk, kind=TokenKind.READ_WRITE)
    assert (read.can(A.VIEW, team), read.can(A.INGEST, team)) == (True, False)
    assert (ingest.can(A.VIEW, team), ingest.can(A.INGEST, team)) == (False, True)
    assert (both.can(A.VIEW, team), both.can(A.INGEST, team)) == (True, True)
    assert not any(scope.can(a, other_team) for scope in (read, ingest, both) for a in Action)
    assert not read.can(A.VIEW, None)


def test_it_scopes_querysets_directly_and_through_a_relation(
    team: Team, other_team: Team, cast: dict[str, Any]
) -> None:
    ours = factories.run_create(team=team)
    theirs = factories.run_create(team=other_team)
    lead, other_lead, staff = (scope_for_user(cast[r]) for r in ("lead", "other_lead", "staff"))
    assert list(BenchmarkRun.objects.visible_to(lead)) == [ours]
    assert list(BenchmarkRun.objects.visible_to(other_lead)) == [theirs]
    assert set(BenchmarkRun.objects.visible_to(staff)) == {ours, theirs}
    assert list(BenchmarkRun.objects.visible_to(scope_for_user(cast["outsider"]))) == []
    # MetricValue reaches its team through the run.
    assert {v.run_id for v in MetricValue.objects.visible_to(lead)} == {ours.pk}
    assert {v.run_id for v in MetricValue.objects.visible_to(EVERY_TEAM)} == {ours.pk, theirs.pk}
    # Teams themselves: the team field is the row.
    assert list(Team.objects.visible_to(lead)) == [team]
    # Finance sees every team's costs but only its own team's runs.
    finance = scope_for_user(cast["finance"])
    assert list(BenchmarkRun.objects.visible_to(finance)) == [ours]
    assert set(Team.objects.visible_to(finance, A.VIEW_COSTS)) == {team, other_team}


def test_it_gives_raw_sql_the_same_teams(team: Team, other_team: Team) -> None:
    assert EVERY_TEAM.sql_filter("h.team_id") == ("", {})
    clause, params = scope_for_team(team).sql_filter("h.team_id")
    assert clause == "AND h.team_id = ANY(%(scope_team_ids)s)" and params == {"scope_team_ids": [team.pk]}
    two = Scope(teams={team.pk: frozenset({A.VIEW}), other_team.pk: frozenset({A.VIEW_COSTS})})
    assert two.team_ids(A.VIEW) == [team.pk]
    assert two.team_ids(A.VIEW_COSTS) == [other_team.pk]
    assert two.can_anywhere(A.VIEW_COSTS) and not two.can_anywhere(A.TRIAGE)


def test_it_reads_a_page_of_costs_under_the_cost_rule(
    team: Team, other_team: Team, cast: dict[str, Any]
) -> None:
    ours = factories.run_create(team=team)
    theirs = factories.run_create(team=other_team)
    finance = scope_for_user(cast["finance"]).viewing_where(A.VIEW_COSTS)
    # Finance views every team's costs, so a page made of costs reads every team's runs...
    assert set(BenchmarkRun.objects.visible_to(finance)) == {ours, theirs}
    assert set(Team.objects.visible_to(finance, A.VIEW_COSTS)) == {team, other_team}
    # ...and nothing more: the narrowed scope only reads.
    assert not any(finance.can(a, team) for a in A if a not in (A.VIEW, A.VIEW_COSTS))
    engineer = scope_for_user(cast["engineer"]).viewing_where(A.VIEW_COSTS)
    assert list(BenchmarkRun.objects.visible_to(engineer)) == [ours]
    assert scope_for_user(cast["outsider"]).viewing_where(A.VIEW_COSTS).sees_no_team


def test_it_keeps_what_spans_every_teams_users_for_staff(cast: dict[str, Any]) -> None:
    # The mail outbox holds every user's email: only who manages every team reads it.
    assert [r for r in ROLES if scope_for_user(cast[r]).can_everywhere(A.MANAGE)] == ["staff"]
    # Finance views every team's costs without managing any team but its own.
    assert scope_for_user(cast["finance"]).can_everywhere(A.VIEW_COSTS)
    assert not scope_for_user(cast["lead"]).can_everywhere(A.VIEW_COSTS)


def test_it_builds_a_requests_scope_once(rf: Any, lead: Any, django_assert_num_queries: Any) -> None:
    from accelboard.core.access import request_scope

    request = rf.get("/")
    request.user = lead
    with django_assert_num_queries(1):
        first = request_scope(request)
        assert request_scope(request) is first


# --- the guard: scoping decided in one place ---------------------------------------------------

PACKAGE = Path(__file__).resolve().parents[2] / "accelboard"


def _modules() -> list[Path]:
    return [
        p
        for p in PACKAGE.rglob("*.py")
        if "migrations" not in p.parts and "demo" not in p.parts and "demo" not in p.stem
    ]


def _is_edge(path: Path) -> bool:
    """Views and API endpoints: the modules that answer requests."""
    rel = path.relative_to(PACKAGE).as_posix()
    return path.stem == "views" or path.stem.endswith("_views") or rel in ("api/drift.py",)


def test_it_keeps_views_and_endpoints_off_the_orm() -> None:
    """A view or endpoint reads through selectors (which take a Scope), never ``Model.objects``:
    an unscoped query cannot start in the code that answers a request."""
    found = []
    for path in filter(_is_edge, _modules()):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "objects":
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []


# Where each access-deciding name may appear, and why.
_ALLOWED = {
    "is_staff": {"core/access.py", "core/services.py"},  # the rule; creating a user with the flag
    "Membership": {
        "core/access.py",
        "core/models.py",
        "core/services.py",
        "core/selectors.py",
        "core/admin.py",
        "core/sso_services.py",  # single sign-on writes memberships from the provider's groups
    },
    # The mail and route planners join subscriptions (a personal route its owner's membership) in bulk.
    "memberships__": {"notifications/services.py", "notifications/route_services.py"},
}


def test_it_decides_who_sees_what_only_in_the_access_module() -> None:
    found = []
    for path in _modules():
        rel = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Attribute) and node.attr in ("is_staff", "is_superuser"):
                names.append("is_staff")
            if isinstance(node, ast.Name) and node.id == "Membership":
                names.append("Membership")
            if isinstance(node, ast.keyword) and node.arg and "memberships__" in node.arg:
                names.append("memberships__")
            if isinstance(node, ast.arg) and node.arg == "team_ids":
                names.append("team_ids")  # the old idiom: a list of visible teams passed around
            found += [f"{rel}:{node.lineno} {n}" for n in names if rel not in _ALLOWED.get(n, set())]
    assert found == []
