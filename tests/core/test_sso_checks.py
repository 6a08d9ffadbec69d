"""`manage.py check` (and `check --deploy`) on single sign-on's settings."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks.registry import registry

from accelboard.core.sso_checks import check_sso_deploy, check_sso_settings

SSO = {
    "OIDC_ISSUER": "https://login.example.org/realms/main",
    "OIDC_RP_CLIENT_ID": "accelboard",
    "OIDC_RP_CLIENT_SECRET": "s3cret",
    "OIDC_GROUPS_CLAIM": "groups",
    "OIDC_GROUPS": "perf-llm=llm:lead,finops=*:finance",
}


def _ids(*, deploy: bool = False) -> dict[str, str]:
    messages = check_sso_settings() + (check_sso_deploy() if deploy else [])
    return {str(m.id): m.msg for m in messages}


def test_the_checks_run_at_start_and_with_deploy() -> None:
    assert check_sso_settings in registry.get_checks()
    assert check_sso_deploy not in registry.get_checks()
    assert check_sso_deploy in registry.get_checks(include_deployment_checks=True)


@pytest.fixture
def sso(settings: Any) -> Any:
    for name, value in SSO.items():
        setattr(settings, name, value)
    return settings


def test_it_checks_nothing_while_single_sign_on_is_off(settings: Any) -> None:
    settings.OIDC_ISSUER = ""
    settings.OIDC_GROUPS = "not a mapping"
    assert _ids(deploy=True) == {}


def test_a_good_configuration_passes_the_deploy_check(sso: Any) -> None:
    assert _ids(deploy=True) == {}


def test_a_mapping_that_does_not_parse_is_named(sso: Any) -> None:
    sso.OIDC_GROUPS = "perf-llm=llm:lead,finops=*:bookkeeper"
    ids = _ids()
    assert "accelboard.E033" in ids
    assert "entry 2 ('finops=*:bookkeeper') has role 'bookkeeper'" in ids["accelboard.E033"]


def test_an_empty_mapping_and_missing_client_id_are_reported(sso: Any) -> None:
    sso.OIDC_GROUPS = ""
    sso.OIDC_RP_CLIENT_ID = ""
    assert set(_ids()) == {"accelboard.W030", "accelboard.E031"}


def test_deploy_wants_https_and_a_client_secret(sso: Any) -> None:
    sso.OIDC_ISSUER = "http://login.example.org"
    sso.OIDC_RP_CLIENT_SECRET = ""
    assert set(_ids()) == set()
    assert set(_ids(deploy=True)) == {"accelboard.E034", "accelboard.E035"}
    sso.OIDC_ISSUER = "login.example.org"
    assert "accelboard.E030" in _ids()
