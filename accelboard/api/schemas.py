"""Request and response schemas of the v1 API.

Inputs are strict pydantic v2 models (``extra="forbid"``, no type coercion, no NaN): a wrong type
or an unknown field is a 422 naming its path. Telemetry samples are NOT modelled here (see
``accelboard.fleet.ingest``): at 50,000 per batch a model per sample is too slow.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from annotated_types import Ge, Le
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    StringConstraints,
)
from pydantic_core import PydanticCustomError

from accelboard.benchmarks.choices import Precision, Scenario
from accelboard.fleet.ingest import IngestRejected, time_parse
from accelboard.serving.choices import Engine

_INT32 = 2**31 - 1
_INT64 = 2**63 - 1
# Free-form JSON objects (options, context) are stored as jsonb; a sane depth keeps them printable.
MAX_JSON_DEPTH = 32


def _time(value: object) -> datetime:
    try:
        epoch = time_parse(value, path="")
    except IngestRejected as exc:
        raise PydanticCustomError(exc.code, exc.message) from None
    return datetime.fromtimestamp(epoch, UTC)


def _depth(value: Any, level: int = 0) -> int:
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def _shallow(value: dict[str, Any]) -> dict[str, Any]:
    if _depth(value) > MAX_JSON_DEPTH:
        raise PydanticCustomError("too_deep", f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


Time = Annotated[datetime, BeforeValidator(_time)]
FreeObject = Annotated[dict[str, Any], AfterValidator(_shallow)]


def Text(max_length: int, min_length: int = 0) -> Any:  # noqa: N802 (reads like a type)
    return Annotated[str, StringConstraints(min_length=min_length, max_length=max_length)]


Count32 = Annotated[int, Ge(1), Le(_INT32)]
Count64 = Annotated[int, Ge(0), Le(_INT64)]
Latency = Annotated[float, Ge(0), Le(1e9)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


# --- POST /runs -------------------------------------------------------------------------------


class VariantIn(StrictModel):
    name: Text(120, 1)
    precision: Literal[tuple(Precision.values)]  # type: ignore[valid-type]
    quantization_method: Text(40) = ""


class WorkloadIn(StrictModel):
    scenario: Literal[tuple(Scenario.values)] = "offline"  # type: ignore[valid-type]
    batch_size: Count32 | None = None
    concurrency: Count32 | None = None
    input_length: Count32 | None = None
    output_length: Count32 | None = None
    framework: Text(40) = ""
    framework_version: Text(40) = ""
    options: FreeObject = Field(default_factory=dict)


class HardwareIn(StrictModel):
    accelerator: Text(80) = ""
    count: Annotated[int, Ge(1), Le(32_767)] = 1
    host: Text(255) = ""
    gpu_uuids: Annotated[list[Text(96, 1)], Field(max_length=1024)] = Field(default_factory=list)
    driver_version: Text(40) = ""
    cuda_version: Text(20) = ""


class ProvenanceIn(StrictModel):
    git_commit: Text(64) = ""
    branch: Text(200) = ""
    ci_url: Annotated[str, StringConstraints(max_length=500, pattern=r"^(https?://\S+)?$")] = ""
    source_format: Text(40, 1) = "accelboard"


class MetricIn(StrictModel):
    name: Annotated[str, StringConstraints(min_length=1, max_length=60, pattern=r"^[A-Za-z0-9_.:/%-]+$")]
    value: Annotated[float, Ge(-1e300), Le(1e300)]
    unit: Text(16, 1)
    direction: Literal["higher", "lower"] | None = None
    samples: Annotated[list[float], Field(max_length=100_000)] = Field(default_factory=list)


class RunIn(StrictModel):
    """One benchmark run (docs/api-contract.md); result files come as multipart instead."""

    run_id: Annotated[UUID, Field(strict=False)]
    model: Text(120, 1)
    variant: VariantIn
    workload: WorkloadIn = Field(default_factory=WorkloadIn)
    hardware: HardwareIn = Field(default_factory=HardwareIn)
    provenance: ProvenanceIn = Field(default_factory=ProvenanceIn)
    started_at: Time
    finished_at: Time | None = None
    metrics: Annotated[list[MetricIn], Field(min_length=1, max_length=500)]
    context: FreeObject = Field(default_factory=dict)


class RunCreated(BaseModel):
    run_id: str
    id: int
    url: str
    duplicate: bool


class MetricCompareOut(BaseModel):
    """One metric of an uploaded run against its series (``run_baseline_compare``)."""

    name: str
    value: float
    unit: str
    direction: str
    series_id: int
    baseline: float | None
    baseline_points: int
    delta_pct: float | None
    verdict: str = Field(description="regression, improvement, none, or new (no earlier result)")
    confidence: float | None
    pct_change: float | None
    reason: str


class UploadedRunOut(BaseModel):
    run_id: str
    id: int
    url: str
    duplicate: bool
    file: str
    source_format: str
    model: str
    variant: str
    accelerator: str | None
    accelerator_count: int
    warnings: list[str]
    metrics: list[MetricCompareOut]


class RunsUploaded(BaseModel):
    """The answer to a multipart upload: every run its files held, all stored or none."""

    runs: list[UploadedRunOut]
    duplicate: bool


# --- POST /inference-metrics ------------------------------------------------------------------


class PercentilesIn(StrictModel):
    p50: Latency | None = None
    p99: Latency | None = None


def _bucket_bound(value: object) -> float | str:
    """A bucket's upper bound in seconds, or "+Inf" (Prometheus' last bucket)."""
    if value == "+Inf":
        return "+Inf"
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise PydanticCustomError("float_type", 'a bucket bound is a non-negative number or "+Inf"')
    return float(value)


# A JSON array is a list; the pair is a tuple in lax mode with strict members ("1" is no count).
Bucket = Annotated[
    tuple[Annotated[float | str, PlainValidator(_bucket_bound)], Annotated[int, Strict(), Ge(0), Le(_INT64)]],
    Field(strict=False),
]


class IntervalIn(StrictModel):
    model: Text(120, 1)
    variant: Text(120, 1)
    engine: Literal[tuple(Engine.values)] = "vllm"  # type: ignore[valid-type]
    accelerator_uuids: Annotated[list[Text(96, 1)], Field(max_length=64)] = Field(default_factory=list)
    interval_start: Time
    interval_s: Annotated[int, Ge(1), Le(86_400)]
    requests: Count64 = 0
    errors: Count64 = 0
    prompt_tokens: Count64 = 0
    generated_tokens: Count64 = 0
    ttft_ms: PercentilesIn | None = None
    itl_ms: PercentilesIn | None = None
    e2e_ms: PercentilesIn | None = None
    histograms: Annotated[
        dict[Text(60, 1), Annotated[list[Bucket], Field(max_length=256)]], Field(max_length=32)
    ] = Field(default_factory=dict)


class InferenceBatchIn(StrictModel):
    batch_id: Text(64, 1)
    host: Text(255, 1)
    intervals: Annotated[list[IntervalIn], Field(max_length=10_000)]


class BatchAccepted(BaseModel):
    batch_id: str
    accepted: int
    duplicate: bool


class ErrorBody(BaseModel):
    code: str
    message: str
    path: str


class ErrorOut(BaseModel):
    error: ErrorBody


# --- Reads ------------------------------------------------------------------------------------


class RunFilters(BaseModel):
    model: str | None = None
    variant: str | None = None
    accelerator: str | None = Field(None, description="Accelerator type name or slug")
    branch: str | None = None
    since: datetime | None = Field(None, description="started_at >= since (RFC 3339)")
    until: datetime | None = Field(None, description="started_at < until (RFC 3339)")


class SeriesFilters(BaseModel):
    model: str | None = None
    variant: str | None = None
    accelerator: str | None = None
    metric: str | None = None


class PointFilters(BaseModel):
    since: datetime | None = None
    until: datetime | None = None


class AlertFilters(BaseModel):
    state: str | None = None
    kind: str | None = None


class MetricOut(BaseModel):
    name: str
    value: float
    unit: str
    direction: str
    samples: list[float]
    series_id: int


class RunOut(BaseModel):
    id: int
    run_id: str
    url: str
    team: str
    model: str
    variant: dict[str, str]
    workload: dict[str, Any]
    hardware: dict[str, Any]
    provenance: dict[str, str]
    started_at: datetime
    finished_at: datetime | None
    valid: bool
    metrics: list[MetricOut]
    context: dict[str, Any]


class SeriesOut(BaseModel):
    id: int
    team: str
    metric: str
    unit: str
    direction: str
    model: str
    variant: str
    workload_id: int
    accelerator: str | None
    accelerator_count: int
    last_value: float | None
    last_run_at: datetime | None


class PointOut(BaseModel):
    run: int
    run_id: str
    measured_at: datetime
    value: float
    samples: list[float]
    git_commit: str
    branch: str


class AlertOut(BaseModel):
    id: int
    kind: str
    severity: str
    state: str
    title: str
    series_id: int | None
    host: str | None
    opened_at: datetime
    resolved_at: datetime | None
    before_mean: float | None
    after_mean: float | None
    pct_change: float | None
    confidence: float | None
