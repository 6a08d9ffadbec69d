"""Reads for canary comparisons: each deployment's per-interval values over the window, and the
verdict (``analysis.canary_verdict``) on them.

A deployment is the serving intervals of the check's model whose labels hold every pair of the
selector (``{"track": "canary"}``); the keys ``variant`` and ``host`` select by the variant's and
the host's name. Per interval: the latency percentiles as sent; error rate = errors / requests;
tokens/s per GPU = generated tokens / interval / GPUs named; energy = the named GPUs' 60 s rollups
inside the interval; cost = GPU-hours x the host's price per GPU-hour + kWh x PUE x the site's
price per kWh, per 1M generated tokens (in the price row's currency). Agreement: the production
agreement of the deployment's variants, per day of the window (sample-weighted over tasks).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from accelboard.core.access import Scope
from accelboard.costs.pricebook_selectors import PriceBook, price_book_load
from accelboard.drift.models import ProductionAgreement
from accelboard.fleet.models import Accelerator, TelemetryRollup
from accelboard.serving.models import InferenceMetric

from . import analysis
from .models import CanaryCheck

ROLLUP_WIDTH_S = 60
_PSEUDO = {"variant": "variant__name", "host": "host__hostname"}
_DIRECT = {
    "ttft_p50_ms": "ttft_p50_ms",
    "ttft_p99_ms": "ttft_p99_ms",
    "tpot_p50_ms": "itl_p50_ms",
    "tpot_p99_ms": "itl_p99_ms",
    "e2e_p50_ms": "e2e_p50_ms",
    "e2e_p99_ms": "e2e_p99_ms",
}


@dataclass
class Deployment:
    selector: dict[str, str]
    times: list[datetime] = field(default_factory=list)  # one per interval
    values: dict[str, list[float | None]] = field(default_factory=lambda: defaultdict(list))
    days: list[str] = field(default_factory=list)  # agreement's days
    variants: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    currency: str = ""


@dataclass
class CanaryReport:
    check: CanaryCheck
    start: datetime
    end: datetime
    baseline: Deployment
    canary: Deployment
    verdict: analysis.Verdict


def canary_check_get(
    *, scope: Scope, team_id: int | None = None, name: str | None = None, pk: int | None = None
) -> CanaryCheck:
    """One check the caller may view, by id or by its team and name (DoesNotExist otherwise)."""
    checks = CanaryCheck.objects.visible_to(scope).select_related("model", "team")
    if pk is not None:
        return checks.get(pk=pk)
    if team_id is None:
        raise CanaryCheck.DoesNotExist
    return checks.get(team_id=team_id, name=name)


def canary_check_teams(*, scope: Scope, name: str) -> list[int]:
    """The ids of the caller's teams that have a check of this name."""
    return sorted(
        set(CanaryCheck.objects.visible_to(scope).filter(name=name).values_list("team_id", flat=True))
    )


def canary_checks_list(*, scope: Scope, model_id: int | None = None) -> list[CanaryCheck]:
    """The caller's teams' checks, of one model when given."""
    checks = CanaryCheck.objects.visible_to(scope).select_related("model", "team")
    if model_id is not None:
        checks = checks.filter(model_id=model_id)
    return list(checks.order_by("model__name", "name"))


def _intervals(
    *, check: CanaryCheck, selector: dict[str, str], start: datetime, end: datetime
) -> list[InferenceMetric]:
    rows = InferenceMetric.objects.filter(
        team_id=check.team_id,
        variant__model_id=check.model_id,
        interval_start__gte=start,
        interval_start__lt=end,
    )
    labels = {k: v for k, v in selector.items() if k not in _PSEUDO}
    if labels:
        rows = rows.filter(labels__contains=labels)
    for key, lookup in _PSEUDO.items():
        if key in selector:
            rows = rows.filter(**{lookup: selector[key]})
    return list(rows.select_related("variant", "host").order_by("interval_start", "host_id"))


