"""Writes of the API: tokens, and each ingest endpoint's idempotent, all-or-nothing transaction.

Idempotency (every write carries a client id):
1. Inside the request's transaction, claim ``(team, kind, client_id)`` in ``IngestBatch`` with
   ``INSERT ... ON CONFLICT DO NOTHING RETURNING id``.
2. A concurrent retry's INSERT waits on the unique index until the first transaction ends. If
   that one committed, the retry sees the conflict and returns the stored result with
   ``duplicate: true``; if it rolled back, the retry's claim succeeds and it writes the data.
3. The data and the claim commit together, so a failed batch leaves neither behind.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid as uuid_lib
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

import orjson
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from accelboard.benchmarks.catalogue_selectors import accelerator_catalogue_for, model_catalogue_for
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.benchmarks.services import (
    MetricInput,
    WorkloadSpec,
    model_variant_get_or_create,
    run_record,
    workload_get_or_create,
)
from accelboard.core.models import Team
from accelboard.core.services import transaction_with_files
from accelboard.fleet import ingest_services
from accelboard.fleet.host_services import host_register
from accelboard.fleet.ingest_validation import MAX_JSON_BYTES, IngestRejected
from accelboard.fleet.models import Accelerator, AcceleratorType, Host
from accelboard.importers.metrics import NON_NEGATIVE_UNITS, UNITS, metric_spec
from accelboard.profiles.services import ProfileRejected, profile_attach, profile_attach_to_upload
from accelboard.serving.services import IntervalInput, inference_metrics_store

from .choices import BatchKind, TokenKind
from .models import ApiToken, IngestBatch

# last_used_at is informative: one write a minute per token, not one per request.
TOKEN_TOUCH_INTERVAL = timedelta(minutes=1)


# --- Tokens -----------------------------------------------------------------------------------


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_create(*, team: Team, kind: str, name: str = "", created_by: Any = None) -> tuple[ApiToken, str]:
    """Create a token; return the row and the token itself, which is never stored and never shown again."""
    if kind not in TokenKind.values:
        raise ValueError(f"kind must be one of {', '.join(TokenKind.values)}, not {kind!r}")
    for _ in range(5):
        token = secrets.token_urlsafe(32)
        # One in 64 draws starts with "-", which a command line reads as an option
        # (`accelboard upload --token -Xy…` fails): draw again.
        while token.startswith("-"):
            token = secrets.token_urlsafe(32)
        try:
            with transaction.atomic():
                row = ApiToken.objects.create(
                    team=team,
                    kind=kind,
                    name=name,
                    prefix=token[:8],
                    secret_hash=_hash(token),
                    created_by=created_by,
                )
            return row, token
        except IntegrityError:  # an 8-character prefix collided (1 in 2^48): draw again
            continue
    raise RuntimeError("could not draw a token with a unique prefix")


def token_revoke(*, prefix: str) -> ApiToken | None:
    """Revoke the token with this prefix; return it (None when no such token). Revoking twice is a no-op."""
    token = ApiToken.objects.select_related("team").filter(prefix=prefix).first()
    if token is None:
        return None
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=token.revoked_at)
    return token


_TOKEN_COLUMNS = [field.attname for field in ApiToken._meta.concrete_fields]
_TEAM_COLUMNS = [field.attname for field in Team._meta.concrete_fields]
# The token and its team in one statement written once: building it through the ORM
# (select_related, the model's ordering by team name) cost ~1 ms of CPU per API call, more than
# the query itself. The columns need no conversion (text, integers, timestamps); a test compares
# the rows with the ORM's.
_TOKEN_SQL = (
    f"SELECT {', '.join(f't.{c}' for c in _TOKEN_COLUMNS)}, {', '.join(f'm.{c}' for c in _TEAM_COLUMNS)} "
    f"FROM {ApiToken._meta.db_table} t JOIN {Team._meta.db_table} m ON m.id = t.team_id "
    "WHERE t.prefix = %s"
)


def _token_row(*, prefix: str) -> ApiToken | None:
    """The token whose prefix is ``prefix`` (unique), with its team, or None."""
    with connection.cursor() as cursor:
        cursor.execute(_TOKEN_SQL, [prefix])
        values = cursor.fetchone()
    if values is None:
        return None
    split = len(_TOKEN_COLUMNS)
    row = ApiToken.from_db(connection.alias, _TOKEN_COLUMNS, values[:split])
    row.team = Team.from_db(connection.alias, _TEAM_COLUMNS, values[split:])
    return row


def token_authenticate(*, token: str) -> ApiToken | None:
    """The active token matching ``token``; raises ``IngestRejected`` (401) for a revoked one."""
    if len(token) < 32 or len(token) > 128:
        return None
    row = _token_row(prefix=token[:8])
    if row is None or not hmac.compare_digest(row.secret_hash, _hash(token)):
        return None
    if row.revoked_at is not None:
        raise IngestRejected("this API token was revoked", code="token_revoked", status=401)
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at >= TOKEN_TOUCH_INTERVAL:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
        row.last_used_at = now
    return row


# --- Idempotent batches -----------------------------------------------------------------------


def _batch_claim(
    *, team: Team, kind: str, client_id: str, result: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Claim the client id; None when claimed now, else the stored result of the earlier request.

    ``result``, when the write's result is known before it runs (telemetry: the samples it
    accepts; fleet's ingest claims through this), is stored with the claim, saving the write its
    own UPDATE."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO api_ingestbatch (team_id, kind, client_id, result, created_at)
            VALUES (%s, %s, %s, %s::jsonb, now())
            ON CONFLICT (team_id, kind, client_id) DO NOTHING
            RETURNING id
            """,
            [team.pk, kind, client_id, orjson.dumps(result or {}).decode()],
        )
        if cursor.fetchone() is not None:
            return None
    return IngestBatch.objects.get(team=team, kind=kind, client_id=client_id).result


