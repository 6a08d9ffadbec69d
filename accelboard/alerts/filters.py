"""The alerts list's filters (django-filter), over alerts already scoped to the caller's teams."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from accelboard.core.filters import DayFilter, PageFilterSet, choice

from .choices import AlertKind, AlertState, Severity


def model_q(name: str) -> Q:
    # Benchmark alerts know their model through the series; production alerts carry it in detail.
    return Q(series__workload__variant__model__name=name) | Q(detail__model=name)


def metric_q(name: str) -> Q:
    return Q(series__metric=name) | Q(detail__metric=name)


class AlertFilterSet(PageFilterSet):
    state = choice("state", label="State", choices=AlertState.choices)
    kind = choice("kind", label="Kind", choices=AlertKind.choices)
    severity = choice("severity", label="Severity", choices=Severity.choices)
    team = choice("team__slug", label="Team")
    model = choice(label="Model", method="by_model")
    metric = choice(label="Metric", method="by_metric")
    since = DayFilter(field_name="opened_at", label="From")
    until = DayFilter(field_name="opened_at", label="To", end=True)

    def by_model(self, queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return queryset.filter(model_q(value)) if value else queryset

    def by_metric(self, queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return queryset.filter(metric_q(value)) if value else queryset
