"""The v1 API endpoints (docs/api-contract.md), on django-ninja.

Why django-ninja rather than Django REST framework: pydantic v2 schemas give strict validation
with the failing field's path for free, ninja publishes the OpenAPI schema and browsable docs
(``/api/v1/docs``) from the same type hints, and it is much lighter than DRF for an API that
speaks only JSON. Endpoints stay thin: decode, check the schema, call one service or selector.

Ninja's own body parsing is not used for the writes: it turns every decoding problem into a
plain 400, while the contract needs 413 (too large), 415 (content type or encoding) and a path.
"""

# No ``from __future__ import annotations``: ninja reads the parameters' types at import, and
# through ``@paginate`` it evaluates them in another module, where string annotations do not resolve.

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from django.http.response import HttpResponseBase
from ninja import NinjaAPI, Path, Query
from ninja.errors import AuthenticationError
from ninja.pagination import paginate
from ninja.responses import Status
from pydantic import BaseModel

from accelboard.benchmarks.choices import Scenario

from . import selectors, services
from .auth import ReadRequest, Session, TokenAuth, TokenRequest, caller_scope
from .body import request_files, request_json, request_snappy, request_upload
from .choices import READ_KINDS, WRITE_KINDS
from .errors import docs_login_required, install, validated
from .pagination import PageNumbers
from .profile_schemas import ProfileOut
from .schemas import (
    BODY_COMPONENTS,
    AlertFilters,
    AlertOut,
    BatchAccepted,
    ErrorOut,
    InferenceBatchIn,
    PointFilters,
    PointOut,
    RemoteWriteAccepted,
    RunCreated,
    RunFilters,
    RunIn,
    RunOut,
    RunRef,
    RunsUploaded,
    SeriesFilters,
    SeriesOut,
    TelemetryAccepted,
    TelemetryBatchIn,
    openapi_body,
)


class AccelboardAPI(NinjaAPI):
    """The API, whose OpenAPI schema also holds the components of the hand-read request bodies."""

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(*args, **kwargs)
        schema.setdefault("components", {}).setdefault("schemas", {}).update(BODY_COMPONENTS)
        return schema


api = AccelboardAPI(
    title="accelboard API",
    version="1",
    description="Ingest of GPU telemetry, benchmark runs and serving metrics; reads of runs, series and alerts.",
    urls_namespace="api-v1",
    docs_url="/docs",
    # Public in development; in production the schema and the docs need a signed-in user unless
    # API_DOCS_PUBLIC=1 (they list every endpoint and field, which is no secret but no invitation).
    docs_decorator=None if settings.API_DOCS_PUBLIC else docs_login_required,
)
install(api)

WRITE_AUTH = [TokenAuth(WRITE_KINDS)]
READ_AUTH = [TokenAuth(READ_KINDS), Session()]
ERRORS: dict[int, Any] = {code: ErrorOut for code in (400, 401, 403, 404, 409, 413, 415, 422)}


def _body_schema(model: type[BaseModel], description: str) -> dict[str, Any]:
    schema = openapi_body(model)
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
    response={200: TelemetryAccepted, **ERRORS},
    openapi_extra=_body_schema(
        TelemetryBatchIn,
        "A batch of up to 10,000 GPU samples from one host, and up to 10,000 attribution intervals; "
        "see docs/api-contract.md and docs/attribution.md (gzip accepted).",
    ),
    tags=["ingest"],
    exclude_none=True,
)
def telemetry_post(request: TokenRequest) -> dict[str, Any]:
    return services.telemetry_batch_ingest(team=request.auth.team, payload=request_json(request))


def telemetry_direct(request: HttpRequest) -> HttpResponseBase:
    """``telemetry_post`` without URL resolution and ninja's dispatch (``api/lean.py``): the same
    token check (``WRITE_AUTH``), body, service and rendering of the answer through the response
    schema, and every error through the API's own handlers (``api.on_exception``: the same shapes,
    and the 500 that logs and sends ``got_request_exception``)."""
    try:
        token = WRITE_AUTH[0](request)
    except Exception as exc:  # ninja hands an authenticator's error to the API's handlers too
        return api.on_exception(request, exc)
    if not token:
        return api.on_exception(request, AuthenticationError())
    request.auth = token  # type: ignore[attr-defined]  # as ninja sets it
    try:
        result = services.telemetry_batch_ingest(team=token.team, payload=request_json(request))
        answer = TelemetryAccepted.model_validate(result).model_dump(exclude_none=True)
    except Exception as exc:  # as ninja's ``Operation.run``
        return api.on_exception(request, exc)
    return api.create_response(request, answer, status=200)


