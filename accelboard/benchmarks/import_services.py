"""Store what an importer read: a ``ParsedRun`` (accelboard.importers) becomes a ``BenchmarkRun``.

The upload page, ``POST /api/v1/runs`` (multipart) and through it ``accelboard upload`` all call
``run_import``; the upload page shows ``run_import_preview`` first. Both rest on one pure step,
``_plan``, so that the preview shows exactly what the import would store.

1. **The uploader's fields apply**: ``overrides`` (an upload form's or ``accelboard upload``'s
   ``model``, ``precision``, ``accelerator``, ``count``, ``commit``, ``branch``, ``ci_url``, any
   importer context key) replace what the file says, marked ``user`` in ``field_sources`` with a
   warning naming the file's value; ``context`` (``--context k=v``) only fills what the file lacks.
2. **One identity per model and accelerator**: the file's names are resolved against the
   catalogue (``catalogue``: built-in entries, the team's and shared aliases). The run keeps the
   name as read (``model_name``, ``accelerator_name``) and how it resolved (``model_match``,
   ``accelerator_match``: exact, alias, the uploader's choice, or new). A name close to several
   identities, or to one it is not known as (``Llama-2-70b-hf`` beside the chat Llama-2-70B), is
   never merged: the uploader picks (``model=``, ``accelerator=``) or creates (``create_model``,
   ``create_accelerator`` with its vendor, memory, form factor and board power); ``remember``
   keeps the file's name as the team's alias of what was picked. An unknown model name with
   nothing close becomes a new model (``new``); an unknown accelerator is refused.
   The precision or quantisation in a model's name (``-FP8``, ``-AWQ``) sets the variant, and
   is not part of the model's identity.
3. **Refuse rather than guess**: a run without a model, a precision or an accelerator (unless it
   states ``count=0``, a CPU run) raises ``ImportRejected`` naming the field; nothing is stored.
   Telemetry logs (nvidia-smi CSV) are not benchmark runs and are refused for now: telemetry
   enters through the agent and ``POST /api/v1/telemetry``.
4. **Accuracy results become metrics** ``accuracy:<task>:<metric>`` (the catalogue knows the
   prefix), unless the importer already added them.
5. **Idempotent**: on ``run_uuid`` when given; otherwise on the sha256 of the raw file and the
   team, plus a fingerprint of the run within the file (one file may hold several runs).
   The hash is kept in ``context["raw_sha256"]`` and the run's id is derived from it, so that two
   concurrent uploads of one file meet on the unique ``uuid`` and make one run.
6. **All or nothing**: the run, its series and metric values and the raw file are written in one
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
from accelboard.core.services import stored_file_track
from accelboard.fleet.catalogue_services import AcceleratorTypeRejected, accelerator_type_create
from accelboard.fleet.models import AcceleratorType, Host
from accelboard.importers import ContextError, ParsedRun, context_apply, normalise_context
from accelboard.importers.metrics import UNITS, accuracy_metric_name, metric_spec
from accelboard.importers.naming import hints_from_model_name, variant_name

# The importers' own context keys (model=, precision=, count=, ...) and the run fields they fill:
# one vocabulary for ``accelboard parse --context`` and the uploader's overrides.
from .catalogue import AMBIGUOUS, AcceleratorCatalogue, Match, ModelCatalogue, model_name_split
from .catalogue_selectors import Catalogues, accelerator_catalogue_for, catalogues_for, model_catalogue_for
from .catalogue_services import CatalogueRejected, accelerator_alias_set, model_alias_set
from .choices import IdentityMatch, Scenario, UploadSource
from .models import BenchmarkRun, Model
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
# Override keys that choose or create a catalogue identity rather than set a run field.
IDENTITY_KEYS = {
    "model": "model",
    "accelerator": "accelerator",
    "gpu": "accelerator",
    "create_model": "create_model",
    "create_accelerator": "create_accelerator",
    "accelerator_vendor": "accelerator_vendor",
    "accelerator_product": "accelerator_product",
    "accelerator_form_factor": "accelerator_form_factor",
    "accelerator_memory_gb": "accelerator_memory_gb",
    "accelerator_tdp_w": "accelerator_tdp_w",
    "remember": "remember",
}
_FLAGS = ("create_model", "create_accelerator", "remember")
_TRUE = {"1", "true", "yes", "on"}
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
    # The model and accelerator names as the file gave them, and the uploader's identity choices.
    model_raw: str = ""
    accelerator_raw: str = ""
    choices: dict[str, str] = field(default_factory=dict)
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


def _apply_overrides(
    run: ParsedRun, overrides: dict[str, str] | None, provenance: dict[str, str], *, replace: bool
) -> dict[str, str]:
    """Apply the uploader's values; each bad value raises naming its key. With ``replace`` they
    override the file's (an upload's fields), else they fill what it lacks (``--context``).
    Returns the identity choices among them (``model``, ``accelerator``, ``create_model``...)."""
    choices: dict[str, str] = {}
    for raw_key, raw_value in (overrides or {}).items():
        key = str(raw_key).strip()
        value = "" if raw_value is None else str(raw_value).strip()
        if value == "":
            continue  # an empty form field states nothing
        if replace and key in IDENTITY_KEYS:
            choices[IDENTITY_KEYS[key]] = value
            continue
        if key in PROVENANCE_KEYS:
            target = PROVENANCE_KEYS[key]
            current = provenance.get(target)
            if not current or (replace and current != value):
                if current:
                    run.warnings.append(
                        f"provenance.{target}: the file says {current!r}; the uploader's {value!r} applies"
                    )
                provenance[target] = value
                run.field_sources[f"provenance.{target}"] = "user"
            elif current != value:
                run.warnings.append(
                    f"provenance.{target}: the file says {current!r}, the uploader says {value!r}; "
                    "kept the file's value"
                )
            continue
        try:
            converted = normalise_context({key: value})[key]
        except ContextError as exc:
            raise ImportRejected(str(exc).removeprefix("context "), field=key) from None
        context_apply(run, {key: converted}, who="the uploader", replace=replace)
    for flag in _FLAGS:
        if flag in choices:
            if choices[flag].lower() not in _TRUE | {"0", "false", "no", "off"}:
                raise ImportRejected(f"{flag}: expected 1 or 0, got {choices[flag]!r}", field=flag)
            if choices[flag].lower() not in _TRUE:
                del choices[flag]
    return choices


def _same_name(a: str, b: str) -> bool:
    return a.strip().lower() == b.strip().lower()


def _fingerprint(run: ParsedRun) -> str:
    """Which run of a file this is, from what it measured: not from the upload's name (the same
    bytes under another name are the same run) nor from what the uploader added."""
    payload = {
        "model": run.model if run.field_sources.get("model") != "user" else "",
        "metrics": [(m.name, m.value, m.raw_value) for m in run.metrics],
        "accuracy": [(a.task, a.metric, a.value) for a in run.accuracy],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _plan(parsed: ParsedRun, overrides: dict[str, str] | None, fill: dict[str, str] | None = None) -> _Plan:
    run = copy.deepcopy(parsed)  # the caller's ParsedRun stays as the importer left it
    plan = _Plan(parsed=run, model_raw=run.model.strip(), accelerator_raw=run.hardware.accelerator.strip())
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
    plan.choices = _apply_overrides(run, overrides, provenance, replace=True)
    _apply_overrides(run, fill, provenance, replace=False)
    plan.provenance = provenance
    # A name stated in the context (the file had none) is the uploader's choice too.
    for key, path in (("model", "model"), ("accelerator", "hardware.accelerator")):
        if run.field_sources.get(path) == "user" and key not in plan.choices:
            plan.choices[key] = str(run.get(path))
        elif key in plan.choices:
            if run.get(path) and not _same_name(run.get(path), plan.choices[key]):
                run.warnings.append(
                    f"{path}: the file says {run.get(path)!r}; the uploader's {plan.choices[key]!r} applies"
                )
            run.field_sources[path] = "user"
    if plan.choices.get("model"):
        # "...-FP8" in the uploader's name also tells what the file does not (precision, method)
        precision, method = hints_from_model_name(plan.choices["model"])
        run.fill("variant.precision", precision, "model-name")
        run.fill("variant.quantization_method", method, "model-name")

    # A precision stated by the uploader also names the variant, unless the file named it.
    name_source = run.field_sources.get("variant.name", "")
    if not run.variant.name or name_source.startswith("derived:"):
        derived = variant_name(run.variant.precision, run.variant.quantization_method)
        if derived:
            run.put("variant.name", derived, "derived:precision+quantization_method")

    if not run.model and not plan.choices.get("model"):
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
    if not run.hardware.accelerator and not plan.choices.get("accelerator") and count != 0:
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
    for planned in plan.metrics:
        if len(planned.name) > _LIMITS["metric"]:
            plan.missing.append(
                ("metrics", f"metric name {planned.name!r} is longer than {_LIMITS['metric']} characters")
            )
        elif planned.unit not in UNITS:
            plan.missing.append(("metrics", f"metric {planned.name!r} has unknown unit {planned.unit!r}"))
        elif planned.direction not in ("higher", "lower") and metric_spec(planned.name) is None:
            plan.missing.append(("metrics", f"metric {planned.name!r} has no direction"))
    if not plan.metrics:
        plan.missing.append(("metrics", f"{run.source_file}: no metric to store"))

    context = dict(run.context)
    if run.accuracy:
        context["accuracy"] = [asdict(result) for result in run.accuracy]
    for key in ("host", "cpu"):
        if getattr(run.hardware, key):
            context[f"hardware_{key}"] = getattr(run.hardware, key)
    context["source_file"] = run.source_file
    if run.warnings:
        context["warnings"] = list(run.warnings)
    plan.context = context
    return plan


# --- identities ---------------------------------------------------------------------------------


@dataclass
class _Identity:
    """What a run's model and accelerator resolve to (``_identify``), or why they do not yet."""

    model_raw: str = ""
    model: str = ""  # the canonical model's name
    model_how: str = ""  # IdentityMatch, "" until resolved
    model_match: Match | None = None  # the catalogue's answer for the name looked up
    create_model: bool = False
    accelerator_raw: str = ""
    accelerator: str = ""  # the accelerator type's slug
    accelerator_how: str = ""
    accelerator_match: Match | None = None
    new_accelerator: dict[str, Any] | None = None
    remember: bool = False
    problems: list[tuple[str, str]] = field(default_factory=list)


