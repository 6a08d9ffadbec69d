"""Benchmark pages: runs list, run detail and raw file, compare, and the upload page.

Thin: each view takes the caller's scope (``core.access``), parses its input with a form or a
filter set, calls selectors (reads) or the upload services (writes), and renders. A run of a team
the caller may not see is a 404, not a 403, so that ids of other teams' runs reveal nothing.
In ``dashboard`` because the run page shows the alerts app's verdicts beside the runs' numbers,
and the runs list and the upload page the profiles app's traces.
"""

from __future__ import annotations

import re
from typing import Any, cast
from urllib.parse import urlencode

from django import forms
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accelboard.alerts.selectors import run_baseline_compare, run_baseline_runs
from accelboard.benchmarks import arrival_services as arrival
from accelboard.benchmarks import selectors as run_selectors
from accelboard.benchmarks import table_selectors as run_table
from accelboard.benchmarks.catalogue_selectors import (
    Catalogues,
    accelerator_choices,
    catalogues_for,
    model_choices_for,
)
from accelboard.benchmarks.import_selectors import run_import_preview
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.benchmarks.upload_services import RunRead, UploadExpired, upload_load
from accelboard.core.access import Action, request_scope
from accelboard.core.middleware import SignedInRequest
from accelboard.core.numbers import column_decimals, column_fits, display_unit, fixed, sig
from accelboard.core.selectors import team_list_visible
from accelboard.costs.selectors import run_cost_summary
from accelboard.fleet import charts as fleet_charts
from accelboard.fleet import selectors as fleet_selectors
from accelboard.importers.metrics import metric_label
from accelboard.profiles.selectors import run_ids_with_profiles, run_profile_steps
from accelboard.profiles.upload_services import UPLOAD_PROFILES

from . import run_charts as charts
from .run_forms import NEW, UploadOverridesForm, UploadTeamForm

RUNS_PER_PAGE = 50
# More ids than this on one side of a compare is a mistake or an attempt at a heavy query.
COMPARE_MAX_RUNS = 50
# Per file; an MLPerf results archive with detail logs is tens of MB at most.
UPLOAD_MAX_BYTES = 64 * 1024 * 1024
UPLOAD_MAX_FILES = 50


def _visible_run(request: HttpRequest, run_id: int) -> BenchmarkRun:
    try:
        return run_selectors.run_get_visible(run_id=run_id, scope=request_scope(request))
    except BenchmarkRun.DoesNotExist as exc:
        raise Http404("No such run in your teams") from exc


# --- runs list ----------------------------------------------------------------------------------


# Query keys of the table itself (not filters): kept apart when a form carries the filters along.
_TABLE_KEYS = ("col", "sort", "page", "tick", "compare")


def _filters_query(request: HttpRequest, *drop: str) -> list[tuple[str, str]]:
    """The query string's (key, value) pairs without ``drop`` (hidden inputs of the table's forms)."""
    return [(key, value) for key, values in request.GET.lists() if key not in drop for value in values]


def _compare_ticked(request: HttpRequest) -> HttpResponse | None:
    """Ticked runs to the compare page: A the older ticked runs, B the newest. None (the list
    says why) with fewer than two visible runs ticked."""
    ids = [int(v) for v in request.GET.getlist("tick") if v.isdigit()][:COMPARE_MAX_RUNS]
    runs = run_table.runs_ticked(scope=request_scope(request), ids=ids)
    if len(runs) < 2:
        return None
    a = ",".join(str(run.pk) for run in runs[:-1])
    return redirect(f"{reverse('benchmarks:compare')}?a={a}&b={runs[-1].pk}")


def _metric_columns(
    names: list[str], runs: list[BenchmarkRun], cells: dict[int, Any]
) -> list[dict[str, Any]]:
    """Each picked metric as a column: label, display unit and one number of decimals for the
    page's values (bytes in GiB)."""
    columns = []
    for name in names:
        units = [cells.get(run.pk, {}).get(name, {}).get("unit") for run in runs]
        unit = next((u for u in units if u), "")
        shown, scale = display_unit(unit)
        values = [cells[run.pk][name]["value"] / scale for run in runs if name in cells.get(run.pk, {})]
        decimals = column_decimals(values, significant=3, most=4)
        columns.append(
            {
                "name": name,
                "label": metric_label(name),
                "unit": shown,
                "scale": scale,
                "decimals": decimals,
                # A column too wide in magnitude for one format within the rules ("112.9180"
                # beside "0.0066") is written value by value, four significant digits each.
                "per_value": not column_fits(values, decimals),
            }
        )
    return columns


