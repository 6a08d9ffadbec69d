"""System checks of single sign-on's settings (ids ``accelboard.E030``-``E035``, ``W030``).

Kept apart from ``checks.py``: these run only while ``ACCELBOARD_OIDC_ISSUER`` is set. The
mapping and the settings that go with the issuer are checked at every start; an issuer that is
not https and a missing client secret are what ``check --deploy`` refuses.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

from .sso_mapping import MappingError, parse_group_mapping


def _enabled() -> bool:
    return bool(getattr(settings, "OIDC_ISSUER", ""))


@register()
def check_sso_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if not _enabled():
        return []
    problems: list[CheckMessage] = []
    parts = urlsplit(settings.OIDC_ISSUER)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        problems.append(
            Error(
                f"ACCELBOARD_OIDC_ISSUER {settings.OIDC_ISSUER!r} is not a URL.",
                hint="The provider's issuer, e.g. https://login.example.org/realms/main (its "
                "/.well-known/openid-configuration is read from there).",
                id="accelboard.E030",
            )
        )
    if not settings.OIDC_RP_CLIENT_ID:
        problems.append(
            Error(
                "ACCELBOARD_OIDC_ISSUER is set but ACCELBOARD_OIDC_CLIENT_ID is not.",
                hint="Register accelboard with the provider and set the client id it gives.",
                id="accelboard.E031",
            )
        )
    if not settings.OIDC_GROUPS_CLAIM:
        problems.append(
            Error(
                "ACCELBOARD_OIDC_GROUPS_CLAIM is empty.",
                hint="Name the claim that lists the user's groups (often 'groups').",
                id="accelboard.E032",
            )
        )
    try:
        rules = parse_group_mapping(settings.OIDC_GROUPS)
    except MappingError as exc:
        problems.append(
            Error(str(exc), hint="Write group=team:role, ... (team '*' is every team).", id="accelboard.E033")
        )
    else:
        if not rules:
            problems.append(
                Warning(
                    "ACCELBOARD_OIDC_GROUPS maps no group: every single sign-on will be refused.",
                    hint="Map the provider's groups to teams, e.g. perf-llm=llm:lead,finops=*:finance.",
                    id="accelboard.W030",
                )
            )
    return problems


@register(Tags.security, deploy=True)
def check_sso_deploy(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if not _enabled():
        return []
    problems: list[CheckMessage] = []
    if urlsplit(settings.OIDC_ISSUER).scheme != "https":
        problems.append(
            Error(
                f"ACCELBOARD_OIDC_ISSUER {settings.OIDC_ISSUER!r} is not https.",
                hint="Tokens and keys would travel in clear: use the provider's https issuer URL.",
                id="accelboard.E034",
            )
        )
    if not settings.OIDC_RP_CLIENT_SECRET:
        problems.append(
            Error(
                "ACCELBOARD_OIDC_CLIENT_SECRET is not set.",
                hint="Set the client secret the provider gave (or ACCELBOARD_OIDC_CLIENT_SECRET_FILE).",
                id="accelboard.E035",
            )
        )
    return problems
