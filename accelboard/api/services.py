"""Writes of the API: tokens, and each ingest endpoint handed to the app that owns it.

Every write carries a client id and is idempotent through ``core.idempotency_services``: fleet
claims a telemetry batch's id inside its own transaction; runs and serving batches are claimed
here around the owning app's write (``ingest_batch_write``). Each claim keeps the digest of the
validated body without its client id (``body_digest``): the same id with another body is a 409
``idempotency_key_reused`` naming the field, and nothing of it is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from accelboard.alerts.selectors import run_baseline_compare
from accelboard.benchmarks.arrival_services import (
    ProfileSaved,
    run_payload_read,
    run_payload_store,
    run_profile_attach,
    runs_upload,
)
from accelboard.core.choices import BatchKind
from accelboard.core.idempotency_services import IdempotencyKeyReused, body_digest, ingest_batch_write
from accelboard.core.models import Team
from accelboard.fleet import ingest_group, remote_write_services
from accelboard.fleet.ingest_services import idempotency_key_reused
from accelboard.fleet.ingest_validation import IngestRejected
from accelboard.profiles.upload_services import UPLOAD_PROFILES
from accelboard.serving.remote_write_services import prometheus_serving_ingest
from accelboard.serving.services import inference_batch_store

from .choices import TokenKind
from .models import ApiToken

# last_used_at is informative: one write a minute per token, not one per request.
TOKEN_TOUCH_INTERVAL = timedelta(minutes=1)
# A verified token's row is kept this long in the process that read it: a fleet's agents post
# hundreds of batches a second with one token, and reading its row for each was one round trip
# and a join per batch (docs/scaling.md). A revocation is honoured within this time in every
# process (at once in the one that revokes: ``token_revoke`` forgets what it kept).
TOKEN_CACHE_S = 5.0
# At most this many tokens kept per process (a team has a handful); past it, all are forgotten.
TOKEN_CACHE_SIZE = 1_024


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
    _verified.clear()
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


# Verified tokens' rows by the token's hash: (monotonic time it was read, row). Only tokens that
# matched an active row are kept (a wrong token is read every time and never fills it).
_verified: dict[str, tuple[float, ApiToken]] = {}


def token_authenticate(*, token: str) -> ApiToken | None:
    """The active token matching ``token``; raises ``IngestRejected`` (401) for a revoked one.

    The row of a token verified in the last ``TOKEN_CACHE_S`` seconds by this process is not
    read again: a revocation elsewhere is honoured once that time has passed."""
    if len(token) < 32 or len(token) > 128:
        return None
    digest = _hash(token)
    kept = _verified.get(digest)
    if kept is not None and time.monotonic() - kept[0] < TOKEN_CACHE_S:
        row = kept[1]
    else:
        read = _token_row(prefix=token[:8])
        if read is None or not hmac.compare_digest(read.secret_hash, digest):
            return None
        row = read
        if row.revoked_at is not None:
            _verified.pop(digest, None)
            raise IngestRejected("this API token was revoked", code="token_revoked", status=401)
        if len(_verified) >= TOKEN_CACHE_SIZE:
            _verified.clear()
        _verified[digest] = (time.monotonic(), row)
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at >= TOKEN_TOUCH_INTERVAL:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
        row.last_used_at = now
    return row


def telemetry_batch_ingest(*, team: Team, payload: Any) -> dict[str, Any]:
    """Validate and store one telemetry batch (docs/api-contract.md); idempotent on batch_id.

    Fleet does the whole ingest (``fleet.ingest_services.telemetry_batch_ingest``: validation,
    registration, partitions and their retry, the idempotency claim, COPY, the rollup mark and the
    drain request), with the batches other threads of this process store at the same time
    (``fleet.ingest_group``: one transaction for them all, each answered once it commits).
    """
    return ingest_group.telemetry_batch_ingest_grouped(team_id=team.pk, payload=payload)


def prometheus_write_ingest(*, team: Team, body: bytes) -> dict[str, Any]:
    """Store a Prometheus remote-write request's dcgm-exporter samples as telemetry
    (``fleet.remote_write_services``: an adapter onto the same ingest path) and its vLLM and Triton
    series as serving intervals (``serving.remote_write_services``, in the same transaction);
    idempotent on its body."""
    return remote_write_services.prometheus_write_ingest(
        team_id=team.pk, body=body, serving=prometheus_serving_ingest
    )


# --- Benchmark runs ---------------------------------------------------------------------------
# Each arrives through ``benchmarks.arrival_services``; the API adds its idempotent claim on the
# client's run id and, for files, each metric against its series' baseline in the answer.


def run_ingest(
    *, team: Team, payload: dict[str, Any], uploaded_by: Any = None
) -> tuple[dict[str, Any], bool]:
    """Record one benchmark run from a validated API payload; return (result, duplicate)."""
    run = run_payload_read(payload=payload)
    try:
        return ingest_batch_write(
            team_id=team.pk,
            kind=BatchKind.RUN,
            client_id=str(run.run_uuid),
            write=lambda: run_payload_store(team=team, run=run, uploaded_by=uploaded_by),
            digest=body_digest({k: v for k, v in payload.items() if k != "run_id"}),
        )
    except IdempotencyKeyReused as exc:
        raise idempotency_key_reused(exc, field="run_id") from None


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
    attached: list[ProfileSaved] = []
    stored = runs_upload(
        team=team,
        files=files,
        fields=fields,
        uploaded_via=uploaded_via,
        profile_files=profiles or (),
        profiles=UPLOAD_PROFILES,
        attached=attached,
    )
    profile_warnings = {saved.run_id: saved.warnings for saved in attached}
    items = []
    for saved in stored:
        row = saved.run
        assert row is not None  # runs_upload raises rather than skip a run
        items.append(
            {
                "run_id": str(row.uuid),
                "id": row.pk,
                "url": f"/runs/{row.pk}/",
                "duplicate": not saved.created,
                "file": saved.raw_name,
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
                **(
                    {
                        "profile_url": f"/runs/{row.pk}/profile/",
                        "profile_warnings": profile_warnings.get(row.pk, []),
                    }
                    if profiles
                    else {}
                ),
            }
        )
    duplicate = all(item["duplicate"] for item in items)
    return {"runs": items, "duplicate": duplicate}, duplicate


def run_profile_upload(
    *, team: Team, run_id: str, files: list[tuple[str, Any]], strict: bool = False
) -> dict[str, Any]:
    """Attach a profile to one of the team's runs, named by its client id (UUID) or its number;
    ``strict`` refuses a trace from other hardware than the run's."""
    return run_profile_attach(team=team, run_ref=run_id, files=files, profiles=UPLOAD_PROFILES, strict=strict)


# --- Serving metrics --------------------------------------------------------------------------


def inference_batch_ingest(*, team: Team, payload: dict[str, Any]) -> dict[str, Any]:
    """Store one batch of serving-metric intervals (``serving.services.inference_batch_store``);
    idempotent on batch_id."""
    try:
        result, _ = ingest_batch_write(
            team_id=team.pk,
            kind=BatchKind.INFERENCE,
            client_id=payload["batch_id"],
            write=lambda: inference_batch_store(team=team, payload=payload),
            digest=body_digest({k: v for k, v in payload.items() if k != "batch_id"}),
        )
    except IdempotencyKeyReused as exc:
        raise idempotency_key_reused(exc, field="batch_id") from None
    return result
