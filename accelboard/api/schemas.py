"""Request and response schemas of the v1 API.

Inputs are strict pydantic v2 models (``extra="forbid"``, no type coercion, no NaN): a wrong type
or an unknown field is a 422 naming its path. Telemetry samples are NOT modelled here (see
``accelboard.fleet.ingest_validation``): at 10,000 per batch a model per sample is too slow.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal
from uuid import UUID

from annotated_types import Ge, Gt, Le
from ninja import FilterLookup, FilterSchema, Schema
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    StringConstraints,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from accelboard.benchmarks.choices import Precision, Scenario
from accelboard.fleet.ingest_validation import IngestRejected, json_bounded, time_parse
from accelboard.importers.hostnames import hostname_problem
from accelboard.serving.choices import Engine

_INT32 = 2**31 - 1
_INT64 = 2**63 - 1


def _time(value: object) -> datetime:
    try:
        epoch = time_parse(value, path="")
    except IngestRejected as exc:
        raise PydanticCustomError(exc.code, exc.message) from None
    return datetime.fromtimestamp(epoch, UTC)


def _bounded(value: dict[str, Any]) -> dict[str, Any]:
    """Free-form JSON objects (options, context) are stored as jsonb: bounded in depth and size."""
    try:
        json_bounded(value, path="")
    except IngestRejected as exc:
        raise PydanticCustomError(exc.code, exc.message) from None
    return value


def _hostname(value: str) -> str:
    """Host names hold no control or format characters (``importers.hostnames``)."""
    problem = hostname_problem(value)
    if problem is not None:
        raise PydanticCustomError("invalid", problem)
    return value


Time = Annotated[datetime, BeforeValidator(_time)]
FreeObject = Annotated[dict[str, Any], AfterValidator(_bounded)]


def Length(max_length: int, min_length: int = 0) -> StringConstraints:  # noqa: N802 (reads like a type)
    """A string's bounds, for ``Annotated[str, Length(120, 1)]`` (an annotation mypy can read)."""
    return StringConstraints(min_length=min_length, max_length=max_length)


# The choices' values as Literal types (an enum in the schema, the value a plain str), made at
# import from the TextChoices; mypy, which cannot evaluate them, reads them as str.
if TYPE_CHECKING:
    PrecisionValue = str
    ScenarioValue = str
    EngineValue = str
else:
    PrecisionValue = Literal[tuple(Precision.values)]
    ScenarioValue = Literal[tuple(Scenario.values)]
    EngineValue = Literal[tuple(Engine.values)]

