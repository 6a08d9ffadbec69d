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
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from accelboard.benchmarks.metrics import UNITS, metric_spec
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.benchmarks.services import (
    MetricInput,
    WorkloadSpec,
    model_variant_get_or_create,
    run_record,
    workload_get_or_create,
)
from accelboard.core.models import Team
from accelboard.fleet import ingest as telemetry
from accelboard.fleet.ingest import IngestRejected
from accelboard.fleet.models import AcceleratorType, Host
from accelboard.fleet.services import accelerator_type_match, telemetry_partitions_ensure
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


def token_authenticate(*, token: str) -> ApiToken | None:
    """The active token matching ``token``; raises ``IngestRejected`` (401) for a revoked one."""
    if len(token) < 32 or len(token) > 128:
        return None
    row = ApiToken.objects.select_related("team").filter(prefix=token[:8]).first()
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


def _batch_claim(*, team: Team, kind: str, client_id: str) -> dict[str, Any] | None:
    """Claim the client id; None when claimed now, else the stored result of the earlier request."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO api_ingestbatch (team_id, kind, client_id, result, created_at)
            VALUES (%s, %s, %s, '{}'::jsonb, now())
            ON CONFLICT (team_id, kind, client_id) DO NOTHING
            RETURNING id
            """,
            [team.pk, kind, client_id],
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


def _rollups_enqueue(*, start: datetime, end: datetime) -> None:
    """After commit, ask the storage side to refresh rollups over the batch's range (if it can)."""
    from accelboard.fleet import tasks

    task = getattr(tasks, "telemetry_rollups_refresh_range", None)
    if task is None:
        return
    start_iso, end_iso = start.isoformat(), (end + timedelta(seconds=1)).isoformat()
    # robust: a broker outage must not turn a committed batch into a 500 for the agent.
    transaction.on_commit(lambda: task.delay(start_iso, end_iso), robust=True)


def telemetry_batch_ingest(*, team: Team, payload: Any) -> dict[str, Any]:
    """Validate and store one telemetry batch (docs/api-contract.md); idempotent on batch_id."""
    received_at = datetime.now(UTC)
    batch = telemetry.telemetry_batch_parse(payload, now=received_at)
    if batch.epochs:
        # Partitions are created (and committed) before the batch's transaction: an empty
        # partition is not data, and CREATE TABLE ... PARTITION OF would otherwise hold a lock on
        # the parent table for the whole batch.
        telemetry_partitions_ensure(start=batch.start, end=batch.end)  # type: ignore[arg-type]

    def write() -> dict[str, Any]:
        accepted = telemetry.telemetry_batch_store(batch=batch, team_id=team.pk, received_at=received_at)
        if accepted:
            _rollups_enqueue(start=batch.start, end=batch.end)  # type: ignore[arg-type]
        return {"batch_id": batch.batch_id, "accepted": accepted}

    result, _ = _batch_write(team=team, kind=BatchKind.TELEMETRY, client_id=batch.batch_id, write=write)
    return result


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


def _accelerator_type(name: str) -> AcceleratorType:
    found = (
        AcceleratorType.objects.filter(name__iexact=name).first()
        or AcceleratorType.objects.filter(slug__iexact=name).first()
    )
    found = found or accelerator_type_match(name=name)
    if found is None:
        known = ", ".join(AcceleratorType.objects.values_list("name", flat=True)[:20]) or "none yet"
        raise IngestRejected(
            f"unknown accelerator {name!r} (known: {known}); an admin adds accelerator types",
            path="hardware.accelerator",
            code="unknown_accelerator",
        )
    return found


def _team_host(*, team: Team, hostname: str, path: str) -> Host:
    """The team's host by name, registered if new; another team's host is a conflict."""
    host = Host.objects.filter(hostname=hostname).first()
    if host is not None and host.team_id not in (None, team.pk):
        raise IngestRejected(
            f"host {hostname!r} belongs to another team", path=path, code="host_conflict", status=409
        )
    if host is None or host.team_id is None:
        from accelboard.fleet.services import host_register

        host, _ = host_register(hostname=hostname, team_id=team.pk)
        if host.team_id != team.pk:
            raise IngestRejected(
                f"host {hostname!r} belongs to another team", path=path, code="host_conflict", status=409
            )
    return host