def _names(catalogue: AcceleratorCatalogue, slugs: tuple[str, ...]) -> str:
    return ", ".join(catalogue.entries[slug].name for slug in slugs)


def _number(choices: dict[str, str], key: str, problems: list[tuple[str, str]]) -> float | None:
    text = choices.get(key, "")
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        problems.append((key, f"{key}: expected a number, got {text!r}"))
        return None


def _identify(plan: _Plan, models: ModelCatalogue, accelerators: AcceleratorCatalogue) -> _Identity:
    """Resolve the run's model and accelerator (pure, given the catalogues): see the module's
    docstring, point 2. Problems name the field the uploader must fill (``model``, ``accelerator``)."""
    choices = plan.choices
    identity = _Identity(
        model_raw=plan.model_raw or choices.get("model", ""),
        accelerator_raw=plan.accelerator_raw or choices.get("accelerator", ""),
        remember="remember" in choices,
    )
    problems = identity.problems

    chosen = choices.get("model", "")
    looked_up = chosen or plan.model_raw
    create = "create_model" in choices
    if looked_up:
        match = models.resolve(looked_up)
        identity.model_match = match
        if match.resolved:  # a name the catalogue knows is that model, "create" or not
            identity.model = match.target
            identity.model_how = IdentityMatch.USER if chosen else match.how
        elif create:
            base, _ = model_name_split(looked_up)
            identity.model, identity.model_how, identity.create_model = base, IdentityMatch.USER, True
            if existing := models.is_canonical(base):
                identity.model, identity.create_model = existing, False
        elif match.how == AMBIGUOUS:
            who = f"{looked_up!r}" if chosen else f"the file's model {looked_up!r}"
            problems.append(
                (
                    "model",
                    f"{who} is not in the catalogue, and it is close to {', '.join(match.candidates)}: "
                    "pick the model it is, or create it as a new model",
                )
            )
        elif chosen:
            problems.append(
                (
                    "model",
                    f"{chosen!r} is not in the catalogue: pick a catalogue model, or create it as a new one",
                )
            )
        else:  # nothing close: a model the catalogue does not know yet
            base, _ = model_name_split(looked_up)
            identity.model, identity.model_how, identity.create_model = base, IdentityMatch.NEW, True
        if identity.model and len(identity.model) > _LIMITS["model"]:
            problems.append(
                (
                    "model",
                    f"a model name is at most {_LIMITS['model']} characters: {identity.model[:40]!r}...",
                )
            )

    chosen = choices.get("accelerator", "")
    looked_up = chosen or plan.accelerator_raw
    if "create_accelerator" in choices:
        vendor = choices.get("accelerator_vendor", "")
        memory_gb = _number(choices, "accelerator_memory_gb", problems)
        tdp_w = _number(choices, "accelerator_tdp_w", problems)
        name = " ".join(looked_up.split())
        if not name:
            problems.append(("accelerator", "name the new accelerator type (accelerator=...)"))
        elif accelerators.resolve(name).how == "exact":
            problems.append(("accelerator", f"an accelerator type named {name!r} exists: pick it"))
        elif not vendor:
            problems.append(("accelerator_vendor", "a new accelerator type needs its vendor"))
        else:
            identity.accelerator_how = IdentityMatch.USER
            identity.new_accelerator = {
                "name": name,
                "vendor": vendor,
                "product": choices.get("accelerator_product", ""),
                "form_factor": choices.get("accelerator_form_factor", ""),
                "memory_bytes": round(memory_gb * 1024**3) if memory_gb else None,
                "board_power_w": tdp_w,
            }
    elif looked_up:
        match = accelerators.resolve(looked_up)
        identity.accelerator_match = match
        if match.resolved:
            identity.accelerator = match.target
            identity.accelerator_how = IdentityMatch.USER if chosen else match.how
        elif match.how == AMBIGUOUS:
            problems.append(
                (
                    "accelerator",
                    f"the accelerator {looked_up!r} could be {_names(accelerators, match.candidates)}: "
                    "pick the one it is, or add it as a new type",
                )
            )
        else:
            known = (
                ", ".join(sorted(entry.name for entry in accelerators.entries.values())[:20]) or "none yet"
            )
            problems.append(
                (
                    "accelerator",
                    f"unknown accelerator {looked_up!r} (known: {known}): pick a known type, or add it as a new one",
                )
            )
    return identity