Count32 = Annotated[int, Ge(1), Le(_INT32)]
Count64 = Annotated[int, Ge(0), Le(_INT64)]
Latency = Annotated[float, Ge(0), Le(1e9)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


# --- POST /runs -------------------------------------------------------------------------------


class VariantIn(StrictModel):
    name: Annotated[str, Length(120, 1)]
    precision: PrecisionValue
    quantization_method: Annotated[str, Length(40)] = ""


class WorkloadIn(StrictModel):
    scenario: ScenarioValue = "unstated"  # a run that states no scenario is not claimed Offline
    batch_size: Count32 | None = None
    concurrency: Count32 | None = None
    input_length: Count32 | None = None
    output_length: Count32 | None = None
    framework: Annotated[str, Length(40)] = ""
    framework_version: Annotated[str, Length(40)] = ""
    options: FreeObject = Field(default_factory=dict)


class HardwareIn(StrictModel):
    accelerator: Annotated[str, Length(80)] = ""
    count: Annotated[int, Ge(1), Le(32_767)] = 1
    host: Annotated[str, Length(255), AfterValidator(_hostname)] = ""
    gpu_uuids: Annotated[list[Annotated[str, Length(96, 1)]], Field(max_length=1024)] = Field(
        default_factory=list
    )
    driver_version: Annotated[str, Length(40)] = ""
    cuda_version: Annotated[str, Length(20)] = ""


class ProvenanceIn(StrictModel):
    git_commit: Annotated[str, Length(64)] = ""
    branch: Annotated[str, Length(200)] = ""
    ci_url: Annotated[str, StringConstraints(max_length=500, pattern=r"^(https?://\S+)?$")] = ""
    source_format: Annotated[str, Length(40, 1)] = "accelboard"


class MetricIn(StrictModel):
    name: Annotated[str, StringConstraints(min_length=1, max_length=60, pattern=r"^[A-Za-z0-9_.:/%-]+$")]
    value: Annotated[float, Ge(-1e300), Le(1e300)]
    unit: Annotated[str, Length(16, 1)]
    direction: Literal["higher", "lower"] | None = None
    samples: Annotated[list[float], Field(max_length=100_000)] = Field(default_factory=list)


class RunIn(StrictModel):
    """One benchmark run (docs/api-contract.md); result files come as multipart instead."""

    run_id: Annotated[UUID, Field(strict=False)]
    model: Annotated[str, Length(120, 1)]
    variant: VariantIn
    workload: WorkloadIn = Field(default_factory=WorkloadIn)
    hardware: HardwareIn = Field(default_factory=HardwareIn)
    provenance: ProvenanceIn = Field(default_factory=ProvenanceIn)
    started_at: Time
    finished_at: Time | None = None
    metrics: Annotated[list[MetricIn], Field(min_length=1, max_length=500)]
    context: FreeObject = Field(default_factory=dict)

    @field_validator("finished_at")
    @classmethod
    def _finished_after_start(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        started = info.data.get("started_at")
        if value is not None and started is not None and value < started:
            raise PydanticCustomError("finished_before_start", "is before started_at")
        return value


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
    model: str = Field(description="The catalogue's model the files' name resolved to")
    model_name: str = Field(description="The model's name as the files (or the uploader) gave it")
    model_match: str = Field(description="How it resolved: exact, alias, user (the uploader's choice) or new")
    variant: str
    accelerator: str | None
    accelerator_name: str = Field(description="The accelerator's name as the files (or the uploader) gave it")
    accelerator_match: str = Field(description="How it resolved: exact, alias or user; empty without one")
    accelerator_count: int
    warnings: list[str]
    metrics: list[MetricCompareOut]
    profile_url: str | None = Field(None, description="The run's Profile tab, when a profile came with it")
    profile_warnings: list[str] | None = Field(
        None,
        description="What to read with care in the profile sent with it (first: a trace from other hardware "
        "than the run's; the 'strict' field refuses such a trace instead)",
    )


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
    model: Annotated[str, Length(120, 1)]
    variant: Annotated[str, Length(120, 1)]
    engine: EngineValue = "vllm"
    accelerator_uuids: Annotated[list[Annotated[str, Length(96, 1)]], Field(max_length=64)] = Field(
        default_factory=list
    )
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
        dict[Annotated[str, Length(60, 1)], Annotated[list[Bucket], Field(max_length=256)]],
        Field(max_length=32),
    ] = Field(default_factory=dict)
    # The deployment's workload labels, e.g. {"track": "canary"} (canary comparisons select by them).
    labels: Annotated[
        dict[Annotated[str, Length(63, 1)], Annotated[str, Length(63)]], Field(max_length=16)
    ] = Field(default_factory=dict)


class InferenceBatchIn(StrictModel):
    batch_id: Annotated[str, Length(64, 1)]
    host: Annotated[str, Length(255, 1), AfterValidator(_hostname)]
    intervals: Annotated[list[IntervalIn], Field(max_length=10_000)]


class BatchAccepted(BaseModel):
    batch_id: str
    accepted: int
    duplicate: bool


class RemoteWriteAccepted(BaseModel):
    """A Prometheus remote-write request's answer (Prometheus reads only the status)."""

    series: int = Field(description="Time series in the request")
    samples: int = Field(description="Samples of mapped metrics read (stale markers excluded)")
    stored: int = Field(description="Telemetry rows stored (0 for a request stored before)")
    duplicate_samples: int = Field(
        0, description="Samples whose fields an earlier request stored already, skipped"
    )
    duplicate: bool
    unknown: int = Field(description="Samples of metrics not mapped, ignored")
    refused: int = Field(
        0,
        description="Samples of series refused for their host label (a control or format character), "
        "counted with the unknown metrics",
    )


class TelemetryAccepted(BatchAccepted):
    """A telemetry batch's answer; the attribution counts only for a batch that carries some."""

    duplicate_samples: int | None = Field(
        None,
        description="Samples at a GPU-instant already stored (sent before under another batch_id), "
        "skipped; not in accepted",
    )
    attribution: int | None = Field(None, description="Attribution intervals stored")
    attribution_duplicates: int | None = Field(
        None, description="Attribution intervals identical to stored ones, skipped"
    )


class ErrorBody(BaseModel):
    code: str
    message: str
    path: str


class ErrorOut(BaseModel):
    error: ErrorBody


# --- POST /telemetry (documentation only) ---------------------------------------------------
# The telemetry endpoint validates by hand, column by column (``fleet.ingest_validation``), because a
# model per sample is too slow at 10,000 samples; these models only describe that body in the
# OpenAPI schema, with the same fields and bounds.


class TelemetryHostIn(StrictModel):
    hostname: Annotated[str, Length(255, 1), AfterValidator(_hostname)]
    agent_version: Annotated[str, Length(20)] | None = None
    driver_version: Annotated[str, Length(40)] | None = None
    cuda_version: Annotated[str, Length(20)] | None = None
    simulated: bool | None = None
    facts: dict[str, Any] | None = Field(
        None,
        description="Free-form facts (region, instance_type, provider, ...): at most 32 levels and 64 KiB",
    )


class TelemetryAcceleratorIn(StrictModel):
    uuid: Annotated[str, Length(96, 1)]
    index: Annotated[int, Ge(0), Le(32_767)] | None = None
    name: Annotated[str, Length(120)] | None = None
    serial: Annotated[str, Length(64)] | None = None
    driver_version: Annotated[str, Length(40)] | None = None
    parent_uuid: Annotated[str, Length(96)] | None = Field(
        None, description="The physical GPU of a MIG instance"
    )
    memory_bytes: Count64 | None = None
    power_limit_w: Annotated[float, Ge(0), Le(100_000)] | None = None
    mig_mode: bool | None = None
    compute_slices: Annotated[int, Ge(1), Le(64)] | None = Field(
        None, description="A MIG instance's GPU slices (1g.10gb = 1); a GPU's total (7 on A100 and H100)"
    )
    unsupported: list[Annotated[str, Length(64)]] | None = None


_Fraction = Annotated[float, Ge(0), Le(100)]
_Clock = Annotated[float, Ge(0), Le(100_000)]
# DCGM's profiling ratios x 100; above 100 for some MIG instances (NVIDIA/DCGM#152).
_Profiling = Annotated[float, Ge(0), Le(1_000)]


class TelemetrySampleIn(StrictModel):
    time: float | datetime = Field(
        description="Unix epoch seconds, or RFC 3339 with a timezone; from 2000-01-01 to 5 minutes ahead"
    )
    gpu: Annotated[str, Length(96, 1)] = Field(
        description="The GPU's UUID, as in accelerators[] or registered earlier"
    )
    power_w: Annotated[float, Ge(0), Le(100_000)] | None = None
    energy_mj: Count64 | None = None
    gpu_util: _Fraction | None = None
    mem_util: _Fraction | None = None
    mem_used_bytes: Count64 | None = None
    mem_total_bytes: Count64 | None = None
    sm_clock_mhz: _Clock | None = None
    mem_clock_mhz: _Clock | None = None
    temperature_c: Annotated[float, Ge(-273.15), Le(1_000)] | None = None
    throttle_reasons: Count64 | None = None
    ecc_errors: Count64 | None = None
    xid_errors: Annotated[int, Ge(0), Le(_INT32)] | None = None
    mem_free_bytes: Count64 | None = Field(
        None, description="Framebuffer free (with used and reserved: the total)"
    )
    mem_reserved_bytes: Count64 | None = Field(None, description="Framebuffer reserved by the driver")
    gr_engine_active: _Profiling | None = Field(
        None, description="DCGM profiling: % of time the graphics engine was active"
    )
    sm_active: _Profiling | None = Field(
        None, description="DCGM profiling: % of cycles an SM had a warp assigned"
    )
    sm_occupancy: _Profiling | None = Field(
        None, description="DCGM profiling: % of an SM's warp slots resident"
    )
    tensor_active: _Profiling | None = Field(
        None, description="DCGM profiling: % of cycles the tensor pipe was active"
    )
    dram_active: _Profiling | None = Field(
        None, description="DCGM profiling: % of cycles device memory was busy"
    )
    pcie_replay_errors: Count64 | None = Field(None, description="PCIe replays since the driver loaded")
    remapped_rows_correctable: Count64 | None = Field(
        None, description="DRAM rows remapped for correctable errors"
    )
    remapped_rows_uncorrectable: Count64 | None = Field(
        None, description="DRAM rows remapped for uncorrectable errors"
    )


# Names, ids and labels of workloads hold no control characters (docs/attribution.md).
_PLAIN = r"^[^\x00-\x1f\x7f-\x9f]*$"


def _Plain(max_length: int, min_length: int = 0) -> StringConstraints:  # noqa: N802 (reads like a type)
    return StringConstraints(min_length=min_length, max_length=max_length, pattern=_PLAIN)


class GpuWorkloadIn(StrictModel):
    """What held the device: a Kubernetes pod, a Slurm job or a process (docs/attribution.md)."""

    kind: Literal["pod", "slurm-job", "process"]
    uid: Annotated[str, _Plain(253, 1)] = Field(
        description='Pod UID, Slurm job id, or "<pid>@<start time>" for a process'
    )
    namespace: Annotated[str, _Plain(253)] | None = None
    name: Annotated[str, _Plain(253)] | None = None
    container: Annotated[str, _Plain(253)] | None = None
    labels: (
        Annotated[dict[Annotated[str, _Plain(63, 1)], Annotated[str, _Plain(256)]], Field(max_length=64)]
        | None
    ) = None
    user: Annotated[str, _Plain(253)] | None = None
    account: Annotated[str, _Plain(253)] | None = None
    partition: Annotated[str, _Plain(253)] | None = None


class AttributionIntervalIn(StrictModel):
    """One workload's hold on one GPU or MIG instance of the host over [start, end)."""

    gpu: Annotated[str, _Plain(96, 1)] = Field(description="A GPU or MIG instance UUID of this host")
    start: float | datetime = Field(description="As samples' times")
    end: float | datetime = Field(description="After start, at most 24 hours later")
    workload: GpuWorkloadIn
    share: Annotated[float, Gt(0), Le(1)] = Field(description="The fraction of the device it held")
    basis: Literal["exclusive", "measured", "even"]
    memory_bytes: Count64 | None = None
    sm_util: _Fraction | None = Field(None, description="Its measured SM utilisation, %")


class TelemetryBatchIn(StrictModel):
    """A batch of GPU samples from one host (docs/api-contract.md), and who held each GPU when
    (docs/attribution.md)."""

    batch_id: Annotated[str, Length(128, 1)]
    host: TelemetryHostIn
    accelerators: Annotated[list[TelemetryAcceleratorIn], Field(max_length=1_024)] | None = None
    samples: Annotated[list[TelemetrySampleIn], Field(max_length=10_000)] | None = None
    attribution: Annotated[list[AttributionIntervalIn], Field(max_length=10_000)] | None = Field(
        None,
        description="Intervals of workloads holding the host's GPUs; per device no workload overlaps "
        "itself and the shares at one instant add up to at most 1 (docs/attribution.md)",
    )


# Request bodies are read by hand (``body.request_json``) and documented with ``openapi_extra``;
# their nested models go to the schema's components, where the ``$ref``s point.
BODY_COMPONENTS: dict[str, Any] = {}


def openapi_body(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema for a request body, its nested models moved to the components."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    BODY_COMPONENTS.update(schema.pop("$defs", {}))
    return schema


# --- Reads ------------------------------------------------------------------------------------


def _blank_is_none(value: object) -> object:
    """``?model=`` asks for nothing: an empty query parameter filters nothing."""
    return None if value == "" else value


def _no_nul(value: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL: a filter with one is the caller's mistake, not a 500."""
    if value is not None and "\x00" in value:
        raise PydanticCustomError("invalid", "text may not contain the NUL character")
    return value


# An RFC 3339 time as the read filters take it, with offsets no wider than ±14:00 (a wider one is
# a typo); the schema publishes the same pattern, so whatever it allows the API accepts.
MOMENT_PATTERN = (
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-](?:0\d|1[0-3]):[0-5]\d|[+-]14:00)$"
)
_MOMENT = re.compile(MOMENT_PATTERN)
NO_NUL_PATTERN = "^[^\\x00]*$"
_BAD_MOMENT = "must be an RFC 3339 time with its offset, e.g. 2026-03-01T12:00:00Z"


def _moment(value: object) -> datetime | None:
    """``since``/``until``: an RFC 3339 time (a leap second, ``:60``, is the next second)."""
    if value is None:
        return None
    if not isinstance(value, str) or not _MOMENT.match(value):
        raise PydanticCustomError("invalid_time", _BAD_MOMENT)
    leap = value[17:19] == "60"
    text = value[:17] + "59" + value[19:] if leap else value
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    except ValueError:
        raise PydanticCustomError("invalid_time", _BAD_MOMENT) from None
    return moment + timedelta(seconds=1) if leap else moment


_Text = Annotated[
    str | None,
    BeforeValidator(_blank_is_none),
    AfterValidator(_no_nul),
    Field(json_schema_extra={"pattern": NO_NUL_PATTERN}),
]
_Moment = Annotated[
    datetime | None,
    PlainValidator(_moment, json_schema_input_type=str | None),
    Field(json_schema_extra={"format": "date-time", "pattern": MOMENT_PATTERN}),
]
_ACCELERATOR = ["accelerator_type__name__iexact", "accelerator_type__slug__iexact"]


class RunFilters(FilterSchema):
    model: Annotated[_Text, FilterLookup("workload__variant__model__name")] = None
    variant: Annotated[_Text, FilterLookup("workload__variant__name")] = None
    accelerator: Annotated[_Text, FilterLookup(_ACCELERATOR)] = Field(
        None, description="Accelerator type name or slug"
    )
    branch: Annotated[_Text, FilterLookup("branch")] = None
    since: Annotated[_Moment, FilterLookup("started_at__gte")] = Field(
        None, description="started_at >= since (RFC 3339)"
    )
    until: Annotated[_Moment, FilterLookup("started_at__lt")] = Field(
        None, description="started_at < until (RFC 3339)"
    )


class SeriesFilters(FilterSchema):
    model: Annotated[_Text, FilterLookup("workload__variant__model__name")] = None
    variant: Annotated[_Text, FilterLookup("workload__variant__name")] = None
    accelerator: Annotated[_Text, FilterLookup(_ACCELERATOR)] = None
    metric: Annotated[_Text, FilterLookup("metric")] = None


class PointFilters(FilterSchema):
    since: Annotated[_Moment, FilterLookup("measured_at__gte")] = None
    until: Annotated[_Moment, FilterLookup("measured_at__lt")] = None


class AlertFilters(FilterSchema):
    state: Annotated[_Text, FilterLookup("state")] = None
    kind: Annotated[_Text, FilterLookup("kind")] = None


RunRef = Annotated[
    str,
    StringConstraints(
        pattern=r"^(\d{1,18}|[0-9A-Fa-f]{8}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{12})$"
    ),
    Field(description="The run's client id (run_id, a UUID) or its number (id)"),
]


# Outputs are read from the model instances (ninja's ``from_attributes``): a dotted alias follows
# relations, a ``resolve_<field>`` builds what is not one attribute. The names are the contract's.


class MetricOut(Schema):
    name: str
    value: float
    unit: str
    direction: str
    samples: list[float]
    series_id: int


class RunOut(Schema):
    id: int
    run_id: str
    url: str
    team: str = Field(alias="team.slug")
    model: str = Field(alias="workload.variant.model.name")
    model_name: str = Field(description="The model's name as read; empty for runs before the catalogue")
    model_match: str = Field(description="exact, alias, user or new; empty for runs before the catalogue")
    variant: dict[str, str]
    workload: dict[str, Any]
    hardware: dict[str, Any]
    provenance: dict[str, str]
    started_at: datetime
    finished_at: datetime | None
    valid: bool
    metrics: list[MetricOut]
    context: dict[str, Any]

    @staticmethod
    def resolve_run_id(run: Any) -> str:
        return str(run.uuid)

    @staticmethod
    def resolve_url(run: Any) -> str:
        return f"/runs/{run.pk}/"

    @staticmethod
    def resolve_variant(run: Any) -> dict[str, str]:
        variant = run.workload.variant
        return {
            "name": variant.name,
            "precision": variant.precision,
            "quantization_method": variant.quantization_method,
        }

    @staticmethod
    def resolve_workload(run: Any) -> dict[str, Any]:
        w = run.workload
        return {
            "scenario": w.scenario,
            "batch_size": w.batch_size,
            "concurrency": w.concurrency,
            "input_length": w.input_length,
            "output_length": w.output_length,
            "framework": w.framework,
            "framework_version": w.framework_version,
            "options": w.options,
        }

    @staticmethod
    def resolve_hardware(run: Any) -> dict[str, Any]:
        return {
            "accelerator": run.accelerator_type.name if run.accelerator_type else None,
            "accelerator_name": run.accelerator_name,
            "accelerator_match": run.accelerator_match,
            "count": run.accelerator_count,
            "host": run.host.hostname if run.host else None,
            "driver_version": run.driver_version,
            "cuda_version": run.cuda_version,
        }

    @staticmethod
    def resolve_provenance(run: Any) -> dict[str, str]:
        return {
            "git_commit": run.git_commit,
            "branch": run.branch,
            "ci_url": run.ci_url,
            "source_format": run.source_format,
        }

    @staticmethod
    def resolve_metrics(run: Any) -> list[Any]:
        return list(run.metrics.all())  # prefetched in name order by the selector


class SeriesOut(Schema):
    id: int
    team: str = Field(alias="team.slug")
    metric: str
    unit: str
    direction: str
    model: str = Field(alias="workload.variant.model.name")
    variant: str = Field(alias="workload.variant.name")
    workload_id: int
    accelerator: str | None
    accelerator_count: int
    last_value: float | None
    last_run_at: datetime | None

    @staticmethod
    def resolve_accelerator(series: Any) -> str | None:
        return series.accelerator_type.name if series.accelerator_type else None


class PointOut(Schema):
    run: int
    run_id: str
    measured_at: datetime
    value: float
    samples: list[float]
    git_commit: str = Field(alias="run.git_commit")
    branch: str = Field(alias="run.branch")

    @staticmethod
    def resolve_run(point: Any) -> int:
        return int(point.run_id)

    @staticmethod
    def resolve_run_id(point: Any) -> str:
        return str(point.run.uuid)


class AlertMetricOut(Schema):
    """One metric a change moved (a change alert holds every metric of its configuration that
    moved at the same run; the alert's own figures are its headline metric's)."""

    series_id: int
    metric: str
    severity: str
    pct_change: float | None
    before_mean: float | None
    after_mean: float | None


class AlertOut(Schema):
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
    metrics: list[AlertMetricOut]

    @staticmethod
    def resolve_host(alert: Any) -> str | None:
        return alert.host.hostname if alert.host else None

    @staticmethod
    def resolve_metrics(alert: Any) -> list[dict[str, Any]]:
        return [
            {
                "series_id": m.series_id,
                "metric": m.series.metric,
                "severity": m.severity,
                "pct_change": m.pct_change,
                "before_mean": m.before_mean,
                "after_mean": m.after_mean,
            }
            for m in alert.metrics.all()
        ]
