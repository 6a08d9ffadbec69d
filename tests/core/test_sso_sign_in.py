"""Single sign-on against a real OpenID Connect provider (django-oauth-toolkit on loopback).

accelboard is driven with Django's test client; the provider's side (its login form) with
``requests``. The provider knows ada (perf-llm, marketing), grace (perf-vision, finops) and bob
(marketing, sales); the mapping is perf-llm=llm:lead, perf-vision=vision:engineer,
finops=*:finance.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.test import Client

from accelboard.core.choices import MembershipSource, Role
from accelboard.core.models import ExternalIdentity, Membership, Team
from accelboard.core.services import membership_set, team_create
from tests.conftest import PASSWORD
from tests.sso import oidc_settings, provider, provider_sign_in

CALLBACK = "http://testserver/oidc/callback/"
pytestmark = [pytest.mark.process, pytest.mark.django_db]


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with provider(tmp_path_factory.mktemp("op"), redirect_uris=[CALLBACK]) as url:
        yield url


@pytest.fixture
def teams(db: None) -> dict[str, Team]:
    return {slug: team_create(name=slug.upper(), slug=slug) for slug in ("infra", "llm", "vision")}


@pytest.fixture
def sso(settings: Any, issuer: str, teams: dict[str, Team]) -> str:
    oidc_settings(settings, issuer)
    return issuer


def _sign_in(client: Client, username: str) -> Any:
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302, start
    back = provider_sign_in(start["Location"], username=username)
    assert back.startswith(CALLBACK), back
    return client.get(back.removeprefix("http://testserver"))


def _roles(username: str) -> dict[str, tuple[str, str]]:
    return {
        m.team.slug: (m.role, m.source)
        for m in Membership.objects.filter(user__username=username).select_related("team")
    }


def _errors(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_it_signs_in_and_gives_exactly_the_mapped_teams(client: Client, sso: str) -> None:
    response = _sign_in(client, "grace")
    assert response.status_code == 302 and response["Location"] == "/"
    assert _roles("grace") == {
        "infra": ("finance", "oidc"),
        "llm": ("finance", "oidc"),
        "vision": ("engineer", "oidc"),
    }
    identity = ExternalIdentity.objects.get(user__username="grace")
    assert identity.issuer == sso and identity.groups == ["finops", "perf-vision"]
    assert identity.user.email == "grace@example.org"
    assert not identity.user.has_usable_password()
    overview = client.get("/")
    assert overview.status_code == 200
    shown = [m.team.slug for m in overview.context["my_memberships"]]
    assert shown == ["infra", "llm", "vision"]


def test_it_syncs_memberships_at_every_sign_in(client: Client, sso: str, teams: dict[str, Team]) -> None:
    _sign_in(client, "ada")
    ada = get_user_model().objects.get(username="ada")
    assert _roles("ada") == {"llm": ("lead", "oidc")}
    # Since then: a membership single sign-on made that the groups no longer give, a role changed
    # behind its back, and one added by hand.
    Membership.objects.create(team=teams["infra"], user=ada, role=Role.ENGINEER, source=MembershipSource.OIDC)
    Membership.objects.filter(user=ada, team=teams["llm"]).update(role=Role.FINANCE)
    membership_set(team=teams["vision"], user=ada, role=Role.FINANCE)
    client.logout()
    _sign_in(client, "ada")
    assert _roles("ada") == {"llm": ("lead", "oidc"), "vision": ("finance", "manual")}
    assert get_user_model().objects.filter(username__startswith="ada").count() == 1


def test_a_user_whose_groups_give_no_team_is_refused_naming_the_claim(client: Client, sso: str) -> None:
    users_before = get_user_model().objects.count()
    response = _sign_in(client, "bob")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    [error] = _errors(response)
    assert "'groups' claim" in error and "marketing, sales" in error, error
    assert get_user_model().objects.count() == users_before
    assert not ExternalIdentity.objects.exists() and not Membership.objects.exists()
    assert "_auth_user_id" not in client.session


def test_a_missing_groups_claim_is_named(client: Client, sso: str, settings: Any) -> None:
    settings.OIDC_GROUPS_CLAIM = "roles"
    response = _sign_in(client, "ada")
    [error] = _errors(response)
    assert "no 'roles' claim" in error, error
    assert not ExternalIdentity.objects.exists()


def test_an_id_token_with_a_bad_signature_is_refused(
    client: Client, settings: Any, teams: dict[str, Team], tmp_path: Path
) -> None:
    with provider(tmp_path, redirect_uris=[CALLBACK], tamper=True) as forged:
        oidc_settings(settings, forged)
        response = _sign_in(client, "ada")
    assert response["Location"] == "/accounts/login/"
    [error] = _errors(response)
    assert "signature does not verify" in error, error
    assert not ExternalIdentity.objects.exists() and not Membership.objects.exists()
    assert not get_user_model().objects.filter(username="ada").exists()


def test_a_callback_without_a_started_sign_in_is_refused(client: Client, sso: str) -> None:
    response = client.get("/oidc/callback/?code=abc&state=xyz")
    assert response["Location"] == "/accounts/login/"
    assert _errors(response) == ["Sign-in through Test IdP failed; please start again."]
    response = Client().get("/oidc/callback/?error=access_denied&error_description=User+said+no")
    assert _errors(response) == ["Test IdP refused the sign-in: User said no"]


def test_the_login_page_offers_the_provider_and_passwords_still_work(
    client: Client, sso: str, lead: Any
) -> None:
    page = client.get("/accounts/login/")
    assert b"Sign in with Test IdP" in page.content
    response = client.post("/accounts/login/", {"username": "lead", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/"


def test_without_an_issuer_there_is_no_single_sign_on(client: Client, settings: Any) -> None:
    settings.OIDC_ISSUER = ""
    assert b"Sign in with" not in client.get("/accounts/login/").content
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=a&state=b").status_code == 404
