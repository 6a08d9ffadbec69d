"""Single sign-on in Chromium: the login page's button, the provider's login form (a real OpenID
Connect provider on loopback, django-oauth-toolkit), and back on the overview with exactly the
teams the user's groups give."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelboard.core.models import Membership
from accelboard.core.services import team_create
from tests.sso import USER_PASSWORD, oidc_settings, provider

pytestmark = [pytest.mark.browser, pytest.mark.process, pytest.mark.django_db(transaction=True)]
LOGIN_SCREENSHOT = Path("/tmp/h35oidc_login.png")


@pytest.fixture
def issuer(live_server: Any, settings: Any, tmp_path: Path) -> Iterator[str]:
    with provider(tmp_path, redirect_uris=[f"{live_server.url}/oidc/callback/"]) as url:
        oidc_settings(settings, url)
        yield url


def test_it_signs_in_through_the_provider_onto_the_overview(
    page: Any, issuer: str, screenshot: Any, live_server: Any
) -> None:
    for slug in ("infra", "llm", "vision", "audio"):
        team_create(name=slug.upper(), slug=slug)
    page.goto("/accounts/login/")
    button = page.locator("#sso-sign-in")
    assert button.inner_text() == "Sign in with Test IdP"
    screenshot(page, "login-sso")
    page.screenshot(path=str(LOGIN_SCREENSHOT), full_page=True)
    button.click()
    page.wait_for_url(f"{issuer.removesuffix('/o')}/accounts/login/**")
    page.fill("#op-username", "ada")
    page.fill("#op-password", USER_PASSWORD)
    with page.expect_navigation(url=f"{live_server.url}/"):
        page.click("#op-submit")
    teams = page.locator("#my-teams a").evaluate_all("links => links.map(a => a.dataset.team)")
    # ada's groups at the provider: perf-llm (llm's lead) and marketing (mapped to nothing).
    assert teams == ["llm"]
    assert page.locator("#my-teams").inner_text() == "Your teams: LLM (Team lead)"
    assert list(Membership.objects.filter(user__username="ada").values_list("team__slug", "role")) == [
        ("llm", "lead")
    ]
    screenshot(page, "overview-after-sso")
    assert page.js_errors == []
