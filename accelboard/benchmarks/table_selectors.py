"""Reads behind the runs table: the runs list as experiment trackers show it, with the metrics
the reader picks as columns, sorted by any of them, and ticks to compare.

The list's filters stay ``selectors.run_filterset``'s; this module adds what is per column:

- ``run_metric_columns``: the metrics the filtered runs carry, most common first (the column
  picker, and the default columns). One grouped query.
- ``runs_sorted``: the filtered runs by a column (a run's field, or a metric's value, runs
  without it last). One subquery in the list's own query.
- ``run_metric_cells``: the picked metrics of one page of runs. One query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, F, OuterRef, QuerySet, Subquery

from accelboard.core.access import Scope

from .models import BenchmarkRun, MetricValue

# Columns the table sorts by that are fields of the run, by the name the query string uses.
FIELD_SORTS = {
    "started": "started_at",
    "model": "workload__variant__model__name",
    "variant": "workload__variant__name",
    "hardware": "accelerator_type__name",
    "branch": "branch",
}
METRIC_SORT = "m:"
DEFAULT_SORT = "-started"
# A metric name as the catalogue and the importers write them (``accuracy:arc_easy:acc_norm``).
METRIC_NAME = re.compile(r"^[A-Za-z0-9_.:\-]{1,60}$")
DEFAULT_COLUMNS = 3
MAX_COLUMNS = 8


class BadTableParameter(ValueError):
    """A sort or column the table cannot use: a 400 naming the parameter."""


@dataclass(frozen=True)
class Sort:
    key: str  # a FIELD_SORTS key, or "m:<metric>"
    descending: bool

    @property
    def metric(self) -> str | None:
        return self.key[len(METRIC_SORT) :] if self.key.startswith(METRIC_SORT) else None

    @property
    def text(self) -> str:
        return ("-" if self.descending else "") + self.key

    def toggled(self, key: str) -> str:
        """The sort a column header links to: this column reversed, or a new one (descending for
        a metric and the start time, ascending for names)."""
        if key == self.key:
            return ("" if self.descending else "-") + key
        return ("-" if key == "started" or key.startswith(METRIC_SORT) else "") + key


def run_sort_parse(value: str | None) -> Sort:
    """``-started`` (default), ``model``, ``-m:latency_p99_ms``... ; anything else is refused."""
    text = (value or DEFAULT_SORT).strip()
    descending = text.startswith("-")
    key = text.removeprefix("-")
    if key in FIELD_SORTS or (key.startswith(METRIC_SORT) and METRIC_NAME.match(key[len(METRIC_SORT) :])):
        return Sort(key=key, descending=descending)
    raise BadTableParameter(
        f"sort: {text!r} is not a column; use one of {', '.join(FIELD_SORTS)} or m:<metric>, '-' first for descending"
    )


def run_columns_parse(values: Sequence[str]) -> list[str]:
    """The picked metric columns (``col``, repeated or comma-separated), in order, at most eight."""
    names: list[str] = []
    for value in values:
        for part in value.split(","):
            name = part.strip()
            if not name:
                continue
            if not METRIC_NAME.match(name):
                raise BadTableParameter(f"col: {name!r} is not a metric name")
            if name not in names:
                names.append(name)
    if len(names) > MAX_COLUMNS:
        raise BadTableParameter(f"col: at most {MAX_COLUMNS} metric columns, got {len(names)}")
    return names


def run_metric_columns(*, runs: QuerySet[BenchmarkRun], limit: int = 40) -> list[tuple[str, int]]:
    """(metric name, how many of ``runs`` have it), most common first. One query."""
    rows = (
        MetricValue.objects.filter(run__in=runs.order_by().values("pk"))
        .values("name")
        .annotate(runs=Count("run_id", distinct=True))
        .order_by("-runs", "name")[:limit]
    )
    return [(row["name"], row["runs"]) for row in rows]


def runs_sorted(*, runs: QuerySet[BenchmarkRun], sort: Sort) -> QuerySet[BenchmarkRun]:
    """``runs`` in the table's order; runs without the sorted metric last, newest first among
    equals."""
    metric = sort.metric
    if metric is None:
        field = F(FIELD_SORTS[sort.key])
        order = field.desc(nulls_last=True) if sort.descending else field.asc(nulls_last=True)
        return runs.order_by(order, "-started_at", "-pk")
    value = MetricValue.objects.filter(run=OuterRef("pk"), name=metric).values("value")[:1]
    runs = runs.annotate(sort_value=Subquery(value))
    order = F("sort_value").desc(nulls_last=True) if sort.descending else F("sort_value").asc(nulls_last=True)
    return runs.order_by(order, "-started_at", "-pk")


def run_metric_cells(*, run_ids: Sequence[int], names: Sequence[str]) -> dict[int, dict[str, dict[str, Any]]]:
    """run id -> metric name -> {value, unit} for the picked metrics of a page of runs. One query."""
    cells: dict[int, dict[str, dict[str, Any]]] = {}
    if not run_ids or not names:
        return cells
    for row in MetricValue.objects.filter(run_id__in=list(run_ids), name__in=list(names)).values(
        "run_id", "name", "value", "unit"
    ):
        cells.setdefault(row["run_id"], {})[row["name"]] = {"value": row["value"], "unit": row["unit"]}
    return cells


def runs_ticked(*, scope: Scope, ids: Sequence[int]) -> list[BenchmarkRun]:
    """The ticked runs among those the caller may see, oldest first (ids of other teams' runs
    are dropped, as if never ticked). One query."""
    return list(BenchmarkRun.objects.visible_to(scope).filter(pk__in=list(ids)).order_by("started_at", "pk"))
