"""A run arrives: the one entrance for benchmark runs, whichever way they come.

Every way in is a small adapter onto the same steps (``import_services.run_import`` for files,
``services.run_record`` underneath both):

- **JSON** (``POST /api/v1/runs``): ``run_payload_read`` checks the metrics against the
  catalogue before anything is claimed, ``run_payload_store`` resolves the model
  (``import_selectors.model_name_resolve``) and the accelerator (``accelerator_type_resolve``)
  and records the run. The API wraps the store in its idempotent batch claim.
- **Result files and archives** (multipart ``POST /api/v1/runs``, which ``accelboard upload``
  sends): ``runs_upload`` reads them as one submission and stores every run, all or nothing.
- **The upload page**: ``upload_preview`` (the stash, and what each profiler trace holds) and
  ``upload_save`` (each run on its own: a failed run leaves the saved ones saved).
- **Profiles attached**: traces sent beside result files are attached to the one run saved with
  them, in ``_runs_store`` for the API and the page alike; ``run_profile_attach`` attaches them to
  a run that arrived earlier (``POST /api/v1/runs/<id>/profile``).

Why profiles come in through a port. The profile rows (and the analysis that fills them) belong to
the profiles app, which sits above benchmarks: benchmarks may not import it. Rather than moving
the entrance up into profiles (benchmarks would then no longer own its own runs' arrival) or
orchestrating "files plus profiles" in each edge again, the entrance is handed the profiles app's
side of an upload (``ProfilePort``, implemented by ``profiles.upload_services.UPLOAD_PROFILES``)
by its callers, the API and the dashboard, which sit above both. Imports only run down the
layers; the one call that reaches up at run time is that handed-in writer, and it writes only
the profiles app's own rows. Its refusals come back as ``ProfileRefused``, this module's type.

Errors: the API's edges (JSON, multipart, profile) raise ``fleet.ingest_services.IngestRejected``
with the field's path, code and status the API contract names; the page's save reports an error
per run and per file instead.
"""

from __future__ import annotations

import uuid as uuid_lib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db import IntegrityError, transaction

from accelboard.core.models import Team
from accelboard.core.services import transaction_with_files
from accelboard.fleet.ingest_validation import MAX_JSON_BYTES, IngestRejected
from accelboard.importers import ContextError, UnrecognisedFormat, parse_files
from accelboard.importers.metrics import NON_NEGATIVE_UNITS, UNITS, metric_spec

from .import_plans import ImportRejected
from .import_selectors import accelerator_type_resolve, model_name_resolve, team_host_get
from .import_services import run_import
from .models import BenchmarkRun
from .services import (
    MetricInput,
    WorkloadSpec,
    model_variant_get_or_create,
    run_record,
    workload_get_or_create,
)
from .upload_services import (
    FileRead,
    RunRead,
    StashedFile,
    SubmissionRead,
    run_raw_files,
    submission_read,
    upload_discard,
    upload_parse,
)

# --- The profiles port ------------------------------------------------------------------------


class ProfileRefused(ValueError):
    """Traces that cannot be read or attached; the message names the file (or the run count).
    ``code``: ``parse_error``, or ``device_mismatch`` (a strict attach of other hardware's trace)."""

    def __init__(self, message: str, *, code: str = "parse_error") -> None:
        self.message = message
        self.code = code
        super().__init__(message)


class AttachedProfile(Protocol):
    """What the entrance reads back of a profile it had attached."""

    @property
    def run_id(self) -> int: ...

    @property
    def ranks(self) -> int: ...

    @property
    def verdict(self) -> Any: ...

    @property
    def warnings(self) -> Any: ...


class ProfilePort(Protocol):
    """The profiles app's side of a run's arrival (see the module's docstring)."""

    def preview(self, *, name: str, data: bytes) -> dict[str, Any] | None:
        """What a trace holds (format, ranks, steps, verdict); None when the file is not a trace."""
        ...

    def attach(
        self,
        *,
        runs: Sequence[BenchmarkRun],
        files: Sequence[tuple[str, Any]],
        uploaded_by: Any = None,
        strict: bool = False,
    ) -> AttachedProfile | None:
        """Attach the traces as the profile of the one run among ``runs``; ``strict`` refuses a
        trace from other hardware than the run's (else it is attached with a warning)."""
        ...


