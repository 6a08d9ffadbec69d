"""The admin's "Revoke the selected tokens" action revokes through the token service."""

from __future__ import annotations

from typing import Any

import pytest

from accelboard.api import services
from accelboard.api.models import ApiToken

pytestmark = pytest.mark.django_db


def test_it_revokes_the_selected_tokens_once(team: Any, admin_client: Any) -> None:
    first, _ = services.token_create(team=team, kind="ingest")
    second, _ = services.token_create(team=team, kind="read")
    services.token_revoke(prefix=second.prefix)
    response = admin_client.post(
        "/admin/api/apitoken/",
        {"action": "revoke", "_selected_action": [first.pk, second.pk]},
        follow=True,
    )
    assert "Revoked 1 token(s)." in response.content.decode()
    assert ApiToken.objects.filter(revoked_at__isnull=True).count() == 0
