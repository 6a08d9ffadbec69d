"""Reads of stored profiles: the Profile tab, the comparison, the runs table, the alert link.

Each page draws from aggregates (a handful of queries, whatever the trace's size). Runs are looked
up through what the caller's ``Scope`` may see (``core.access``): another team's run is absent,
so a page answers 404. Costs come from the costs app, read only, for a caller who may see the
team's costs: the run's ``RunCost`` (cost per 1M units of work) when it has one, else the price
book's price per accelerator-hour for the run's host and hardware.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.urls import reverse

from accelboard.benchmarks.choices import Scenario
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.benchmarks.selectors import run_get_visible
from accelboard.core.access import Action, Scope
from accelboard.costs.pricebook_selectors import accelerator_rate_value, price_book_load
from accelboard.costs.selectors import price_basis, run_cost_gaps, run_costs_for
from accelboard.fleet import charts as fleet_charts
from accelboard.fleet import selectors as fleet_selectors

from . import categories as cats
from .comparison import Comparison, Side, change_headline, profiles_compare
from .cost_shares import cost_shares, headline_costs
from .hta import counters_reading
from .models import Profile, ProfileBreakdown, ProfileKernel
from .verdict import verdict_with_counters

TOP_KERNELS_SHOWN = 25
COMPARE_KERNELS_SHOWN = 40


def profile_run_get(*, run_id: int, scope: Scope) -> BenchmarkRun:
    """The run whose profile a page shows, if the caller may see it; raises
    ``BenchmarkRun.DoesNotExist`` otherwise (a 404)."""
    return run_get_visible(run_id=run_id, scope=scope)


def profile_for_run(*, run: BenchmarkRun) -> Profile | None:
    return Profile.objects.filter(run=run).first()


def run_ids_with_profiles(*, run_ids: Iterable[int], scope: Scope) -> set[int]:
    """Which of these runs, among those the caller may see, have a profile (one query), for the
    runs table."""
    return set(
        Profile.objects.visible_to(scope).filter(run_id__in=list(run_ids)).values_list("run_id", flat=True)
    )


def profile_breakdowns(*, profile: Profile) -> dict[str, dict[Any, dict[str, float]]]:
    """``{"ranks": {rank: {category: µs}}, "steps": {step: {category: µs, summed over ranks}}}``."""
    ranks: dict[int, dict[str, float]] = defaultdict(dict)
    steps: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for rank, step, category, time_us in ProfileBreakdown.objects.filter(profile=profile).values_list(
        "rank", "step", "category", "time_us"
    ):
        if step is None:
            ranks[rank][category] = time_us
        else:
            steps[step][category] += time_us
    return {"ranks": dict(sorted(ranks.items())), "steps": {k: dict(v) for k, v in sorted(steps.items())}}


def profile_costs(*, profile: Profile) -> dict[str, Any] | None:
    """Each category's share of the run's cost, and the saving candidates (``analysis.cost_shares``)."""
    run = profile.run
    summary = {"totals": profile.totals, "precision": profile.precision}
    run_cost = run_costs_for(run_ids=[run.pk]).get(run.pk)
    # Money is Decimal up to the stored figure; a category's share of it is an estimate from its
    # share of GPU time, shown and never stored, so it is computed in floats.
    if run_cost is not None and run_cost.total_cost_per_1m:
        unit = run_cost.unit or "unit"
        costs = cost_shares(
            summary, cost=float(run_cost.total_cost_per_1m), currency=run_cost.currency, per=f"per 1M {unit}s"
        )
        basis = price_basis(run_cost.accelerator_price) if run_cost.accelerator_price else ""
    else:
        costs = None
        basis = ""
        host = run.host
        if host is not None and run.accelerator_type_id is not None:
            book = price_book_load(today=run.started_at.date())
            price = book.accelerator_price(
                host=host, accelerator_type_id=run.accelerator_type_id, day=run.started_at.date()
            )
            if price is not None:
                basis = price_basis(price)
                rate = accelerator_rate_value(price, today=book.today)
                costs = cost_shares(
                    summary,
                    cost=float(rate.price_per_accelerator_hour) * run.accelerator_count,
                    currency=rate.currency,
                    per=f"per hour of the run's {run.accelerator_count} GPU(s)",
                )
    if costs is not None:
        costs["sentences"] = headline_costs(costs)
        costs["source"] = "run cost" if run_cost is not None and run_cost.total_cost_per_1m else "price book"
        costs["basis"] = basis
    return costs


def profile_page(*, profile: Profile, scope: Scope) -> dict[str, Any]:
    """Everything the Profile tab shows, from stored aggregates (five queries and the costs'); the
    costs only to a caller who may see the run's team's costs."""
    breakdowns = profile_breakdowns(profile=profile)
    counters = profile_counters(profile=profile)
    kernels = list(ProfileKernel.objects.filter(profile=profile).order_by("-total_us")[:TOP_KERNELS_SHOWN])
    totals = profile.totals
    base = totals.get("base_us") or 0.0
    may_see_costs = scope.can(Action.VIEW_COSTS, profile.run.team_id)
    costs = profile_costs(profile=profile) if may_see_costs else None
    category_rows = [
        {
            "key": key,
            "label": label,
            "group": group,
            "time_us": totals["categories"].get(key),
            "share": totals["shares"].get(key),
        }
        for key, label, group in ((k, cats.LABELS[k], cats.GROUP[k]) for k in cats.ALL)
        if totals["categories"].get(key)
    ]
    return {
        "profile": profile,
        "ranks": list(profile.rank_rows.all()),
        "breakdowns": breakdowns,
        "kernels": [
            {
                "row": k,
                "share": k.total_us / base if base else None,
                "label": cats.LABELS.get(k.category, k.category),
            }
            for k in kernels
        ],
        "kernels_total": ProfileKernel.objects.filter(profile=profile).count(),
        "categories": category_rows,
        # JSON objects come back from PostgreSQL in its own key order: the cards go in ours.
        "groups": [(group, totals.get("group_shares", {}).get(group)) for group in cats.GROUPS],
        "costs": costs,
        "may_see_costs": may_see_costs,
        # Why there is no cost: the run's first missing input and its fix (``costs.gaps``).
        "cost_gap": run_cost_gaps(run_ids=[profile.run_id]).get(profile.run_id)
        if costs is None and may_see_costs
        else None,
        "hta": profile.hta or {},
        # Ranks with step rows only: a trace without ProfilerStep marks has none to show.
        "hta_steps": [item for item in (profile.hta or {}).get("steps") or [] if item.get("rows")],
        **counters,
        # The stored verdict read again with the window's counters (``verdict.verdict_with_counters``).
        "verdict": verdict_with_counters(profile.verdict, counters["counters"]),
    }


def profile_counters(*, profile: Profile) -> dict[str, Any]:
    """The DCGM profiling counters of the run's GPUs over the run's window, beside the breakdown
    (``fleet.selectors.run_window_profiling``: none without a host or an end; two queries)."""
    run = profile.run
    gpus, averages = fleet_selectors.run_window_profiling(
        host_id=run.host_id,
        accelerator_type_id=run.accelerator_type_id,
        start=run.started_at,
        end=run.finished_at,
    )
    rows = fleet_charts.profiling_rows(averages=averages, gpus=gpus)
    return {
        "profiling": rows,
        "profiling_labels": list(fleet_charts.PROFILING_LABELS.values()),
        "counters": counters_reading([averages[row["gpu"]["id"]] for row in rows]),
    }


def profile_answer(*, profile: Profile) -> dict[str, Any]:
    """What ``GET /api/v1/runs/{run_id}/profile`` answers (``api.profile_schemas.ProfileOut``):
    the verdict read with the window's counters, the counters, findings, warnings and the HTA-style
    analyses as stored. Three queries (the counters' two)."""
    run = profile.run
    counters = profile_counters(profile=profile)["counters"]
    hta = profile.hta or {}
    return {
        "run_id": str(run.uuid),
        "id": run.pk,
        "profile_url": reverse("profiles:run_profile", args=[run.pk]),
        "source_format": profile.source_format,
        "files": list(profile.files),
        "ranks": profile.ranks,
        "steps": profile.steps,
        "timeline": profile.timeline,
        "devices": list(profile.devices),
        "span_us": profile.span_us,
        "busy_us": profile.busy_us,
        "verdict": verdict_with_counters(profile.verdict, counters),
        "counters": counters,
        "findings": list(profile.findings),
        "warnings": list(profile.warnings),
        "hta": {
            "kernel_wait_threshold_us": hta.get("kernel_wait_threshold_us"),
            "idle": hta.get("idle"),
            "launch": hta.get("launch"),
            "steps": hta.get("steps") or [],
            "ranks": hta.get("ranks"),
        },
        "created_at": profile.created_at,
    }


STEP_RANKS_SHOWN = 2  # the run page's per-step table: the first ranks; the Profile tab has them all


def run_profile_steps(*, run: BenchmarkRun) -> dict[str, Any] | None:
    """For a training run's page: its profile's per-step results (``Profile.hta["steps"]``, the
    first ``STEP_RANKS_SHOWN`` ranks) and the link to the Profile tab's per-step section; None
    when the run is not a training run or has no profile. One query."""
    if run.workload.scenario != Scenario.TRAINING:
        return None
    hta = Profile.objects.filter(run=run).values_list("hta", flat=True).first()
    if hta is None:
        return None
    steps = [item for item in (hta or {}).get("steps") or [] if item.get("rows")]
    return {
        "url": reverse("profiles:run_profile", args=[run.pk]) + "#hta-steps",
        "steps": steps[:STEP_RANKS_SHOWN],
        "ranks": len(steps),
    }


def _side(profile: Profile) -> Side:
    kernels = list(
        ProfileKernel.objects.filter(profile=profile).values("name", "category", "count", "total_us")
    )
    return Side(
        ranks=profile.ranks,
        steps=profile.steps,
        timeline=profile.timeline,
        categories=profile.totals.get("categories", {}),
        kernels=kernels,
    )


def profiles_compare_runs(
    *, run_a: BenchmarkRun, run_b: BenchmarkRun
) -> tuple[Profile, Profile, Comparison] | None:
    """The comparison of two runs' profiles, or None when either has none."""
    profiles = {p.run_id: p for p in Profile.objects.filter(run_id__in=[run_a.pk, run_b.pk])}
    if run_a.pk not in profiles or run_b.pk not in profiles:
        return None
    a, b = profiles[run_a.pk], profiles[run_b.pk]
    return a, b, profiles_compare(_side(a), _side(b))


def profile_compare_url(*, run_a_id: int, run_b_id: int) -> str:
    return f"{reverse('profiles:compare')}?a={run_a_id}&b={run_b_id}"


def profile_change_link(*, run_a_id: int | None, run_b_id: int | None, scope: Scope) -> dict[str, Any] | None:
    """For a regression between two runs: the link to their profiles' comparison and what moved
    most ("flash_fwd_kernel +23%"), or None unless both runs have a profile the caller may see."""
    if run_a_id is None or run_b_id is None:
        return None
    runs = {
        r.pk: r
        for r in BenchmarkRun.objects.visible_to(scope).filter(
            pk__in=[run_a_id, run_b_id], profile__isnull=False
        )
    }
    if len(runs) != 2:
        return None
    result = profiles_compare_runs(run_a=runs[run_a_id], run_b=runs[run_b_id])
    if result is None:
        return None
    comparison = result[2]
    return {
        "url": profile_compare_url(run_a_id=run_a_id, run_b_id=run_b_id),
        "headline": change_headline(comparison),
        "net_pct": comparison.net_pct,
        "unit": comparison.unit,
    }