@dataclass
class RunSaved:
    """What storing one run did: the run stored (and whether it is new) or why it was not."""

    index: int
    files: tuple[int, ...]
    raw_name: str = ""
    run: BenchmarkRun | None = None
    created: bool = False
    error: str = ""

    @property
    def run_id(self) -> int | None:
        return self.run.pk if self.run is not None else None


@dataclass
class ProfileSaved:
    """The traces of one upload: the run their profile was attached to, or why it was not."""

    index: int
    name: str
    run_id: int | None = None
    error: str = ""
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Arrival:
    """One submission's runs to store, and how (the edges differ only in these)."""

    team: Team
    files: Mapping[int, tuple[str, bytes]]
    uploaded_by: Any
    uploaded_via: str
    overrides: Callable[[int], dict[str, Any]]
    run_uuid: Callable[[int], uuid_lib.UUID | str | None]
    context: dict[str, str] | None = None
    refused: Mapping[int, str] = field(default_factory=dict)


def _runs_store(
    arrival: _Arrival,
    runs: Sequence[RunRead],
    *,
    traces: Sequence[tuple[int, str, Any]],
    profiles: ProfilePort,
    strict: bool,
    profile_strict: bool = False,
) -> tuple[list[RunSaved], ProfileSaved | None]:
    """Store each run of a submission, then attach the traces (index, name, file) to the one run
    saved with them. ``strict`` (the API): the first refusal raises ``IngestRejected`` and the
    caller's transaction keeps nothing; otherwise each run's error is reported and the others
    stay saved."""
    results: list[RunSaved] = []
    for run in runs:
        saved = RunSaved(index=run.index, files=run.files)
        results.append(saved)
        if run.index in arrival.refused:
            saved.error = arrival.refused[run.index]
            continue
        saved.raw_name, raw_bytes = run_raw_files(run, arrival.files)
        try:
            saved.run, saved.created = run_import(
                team=arrival.team,
                parsed=run.parsed,
                raw_name=saved.raw_name,
                raw_bytes=raw_bytes,
                uploaded_by=arrival.uploaded_by,
                uploaded_via=arrival.uploaded_via,
                overrides=arrival.overrides(run.index),
                context=arrival.context,
                run_uuid=arrival.run_uuid(run.index),
            )
        except ImportRejected as exc:
            if strict:
                raise IngestRejected(
                    exc.message,
                    path=exc.field or f"file[{run.files[0]}]",
                    code=exc.code,
                    status=409 if exc.field == "run_id" else 422,
                ) from None
            saved.error = str(exc)
    if not traces:
        return results, None
    attached = ProfileSaved(index=traces[0][0], name=", ".join(name for _, name, _ in traces))
    try:
        profile = profiles.attach(
            runs=[saved.run for saved in results if saved.run is not None],
            files=[(name, data) for _, name, data in traces],
            uploaded_by=arrival.uploaded_by,
            strict=profile_strict,
        )
    except ProfileRefused as exc:
        if strict:
            raise IngestRejected(exc.message, path="profile", code=exc.code) from None
        attached.error = exc.message
    else:
        attached.run_id = profile.run_id if profile is not None else None
        attached.warnings = list(profile.warnings) if profile is not None else []
    return results, attached


# --- JSON -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunPayload:
    """A run sent as JSON (the API's ``RunIn``, validated), its client id and checked metrics."""

    run_uuid: uuid_lib.UUID
    payload: dict[str, Any]
    metrics: list[MetricInput]


def _metric_inputs(metrics: list[dict[str, Any]]) -> list[MetricInput]:
    """Check names, units and directions against the catalogue; paths name the bad metric."""
    seen: set[str] = set()
    inputs = []
    for i, metric in enumerate(metrics):
        name, unit, direction = metric["name"], metric["unit"], metric.get("direction")
        if name in seen:
            raise IngestRejected(
                f"metric {name!r} is listed twice", path=f"metrics[{i}].name", code="duplicate"
            )
        seen.add(name)
        spec = metric_spec(name)
        if unit not in UNITS:
            raise IngestRejected(
                f"unknown unit {unit!r}; known: {', '.join(sorted(UNITS))}",
                path=f"metrics[{i}].unit",
                code="unknown_unit",
            )
        if spec is None and direction is None:
            raise IngestRejected(
                f"unknown metric {name!r}: give its direction (higher or lower) or use a catalogue name",
                path=f"metrics[{i}].name",
                code="unknown_metric",
            )
        if spec is not None and unit != spec.unit:
            raise IngestRejected(
                f"metric {name!r} is recorded in {spec.unit!r}, not {unit!r}",
                path=f"metrics[{i}].unit",
                code="wrong_unit",
            )
        if unit in NON_NEGATIVE_UNITS:
            if metric["value"] < 0:
                raise IngestRejected(
                    f"a value in {unit} cannot be negative", path=f"metrics[{i}].value", code="negative"
                )
            for j, sample in enumerate(metric.get("samples") or ()):
                if sample < 0:
                    raise IngestRejected(
                        f"a value in {unit} cannot be negative",
                        path=f"metrics[{i}].samples[{j}]",
                        code="negative",
                    )
        inputs.append(
            MetricInput(
                name=name,
                value=metric["value"],
                unit=unit,
                direction=direction,
                samples=tuple(metric.get("samples") or ()),
                source="api",
            )
        )
    return inputs