@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    """The runs table: the filters, metric columns the reader picks (``col``), a sort by any
    column (``sort``), and ticks to compare (``tick`` + ``compare``)."""
    scope = request_scope(request)
    message = None
    if request.GET.get("compare"):
        answer = _compare_ticked(request)
        if answer is not None:
            return answer
        message = "Tick at least two runs to compare: the older ones are A (the reference), the newest B."
    filterset = run_selectors.run_filterset(scope=scope, data=request.GET or None)
    try:
        sort = run_table.run_sort_parse(request.GET.get("sort"))
        picked = run_table.run_columns_parse(request.GET.getlist("col"))
    except run_table.BadTableParameter as exc:
        return render(
            request,
            "benchmarks/run_list.html",
            {"form": filterset.form, "page": None, "filtered": True, "bad_parameter": str(exc)},
            status=400,
        )
    if request.GET and not filterset.is_valid():
        return render(
            request,
            "benchmarks/run_list.html",
            {"form": filterset.form, "page": None, "filtered": True},
            status=400,
        )
    available = run_table.run_metric_columns(runs=filterset.qs)
    names = picked or [name for name, _ in available[: run_table.DEFAULT_COLUMNS]]
    runs = run_table.runs_sorted(runs=filterset.qs, sort=sort)
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    on_page = list(page.object_list)
    cells = run_table.run_metric_cells(run_ids=[run.pk for run in on_page], names=names)
    columns = _metric_columns(names, on_page, cells)
    rows = [
        {
            "run": run,
            "metrics": [
                (
                    sig(cells[run.pk][c["name"]]["value"] / c["scale"], digits=4)
                    if c["per_value"]
                    else fixed(cells[run.pk][c["name"]]["value"] / c["scale"], c["decimals"])
                )
                if c["name"] in cells.get(run.pk, {})
                else "—"
                for c in columns
            ],
        }
        for run in on_page
    ]
    keep = _filters_query(request, "sort", "page", "tick", "compare")
    headers = {
        key: urlencode([*keep, ("sort", sort.toggled(key))])
        for key in [*run_table.FIELD_SORTS, *(run_table.METRIC_SORT + c["name"] for c in columns)]
    }
    for column in columns:
        column["sort_query"] = headers[run_table.METRIC_SORT + column["name"]]
        column["sorted"] = sort.metric == column["name"]
    query = request.GET.copy()
    for key in ("page", "tick", "compare"):
        query.pop(key, None)
    context = {
        "form": filterset.form,
        "page": page,
        "rows": rows,
        "columns": columns,
        "available": [(name, metric_label(name), count) for name, count in available],
        "picked": names,
        "sort": sort,
        "sort_queries": headers,
        "filters_hidden": _filters_query(request, *_TABLE_KEYS),
        "filters_and_columns_hidden": _filters_query(request, "page", "tick", "compare"),
        "message": message,
        "filtered": filterset.is_active,
        "query": query.urlencode(),
        "no_team": scope.sees_no_team,
        "can_upload": _can_upload(request),
        "profiled": run_ids_with_profiles(run_ids=[run.pk for run in on_page], scope=scope),
    }
    return render(request, "benchmarks/run_list.html", context)


# --- run detail ---------------------------------------------------------------------------------


def _cost_decimals(cost: dict[str, Any] | None) -> int:
    """One number of decimals for the cost card's total and its parts: four significant digits
    of the total (at least money's two), so "0.07000 = 0.06509 + 0.00491" visibly adds up
    where each written to its own precision read "0.07" beside "0.06509" and "0.004908"."""
    total = cost.get("total_per_1m") if cost else None
    return max(2, column_decimals([total], significant=4, most=6))


