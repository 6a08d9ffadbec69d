"""What an import would store, shown before it is stored: the upload page's preview of each run.

``run_import_preview`` runs the same steps as ``import_services.run_import`` (``import_plans``),
against the team's catalogues, and writes nothing. ``model_name_resolve`` and
``accelerator_type_resolve`` resolve one name each, for a run that arrives as JSON with its
identity stated (``arrival_services.run_payload_store``); ``team_host_get`` finds the host a run
names, for both.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from accelboard.core.models import Team
from accelboard.fleet.models import AcceleratorType, Host
from accelboard.importers import ParsedRun
from accelboard.importers.metrics import metric_spec

from .catalogue import AcceleratorCatalogue, Match, model_name_split
from .catalogue_selectors import Catalogues, accelerator_catalogue_for, catalogues_for, model_catalogue_for
from .import_plans import ImportIdentity, ImportRejected, import_identify, import_plan, jsonable


def _match_json(match: Match | None) -> dict[str, Any]:
    if match is None:
        return {"match": "", "alias": "", "source": "", "candidates": []}
    return {
        "match": match.how,
        "alias": match.alias,
        "source": match.source,
        "candidates": list(match.candidates),
    }


def _identity_json(identity: ImportIdentity, accelerators: AcceleratorCatalogue) -> dict[str, Any]:
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
        plan = import_plan(parsed, overrides, context)
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
    identity = import_identify(plan, catalogues.models, accelerators)
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
        "context": jsonable(plan.context),
        "warnings": list(run.warnings),
    }


def model_name_resolve(*, name: str, team: Team | None = None) -> tuple[str, str]:
    """The catalogue model ``name`` resolves to and how; a name it does not know without doubt is
    kept as its own model (never merged into a close one)."""
    match = model_catalogue_for(team=team).resolve(name)
    if match.resolved:
        return match.target, match.how
    return name, "new"


def accelerator_type_resolve(*, name: str, team: Team | None = None) -> tuple[AcceleratorType, str]:
    """The accelerator type the catalogue resolves ``name`` to without doubt, and how.

    Raises ``ImportRejected`` (field ``accelerator``) naming the types it could be when it is close
    to several, else the known types: an unknown accelerator is never added on the way."""
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
        raise ImportRejected(message, field="accelerator")
    return found, match.how


def team_host_get(*, team: Team, hostname: str) -> Host | None:
    """The team's host of that name; None for a name the team has no host by.

    A run that only mentions a host (a file's host, a JSON run's ``hardware.host``) never registers
    or claims one: hosts join a team when their agent sends telemetry with the team's token. So a
    name held by another team and a name nobody holds get the same answer."""
    return Host.objects.filter(team=team, hostname=hostname).first()