def _batch_write(
    *, team: Team, kind: str, client_id: str, write: Callable[[], dict[str, Any]]
) -> tuple[dict[str, Any], bool]:
    """Run ``write`` once per (team, kind, client id), with its claim, in one transaction."""
    with transaction.atomic():
        stored = _batch_claim(team=team, kind=kind, client_id=client_id)
        if stored is not None:
            return {**stored, "duplicate": True}, True
        result = write()
        IngestBatch.objects.filter(team=team, kind=kind, client_id=client_id).update(result=result)
    return {**result, "duplicate": False}, False


def telemetry_batch_ingest(*, team: Team, payload: Any) -> dict[str, Any]:
    """Validate and store one telemetry batch (docs/api-contract.md); idempotent on batch_id.

    Fleet does the whole ingest (``fleet.ingest_services.telemetry_batch_ingest``: validation,
    registration, partitions and their retry, COPY, the rollup mark and the drain request); the
    API adds its idempotency record, claimed in the batch's transaction.
    """
    return ingest_services.telemetry_batch_ingest(
        team_id=team.pk,
        payload=payload,
        claim=partial(_batch_claim, team=team, kind=BatchKind.TELEMETRY),
    )


# --- Benchmark runs ---------------------------------------------------------------------------


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


def _accelerator_type(*, team: Team, name: str) -> tuple[AcceleratorType, str]:
    """The accelerator type the catalogue resolves ``name`` to without doubt, and how."""
    catalogue = accelerator_catalogue_for(team=team)
    match = catalogue.resolve(name)
    found = AcceleratorType.objects.filter(slug=match.target).first() if match.resolved else None
    if found is None:
        if match.candidates:
            close = ", ".join(catalogue.entries[slug].name for slug in match.candidates)
            message = f"accelerator {name!r} could be {close}; name the one it is"
        else:
            known = ", ".join(AcceleratorType.objects.values_list("name", flat=True)[:20]) or "none yet"
            message = f"unknown accelerator {name!r} (known: {known}); an admin adds accelerator types"
        raise IngestRejected(message, path="hardware.accelerator", code="unknown_accelerator")
    return found, match.how


def _model_name(*, team: Team, name: str) -> tuple[str, str]:
    """The catalogue model ``name`` resolves to and how; a name it does not know without doubt is
    kept as its own model (never merged into a close one)."""
    match = model_catalogue_for(team=team).resolve(name)
    if match.resolved:
        return match.target, match.how
    return name, "new"


def _team_host(*, team: Team, hostname: str) -> Host | None:
    """The team's host of that name; None for a name the team has no host by.

    A write that only mentions a host (a run's ``hardware.host``, a serving batch) never registers
    or claims one: hosts join a team when their agent sends telemetry with the team's token. So a
    name held by another team and a name nobody holds get the same answer."""
    return Host.objects.filter(team=team, hostname=hostname).first()