def run_payload_read(*, payload: dict[str, Any]) -> RunPayload:
    """The run's client id and its metrics checked against the catalogue (no rows read)."""
    return RunPayload(
        run_uuid=uuid_lib.UUID(str(payload["run_id"])),
        payload=payload,
        metrics=_metric_inputs(payload["metrics"]),
    )


def _run_id_taken() -> IngestRejected:
    # Says no more than "taken": run ids are random UUIDs, so a clash is one the caller made.
    return IngestRejected(
        "this run_id cannot be used; generate a new UUID (uuid4) for each run",
        path="run_id",
        code="run_conflict",
        status=409,
    )


def run_payload_store(*, team: Team, run: RunPayload, uploaded_by: Any = None) -> dict[str, Any]:
    """Record a run sent as JSON for ``team``; return its ids and page. Raises ``IngestRejected``:
    409 for a run id another team holds, 422 for an accelerator the catalogue does not resolve.

    Not idempotent on its own: the caller claims the run id first (the API's batch claim)."""
    payload, run_uuid = run.payload, run.run_uuid
    existing = BenchmarkRun.objects.filter(uuid=run_uuid).values_list("team_id", flat=True).first()
    if existing is not None and existing != team.pk:
        raise _run_id_taken()
    variant_in, workload_in = payload["variant"], payload["workload"]
    hardware, provenance = payload["hardware"], payload["provenance"]
    model, model_how = model_name_resolve(team=team, name=payload["model"])
    variant = model_variant_get_or_create(
        model=model,
        variant=variant_in["name"],
        precision=variant_in["precision"],
        quantization_method=variant_in["quantization_method"],
        team=team,
    )
    workload = workload_get_or_create(team=team, variant=variant, spec=WorkloadSpec(**workload_in))
    accelerator_type, accelerator_how = None, ""
    if hardware["accelerator"]:
        try:
            accelerator_type, accelerator_how = accelerator_type_resolve(
                team=team, name=hardware["accelerator"]
            )
        except ImportRejected as exc:
            raise IngestRejected(
                exc.message, path="hardware.accelerator", code="unknown_accelerator"
            ) from None
    host = team_host_get(team=team, hostname=hardware["host"]) if hardware["host"] else None
    context = dict(payload["context"])
    if hardware["host"] and host is None:
        context["host"] = hardware["host"]  # named, not one of the team's hosts: kept as text
    if hardware["gpu_uuids"]:
        context["gpu_uuids"] = hardware["gpu_uuids"]
    try:
        with transaction.atomic():
            stored, _ = run_record(
                team=team,
                workload=workload,
                accelerator_type=accelerator_type,
                accelerator_count=hardware["count"],
                started_at=payload["started_at"],
                finished_at=payload["finished_at"],
                metrics=run.metrics,
                run_uuid=run_uuid,
                host=host,
                git_commit=provenance["git_commit"],
                branch=provenance["branch"],
                ci_url=provenance["ci_url"],
                uploaded_by=uploaded_by,
                uploaded_via="api",
                source_format=provenance["source_format"],
                field_sources={"*": "api"},
                context=context,
                driver_version=hardware["driver_version"],
                cuda_version=hardware["cuda_version"],
                identity={
                    "model_name": payload["model"],
                    "model_match": model_how,
                    "accelerator_name": hardware["accelerator"],
                    "accelerator_match": accelerator_how,
                },
            )
    except IntegrityError:  # another team's request took this run_id a moment ago
        raise _run_id_taken() from None
    return {"run_id": str(stored.uuid), "id": stored.pk, "url": f"/runs/{stored.pk}/"}