@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _visible_run(request, run_id)
    metrics = run_selectors.run_metrics(run=run)
    history = run_selectors.run_metric_history(run=run)
    later = run_selectors.run_metric_later_counts(run=run)
    baseline = {entry["name"]: entry for entry in run_baseline_compare(run=run)}
    rows: list[dict[str, Any]] = []
    for value in metrics:
        points = history.get(value.series_id, [])
        rows.append(
            {
                "value": value,
                "label": metric_label(value.name),
                "baseline": baseline.get(value.name),
                "points": len(points),
                "later": later.get(value.series_id, 0),
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
    baseline_ids = run_baseline_runs(run=run)
    cost = run_cost_summary(scope=request_scope(request), run=run)
    gpus, averages = fleet_selectors.run_window_profiling(
        host_id=run.host_id,
        accelerator_type_id=run.accelerator_type_id,
        start=run.started_at,
        end=run.finished_at,
    )
    context = {
        "run": run,
        "rows": rows,
        # A one-point chart says nothing: chart series with history, count the others.
        "charted": [row for row in rows if row["points"] >= 2],
        # Alone in its series so far, or the first of a series that went on (its history is after it).
        "first_of_series": sum(1 for row in rows if row["points"] < 2 and not row["later"]),
        "first_with_later": [row for row in rows if row["points"] < 2 and row["later"]],
        "field_sources": sorted((run.field_sources or {}).items()),
        "baseline_count": len(baseline_ids),
        "history_points": run_selectors.HISTORY_POINTS,
        "cost": cost,
        "cost_decimals": _cost_decimals(cost),
        "profiling": fleet_charts.profiling_rows(averages=averages, gpus=gpus),
        "profiling_labels": list(fleet_charts.PROFILING_LABELS.values()),
        # A training run's profile: its per-step table (issue 38).
        "profile_steps": run_profile_steps(run=run),
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
        handle, as_attachment=True, filename=run.raw_filename or (run.raw_file.name or "").rsplit("/", 1)[-1]
    )


@require_GET
def run_compare_baseline(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _visible_run(request, run_id)
    ids = run_baseline_runs(run=run)
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
        result = run_selectors.runs_compare(ids_a=ids_a, ids_b=ids_b, scope=request_scope(request))
    except BenchmarkRun.DoesNotExist as exc:
        raise Http404("No such run in your teams") from exc
    rows = [{"row": row, "label": metric_label(row.metric)} for row in result.rows]
    context = {"error": None, "result": result, "rows": rows, "differs": _differences(result)}
    return render(request, "benchmarks/compare.html", context)


def _differences(result: run_selectors.CompareResult) -> list[str]:
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
    """Teams the caller may upload runs to (leads and engineers of a team; staff, every team)."""
    return team_list_visible(scope=request_scope(request), action=Action.UPLOAD)


def _can_upload(request: HttpRequest) -> bool:
    return bool(_upload_teams(request).exists())


def _forbidden_upload(request: HttpRequest) -> HttpResponse | None:
    if not _can_upload(request):
        return render(request, "benchmarks/upload_forbidden.html", status=403)
    return None


def _upload_team(request: HttpRequest) -> Any:
    """The team the upload goes to: the posted one among the caller's, else the first."""
    form = UploadTeamForm(request.POST, teams=_upload_teams(request))
    return form.cleaned_data["team"] if form.is_valid() else _upload_teams(request).first()


def _choices(name: str) -> list[Any]:
    """The choices of one of the upload form's select fields (given as lists, so lists: django-stubs
    types ``choices`` as anything a field accepts)."""
    choices: Any = cast(forms.ChoiceField, UploadOverridesForm.base_fields[name]).choices
    return list(choices)


@require_GET
def upload(request: HttpRequest) -> HttpResponse:
    if (denied := _forbidden_upload(request)) is not None:
        return denied
    teams = list(_upload_teams(request))
    context = {
        "teams": teams,
        "precisions": _choices("precision"),
        "scenarios": _choices("scenario"),
        "max_mb": UPLOAD_MAX_BYTES // (1024 * 1024),
        "max_files": UPLOAD_MAX_FILES,
        # The pickers: the catalogue's models the teams may name, every accelerator type.
        "catalogue": {
            "models": [[choice.value, choice.label] for choice in model_choices_for(teams=teams)],
            "accelerators": [[choice.value, choice.label] for choice in accelerator_choices()],
            "vendors": _choices("accelerator_vendor")[1:],
            "form_factors": _choices("accelerator_form_factor")[1:],
            "new": NEW,
        },
    }
    return render(request, "benchmarks/upload.html", context)


def _json_error(message: str, status: int, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


def _run_preview(run: RunRead, names: dict[int, str], team: Any, catalogues: Catalogues) -> dict[str, Any]:
    """What the page shows of one run: the import service's own preview (so the page shows exactly
    what saving would store, what it would refuse, and what each name resolves to)."""
    preview = run_import_preview(run.parsed, {}, team=team, catalogues=catalogues)
    variant = preview.get("variant") or {}
    hardware = preview.get("hardware") or {}
    return {
        "index": run.index,
        "files": [names[index] for index in run.files],
        "format": preview["source_format"],
        "model": preview.get("model", run.parsed.model),
        "identity": preview.get("identity"),
        "variant": variant.get("name", ""),
        "precision": variant.get("precision", ""),
        # the scenario the run would be stored under, and whether a file (not a default) said it
        "scenario": (preview.get("workload") or {}).get("scenario", ""),
        "scenario_stated": (preview.get("field_sources") or {}).get("workload.scenario") != "default",
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


@require_POST
def upload_preview(request: SignedInRequest) -> JsonResponse:
    if not _can_upload(request):
        return _json_error("only engineers and team leads may upload runs", 403)
    files = request.FILES.getlist("files")
    if not files:
        return _json_error("files: choose at least one file", 400)
    if len(files) > UPLOAD_MAX_FILES:
        return _json_error(f"files: at most {UPLOAD_MAX_FILES} files per upload", 400)
    # A folder's files come with their paths in the folder (``paths``, in the files' order): the
    # upload keeps only base names, and MLPerf results name their system and model by folder.
    paths = request.POST.getlist("paths")
    names = paths if len(paths) == len(files) and all(paths) else [f.name for f in files]
    given = [
        (name or f"file-{index}", None if (f.size or 0) > UPLOAD_MAX_BYTES else f.read())
        for index, (name, f) in enumerate(zip(names, files, strict=True))
    ]
    # The files are one submission; a profiler trace goes with the run saved from the others.
    token, submission, profiles = arrival.upload_preview(
        user_id=request.user.pk,
        files=given,
        profiles=UPLOAD_PROFILES,
        too_large=f"larger than {UPLOAD_MAX_BYTES // (1024 * 1024)} MB",
    )
    team = _upload_team(request)
    catalogues = catalogues_for(team=team)  # once, whatever the number of runs
    file_names = {read.index: read.name for read in submission.files}
    return JsonResponse(
        {
            "token": token,
            "files": [
                {
                    "index": read.index,
                    "name": read.name,
                    "size": files[read.index].size,
                    "runs": read.runs,
                    "profile": profiles.get(read.index),
                    "error": read.error,
                }
                for read in submission.files
            ],
            "runs": [_run_preview(run, file_names, team, catalogues) for run in submission.runs],
        }
    )


@require_POST
def upload_save_view(request: SignedInRequest) -> JsonResponse:
    if not _can_upload(request):
        return _json_error("only engineers and team leads may upload runs", 403)
    team_form = UploadTeamForm(request.POST, teams=_upload_teams(request))
    if not team_form.is_valid():
        return _json_error("team: choose one of your teams", 400)
    token = request.POST.get("token", "")
    try:
        stashed = upload_load(token=token, user_id=request.user.pk)
    except UploadExpired as exc:
        return _json_error(f"token: {exc}", 400)
    # Each run's fields come as r<index>-<field>; a run whose fields do not validate is refused.
    prefixes = {int(key[1:].split("-", 1)[0]) for key in request.POST if re.match(r"^r\d+-", key)}
    overrides: dict[int, dict[str, Any]] = {}
    refused: dict[int, str] = {}
    for index in prefixes:
        prefix = f"r{index}-"
        form = UploadOverridesForm(
            {k[len(prefix) :]: v for k, v in request.POST.items() if k.startswith(prefix)}
        )
        if form.is_valid():
            overrides[index] = form.overrides()
        else:
            field, errors = next(iter(form.errors.items()))
            refused[index] = f"{field}: {errors[0]}"
    saved, reads, attached = arrival.upload_save(
        team=team_form.cleaned_data["team"],
        token=token,
        user=request.user,
        files=stashed,
        overrides=overrides,
        refused=refused,
        profiles=UPLOAD_PROFILES,
    )
    runs = [
        {
            "index": item.index,
            "id": item.run_id,
            "url": reverse("benchmarks:run_detail", args=[item.run_id]) if item.run_id else None,
            "created": item.created,
            "error": item.error,
        }
        for item in saved
    ]
    files_out: list[dict[str, Any]] = [
        {"index": read.index, "name": read.name, "error": read.error} for read in reads if read.error
    ]
    if attached is not None:
        # The traces of the upload, as one entry: the profile of the run saved with them.
        entry: dict[str, Any] = {"index": attached.index, "name": attached.name, "error": attached.error}
        if attached.run_id is not None:
            entry["profile_url"] = reverse("profiles:run_profile", args=[attached.run_id])
        files_out.append(entry)
    # 422 when any run or file failed: the saved runs are listed too, and saving again after a
    # fix keeps them (same run ids) while the failed ones get another chance.
    failed = any(run["error"] for run in runs) or any(entry["error"] for entry in files_out)
    return JsonResponse({"token": token, "runs": runs, "files": files_out}, status=422 if failed else 200)