def _gpus(rows: list[InferenceMetric]) -> dict[str, tuple[int, int | None]]:
    """The GPUs the intervals name that are the team's own: UUID -> (id, accelerator type id)."""
    uuids = {u for row in rows for u in row.accelerator_uuids}
    if not rows or not uuids:
        return {}
    return {
        uuid: (pk, kind)
        for uuid, pk, kind in Accelerator.objects.filter(
            uuid__in=uuids, host__team_id=rows[0].team_id
        ).values_list("uuid", "pk", "accelerator_type_id")
    }


def _energy(rows: list[InferenceMetric], gpus: dict[str, tuple[int, int | None]]) -> dict[int, float]:
    """Joules per interval (by row id) from the named GPUs' minute rollups inside it (one query;
    each interval's sum by bisection on the GPU's running total)."""
    if not gpus:
        return {}
    start = min(r.interval_start for r in rows)
    end = max(r.interval_start + timedelta(seconds=r.interval_s) for r in rows)
    buckets: dict[int, list[datetime]] = defaultdict(list)
    totals: dict[int, list[float]] = defaultdict(lambda: [0.0])
    for acc, bucket, joules in (
        TelemetryRollup.objects.filter(
            width_s=ROLLUP_WIDTH_S,
            accelerator_id__in=[pk for pk, _ in gpus.values()],
            bucket__gte=start,
            bucket__lt=end,
            energy_j__isnull=False,
        )
        .order_by("accelerator_id", "bucket")
        .values_list("accelerator_id", "bucket", "energy_j")
    ):
        buckets[acc].append(bucket)
        totals[acc].append(totals[acc][-1] + float(joules or 0.0))
    out: dict[int, float] = {}
    for row in rows:
        stop = row.interval_start + timedelta(seconds=row.interval_s)
        joules, found = 0.0, False
        for uuid in row.accelerator_uuids:
            acc = gpus.get(uuid, (0, None))[0]
            times = buckets.get(acc)
            if not times:
                continue
            lo, hi = bisect_left(times, row.interval_start), bisect_left(times, stop)
            if hi > lo:
                joules += totals[acc][hi] - totals[acc][lo]
                found = True
        if found:
            out[row.pk] = joules
    return out


def _deployment(
    *, check: CanaryCheck, selector: dict[str, str], start: datetime, end: datetime, book: PriceBook | None
) -> Deployment:
    """``book``: the price book, None when costs are left out."""
    rows = _intervals(check=check, selector=selector, start=start, end=end)
    dep = Deployment(selector=selector)
    gpu_rows = _gpus(rows)
    energy = _energy(rows, gpu_rows)
    prices: dict[tuple[int, int | None, Any], tuple[float | None, float | None, float, str]] = {}
    for row in rows:
        dep.times.append(row.interval_start)
        for key, column in _DIRECT.items():
            dep.values[key].append(getattr(row, column))
        dep.values["error_rate"].append(row.errors / row.requests if row.requests else None)
        gpus = len(row.accelerator_uuids)
        tokens = row.generated_tokens
        dep.values["tokens_per_s_per_gpu"].append(tokens / row.interval_s / gpus if gpus else None)
        joules = energy.get(row.pk)
        dep.values["j_per_1m_tokens"].append(joules / tokens * 1e6 if joules is not None and tokens else None)
        day = row.interval_start.date()
        kind = next((gpu_rows[u][1] for u in row.accelerator_uuids if u in gpu_rows), None)
        price_key = (row.host_id, kind, day)
        if book is not None and price_key not in prices:
            gpu_price = book.accelerator_price(host=row.host, accelerator_type_id=kind, day=day)
            power = book.electricity_price(host=row.host, day=day)
            prices[price_key] = (
                float(gpu_price.price_per_accelerator_hour) if gpu_price else None,
                float(power.price_per_kwh) if power else None,
                power.pue if power else 1.0,
                gpu_price.currency if gpu_price else "",
            )
        per_gpu_hour, per_kwh, pue, currency = prices.get(price_key, (None, None, 1.0, ""))
        cost = None
        if per_gpu_hour is not None and gpus and tokens:
            cost = gpus * row.interval_s / 3600 * per_gpu_hour
            if joules is not None and per_kwh is not None:
                cost += joules / 3.6e6 * pue * per_kwh
            dep.currency = dep.currency or currency
        dep.values["cost_per_1m_tokens"].append(cost / tokens * 1e6 if cost is not None else None)
        if row.variant.name not in dep.variants:
            dep.variants.append(row.variant.name)
        if row.host.hostname not in dep.hosts:
            dep.hosts.append(row.host.hostname)
    variant_ids = {row.variant_id for row in rows}
    days: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for on, rate, samples in ProductionAgreement.objects.filter(
        team_id=check.team_id, variant_id__in=variant_ids, day__gte=start.date(), day__lte=end.date()
    ).values_list("day", "agreement_rate", "samples"):
        days[on.isoformat()].append((rate, samples))
    for label, items in sorted(days.items()):
        total = sum(n for _, n in items)
        dep.days.append(label)
        dep.values["agreement_rate"].append(
            sum(r * n for r, n in items) / total if total else sum(r for r, _ in items) / len(items)
        )
    return dep


