"""Forms of the finance pages: the report's and the drill-down's filters, and the export choice.

They check the shape of each value (a month is ``YYYY-MM``, a team is a slug, a provider one of
the known ones); whether the user may see a team is the view's question (a 404, not a form error,
so that a team's existence is not revealed).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, cast

from django import forms

from accelboard.fleet.choices import Provider

from .exports import FORMATS

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


def month_parse(value: str) -> dt.date:
    """``"2026-11"`` -> ``date(2026, 11, 1)``; ValueError with a readable reason otherwise."""
    match = _MONTH.match(value.strip())
    if not match:
        raise ValueError("expected YYYY-MM, e.g. 2026-11")
    year, month = int(match.group(1)), int(match.group(2))
    if not 1 <= month <= 12:
        raise ValueError("month must be 01 to 12")
    if not 2000 <= year <= 2100:
        raise ValueError("year must be between 2000 and 2100")
    return dt.date(year, month, 1)


class MonthField(forms.Field):
    """``YYYY-MM`` (what ``<input type="month">`` sends) as the month's first day."""

    widget = forms.TextInput(attrs={"type": "month"})

    def to_python(self, value: Any) -> dt.date | None:
        text = str(value or "").strip()
        if not text:
            return None
        try:
            return month_parse(text[:20])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def prepare_value(self, value: Any) -> Any:
        return value.strftime("%Y-%m") if isinstance(value, dt.date) else value


class CostFilterForm(forms.Form):
    """The report's filters. Choices of team and accelerator type come from the view (what the
    user may see); an unknown team slug is left to the view to answer with a 404."""

    month = MonthField(required=False)
    team = forms.SlugField(required=False, max_length=50)
    provider = forms.ChoiceField(required=False, choices=[("", "Any")] + list(Provider.choices))
    accelerator_type = forms.ChoiceField(required=False, label="Accelerator type")
    by = forms.ChoiceField(
        required=False,
        label="Chart by",
        choices=[("team", "Team"), ("provider", "Provider")],
    )
    format = forms.ChoiceField(required=False, choices=[("", "page")] + [(f, f) for f in FORMATS])
    table = forms.SlugField(required=False, max_length=40)

    def __init__(
        self,
        *args: Any,
        teams: list[tuple[str, str]],
        accelerator_types: list[tuple[str, str]],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        # Rendered as a select of the visible teams; validated as a slug so that a hidden team's
        # slug reaches the view (404) instead of reading as "not one of the choices" (400).
        self.fields["team"].widget = forms.Select(choices=[("", "All visible teams")] + teams)
        cast(forms.ChoiceField, self.fields["accelerator_type"]).choices = [("", "Any")] + accelerator_types


class DrillForm(CostFilterForm):
    """The drill-down adds the narrower keys a total can be cut by."""

    project = forms.CharField(required=False, max_length=100)
    host = forms.CharField(required=False, max_length=255)
    day = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    model = forms.CharField(required=False, max_length=120, widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The drill-down has no chart to group.
        del self.fields["by"]
