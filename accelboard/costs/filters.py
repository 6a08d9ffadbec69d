"""What the finance pages filter on (``CostFilters``), and how it narrows the cost tables
(django-filter).

The month is not a filter here: the report reads its month and the one before, the drill-down
one month. A filter left empty (None, "") narrows nothing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any

import django_filters as df
from django.db.models import QuerySet


@dataclass(frozen=True)
class CostFilters:
    month: dt.date
    team_id: int | None = None
    provider: str = ""
    accelerator_type_id: int | None = None
    project: str | None = None
    host_id: int | None = None
    day: dt.date | None = None
    # A served model's name: the drill-down then lists the serving rows behind its total.
    model: str | None = None


class CostDailyFilterSet(df.FilterSet):
    team_id = df.NumberFilter(field_name="team_id")
    provider = df.CharFilter(field_name="provider")
    accelerator_type_id = df.NumberFilter(field_name="accelerator_type_id")
    project = df.CharFilter(field_name="project")
    host_id = df.NumberFilter(field_name="host_id")
    day = df.DateFilter(field_name="day")


class ServingCostFilterSet(df.FilterSet):
    """Serving rows have no accelerator type or project of their own; the provider is the host's."""

    team_id = df.NumberFilter(field_name="team_id")
    provider = df.CharFilter(field_name="host__provider")
    host_id = df.NumberFilter(field_name="host_id")
    day = df.DateFilter(field_name="day")


def cost_rows_narrowed(
    filterset: type[df.FilterSet], queryset: QuerySet[Any], filters: CostFilters
) -> QuerySet[Any]:
    """``queryset`` narrowed by the ``filters`` the filter set knows (the others are ignored)."""
    bound = filterset(asdict(filters), queryset=queryset)
    if not bound.is_valid():  # CostFilters are typed values: an error here is a bug, not input
        raise ValueError(f"cost filters: {dict(bound.errors)}")
    return bound.qs