def canary_evaluate(*, check: CanaryCheck, end: datetime | None = None, costs: bool = True) -> CanaryReport:
    """The check's verdict over the window ending at ``end`` (now). ``costs``: False for a caller
    who may not view the team's costs (money follows ``VIEW_COSTS``): cost per token is left out."""
    end = end or timezone.now()
    start = end - timedelta(minutes=check.window_minutes)
    book = price_book_load() if costs else None
    baseline = _deployment(check=check, selector=dict(check.baseline), start=start, end=end, book=book)
    canary = _deployment(check=check, selector=dict(check.canary), start=start, end=end, book=book)
    verdict = analysis.canary_verdict(
        baseline.values, canary.values, alpha=check.alpha, min_effects=dict(check.min_effects or {})
    )
    return CanaryReport(check=check, start=start, end=end, baseline=baseline, canary=canary, verdict=verdict)


def canary_json(report: CanaryReport) -> dict[str, Any]:
    """The endpoint's answer: what Argo Rollouts' web provider and Flagger's webhooks read."""
    verdict = report.verdict
    return {
        "check": report.check.name,
        "model": report.check.model.name,
        "verdict": verdict.verdict,
        "passed": verdict.verdict == analysis.PASS,
        "failed": verdict.verdict == analysis.FAIL,
        "score": _score(verdict),
        "window": {"start": report.start.isoformat(), "end": report.end.isoformat()},
        "baseline": {"selector": report.baseline.selector, "intervals": len(report.baseline.times)},
        "canary": {"selector": report.canary.selector, "intervals": len(report.canary.times)},
        "alpha": verdict.alpha,
        "rule": verdict.rule,
        "failed_metrics": verdict.failed,
        "marginal_metrics": verdict.marginal,
        "metrics": {
            m.key: {
                "verdict": m.verdict,
                "better": m.better,
                "baseline_median": m.baseline_median,
                "canary_median": m.canary_median,
                "effect": m.effect,
                "relative": m.relative,
                "min_effect": m.min_effect,
                "p_value": m.p_value,
                "n_baseline": m.n_baseline,
                "n_canary": m.n_canary,
                "reason": m.reason,
            }
            for m in verdict.metrics
        },
    }


def _score(verdict: analysis.Verdict) -> float | None:
    """Kayenta-style score: the share of judged metrics that pass (marginal counts half), 0-100."""
    judged = [m for m in verdict.metrics if m.verdict != analysis.NO_DATA]
    if not judged:
        return None
    points = sum(
        1.0 if m.verdict == analysis.PASS else 0.5 if m.verdict == analysis.MARGINAL else 0.0 for m in judged
    )
    return round(100 * points / len(judged), 1)
