"""The hardware comparison page and its recommendation form.

Thin: parse the GET parameters (every state of the page is a shareable URL), read the group's
run figures, hand them to the pure maths in :mod:`accelboard.dashboard.hardware`, render.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.text import slugify
from django.views.decorators.http import require_GET

from accelboard.core.access import Scope, request_scope
from accelboard.core.numbers import column_decimals
from accelboard.costs.downloads import tables_download
from accelboard.costs.gaps import CostGap
from accelboard.costs.selectors import run_cost_gaps

from . import hardware_charts, hardware_exports, hardware_selectors
from .forms import HardwareQueryForm
from .hardware import (
    LAST_N_RUNS,
    config_points_build,
    cost_basis_pick,
    pareto_frontier,
    recommend,
    sweeps_build,
)


def _comparison(*, scope: Scope, model_id: int, scenario: str, query: dict[str, Any]) -> dict[str, Any]:
    """Everything the page shows for one model × scenario group."""
    points = config_points_build(
        runs=hardware_selectors.hardware_run_figures(scope=scope, model_id=model_id, scenario=scenario)
    )
    currency, cost_unit = cost_basis_pick(points=points)
    priced = [
        p
        for p in points
        if p.p99_ms is not None
        and p.total_cost_per_1m is not None
        and (p.currency, p.cost_unit) == (currency, cost_unit)
    ]
    frontier = pareto_frontier(points=[(p.total_cost_per_1m or 0.0, p.p99_ms or 0.0) for p in priced])
    sweeps = sweeps_build(points=points)
    throughput_units = sorted({p.throughput_unit for p in points if p.throughput_unit})
    bases = hardware_selectors.hardware_price_bases(run_ids=[i for p in points for i in p.run_ids])
    # Why a configuration has no cost: its latest run's first missing input (``costs.gaps``).
    gaps = run_cost_gaps(run_ids=[p.latest_run_id for p in points if p.total_cost_per_1m is None])
    cost_gaps = {p.label: gaps[p.latest_run_id] for p in points if p.latest_run_id in gaps}
    context: dict[str, Any] = {
        "points": points,
        # The price row behind each configuration's cost (its latest run's; "mixed" when its runs
        # were priced differently), and one number format per column of the table.
        "price_bases": {p.label: _price_basis(p.run_ids, bases) for p in points},
        "cost_gaps": cost_gaps,
        "cost_gap_lines": _gap_lines(cost_gaps),
        "decimals": _column_decimals(points),
        "currency": currency,
        "cost_unit": cost_unit,
        "throughput_unit": throughput_units[0] if len(throughput_units) == 1 else "per s",
        "unpriced": len(points) - len(priced),
        "sweeps": sweeps,
        "pareto_figure": hardware_charts.pareto_figure(
            points=priced, frontier=frontier, currency=currency, cost_unit=cost_unit
        )
        if len(priced) >= 1
        else None,
        "sweep_figure": hardware_charts.sweep_figure(
            sweeps=sweeps, throughput_unit=throughput_units[0] if throughput_units else ""
        )
        if sweeps
        else None,
        "frontier_labels": [p.label for p, on in zip(priced, frontier, strict=True) if on],
        "recommendation": None,
        # Training groups (MLPerf Training, any run in the training scenario): time and cost to
        # train per configuration, fastest first.
        "to_train": sorted(
            (p for p in points if p.time_to_train_s is not None),
            key=lambda p: (p.time_to_train_s or 0.0, p.label),
        ),
    }
    if query.get("p99_ms"):
        context["recommendation"] = recommend(
            points=points, p99_target_ms=query["p99_ms"], precision_floor=query.get("precision_floor") or None
        )
    return context


# Table columns -> the figure each shows, for one number of decimals per column.
_COLUMNS = {
    "throughput": lambda p: p.throughput,
    "p50": lambda p: p.p50_ms,
    "p99": lambda p: p.p99_ms,
    "per_watt": lambda p: p.throughput_per_w,
    "energy": lambda p: p.energy_per_inference_j,
    "capacity": lambda p: p.capacity_cost_per_1m,
    "energy_cost": lambda p: p.energy_cost_per_1m,
    "total": lambda p: p.total_cost_per_1m,
    "ttt_min": lambda p: p.time_to_train_min,
    "capacity_to_train": lambda p: p.capacity_cost_to_train,
    "energy_cost_to_train": lambda p: p.energy_cost_to_train,
    "to_train": lambda p: p.cost_to_train,
}


def _column_decimals(points: list[Any]) -> dict[str, int]:
    """One number of decimals per column (``core.numbers.column_decimals``); money per 1M keeps
    three significant digits of the cheapest, at most six decimals."""
    return {key: column_decimals([figure(p) for p in points]) for key, figure in _COLUMNS.items()}


def _gap_lines(gaps: dict[str, CostGap]) -> list[dict[str, Any]]:
    """Configurations without a cost, grouped by the reason and fix their latest run gives."""
    by_text: dict[str, list[str]] = {}
    for label, gap in gaps.items():
        by_text.setdefault(gap.text, []).append(label)
    return [{"text": text, "labels": labels} for text, labels in by_text.items()]


def _price_basis(run_ids: tuple[int, ...], bases: dict[int, str]) -> str:
    known = [bases[i] for i in run_ids if i in bases]
    if not known:
        return ""
    if len(set(known)) > 1:
        return f"{known[0]} (latest run; its other runs used other prices)"
    return known[0]


@require_GET
def hardware(request: HttpRequest) -> HttpResponse:
    scope = request_scope(request)
    form = HardwareQueryForm(request.GET)
    context: dict[str, Any] = {
        "form": form,
        "no_team": scope.sees_no_team,
        "last_n": LAST_N_RUNS,
        "group": None,
        "focus_labels": [],
    }
    if not form.is_valid():
        context["error"] = form.first_error()
        context["groups"] = []
        return render(request, "dashboard/hardware.html", context, status=400)
    query = form.cleaned_data
    groups = hardware_selectors.hardware_groups_for(scope=scope)
    context["groups"] = groups
    model_id, scenario = query.get("model"), query.get("scenario")
    focus = None
    if query.get("workload"):
        workload = hardware_selectors.hardware_workload_get(scope=scope, workload_id=query["workload"])
        if workload is None:
            raise Http404("No such workload in your teams")
        model_id, scenario = workload.variant.model_id, workload.scenario
        focus = workload
    if model_id:
        group = next((g for g in groups if (g.model_id, g.scenario) == (model_id, scenario)), None)
        context["asked_missing"] = group is None
    else:
        group = groups[0] if groups else None
    context["group"] = group
    if group is not None:
        context.update(
            _comparison(scope=scope, model_id=group.model_id, scenario=group.scenario, query=query)
        )
        if query.get("format"):
            table = hardware_exports.to_train_table(
                points=context["to_train"], price_bases=context["price_bases"], currency=context["currency"]
            )
            stem = f"hardware-{slugify(group.model_name)}-{group.scenario}"
            return tables_download([table], fmt=query["format"], name=query.get("table") or "", stem=stem)
        if focus is not None:
            # The workload the link came from: its rows (any hardware) are highlighted.
            context["focus_labels"] = [
                p.label
                for p in context["points"]
                if (p.variant, p.batch_size, p.concurrency, p.framework)
                == (focus.variant.name, focus.batch_size, focus.concurrency, focus.framework)
            ]
    return render(request, "dashboard/hardware.html", context)