@api.post(
    "/prometheus/write",
    auth=WRITE_AUTH,
    response={200: RemoteWriteAccepted, **ERRORS},
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "Prometheus remote-write 1.0: a snappy-compressed protobuf WriteRequest "
            "(Content-Encoding: snappy; Prometheus labels it application/x-protobuf, and the "
            "Content-Type is not read); dcgm-exporter's series become telemetry (docs/api.md).",
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
    tags=["ingest"],
)
def prometheus_write(request: TokenRequest) -> dict[str, Any]:
    body = request_snappy(request, max_bytes=settings.PROMETHEUS_WRITE_MAX_BYTES)
    return services.prometheus_write_ingest(team=request.auth.team, body=body)


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
        "scenario": {
            "type": "string",
            "enum": list(Scenario.values),
            "description": "How the load was offered, where the files do not say (default: unstated)",
        },
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
                "application/json": {"schema": openapi_body(RunIn)},
                "multipart/form-data": {"schema": _UPLOAD_FORM},
            },
        }
    },
    tags=["ingest"],
)
def run_post(request: TokenRequest) -> Status[dict[str, Any]]:
    team = request.auth.team
    if request.content_type == "multipart/form-data":
        files, fields = request_upload(request)
        # The CLI says who it is, so that the run's provenance shows "CLI" rather than "API".
        via = "cli" if request.headers.get("User-Agent", "").startswith("accelboard-upload/") else "api"
        profiles = [(upload.name or "profile", upload) for upload in request.FILES.getlist("profile")]
        result, duplicate = services.run_upload(
            team=team, files=files, fields=fields, uploaded_via=via, profiles=profiles
        )
        return Status(200 if duplicate else 201, result)
    payload = validated(RunIn, request_json(request))
    result, duplicate = services.run_ingest(team=team, payload=payload.model_dump())
    return Status(200 if duplicate else 201, result)


@api.post(
    "/runs/{run_id}/profile",
    auth=WRITE_AUTH,
    response={201: dict[str, Any], **ERRORS},
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "A run's profile: PyTorch profiler traces (one per rank), an Nsight Systems "
            "SQLite export or nsys stats CSVs, as multipart/form-data 'profile' parts. A trace from "
            "other hardware than the run's is attached with a warning (the answer's 'warnings'); with "
            "a 'strict' field (or ?strict=1) of 1/true it is refused with a 422 naming both devices "
            "(code device_mismatch).",
            "content": {"multipart/form-data": {"schema": {"type": "object", "required": ["profile"]}}},
        }
    },
    tags=["ingest"],
)
def run_profile_post(request: TokenRequest, run_id: Path[RunRef]) -> Status[dict[str, Any]]:
    uploads = request_files(request, "profile")
    strict = (request.POST.get("strict") or request.GET.get("strict") or "").strip().lower()
    result = services.run_profile_upload(
        team=request.auth.team,
        run_id=run_id,
        files=[(upload.name or "profile", upload) for upload in uploads],
        strict=strict in ("1", "true", "yes", "on"),
    )
    return Status(201, result)


@api.post(
    "/inference-metrics",
    auth=WRITE_AUTH,
    response={200: BatchAccepted, **ERRORS},
    openapi_extra=_body_schema(InferenceBatchIn, "Serving metrics per interval, per model variant and host."),
    tags=["ingest"],
)
def inference_metrics_post(request: TokenRequest) -> dict[str, Any]:
    payload = validated(InferenceBatchIn, request_json(request))
    return services.inference_batch_ingest(team=request.auth.team, payload=payload.model_dump())


# --- Reads ------------------------------------------------------------------------------------
# Each read: the caller's scope (``auth.caller_scope``), a selector that reads through it, the
# filter schema's ``filter``, and ninja's pagination; the output schemas shape the rows.


@api.get("/runs", auth=READ_AUTH, response={200: list[RunOut], **ERRORS}, tags=["read"])
@paginate(PageNumbers)
def run_list(request: ReadRequest, filters: Query[RunFilters]) -> QuerySet[Any]:
    return filters.filter(selectors.run_list(scope=caller_scope(request)))


@api.get("/runs/{run_id}", auth=READ_AUTH, response={200: RunOut, **ERRORS}, tags=["read"])
def run_detail(request: ReadRequest, run_id: Path[RunRef]) -> Any:
    run = selectors.run_get_visible(scope=caller_scope(request), run_ref=run_id)
    if run is None:
        raise Http404(f"no run {run_id} in your teams")
    return run


@api.get("/runs/{run_id}/profile", auth=READ_AUTH, response={200: ProfileOut, **ERRORS}, tags=["read"])
def run_profile_get(request: ReadRequest, run_id: Path[RunRef]) -> Any:
    """A run's profile: the verdict (read with the run window's profiling counters where its host
    sent them), the counters, findings, warnings and the HTA-style analyses."""
    answer = selectors.run_profile_get(scope=caller_scope(request), run_ref=run_id)
    if answer is None:
        raise Http404(f"no profile of run {run_id} in your teams")
    return answer


@api.get("/series", auth=READ_AUTH, response={200: list[SeriesOut], **ERRORS}, tags=["read"])
@paginate(PageNumbers)
def series_list(request: ReadRequest, filters: Query[SeriesFilters]) -> QuerySet[Any]:
    return filters.filter(selectors.series_list(scope=caller_scope(request)))


@api.get(
    "/series/{series_id}/points", auth=READ_AUTH, response={200: list[PointOut], **ERRORS}, tags=["read"]
)
@paginate(PageNumbers)
def series_points(request: ReadRequest, series_id: int, filters: Query[PointFilters]) -> QuerySet[Any]:
    series = selectors.series_get_visible(scope=caller_scope(request), series_id=series_id)
    if series is None:
        raise Http404(f"no series {series_id} in your teams")
    return filters.filter(selectors.series_points(series=series))


@api.get("/alerts", auth=READ_AUTH, response={200: list[AlertOut], **ERRORS}, tags=["read"])
@paginate(PageNumbers)
def alert_list(request: ReadRequest, filters: Query[AlertFilters]) -> QuerySet[Any]:
    return filters.filter(selectors.alert_list(scope=caller_scope(request)))
