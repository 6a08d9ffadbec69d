"""The login lockout in Chromium: wrong passwords up to the limit, then the lockout page, where
even the right password is refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _submit(page: Any, username: str, password: str) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.click("button[type=submit]")


def test_it_locks_the_login_after_five_wrong_passwords(page: Any, screenshot: Any, lead: Any) -> None:
    for _ in range(4):
        _submit(page, "lead", "not-the-password")
        assert "didn't match" in page.locator(".error").inner_text()
    _submit(page, "lead", "not-the-password")
    assert page.locator("#locked-out").is_visible()
    _submit(page, "lead", PASSWORD)
    assert page.locator("#locked-out").is_visible()
    assert "/accounts/login/" in page.url
    screenshot(page, "login-locked-out")
    assert page.js_errors == []
