"""The suite hashes passwords with a fast hasher; production must not."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.hashers import get_hasher
from django.test import Client, RequestFactory

from accelboard.core.services import user_create


def test_it_hashes_with_pbkdf2_outside_the_test_suite() -> None:
    from accelboard import settings as product_settings

    # The product sets no PASSWORD_HASHERS: Django's default list, PBKDF2 first.
    assert not hasattr(product_settings, "PASSWORD_HASHERS")
    assert django_settings.PASSWORD_HASHERS[0] == "django.contrib.auth.hashers.MD5PasswordHasher"


@pytest.mark.django_db
def test_it_stores_and_checks_a_password_with_the_real_hasher(settings: object) -> None:
    from django.conf import global_settings

    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS  # type: ignore[attr-defined]
    user = user_create(username="real-hash", password="correct-horse-battery-staple")
    user.refresh_from_db()
    assert user.password.startswith(f"{get_hasher('default').algorithm}$")
    assert user.password.startswith("pbkdf2_sha256$")
    request = RequestFactory().post("/accounts/login/")
    assert Client().login(request=request, username="real-hash", password="correct-horse-battery-staple")
    assert not Client().login(request=request, username="real-hash", password="wrong")
