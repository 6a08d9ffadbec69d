"""Reads of benchmark runs: the filtered runs list, one run with its history, compare sets.

Every read a page starts from takes the caller's ``Scope`` (``accelboard.core.access``) and
goes through ``BenchmarkRun.objects.visible_to``; reads of one run take a run already found that
way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, F, Q, Subquery, Window
from django.db.models.functions import RowNumber

from accelboard.core.access import Scope
from accelboard.core.models import Team
from accelboard.fleet.models import AcceleratorType

from .comparison import MetricComparison, Observation, metrics_compare
from .filters import RunFilterSet
from .models import BenchmarkRun, MetricValue, Model, ModelVariant

# How many earlier points of each series the run detail charts.
HISTORY_POINTS = 20
# How many earlier runs of the same series make "the baseline" for compare-with-baseline.
BASELINE_RUNS = 5


def model_resolve(*, team: Team | None, name: str) -> Model | None:
    """The model a team's write means by ``name``: the team's own, else a shared one (None:
    neither). Another team's models are never found: their names tell the caller nothing."""
    own_first = F("team_id").asc(nulls_last=True)
    return Model.objects.for_team(team).filter(name=name).order_by(own_first).first()


def variant_resolve(*, team: Team | int | None, model: Model, name: str) -> ModelVariant | None:
    """``model``'s variant named ``name`` as ``team`` sees it: its own first, else a shared one."""
    own_first = F("team_id").asc(nulls_last=True)
    return ModelVariant.objects.for_team(team).filter(model=model, name=name).order_by(own_first).first()


def model_variant_resolve(*, team: Team | None, model: str, variant: str) -> ModelVariant | None:
    """The variant a team's write names by model and variant name, if the team can see one."""
    model_obj = model_resolve(team=team, name=model)
    if model_obj is None:
        return None
    owner = team if model_obj.team_id is None else model_obj.team_id
    return variant_resolve(team=owner, model=model_obj, name=variant)


def run_filterset(*, scope: Scope, data: Mapping[str, Any] | None) -> RunFilterSet:
    """The runs list: the runs the caller may see, filtered by ``data`` (the query string), newest
    first; select choices drawn from the same runs, so no other team's names leak."""
    runs = (
        BenchmarkRun.objects.visible_to(scope)
        .select_related("team", "workload__variant__model", "accelerator_type", "host")
        .order_by("-started_at", "-pk")
    )
    return RunFilterSet(data, queryset=runs, choices=run_filter_choices(scope=scope))


def run_filter_choices(*, scope: Scope) -> dict[str, list[tuple[str, str]]]:
    """Values the filters can take, drawn from the runs the caller may see (so nothing leaks)."""
    runs = BenchmarkRun.objects.visible_to(scope)
    models = (
        Model.objects.filter(variants__workloads__runs__in=runs).distinct().values_list("name", flat=True)
    )
    variants = (
        ModelVariant.objects.filter(workloads__runs__in=runs)
        .values_list("name", flat=True)
        .distinct()
        .order_by("name")
    )
    hardware = AcceleratorType.objects.filter(runs__in=runs).distinct().values_list("slug", "name")
    teams = Team.objects.filter(runs__in=runs).distinct().values_list("slug", "name")
    branches = runs.exclude(branch="").values_list("branch", flat=True).distinct().order_by("branch")
    return {
        "model": [(name, name) for name in models],
        "variant": [(name, name) for name in variants],
        "hardware": list(hardware),
        "team": list(teams),
        "branch": [(name, name) for name in branches],
    }


def run_get_visible(*, run_id: int, scope: Scope) -> BenchmarkRun:
    """The run, if the caller may see it; raises BenchmarkRun.DoesNotExist otherwise (a 404)."""
    return (
        BenchmarkRun.objects.visible_to(scope)
        .select_related("team", "workload__variant__model", "accelerator_type", "host", "uploaded_by")
        .get(pk=run_id)
    )


def run_metrics(*, run: BenchmarkRun) -> list[MetricValue]:
    return list(run.metrics.select_related("series").order_by("name"))


