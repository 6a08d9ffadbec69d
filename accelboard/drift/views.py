"""Quantization pages: the overview across models and the per-model page.

Thin: take the caller's scope (``core.access``), call one selector, build the figures and render.
A model none of the caller's teams has run is a 404 (ids of other teams' models reveal nothing).
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accelboard.benchmarks.models import Model
from accelboard.core.access import request_scope

from . import charts
from . import computation as c
from .page_selectors import LATEST_RUNS, drift_model_report
from .selectors import drift_overview_rows, model_get_visible


@require_GET
def drift_overview(request: HttpRequest) -> HttpResponse:
    scope = request_scope(request)
    rows = drift_overview_rows(scope=scope)
    counts = {
        verdict.replace("-", "_"): sum(1 for r in rows if r["task"].verdict == verdict)
        for verdict in c.VERDICT_ORDER
    }
    return render(
        request,
        "drift/overview.html",
        {
            "rows": rows,
            "counts": counts,
            "no_team": scope.sees_no_team,
            "horizon": int(c.HORIZON_DAYS),
            "risk_days": int(c.RISK_DAYS),
            "level_definition": c.LEVEL_DEFINITION,
        },
    )


@require_GET
def drift_model(request: HttpRequest, model_id: int) -> HttpResponse:
    scope = request_scope(request)
    try:
        model = model_get_visible(model_id=model_id, scope=scope)
    except Model.DoesNotExist as exc:
        raise Http404("No such model in your teams") from exc
    report = drift_model_report(model=model, scope=scope)
    # One point per variant and hardware against the reference on it; the reference itself is one
    # point at (0% loss, 1×) whatever hardware it ran on.
    points = [
        {
            "label": f"{row.variant_name} · {row.hardware.split(' · ')[0]}",
            "speedup": row.speedup,
            "loss": row.worst_loss,
            "verdict": row.verdict,
        }
        for row in report.rows
        if not row.is_reference
    ]
    if report.drift.reference is not None and any(row.is_reference for row in report.rows):
        points.insert(
            0,
            {
                "label": f"{report.drift.reference.name} (reference)",
                "speedup": 1.0,
                "loss": 0.0,
                "verdict": "reference",
            },
        )
    drift_charts: list[dict[str, Any]] = []
    for i, metric in enumerate(report.metrics):
        tasks = [t for t in report.drift.tasks if t.metric == metric and t.pairs]
        if not tasks:
            continue
        first = tasks[0]
        drift_charts.append(
            {
                "id": f"drift-{i}",
                "figure_id": f"drift-{i}-figure",
                "metric": metric,
                "figure": charts.drift_figure(
                    title=f"{first.task} · {first.task_metric}: accuracy loss over time",
                    variants=[
                        {"name": t.variant_name, "pairs": t.pairs, "change_points": t.change_points}
                        for t in tasks
                    ],
                    budget=first.budget,
                ),
            }
        )
    context = {
        "model": model,
        "report": report,
        "budget": model.drift_budget,
        "overrides": {t.task: t.budget for t in report.drift.tasks if t.budget != model.drift_budget},
        "pareto_figure": charts.pareto_figure(points=points, budget=model.drift_budget),
        "has_pareto": any(p["speedup"] is not None and p["loss"] is not None for p in points),
        "drift_charts": drift_charts,
        "agreement_figure": charts.agreement_figure(rows=report.agreement) if report.agreement else None,
        "horizon": int(c.HORIZON_DAYS),
        "latest_runs": LATEST_RUNS,
        "agreement_budget": c.AGREEMENT_BUDGET,
    }
    return render(request, "drift/model.html", context)
