"""The fixed test cast (healthchecks ``hc/test.py`` style), shared by every test module.

Two teams: ``team`` (where the lead, the engineer and finance work) and ``other_team`` (with its
own lead, so that "sees only their team" has something to not see). ``outsider`` belongs to no
team; ``staff`` is ``is_staff`` and belongs to no team either, so whatever staff sees comes from
the staff flag, not from a membership. Every user's password is ``PASSWORD``.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, RequestFactory

from accelboard.core.choices import Role
from accelboard.core.models import Team
from accelboard.core.services import membership_set, team_create, user_create

PASSWORD = "correct-horse-battery-staple"

# Modules whose tests start other programs (a `manage.py check`, a nested pytest, the demo's
# servers, the host agent): seconds each, so `make test-fast` leaves them to `make test`. Marked
# here, in one list, rather than in each module (the demo's belong to another part of the tree).
PROCESS_MODULES = frozenset(
    {
        "tests/browser/test_harness.py",
        "tests/test_agent_integration.py",
        "tests/test_demo_command.py",
        "tests/test_demo_fleet.py",
        "tests/test_deploy_files.py",
        "tests/test_settings_config.py",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    for item in items:
        if item.path.relative_to(root).as_posix() in PROCESS_MODULES:
            item.add_marker(pytest.mark.process)


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
        # The request lets the login lockout (django-axes) see who is asking, as on the login page.
        assert client.login(request=RequestFactory().post("/accounts/login/"), username=user.get_username(),
                            password=PASSWORD), f"cannot log in as {user}"  # fmt: skip
        return client

    return make
