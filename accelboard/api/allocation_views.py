"""``GET /api/v1/allocation``: GPU cost and energy by team, namespace, workload, model, GPU or
host over a period of days, on the allocation basis (time held) or the usage basis (measured),
with idle and unattributed as their own rows (docs/attribution.md). Money is read under the cost
pages' rule (``VIEW_COSTS``); a read token reads its own team's, as it reads its runs."""

# No ``from __future__ import annotations``: ninja reads the parameters' types at import.

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Literal

from ninja import Field, Query, Router, Schema

from accelboard.attribution.selectors import allocation_report
from accelboard.core.access import Action
from accelboard.fleet.ingest_validation import IngestRejected

from .auth import ReadRequest, Session, TokenAuth, caller_scope
from .choices import READ_KINDS
from .models import ApiToken
from .schemas import ErrorOut

router = Router(tags=["read"])
ERRORS: dict[int, Any] = {code: ErrorOut for code in (400, 401, 403, 404, 422)}
MAX_DAYS = 366


class AllocationQuery(Schema):
    start: date | None = Field(
        None, description="First day (UTC), YYYY-MM-DD; default: the 1st of this month"
    )
    end: date | None = Field(None, description="Last day (UTC), inclusive; default: today")
    group_by: Literal["team", "namespace", "workload", "model", "gpu", "host"] = Field(
        "team", description="What the workload rows are grouped by"
    )
    basis: Literal["allocation", "usage"] = Field(
        "allocation", description="allocation: by time held; usage: by measured utilisation and energy"
    )
    idle: Literal["separate", "share"] = Field(
        "separate",
        description="separate: idle as its own row; share: spread over the other rows by their cost",
    )


class AllocationRowOut(Schema):
    kind: Literal["workload", "unattributed", "idle"]
    key: str | None = Field(description="The group's value; null for idle, and where the rows have none")
    cost: Decimal
    currency: str
    energy_j: int


class AllocationTotalOut(Schema):
    currency: str
    cost: Decimal
    energy_j: int


class AllocationOut(Schema):
    start: date
    end: date
    group_by: str
    basis: str
    idle: str
    count: int = Field(description="The number of rows")
    rows: list[AllocationRowOut]
    totals: list[AllocationTotalOut]


@router.get(
    "/allocation",
    auth=[TokenAuth(READ_KINDS), Session()],
    response={200: AllocationOut, **ERRORS},
    url_name="allocation",
)
def allocation(request: ReadRequest, params: Query[AllocationQuery]) -> dict[str, Any]:
    today = datetime.now(UTC).date()
    start = params.start or today.replace(day=1)
    end = params.end or today
    if end < start:
        raise IngestRejected(f"{end} is before start {start}", path="end", code="range")
    if (end - start).days >= MAX_DAYS:
        raise IngestRejected(f"at most {MAX_DAYS} days from start", path="end", code="range")
    scope = caller_scope(request)
    if isinstance(request.auth, ApiToken):
        # A token acts in its one team: what it may view there, it may view the costs of.
        scope = scope.viewing_where(Action.VIEW)
    report = allocation_report(
        scope=scope, start=start, end=end, group_by=params.group_by, basis=params.basis, idle=params.idle
    )
    return {
        "start": start,
        "end": end,
        "group_by": params.group_by,
        "basis": params.basis,
        "idle": params.idle,
        "count": len(report.rows),
        "rows": report.rows,
        "totals": report.totals,
    }