def _gpus_elsewhere(*, team: Team, uuids: list[str]) -> set[str]:
    """Those of ``uuids`` registered on a host this team does not own."""
    return set(
        Accelerator.objects.filter(uuid__in=uuids)
        .exclude(host__team=team)
        .exclude(host__team__isnull=True)  # an unclaimed host's GPUs are no one's yet
        .values_list("uuid", flat=True)
    )


def _run_id_taken() -> IngestRejected:
    # Says no more than "taken": run ids are random UUIDs, so a clash is one the caller made.
    return IngestRejected(
        "this run_id cannot be used; generate a new UUID (uuid4) for each run",
        path="run_id",
        code="run_conflict",
        status=409,
    )


def run_ingest(
    *, team: Team, payload: dict[str, Any], uploaded_by: Any = None
) -> tuple[dict[str, Any], bool]:
    """Record one benchmark run from a validated API payload; return (result, duplicate)."""
    run_uuid = uuid_lib.UUID(str(payload["run_id"]))
    metrics = _metric_inputs(payload["metrics"])

    def write() -> dict[str, Any]:
        existing = BenchmarkRun.objects.filter(uuid=run_uuid).values_list("team_id", flat=True).first()
        if existing is not None and existing != team.pk:
            raise _run_id_taken()
        variant_in, workload_in = payload["variant"], payload["workload"]
        hardware, provenance = payload["hardware"], payload["provenance"]
        model, model_how = _model_name(team=team, name=payload["model"])
        variant = model_variant_get_or_create(
            model=model,
            variant=variant_in["name"],
            precision=variant_in["precision"],
            quantization_method=variant_in["quantization_method"],
            team=team,
        )
        workload = workload_get_or_create(team=team, variant=variant, spec=WorkloadSpec(**workload_in))
        accelerator_type, accelerator_how = (
            _accelerator_type(team=team, name=hardware["accelerator"])
            if hardware["accelerator"]
            else (None, "")
        )
        host = _team_host(team=team, hostname=hardware["host"]) if hardware["host"] else None
        context = dict(payload["context"])
        if hardware["host"] and host is None:
            context["host"] = hardware["host"]  # named, not one of the team's hosts: kept as text
        if hardware["gpu_uuids"]:
            context["gpu_uuids"] = hardware["gpu_uuids"]
        try:
            with transaction.atomic():
                run, _ = run_record(
                    team=team,
                    workload=workload,
                    accelerator_type=accelerator_type,
                    accelerator_count=hardware["count"],
                    started_at=payload["started_at"],
                    finished_at=payload["finished_at"],
                    metrics=metrics,
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
        return {"run_id": str(run.uuid), "id": run.pk, "url": f"/runs/{run.pk}/"}

    return _batch_write(team=team, kind=BatchKind.RUN, client_id=str(run_uuid), write=write)


# --- Benchmark result files (multipart) ---------------------------------------------------------

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
    "create_model",
    "remember",
)
UPLOAD_FIELDS = frozenset({*UPLOAD_OVERRIDES, "context", "format", "run_id"})


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