def accelerator_type_resolve(*, name: str, team: Team | None = None) -> AcceleratorType | None:
    """The accelerator type a file or an uploader names, when the catalogue knows it without doubt."""
    match = accelerator_catalogue_for(team=team).resolve(name)
    return AcceleratorType.objects.filter(slug=match.target).first() if match.resolved else None


def _match_json(match: Match | None) -> dict[str, Any]:
    if match is None:
        return {"match": "", "alias": "", "source": "", "candidates": []}
    return {
        "match": match.how,
        "alias": match.alias,
        "source": match.source,
        "candidates": list(match.candidates),
    }


def _identity_json(identity: _Identity, accelerators: AcceleratorCatalogue) -> dict[str, Any]:
    base, suffix = model_name_split(identity.model_raw) if identity.model_raw else ("", "")
    accelerator_match = _match_json(identity.accelerator_match)
    accelerator_match["candidates"] = [
        {"slug": slug, "name": accelerators.entries[slug].name} for slug in accelerator_match["candidates"]
    ]
    new = identity.new_accelerator
    return {
        "model": {
            "raw": identity.model_raw,
            "base": base,
            "suffix": suffix,
            "name": identity.model,
            "how": str(identity.model_how),
            "create": identity.create_model,
            **_match_json(identity.model_match),
        },
        "accelerator": {
            "raw": identity.accelerator_raw,
            "slug": identity.accelerator,
            "name": (
                new["name"]
                if new
                else accelerators.entries[identity.accelerator].name
                if identity.accelerator
                else ""
            ),
            "how": str(identity.accelerator_how),
            "create": new is not None,
            **accelerator_match,
        },
    }


