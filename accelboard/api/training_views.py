"""``POST /api/v1/training-progress``: a training job's progress (steps, and optionally samples,
tokens and loss) as the job reports it (``accelboard_upload.training``: a few lines of Python, or
the PyTorch Lightning and Hugging Face Trainer callbacks).

Same rules as the other ingest endpoints: an ingest token of the team whose host runs the job, a
strict schema whose first error is a 422 naming the field, idempotent on the client's
``batch_id`` (a retry gets the first answer with ``duplicate: true``; the same id with another
body is a 409 ``idempotency_key_reused``), all or nothing. A job nobody reported is a 404; steps
that go backwards, zero-length intervals and GPUs the job does not hold are 422s naming the point
or GPU (``attribution.training_services``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from annotated_types import Ge, Le
from ninja import Router
from pydantic import Field

from accelboard.attribution.training import Point
from accelboard.attribution.training_services import training_progress_ingest
from accelboard.core.idempotency_services import IdempotencyKeyReused
from accelboard.fleet.choices import WorkloadKind
from accelboard.fleet.ingest_services import idempotency_key_reused
from accelboard.fleet.ingest_validation import EARLIEST, IngestRejected, utc_offset_check

from .auth import TokenAuth, TokenRequest
from .body import request_json
from .choices import WRITE_KINDS
from .errors import validated
from .schemas import BatchAccepted, ErrorOut, Length, StrictModel, openapi_body

router = Router(tags=["ingest"])
ERRORS: dict[int, Any] = {code: ErrorOut for code in (400, 401, 403, 404, 409, 413, 415, 422)}
# A report more than this far ahead of the server's clock is a client clock gone wrong.
MAX_AHEAD = timedelta(minutes=5)
BIG = 2**62


class TrainingAccepted(BatchAccepted):
    workload_id: int


class JobIn(StrictModel):
    kind: Annotated[str, Field(json_schema_extra={"enum": list(WorkloadKind.values)})]
    uid: Annotated[str, Length(320, 1)]


class PointIn(StrictModel):
    at: Annotated[
        datetime, Field(strict=False, description="When the step was reached, ISO 8601 with offset")
    ]
    step: Annotated[int, Ge(0), Le(BIG)]
    samples: Annotated[int, Ge(0), Le(BIG)] | None = None
    tokens: Annotated[int, Ge(0), Le(BIG)] | None = None
    loss: Annotated[float, Ge(-1e12), Le(1e12)] | None = None


class TrainingProgressIn(StrictModel):
    batch_id: Annotated[str, Length(64, 1)]
    job: JobIn
    gpus: Annotated[list[Annotated[str, Length(96, 1)]], Field(max_length=4096)] = []
    planned_steps: Annotated[int, Ge(1), Le(BIG)] | None = None
    points: Annotated[list[PointIn], Field(min_length=1, max_length=10_000)]


def _check(payload: TrainingProgressIn) -> None:
    """What the schema cannot say: a kind the fleet knows, times with an offset, in range."""
    if payload.job.kind not in WorkloadKind.values:
        raise IngestRejected(
            f"{payload.job.kind!r} is not one of {', '.join(WorkloadKind.values)}",
            path="job.kind",
            code="enum",
        )
    latest = datetime.now(UTC) + MAX_AHEAD
    for i, point in enumerate(payload.points):
        if point.at.tzinfo is None:
            raise IngestRejected(
                "a time needs its UTC offset (Z or +00:00)", path=f"points[{i}].at", code="invalid_time"
            )
        utc_offset_check(point.at, path=f"points[{i}].at")
        if point.at > latest or point.at < EARLIEST:
            raise IngestRejected(
                f"{point.at.isoformat()} is in the future or before 2000",
                path=f"points[{i}].at",
                code="time_out_of_range",
            )
    seen: dict[str, int] = {}
    for i, uuid in enumerate(payload.gpus):
        if uuid in seen:
            raise IngestRejected(
                f"listed twice (gpus[{seen[uuid]}])", path=f"gpus[{i}]", code="duplicate_item"
            )
        seen[uuid] = i


@router.post(
    "/training-progress",
    auth=[TokenAuth(WRITE_KINDS)],
    response={200: TrainingAccepted, **ERRORS},
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "A training job's progress points: steps, samples or tokens, loss.",
            "content": {"application/json": {"schema": openapi_body(TrainingProgressIn)}},
        }
    },
)
def training_progress_post(request: TokenRequest) -> dict[str, Any]:
    payload = validated(TrainingProgressIn, request_json(request))
    _check(payload)
    try:
        result, _ = training_progress_ingest(
            team=request.auth.team,
            batch_id=payload.batch_id,
            job_kind=payload.job.kind,
            job_uid=payload.job.uid,
            gpus=payload.gpus,
            planned_steps=payload.planned_steps,
            points=[
                Point(at=p.at.astimezone(UTC), step=p.step, samples=p.samples, tokens=p.tokens, loss=p.loss)
                for p in payload.points
            ],
        )
    except IdempotencyKeyReused as exc:
        raise idempotency_key_reused(exc, field="batch_id") from None
    return result
