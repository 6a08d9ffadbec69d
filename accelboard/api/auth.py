"""Who is calling: a team's API token (Bearer), or a logged-in browser session for the reads."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.http import HttpRequest
from ninja.security import HttpBearer, SessionAuth

from accelboard.core.access import Scope, request_scope, scope_for_token
from accelboard.fleet.ingest_validation import IngestRejected

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


def caller_scope(request: HttpRequest) -> Scope:
    """What the caller may read: a token's team (by its kind), or a signed-in user's teams."""
    auth: Any = getattr(request, "auth", None)
    if isinstance(auth, ApiToken):
        return scope_for_token(team_id=auth.team_id, kind=auth.kind)
    return request_scope(request)
