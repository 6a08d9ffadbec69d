"""Writes of the costs app: daily and monthly cost aggregates, and what triggers their recompute.

``cost_day_compute`` turns a UTC day of 60 s GPU rollups into ``CostDaily`` rows, one per
(day, host, accelerator type). It is safe to run twice and in parallel: under a per-day advisory
lock the day's rows (for the scope asked) are deleted and written again in one transaction, so a
re-run after late telemetry or a price correction REPLACES the figures, never adds to them.

Per-run and serving costs are in ``run_cost_services`` and ``serving_cost_services``; price-book writes and CSV
imports in ``pricebook_services``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, Count, F, FloatField, IntegerField, Sum, Value, When
from django.utils import timezone

from accelboard.core.services import job_run_record, job_run_record_unless_caller
from accelboard.fleet.models import Host, TelemetryRollup

from .formulas.daily import IDLE_UTIL_BELOW_PCT, host_day_cost
from .formulas.money import AMOUNT_PLACES, RATE_PLACES, money_round
from .models import CostDaily
from .pricebook_selectors import PriceBook, accelerator_rate_value, electricity_rate_value, price_book_load

ROLLUP_WIDTH_S = 60
_LOCK_NAMESPACE = zlib.crc32(b"accelboard.costs.day") & 0x7FFFFFFF  # int4 key


def _money(value: Decimal | None, places: Decimal = AMOUNT_PLACES) -> Decimal | None:
    return money_round(value, places)


def _spend(total: Decimal | None, *, capacity: Decimal | None, energy: Decimal | None) -> Decimal | None:
    """The stored spend: the sum of its stored (rounded) parts, so that Spend = Capacity + Energy
    cost holds to the last place in every row and every sum of rows (rounding the unrounded
    total apart could differ from that sum by 0.0001 a row)."""
    if total is None:
        return None
    return (_money(capacity) or Decimal(0)) + (_money(energy) or Decimal(0))


def _day_bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time.min, tzinfo=UTC)
    return start, start + timedelta(days=1)


def _day_lock(day: date) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_NAMESPACE, day.toordinal()])


def cost_day_aggregates(*, day: date, host_ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
    """The day's 60 s rollups summed per (host, accelerator type): one query, grouped in SQL."""
    start, end = _day_bounds(day)
    rows = TelemetryRollup.objects.filter(width_s=ROLLUP_WIDTH_S, bucket__gte=start, bucket__lt=end)
    if host_ids is not None:
        rows = rows.filter(host_id__in=list(host_ids))
    return list(
        dict(row)
        for row in rows.values("host_id", accelerator_type_id=F("accelerator__accelerator_type_id"))
        .annotate(
            gpus=Count("accelerator_id", distinct=True),
            buckets=Count("id"),
            samples=Sum("samples"),
            util_sum=Sum("gpu_util_avg", output_field=FloatField()),
            idle_buckets=Sum(
                Case(
                    When(gpu_util_avg__lt=IDLE_UTIL_BELOW_PCT, then=Value(1)),
                    default=Value(0),
                    output_field=IntegerField(),
                )
            ),
            energy_j=Sum("energy_j"),
        )
        .order_by("host_id", "accelerator_type_id")
    )


def _cost_row(*, day: date, host: Host, agg: dict, book: PriceBook, now: datetime) -> CostDaily:
    type_id = agg["accelerator_type_id"]
    price = book.accelerator_price(host=host, accelerator_type_id=type_id, day=day)
    electricity = book.electricity_price(host=host, day=day)
    carbon = None if electricity is not None else book.carbon_intensity(host=host, day=day)
    figures = host_day_cost(
        width_s=ROLLUP_WIDTH_S,
        buckets=agg["buckets"],
        util_sum_pct=agg["util_sum"] or 0.0,
        idle_buckets=agg["idle_buckets"] or 0,
        energy_j=agg["energy_j"],
        rate=accelerator_rate_value(price, today=book.today) if price else None,
        electricity=electricity_rate_value(electricity=electricity, carbon=carbon, today=book.today),
        rates=book.exchange_rates(day=day),
    )
    return CostDaily(
        day=day,
        team_id=host.team_id,
        host=host,
        project=host.project,
        accelerator_type_id=type_id,
        provider=host.provider,
        region=host.region,
        gpus=agg["gpus"],
        samples=agg["samples"] or 0,
        alloc_hours=figures.alloc_h,
        busy_hours=figures.busy_h,
        idle_hours=figures.idle_h,
        energy_kwh=figures.energy_kwh,
        energy_kwh_pue=figures.energy_kwh_pue,
        carbon_kg=figures.carbon_kg,
        gpu_hour_rate=_money(price.price_per_accelerator_hour, RATE_PLACES) if price else None,
        capacity_cost=_money(figures.capacity),
        usage_cost=_money(figures.usage),
        energy_cost=_money(figures.energy),
        idle_cost=_money(figures.idle),
        total_cost=_spend(figures.total, capacity=figures.capacity, energy=figures.energy),
        currency=figures.currency,
        accelerator_price=price,
        electricity_price=electricity,
        carbon_intensity=carbon,
        price_stale=any(book.stale(row) for row in (price, electricity, carbon)),
        flags=list(figures.flags),
        computed_at=now,
    )


