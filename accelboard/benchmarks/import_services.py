"""Store what an importer read: a ``ParsedRun`` (accelboard.importers) becomes a ``BenchmarkRun``.

The upload page, ``POST /api/v1/runs`` (multipart) and through it ``accelboard upload`` all call
``run_import``; the upload page shows ``import_selectors.run_import_preview`` first. Both rest on
the pure steps of ``import_plans``, so that the preview shows exactly what the import would store.

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
5. **Idempotent**: on ``run_uuid`` when given (a stored run of that id read from other files, or
   sent as JSON, is refused: ``idempotency_key_reused``); otherwise on the team, the sha256 of the contents
   of the files the run was read from (``ParsedRun.content_sha256``: names, folders and archives
   left out, so one result uploaded as loose files, as a folder or as a zip is one run) and a
   fingerprint of the run within them (one file may hold several runs) that reads only what the
   files say. The hash is kept in ``context["raw_sha256"]`` and the run's id is derived from it,
   so that two concurrent uploads of one file meet on the unique ``uuid`` and make one run.
6. **All or nothing**: the run, its series and metric values and the raw file are written in one
   transaction; the raw file is removed again when the transaction fails.
"""

from __future__ import annotations

import hashlib
import json
import uuid as uuid_lib
from pathlib import PurePosixPath
from typing import Any

from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction

from accelboard.core.models import Team
from accelboard.core.services import stored_file_track
from accelboard.fleet.catalogue_services import AcceleratorTypeRejected, accelerator_type_create
from accelboard.fleet.models import AcceleratorType
from accelboard.importers import ParsedRun

from .catalogue import model_name_split
from .catalogue_selectors import accelerator_catalogue_for, model_catalogue_for
from .catalogue_services import CatalogueRejected, accelerator_alias_set, model_alias_set
from .choices import IdentityMatch, UploadSource
from .import_plans import (
    ImportIdentity,
    ImportPlan,
    ImportRejected,
    import_identify,
    import_plan,
    jsonable,
    run_fingerprint,
)
from .import_selectors import team_host_get
from .models import BenchmarkRun, Model
from .services import WorkloadSpec, model_variant_get_or_create, run_record, workload_get_or_create

# uuid5 namespace of runs identified by their raw file's content (fixed forever: changing it
# would make a re-upload of an old file a second run).
_CONTENT_NAMESPACE = uuid_lib.UUID("5b0c5d43-8f7e-4f57-9a51-4b1d2a6f0c11")


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
    plan = import_plan(parsed, overrides, context)
    if plan.rejected is not None:
        raise ImportRejected(plan.rejected[1], field=plan.rejected[0])
    identity = import_identify(plan, model_catalogue_for(team=team), accelerator_catalogue_for(team=team))
    problems = plan.missing + identity.problems
    if problems:
        name, message = problems[0]
        others = [other for other, _ in problems[1:] if other != name]
        suffix = f" (also missing or invalid: {', '.join(dict.fromkeys(others))})" if others else ""
        raise ImportRejected(f"{PurePosixPath(parsed.source_file).name}: {message}{suffix}", field=name)

    # The run's content, not the upload's shape: loose files, a folder and an archive of one
    # result are one run (``content_sha256``: the files it was read from, names left out).
    sha = parsed.content_sha256
    if not sha:
        content = (
            raw_bytes
            if raw_bytes is not None
            else json.dumps(parsed.to_dict(), sort_keys=True, default=str).encode()
        )
        sha = hashlib.sha256(content).hexdigest()
    part = run_fingerprint(parsed)
    context_json = jsonable({**plan.context, "raw_sha256": sha, "raw_part": part})

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


def _accelerator_type_for(identity: ImportIdentity) -> AcceleratorType | None:
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
    *, team: Team, identity: ImportIdentity, model: Model, accelerator_type: AcceleratorType | None, user: Any
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
    plan: ImportPlan,
    identity: ImportIdentity,
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
        if existing is not None and (
            existing.context.get("raw_sha256"),
            existing.context.get("raw_part"),
        ) != (sha, part):
            # The key of a stored run with another body: not a retry (core.idempotency_services).
            raise ImportRejected(
                f"run_id {str(run_uuid)!r} was already used for a run read from other files: a retry "
                "must send the same files; another run needs a new run_id",
                field="run_id",
                code="idempotency_key_reused",
            )
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
        options=jsonable(run.workload.options),
    )
    workload = workload_get_or_create(team=team, variant=variant, spec=spec)
    host = team_host_get(team=team, hostname=run.hardware.host) if run.hardware.host else None
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
                field_sources=jsonable(run.field_sources),
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
