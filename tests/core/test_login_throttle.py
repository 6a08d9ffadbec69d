"""Repeated wrong passwords lock a user name out from that address for a while (django-axes), on
the login page and the admin's alike; other addresses and other users are not affected."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

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
