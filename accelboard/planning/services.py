"""Writes of the planning app: saving a plan as a scenario (and deleting one).

Who may save (``Action.PLAN`` in ``core.access``, checked by the caller): team leads of the team
whose traffic it plans, finance (who see every team's costs) and staff; engineers read plans but
do not save them.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from accelboard.benchmarks.models import Model
from accelboard.core.models import Team
from accelboard.costs.formulas.money import RATE_PLACES, money_round

from . import capacity as c
from . import plan_inputs as pi
from .models import PlanScenario
from .page_selectors import PlanPage

CENTS = Decimal("0.01")  # PlanScenario's money columns


def _money(value: Decimal | None) -> Decimal | None:
    """Money as stored: rounded once, to the column's cents, half to even."""
    return money_round(value, CENTS)


def _json_money(value: Decimal | None, places: Decimal = CENTS) -> float | None:
    """Money in the scenario's JSON snapshot: a number to show, rounded as it would be stored."""
    rounded = money_round(value, places)
    return None if rounded is None else float(rounded)


def plan_summary(*, page: PlanPage) -> dict[str, Any]:
    """The plan's answer as JSON: what a saved scenario shows without recomputing the past."""
    plan = page.plan
    assert plan is not None
    t = plan.traffic
    current = plan.inputs.current
    return {
        "headline": plan.headline(),
        "objective": plan.inputs.objective.text,
        "basis": page.basis.text if page.basis else "",
        "currency": plan.currency,
        "traffic": {
            "mean_output_tps": round(t.mean_output_tps, 3),
            "peak_output_tps": round(t.peak_output_tps, 3),
            "mean_rps": round(t.mean_rps, 4),
            "peak_rps": round(t.peak_rps, 4),
            "prompt_per_request": None if t.prompt_per_request is None else round(t.prompt_per_request, 1),
            "output_per_request": None if t.output_per_request is None else round(t.output_per_request, 1),
            "growth_pct_per_month": None
            if t.growth_pct_per_month is None
            else round(t.growth_pct_per_month, 3),
        },
        "demand_peak_tps": round(plan.demand_peak_tps, 3),
        "sized_tps": round(plan.sized_tps, 3),
        "current": None
        if current is None
        else {
            "hardware": current.hardware,
            "gpus": current.gpus,
            "monthly_cost": _json_money(current.monthly_cost),
        },
        "best": plan.best.option.label if plan.best else None,
        "options": [
            {
                "key": o.option.key,
                "label": o.option.label,
                "rank": o.rank,
                "status": o.status,
                "status_label": o.status_label,
                "replicas": o.replicas,
                "gpus": o.gpus,
                "total_monthly": _json_money(o.total_monthly),
                "cost_per_1m": _json_money(o.cost_per_1m, RATE_PLACES),
            }
            for o in plan.options
        ],
        "notes": list(plan.notes),
    }


def scenario_save(
    *, user: Any, team: Team, model: Model, page: PlanPage, name: str, note: str, now: datetime
) -> PlanScenario:
    """Store the plan on the page with its inputs and answer. The caller checked the permission."""
    plan = page.plan
    if plan is None:
        raise pi.PlanInputError("model: no plan to save (no production traffic)")
    best = plan.best
    current = plan.inputs.current
    return PlanScenario.objects.create(
        team=team,
        model=model,
        name=name,
        note=note,
        created_by=user,
        created_at=now,
        query={k: v for k, v in page.query.items() if v not in (None, "")},
        window_start=plan.traffic.window_start,
        window_end=plan.traffic.window_end,
        currency=plan.currency,
        planned_monthly=_money(best.total_monthly) if best else None,
        planned_tokens_monthly=plan.demand_mean_tps * c.SECONDS_PER_MONTH if best else None,
        current_monthly=_money(current.monthly_cost)
        if current and current.currency == plan.currency
        else None,
        summary=plan_summary(page=page),
    )


def scenario_delete(*, scenario: PlanScenario) -> None:
    scenario.delete()
