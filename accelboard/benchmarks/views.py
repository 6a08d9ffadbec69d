"""Benchmark pages: runs list, run detail and raw file, compare, and the upload page.

Thin: each view decides the teams the user may see, parses its input with a form, calls
selectors (reads) or the import service (writes), and renders. A run of a team the user is not
in is a 404, not a 403, so that ids of other teams' runs reveal nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.paginator import Paginator
from django.db import transaction
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accelboard.core.choices import Role
from accelboard.core.models import Membership, Team
from accelboard.core.selectors import team_ids_visible
from accelboard.fleet.models import AcceleratorType
from accelboard.importers import ContextError, ParseError, UnrecognisedFormat, parse_bytes

from . import charts, selectors_pages
from .forms import RunFilterForm, UploadOverridesForm, UploadTeamForm
from .imports import ImportRejected, run_import, run_import_preview
from .metrics import metric_label
from .models import BenchmarkRun
from .selectors import run_baseline_compare
from .upload_store import UploadExpired, upload_discard, upload_load, upload_stash

RUNS_PER_PAGE = 50
# More ids than this on one side of a compare is a mistake or an attempt at a heavy query.
COMPARE_MAX_RUNS = 50
# Per file; an MLPerf results archive with detail logs is tens of MB at most.
UPLOAD_MAX_BYTES = 64 * 1024 * 1024
UPLOAD_MAX_FILES = 50


def _team_scope(request: HttpRequest) -> list[int] | None:
    """None means every team (staff); otherwise the ids of the user's teams."""
    if request.user.is_staff:
        return None
    return team_ids_visible(user=request.user)


def _visible_run(request: HttpRequest, run_id: int) -> BenchmarkRun:
    try:
        return selectors_pages.run_get_visible(run_id=run_id, team_ids=_team_scope(request))
    except BenchmarkRun.DoesNotExist as exc:
        raise Http404("No such run in your teams") from exc


# --- runs list ----------------------------------------------------------------------------------


@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    team_ids = _team_scope(request)
    form = RunFilterForm(request.GET or None, choices=selectors_pages.run_filter_choices(team_ids=team_ids))
    if request.GET and not form.is_valid():
        return render(
            request, "benchmarks/run_list.html", {"form": form, "page": None, "filtered": True}, status=400
        )
    filters = form.filters() if request.GET else selectors_pages.RunFilters()
    runs = selectors_pages.run_list_filtered(team_ids=team_ids, filters=filters)
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "form": form,
        "page": page,
        "filtered": filters != selectors_pages.RunFilters(),
        "query": query.urlencode(),
        "no_team": team_ids == [],
        "can_upload": bool(_upload_teams(request).exists()),
    }
    return render(request, "benchmarks/run_list.html", context)


# --- run detail ---------------------------------------------------------------------------------


@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _visible_run(request, run_id)
    metrics = selectors_pages.run_metrics(run=run)
    history = selectors_pages.run_metric_history(run=run)
    baseline = {entry["name"]: entry for entry in run_baseline_compare(run=run)}
    rows = []
    for value in metrics:
        points = history.get(value.series_id, [])
        rows.append(
            {
                "value": value,
                "label": metric_label(value.name),
                "baseline": baseline.get(value.name),
                "points": len(points),
                "chart_id": f"history-{value.pk}",
                "figure_id": f"history-{value.pk}-data",
                "figure": charts.metric_history_figure(
                    points=points,
                    label=metric_label(value.name),
                    unit=value.unit,
                    direction=value.direction,
                    run_id=run.pk,
                ),
            }
        )
    baseline_ids = selectors_pages.run_baseline_ids(run=run)
    context = {
        "run": run,
        "rows": rows,
        # A one-point chart says nothing: chart series with history, count the others.
        "charted": [row for row in rows if row["points"] >= 2],
        "first_of_series": sum(1 for row in rows if row["points"] < 2),
        "field_sources": sorted((run.field_sources or {}).items()),
        "baseline_count": len(baseline_ids),
        "history_points": selectors_pages.HISTORY_POINTS,
    }
    return render(request, "benchmarks/run_detail.html", context)


@require_GET
def run_raw(request: HttpRequest, run_id: int) -> FileResponse:
    run = _visible_run(request, run_id)
    if not run.raw_file:
        raise Http404("This run was recorded without a raw file (sent as JSON through the API)")
    try:
        handle = run.raw_file.open("rb")
    except FileNotFoundError as exc:
        raise Http404("The raw file of this run is missing from storage") from exc
    return FileResponse(
        handle, as_attachment=True, filename=run.raw_filename or run.raw_file.name.rsplit("/", 1)[-1]
    )