def run_metric_history(*, run: BenchmarkRun, points: int = HISTORY_POINTS) -> dict[int, list[dict[str, Any]]]:
    """Per series of the run: its last ``points`` values up to and including this run, oldest first.

    One query for every series, ranked per series by a window function."""
    series_ids = list(run.metrics.values_list("series_id", flat=True))
    ranked = (
        MetricValue.objects.filter(series_id__in=series_ids, measured_at__lte=run.started_at)
        .annotate(
            rank=Window(
                RowNumber(), partition_by=[F("series_id")], order_by=[F("measured_at").desc(), F("pk").desc()]
            )
        )
        .filter(rank__lte=points)
        .values("series_id", "run_id", "value", "measured_at", "run__git_commit")
    )
    history: dict[int, list[dict[str, Any]]] = {sid: [] for sid in series_ids}
    for row in ranked:
        history[row["series_id"]].append(dict(row))
    for rows in history.values():
        rows.sort(key=lambda r: (r["measured_at"], r["run_id"]))
    return history


def run_metric_later_counts(*, run: BenchmarkRun) -> dict[int, int]:
    """Per series of the run: how many results of it came after this run (a run with no history
    before it may still have a long one after: it is then the first of its series, not alone)."""
    series_ids = list(run.metrics.values_list("series_id", flat=True))
    later = (
        MetricValue.objects.filter(series_id__in=series_ids)
        .filter(Q(measured_at__gt=run.started_at) | Q(measured_at=run.started_at, run_id__gt=run.pk))
        .values("series_id")
        .annotate(count=Count("pk"))
    )
    counts = dict.fromkeys(series_ids, 0)
    counts.update({row["series_id"]: row["count"] for row in later})
    return counts


def run_baseline_ids(
    *, run: BenchmarkRun, count: int = BASELINE_RUNS, held_since: Subquery | None = None
) -> list[int]:
    """The ``count`` runs of the same series (workload and hardware) just before this one; with
    ``held_since`` (a subquery of one start time, or none), just before that time when it has one:
    the first bad run of a change still open (``alerts.selectors.run_baseline_runs``). One query."""
    runs = BenchmarkRun.objects.filter(
        team_id=run.team_id,
        workload_id=run.workload_id,
        accelerator_type_id=run.accelerator_type_id,
        accelerator_count=run.accelerator_count,
        started_at__lte=run.started_at,
    ).exclude(pk=run.pk)
    if held_since is not None:
        runs = runs.alias(held_since=held_since).filter(  # type: ignore[assignment]
            Q(held_since__isnull=True) | Q(started_at__lt=F("held_since"))
        )
    return list(runs.order_by("-started_at", "-pk").values_list("pk", flat=True)[:count])


@dataclass
class CompareResult:
    runs_a: list[BenchmarkRun]
    runs_b: list[BenchmarkRun]
    rows: list[MetricComparison]


def runs_compare(*, ids_a: list[int], ids_b: list[int], scope: Scope) -> CompareResult:
    """Compare two sets of runs; raises BenchmarkRun.DoesNotExist if any id is not visible."""
    wanted = set(ids_a) | set(ids_b)
    runs = {
        run.pk: run
        for run in BenchmarkRun.objects.visible_to(scope)
        .filter(pk__in=wanted)
        .select_related("team", "workload__variant__model", "accelerator_type")
    }
    if set(runs) != wanted:
        raise BenchmarkRun.DoesNotExist(f"runs not found: {sorted(wanted - set(runs))}")
    values = MetricValue.objects.filter(run_id__in=wanted).values_list(
        "run_id", "name", "value", "unit", "direction", "samples"
    )
    by_run: dict[int, list[Observation]] = {pk: [] for pk in wanted}
    for run_id, name, value, unit, direction, samples in values:
        by_run[run_id].append(
            Observation(
                run_id=run_id,
                metric=name,
                value=value,
                unit=unit,
                direction=direction,
                samples=tuple(samples or ()),
            )
        )
    side_a = [obs for pk in ids_a for obs in by_run[pk]]
    side_b = [obs for pk in ids_b for obs in by_run[pk]]
    return CompareResult(
        runs_a=[runs[pk] for pk in ids_a],
        runs_b=[runs[pk] for pk in ids_b],
        rows=metrics_compare(side_a=side_a, side_b=side_b),
    )
