"""Forms of the plan page: its GET parameters (every plan is a shareable URL) and saving a scenario.

An absent parameter takes its default (the observed growth trend, the team's SLO, 4 weeks, 20 %
headroom, N+1); a present but malformed one is a 400 naming the field.
"""

from __future__ import annotations

from typing import Any, cast

from django import forms

from accelboard.costs.exports import FORMATS

DEFAULT_WEEKS = 4
DEFAULT_HORIZON_MONTHS = 6
DEFAULT_HEADROOM_PCT = 20.0


class PlanQueryForm(forms.Form):
    model = forms.IntegerField(required=False, min_value=1)
    weeks = forms.IntegerField(required=False, min_value=1, max_value=12, label="Traffic window (weeks)")
    growth = forms.FloatField(
        required=False,
        min_value=-50,
        max_value=100,
        label="Growth (% per month)",
        widget=forms.NumberInput(attrs={"step": "0.5"}),
    )
    horizon = forms.IntegerField(required=False, min_value=0, max_value=36, label="Horizon (months)")
    headroom = forms.FloatField(
        required=False,
        min_value=0,
        max_value=300,
        label="Headroom over peak (%)",
        widget=forms.NumberInput(attrs={"step": "5"}),
    )
    spare = forms.ChoiceField(
        required=False, choices=[("1", "N+1 (one spare replica)"), ("0", "No spare")], label="Redundancy"
    )
    where = forms.ChoiceField(required=False, label="Provider / region")
    pricing = forms.ChoiceField(required=False, label="Pricing")
    e2e_ms = forms.FloatField(
        required=False, min_value=1, max_value=3_600_000, label="p99 end-to-end (ms)",
        widget=forms.NumberInput(attrs={"step": "any"}),
    )  # fmt: skip
    ttft_ms = forms.FloatField(
        required=False, min_value=1, max_value=3_600_000, label="p99 TTFT (ms)",
        widget=forms.NumberInput(attrs={"step": "any"}),
    )  # fmt: skip
    itl_ms = forms.FloatField(
        required=False, min_value=0.01, max_value=60_000, label="p99 ITL (ms)",
        widget=forms.NumberInput(attrs={"step": "any"}),
    )  # fmt: skip
    format = forms.ChoiceField(required=False, choices=[("", "page"), *[(f, f) for f in FORMATS]])
    table = forms.CharField(required=False, max_length=40)

    def __init__(
        self,
        data: Any,
        *,
        where_choices: list[tuple[str, str]],
        pricing_choices: list[tuple[str, str]],
    ) -> None:
        super().__init__(data)
        cast(forms.ChoiceField, self.fields["where"]).choices = where_choices
        cast(forms.ChoiceField, self.fields["pricing"]).choices = pricing_choices

    def first_error(self) -> str:
        """The first error as "field: message", for the 400 page."""
        for name, errors in self.errors.items():
            return f"{name}: {errors[0]}" if name != "__all__" else str(errors[0])
        return ""


class ScenarioSaveForm(forms.Form):
    """Saving the plan on the page: its name, a note, and the plan's query (hidden fields)."""

    name = forms.CharField(max_length=120, strip=True)
    note = forms.CharField(max_length=300, required=False, strip=True)
    query = forms.CharField(max_length=2000, help_text="The plan's URL query string")
