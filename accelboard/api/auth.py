"""Who is calling: a team's API token (Bearer), or a logged-in browser session for the reads."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.http import HttpRequest
from ninja.security import HttpBearer, SessionAuth

from accelboard.core.selectors import team_ids_visible
from accelboard.fleet.ingest import IngestRejected

from .models import ApiToken
from .services import token_authenticate


class TokenAuth(HttpBearer):
    """A Bearer token of one of ``kinds``; another kind is a 403 naming what is needed."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.kinds = frozenset(kinds)
        super().__init__()

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:
        row = token_authenticate(token=token)
        if row is not None and row.kind not in self.kinds:
            raise IngestRejected(
                f"a {row.kind!r} token cannot call this endpoint; it needs one of: {', '.join(sorted(self.kinds))}",
                code="wrong_token_kind",
                status=403,
            )
        return row


class Session(SessionAuth):
    """Django's session (CSRF-checked by ninja for unsafe methods); reads only."""


def caller_team_ids(auth: Any) -> list[int]:
    """The teams whose data the caller may read: the token's team, or the user's teams."""
    if isinstance(auth, ApiToken):
        return [auth.team_id]
    return team_ids_visible(user=auth)