def run_upload(
    *,
    team: Team,
    files: list[tuple[str, bytes]],
    fields: dict[str, str],
    uploaded_via: str = "api",
    profiles: list[tuple[str, Any]] | None = None,
) -> tuple[dict[str, Any], bool]:
    """Import result files (or archives) as runs, all or none; return (result, all duplicates).

    Each run in the result carries its metrics against their series' baselines
    (``alerts.selectors.run_baseline_compare``), which is what ``accelboard upload`` prints."""
    from accelboard.alerts.selectors import run_baseline_compare
    from accelboard.benchmarks.import_services import ImportRejected, run_import
    from accelboard.benchmarks.upload_services import files_tar
    from accelboard.importers import ContextError, UnrecognisedFormat, parse_files

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

    stored = []
    with transaction_with_files():  # a refused upload keeps neither rows nor files
        for run, sources in zip(submission.runs, submission.sources, strict=True):
            if len(sources) == 1:
                name, data = files[sources[0]]
            else:  # a run read from several files keeps them all
                name = f"{files[sources[0]][0]}-and-{len(sources) - 1}-more.tar.gz"
                data = files_tar([files[index] for index in sources])
            try:
                row, created = run_import(
                    team=team,
                    parsed=run,
                    raw_name=name,
                    raw_bytes=data,
                    uploaded_via=uploaded_via,
                    overrides=overrides,
                    context=context,
                    run_uuid=run_id,
                )
            except ImportRejected as exc:
                status = 409 if exc.field == "run_id" else 422
                raise IngestRejected(
                    exc.message,
                    path=exc.field or f"file[{sources[0]}]",
                    code="import_rejected",
                    status=status,
                ) from None
            stored.append((name, row, created))
        if profiles:
            try:
                profile_attach_to_upload(runs=[row for _, row, _ in stored], files=profiles)
            except ProfileRejected as exc:
                raise IngestRejected(exc.message, path="profile", code="parse_error") from None
    items = []
    for name, row, created in stored:
        items.append(
            {
                "run_id": str(row.uuid),
                "id": row.pk,
                "url": f"/runs/{row.pk}/",
                "duplicate": not created,
                "file": name,
                "source_format": row.source_format,
                "model": row.workload.variant.model.name,
                "model_name": row.model_name,
                "model_match": row.model_match,
                "variant": row.workload.variant.name,
                "accelerator": row.accelerator_type.name if row.accelerator_type else None,
                "accelerator_name": row.accelerator_name,
                "accelerator_match": row.accelerator_match,
                "accelerator_count": row.accelerator_count,
                "warnings": list(row.context.get("warnings", [])),
                "metrics": run_baseline_compare(run=row),
                **({"profile_url": f"/runs/{row.pk}/profile/"} if profiles else {}),
            }
        )
    duplicate = all(item["duplicate"] for item in items)
    return {"runs": items, "duplicate": duplicate}, duplicate


def run_profile_upload(*, team: Team, run_id: str, files: list[tuple[str, Any]]) -> dict[str, Any]:
    """Attach a profile to one of the team's runs, named by its client id (UUID) or its number."""
    if not files:
        raise IngestRejected("is required: the trace file(s), one per rank", path="profile", code="missing")
    runs = BenchmarkRun.objects.filter(team=team)
    try:
        run = runs.get(pk=int(run_id)) if run_id.isdigit() else runs.get(uuid=uuid_lib.UUID(run_id))
    except (ValueError, BenchmarkRun.DoesNotExist):
        raise IngestRejected(
            f"no run {run_id!r} in this team", path="run_id", code="not_found", status=404
        ) from None
    try:
        profile = profile_attach(run=run, files=files)
    except ProfileRejected as exc:
        raise IngestRejected(exc.message, path="profile", code="parse_error") from None
    return {
        "run_id": str(run.uuid),
        "id": run.pk,
        "profile_url": f"/runs/{run.pk}/profile/",
        "verdict": profile.verdict.get("headline", ""),
        "ranks": profile.ranks,
    }


# --- Serving metrics --------------------------------------------------------------------------


def inference_batch_ingest(*, team: Team, payload: dict[str, Any]) -> dict[str, Any]:
    """Store one batch of serving-metric intervals; idempotent on batch_id.

    The batch's host is named, never claimed: a host nobody has is registered without a team (its
    agent's telemetry gives it to its team later), and the answer is the same whoever holds the
    name, so a serving batch neither squats a name nor tells whether it is taken. The rows are the
    token's team's either way. A GPU it names must not be on another team's host (409, as telemetry
    answers); a GPU not reported yet is kept by UUID and joins its energy once its agent reports."""
    intervals = [IntervalInput(**item) for item in payload["intervals"]]

    def write() -> dict[str, Any]:
        named = sorted({gpu for item in intervals for gpu in item.accelerator_uuids})
        foreign = _gpus_elsewhere(team=team, uuids=named) if named else set()
        for i, item in enumerate(intervals):
            for j, gpu in enumerate(item.accelerator_uuids):
                if gpu in foreign:
                    raise IngestRejected(
                        f"GPU {gpu!r} cannot be named with this token: it is registered to a host "
                        "the token cannot write to",
                        path=f"intervals[{i}].accelerator_uuids[{j}]",
                        code="accelerator_conflict",
                        status=409,
                    )
        host = Host.objects.filter(hostname=payload["host"]).first()
        if host is None:
            host, _ = host_register(hostname=payload["host"], team_id=None)
        accepted = inference_metrics_store(
            team=team, host=host, batch_id=payload["batch_id"], intervals=intervals
        )
        return {"batch_id": payload["batch_id"], "accepted": accepted}

    result, _ = _batch_write(team=team, kind=BatchKind.INFERENCE, client_id=payload["batch_id"], write=write)
    return result
