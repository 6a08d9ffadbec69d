"""Repeated wrong passwords lock a user name out from that address for a while (django-axes), on
the login page and the admin's alike; other addresses and other users are not affected. Wrong
passwords for many user names from one address (spraying) close that address for a while."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import axes.attempts
import axes.handlers.proxy
import pytest
from django.test import Client
from django.utils import timezone as django_timezone

from tests.conftest import PASSWORD

LIMIT = 5  # settings.AXES_FAILURE_LIMIT (LOGIN_FAILURE_LIMIT)


def _login(client: Client, url: str, username: str, password: str, address: str = "10.0.0.1") -> Any:
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


@pytest.mark.parametrize("url", ["/accounts/login/", "/admin/login/"])
def test_fifty_wrong_passwords_lock_the_account_out_even_for_the_right_one(url: str, staff: Any) -> None:
    client = Client()
    for _ in range(50):
        response = _login(client, url, "staff", "wrong-password")
        assert response.status_code in (200, 429)
    response = _login(client, url, "staff", PASSWORD)
    assert response.status_code == 429
    assert 'id="locked-out"' in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_the_lockout_starts_at_the_limit_and_a_success_before_it_resets_the_count(lead: Any) -> None:
    client = Client()
    for _ in range(LIMIT - 1):
        assert _login(client, "/accounts/login/", "lead", "wrong").status_code == 200
    assert _login(client, "/accounts/login/", "lead", PASSWORD).status_code == 302
    client = Client()
    for _ in range(LIMIT - 1):
        assert _login(client, "/accounts/login/", "lead", "wrong").status_code == 200
    assert _login(client, "/accounts/login/", "lead", "wrong").status_code == 429
    assert _login(client, "/accounts/login/", "lead", PASSWORD).status_code == 429


def test_a_lockout_keeps_to_its_user_name_and_address(lead: Any, engineer: Any) -> None:
    for _ in range(LIMIT):
        _login(Client(), "/accounts/login/", "lead", "wrong", address="10.0.0.66")
    assert _login(Client(), "/accounts/login/", "lead", PASSWORD, address="10.0.0.66").status_code == 429
    assert _login(Client(), "/accounts/login/", "lead", PASSWORD, address="10.0.0.7").status_code == 302
    assert _login(Client(), "/accounts/login/", "engineer", PASSWORD, address="10.0.0.66").status_code == 302


class Clock:
    """The clock django-axes and the throttle read (``timezone.now``), moved by the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
        for target in (django_timezone, axes.handlers.proxy, axes.attempts):
            monkeypatch.setattr(target, "now", lambda: self.now)

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


SPRAYED = "Spring2026!"
ADDRESS_LIMIT = 10  # settings.LOGIN_ADDRESS_USERNAME_LIMIT
WINDOW = 15  # minutes, settings.AXES_COOLOFF_TIME (LOGIN_LOCKOUT_MINUTES)


def test_one_password_sprayed_over_many_names_closes_that_address_for_a_while(
    lead: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(monkeypatch)
    names = [f"user{i:02}" for i in range(12)]
    answers = [_login(Client(), "/accounts/login/", name, SPRAYED, address="10.0.0.66") for name in names]
    # Each name fails once only (far below the per-name limit); the tenth name closes the address.
    assert [a.status_code for a in answers] == [200] * (ADDRESS_LIMIT - 1) + [429] * (12 - ADDRESS_LIMIT + 1)
    assert "Your username and password didn't match" in answers[0].content.decode()
    refused = answers[-1].content.decode()
    assert (
        'id="address-throttled"' in refused and "many different user names came from this address" in refused
    )
    assert f"paused for {WINDOW} minutes" in refused

    # The right password from that address is refused too, on the admin's login as well; other
    # addresses are not affected.
    for url in ("/accounts/login/", "/admin/login/"):
        assert _login(Client(), url, "lead", PASSWORD, address="10.0.0.66").status_code == 429
    assert _login(Client(), "/accounts/login/", "lead", PASSWORD, address="10.0.0.7").status_code == 302

    # Still closed within the window (an attempt meanwhile counts: spraying on keeps it closed) ...
    clock.advance(minutes=WINDOW - 1)
    assert _login(Client(), "/accounts/login/", "lead", PASSWORD, address="10.0.0.66").status_code == 429
    # ... and open again a window after the last failure.
    clock.advance(minutes=WINDOW + 1)
    assert _login(Client(), "/accounts/login/", "lead", PASSWORD, address="10.0.0.66").status_code == 302


def test_fewer_names_than_the_limit_from_one_address_lock_nobody_out(
    lead: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    Clock(monkeypatch)
    for i in range(ADDRESS_LIMIT - 1):
        assert (
            _login(Client(), "/accounts/login/", f"typo{i}", "wrong", address="10.0.0.66").status_code == 200
        )
    assert _login(Client(), "/accounts/login/", "lead", PASSWORD, address="10.0.0.66").status_code == 302
