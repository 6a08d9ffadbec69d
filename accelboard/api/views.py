"""The v1 API endpoints (docs/api-contract.md), on django-ninja.

Why django-ninja rather than Django REST framework: pydantic v2 schemas give strict validation
with the failing field's path for free, ninja publishes the OpenAPI schema and browsable docs
(``/api/v1/docs``) from the same type hints, and it is much lighter than DRF for an API that
speaks only JSON. Endpoints stay thin: decode, check the schema, call one service or selector.

Ninja's own body parsing is not used for the writes: it turns every decoding problem into a
plain 400, while the contract needs 413 (too large), 415 (content type or encoding) and a path.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from ninja import NinjaAPI, Query
from ninja.responses import Status
from pydantic import BaseModel, Field

from accelboard.benchmarks.models import Series

from . import selectors, services
from .auth import Session, TokenAuth, caller_team_ids
from .body import request_json, request_upload
from .choices import READ_KINDS, WRITE_KINDS
from .errors import install, validated
from .schemas import (
    AlertFilters,
    AlertOut,
    BatchAccepted,
    ErrorOut,
    InferenceBatchIn,
    PointFilters,
    PointOut,
    RunCreated,
    RunFilters,
    RunIn,
    RunOut,
    RunsUploaded,
    SeriesFilters,
    SeriesOut,
)

api = NinjaAPI(
    title="accelboard API",
    version="1",
    description="Ingest of GPU telemetry, benchmark runs and serving metrics; reads of runs, series and alerts.",
    urls_namespace="api-v1",
    docs_url="/docs",
)
install(api)

WRITE_AUTH = [TokenAuth(WRITE_KINDS)]
READ_AUTH = [TokenAuth(READ_KINDS), Session()]
ERRORS: dict[int, Any] = {code: ErrorOut for code in (400, 401, 403, 404, 409, 413, 415, 422)}


def _body_schema(model: type[BaseModel] | None, description: str) -> dict[str, Any]:
    schema = model.model_json_schema() if model else {"type": "object"}
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": {"schema": schema}},
        }
    }


# --- Writes -----------------------------------------------------------------------------------


@api.post(
    "/telemetry",
    auth=WRITE_AUTH,
    response={200: BatchAccepted, **ERRORS},
    openapi_extra=_body_schema(
        None, "A batch of up to 50,000 GPU samples from one host; see docs/api-contract.md (gzip accepted)."
    ),
    tags=["ingest"],
)
def telemetry_post(request: HttpRequest) -> dict[str, Any]:
    return services.telemetry_batch_ingest(team=request.auth.team, payload=request_json(request))  # type: ignore[attr-defined]


_UPLOAD_FORM = {
    "type": "object",
    "required": ["file"],
    "properties": {
        "file": {
            "type": "array",
            "items": {"type": "string", "format": "binary"},
            "description": "Result files as the tools write them, or archives of them (see accelboard parse)",
        },
        "commit": {"type": "string"},
        "branch": {"type": "string"},
        "ci_url": {"type": "string"},
        "context": {
            "type": "string",
            "description": "KEY=VALUE lines (model=, precision=, batch_size=, ...)",
        },
        "accelerator": {"type": "string", "description": "What the files lack: accelerator type name"},
        "count": {"type": "string"},
        "precision": {"type": "string"},
        "model": {"type": "string"},
        "format": {"type": "string", "description": "Skip detection and read as this format"},
        "run_id": {
            "type": "string",
            "format": "uuid",
            "description": "Client id when the files hold one run",
        },
    },
}


@api.post(
    "/runs",
    auth=WRITE_AUTH,
    response={200: RunCreated | RunsUploaded, 201: RunCreated | RunsUploaded, **ERRORS},
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "One run in accelboard's JSON schema, or result files as multipart/form-data.",
            "content": {
                "application/json": {"schema": RunIn.model_json_schema()},
                "multipart/form-data": {"schema": _UPLOAD_FORM},
            },
        }
    },
    tags=["ingest"],
)
def run_post(request: HttpRequest) -> Status[dict[str, Any]]:
    team = request.auth.team  # type: ignore[attr-defined]
    if request.content_type == "multipart/form-data":
        files, fields = request_upload(request)
        # The CLI says who it is, so that the run's provenance shows "CLI" rather than "API".
        via = "cli" if request.headers.get("User-Agent", "").startswith("accelboard-upload/") else "api"
        result, duplicate = services.run_upload(team=team, files=files, fields=fields, uploaded_via=via)
        return Status(200 if duplicate else 201, result)
    payload = validated(RunIn, request_json(request))
    result, duplicate = services.run_ingest(team=team, payload=payload.model_dump())
    return Status(200 if duplicate else 201, result)


@api.post(
    "/inference-metrics",
    auth=WRITE_AUTH,
    response={200: BatchAccepted, **ERRORS},
    openapi_extra=_body_schema(InferenceBatchIn, "Serving metrics per interval, per model variant and host."),
    tags=["ingest"],
)
def inference_metrics_post(request: HttpRequest) -> dict[str, Any]:
    payload = validated(InferenceBatchIn, request_json(request))
    return services.inference_batch_ingest(team=request.auth.team, payload=payload.model_dump())  # type: ignore[attr-defined]


# --- Reads ------------------------------------------------------------------------------------


def _aware(moment: datetime | None) -> datetime | None:
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


class PageIn(BaseModel):
    page: int = Field(1, ge=1, le=1_000_000)
    page_size: int = Field(50, ge=1, le=500)


class Page(BaseModel):
    count: int
    next: str | None
    previous: str | None


class RunPage(Page):
    items: list[RunOut]


class SeriesPage(Page):
    items: list[SeriesOut]


class PointPage(Page):
    items: list[PointOut]


class AlertPage(Page):
    items: list[AlertOut]


def _page(request: HttpRequest, queryset: QuerySet[Any], page: PageIn, shape: Any) -> dict[str, Any]:
    """One page and the links to its neighbours (the same query with another ``page``)."""
    count = queryset.count()
    offset = (page.page - 1) * page.page_size
    items = [shape(item) for item in queryset[offset : offset + page.page_size]]

    def link(number: int) -> str:
        query = request.GET.copy()
        query["page"] = str(number)
        return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")

    return {
        "count": count,
        "next": link(page.page + 1) if offset + page.page_size < count else None,
        "previous": link(page.page - 1) if page.page > 1 and count else None,
        "items": items,
    }


@api.get("/runs", auth=READ_AUTH, response={200: RunPage, **ERRORS}, tags=["read"])
def run_list(request: HttpRequest, filters: Query[RunFilters], page: Query[PageIn]) -> dict[str, Any]:
    runs = selectors.run_list(
        team_ids=caller_team_ids(request.auth),  # type: ignore[attr-defined]
        model=filters.model,
        variant=filters.variant,
        accelerator=filters.accelerator,
        branch=filters.branch,
        since=_aware(filters.since),
        until=_aware(filters.until),
    )
    return _page(request, runs, page, selectors.run_out)


@api.get("/runs/{run_id}", auth=READ_AUTH, response={200: RunOut, **ERRORS}, tags=["read"])
def run_detail(request: HttpRequest, run_id: int) -> dict[str, Any]:
    run = selectors.run_list(team_ids=caller_team_ids(request.auth)).filter(pk=run_id).first()  # type: ignore[attr-defined]
    if run is None:
        raise Http404(f"no run {run_id} in your teams")
    return selectors.run_out(run)


@api.get("/series", auth=READ_AUTH, response={200: SeriesPage, **ERRORS}, tags=["read"])
def series_list(request: HttpRequest, filters: Query[SeriesFilters], page: Query[PageIn]) -> dict[str, Any]:
    series = selectors.series_list(
        team_ids=caller_team_ids(request.auth),  # type: ignore[attr-defined]
        model=filters.model,
        variant=filters.variant,
        accelerator=filters.accelerator,
        metric=filters.metric,
    )
    return _page(request, series, page, selectors.series_out)


@api.get("/series/{series_id}/points", auth=READ_AUTH, response={200: PointPage, **ERRORS}, tags=["read"])
def series_points(
    request: HttpRequest, series_id: int, filters: Query[PointFilters], page: Query[PageIn]
) -> dict[str, Any]:
    series: Series | None = Series.objects.filter(
        pk=series_id,
        team_id__in=caller_team_ids(request.auth),  # type: ignore[attr-defined]
    ).first()
    if series is None:
        raise Http404(f"no series {series_id} in your teams")
    points = selectors.series_points(series=series, since=_aware(filters.since), until=_aware(filters.until))
    return _page(request, points, page, selectors.point_out)


@api.get("/alerts", auth=READ_AUTH, response={200: AlertPage, **ERRORS}, tags=["read"])
def alert_list(request: HttpRequest, filters: Query[AlertFilters], page: Query[PageIn]) -> dict[str, Any]:
    alerts = selectors.alert_list(
        team_ids=caller_team_ids(request.auth),
        state=filters.state,
        kind=filters.kind,  # type: ignore[attr-defined]
    )
    return _page(request, alerts, page, selectors.alert_out)