def run_ingest(
    *, team: Team, payload: dict[str, Any], uploaded_by: Any = None
) -> tuple[dict[str, Any], bool]:
    """Record one benchmark run from a validated API payload; return (result, duplicate)."""
    run_uuid = uuid_lib.UUID(str(payload["run_id"]))
    metrics = _metric_inputs(payload["metrics"])

    def write() -> dict[str, Any]:
        existing = BenchmarkRun.objects.filter(uuid=run_uuid).values_list("team_id", flat=True).first()
        if existing is not None and existing != team.pk:
            raise IngestRejected(
                "this run_id is already used by another team's run; generate a new UUID",
                path="run_id",
                code="run_conflict",
                status=409,
            )
        variant_in, workload_in = payload["variant"], payload["workload"]
        hardware, provenance = payload["hardware"], payload["provenance"]
        variant = model_variant_get_or_create(
            model=payload["model"],
            variant=variant_in["name"],
            precision=variant_in["precision"],
            quantization_method=variant_in["quantization_method"],
        )
        workload = workload_get_or_create(team=team, variant=variant, spec=WorkloadSpec(**workload_in))
        accelerator_type = _accelerator_type(hardware["accelerator"]) if hardware["accelerator"] else None
        host = (
            _team_host(team=team, hostname=hardware["host"], path="hardware.host")
            if hardware["host"]
            else None
        )
        context = dict(payload["context"])
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
                )
        except IntegrityError:  # another team's request took this run_id a moment ago
            raise IngestRejected(
                "this run_id is already used by another run", path="run_id", code="run_conflict", status=409
            ) from None
        return {"run_id": str(run.uuid), "id": run.pk, "url": f"/runs/{run.pk}/"}

    return _batch_write(team=team, kind=BatchKind.RUN, client_id=str(run_uuid), write=write)


# --- Benchmark result files (multipart) ---------------------------------------------------------

# Form fields of a multipart ``POST /runs`` besides the files; each but ``context``, ``format`` and
# ``run_id`` states what the files lack (``run_import``'s overrides).
UPLOAD_OVERRIDES = ("commit", "branch", "ci_url", "accelerator", "count", "precision", "model")
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
    *, team: Team, files: list[tuple[str, bytes]], fields: dict[str, str], uploaded_via: str = "api"
) -> tuple[dict[str, Any], bool]:
    """Import result files (or archives) as runs, all or none; return (result, all duplicates).

    Each run in the result carries its metrics against their series' baselines
    (``benchmarks.selectors.run_baseline_compare``), which is what ``accelboard upload`` prints."""
    from accelboard.benchmarks.imports import ImportRejected, run_import
    from accelboard.benchmarks.selectors import run_baseline_compare
    from accelboard.importers import ContextError, ParseError, UnrecognisedFormat, parse_bytes

    unknown = sorted(set(fields) - UPLOAD_FIELDS)
    if unknown:
        raise IngestRejected(
            f"unknown field; known: {', '.join(sorted(UPLOAD_FIELDS))}",
            path=unknown[0],
            code="extra_forbidden",
        )
    overrides = _context_lines(fields.get("context", ""))
    overrides.update({key: fields[key] for key in UPLOAD_OVERRIDES if fields.get(key, "").strip()})
    fmt = fields.get("format", "").strip() or None
    run_id = fields.get("run_id", "").strip() or None

    parsed = []
    for index, (name, data) in enumerate(files):
        try:
            runs = parse_bytes(data, filename=name, fmt=fmt)
        except UnrecognisedFormat as exc:
            raise IngestRejected(str(exc), path=f"file[{index}]", code="unrecognised_format") from None
        except ParseError as exc:
            raise IngestRejected(str(exc), path=f"file[{index}]", code="parse_error") from None
        except ContextError as exc:
            raise IngestRejected(str(exc), path="format", code="invalid") from None
        parsed.extend((index, name, data, run) for run in runs)
    if run_id is not None and len(parsed) != 1:
        raise IngestRejected(
            f"a run_id names one run; these files hold {len(parsed)}", path="run_id", code="invalid"
        )

    stored = []
    with transaction.atomic():
        for index, name, data, run in parsed:
            try:
                row, created = run_import(
                    team=team,
                    parsed=run,
                    raw_name=name,
                    raw_bytes=data,
                    uploaded_via=uploaded_via,
                    overrides=overrides,
                    run_uuid=run_id,
                )
            except ImportRejected as exc:
                status = 409 if exc.field == "run_id" else 422
                raise IngestRejected(
                    exc.message, path=exc.field or f"file[{index}]", code="import_rejected", status=status
                ) from None
            stored.append((name, row, created))
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
                "variant": row.workload.variant.name,
                "accelerator": row.accelerator_type.name if row.accelerator_type else None,
                "accelerator_count": row.accelerator_count,
                "warnings": list(row.context.get("warnings", [])),
                "metrics": run_baseline_compare(run=row),
            }
        )
    duplicate = all(item["duplicate"] for item in items)
    return {"runs": items, "duplicate": duplicate}, duplicate


# --- Serving metrics --------------------------------------------------------------------------


def inference_batch_ingest(*, team: Team, payload: dict[str, Any]) -> dict[str, Any]:
    """Store one batch of serving-metric intervals; idempotent on batch_id."""
    intervals = [IntervalInput(**item) for item in payload["intervals"]]

    def write() -> dict[str, Any]:
        host = _team_host(team=team, hostname=payload["host"], path="host")
        accepted = inference_metrics_store(
            team=team, host=host, batch_id=payload["batch_id"], intervals=intervals
        )
        return {"batch_id": payload["batch_id"], "accepted": accepted}

    result, _ = _batch_write(team=team, kind=BatchKind.INFERENCE, client_id=payload["batch_id"], write=write)
    return result
