"""The runs list's filters (django-filter), over runs already scoped to the caller's teams."""

from __future__ import annotations

import django_filters as df
from django import forms
from django.db.models import Q, QuerySet

from accelboard.core.filters import DayFilter, PageFilterSet, choice

from .models import BenchmarkRun


class WholeNumberFilter(df.NumberFilter):
    """A positive whole number (a batch size, a GPU count): "1.5" is a 400 naming the field."""

    field_class = forms.IntegerField


class RunFilterSet(PageFilterSet):
    q = df.CharFilter(method="search", label="Search", max_length=200, help_text="commit, branch or model")
    model = choice("workload__variant__model__name", label="Model")
    variant = choice("workload__variant__name", label="Variant")
    hardware = choice("accelerator_type__slug", label="Hardware")
    # One configuration of the hardware page ("all runs" of it): GPUs, batch size, concurrency.
    gpus = WholeNumberFilter(field_name="accelerator_count", label="GPUs", min_value=1, max_value=4096)
    batch = WholeNumberFilter(
        field_name="workload__batch_size", label="Batch", min_value=1, max_value=1_000_000
    )
    concurrency = WholeNumberFilter(
        field_name="workload__concurrency", label="Concurrency", min_value=1, max_value=1_000_000
    )
    team = choice("team__slug", label="Team")
    branch = choice("branch", label="Branch")
    since = DayFilter(field_name="started_at", label="From")
    until = DayFilter(field_name="started_at", label="To", end=True)

    def search(self, queryset: QuerySet[BenchmarkRun], name: str, value: str) -> QuerySet[BenchmarkRun]:
        text = value.strip()
        if not text:
            return queryset
        return queryset.filter(
            Q(git_commit__istartswith=text)
            | Q(branch__icontains=text)
            | Q(workload__variant__model__name__icontains=text)
        )


class SeriesFilterSet(df.FilterSet):
    """The trends page's pickers: exact names; a value that matches nothing finds no series."""

    model = df.CharFilter(field_name="workload__variant__model__name")
    variant = df.CharFilter(field_name="workload__variant__name")
    hardware = df.CharFilter(field_name="accelerator_type__slug")
    metric = df.CharFilter(field_name="metric")
