"""What the list pages' filter sets share (django-filter): choices from what the caller may see,
"Any" first, and a from/to day range that must not run backwards.

A page's filter set (``benchmarks.filters.RunFilterSet``, ``alerts.filters.AlertFilterSet``) is
bound to the query string and to a queryset already scoped by ``access``; its form renders the
filter bar (``core/_list_filters.html``), its ``qs`` is the filtered list. An invalid value is a
400 naming the field, never a silently ignored filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime, time, timedelta
from typing import Any

import django_filters as df
from django import forms
from django.db.models import QuerySet
from django.utils import timezone

ANY = "Any"


class ListFilterForm(forms.Form):
    """The form of a list page's filter set: ``until`` must be on or after ``since``."""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            self.add_error("until", "must be on or after From")
        return data


def day_start(day: date) -> datetime:
    """Midnight at the start of ``day`` in the site's time zone."""
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())


class DayFilter(df.DateFilter):
    """A day in the site's time zone: ``since`` keeps rows from its start, ``until`` (``end=True``)
    rows up to its end, so both bounds include the whole day."""

    def __init__(self, *args: Any, end: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("widget", forms.DateInput(attrs={"type": "date"}))
        super().__init__(*args, **kwargs)
        self.end = end

    def filter(self, qs: QuerySet[Any], value: date | None) -> QuerySet[Any]:
        if value in df.constants.EMPTY_VALUES or value is None:
            return qs
        if self.end:
            return qs.filter(**{f"{self.field_name}__lt": day_start(value + timedelta(days=1))})
        return qs.filter(**{f"{self.field_name}__gte": day_start(value)})


def choice(
    field_name: str = "",
    *,
    label: str | None = None,
    choices: Iterable[tuple[str, str]] = (),
    method: str | None = None,
) -> Any:
    """A select filter with "Any" first; choices given here or, per request, by ``PageFilterSet``.
    ``method`` names a filter set method for a value that is not one field (``Q(a) | Q(b)``)."""
    return df.ChoiceFilter(
        field_name=field_name or None, label=label, choices=list(choices), empty_label=ANY, method=method
    )


class PageFilterSet(df.FilterSet):
    """A filter set whose select choices come from the rows the caller may see (``choices``)."""

    class Meta:
        form = ListFilterForm

    def __init__(
        self,
        data: Mapping[str, Any] | None = None,
        *,
        queryset: QuerySet[Any],
        choices: Mapping[str, list[tuple[str, str]]] | None = None,
    ) -> None:
        super().__init__(data, queryset=queryset)
        for name, options in (choices or {}).items():
            self.filters[name].extra["choices"] = list(options)

    @property
    def is_active(self) -> bool:
        """Is any filter set (bound, valid, and with a value)?"""
        if not self.is_bound or not self.form.is_valid():
            return self.is_bound
        return any(value not in df.constants.EMPTY_VALUES for value in self.form.cleaned_data.values())

    def qs_without(self, *names: str) -> QuerySet[Any]:
        """The queryset with every filter but ``names`` (for counts per value of one filter)."""
        qs = self.queryset.all()
        if not self.is_bound or not self.form.is_valid():
            return qs
        for name, value in self.form.cleaned_data.items():
            if name not in names:
                qs = self.filters[name].filter(qs, value)
        return qs
