"""``accelboard token create|list|revoke``."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from accelboard.api.models import ApiToken

from .conftest import post_json, telemetry_payload


def _run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_prints_only_the_token_and_stores_its_hash(client: Client, team: Any) -> None:
    out, err = _run("create", "--team", team.slug, "--kind", "ingest", "--name", "rack 4 agents")
    token = out.strip()
    assert len(token) >= 40 and "\n" not in token
    row = ApiToken.objects.get()
    assert (row.team_id, row.kind, row.name, row.prefix) == (team.pk, "ingest", "rack 4 agents", token[:8])
    assert token not in row.secret_hash and row.secret_hash != token
    assert row.prefix in err
    assert post_json(client, "/api/v1/telemetry", telemetry_payload(), token).status_code == 200
    assert ApiToken.objects.get().last_used_at is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("create", "--team", "nope", "--kind", "ingest"), "unknown team 'nope'"),
        (("create", "--team", "inference", "--kind", "admin"), "unknown kind 'admin'"),
        (("revoke", "zzzzzzzz"), "no token with prefix"),
    ],
)
def test_it_exits_2_with_a_clear_error(team: Any, args: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message) as excinfo:
        _run(*args)
    assert excinfo.value.returncode == 2
    assert ApiToken.objects.count() == 0


def test_it_lists_and_revokes_tokens(client: Client, team: Any) -> None:
    token = _run("create", "--team", team.slug, "--kind", "read")[0].strip()
    assert f"{token[:8]}  read" in _run("list", "--team", team.slug)[0]
    _run("revoke", token[:8])
    assert "revoked" in _run("list", "--team", team.slug)[0]
    response = client.get("/api/v1/runs", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "token_revoked"


def test_it_never_hands_out_a_token_that_reads_as_a_command_line_option(
    team: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelboard.api import services

    draws = iter(
        ["-DsLYmQBwal_rcSv1ZarY8GSuPKVvfM50CdD29Xfm5k", "xDsLYmQBwal_rcSv1ZarY8GSuPKVvfM50CdD29Xfm5k"]
    )
    monkeypatch.setattr(services.secrets, "token_urlsafe", lambda n: next(draws))
    # "--token -Ds..." made argparse stop with "expected one argument" (a CI failure, 1 in 64 draws).
    _, token = services.token_create(team=team, kind="ingest")
    assert token == "xDsLYmQBwal_rcSv1ZarY8GSuPKVvfM50CdD29Xfm5k"


def test_authentication_reads_the_token_and_its_team_as_the_orm_does(team: Any, other_team: Any) -> None:
    from django.forms.models import model_to_dict

    from accelboard.api.services import token_authenticate, token_create

    token_create(team=other_team, kind="read")
    token = token_create(team=team, kind="ingest", name="rack 4")[1]
    found = token_authenticate(token=token)
    expected = ApiToken.objects.select_related("team").get(prefix=token[:8])
    assert found is not None
    fields = [field.attname for field in ApiToken._meta.concrete_fields]
    assert {name: getattr(found, name) for name in fields} == {
        name: getattr(expected, name) for name in fields
    }
    assert model_to_dict(found.team) == model_to_dict(expected.team)
    assert found.team.created_at == expected.team.created_at and found.team.pk == team.pk
    assert token_authenticate(token=token[:8] + "x" * (len(token) - 8)) is None
    assert token_authenticate(token="y" * 40) is None
