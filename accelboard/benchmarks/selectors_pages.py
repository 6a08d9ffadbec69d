"""Reads behind the benchmark pages: the filtered runs list, one run with its history, compare sets.

Every function takes ``team_ids`` (None = every team, for staff) so that team scoping is decided
once, in the view, and never forgotten in a query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import F, Q, QuerySet, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from accelboard.core.models import Team
from accelboard.fleet.models import AcceleratorType

from .comparison import MetricComparison, Observation, metrics_compare
from .models import BenchmarkRun, MetricValue, Model, ModelVariant

# How many earlier points of each series the run detail charts.
HISTORY_POINTS = 20
# How many earlier runs of the same series make "the baseline" for compare-with-baseline.
BASELINE_RUNS = 5


@dataclass(frozen=True)
class RunFilters:
    model: str = ""
    variant: str = ""
    hardware: str = ""  # accelerator type slug
    team: str = ""  # team slug
    branch: str = ""
    since: date | None = None
    until: date | None = None
    q: str = ""


def _scoped(team_ids: list[int] | None) -> QuerySet[BenchmarkRun]:
    runs = BenchmarkRun.objects.all()
    if team_ids is not None:
        runs = runs.filter(team_id__in=team_ids)
    return runs


def run_list_filtered(*, team_ids: list[int] | None, filters: RunFilters) -> QuerySet[BenchmarkRun]:
    runs = _scoped(team_ids).select_related("team", "workload__variant__model", "accelerator_type", "host")
    if filters.model:
        runs = runs.filter(workload__variant__model__name=filters.model)
    if filters.variant:
        runs = runs.filter(workload__variant__name=filters.variant)
    if filters.hardware:
        runs = runs.filter(accelerator_type__slug=filters.hardware)
    if filters.team:
        runs = runs.filter(team__slug=filters.team)
    if filters.branch:
        runs = runs.filter(branch=filters.branch)
    tz = timezone.get_current_timezone()
    if filters.since:
        runs = runs.filter(started_at__gte=datetime.combine(filters.since, time.min, tzinfo=tz))
    if filters.until:
        # Inclusive of the whole "until" day.
        end = datetime.combine(filters.until + timedelta(days=1), time.min, tzinfo=tz)
        runs = runs.filter(started_at__lt=end)
    if filters.q:
        text = filters.q.strip()
        runs = runs.filter(
            Q(git_commit__istartswith=text)
            | Q(branch__icontains=text)
            | Q(workload__variant__model__name__icontains=text)
        )
    return runs.order_by("-started_at", "-pk")


def run_filter_choices(*, team_ids: list[int] | None) -> dict[str, list[tuple[str, str]]]:
    """Values the filters can take, drawn from the runs the user may see (so nothing leaks)."""
    runs = _scoped(team_ids)
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


def run_get_visible(*, run_id: int, team_ids: list[int] | None) -> BenchmarkRun:
    """The run, if the user may see it; raises BenchmarkRun.DoesNotExist otherwise (a 404)."""
    return (
        _scoped(team_ids)
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
        history[row["series_id"]].append(row)
    for rows in history.values():
        rows.sort(key=lambda r: (r["measured_at"], r["run_id"]))
    return history


def run_baseline_ids(*, run: BenchmarkRun, count: int = BASELINE_RUNS) -> list[int]:
    """The ``count`` runs of the same series (workload and hardware) just before this one."""
    return list(
        BenchmarkRun.objects.filter(
            team_id=run.team_id,
            workload_id=run.workload_id,
            accelerator_type_id=run.accelerator_type_id,
            accelerator_count=run.accelerator_count,
            started_at__lte=run.started_at,
        )
        .exclude(pk=run.pk)
        .order_by("-started_at", "-pk")
        .values_list("pk", flat=True)[:count]
    )


@dataclass
class CompareResult:
    runs_a: list[BenchmarkRun]
    runs_b: list[BenchmarkRun]
    rows: list[MetricComparison]


def runs_compare(*, ids_a: list[int], ids_b: list[int], team_ids: list[int] | None) -> CompareResult:
    """Compare two sets of runs; raises BenchmarkRun.DoesNotExist if any id is not visible."""
    wanted = set(ids_a) | set(ids_b)
    runs = {
        run.pk: run
        for run in _scoped(team_ids)
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
