"""``POST /api/v1/drift-metrics``: production agreement of quantized variants with their reference.

Per model variant, day and task: how often the variant agreed with the reference on sampled
traffic (agreement rate), and optionally KL divergence and perplexity delta. An agent or a
script computes them; accelboard stores, charts and alerts (``accelboard.drift``). Same rules as
the other ingest endpoints: a write token, a strict schema whose first error is a 422 naming the
field, idempotent on the client's ``batch_id`` (a retry returns the first answer with
``duplicate: true``; the same ``batch_id`` with other items is a 409 ``idempotency_key_reused``),
all-or-nothing.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any

from annotated_types import Ge, Le
from ninja import Router
from pydantic import Field

from accelboard.core.idempotency_services import IdempotencyKeyReused
from accelboard.drift.services import AgreementInput, AgreementRejected, agreement_batch_ingest
from accelboard.fleet.ingest_services import idempotency_key_reused
from accelboard.fleet.ingest_validation import EARLIEST, IngestRejected

from .auth import TokenAuth, TokenRequest
from .body import request_json
from .choices import WRITE_KINDS
from .errors import validated
from .schemas import BatchAccepted, ErrorOut, Length, StrictModel, openapi_body

router = Router(tags=["ingest"])
ERRORS: dict[int, Any] = {code: ErrorOut for code in (400, 401, 403, 404, 409, 413, 415, 422)}
# A day more than this far ahead of the server's clock is a client bug (or a timezone mistake).
MAX_DAYS_AHEAD = 1


class AgreementIn(StrictModel):
    model: Annotated[str, Length(120, 1)]
    variant: Annotated[str, Length(120, 1)]
    day: Annotated[date, Field(strict=False, description="UTC day the traffic was sampled, YYYY-MM-DD")]
    task: Annotated[str, Length(120, 1)]
    agreement_rate: Annotated[float, Ge(0.0), Le(1.0)]
    kl_divergence: Annotated[float, Ge(0.0), Le(1e6)] | None = None
    perplexity_delta: Annotated[float, Ge(-1e6), Le(1e6)] | None = None
    samples: Annotated[int, Ge(1), Le(2**31 - 1)]


class DriftBatchIn(StrictModel):
    batch_id: Annotated[str, Length(64, 1)]
    items: Annotated[list[AgreementIn], Field(min_length=1, max_length=10_000)]


def _check(payload: DriftBatchIn) -> None:
    """What the schema cannot say: a day in the future or before 2000, the same row twice."""
    latest = datetime.now(UTC).date() + timedelta(days=MAX_DAYS_AHEAD)
    seen: dict[tuple[str, str, date, str], int] = {}
    for i, item in enumerate(payload.items):
        if item.day > latest:
            raise IngestRejected(f"{item.day} is in the future", path=f"items[{i}].day", code="future_day")
        if item.day < EARLIEST.date():
            raise IngestRejected(
                f"{item.day} is before 2000-01-01", path=f"items[{i}].day", code="day_out_of_range"
            )
        key = (item.model, item.variant, item.day, item.task)
        if key in seen:
            raise IngestRejected(
                f"same model, variant, day and task as items[{seen[key]}]",
                path=f"items[{i}]",
                code="duplicate_item",
            )
        seen[key] = i


@router.post(
    "/drift-metrics",
    auth=[TokenAuth(WRITE_KINDS)],
    response={200: BatchAccepted, **ERRORS},
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "Per-day production agreement of model variants with their reference.",
            "content": {"application/json": {"schema": openapi_body(DriftBatchIn)}},
        }
    },
)
def drift_metrics_post(request: TokenRequest) -> dict[str, Any]:
    payload = validated(DriftBatchIn, request_json(request))
    _check(payload)
    items = [AgreementInput(**item.model_dump()) for item in payload.items]
    try:
        result, _ = agreement_batch_ingest(
            team=request.auth.team,
            batch_id=payload.batch_id,
            items=items,
        )
    except AgreementRejected as exc:
        raise IngestRejected(exc.message, path=exc.path, code="unknown_variant") from None
    except IdempotencyKeyReused as exc:
        raise idempotency_key_reused(exc, field="batch_id") from None
    return result
