"""Store what an importer read: a ``ParsedRun`` (accelboard.importers) becomes a ``BenchmarkRun``.

The upload page, ``POST /api/v1/runs`` (multipart) and through it ``accelboard upload`` all call
``run_import``; the upload page shows ``run_import_preview`` first. Both rest on one pure step,
``_plan``, so that the preview shows exactly what the import would store.

1. **Fill what the file lacks** from the uploader's ``overrides`` (``model``, ``precision``,
   ``accelerator``, ``count``, ``commit``, ``branch``, ``ci_url``, any importer context key):
   a value the file has is never replaced (a disagreement becomes a warning), a value taken from
   the uploader is marked ``user`` in ``field_sources``.
2. **Refuse rather than guess**: a run without a model, a precision or an accelerator (unless it
   states ``count=0``, a CPU run) raises ``ImportRejected`` naming the field; nothing is stored.
   Telemetry logs (nvidia-smi CSV) are not benchmark runs and are refused for now: telemetry
   enters through the agent and ``POST /api/v1/telemetry``.
3. **Accuracy results become metrics** ``accuracy:<task>:<metric>`` (the catalogue knows the
   prefix), unless the importer already added them.
4. **Idempotent**: on ``run_uuid`` when given; otherwise on the sha256 of the raw file and the
   team, plus a fingerprint of the run within the file (one file may hold several runs).
   The hash is kept in ``context["raw_sha256"]`` and the run's id is derived from it, so that two
   concurrent uploads of one file meet on the unique ``uuid`` and make one run.
5. **All or nothing**: the run, its series and metric values and the raw file are written in one
   transaction; the raw file is removed again when the transaction fails.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid as uuid_lib
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.utils import timezone

from accelboard.core.models import Team
from accelboard.fleet.models import AcceleratorType, Host
from accelboard.fleet.services import accelerator_type_match
from accelboard.importers import ContextError, ParsedRun, context_apply, normalise_context
from accelboard.importers.naming import variant_name

# The importers' own context keys (model=, precision=, count=, ...) and the run fields they fill:
# one vocabulary for ``accelboard parse --context`` and the uploader's overrides.
from .choices import Scenario, UploadSource
from .metrics import UNITS, accuracy_metric_name, metric_spec
from .models import BenchmarkRun
from .services import (
    MetricInput,
    WorkloadSpec,
    model_variant_get_or_create,
    run_record,
    workload_get_or_create,
)

# Formats whose files are GPU telemetry, not benchmark results.
TELEMETRY_FORMATS = frozenset({"nvidia-smi"})
# Provenance the uploader may state: override key -> run field.
PROVENANCE_KEYS = {"commit": "git_commit", "git_commit": "git_commit", "branch": "branch", "ci_url": "ci_url"}
# The keys an upload form or CLI offers for what a file most often lacks.
REQUIRED_FIELDS = ("model", "precision", "accelerator")
# uuid5 namespace of runs identified by their raw file's content (fixed forever: changing it
# would make a re-upload of an old file a second run).
_CONTENT_NAMESPACE = uuid_lib.UUID("5b0c5d43-8f7e-4f57-9a51-4b1d2a6f0c11")
# Column sizes of the models, checked here so that a long value is a clear rejection, not a 500.
_LIMITS = {
    "model": 120,
    "variant": 120,
    "quantization_method": 40,
    "framework": 40,
    "framework_version": 40,
    "driver_version": 40,
    "cuda_version": 20,
    "git_commit": 64,
    "branch": 200,
    "ci_url": 500,
    "metric": 60,
}


class ImportRejected(ValueError):
    """A run that cannot be stored as it stands; ``field`` names what to fix (an override key)."""

    def __init__(self, message: str, *, field: str = "") -> None:
        self.message = message
        self.field = field
        super().__init__(message)


@dataclass
class _Plan:
    """What would be stored for one parsed run; ``missing`` lists (field, message) to fix first."""

    parsed: ParsedRun
    scenario: str = "offline"
    count: int = 1
    started_at: datetime | None = None
    finished_at: datetime | None = None
    provenance: dict[str, str] = field(default_factory=dict)
    metrics: list[MetricInput] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)
    missing: list[tuple[str, str]] = field(default_factory=list)
    rejected: tuple[str, str] | None = None


# --- the pure part ----------------------------------------------------------------------------


def _aware(text: str | None) -> datetime | None:
    if not text:
        return None
    moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    # The importers warn when a file wrote local time without a zone; it is read as UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _jsonable(value: Any) -> Any:
    """A JSON round trip: jsonb takes only plain JSON, and PostgreSQL refuses the NUL character."""
    return json.loads(json.dumps(value, default=str).replace("\\u0000", ""))


def _apply_overrides(run: ParsedRun, overrides: dict[str, str] | None, provenance: dict[str, str]) -> None:
    """Fill the run's empty fields from the uploader; each bad value raises naming its key."""
    for raw_key, raw_value in (overrides or {}).items():
        key = str(raw_key).strip()
        value = "" if raw_value is None else str(raw_value).strip()
        if value == "":
            continue  # an empty form field states nothing
        if key in PROVENANCE_KEYS:
            target = PROVENANCE_KEYS[key]
            if not provenance.get(target):
                provenance[target] = value
                run.field_sources[f"provenance.{target}"] = "user"
            elif provenance[target] != value:
                run.warnings.append(
                    f"provenance.{target}: the file says {provenance[target]!r}, the uploader says {value!r}; "
                    "kept the file's value"
                )
            continue
        try:
            converted = normalise_context({key: value})[key]
        except ContextError as exc:
            raise ImportRejected(str(exc).removeprefix("context "), field=key) from None
        context_apply(run, {key: converted}, who="the uploader")


