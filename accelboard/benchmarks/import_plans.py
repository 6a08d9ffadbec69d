"""The half of an import that touches no rows: what one parsed run would become, before it is stored.

``import_plan`` applies the uploader's fields to a ``ParsedRun`` (``accelboard.importers``) and
checks what a run needs; ``import_identify`` resolves its model and accelerator names against the
catalogues it is given. ``import_services.run_import`` (the write) and
``import_selectors.run_import_preview`` (what the upload page shows) both rest on them, so the
preview shows exactly what the import would store; the rules are in ``import_services``' docstring.
Neither function reads or writes rows: the catalogues come in as arguments.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from django.utils import timezone

from accelboard.importers import ContextError, ParsedRun, context_apply, normalise_context
from accelboard.importers.metrics import UNITS, accuracy_metric_name, metric_spec
from accelboard.importers.naming import hints_from_model_name, variant_name

# The importers' own context keys (model=, precision=, count=, ...) and the run fields they fill:
# one vocabulary for ``accelboard parse --context`` and the uploader's overrides.
from .catalogue import AMBIGUOUS, AcceleratorCatalogue, Match, ModelCatalogue, model_name_split
from .choices import IdentityMatch, Scenario
from .services import MetricInput

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

    def __init__(self, message: str, *, field: str = "", code: str = "import_rejected") -> None:
        self.message = message
        self.field = field
        self.code = code
        super().__init__(message)


@dataclass
class ImportPlan:
    """What would be stored for one parsed run; ``missing`` lists (field, message) to fix first."""

    parsed: ParsedRun
    # The model and accelerator names as the file gave them, and the uploader's identity choices.
    model_raw: str = ""
    accelerator_raw: str = ""
    choices: dict[str, str] = field(default_factory=dict)
    scenario: str = Scenario.UNSTATED.value
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


def jsonable(value: Any) -> Any:
    """A JSON round trip: jsonb takes only plain JSON, and PostgreSQL refuses the NUL character
    and the non-finite numbers (vLLM writes ``"request_rate": Infinity``): those become text."""
    return _finite(json.loads(json.dumps(value, default=str).replace("\\u0000", "")))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "inf", "-inf", "nan"
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


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


def run_fingerprint(run: ParsedRun) -> str:
    """Which run of a file this is, from what it measured: not from the upload's name (the same
    bytes under another name are the same run), its folders (an MLPerf model folder is absent
    from loose files) nor what the uploader added; only a model name read from a file counts."""
    payload = {
        "model": run.model if run.field_sources.get("model", "").startswith("file:") else "",
        "metrics": [(m.name, m.value, m.raw_value) for m in run.metrics],
        "accuracy": [(a.task, a.metric, a.value) for a in run.accuracy],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def import_plan(
    parsed: ParsedRun, overrides: dict[str, str] | None, fill: dict[str, str] | None = None
) -> ImportPlan:
    run = copy.deepcopy(parsed)  # the caller's ParsedRun stays as the importer left it
    plan = ImportPlan(
        parsed=run, model_raw=run.model.strip(), accelerator_raw=run.hardware.accelerator.strip()
    )
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

    # The scenario is what the file (or the uploader) says; when neither says one, the run is
    # stored as "not stated", never as Offline: an online benchmark would land among Offline runs.
    scenario = run.workload.scenario or Scenario.UNSTATED.value
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
class ImportIdentity:
    """What a run's model and accelerator resolve to (``import_identify``), or why they do not yet."""

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


def import_identify(
    plan: ImportPlan, models: ModelCatalogue, accelerators: AcceleratorCatalogue
) -> ImportIdentity:
    """Resolve the run's model and accelerator (pure, given the catalogues): see the module's
    docstring, point 2. Problems name the field the uploader must fill (``model``, ``accelerator``)."""
    choices = plan.choices
    identity = ImportIdentity(
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