@require_GET
def run_compare_baseline(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _visible_run(request, run_id)
    ids = selectors_pages.run_baseline_ids(run=run)
    if not ids:
        return render(request, "benchmarks/compare.html", {"error": None, "no_baseline": run}, status=200)
    a = ",".join(str(pk) for pk in reversed(ids))
    return redirect(f"{reverse('benchmarks:compare')}?a={a}&b={run.pk}")


# --- compare ------------------------------------------------------------------------------------


def _ids(request: HttpRequest, name: str) -> list[int]:
    raw = request.GET.get(name, "").strip()
    if not raw:
        raise ValueError(f"{name}: give one run id or several separated by commas (?a=1,2&b=3)")
    ids = []
    for part in raw.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"{name}: {part!r} is not a run id")
        ids.append(int(part))
    if len(ids) > COMPARE_MAX_RUNS:
        raise ValueError(f"{name}: at most {COMPARE_MAX_RUNS} runs per side")
    if len(set(ids)) != len(ids):
        raise ValueError(f"{name}: a run is listed twice")
    return ids


@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    if "a" not in request.GET and "b" not in request.GET:
        return render(request, "benchmarks/compare.html", {"error": None, "result": None})
    try:
        ids_a, ids_b = _ids(request, "a"), _ids(request, "b")
    except ValueError as exc:
        return render(request, "benchmarks/compare.html", {"error": str(exc), "result": None}, status=400)
    if set(ids_a) & set(ids_b):
        return render(
            request,
            "benchmarks/compare.html",
            {"error": "a, b: a run cannot be on both sides", "result": None},
            status=400,
        )
    try:
        result = selectors_pages.runs_compare(ids_a=ids_a, ids_b=ids_b, team_ids=_team_scope(request))
    except BenchmarkRun.DoesNotExist as exc:
        raise Http404("No such run in your teams") from exc
    rows = [{"row": row, "label": metric_label(row.metric)} for row in result.rows]
    context = {"error": None, "result": result, "rows": rows, "differs": _differences(result)}
    return render(request, "benchmarks/compare.html", context)


def _differences(result: selectors_pages.CompareResult) -> list[str]:
    """What the two sides do not share: a delta across models or hardware is not a regression."""
    aspects = {
        "model": lambda run: run.workload.variant.model.name,
        "variant": lambda run: run.workload.variant.name,
        "scenario": lambda run: run.workload.get_scenario_display(),
        "hardware": lambda run: f"{run.accelerator_count}× {run.accelerator_type or 'unknown'}",
    }
    differs = []
    for name, read in aspects.items():
        side_a = {read(run) for run in result.runs_a}
        side_b = {read(run) for run in result.runs_b}
        if side_a != side_b:
            differs.append(f"{name} ({', '.join(sorted(side_a))} vs {', '.join(sorted(side_b))})")
    return differs


# --- upload -------------------------------------------------------------------------------------


def _upload_teams(request: HttpRequest) -> Any:
    """Teams the user may upload runs to: leads and engineers of a team; staff, every team."""
    if request.user.is_staff:
        return Team.objects.all()
    team_ids = Membership.objects.filter(
        user=request.user, role__in=[Role.TEAM_LEAD, Role.ENGINEER]
    ).values_list("team_id", flat=True)
    return Team.objects.filter(pk__in=team_ids)


def _forbidden_upload(request: HttpRequest) -> HttpResponse | None:
    if not _upload_teams(request).exists():
        return render(request, "benchmarks/upload_forbidden.html", status=403)
    return None


@require_GET
def upload(request: HttpRequest) -> HttpResponse:
    if (denied := _forbidden_upload(request)) is not None:
        return denied
    teams = list(_upload_teams(request))
    context = {
        "teams": teams,
        "precisions": UploadOverridesForm.base_fields["precision"].choices,  # type: ignore[attr-defined]
        "max_mb": UPLOAD_MAX_BYTES // (1024 * 1024),
        "max_files": UPLOAD_MAX_FILES,
        # Saving refuses an accelerator the catalogue does not know: offer the known ones.
        "accelerator_names": list(AcceleratorType.objects.values_list("name", flat=True)),
    }
    return render(request, "benchmarks/upload.html", context)