# --- Result files and archives (the API's multipart, ``accelboard upload``) -------------------

# Form fields of a multipart ``POST /runs`` besides the files. Each of ``UPLOAD_OVERRIDES`` applies
# over what the files say (``run_import``'s overrides: ``model`` and ``accelerator`` pick a catalogue
# identity, ``create_model`` adds the model named, ``remember`` keeps the files' names as the team's
# aliases of what was picked); ``context`` lines only fill what the files lack.
UPLOAD_OVERRIDES = (
    "commit",
    "branch",
    "ci_url",
    "accelerator",
    "count",
    "precision",
    "model",
    "scenario",
    "create_model",
    "remember",
)
# ``strict``: refuse a profile from other hardware than the run's instead of warning.
UPLOAD_FIELDS = frozenset({*UPLOAD_OVERRIDES, "context", "format", "run_id", "strict"})


def _context_lines(text: str) -> dict[str, str]:
    """``k=v`` lines (blank lines and ``#`` comments skipped); a bad line is a 422 naming it."""
    pairs: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise IngestRejected(f"line {number}: expected KEY=VALUE, got {line[:60]!r}", path="context")
        pairs[key.strip()] = value.strip()
    return pairs


def runs_upload(
    *,
    team: Team,
    files: list[tuple[str, bytes]],
    fields: dict[str, str],
    uploaded_via: str = "api",
    profile_files: Sequence[tuple[str, Any]] = (),
    profiles: ProfilePort,
    attached: list[ProfileSaved] | None = None,
) -> list[RunSaved]:
    """Import result files (or archives) as runs for ``team``, with ``fields`` (``UPLOAD_FIELDS``)
    applied, and attach ``profile_files`` to the run they hold; all or nothing: any refusal raises
    ``IngestRejected`` and keeps neither rows nor files. Every run returned was stored (``created``
    False: it was there already)."""
    unknown = sorted(set(fields) - UPLOAD_FIELDS)
    if unknown:
        raise IngestRejected(
            f"unknown field; known: {', '.join(sorted(UPLOAD_FIELDS))}",
            path=unknown[0],
            code="extra_forbidden",
        )
    for key, value in fields.items():
        if len(value.encode()) > MAX_JSON_BYTES:
            raise IngestRejected(f"at most {MAX_JSON_BYTES // 1024} KiB", path=key, code="too_large")
    context = _context_lines(fields.get("context", ""))
    overrides = {key: fields[key] for key in UPLOAD_OVERRIDES if fields.get(key, "").strip()}
    fmt = fields.get("format", "").strip() or None
    run_id = fields.get("run_id", "").strip() or None

    # The files are one submission: loose MLPerf files are the run their archive would be.
    try:
        submission = parse_files(files, fmt=fmt)
    except ContextError as exc:
        raise IngestRejected(str(exc), path="format", code="invalid") from None
    if submission.errors:
        error, source = submission.errors[0], submission.error_sources[0]
        raise IngestRejected(
            str(error),
            path=f"file[{source}]" if source is not None else "file",
            code="unrecognised_format" if isinstance(error, UnrecognisedFormat) else "parse_error",
        )
    if not submission.runs:
        raise IngestRejected("no result found in the files", path="file", code="parse_error")
    if run_id is not None and len(submission.runs) != 1:
        raise IngestRejected(
            f"a run_id names one run; these files hold {len(submission.runs)}", path="run_id", code="invalid"
        )
    runs = [
        RunRead(index=number, parsed=parsed, files=tuple(sources))
        for number, (parsed, sources) in enumerate(zip(submission.runs, submission.sources, strict=True))
    ]
    arrival = _Arrival(
        team=team,
        files=dict(enumerate(files)),
        uploaded_by=None,
        uploaded_via=uploaded_via,
        overrides=lambda _index: dict(overrides),
        run_uuid=lambda _index: run_id,
        context=context,
    )
    with transaction_with_files():  # a refused upload keeps neither rows nor files
        saved, profile = _runs_store(
            arrival,
            runs,
            traces=[(index, name, data) for index, (name, data) in enumerate(profile_files)],
            profiles=profiles,
            strict=True,
            profile_strict=_flag(fields.get("strict", "")),
        )
    if attached is not None and profile is not None:
        attached.append(profile)
    return saved


