"""The capacity plan page, its CSV/XLSX exports, and saved scenarios.

Thin: parse the GET parameters (every plan is a shareable URL; a bad value is a 400 naming the
field), read the page through :mod:`.page_selectors`, render a page or a file. Saving is a POST
of the plan's query; the plan is recomputed from it, never trusted from the form.

Team scope: the caller's ``Scope`` (``core.access``). A plan is a cost figure, so the selectors
read it as the cost pages read costs: finance and staff plan every team's traffic, anyone else
their own teams'. Saving or deleting a plan is ``Action.PLAN`` in the plan's team (leads, finance,
staff); engineers read plans.
"""

from __future__ import annotations

import re
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from accelboard.core.access import Action, Scope, request_scope
from accelboard.core.numbers import column_decimals, column_fits
from accelboard.costs import downloads
from accelboard.costs import exports as cost_exports

from . import charts, exports, page_selectors, selectors, services
from .forms import PlanQueryForm, ScenarioSaveForm


def _page(params: QueryDict, *, scope: Scope) -> tuple[PlanQueryForm, page_selectors.PlanPage | None]:
    now = timezone.now()
    rows, where, pricing = page_selectors.price_choices(today=now.date())
    form = PlanQueryForm(params, where_choices=where, pricing_choices=pricing)
    if not form.is_valid():
        return form, None
    page = page_selectors.plan_page_build(
        scope=scope,
        data=form.cleaned_data,
        now=now,
        price_rows=rows,
        where_choices=where,
        pricing_choices=pricing,
    )
    return form, page


def _tables(page: page_selectors.PlanPage) -> list[cost_exports.ExportTable]:
    plan = page.plan
    assert plan is not None
    tables = [
        exports.options_table(plan=plan),
        exports.assumptions_table(rows=_assumptions(page)),
        exports.traffic_table(plan=plan),
    ]
    if page.sensitivity:
        tables.append(exports.sensitivity_table(plan=plan, growths=page.growths, series=page.sensitivity))
    return tables


def _assumptions(page: page_selectors.PlanPage) -> list[dict[str, Any]]:
    assert page.plan is not None
    return exports.assumption_rows(
        plan=page.plan,
        basis_text=page.basis.text if page.basis else "",
        growth_source=page.growth_source,
        objective_source=page.objective_source,
    )


def _per1m_decimals(plan_: Any) -> dict[str, int | None]:
    """One format per money-per-1M column of the options tables (rules 3 and 5): the decimals
    that keep three significant digits of the column's cheapest value, cents at least, or None
    (each value by rule 7) where one format would write a large value past four significant
    digits."""
    columns = {
        "per1m": [o.cost_per_1m for o in plan_.options],
        "bench1m": [o.benchmark_cost_per_1m for o in plan_.options],
    }
    formats: dict[str, int | None] = {}
    for key, values in columns.items():
        decimals = max(2, column_decimals(values, significant=3, most=6))
        formats[key] = decimals if column_fits(values, decimals) else None
    return formats


def _export(page: page_selectors.PlanPage, *, fmt: str, name: str) -> HttpResponse:
    name_part = re.sub(r"[^A-Za-z0-9._-]+", "-", page.model.name if page.model else "model")
    stem = f"plan-{name_part}-{timezone.now():%Y-%m-%d}"
    return downloads.tables_download(_tables(page), fmt=fmt, name=name, stem=stem)


@require_GET
def plan(request: HttpRequest) -> HttpResponse:
    scope = request_scope(request)
    form, page = _page(request.GET, scope=scope)
    if page is None:
        return render(request, "planning/plan.html", {"form": form, "error": form.first_error()}, status=400)
    data = form.cleaned_data
    if data.get("format"):
        if page.plan is None:
            raise Http404("No production traffic of that model in your teams")
        return _export(page, fmt=data["format"], name=data.get("table") or "")
    context: dict[str, Any] = {
        "form": form,
        "page": page,
        "no_team": not scope.can_anywhere(Action.VIEW_COSTS),
    }
    if page.plan is not None and page.model is not None:
        plan_ = page.plan
        team = selectors.team_get(team_id=page.model.team_id)
        context.update(
            plan=plan_,
            per1m_decimals=_per1m_decimals(plan_),
            assumptions=_assumptions(page),
            traffic_figure=charts.traffic_figure(plan=plan_) if plan_.traffic.days else None,
            sensitivity_figure=charts.sensitivity_figure(
                plan=plan_, growths=page.growths, series=page.sensitivity
            )
            if page.sensitivity
            else None,
            scenarios=selectors.scenarios_for(scope=scope, model_id=page.model.model_id),
            plan_team=team,
            can_save=team is not None and scope.can(Action.PLAN, team),
            save_form=ScenarioSaveForm(initial={"query": page.query_string}),
        )
    return render(request, "planning/plan.html", context)


@require_POST
def scenario_save(request: HttpRequest) -> HttpResponse:
    form = ScenarioSaveForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(
            f"{name}: {' '.join(str(message) for message in messages)}"
            for name, messages in form.errors.items()
        )
        return HttpResponse(errors, status=400, content_type="text/plain; charset=utf-8")
    scope = request_scope(request)
    query_form, page = _page(QueryDict(form.cleaned_data["query"]), scope=scope)
    if page is None:
        return HttpResponse(
            f"query: {query_form.first_error()}", status=400, content_type="text/plain; charset=utf-8"
        )
    if page.plan is None or page.model is None:
        raise Http404("No production traffic of that model in your teams")
    team = selectors.team_get(team_id=page.model.team_id)
    model = selectors.model_get(model_id=page.model.model_id)
    if team is None or model is None:
        raise Http404("No production traffic of that model in your teams")
    if not scope.can(Action.PLAN, team):
        return HttpResponse(
            "Only team leads and finance save plans; engineers read them.",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    scenario = services.scenario_save(
        user=request.user,
        team=team,
        model=model,
        page=page,
        name=form.cleaned_data["name"],
        note=form.cleaned_data["note"],
        now=timezone.now(),
    )
    return redirect("planning:scenario", scenario_id=scenario.pk)


@require_GET
def scenario(request: HttpRequest, scenario_id: int) -> HttpResponse:
    scope = request_scope(request)
    found = selectors.scenario_get(scope=scope, scenario_id=scenario_id)
    if found is None:
        raise Http404("No such saved plan in your teams")
    months = selectors.scenario_actuals(scenario=found, scope=scope, today=timezone.now().date())
    context = {
        "scenario": found,
        "months": months,
        "plan_url": f"{reverse('planning:plan')}?{_query(found.query)}",
        "can_delete": scope.can(Action.PLAN, found.team_id),
    }
    return render(request, "planning/scenario.html", context)


@require_POST
def scenario_delete(request: HttpRequest, scenario_id: int) -> HttpResponse:
    scope = request_scope(request)
    found = selectors.scenario_get(scope=scope, scenario_id=scenario_id)
    if found is None:
        raise Http404("No such saved plan in your teams")
    if not scope.can(Action.PLAN, found.team_id):
        return HttpResponse(
            "Only team leads and finance delete plans.", status=403, content_type="text/plain; charset=utf-8"
        )
    model_id = found.model_id
    services.scenario_delete(scenario=found)
    return redirect(f"{reverse('planning:plan')}?model={model_id}")


def _query(query: dict[str, Any]) -> str:
    params = QueryDict(mutable=True)
    for key, value in query.items():
        params[key] = str(value)
    return params.urlencode()
