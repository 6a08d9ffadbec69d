"""Who is calling: a team's API token (Bearer), or a logged-in browser session for the reads."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.base_user import AbstractBaseUser
from django.http import HttpRequest
from ninja.security import HttpBearer, SessionAuth

from accelboard.core.access import Scope, request_scope, scope_for_token
from accelboard.fleet.ingest_validation import IngestRejected

from .models import ApiToken
from .services import token_authenticate


class TokenRequest(HttpRequest):
    """A request that ``TokenAuth`` let in: ninja has set ``auth`` to the caller's token.

    A type for the endpoints' ``request`` parameter, never instantiated (ninja hands them Django's
    request): an endpoint whose only authenticator is ``TokenAuth`` declares it, and mypy then
    checks what it reads from ``request.auth``.
    """

    auth: ApiToken


class ReadRequest(HttpRequest):
    """A request that ``TokenAuth`` or ``Session`` let in: a token, or the signed-in user."""

    auth: ApiToken | AbstractBaseUser


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


def caller_scope(request: ReadRequest) -> Scope:
    """What the caller may read: a token's team (by its kind), or a signed-in user's teams."""
    if isinstance(request.auth, ApiToken):
        return scope_for_token(team_id=request.auth.team_id, kind=request.auth.kind)
    return request_scope(request)