def run_import_preview(
    parsed: ParsedRun,
    overrides: dict[str, str] | None = None,
    *,
    team: Team | None = None,
    context: dict[str, str] | None = None,
    catalogues: Catalogues | None = None,
) -> dict[str, Any]:
    """What ``run_import`` would store for this run for ``team``, and what is missing, without
    writing. ``catalogues``: the team's, read once by a caller previewing many runs.

    ``ok`` is True when nothing is missing; ``missing`` is a list of ``{"field", "message"}`` whose
    fields are the override keys to fill (``model``, ``precision``, ``accelerator``...);
    ``identity`` says what the model and accelerator names resolve to and how."""
    try:
        plan = _plan(parsed, overrides, context)
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
    catalogues = catalogues or catalogues_for(team=team)
    accelerators = catalogues.accelerators
    identity = _identify(plan, catalogues.models, accelerators)
    missing = [{"field": name, "message": message} for name, message in plan.missing]
    missing += [{"field": name, "message": message} for name, message in identity.problems]
    described = _identity_json(identity, accelerators)
    return {
        "ok": not missing,
        "rejected": None,
        "missing": missing,
        "source_format": run.source_format,
        "source_file": run.source_file,
        "files": list(run.files),
        "model": plan.model_raw,
        "identity": described,
        "variant": asdict(run.variant),
        "workload": {**asdict(run.workload), "scenario": plan.scenario},
        "hardware": {
            "accelerator": plan.accelerator_raw,
            "accelerator_type": described["accelerator"]["name"] or None,
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
    context: dict[str, str] | None = None,
    run_uuid: uuid_lib.UUID | str | None = None,
) -> tuple[BenchmarkRun, bool]:
    """Store one parsed run with its raw file; return (run, created).

    ``overrides`` replace what the file says, ``context`` fills what it lacks. Raises
    ``ImportRejected`` (nothing stored) when a required field is missing, a name does not resolve
    without doubt (the field says which: ``model``, ``accelerator``), the format is telemetry, or
    ``run_uuid`` belongs to another team's run."""
    if uploaded_via not in UploadSource.values:
        raise ValueError(f"uploaded_via must be one of {', '.join(UploadSource.values)}")
    plan = _plan(parsed, overrides, context)
    if plan.rejected is not None:
        raise ImportRejected(plan.rejected[1], field=plan.rejected[0])
    identity = _identify(plan, model_catalogue_for(team=team), accelerator_catalogue_for(team=team))
    problems = plan.missing + identity.problems
    if problems:
        name, message = problems[0]
        others = [other for other, _ in problems[1:] if other != name]
        suffix = f" (also missing or invalid: {', '.join(dict.fromkeys(others))})" if others else ""
        raise ImportRejected(f"{PurePosixPath(parsed.source_file).name}: {message}{suffix}", field=name)

    content = (
        raw_bytes
        if raw_bytes is not None
        else json.dumps(parsed.to_dict(), sort_keys=True, default=str).encode()
    )
    sha = hashlib.sha256(content).hexdigest()
    part = _fingerprint(parsed)
    context_json = _jsonable({**plan.context, "raw_sha256": sha, "raw_part": part})

    if run_uuid is not None:
        try:
            run_uuid = uuid_lib.UUID(str(run_uuid))
        except ValueError:
            raise ImportRejected(f"run_id {run_uuid!r} is not a UUID", field="run_id") from None
    saved: list[str] = []
    try:
        return _store(
            team=team, plan=plan, identity=identity, run_uuid=run_uuid, sha=sha, part=part,
            context=context_json, raw_name=raw_name, raw_bytes=raw_bytes, uploaded_by=uploaded_by,
            uploaded_via=uploaded_via, saved=saved,
        )  # fmt: skip
    except BaseException:
        # The rows rolled back; the file written inside the transaction must go too. (A caller's
        # own outer transaction that rolls back later leaves the file behind: harmless, unreferenced.)
        for name in saved:
            BenchmarkRun._meta.get_field("raw_file").storage.delete(name)
        raise


def _accelerator_type_for(identity: _Identity) -> AcceleratorType | None:
    """The run's accelerator type: found by slug, or added as the uploader described it."""
    if identity.new_accelerator is not None:
        try:
            return accelerator_type_create(**identity.new_accelerator)
        except AcceleratorTypeRejected as exc:
            field_name = "accelerator" if exc.field == "name" else f"accelerator_{exc.field}"
            raise ImportRejected(exc.message, field=field_name) from None
    if not identity.accelerator:
        return None
    found = AcceleratorType.objects.filter(slug=identity.accelerator).first()
    if found is None:  # removed since the catalogue was read
        raise ImportRejected(
            f"accelerator type {identity.accelerator!r} no longer exists", field="accelerator"
        )
    return found


def _aliases_remember(
    *, team: Team, identity: _Identity, model: Model, accelerator_type: AcceleratorType | None, user: Any
) -> None:
    """Keep the file's names as the team's aliases of what the uploader picked (``remember``)."""
    if not identity.remember:
        return
    try:
        if identity.model_how == IdentityMatch.USER and identity.model_raw:
            base, _ = model_name_split(identity.model_raw)
            model_alias_set(team=team, name=base, model=model, created_by=user)
        if identity.accelerator_how == IdentityMatch.USER and identity.accelerator_raw and accelerator_type:
            accelerator_alias_set(
                team=team, name=identity.accelerator_raw, accelerator_type=accelerator_type, created_by=user
            )
    except CatalogueRejected as exc:
        raise ImportRejected(f"remember: {exc.message}", field="remember") from None


@transaction.atomic
def _store(
    *,
    team: Team,
    plan: _Plan,
    identity: _Identity,
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
            raise ImportRejected("this run_id cannot be used; generate a new UUID", field="run_id")
    else:
        existing = BenchmarkRun.objects.filter(
            team=team, context__raw_sha256=sha, context__raw_part=part
        ).first()
        run_uuid = uuid_lib.uuid5(_CONTENT_NAMESPACE, f"{team.pk}:{sha}:{part}")
    if existing is not None:
        return existing, False

    accelerator_type = _accelerator_type_for(identity)
    variant = model_variant_get_or_create(
        model=identity.model,
        variant=run.variant.name,
        precision=run.variant.precision,
        quantization_method=run.variant.quantization_method,
        team=team,
    )
    _aliases_remember(
        team=team, identity=identity, model=variant.model, accelerator_type=accelerator_type, user=uploaded_by
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
                identity={
                    "model_name": identity.model_raw,
                    "model_match": str(identity.model_how),
                    "accelerator_name": identity.accelerator_raw,
                    "accelerator_match": str(identity.accelerator_how),
                },
            )
    except IntegrityError:
        # A concurrent upload of the same file (same derived id) committed first.
        existing = BenchmarkRun.objects.filter(uuid=run_uuid).first()
        if existing is None or existing.team_id != team.pk:
            raise ImportRejected("this run_id cannot be used; generate a new UUID", field="run_id") from None
        return existing, False
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
    name = run.raw_file.name or ""
    stored_file_track(storage=run.raw_file.storage, name=name)  # deleted if an outer block rolls back
    BenchmarkRun.objects.filter(pk=run.pk).update(raw_file=name, raw_filename=run.raw_filename)
    return name