def _json_error(message: str, status: int, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


def _parsed_preview(parsed: Any) -> dict[str, Any]:
    """What the page shows of one parsed run: the import service's own preview (so the page shows
    exactly what saving would store, and what it would refuse), flattened for upload.js."""
    preview = run_import_preview(parsed, {})
    variant = preview.get("variant") or {}
    hardware = preview.get("hardware") or {}
    return {
        "format": preview["source_format"],
        "model": preview.get("model", parsed.model),
        "variant": variant.get("name", ""),
        "precision": variant.get("precision", ""),
        "accelerator": hardware.get("accelerator", ""),
        "accelerator_type": hardware.get("accelerator_type"),
        "accelerator_count": hardware.get("count"),
        "started_at": preview.get("started_at"),
        "metrics": [{**metric, "label": metric_label(metric["name"])} for metric in preview["metrics"]],
        # The importers' "give it with --context" hints speak to the CLI; "missing" says the same
        # in the page's terms, next to the field to fill.
        "warnings": [w for w in preview["warnings"] if "--context" not in w],
        "missing": preview["missing"],
        "rejected": preview["rejected"],
    }


def _parse_upload(name: str, data: bytes) -> list[Any]:
    return parse_bytes(data, filename=name)


@require_POST
def upload_preview(request: HttpRequest) -> JsonResponse:
    if not _upload_teams(request).exists():
        return _json_error("only engineers and team leads may upload runs", 403)
    files = request.FILES.getlist("files")
    if not files:
        return _json_error("files: choose at least one file", 400)
    if len(files) > UPLOAD_MAX_FILES:
        return _json_error(f"files: at most {UPLOAD_MAX_FILES} files per upload", 400)
    stashed: list[tuple[str, bytes]] = []
    results: list[dict[str, Any]] = []
    for index, upload_file in enumerate(files):
        name = upload_file.name or f"file-{index}"
        entry: dict[str, Any] = {
            "index": index,
            "name": name,
            "size": upload_file.size,
            "runs": [],
            "error": "",
        }
        if upload_file.size > UPLOAD_MAX_BYTES:
            entry["error"] = f"{name}: larger than {UPLOAD_MAX_BYTES // (1024 * 1024)} MB"
            data = b""
        else:
            data = upload_file.read()
            try:
                entry["runs"] = [_parsed_preview(run) for run in _parse_upload(name, data)]
            except (ParseError, UnrecognisedFormat, ContextError) as exc:
                entry["error"] = str(exc)
        stashed.append((name, data))
        results.append(entry)
    token = upload_stash(user_id=request.user.pk, files=stashed)
    return JsonResponse({"token": token, "files": results})


def _run_uuid(token: str, file_index: int, run_index: int) -> uuid.UUID:
    # The same preview saved twice (a double click, a retry) yields the same runs, not copies.
    return uuid.uuid5(uuid.NAMESPACE_URL, f"accelboard-upload:{token}:{file_index}:{run_index}")


@require_POST
def upload_save(request: HttpRequest) -> JsonResponse:
    teams = _upload_teams(request)
    if not teams.exists():
        return _json_error("only engineers and team leads may upload runs", 403)
    team_form = UploadTeamForm(request.POST, teams=teams)
    if not team_form.is_valid():
        return _json_error("team: choose one of your teams", 400)
    team = team_form.cleaned_data["team"]
    token = request.POST.get("token", "")
    try:
        stashed = upload_load(token=token, user_id=request.user.pk)
    except UploadExpired as exc:
        return _json_error(f"token: {exc}", 400)
    results: list[dict[str, Any]] = []
    for item in stashed:
        prefix = f"f{item.index}-"
        form = UploadOverridesForm(
            {k[len(prefix) :]: v for k, v in request.POST.items() if k.startswith(prefix)}
        )
        entry: dict[str, Any] = {"index": item.index, "name": item.name, "runs": [], "error": ""}
        results.append(entry)
        if not form.is_valid():
            field, errors = next(iter(form.errors.items()))
            entry["error"] = f"{field}: {errors[0]}"
            continue
        try:
            parsed_runs = _parse_upload(item.name, item.data)
        except (ParseError, UnrecognisedFormat, ContextError) as exc:
            entry["error"] = str(exc)
            continue
        try:
            # One file is all or nothing: an archive whose third run is rejected stores none.
            with transaction.atomic():
                for run_index, parsed in enumerate(parsed_runs):
                    run, created = run_import(
                        team=team,
                        parsed=parsed,
                        raw_name=item.name,
                        raw_bytes=item.data,
                        uploaded_by=request.user,
                        uploaded_via="web",
                        overrides=form.overrides(),
                        run_uuid=_run_uuid(token, item.index, run_index),
                    )
                    entry["runs"].append(
                        {
                            "id": run.pk,
                            "url": reverse("benchmarks:run_detail", args=[run.pk]),
                            "created": created,
                        }
                    )
        except ImportRejected as exc:
            entry["runs"] = []
            entry["error"] = str(exc)
    if not any(entry["error"] for entry in results):
        upload_discard(token=token)
    # 422 when any file failed: the saved ones are listed too, and saving again after a fix keeps
    # them (same run ids) while the failed files get another chance.
    status = 422 if any(entry["error"] for entry in results) else 200
    return JsonResponse({"token": token, "files": results}, status=status)