@dataclass(frozen=True)
class DayResult:
    day: date
    rows: int
    deleted: int


def _cost_day_write(*, day: date, team_id: int | None, book: PriceBook) -> DayResult:
    hosts_qs = Host.objects.all() if team_id is None else Host.objects.filter(team_id=team_id)
    hosts = {h.pk: h for h in hosts_qs}
    now = timezone.now()
    with transaction.atomic():
        _day_lock(day)
        aggregates = cost_day_aggregates(day=day, host_ids=None if team_id is None else hosts.keys())
        rows = [
            _cost_row(day=day, host=hosts[agg["host_id"]], agg=agg, book=book, now=now)
            for agg in aggregates
            if agg["host_id"] in hosts
        ]
        stale = CostDaily.objects.filter(day=day)
        if team_id is not None:
            stale = stale.filter(host_id__in=list(hosts))
        deleted, _ = stale.delete()
        CostDaily.objects.bulk_create(rows, batch_size=1000)
    return DayResult(day=day, rows=len(rows), deleted=deleted)


def cost_day_compute(*, day: date, team_id: int | None = None, book: PriceBook | None = None) -> DayResult:
    """Compute (or recompute) ``CostDaily`` for one UTC day, for every host or one team's hosts.

    Idempotent: the day's rows in scope are replaced in one transaction under a per-day advisory
    lock. A host with no telemetry that day gets no row (it was not held as far as we know).
    Records a ``JobRun`` named ``cost_day_compute``.
    """
    with job_run_record(name="cost_day_compute") as job:
        result = _cost_day_write(
            day=day, team_id=team_id, book=book or price_book_load(today=timezone.now().date())
        )
        job.rows = result.rows
        job.detail = {"day": day.isoformat(), "team_id": team_id, "replaced": result.deleted}
    return result


def month_days(*, month: date, until: date | None = None) -> list[date]:
    """The days of ``month`` (any date in it), stopping at ``until`` (inclusive) when given."""
    first = month.replace(day=1)
    nxt = (first + timedelta(days=32)).replace(day=1)
    last = nxt - timedelta(days=1)
    if until is not None:
        last = min(last, until)
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def cost_days_compute(
    *, days: Iterable[date], team_id: int | None = None, record: bool = True
) -> list[DayResult]:
    """Recompute several days with one read of the price book; one JobRun for the whole pass
    (none with ``record=False``, for a caller that records its own)."""
    days = sorted(set(days))
    results: list[DayResult] = []
    with job_run_record_unless_caller(name="cost_days_compute", record=record) as job:
        book = price_book_load(today=timezone.now().date())
        for day in days:
            results.append(_cost_day_write(day=day, team_id=team_id, book=book))
        job.rows = sum(r.rows for r in results)
        job.detail = {"days": [d.isoformat() for d in days], "team_id": team_id}
    return results


def cost_days_with_late_data(*, since: date, until: date) -> list[date]:
    """Days in [since, until] whose rollups now hold a different sample count than their costed
    rows (telemetry arrived after the day was computed), or that have rollups but no rows."""
    start, _ = _day_bounds(since)
    _, end = _day_bounds(until)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT (bucket AT TIME ZONE 'UTC')::date AS day, sum(samples)
            FROM fleet_telemetryrollup
            WHERE width_s = %s AND bucket >= %s AND bucket < %s
            GROUP BY 1
            """,
            [ROLLUP_WIDTH_S, start, end],
        )
        rollup = dict(cursor.fetchall())
    costed = dict(
        CostDaily.objects.filter(day__gte=since, day__lte=until)
        .values("day")
        .annotate(n=Sum("samples"))
        .values_list("day", "n")
    )
    days = set(costed) | set(rollup)
    return sorted(d for d in days if int(rollup.get(d) or 0) != int(costed.get(d) or 0))


def cost_days_for_price_window(*, valid_from: date, valid_to: date | None, today: date) -> list[date]:
    """The already-costed days a price row's validity covers (what a price correction changes)."""
    rows = CostDaily.objects.filter(day__gte=valid_from, day__lte=today)
    if valid_to is not None:
        rows = rows.filter(day__lt=valid_to)
    return sorted(set(rows.values_list("day", flat=True)))
