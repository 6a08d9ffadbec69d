"""The fixed test cast (healthchecks ``hc/test.py`` style), shared by every test module.

Two teams: ``team`` (where the lead, the engineer and finance work) and ``other_team`` (with its
own lead, so that "sees only their team" has something to not see). ``outsider`` belongs to no
team; ``staff`` is ``is_staff`` and belongs to no team either, so whatever staff sees comes from
the staff flag, not from a membership. Every user's password is ``PASSWORD``.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accelboard.core.choices import Role
from accelboard.core.models import Team
from accelboard.core.services import membership_set, team_create, user_create

PASSWORD = "correct-horse-battery-staple"


@pytest.fixture
def team(db: None) -> Team:
    return team_create(name="Inference Platform", slug="inference")


@pytest.fixture
def other_team(db: None) -> Team:
    return team_create(name="Research", slug="research")


def _member(username: str, team: Team | None, role: str | None, *, is_staff: bool = False) -> Any:
    user = user_create(
        username=username, password=PASSWORD, email=f"{username}@example.com", is_staff=is_staff
    )
    if team is not None and role is not None:
        membership_set(team=team, user=user, role=role)
    return user


@pytest.fixture
def lead(team: Team) -> Any:
    return _member("lead", team, Role.TEAM_LEAD)


@pytest.fixture
def engineer(team: Team) -> Any:
    return _member("engineer", team, Role.ENGINEER)


@pytest.fixture
def finance(team: Team) -> Any:
    return _member("finance", team, Role.FINANCE)


@pytest.fixture
def other_lead(other_team: Team) -> Any:
    return _member("other-lead", other_team, Role.TEAM_LEAD)


@pytest.fixture
def outsider(db: None) -> Any:
    return _member("outsider", None, None)


@pytest.fixture
def staff(db: None) -> Any:
    return _member("staff", None, None, is_staff=True)


@pytest.fixture
def cast(
    lead: Any, engineer: Any, finance: Any, other_lead: Any, outsider: Any, staff: Any
) -> dict[str, Any]:
    """Everyone, by name, for tests that walk the whole cast."""
    return {
        "lead": lead,
        "engineer": engineer,
        "finance": finance,
        "other_lead": other_lead,
        "outsider": outsider,
        "staff": staff,
    }


@pytest.fixture
def login_client() -> Any:
    """``login_client(user)``: a test client logged in through the real password check."""

    def make(user: Any) -> Client:
        client = Client()
        assert client.login(username=user.get_username(), password=PASSWORD), f"cannot log in as {user}"
        return client

    return make
