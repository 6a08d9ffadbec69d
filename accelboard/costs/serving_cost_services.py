"""Production serving cost: cost per 1M tokens and energy per token per model variant and day.

Joins ``serving.InferenceMetric`` (tokens and requests per interval, and the GPUs serving by
UUID) with those GPUs' 60 s rollups of the same UTC day:

1. A (day, team, variant, host) sums its intervals' requests and prompt/generated tokens.
2. Its GPUs are the union of ``accelerator_uuids`` it reported that day that are on the team's own
   hosts (another team's GPU is never counted); GPU-hours and energy are
   those GPUs' minute rollups over the day (a GPU serving the model is held for it all day). A GPU
   named by several variants on one host that day is split between them by their generated
   tokens there (evenly when none generated any), so its hours and joules are counted once, not
   once per variant; such rows keep the ``gpu-shared-by-variants`` flag.
3. Capacity = GPU-hours × the host's price per GPU-hour; energy cost = kWh × PUE × price per kWh;
   cost per 1M tokens = cost / generated tokens × 1e6; J per token = energy / generated tokens.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from typing import Any

from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from accelboard.core.services import job_run_record_unless_caller
from accelboard.fleet.models import Accelerator, Host, TelemetryRollup
from accelboard.serving.models import InferenceMetric

from .formulas.daily import host_day_cost
from .formulas.money import RATE_PLACES, money_round
from .models import ServingCostDaily
from .pricebook_selectors import PriceBook, accelerator_rate_value, electricity_rate_value, price_book_load
from .services import ROLLUP_WIDTH_S, _day_bounds, _day_lock, _money, _spend


def _serving_rows(*, day: date, book: PriceBook) -> list[ServingCostDaily]:
    start, end = _day_bounds(day)
    metrics = InferenceMetric.objects.filter(interval_start__gte=start, interval_start__lt=end)
    groups = list(
        metrics.values("team_id", "variant_id", "host_id").annotate(
            req=Sum("requests"), prompt=Sum("prompt_tokens"), generated=Sum("generated_tokens")
        )
    )
    if not groups:
        return []
    uuids: dict[tuple[int, int], set[str]] = defaultdict(set)
    for host_id, variant_id, names in metrics.values_list(
        "host_id", "variant_id", "accelerator_uuids"
    ).distinct():
        uuids[(host_id, variant_id)].update(names or [])
    all_uuids = set().union(*uuids.values())
    gpus = {a.uuid: a for a in Accelerator.objects.filter(uuid__in=all_uuids).select_related("host")}
    usage: dict[int, dict[str, Any]] = {
        row["accelerator_id"]: dict(row)
        for row in TelemetryRollup.objects.filter(
            width_s=ROLLUP_WIDTH_S,
            bucket__gte=start,
            bucket__lt=end,
            accelerator_id__in=[g.pk for g in gpus.values()],
        )
        .values("accelerator_id")
        .annotate(buckets=Count("id"), util_sum=Sum("gpu_util_avg"), energy_j=Sum("energy_j"))
    }
    hosts = Host.objects.in_bulk({g["host_id"] for g in groups})
    tokens: dict[tuple[int, int], int] = defaultdict(int)
    for g in groups:
        tokens[(g["host_id"], g["variant_id"])] += g["generated"] or 0
    sharers: dict[tuple[int, str], list[int]] = defaultdict(list)
    for (host_id, variant_id), names in uuids.items():
        for name in names:
            sharers[(host_id, name)].append(variant_id)
    now = timezone.now()
    rows = []
    for g in groups:
        host = hosts[g["host_id"]]
        names = uuids[(g["host_id"], g["variant_id"])]
        # Only the team's own GPUs: a UUID on another team's host never lends it its energy.
        mine = [gpus[n] for n in names if n in gpus and gpus[n].host.team_id == g["team_id"]]
        share = {
            a.pk: _share(
                variant_id=g["variant_id"],
                sharers=sharers[(g["host_id"], a.uuid)],
                tokens={v: tokens[(g["host_id"], v)] for v in sharers[(g["host_id"], a.uuid)]},
            )
            for a in mine
        }
        buckets = sum(usage.get(a.pk, {}).get("buckets", 0) * share[a.pk] for a in mine)
        energies = [
            usage[a.pk]["energy_j"] * share[a.pk]
            for a in mine
            if a.pk in usage and usage[a.pk]["energy_j"] is not None
        ]
        type_id = next((a.accelerator_type_id for a in mine if a.accelerator_type_id), None)
        # Prices and PUE are the team's own host's: rows on a host that is not the team's (stored
        # before host names were per team) are priced with nothing rather than another team's.
        own = host.team_id == g["team_id"]
        price = book.accelerator_price(host=host, accelerator_type_id=type_id, day=day) if own else None
        electricity = book.electricity_price(host=host, day=day) if own else None
        carbon = None if electricity or not own else book.carbon_intensity(host=host, day=day)
        figures = host_day_cost(
            width_s=ROLLUP_WIDTH_S,
            buckets=buckets,
            util_sum_pct=sum((usage.get(a.pk, {}).get("util_sum") or 0.0) * share[a.pk] for a in mine),
            idle_buckets=0,
            energy_j=sum(energies) if energies else None,
            rate=accelerator_rate_value(price, today=book.today) if price else None,
            electricity=electricity_rate_value(electricity=electricity, carbon=carbon, today=book.today),
            rates=book.exchange_rates(day=day),
        )
        flags = list(figures.flags)
        if not mine:
            flags.append("no-gpus-named")
        if not own:
            flags.append("host-of-another-team")
        if any(len(sharers[(g["host_id"], n)]) > 1 for n in names):
            flags.append("gpu-shared-by-variants")
        generated = g["generated"] or 0
        rows.append(
            ServingCostDaily(
                day=day,
                team_id=g["team_id"],
                variant_id=g["variant_id"],
                host=host,
                requests=g["req"] or 0,
                prompt_tokens=g["prompt"] or 0,
                generated_tokens=generated,
                gpu_hours=figures.alloc_h,
                energy_kwh=figures.energy_kwh,
                energy_kwh_pue=figures.energy_kwh_pue,
                carbon_kg=figures.carbon_kg,
                capacity_cost=_money(figures.capacity),
                energy_cost=_money(figures.energy),
                cost=_spend(figures.total, capacity=figures.capacity, energy=figures.energy),
                cost_per_1m_tokens=(
                    money_round(figures.total / generated * 1_000_000, RATE_PLACES)
                    if figures.total is not None and generated
                    else None
                ),
                energy_per_token_j=(
                    figures.energy_kwh * 3_600_000 / generated if figures.energy_kwh and generated else None
                ),
                currency=figures.currency,
                accelerator_price=price,
                electricity_price=electricity,
                price_stale=any(book.stale(r) for r in (price, electricity, carbon)),
                flags=flags,
                computed_at=now,
            )
        )
    return rows


def _share(*, variant_id: int, sharers: list[int], tokens: dict[int, int]) -> float:
    """The part of one GPU's day that a variant pays for: its generated tokens over those of
    every variant that named the GPU on that host (1 when it alone did; evenly when none
    generated any). The parts of one GPU add up to 1."""
    if len(sharers) <= 1:
        return 1.0
    total = sum(tokens.values())
    if total <= 0:
        return 1.0 / len(sharers)
    return tokens[variant_id] / total


def serving_cost_day_compute(*, day: date, book: PriceBook | None = None, record: bool = True) -> int:
    """Compute (or replace) the day's ``ServingCostDaily`` rows; returns how many were written.
    Records a JobRun unless ``record=False`` (a caller that records its own)."""
    with job_run_record_unless_caller(name="serving_cost_day_compute", record=record) as job:
        book = book or price_book_load(today=timezone.now().date())
        with transaction.atomic():
            _day_lock(day)
            rows = _serving_rows(day=day, book=book)
            ServingCostDaily.objects.filter(day=day).delete()
            ServingCostDaily.objects.bulk_create(rows, batch_size=1000)
        job.rows = len(rows)
        job.detail = {"day": day.isoformat()}
    return len(rows)
