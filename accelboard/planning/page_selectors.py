"""Everything the plan page (and its exports, and a saved scenario) reads for one model: the
inputs gathered by :mod:`.selectors`, the assumptions resolved from the query and their
defaults, the plan of :mod:`.capacity`, and its sensitivity to growth and headroom.

The resolved assumptions come back as a query dict, so that the page's share link, the export
links and a saved scenario all carry every value the answer depended on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from accelboard.core.access import Scope

from . import capacity as c
from . import plan_inputs as pi
from . import selectors
from .forms import DEFAULT_HEADROOM_PCT, DEFAULT_HORIZON_MONTHS, DEFAULT_WEEKS

# The growth axis of the sensitivity chart: 0 to at least this, in this many steps.
SENSITIVITY_MAX_GROWTH = 10.0
SENSITIVITY_STEPS = 21
SENSITIVITY_OPTIONS = 3
HEADROOMS = (0.0, 10.0, 20.0, 30.0, 50.0, 100.0)


def plan_window(*, now: datetime, weeks: int) -> tuple[datetime, datetime]:
    """The traffic window: ``weeks`` whole weeks ending at the last full hour."""
    end = now.replace(minute=0, second=0, microsecond=0)
    return end - timedelta(weeks=weeks), end


@dataclass
class PlanPage:
    models: list[selectors.PlanModel]
    model: selectors.PlanModel | None
    query: dict[str, Any] = field(default_factory=dict)  # every assumption, resolved
    plan: c.Plan | None = None
    basis: selectors.PriceBasis | None = None
    objective_source: str = ""
    growth_source: str = ""
    observed_growth: float | None = None
    growths: list[float] = field(default_factory=list)
    sensitivity: dict[str, list[Decimal | None]] = field(default_factory=dict)
    headroom_rows: list[c.Sensitivity] = field(default_factory=list)
    where_choices: list[tuple[str, str]] = field(default_factory=list)
    pricing_choices: list[tuple[str, str]] = field(default_factory=list)
    asked_missing: bool = False

    @property
    def query_string(self) -> str:
        return urlencode({k: v for k, v in self.query.items() if v not in (None, "")})


def price_choices(*, today: Any) -> tuple[list[Any], list[tuple[str, str]], list[tuple[str, str]]]:
    """The price rows valid today and the basis choices they offer (one query)."""
    rows = selectors.price_rows_valid(today=today)
    where, pricing = selectors.price_basis_choices(rows=rows)
    return rows, where, pricing


def _growth_default(observed: float | None) -> tuple[float, str]:
    if observed is None:
        return 0.0, "no trend (too little traffic): 0 until you set one"
    if observed < 0:
        return 0.0, f"observed {observed:+.1f} %/month; a decline is not planned for (0)"
    return round(observed, 1), f"observed trend, {observed:+.1f} %/month"


def plan_page_build(
    *,
    scope: Scope,
    data: dict[str, Any],
    now: datetime,
    price_rows: list[Any],
    where_choices: list[tuple[str, str]],
    pricing_choices: list[tuple[str, str]],
) -> PlanPage:
    """The plan of the asked model (the busiest when none is asked) under the asked assumptions."""
    weeks = data.get("weeks") or DEFAULT_WEEKS
    start, end = plan_window(now=now, weeks=weeks)
    models = selectors.plan_models(scope=scope, start=start, end=end)
    page = PlanPage(models=models, model=None, where_choices=where_choices, pricing_choices=pricing_choices)
    if data.get("model"):
        page.model = next((m for m in models if m.model_id == data["model"]), None)
        page.asked_missing = page.model is None
    elif models:
        page.model = models[0]
    if page.model is None:
        return page
    model_id = page.model.model_id
    traffic = selectors.plan_traffic(
        scope=scope,
        model_id=model_id,
        start=start,
        end=end,
        bucket_s=selectors.plan_bucket_s(interval_s=page.model.interval_s),
    )
    points = selectors.plan_config_points(scope=scope, model_id=model_id)
    options = pi.serving_options_build(points=points)
    slugs = sorted({o.accelerator_slug for o in options})
    basis = selectors.PriceBasis(where=data.get("where") or "", pricing=data.get("pricing") or "")
    prices, currency, rates = selectors.plan_prices(
        rows=price_rows, slugs=slugs, basis=basis, today=now.date()
    )
    slo = selectors.plan_objective_default(scope=scope, model_id=model_id)
    objective = pi.Objective(
        e2e_p99_ms=data.get("e2e_ms") or slo.e2e_p99_ms,
        ttft_p99_ms=data.get("ttft_ms"),
        itl_p99_ms=data.get("itl_ms"),
    )
    page.objective_source = (
        slo.source if slo.e2e_p99_ms is not None and not data.get("e2e_ms") else "set on this page"
    )
    page.observed_growth = traffic.growth_pct_per_month
    if data.get("growth") is None:
        growth, page.growth_source = _growth_default(traffic.growth_pct_per_month)
    else:
        growth, page.growth_source = data["growth"], "set on this page"
    assumptions = pi.Assumptions(
        growth_pct_per_month=growth,
        horizon_months=DEFAULT_HORIZON_MONTHS if data.get("horizon") is None else data["horizon"],
        headroom_pct=DEFAULT_HEADROOM_PCT if data.get("headroom") is None else data["headroom"],
        n_plus_one=(data.get("spare") or "1") == "1",
    )
    inputs = pi.PlanInputs(
        traffic=traffic,
        options=tuple(options),
        objective=objective,
        assumptions=assumptions,
        currency=currency,
        prices=prices,
        board_power_w=selectors.board_power_by_slug(slugs=slugs),
        accuracy=selectors.plan_accuracy(scope=scope, model_id=model_id),
        current=selectors.plan_current(
            scope=scope, model_id=model_id, start=start, end=end, currency=currency
        ),
        rates=rates,
    )
    page.plan = c.plan_build(inputs)
    page.basis = basis
    page.query = {
        "model": model_id,
        "weeks": weeks,
        "growth": assumptions.growth_pct_per_month,
        "horizon": assumptions.horizon_months,
        "headroom": assumptions.headroom_pct,
        "spare": "1" if assumptions.n_plus_one else "0",
        "where": basis.where,
        "pricing": basis.pricing,
        "e2e_ms": objective.e2e_p99_ms,
        "ttft_ms": objective.ttft_p99_ms,
        "itl_ms": objective.itl_p99_ms,
    }
    top = [o.option.key for o in page.plan.ranked[:SENSITIVITY_OPTIONS]]
    if top:
        high = max(SENSITIVITY_MAX_GROWTH, 2 * max(growth, 0.0))
        page.growths = [round(high * i / (SENSITIVITY_STEPS - 1), 2) for i in range(SENSITIVITY_STEPS)]
        page.sensitivity = c.growth_sensitivity(inputs=inputs, growths=page.growths, keys=top)
        page.headroom_rows = c.headroom_sensitivity(inputs=inputs, headrooms=HEADROOMS)
    return page
