"""Reads behind the cost drill-down: the hosts, host-days, serving days and price rows behind
any total of the monthly report (``report_selectors``), with each price row's inputs (price
per hour and per GPU-hour, source, fetched date, electricity price and PUE) beside the figures.

Same scope rules and filters as the report; each table is one grouped query.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Count, Max, Q, QuerySet, Sum

from accelboard.core.access import Scope

from .filters import CostFilters
from .models import AcceleratorPrice, ElectricityPrice, is_stale
from .report_selectors import (
    MONEY_FIELDS,
    SUM_FIELDS,
    cost_daily_scoped,
    month_bounds,
    serving_cost_scoped,
)


def cost_drill_hosts(*, scope: Scope, filters: CostFilters) -> list[dict[str, Any]]:
    """Per host (and price rows: a host whose price changed mid-month shows one line per price)."""
    start, end = month_bounds(filters.month)
    qs = cost_daily_scoped(scope=scope, filters=filters).filter(day__gte=start, day__lt=end)
    rows = list(
        qs.values(
            "host_id",
            "host__hostname",
            "team__name",
            "team__slug",
            "project",
            "provider",
            "region",
            "accelerator_type__name",
            "currency",
            "gpu_hour_rate",
            "accelerator_price_id",
            "accelerator_price__price_per_hour",
            "accelerator_price__accelerator_count",
            "accelerator_price__source",
            "accelerator_price__fetched_on",
            "electricity_price_id",
            "electricity_price__price_per_kwh",
            "electricity_price__pue",
            "electricity_price__source",
            "electricity_price__fetched_on",
        )
        .annotate(
            gpus_max=Max("gpus"),
            days=Count("day", distinct=True),
            stale_rows=Count("id", filter=Q(price_stale=True)),
            # The parts of spend where there is a spend (as in the report): Spend = Capacity + Energy.
            **{
                name: Sum(name, filter=Q(total_cost__isnull=False))
                for name in SUM_FIELDS
                if name in MONEY_FIELDS and name != "total_cost"
            },
        )
        .annotate(
            **{name: Sum(name) for name in SUM_FIELDS if name not in MONEY_FIELDS or name == "total_cost"}
        )
        .order_by("host__hostname", "accelerator_type__name", "accelerator_price_id")
    )
    return [_price_inputs(dict(row)) for row in rows]


def cost_drill_days(*, scope: Scope, filters: CostFilters) -> list[dict[str, Any]]:
    """Every CostDaily row behind the filters, with the price rows' inputs beside the figures."""
    start, end = month_bounds(filters.month)
    qs = (
        cost_daily_scoped(scope=scope, filters=filters)
        .filter(day__gte=start, day__lt=end)
        .order_by("day", "host__hostname")
    )
    rows = qs.values(
        "id",
        "day",
        "host_id",
        "host__hostname",
        "team__name",
        "project",
        "provider",
        "region",
        "accelerator_type__name",
        "gpus",
        "currency",
        "gpu_hour_rate",
        "price_stale",
        "flags",
        "accelerator_price_id",
        "accelerator_price__price_per_hour",
        "accelerator_price__accelerator_count",
        "accelerator_price__source",
        "accelerator_price__fetched_on",
        "electricity_price_id",
        "electricity_price__price_per_kwh",
        "electricity_price__pue",
        "electricity_price__source",
        "electricity_price__fetched_on",
        *SUM_FIELDS,
    )
    return [_price_inputs(row) for row in rows]


def _price_inputs(row: dict[str, Any]) -> dict[str, Any]:
    """Flatten the price-row columns into the names the tables and exports use."""
    if "gpus_max" in row:
        row["gpus"] = row.pop("gpus_max")
    row["price_per_hour"] = row.pop("accelerator_price__price_per_hour")
    row["price_gpus"] = row.pop("accelerator_price__accelerator_count")
    row["price_source"] = row.pop("accelerator_price__source")
    row["price_fetched_on"] = row.pop("accelerator_price__fetched_on")
    row["kwh_price"] = row.pop("electricity_price__price_per_kwh")
    row["pue"] = row.pop("electricity_price__pue")
    row["kwh_source"] = row.pop("electricity_price__source")
    row["kwh_fetched_on"] = row.pop("electricity_price__fetched_on")
    if "stale_rows" in row:
        row["price_stale"] = row["stale_rows"] > 0
    if "idle_hours" in row and row.get("alloc_hours") is not None:
        row["active_hours"] = row["alloc_hours"] - (row["idle_hours"] or 0.0)
    if row.get("total_cost") is None:
        # No spend (no accelerator price, or no exchange rate for its energy): none of its parts
        # either, so that every table's Spend column is the sum of its Capacity and Energy columns.
        for name in ("capacity_cost", "energy_cost", "idle_cost"):
            if name in row:
                row[name] = None
    return row


