"""The Profile tab of a run, attaching a profile to it, and the comparison of two runs' profiles.

Thin: each view takes the caller's scope (``core.access``), reads through the profiles selectors
(a run the caller may not see is a 404, so ids reveal nothing) or attaches through the profiles
service, and renders. Attaching is what uploading runs is (``Action.UPLOAD``: leads and engineers
of the run's team, staff); anyone else gets a 403 with the reason.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.core.access import Action, request_scope

from . import charts, selectors
from .models import ANALYSIS_VERSION
from .services import ProfileRejected, profile_attach

MAX_FILES = 64


def _visible_run(request: HttpRequest, run_id: int) -> BenchmarkRun:
    try:
        return selectors.profile_run_get(run_id=run_id, scope=request_scope(request))
    except BenchmarkRun.DoesNotExist as exc:
        raise Http404("No such run in your teams") from exc


def _can_attach(request: HttpRequest, run: BenchmarkRun) -> bool:
    return request_scope(request).can(Action.UPLOAD, run.team_id)


def _page(request: HttpRequest, run: BenchmarkRun, *, error: str = "", status: int = 200) -> HttpResponse:
    profile = selectors.profile_for_run(run=run)
    context: dict[str, Any] = {
        "run": run,
        "can_attach": _can_attach(request, run),
        "error": error,
        "strict_checked": request.method == "POST" and request.POST.get("strict") == "on",
        "analysis_version": ANALYSIS_VERSION,
    }
    if profile is not None:
        page = selectors.profile_page(profile=profile, scope=request_scope(request))
        context.update(page)
        context["rank_figure"] = charts.breakdown_figure(
            windows=page["breakdowns"]["ranks"],
            label="rank",
            title="GPU time per rank (ms): each bar is the rank's timeline",
        )
        if page["breakdowns"]["steps"]:
            context["step_figure"] = charts.breakdown_figure(
                windows=page["breakdowns"]["steps"],
                label="step",
                title="GPU time per profiler step, all ranks (ms)",
            )
    return render(request, "profiles/run_profile.html", context, status=status)


@require_GET
def run_profile(request: HttpRequest, run_id: int) -> HttpResponse:
    return _page(request, _visible_run(request, run_id))


@require_POST
def run_profile_attach(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _visible_run(request, run_id)
    if not _can_attach(request, run):
        return _page(
            request,
            run,
            error="Only engineers and team leads of the run's team may attach profiles.",
            status=403,
        )
    uploads = request.FILES.getlist("profile")
    if not uploads:
        return _page(
            request,
            run,
            error="profile: choose the trace file(s) (one per rank) or nsys stats CSVs.",
            status=400,
        )
    if len(uploads) > MAX_FILES:
        return _page(request, run, error=f"profile: at most {MAX_FILES} files (one per rank).", status=400)
    try:
        profile_attach(
            run=run,
            files=[(upload.name or f"rank{i}", upload) for i, upload in enumerate(uploads)],
            uploaded_by=request.user,
            keep_raw=request.POST.get("keep_raw") == "on",
            strict=request.POST.get("strict") == "on",
        )
    except ProfileRejected as exc:
        return _page(request, run, error=_refusal(exc), status=400)
    return redirect("profiles:run_profile", run_id=run.pk)


def _refusal(exc: ProfileRejected) -> str:
    """The form's error: a strict refusal says it was asked for, what disagrees, and that nothing
    was stored (the earlier profile, if any, stays)."""
    if exc.code != "device_mismatch":
        return exc.message
    return (
        "Refused, nothing stored: " + "; ".join(exc.reasons) + ". You asked to refuse a trace whose device "
        "does not match the run; untick that box to attach it with this warning instead."
    )


def _run_id(request: HttpRequest, name: str) -> int:
    raw = request.GET.get(name, "").strip()
    if not raw.isdigit():
        raise ValueError(f"{name}: give one run id (?a=12&b=13)")
    return int(raw)


@require_GET
def profile_compare(request: HttpRequest) -> HttpResponse:
    try:
        id_a, id_b = _run_id(request, "a"), _run_id(request, "b")
    except ValueError as exc:
        return render(request, "profiles/compare.html", {"error": str(exc)}, status=400)
    run_a, run_b = _visible_run(request, id_a), _visible_run(request, id_b)
    context: dict[str, Any] = {"run_a": run_a, "run_b": run_b, "error": ""}
    result = selectors.profiles_compare_runs(run_a=run_a, run_b=run_b)
    if result is None:
        context["missing"] = [run for run in (run_a, run_b) if selectors.profile_for_run(run=run) is None]
        return render(request, "profiles/compare.html", context)
    profile_a, profile_b, comparison = result
    context.update(
        profile_a=profile_a,
        profile_b=profile_b,
        comparison=comparison,
        kernels=comparison.kernels[: selectors.COMPARE_KERNELS_SHOWN],
        figure=charts.compare_figure(rows=comparison.categories, unit=comparison.unit),
        analysis_version=ANALYSIS_VERSION,
    )
    return render(request, "profiles/compare.html", context)