def _fingerprint(run: ParsedRun) -> str:
    """Which run of a file this is, from what it measured: not from the upload's name (the same
    bytes under another name are the same run) nor from what the uploader added."""
    payload = {
        "model": run.model if run.field_sources.get("model") != "user" else "",
        "metrics": [(m.name, m.value, m.raw_value) for m in run.metrics],
        "accuracy": [(a.task, a.metric, a.value) for a in run.accuracy],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _plan(parsed: ParsedRun, overrides: dict[str, str] | None) -> _Plan:
    run = copy.deepcopy(parsed)  # the caller's ParsedRun stays as the importer left it
    plan = _Plan(parsed=run)
    if run.source_format in TELEMETRY_FORMATS:
        plan.rejected = (
            "format",
            f"{run.source_file}: {run.source_format} logs are GPU telemetry, not benchmark runs; "
            "importing them as telemetry is not supported yet (the agent and POST /api/v1/telemetry take telemetry)",
        )
        return plan
    provenance = {"git_commit": "", "branch": "", "ci_url": ""}
    for key in ("git_commit", "branch", "ci_url"):
        if run.context.get(key):
            provenance[key] = str(run.context.pop(key))
            run.field_sources[f"provenance.{key}"] = f"file:{PurePosixPath(run.source_file).name}"
    _apply_overrides(run, overrides, provenance)
    plan.provenance = provenance

    # A precision stated by the uploader also names the variant, unless the file named it.
    name_source = run.field_sources.get("variant.name", "")
    if not run.variant.name or name_source.startswith("derived:"):
        derived = variant_name(run.variant.precision, run.variant.quantization_method)
        if derived:
            run.put("variant.name", derived, "derived:precision+quantization_method")

    if not run.model:
        plan.missing.append(("model", "the file does not name the model: state it (model=Llama-3.1-8B)"))
    if not run.variant.precision:
        plan.missing.append(
            ("precision", "the file does not give the precision: state it (precision=bf16, fp8, int4...)")
        )
    count = run.hardware.count
    if count is None:
        count = 1
        run.field_sources.setdefault("hardware.count", "default")
    plan.count = count
    if not run.hardware.accelerator and count != 0:
        plan.missing.append(
            (
                "accelerator",
                "the file does not name the accelerator: state it (accelerator=H100 SXM 80GB, count=8)",
            )
        )
    if count > 32_767:
        plan.missing.append(("count", f"accelerator count {count} is out of range"))

    scenario = run.workload.scenario or Scenario.OFFLINE.value
    if not run.workload.scenario:
        run.field_sources["workload.scenario"] = "default"
    if scenario not in Scenario.values:
        plan.missing.append(
            ("scenario", f"unknown scenario {scenario!r}; known: {', '.join(Scenario.values)}")
        )
    plan.scenario = scenario

    for name, value in (
        ("model", run.model),
        ("variant", run.variant.name),
        ("quantization_method", run.variant.quantization_method),
        ("framework", run.workload.framework),
        ("framework_version", run.workload.framework_version),
        ("driver_version", run.hardware.driver_version),
        ("cuda_version", run.hardware.cuda_version),
        *provenance.items(),
    ):
        if value and len(str(value)) > _LIMITS[name]:
            plan.missing.append(
                (name, f"{name} is longer than {_LIMITS[name]} characters: {str(value)[:40]!r}...")
            )
    if provenance["ci_url"] and not provenance["ci_url"].startswith(("http://", "https://")):
        plan.missing.append(("ci_url", f"ci_url must be an http(s) URL, not {provenance['ci_url']!r}"))

    try:
        plan.started_at = _aware(run.started_at)
        plan.finished_at = _aware(run.finished_at)
    except ValueError as exc:
        plan.missing.append(("started_at", f"unreadable time: {exc}"))
    if plan.started_at is None and plan.missing == []:
        plan.started_at = plan.finished_at or timezone.now()
        run.field_sources["started_at"] = "derived:finished_at" if plan.finished_at else "derived:upload-time"
        run.warnings.append("the file gives no start time; the run is dated by its upload")

    seen: set[str] = set()
    for metric in run.metrics:
        seen.add(metric.name)
        plan.metrics.append(
            MetricInput(
                name=metric.name,
                value=metric.value,
                unit=metric.unit,
                direction=metric.direction,
                samples=tuple(metric.samples),
                raw_value=metric.raw_value[:80],
                raw_unit=metric.raw_unit[:16],
                source=metric.source[:200],
            )
        )
    for result in run.accuracy:
        name = accuracy_metric_name(result.task, result.metric)
        if name in seen:
            continue
        if len(name) > _LIMITS["metric"]:
            # The lm-eval importer keeps such results out of its metrics too; they stay in context.
            continue
        seen.add(name)
        plan.metrics.append(
            MetricInput(
                name=name,
                value=result.value,
                unit="score",
                direction="higher" if result.higher_is_better else "lower",
                raw_value=str(result.value)[:80],
                raw_unit="score",
                source=result.source[:200],
            )
        )
    for metric in plan.metrics:
        if len(metric.name) > _LIMITS["metric"]:
            plan.missing.append(
                ("metrics", f"metric name {metric.name!r} is longer than {_LIMITS['metric']} characters")
            )
        elif metric.unit not in UNITS:
            plan.missing.append(("metrics", f"metric {metric.name!r} has unknown unit {metric.unit!r}"))
        elif metric.direction not in ("higher", "lower") and metric_spec(metric.name) is None:
            plan.missing.append(("metrics", f"metric {metric.name!r} has no direction"))
    if not plan.metrics:
        plan.missing.append(("metrics", f"{run.source_file}: no metric to store"))

    context = dict(run.context)
    if run.accuracy:
        context["accuracy"] = [asdict(result) for result in run.accuracy]
    for key in ("host", "cpu"):
        if getattr(run.hardware, key):
            context[f"hardware_{key}"] = getattr(run.hardware, key)
    if run.hardware.accelerator:
        context["accelerator_name"] = run.hardware.accelerator
    context["source_file"] = run.source_file
    if run.warnings:
        context["warnings"] = list(run.warnings)
    plan.context = context
    return plan


# --- reads the preview needs ------------------------------------------------------------------


def accelerator_type_resolve(*, name: str) -> AcceleratorType | None:
    """The accelerator type a file or an uploader names: by name, slug, then driver-name match."""
    name = name.strip()
    if not name:
        return None
    return (
        AcceleratorType.objects.filter(name__iexact=name).first()
        or AcceleratorType.objects.filter(slug__iexact=name).first()
        or accelerator_type_match(name=name)
    )


def _unknown_accelerator(name: str) -> str:
    known = (
        ", ".join(AcceleratorType.objects.order_by("name").values_list("name", flat=True)[:20]) or "none yet"
    )
    return f"unknown accelerator {name!r} (known: {known}); state a known one or ask an admin to add it"


def run_import_preview(parsed: ParsedRun, overrides: dict[str, str] | None = None) -> dict[str, Any]:
    """What ``run_import`` would store for this run, and what is missing, without writing.

    ``ok`` is True when nothing is missing; ``missing`` is a list of ``{"field", "message"}`` whose
    fields are the override keys to fill (``model``, ``precision``, ``accelerator``...)."""
    try:
        plan = _plan(parsed, overrides)
    except ImportRejected as exc:
        return {
            "ok": False,
            "rejected": exc.message,
            "missing": [{"field": exc.field, "message": exc.message}],
            "source_format": parsed.source_format,
            "source_file": parsed.source_file,
            "metrics": [],
            "warnings": list(parsed.warnings),
        }
    run = plan.parsed
    if plan.rejected is not None:
        return {
            "ok": False,
            "rejected": plan.rejected[1],
            "missing": [{"field": plan.rejected[0], "message": plan.rejected[1]}],
            "source_format": run.source_format,
            "source_file": run.source_file,
            "metrics": [],
            "warnings": list(run.warnings),
        }
    missing = [{"field": name, "message": message} for name, message in plan.missing]
    accelerator_type = None
    if run.hardware.accelerator:
        accelerator_type = accelerator_type_resolve(name=run.hardware.accelerator)
        if accelerator_type is None:
            missing.append(
                {"field": "accelerator", "message": _unknown_accelerator(run.hardware.accelerator)}
            )
    return {
        "ok": not missing,
        "rejected": None,
        "missing": missing,
        "source_format": run.source_format,
        "source_file": run.source_file,
        "model": run.model,
        "variant": asdict(run.variant),
        "workload": {**asdict(run.workload), "scenario": plan.scenario},
        "hardware": {
            "accelerator": run.hardware.accelerator,
            "accelerator_type": accelerator_type.name if accelerator_type else None,
            "count": plan.count,
            "host": run.hardware.host,
            "driver_version": run.hardware.driver_version,
            "cuda_version": run.hardware.cuda_version,
        },
        "provenance": dict(plan.provenance),
        "started_at": plan.started_at.isoformat() if plan.started_at else None,
        "finished_at": plan.finished_at.isoformat() if plan.finished_at else None,
        "valid": run.valid,
        "metrics": [
            {
                "name": m.name,
                "value": m.value,
                "unit": m.unit,
                "direction": m.direction or (spec.direction if (spec := metric_spec(m.name)) else ""),
                "samples": len(m.samples),
                "source": m.source,
            }
            for m in plan.metrics
        ],
        "field_sources": dict(run.field_sources),
        "context": _jsonable(plan.context),
        "warnings": list(run.warnings),
    }


# --- the write --------------------------------------------------------------------------------


def run_import(
    *,
    team: Team,
    parsed: ParsedRun,
    raw_name: str,
    raw_bytes: bytes | None,
    uploaded_by: Any = None,
    uploaded_via: str,
    overrides: dict[str, str] | None = None,
    run_uuid: uuid_lib.UUID | str | None = None,
) -> tuple[BenchmarkRun, bool]:
    """Store one parsed run with its raw file; return (run, created).

    Raises ``ImportRejected`` (nothing stored) when a required field is missing, the accelerator
    is unknown, the format is telemetry, or ``run_uuid`` belongs to another team's run."""
    if uploaded_via not in UploadSource.values:
        raise ValueError(f"uploaded_via must be one of {', '.join(UploadSource.values)}")
    plan = _plan(parsed, overrides)
    if plan.rejected is not None:
        raise ImportRejected(plan.rejected[1], field=plan.rejected[0])
    if plan.missing:
        name, message = plan.missing[0]
        others = [other for other, _ in plan.missing[1:] if other != name]
        suffix = f" (also missing or invalid: {', '.join(dict.fromkeys(others))})" if others else ""
        raise ImportRejected(f"{PurePosixPath(parsed.source_file).name}: {message}{suffix}", field=name)
    accelerator_name = plan.parsed.hardware.accelerator
    accelerator_type = None
    if accelerator_name:
        accelerator_type = accelerator_type_resolve(name=accelerator_name)
        if accelerator_type is None:
            raise ImportRejected(_unknown_accelerator(accelerator_name), field="accelerator")

    content = (
        raw_bytes
        if raw_bytes is not None
        else json.dumps(parsed.to_dict(), sort_keys=True, default=str).encode()
    )
    sha = hashlib.sha256(content).hexdigest()
    part = _fingerprint(parsed)
    context = _jsonable({**plan.context, "raw_sha256": sha, "raw_part": part})

    if run_uuid is not None:
        try:
            run_uuid = uuid_lib.UUID(str(run_uuid))
        except ValueError:
            raise ImportRejected(f"run_id {run_uuid!r} is not a UUID", field="run_id") from None
    saved: list[str] = []
    try:
        return _store(
            team=team, plan=plan, accelerator_type=accelerator_type, run_uuid=run_uuid, sha=sha, part=part,
            context=context, raw_name=raw_name, raw_bytes=raw_bytes, uploaded_by=uploaded_by,
            uploaded_via=uploaded_via, saved=saved,
        )  # fmt: skip
    except BaseException:
        # The rows rolled back; the file written inside the transaction must go too. (A caller's
        # own outer transaction that rolls back later leaves the file behind: harmless, unreferenced.)
        for name in saved:
            BenchmarkRun._meta.get_field("raw_file").storage.delete(name)  # type: ignore[attr-defined]
        raise


@transaction.atomic
def _store(
    *,
    team: Team,
    plan: _Plan,
    accelerator_type: AcceleratorType | None,
    run_uuid: uuid_lib.UUID | None,
    sha: str,
    part: str,
    context: dict[str, Any],
    raw_name: str,
    raw_bytes: bytes | None,
    uploaded_by: Any,
    uploaded_via: str,
    saved: list[str],
) -> tuple[BenchmarkRun, bool]:
    run = plan.parsed
    if run_uuid is not None:
        existing = BenchmarkRun.objects.filter(uuid=run_uuid).first()
        if existing is not None and existing.team_id != team.pk:
            raise ImportRejected("this run_id is already used by another team's run", field="run_id")
    else:
        existing = BenchmarkRun.objects.filter(
            team=team, context__raw_sha256=sha, context__raw_part=part
        ).first()
        run_uuid = uuid_lib.uuid5(_CONTENT_NAMESPACE, f"{team.pk}:{sha}:{part}")
    if existing is not None:
        return existing, False

    variant = model_variant_get_or_create(
        model=run.model,
        variant=run.variant.name,
        precision=run.variant.precision,
        quantization_method=run.variant.quantization_method,
    )
    spec = WorkloadSpec(
        scenario=plan.scenario,
        batch_size=run.workload.batch_size,
        concurrency=run.workload.concurrency,
        input_length=run.workload.input_length,
        output_length=run.workload.output_length,
        framework=run.workload.framework,
        framework_version=run.workload.framework_version,
        options=_jsonable(run.workload.options),
    )
    workload = workload_get_or_create(team=team, variant=variant, spec=spec)
    host = Host.objects.filter(team=team, hostname=run.hardware.host).first() if run.hardware.host else None
    try:
        with transaction.atomic():
            stored, created = run_record(
                team=team,
                workload=workload,
                accelerator_type=accelerator_type,
                accelerator_count=plan.count,
                started_at=plan.started_at,  # type: ignore[arg-type]
                finished_at=plan.finished_at,
                metrics=plan.metrics,
                run_uuid=run_uuid,
                host=host,
                git_commit=plan.provenance["git_commit"],
                branch=plan.provenance["branch"],
                ci_url=plan.provenance["ci_url"],
                uploaded_by=uploaded_by,
                uploaded_via=uploaded_via,
                source_format=run.source_format,
                field_sources=_jsonable(run.field_sources),
                context=context,
                driver_version=run.hardware.driver_version,
                cuda_version=run.hardware.cuda_version,
                valid=run.valid,
            )
    except IntegrityError:
        # A concurrent upload of the same file (same derived id) committed first.
        stored = BenchmarkRun.objects.filter(uuid=run_uuid).first()
        if stored is None or stored.team_id != team.pk:
            raise ImportRejected("this run_id is already used by another run", field="run_id") from None
        return stored, False
    if not created:
        return stored, False
    if raw_bytes is not None:
        saved.append(_raw_file_save(run=stored, raw_name=raw_name, raw_bytes=raw_bytes))
    return stored, True


def _raw_file_save(*, run: BenchmarkRun, raw_name: str, raw_bytes: bytes) -> str:
    """Keep the uploaded file under MEDIA_ROOT (``runs/<uuid>/<name>``); return its storage name."""
    basename = PurePosixPath(raw_name.replace("\\", "/")).name or "upload"
    run.raw_file.save(basename, ContentFile(raw_bytes), save=False)
    run.raw_filename = raw_name[:255]
    BenchmarkRun.objects.filter(pk=run.pk).update(raw_file=run.raw_file.name, raw_filename=run.raw_filename)
    return run.raw_file.name
