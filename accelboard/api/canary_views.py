"""``GET /api/v1/canary/{name}``: the verdict of one of the team's canary checks over its window
ending now, in a shape Argo Rollouts' web metric provider and Flagger's webhooks evaluate
(docs/canary.md; ``gate=true`` answers 412 unless it passes, for Flagger): ``verdict`` (pass / marginal / fail / no-data), ``passed``, ``failed``, a
0-100 ``score`` and each metric's result. A read token reads its own team's checks."""

# No ``from __future__ import annotations``: ninja reads the parameters' types at import.

from typing import Any

from ninja import Router
from ninja.responses import Status

from accelboard.canary.models import CanaryCheck
from accelboard.canary.selectors import canary_check_get, canary_check_teams, canary_evaluate, canary_json
from accelboard.core.access import Action
from accelboard.fleet.ingest_validation import IngestRejected

from .auth import ReadRequest, Session, TokenAuth, caller_scope
from .choices import READ_KINDS
from .models import ApiToken
from .schemas import ErrorOut

router = Router(tags=["read"])
ERRORS: dict[int, Any] = {code: ErrorOut for code in (400, 401, 403, 404, 422)}


@router.get(
    "/canary/{name}",
    auth=[TokenAuth(READ_KINDS), Session()],
    response={200: dict[str, Any], 412: dict[str, Any], **ERRORS},
    url_name="canary",
)
def canary(request: ReadRequest, name: str, team: int | None = None, gate: bool = False) -> Any:
    """``gate=true`` (Flagger's webhooks, which read the status): 412 with the same body unless
    the verdict is pass."""
    scope = caller_scope(request)
    if isinstance(request.auth, ApiToken):
        team = request.auth.team_id
    elif team is None:
        teams = canary_check_teams(scope=scope, name=name)
        if len(teams) > 1:
            raise IngestRejected(
                f"{len(teams)} of your teams have a canary {name!r}: name one", path="team", code="ambiguous"
            )
        team = teams[0] if teams else None
    try:
        check = canary_check_get(scope=scope, team_id=team, name=name)
    except CanaryCheck.DoesNotExist:
        raise IngestRejected(
            f"no canary check {name!r} in your teams", path="name", code="not_found", status=404
        ) from None
    costs = isinstance(request.auth, ApiToken) or scope.can(Action.VIEW_COSTS, check.team_id)
    body = canary_json(canary_evaluate(check=check, costs=costs))
    return Status(412, body) if gate and not body["passed"] else body