def _flag(value: str) -> bool:
    """A form field read as a yes/no: 1, true, yes, on (any case) are yes."""
    return value.strip().lower() in ("1", "true", "yes", "on")


# --- The upload page --------------------------------------------------------------------------


def upload_preview(
    *, user_id: int, files: list[tuple[str, bytes | None]], profiles: ProfilePort, too_large: str = ""
) -> tuple[str, SubmissionRead, dict[int, dict[str, Any]]]:
    """Stash the files and read them as one submission (``upload_services.upload_parse``), and
    what each readable profiler trace among them holds, by file index; a trace that cannot be
    read gets its error."""
    token, submission = upload_parse(user_id=user_id, files=files, too_large=too_large)
    previews: dict[int, dict[str, Any]] = {}
    for read in submission.files:
        data = files[read.index][1]
        if not read.profile or data is None:
            continue
        try:
            preview = profiles.preview(name=read.name, data=data)
        except ProfileRefused as exc:
            read.error = exc.message
            continue
        if preview is not None:
            previews[read.index] = preview
    return token, submission, previews


def upload_save(
    *,
    team: Team,
    token: str,
    user: Any,
    files: list[StashedFile],
    overrides: Mapping[int, dict[str, Any]],
    refused: Mapping[int, str],
    profiles: ProfilePort,
) -> tuple[list[RunSaved], list[FileRead], ProfileSaved | None]:
    """Store the runs of the stashed ``files`` for ``team``, each with its ``overrides`` (by run
    index), then attach the profiler traces among them to the one run saved; return what each run
    did, the files (their read errors are errors of the save) and the traces' profile.

    A run in ``refused`` (its fields did not validate) is skipped with that error. A run is known
    by what its files hold (``import_services``, point 5), not by this upload: saving the same
    preview twice (a double click, a retry after fixing one run) keeps the runs saved the first
    time, and so does a later upload of the same result as loose files, a folder or a zip. The stash
    is discarded once every run, every file and the profile are saved; otherwise it stays for
    that second save."""
    read = submission_read([(item.index, item.name, item.data) for item in files])
    arrival = _Arrival(
        team=team,
        files={item.index: (item.name, item.data) for item in files},
        uploaded_by=user,
        uploaded_via="web",
        overrides=lambda index: dict(overrides.get(index, {})),
        run_uuid=lambda _index: None,
        refused=refused,
    )
    traces = [(item.index, item.name, item.data) for item in files if item.profile]
    saved, attached = _runs_store(arrival, read.runs, traces=traces, profiles=profiles, strict=False)
    failed = any(item.error for item in saved) or any(item.error for item in read.files)
    if not failed and not (attached is not None and attached.error):
        upload_discard(token=token)
    return saved, read.files, attached


# --- A profile for a run that arrived earlier -------------------------------------------------


def run_profile_attach(
    *,
    team: Team,
    run_ref: str,
    files: Sequence[tuple[str, Any]],
    profiles: ProfilePort,
    strict: bool = False,
) -> dict[str, Any]:
    """Attach a profile to one of the team's runs, named by its client id (UUID) or its number.
    The answer's ``warnings`` say what to read with care (first: a trace from other hardware than
    the run's); ``strict`` refuses such a trace with a 422 naming both devices."""
    if not files:
        raise IngestRejected("is required: the trace file(s), one per rank", path="profile", code="missing")
    runs = BenchmarkRun.objects.filter(team=team)
    try:
        run = runs.get(pk=int(run_ref)) if run_ref.isdigit() else runs.get(uuid=uuid_lib.UUID(run_ref))
    except (ValueError, BenchmarkRun.DoesNotExist):
        raise IngestRejected(
            f"no run {run_ref!r} in this team", path="run_id", code="not_found", status=404
        ) from None
    try:
        profile = profiles.attach(runs=[run], files=files, strict=strict)
    except ProfileRefused as exc:
        raise IngestRejected(exc.message, path="profile", code=exc.code) from None
    assert profile is not None  # files were given
    return {
        "run_id": str(run.uuid),
        "id": run.pk,
        "profile_url": f"/runs/{run.pk}/profile/",
        "verdict": profile.verdict.get("headline", ""),
        "ranks": profile.ranks,
        "warnings": list(profile.warnings),
    }