def cost_drill_prices(*, scope: Scope, filters: CostFilters, today: dt.date) -> list[dict[str, Any]]:
    """The price rows behind the filtered costs (or, with ``filters.model``, behind that model's
    serving costs), with source, fetched date and staleness."""
    qs = (
        _serving_scoped(scope=scope, filters=filters)
        if filters.model is not None
        else cost_daily_scoped(scope=scope, filters=filters).filter(
            day__gte=month_bounds(filters.month)[0], day__lt=month_bounds(filters.month)[1]
        )
    )
    used_accel = dict(
        qs.exclude(accelerator_price=None)
        .values("accelerator_price_id")
        .annotate(n=Count("id"))
        .values_list("accelerator_price_id", "n")
    )
    used_power = dict(
        qs.exclude(electricity_price=None)
        .values("electricity_price_id")
        .annotate(n=Count("id"))
        .values_list("electricity_price_id", "n")
    )
    out: list[dict[str, Any]] = []
    for price in AcceleratorPrice.objects.filter(id__in=used_accel).select_related("accelerator_type"):
        out.append(
            {
                "kind": "accelerator",
                "id": price.pk,
                "key": " ".join(
                    part
                    for part in (
                        price.provider,
                        price.region,
                        price.instance_type or "",
                        f"{price.accelerator_count}× {price.accelerator_type.name}",
                        price.pricing_model,
                    )
                    if part
                ),
                "price": float(price.price_per_hour),
                "unit": f"{price.currency}/h",
                "per_gpu": price.price_per_accelerator_hour,
                "pue": None,
                "currency": price.currency,
                "source": price.source,
                "fetched_on": price.fetched_on,
                "valid_from": price.valid_from,
                "valid_to": price.valid_to,
                "stale": is_stale(price.fetched_on, today=today),
                "rows": used_accel[price.pk],
            }
        )
    for power in ElectricityPrice.objects.filter(id__in=used_power).select_related("site"):
        out.append(
            {
                "kind": "electricity",
                "id": power.pk,
                "key": f"site {power.site.name}",
                "price": float(power.price_per_kwh),
                "unit": f"{power.currency}/kWh",
                "per_gpu": None,
                "pue": power.pue,
                "currency": power.currency,
                "source": power.source,
                "fetched_on": power.fetched_on,
                "valid_from": power.valid_from,
                "valid_to": power.valid_to,
                "stale": is_stale(power.fetched_on, today=today),
                "rows": used_power[power.pk],
            }
        )
    return out


def _serving_scoped(*, scope: Scope, filters: CostFilters) -> QuerySet[Any]:
    start, end = month_bounds(filters.month)
    return serving_cost_scoped(scope=scope, filters=filters).filter(
        day__gte=start, day__lt=end, variant__model__name=filters.model
    )


def cost_drill_serving(*, scope: Scope, filters: CostFilters) -> list[dict[str, Any]]:
    """The daily serving rows behind a model's total: tokens, GPU-hours, energy and money, with
    the price rows' inputs beside them."""
    rows = (
        _serving_scoped(scope=scope, filters=filters)
        .order_by("day", "host__hostname", "variant__name")
        .values(
            "day",
            "host__hostname",
            "team__name",
            "variant__model__name",
            "variant__name",
            "requests",
            "prompt_tokens",
            "generated_tokens",
            "gpu_hours",
            "energy_kwh",
            "energy_kwh_pue",
            "carbon_kg",
            "capacity_cost",
            "energy_cost",
            "cost",
            "cost_per_1m_tokens",
            "energy_per_token_j",
            "currency",
            "price_stale",
            "accelerator_price__price_per_hour",
            "accelerator_price__accelerator_count",
            "accelerator_price__source",
            "accelerator_price__fetched_on",
            "electricity_price__price_per_kwh",
            "electricity_price__pue",
            "electricity_price__source",
            "electricity_price__fetched_on",
        )
    )
    out = []
    for row in rows:
        row["total_cost"] = row.pop("cost")
        out.append(_price_inputs(row))
    return out
